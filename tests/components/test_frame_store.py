"""FrameStore (rlrun/components/frame_store.py) alone from its space, and inside both replay memories: stacks come
back exactly as inserted (also under forced hash collisions), each frame of a stacked stream is stored about once,
a memory with the store samples the same records as one without, a record that lost a frame is never sampled, and
the state round-trips. Streams are synthetic Atari-like: random 8x8 frames (16x16 for sizes), 4-frame stacks
that slide by one frame per step and restart at episode ends with the first frame repeated (gymnasium's
FrameStackObservation padding)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.components.frame_store import FrameStore, frame_capacity_for, is_frame_stack
from rlrun.components.memories import ReplayMemory
from rlrun.components.prioritized_replay import PrioritizedReplayMemory

S, H = 4, 8


def stream(steps: int, copies: int, seed: int = 0, episode_len: int = 37, h: int = H) -> list[dict[str, np.ndarray]]:
    """``steps`` time steps of ``copies`` env copies: per step a batch of transitions (obs, next_obs, action,
    reward, discount) ``[copies, ...]``."""
    rng = np.random.default_rng(seed)
    stacks = [np.repeat(rng.integers(0, 256, (1, h, h), dtype=np.uint8), S, axis=0) for _ in range(copies)]
    t_in_episode = [int(rng.integers(0, episode_len)) for _ in range(copies)]
    out = []
    for _ in range(steps):
        obs, nxt = [], []
        for c in range(copies):
            frame = rng.integers(0, 256, (1, h, h), dtype=np.uint8)
            following = np.concatenate([stacks[c][1:], frame])
            obs.append(stacks[c])
            nxt.append(following)
            t_in_episode[c] += 1
            if t_in_episode[c] >= episode_len:  # the episode ends; the next one starts from a new repeated frame
                t_in_episode[c] = 0
                following = np.repeat(rng.integers(0, 256, (1, h, h), dtype=np.uint8), S, axis=0)
            stacks[c] = following
        out.append({"obs": np.stack(obs), "next_obs": np.stack(nxt),
                    "action": rng.integers(0, 6, copies), "reward": rng.normal(size=copies).astype(np.float32),
                    "discount": np.full(copies, 0.99, np.float32)})
    return out


def batches(steps: list[dict], size: int) -> list[dict]:
    """Consecutive steps joined into insert batches of ``size`` steps."""
    return [{k: np.concatenate([s[k] for s in steps[i:i + size]]) for k in steps[0]}
            for i in range(0, len(steps), size)]


def records_space(h: int = H) -> sp.Dict:
    img = sp.Box(0, 255, (S, h, h), np.uint8)
    scalar = sp.Box(-np.inf, np.inf, (), np.float32)
    return sp.Dict({"obs": img, "action": sp.Discrete(6), "reward": scalar, "next_obs": img, "discount": scalar})


def test_the_two_hashes_are_independent_linear_hashes_of_the_words() -> None:
    store = FrameStore(10).build(stacks=sp.Box(0, 255, (S, H, H), np.uint8))
    frames = np.random.default_rng(0).integers(0, 256, (5, H, H), dtype=np.uint8)
    words = frames.reshape(5, -1).view(np.uint64)
    expected = [[sum(int(w) * int(c) for w, c in zip(row, store._coef[:, k], strict=True)) % 2 ** 64 for k in (0, 1)]
                for row in words]
    assert store._hashes(frames).tolist() == expected
    assert (store._coef % 2 == 1).all()


def test_which_spaces_are_frame_stacks() -> None:
    assert is_frame_stack(sp.Box(0, 255, (4, 84, 84), np.uint8))
    assert not is_frame_stack(sp.Box(0, 255, (1, 84, 84), np.uint8))  # nothing to share
    assert not is_frame_stack(sp.Box(0, 1, (4, 84, 84), np.float32))
    assert not is_frame_stack(sp.Box(0, 255, (4, 5, 5), np.uint8))  # 25 bytes: not whole 8-byte words
    with pytest.raises(ValueError, match="expects a uint8 Box"):
        FrameStore(10).build(stacks=sp.Box(-1, 1, (4,), np.float32))


@pytest.mark.parametrize("insert_steps", [1, 7, 32])
def test_stacks_come_back_exactly_and_each_frame_is_stored_about_once(insert_steps: int) -> None:
    steps = stream(600, copies=3)
    store = FrameStore(10_000, record_capacity=2000, keys=("obs", "next_obs")).build(
        stacks=sp.Box(0, 255, (S, H, H), np.uint8))
    slot = 0
    for b in batches(steps, insert_steps):
        n = len(b["obs"])
        slots = torch.arange(slot, slot + n)
        store.write(slots, {"obs": b["obs"], "next_obs": b["next_obs"]})
        back = store.read(slots)
        assert np.array_equal(back["obs"].numpy(), b["obs"]) and np.array_equal(back["next_obs"].numpy(), b["next_obs"])
        slot += n
    transitions = 600 * 3
    # one new frame per transition, plus one per episode start (a repeated frame), plus the first stacks
    episodes = transitions / 37
    assert int(store.written) <= transitions + episodes + 3 * S + 1
    assert store.valid(torch.arange(slot)).all()


def test_a_collision_of_the_first_hash_never_confuses_two_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every frame gets the same first hash; the second still tells them apart (within and across inserts)."""
    store = FrameStore(5000, 500, ("obs", "next_obs")).build(stacks=sp.Box(0, 255, (S, H, H), np.uint8))
    real = store._hashes

    def first_hash_always_zero(frames: np.ndarray) -> np.ndarray:
        both = real(frames)
        both[:, 0] = 0
        return both

    monkeypatch.setattr(store, "_hashes", first_hash_always_zero)
    slot = 0
    for b in batches(stream(40, copies=2, seed=3), 5):
        slots = torch.arange(slot, slot + len(b["obs"]))
        store.write(slots, {"obs": b["obs"], "next_obs": b["next_obs"]})
        assert np.array_equal(store.read(slots)["next_obs"].numpy(), b["next_obs"])
        slot += len(b["obs"])


def fill(memory, steps: list[dict], size: int, td: bool = False) -> None:  # noqa: ANN001
    rng = np.random.default_rng(7)
    for b in batches(steps, size):
        if td:
            memory.insert(b, td_errors=rng.random(len(b["obs"])))
        else:
            memory.insert(b)


def test_uniform_memory_samples_what_a_plain_memory_samples() -> None:
    steps = stream(300, copies=2, seed=1)
    plain = ReplayMemory(400, seed=5).build(records=records_space())
    framed = ReplayMemory(400, seed=5, frames_per_record=1.2).build(records=records_space())
    assert framed.frames is not None and not hasattr(framed, "store_obs")
    fill(plain, steps, 8)
    fill(framed, steps, 8)  # 600 transitions through 400 slots: the ring wrapped
    for _ in range(20):
        a, b = plain.sample(32), framed.sample(32)
        for key in a:
            assert torch.equal(a[key], b[key]), key


def test_prioritized_memory_samples_what_a_plain_one_samples() -> None:
    steps = stream(300, copies=2, seed=2)
    plain = PrioritizedReplayMemory(400, seed=5).build(records=records_space())
    framed = PrioritizedReplayMemory(400, seed=5, frames_per_record=1.2).build(records=records_space())
    fill(plain, steps, 8, td=True)
    fill(framed, steps, 8, td=True)
    for i in range(10):
        (ra, ia, wa), (rb, ib, wb) = plain.sample(16), framed.sample(16)
        assert torch.equal(ia, ib) and torch.equal(wa, wb)
        for key in ra:
            assert torch.equal(ra[key], rb[key]), key
        td = torch.rand(16, generator=torch.Generator().manual_seed(i))
        plain.update_priorities(ia, td)
        framed.update_priorities(ib, td)


def original_records(steps: list[dict]) -> dict[int, np.ndarray]:
    """next_obs of every transition by insertion order."""
    flat = np.concatenate([s["next_obs"] for s in steps])
    return dict(enumerate(flat))


def test_records_that_lost_a_frame_are_never_sampled() -> None:
    """frames_per_record=0.6 while the stream needs ~1.03: the ring holds fewer frames than the records use, so
    the oldest records lose frames. Every sampled record is whole and equal to what was inserted."""
    steps = stream(200, copies=2, seed=4)
    truth = original_records(steps)
    uniform = ReplayMemory(300, seed=1, frames_per_record=0.6).build(records=records_space())
    per = PrioritizedReplayMemory(300, seed=1, frames_per_record=0.6).build(records=records_space())
    fill(uniform, steps, 4)
    fill(per, steps, 4)
    total = len(truth)
    valid = uniform.frames.valid(torch.arange(300))
    assert 0 < int(valid.sum()) < 300  # some records lost frames, not all
    probs = per.probabilities().numpy()
    assert np.array_equal(probs > 0, per.frames.valid(torch.arange(300)).numpy())
    for memory in (uniform, per):
        for _ in range(10):
            out = memory.sample(64)
            records, idx = (out, None) if isinstance(out, dict) else (out[0], out[1])
            if idx is not None:
                assert memory.frames.valid(idx).all()
            # slot s holds the newest transition written there: insertion order k with k % 300 == s
            for row in range(64):
                stack = records["next_obs"][row].numpy()
                assert any(np.array_equal(stack, truth[k]) for k in range(total - 300, total))


def test_state_round_trip_continues_identically() -> None:
    steps = stream(120, copies=2, seed=6)
    first, rest = steps[:60], steps[60:]
    a = ReplayMemory(200, seed=2, frames_per_record=1.2).build(records=records_space())
    fill(a, first, 6)
    b = ReplayMemory(200, seed=2, frames_per_record=1.2).build(records=records_space())
    b.load_state_dict(a.state_dict())
    fill(a, rest, 6)
    fill(b, rest, 6)
    sa, sb = a.state_dict(), b.state_dict()
    assert int(a.frames.written) == int(b.frames.written)
    for key in sa:
        if isinstance(sa[key], torch.Tensor):
            assert torch.equal(sa[key], sb[key]), key


def test_atari_sized_records_fit_in_eight_kilobytes() -> None:
    space = records_space(84)
    plain = ReplayMemory(2000).build(records=space)
    framed = ReplayMemory(2000, frames_per_record=1.1).build(records=space)
    assert plain.bytes_per_record() > 56_000
    assert framed.bytes_per_record() < 8_000
    assert frame_capacity_for(2000, 1.1, 4) == 2208


def test_a_screen_seen_long_ago_does_not_cut_a_new_records_life_short() -> None:
    """Every episode starts from the same screen (Pong after a point): a record of the 5th episode must not share
    the copy of that screen written in the 1st, which the ring overwrites long before the record leaves the
    memory. Every record held stays whole."""
    rng = np.random.default_rng(8)
    start = rng.integers(0, 256, (1, H, H), dtype=np.uint8)
    memory = ReplayMemory(100, seed=0, frames_per_record=1.2).build(records=records_space())  # ring: 128 frames
    stack = np.repeat(start, S, axis=0)
    for t in range(600):
        frame = rng.integers(0, 256, (1, H, H), dtype=np.uint8)
        nxt = np.concatenate([stack[1:], frame])
        memory.insert({"obs": stack[None], "next_obs": nxt[None], "action": np.zeros(1, np.int64),
                       "reward": np.zeros(1, np.float32), "discount": np.ones(1, np.float32)})
        stack = np.repeat(start, S, axis=0) if t % 90 == 89 else nxt  # the same first screen every episode
        held = min(t + 1, 100)
        assert bool(memory.frames.valid(torch.arange(held)).all()), t
