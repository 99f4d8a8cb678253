"""Tests for NStepAggregator: hand-worked streams (arithmetic in the docstrings) and random streams checked against
:func:`rlrun.ops.nstep_returns`, which computes the same targets for a whole [T, B] rollout at once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.components.memories import ReplayMemory
from rlrun.components.nstep import NStepAggregator
from rlrun.components.testing import ComponentTest
from rlrun.ops import nstep_returns

# obs = [t, b]: an observation says which step and which env copy it is.
OBS = sp.Box(-1000, 1000, (2,), np.float32)
ACTIONS = sp.Discrete(4)


def aggregator(n, gamma, batch=2):
    agg = NStepAggregator(n, gamma)
    return agg, ComponentTest(agg, {"obs": OBS, "actions": ACTIONS}, batch_shape=(batch,))


def step_inputs(t, B, rewards, terminated=(), truncated=()):
    """Step t of B copies: obs [t, b], action (t + b) % 4, next_obs [t + 0.5, b] (the real next observation)."""
    b = torch.arange(B, dtype=torch.float32)
    return dict(obs=torch.stack([torch.full((B,), float(t)), b], 1),
                actions=(t + torch.arange(B)) % 4,
                rewards=torch.tensor(rewards, dtype=torch.float32),
                next_obs=torch.stack([torch.full((B,), t + 0.5), b], 1),
                terminated=torch.tensor([i in terminated for i in range(B)]),
                truncated=torch.tensor([i in truncated for i in range(B)]))


def rows(out):
    """(start step, copy, return, next-obs step, discount) per emitted transition."""
    return [(int(o[0]), int(o[1]), float(r), float(no[0]), float(d))
            for o, r, no, d in zip(out["obs"], out["reward"], out["next_obs"], out["discount"], strict=True)]


def test_component_test_builds_from_spaces_and_output_fits_its_space():
    agg, test = aggregator(n=1, gamma=0.9, batch=3)
    out = test.call("add", next_obs=test.sample("obs"), rewards=torch.ones(3),
                    terminated=torch.tensor([False, True, False]), truncated=torch.tensor([False, False, True]))
    sp.check(agg.output_spaces["add"], out, batch_ranks=1, where="n_step.add()")
    # n = 1: one-step transitions; discount gamma, 0 when terminated, gamma when truncated.
    torch.testing.assert_close(out["reward"], torch.ones(3))
    torch.testing.assert_close(out["discount"], torch.tensor([0.9, 0.0, 0.9]))


def test_hand_worked_two_copies_ending_at_different_steps():
    """n = 3, gamma = 0.5, two copies. Copy 0 rewards 1, 2, 4, 8 and is truncated at step 3; copy 1 rewards
    10, 20 and terminates at step 1, then starts a new episode with rewards 40, 80.

    step 0: nothing complete (one step pending per copy).
    step 1: copy 1 terminates -> flush both its windows, discount 0:
            start 0: R = 10 + 0.5 * 20 = 20, next_obs step 1;   start 1: R = 20, next_obs step 1.
    step 2: copy 0 has 3 steps -> start 0: R = 1 + 0.5 * 2 + 0.25 * 4 = 3, discount 0.5^3 = 0.125, next_obs step 2.
    step 3: copy 0 truncated -> flush starts 1, 2, 3, bootstrapping from the real final obs (step 3):
            start 1: R = 2 + 0.5 * 4 + 0.25 * 8 = 6, m = 3, discount 0.125;
            start 2: R = 4 + 0.5 * 8 = 8,             m = 2, discount 0.25;
            start 3: R = 8,                           m = 1, discount 0.5.
            copy 1 (steps 2, 3 pending) completes nothing.
    """
    agg, test = aggregator(n=3, gamma=0.5)
    emitted = [rows(test.call("add", **step_inputs(0, 2, [1.0, 10.0])))]
    emitted.append(rows(test.call("add", **step_inputs(1, 2, [2.0, 20.0], terminated={1}))))
    emitted.append(rows(test.call("add", **step_inputs(2, 2, [4.0, 40.0]))))
    emitted.append(rows(test.call("add", **step_inputs(3, 2, [8.0, 80.0], truncated={0}))))
    assert emitted == [
        [],
        [(0, 1, 20.0, 1.5, 0.0), (1, 1, 20.0, 1.5, 0.0)],
        [(0, 0, 3.0, 2.5, 0.125)],
        [(1, 0, 6.0, 3.5, 0.125), (2, 0, 8.0, 3.5, 0.25), (3, 0, 8.0, 3.5, 0.5)],
    ]
    assert agg.pending().tolist() == [0, 2]
    # step 4: copy 1 has 3 steps of its new episode -> start 2: R = 40 + 0.5 * 80 + 0.25 * 160 = 120, discount 1/8.
    # copy 0 starts a new episode at step 4: nothing.
    out = test.call("add", **step_inputs(4, 2, [0.0, 160.0]))
    assert rows(out) == [(2, 1, 120.0, 4.5, 0.125)]
    assert out["action"].tolist() == [(2 + 1) % 4]
    assert agg.pending().tolist() == [1, 2]


def test_terminated_and_truncated_together_count_as_terminated():
    """n = 2, gamma = 0.9: rewards 1, 2 then a step both terminated and truncated: R_0 = 1 + 0.9 * 2 = 2.8 and
    R_1 = 2, both with discount 0 (no bootstrap)."""
    agg, test = aggregator(n=2, gamma=0.9, batch=1)
    assert rows(test.call("add", **step_inputs(0, 1, [1.0]))) == []
    out = test.call("add", **step_inputs(1, 1, [2.0], terminated={0}, truncated={0}))
    got = rows(out)
    assert [(t, b, nxt, d) for t, b, _, nxt, d in got] == [(0, 0, 1.5, 0.0), (1, 0, 1.5, 0.0)]
    assert [r for _, _, r, _, _ in got] == pytest.approx([2.8, 2.0])


@pytest.mark.parametrize("n", [1, 3, 5])
@pytest.mark.parametrize("gamma", [0.9, 1.0])
def test_random_streams_match_nstep_returns(n, gamma):
    """Feed a random [T, B] rollout step by step; every n-step window that the rollout completes is emitted exactly
    once, with R = partial sum, discount = bootstrap discount and next_obs = next_obs[next_index] of
    ops.nstep_returns; the full targets R + discount * V(next_obs) agree too."""
    T, B = 30, 3
    g = torch.Generator().manual_seed(n * 10 + int(gamma * 10))
    rewards = torch.randn(T, B, generator=g)
    terminated = torch.rand(T, B, generator=g) < 0.1
    truncated = torch.rand(T, B, generator=g) < 0.1
    values = torch.randn(T, B, generator=g)  # V of the real next observation of step t
    ref_ret, ref_disc, ref_next = nstep_returns(rewards, terminated, truncated, values, gamma, n)
    ref_partial, _, _ = nstep_returns(rewards, terminated, truncated, torch.zeros(T, B), gamma, n)

    agg, test = aggregator(n, gamma, batch=B)
    got = {}
    for t in range(T):
        inputs = step_inputs(t, B, rewards[t].tolist(), set(terminated[t].nonzero().flatten().tolist()),
                             set(truncated[t].nonzero().flatten().tolist()))
        out = test.call("add", **inputs)
        for (start, b, ret, nxt, disc) in rows(out):
            assert (start, b) not in got, "a window was emitted twice"
            got[(start, b)] = (ret, int(nxt - 0.5), disc)

    ended = terminated | truncated
    expected_keys = set()
    for b in range(B):
        for t in range(T):
            window = range(t, min(t + n, T))
            if t + n <= T or any(bool(ended[k, b]) for k in window):
                expected_keys.add((t, b))
    assert set(got) == expected_keys
    assert int(agg.pending().sum()) == T * B - len(expected_keys)
    for (t, b), (ret, nxt, disc) in got.items():
        assert nxt == int(ref_next[t, b])
        assert ret == pytest.approx(float(ref_partial[t, b]), abs=1e-5)
        assert disc == pytest.approx(float(ref_disc[t, b]), abs=1e-6)
        assert ret + disc * float(values[nxt, b]) == pytest.approx(float(ref_ret[t, b]), abs=1e-5)


def test_nested_observations_and_numpy_inputs():
    """A Dict observation space and numpy inputs (what the rollout worker hands over); n = 2, gamma = 0.5.
    Rewards 1 then 2: R_0 = 1 + 0.5 * 2 = 2, discount 0.25, next_obs is step 1's."""
    obs_space = sp.Dict({"pos": sp.Box(-5, 5, (2,), np.float32), "frame": sp.Box(0, 255, (2, 2), np.uint8)})
    agg = NStepAggregator(2, 0.5)
    test = ComponentTest(agg, {"obs": obs_space, "actions": ACTIONS}, batch_shape=(1,))
    o0, o1, o2 = (sp.sample(obs_space, (1,), seed=i) for i in range(3))
    step = dict(actions=np.array([3]), terminated=np.array([False]), truncated=np.array([False]))
    assert test.call("add", obs=o0, next_obs=o1, rewards=np.array([1.0], np.float32), **step)["reward"].shape == (0,)
    out = test.call("add", obs=o1, next_obs=o2, rewards=np.array([2.0], np.float32), **step)
    sp.check(agg.output_spaces["add"], out, batch_ranks=1)
    assert out["reward"].tolist() == [2.0] and out["discount"].tolist() == [0.25]
    np.testing.assert_array_equal(out["obs"]["frame"].numpy(), o0["frame"])
    np.testing.assert_array_equal(out["next_obs"]["pos"].numpy(), o2["pos"])


def test_output_goes_straight_into_a_replay_memory_built_from_its_space():
    agg, test = aggregator(n=2, gamma=0.9, batch=2)
    memory = ReplayMemory(8).build(records=agg.output("add").space)
    for t in range(3):
        memory.insert(test.call("add", **step_inputs(t, 2, [1.0, 1.0], terminated={1} if t == 1 else set())))
    # step 1: copy 1 flushes 2; step 1 and 2: copy 0 completes one each (starts 0, 1)
    assert memory.size() == 4


def test_reset_drops_pending_steps_and_errors():
    agg, test = aggregator(n=3, gamma=0.9)
    test.call("add", **step_inputs(0, 2, [1.0, 1.0]))
    assert agg.pending().tolist() == [1, 1]
    with pytest.raises(ValueError, match="got 3 env copies but the pending windows hold 2"):
        test.call("add", **step_inputs(1, 3, [1.0, 1.0, 1.0]))
    test.call("reset")
    assert agg.pending().tolist() == []
    assert rows(test.call("add", **step_inputs(1, 3, [1.0, 1.0, 1.0]))) == []
    bad = step_inputs(2, 3, [1.0, 1.0, 1.0])
    bad["terminated"] = torch.tensor([False, True])
    with pytest.raises(ValueError, match=r"terminated must have shape \[B\] = \[3\]"):
        agg.add(**bad)
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        NStepAggregator(0, 0.9)
