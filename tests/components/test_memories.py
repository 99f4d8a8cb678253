"""Tests for rlrun.components.memories: ReplayMemory built alone from a record space, what it stores and samples
(the draws of its own seeded generator, recomputed here), the ring buffer's overwrites, and its state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.components.base import ComponentBuildError
from rlrun.components.memories import ReplayMemory
from rlrun.components.prioritized_replay import PrioritizedReplayMemory
from rlrun.components.testing import ComponentTest

RECORDS = sp.Dict({"obs": sp.Box(-100.0, 100.0, (2,), np.float32), "action": sp.Discrete(3),
                   "reward": sp.Box(-np.inf, np.inf, (), np.float32)})


def records(first: int, n: int) -> dict[str, torch.Tensor]:
    """Records first .. first + n - 1; record i has obs [i, -i], action i % 3, reward i / 2."""
    i = torch.arange(first, first + n)
    return {"obs": torch.stack([i, -i], 1).float(), "action": i % 3, "reward": i.float() / 2}


def ids(sample: dict[str, torch.Tensor]) -> list[int]:
    """Which record each sampled row is, checking that its fields belong together."""
    out = sample["obs"][:, 0].long()
    assert torch.equal(sample["obs"][:, 1], -sample["obs"][:, 0])
    assert torch.equal(sample["action"], out % 3) and torch.equal(sample["reward"], out.float() / 2)
    return out.tolist()


def test_storage_is_preallocated_from_the_record_space():
    memory = ReplayMemory(8)
    ComponentTest(memory, {"records": RECORDS})
    assert memory.store_obs.shape == (8, 2) and memory.store_obs.dtype == torch.float32
    assert memory.store_action.shape == (8,) and memory.store_action.dtype == torch.int64
    assert memory.store_reward.shape == (8,)
    assert memory.size() == 0 and memory.output_spaces["sample"] is RECORDS


def test_samples_uniformly_with_the_memorys_own_generator():
    """5 records in a memory of 8, seed 3: the rows sampled are those of torch.randint(0, 5) drawn from a generator
    seeded with 3, whatever the global RNG does."""
    memory = ReplayMemory(8, seed=3)
    test = ComponentTest(memory, {"records": RECORDS}, batch_shape=(6,))
    test.call("insert", records(0, 5))
    assert test.call("size") == 5
    g = torch.Generator().manual_seed(3)
    for _ in range(3):
        expected = torch.randint(0, 5, (6,), generator=g).tolist()
        torch.manual_seed(123)  # the global RNG plays no part
        assert ids(test.call("sample", 6)) == expected


def test_the_ring_keeps_the_newest_records():
    """Capacity 4; records 0-2, then 3-5: records 4 and 5 overwrite 0 and 1 (slots 0, 1), the write index is 2 and
    the size stays 4. A single insert of 6 records keeps only the last 4 (2-5), starting at slot 2."""
    memory = ReplayMemory(4, seed=0)
    test = ComponentTest(memory, {"records": RECORDS}, batch_shape=(4,))
    test.call("insert", records(0, 3))
    test.call("insert", records(3, 3))
    assert memory.size() == 4 and int(memory.index) == 2
    assert memory.store_obs[:, 0].tolist() == [4.0, 5.0, 2.0, 3.0]
    assert set(ids(memory.sample(200))) == {2, 3, 4, 5}

    one = ReplayMemory(4, seed=0)
    ComponentTest(one, {"records": RECORDS}).call("insert", records(0, 6))
    assert one.size() == 4 and int(one.index) == 2
    assert one.store_obs[:, 0].tolist() == [4.0, 5.0, 2.0, 3.0]


def test_state_round_trip_continues_identically():
    """Storage, counters and the generator's state travel in the state_dict: a copy draws the same next samples."""
    a, b = ReplayMemory(16, seed=1), ReplayMemory(16, seed=2)
    for m in (a, b):
        m.build(records=RECORDS)
    a.insert(records(0, 10))
    a.sample(4)
    b.load_state_dict(a.state_dict())
    assert b.size() == 10
    for _ in range(3):
        assert ids(a.sample(5)) == ids(b.sample(5))


def test_errors():
    with pytest.raises(ValueError, match="capacity must be positive"):
        ReplayMemory(0)
    with pytest.raises(RuntimeError, match="cannot sample from an empty memory"):
        ReplayMemory(4).build(records=RECORDS).sample(1)
    with pytest.raises(ComponentBuildError, match="memory.records expects Dict"):
        ReplayMemory(4).build(records=sp.Box(-1.0, 1.0, (2,), np.float32))


# ------------------------------------------------------------------ checkpoints hold what is stored


def _framed_records() -> sp.Dict:
    img = sp.Box(0, 255, (4, 8, 8), np.uint8)  # 64-byte frames: whole 8-byte words, shared by the frame store
    scalar = sp.Box(-np.inf, np.inf, (), np.float32)
    return sp.Dict({"obs": img, "action": sp.Discrete(6), "reward": scalar, "next_obs": img, "discount": scalar})


def _records(space: sp.Dict, n: int, seed: int) -> dict:
    """``n`` records of consecutive frame stacks (each next_obs shifts in one new frame), as an Atari stream."""
    g = np.random.default_rng(seed)
    frames = g.integers(0, 256, (n + 4, 8, 8), dtype=np.uint8)
    stacks = np.stack([frames[i:i + 4] for i in range(n + 1)])
    return {"obs": stacks[:-1], "next_obs": stacks[1:], "action": g.integers(0, 6, n),
            "reward": g.normal(size=n).astype(np.float32), "discount": np.full(n, 0.99, np.float32)}


def _memory(kind: str, capacity: int) -> ReplayMemory | PrioritizedReplayMemory:
    cls = ReplayMemory if kind == "uniform" else PrioritizedReplayMemory
    return cls(capacity, seed=3, frames_per_record=1.5).build(records=_framed_records())


@pytest.mark.parametrize("kind", ["uniform", "prioritized"])
def test_a_checkpoint_holds_the_stored_records_not_the_capacity(kind: str):
    """A memory of 1,000 records holding 10: its state has 10 rows per record buffer and only the frames written
    (Atari's 1M-record preset checkpointed ~7.9 GB at env step 1 before); loaded into a fresh memory, every buffer
    equals the original's (the unwritten rows are zeros in both) and both sample the same records. Once the ring
    is full the state is whole."""
    memory = _memory(kind, 1000)
    memory.insert(_records(_framed_records(), 10, seed=0))
    state = memory.state_dict()
    record_keys = [k for k in state if k.startswith("store_")]
    assert record_keys and all(state[k].shape[0] == 10 for k in record_keys), {k: state[k].shape for k in record_keys}
    assert state["frames.frames"].shape[0] == int(memory.frames.written) < memory.frames.frame_capacity
    fresh = _memory(kind, 1000)
    fresh.load_state_dict(state)
    for (name, a), (_, b) in zip(memory.named_buffers(), fresh.named_buffers(), strict=True):
        assert torch.equal(a, b), name
    a = memory.sample(16)
    b = fresh.sample(16)
    flat_a = a[0] if kind == "prioritized" else a
    flat_b = b[0] if kind == "prioritized" else b
    for key in flat_a:
        assert torch.equal(torch.as_tensor(flat_a[key]), torch.as_tensor(flat_b[key])), key

    full = _memory(kind, 20)
    for seed in range(4):  # 4 x 19 frames: past the frame ring's 38 slots
        full.insert(_records(_framed_records(), 15, seed=seed))
    assert int(full.frames.written) > full.frames.frame_capacity
    state = full.state_dict()
    assert all(state[k].shape[0] == 20 for k in state if k.startswith("store_"))
    assert state["frames.frames"].shape[0] == full.frames.frame_capacity
