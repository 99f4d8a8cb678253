"""Replay shards (rlrun/execution/replay_shards.py) alone, in-process and as Ray actors on a local cluster of 2 CPUs
(started once for the module, shut down at its end).

- adds go round-robin, each payload's given priorities become ``|p| + eps`` (so P(i) = p_i^alpha / sum p^alpha);
- batches are drawn from the shards in turn, ``update_priorities`` reaches the shard a batch came from;
- the local and the Ray set draw the same batches from the same adds (each shard's generator is seeded alike);
- ``state_dict``/``load_state_dict`` round trips; a Ray shard whose process is killed is replaced empty, counted,
  and the set goes on; sample requests and unfinished adds stay within their bounds.
"""

from __future__ import annotations

import copy
import functools
import os
import signal
import sys

import numpy as np
import pytest
import torch
from conftest import assert_same
from omegaconf import OmegaConf

from rlrun import spaces as sp
from rlrun.components.prioritized_replay import PrioritizedReplayMemory
from rlrun.config import LocalExecutorConfig, RayExecutorConfig
from rlrun.envs.gym_env import GymEnvFactory
from rlrun.execution.local import LocalExecutor
from rlrun.execution.replay_shards import LocalReplayShardSet, ReplayShard

RECORDS = sp.Dict({"x": sp.Box(-np.inf, np.inf, (2,), np.float32), "reward": sp.Box(-np.inf, np.inf, (), np.float32)})
ALPHA, EPS = 0.5, 1e-6


def make_memory(capacity: int, shard_index: int) -> PrioritizedReplayMemory:
    return PrioritizedReplayMemory(capacity, alpha=ALPHA, beta_start=0.4, beta_end=0.4, eps=EPS,
                                   seed=100 + shard_index).build(records=RECORDS)


FACTORY = functools.partial(make_memory, 16)


def payload(first: float, k: int, priorities: list[float] | None = None) -> dict:
    """k records whose reward is first, first + 1, ...: a record's reward names it."""
    reward = np.arange(first, first + k, dtype=np.float32)
    return {"records": {"x": np.stack([reward, -reward], 1), "reward": reward},
            "priorities": None if priorities is None else np.asarray(priorities, np.float32)}


def cartpole() -> GymEnvFactory:
    return GymEnvFactory(OmegaConf.create({"name": "gym", "id": "CartPole-v1", "max_episode_steps": None,
                                           "frame_skip": 1, "kwargs": {}}))


def local_set(num_shards: int = 2) -> LocalReplayShardSet:
    return LocalExecutor(OmegaConf.structured(LocalExecutorConfig()), cartpole(), seed=0).replay_shards(FACTORY,
                                                                                                        num_shards)


def test_a_shard_stores_the_given_priorities_and_updates_them() -> None:
    """Priorities [1, 4, 9] with alpha 0.5: p^alpha = [1, 2, 3] (+eps), so P = [1, 2, 3] / 6. After
    update_priorities([0, 2], [16, 0]): p^alpha = [4, 2, ~0.001] -> P = [4, 2, 0.001] / 6.001."""
    shard = ReplayShard(FACTORY, 0)
    assert shard.sample(4) is None  # empty
    assert shard.add(payload(0.0, 3, [1.0, 4.0, 9.0])) == 3
    torch.testing.assert_close(shard.memory.probabilities(), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64) / 6,
                               atol=1e-6, rtol=0)
    assert shard.update_priorities(torch.tensor([0, 2, 7]), torch.tensor([16.0, 0.0, 5.0])) == 2  # 7: not held
    expected = torch.tensor([4.0, 2.0, EPS ** ALPHA], dtype=torch.float64)
    torch.testing.assert_close(shard.memory.probabilities(), expected / expected.sum(), atol=1e-6, rtol=0)
    records, idx, weights = shard.sample(5)
    assert records["reward"].shape == (5,) and torch.equal(records["reward"], idx.to(torch.float32))
    assert float(weights.max()) <= 1.0


def test_local_set_round_robin_sampling_and_state_round_trip() -> None:
    shards = local_set()
    shards.add(payload(0.0, 4))  # shard 0
    shards.add(payload(100.0, 3))  # shard 1
    shards.add(payload(10.0, 2), shard=1)
    assert shards.shard_sizes() == [4, 5] and shards.size() == 9
    drawn = list(shards.sample_async(6, num_batches=4))
    assert [s for _, s in drawn] == [0, 1, 0, 1]
    for (records, _, _), shard in drawn:
        held = {0: set(range(4)), 1: {100.0, 101.0, 102.0, 10.0, 11.0}}[shard]
        assert set(records["reward"].tolist()) <= {float(v) for v in held}
    (records, idx, _), shard = drawn[1]
    shards.update_priorities(shard, idx, torch.full((6,), 50.0))
    assert shards.shards[1].memory.max_priority == pytest.approx(50.0 + EPS)

    state = copy.deepcopy(shards.state_dict())
    after = [(r["reward"], s) for (r, _, _), s in shards.sample_async(6, 3)]
    fresh = local_set()
    fresh.load_state_dict(state)
    assert_same([(r["reward"], s) for (r, _, _), s in fresh.sample_async(6, 3)], after)


def test_local_set_yields_nothing_while_empty_and_is_found_by_checkpoints() -> None:
    from rlrun.checkpoint import replay_prefixes

    shards = local_set()
    assert list(shards.sample_async(4, 3)) == [] and shards.sample(4) is None

    class Plan:  # what rlrun.checkpoint sees of a plan: its module attributes
        def __init__(self) -> None:
            self.replay = shards

    assert replay_prefixes(Plan()) == {"replay": ("memories.0.", "memories.1.")}


# ---------------------------------------------------------------------------------------------------- ray

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_cluster():  # noqa: ANN201
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # make_memory, for the shard actors
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield
    ray.shutdown()


def ray_set(num_shards: int = 2, **overrides):  # noqa: ANN003, ANN201
    from rlrun.execution.ray_executor import RayExecutor

    ex = RayExecutor(OmegaConf.structured(RayExecutorConfig(**overrides)), cartpole(), seed=0)
    return ex, ex.replay_shards(FACTORY, num_shards)


def test_ray_set_draws_what_the_local_set_draws_and_round_trips(ray_cluster) -> None:  # noqa: ANN001
    """The same adds (one of them an object ref, as a worker set hands them over) and the same priority updates:
    with one sample request in flight the Ray shards draw exactly the local shards' batches."""
    ex, remote = ray_set(replay_max_in_flight=1)
    local = local_set()
    for shards, wrap in ((local, lambda p: p), (remote, ray.put)):
        shards.add(payload(0.0, 4, [1.0, 2.0, 3.0, 4.0]))
        shards.add(wrap(payload(100.0, 3)))
        shards.add(payload(10.0, 2, [0.5, 8.0]), shard=0)

    def draw(shards):  # noqa: ANN001, ANN202
        out = []
        for (records, idx, weights), shard in shards.sample_async(5, 4):
            out.append((records["reward"], idx, weights, shard))
            shards.update_priorities(shard, idx, records["reward"] + 1.0)
        return out

    remote_draws = draw(remote)
    assert remote.restarts == 0, "a shard died"
    assert_same(remote_draws, draw(local))
    assert remote.shard_sizes() == [6, 3] and remote.size() == 9

    state = remote.state_dict()
    assert [s["count"].item() for s in state["shards"]] == [6, 3]
    assert state["shards"][0]["store_reward"].shape == (6,)  # the records held, not the capacity
    ex_other, other = ray_set(replay_max_in_flight=1)  # one request at a time: the order is fixed
    other.load_state_dict(state)
    assert_same(other.state_dict(), state)
    assert_same(draw(other), draw(remote))
    ex_other.stop()
    ex.stop()
    assert ray.is_initialized()  # not started by the executor: left running


def test_a_killed_shard_is_replaced_empty_and_the_set_goes_on(ray_cluster) -> None:  # noqa: ANN001
    ex, shards = ray_set(replay_max_in_flight=2, replay_max_pending_ops=1)
    for i in range(6):
        shards.add(payload(10.0 * i, 3))
        assert all(sum(1 for v in shards._ops.values() if v[0] == s) <= 1 for s in range(2))  # bounded
    shards.flush()  # size() is what the shards last reported: after every add has finished, all of them
    assert shards.size() == 18
    pids = shards.shard_pids()
    os.kill(pids[1], signal.SIGKILL)
    batches = []
    for _ in range(20):
        for _, shard in shards.sample_async(4, 2):
            assert len(shards._samples) <= 2  # bounded prefetch
            batches.append(shard)
        shards.add(payload(500.0, 2), shard=1)
        if shards.restarts:
            break
    assert shards.restarts == 1 and ex.metrics()["executor/replay_shard_restarts"] == 1
    new_pids = shards.shard_pids()
    assert new_pids[0] == pids[0] and new_pids[1] != pids[1]
    assert shards.shard_sizes()[0] == 9 and shards.shard_sizes()[1] in (0, 2)  # shard 1 started empty
    assert {s for _, s in shards.sample_async(4, 4)} <= {0, 1}
    ex.stop()


def test_a_shard_of_frame_stacks_carries_only_what_it_holds_and_round_trips() -> None:
    """A shard whose memory keeps Atari-like frame stacks in a FrameStore: its state holds the records and the
    frames written so far (not the whole capacity or ring), and a fresh shard given it samples the same stacks."""
    img = sp.Box(0, 255, (4, 8, 8), np.uint8)
    scalar = sp.Box(-np.inf, np.inf, (), np.float32)
    space = sp.Dict({"obs": img, "action": sp.Discrete(3), "reward": scalar, "next_obs": img, "discount": scalar})

    def make() -> ReplayShard:
        return ReplayShard(lambda i: PrioritizedReplayMemory(100, seed=3, frames_per_record=1.2).build(records=space),
                           0)

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (13, 8, 8), dtype=np.uint8)
    obs = np.stack([frames[i:i + 4] for i in range(9)])
    nxt = np.stack([frames[i + 1:i + 5] for i in range(9)])
    shard = make()
    shard.add({"records": {"obs": obs, "action": np.zeros(9, np.int64), "reward": np.ones(9, np.float32),
                           "next_obs": nxt, "discount": np.ones(9, np.float32)}, "priorities": np.ones(9)})
    state = shard.get_state()
    assert state["frames.frames"].array.shape[0] == 13  # each of the 13 distinct frames once
    assert state["frames.ids_obs"].array.shape[0] == 9 and state["store_reward"].array.shape == (9,)
    other = make()
    other.set_state(copy.deepcopy(state))
    a, b = shard.sample(5), other.sample(5)
    assert torch.equal(a[0]["next_obs"], b[0]["next_obs"]) and torch.equal(a[1], b[1])
    assert any(torch.equal(a[0]["next_obs"][0], torch.from_numpy(n)) for n in nxt)
