"""Tests for RolloutBuffer: built alone from a record space, time-major shapes and order, overfill refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.components.rollout_buffer import RolloutBuffer
from rlrun.components.testing import ComponentTest

SCALAR = sp.Box(-np.inf, np.inf, (), np.float32)
RECORDS = sp.Dict({
    "obs": sp.Dict({"pos": sp.Box(-1, 1, (3,), np.float32), "frame": sp.Box(0, 255, (2, 2), np.uint8)}),
    "action": sp.Discrete(4),
    "reward": SCALAR,
    "terminated": sp.Box(0, 1, (), np.int8),
})
T, B = 3, 2


def buffer():
    buf = RolloutBuffer(T, B)
    return buf, ComponentTest(buf, {"records": RECORDS}, batch_shape=(B,))


@pytest.mark.parametrize("copy", [True, False])
def test_insert_get_shapes_and_time_order(copy):
    buf, test = buffer()
    steps = []
    for t in range(T):
        assert not test.call("full") and test.call("size") == t
        records = test.sample("records")
        records["reward"] = torch.tensor([10.0 * t, 10.0 * t + 1])  # step t, copy b -> 10 t + b
        steps.append(records)
        test.call("insert", records=records)
    assert test.call("full")
    out = test.call("get", copy=copy, output_batch_ranks=2)
    sp.check(buf.output_spaces["get"], out, batch_ranks=2, where="rollout_buffer.get()")
    assert out["obs"]["frame"].shape == (T, B, 2, 2) and out["action"].shape == (T, B)
    assert out["reward"].tolist() == [[0.0, 1.0], [10.0, 11.0], [20.0, 21.0]]
    for t in range(T):
        torch.testing.assert_close(out["obs"]["pos"][t], steps[t]["obs"]["pos"])
        torch.testing.assert_close(out["obs"]["frame"][t], steps[t]["obs"]["frame"])
        torch.testing.assert_close(out["action"][t], steps[t]["action"])
    # After reset the next rollout overwrites the storage; a copy is unaffected, a view is not.
    test.call("reset")
    assert test.call("size") == 0 and not test.call("full")
    test.call("insert", records={**steps[0], "reward": torch.tensor([-1.0, -1.0])})
    assert out["reward"][0].tolist() == ([0.0, 1.0] if copy else [-1.0, -1.0])


def test_refuses_to_overfill_and_to_get_a_partial_rollout():
    buf, test = buffer()
    test.call("insert")
    with pytest.raises(RuntimeError, match=r"rollout_buffer holds 1 of 3 steps"):
        test.call("get")
    test.call("insert")
    test.call("insert")
    with pytest.raises(RuntimeError, match=r"rollout_buffer is full \(3 steps of 2 envs\): call get\(\) and reset\(\)"):
        test.call("insert")
    assert test.call("size") == 3


def test_wrong_batch_is_a_clear_error():
    buf, test = buffer()
    with pytest.raises(ValueError, match=r"records\[action\] has shape \(3,\), expected \(2,\) \(one time step of"):
        test.call("insert", records=test.sample("records", batch_shape=(3,)))
    with pytest.raises(ValueError, match=r"records\[action\] has shape \(2, 2\), expected \(2,\)"):
        test.call("insert", records=test.sample("records", batch_shape=(2, 2)))  # [T, B] given to insert
    # one bad leaf (the last one checked) and nothing is written
    records = test.sample("records")
    records["terminated"] = torch.zeros(5, dtype=torch.int8)
    with pytest.raises(ValueError, match=r"records\[terminated\]"):
        test.call("insert", records=records)
    assert test.call("size") == 0
    assert not buf.store_obs__pos.any() and not buf.store_action.any()


def test_checkpoint_round_trip():
    buf, test = buffer()
    test.call("insert")
    test.call("insert")
    other = RolloutBuffer(T, B).build(records=RECORDS)
    other.load_state_dict(buf.state_dict())
    assert other.size() == 2
    torch.testing.assert_close(other.store_reward, buf.store_reward)
