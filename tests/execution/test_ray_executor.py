"""The Ray executor (rlrun/execution/ray_executor.py) on a real local Ray cluster of 2 CPUs, started once for this
module and shut down at its end (never ``ray stop``: it would kill every Ray process on the machine).

- parity: DQN through executor=local and executor=ray (one worker, synchronous sampling) with the same seed and
  config makes bit-identical updates;
- the worker-set contract over actors: synchronous and asynchronous sampling, bounded in-flight requests, the
  learner's weights sent before a synchronous sample, a per-worker weight sync reaching that worker's next rollout;
- fault handling: a worker process killed (SIGKILL on its pid) during a run is replaced, the run finishes and
  ``executor/worker_restarts`` says 1;
- a batch copied out of the object store equals the one the worker made.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_same
from omegaconf import OmegaConf

from rlrun import checkpoint as ckpt
from rlrun.config import RayExecutorConfig
from rlrun.envs.gym_env import GymEnvFactory
from rlrun.errors import ConfigError
from rlrun.execution.rollout_worker import RolloutWorker

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module", autouse=True)
def ray_cluster():  # noqa: ANN201
    """One small local cluster for the module; executors reuse it (and leave it running when they stop)."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the test policies, for the workers
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield
    ray.shutdown()


def cartpole() -> GymEnvFactory:
    return GymEnvFactory(OmegaConf.create({"name": "gym", "id": "CartPole-v1", "max_episode_steps": None,
                                           "frame_skip": 1, "kwargs": {}}))


def ray_executor(**overrides):  # noqa: ANN003, ANN201
    from rlrun.execution.ray_executor import RayExecutor

    return RayExecutor(OmegaConf.structured(RayExecutorConfig(**overrides)), cartpole(), seed=0)


# ---------------------------------------------------------------------------------------------------- parity

PARITY = ["algo.learning_starts=64", "algo.hidden_sizes=[32]", "algo.batch_size=32", "algo.buffer_size=2000",
          "algo.rollout_steps=8", "algo.train_every=1", "algo.tau=1.0", "algo.target_update_every=50",
          "export.formats=[]", "logger=none", "logger.console.enabled=false", "seed=3"]
# DQN's get_weights() holds the Q-network only, not the epsilon schedule's step, so a remote copy of the policy
# keeps the epsilon it was copied with: with a constant epsilon that does not matter.
CONSTANT_EPSILON = ["algo.epsilon_start=0.3", "algo.epsilon_end=0.3"]


def train(overrides: list[str], run_dir: Path) -> dict:
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    summary = run_experiment(compose(overrides), run_dir, overrides=[])
    assert summary["stop_reason"] == "env_steps"
    return ckpt.load_checkpoint(ckpt.checkpoint_path(run_dir))




def _parity(tmp_path: Path, extra: list[str]) -> dict:
    local = train([*PARITY, *extra, "executor=local", "executor.num_envs=2"], tmp_path / "local")
    remote = train([*PARITY, *extra, "executor=ray", "executor.num_workers=1", "executor.num_envs_per_worker=2"],
                   tmp_path / "ray")
    assert_same(local["algo"], remote["algo"], "algo")  # Q and target networks, Adam moments, replay, counters
    assert_same(local["executor"]["worker_rngs"], remote["executor"]["worker_rngs"], "acting stream")
    loop = ("env_steps", "episodes", "returns", "lengths")
    assert {k: local["loop"][k] for k in loop} == {k: remote["loop"][k] for k in loop}
    return local


def test_dqn_updates_are_identical_on_the_local_and_the_ray_executor(tmp_path: Path) -> None:
    """320 env steps: 20 iterations of 8 agent steps x 2 env copies, learning from the 4th (env step 64) at one
    gradient step per env step: 17 x 16 = 272 gradient steps, every one bit-identical."""
    local = _parity(tmp_path, [*CONSTANT_EPSILON, "stop.env_steps=320"])
    assert local["algo"]["gradient_steps"] == 272


def test_dqn_parity_with_a_decaying_epsilon(tmp_path: Path) -> None:
    _parity(tmp_path, ["algo.epsilon_start=1.0", "algo.epsilon_end=0.1", "algo.epsilon_decay_steps=100",
                       "stop.env_steps=128"])


# ---------------------------------------------------------------------------------------------------- contract


class Constant(torch.nn.Module):
    """Acts ``a`` everywhere; its weights are ``{"a": tensor}`` (state_dict), so a sync shows in the actions."""

    def __init__(self, a: int) -> None:
        super().__init__()
        self.register_buffer("a", torch.tensor(a, dtype=torch.int64))

    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        return self.a.expand(obs.shape[0]).clone()


def actions_of(batch) -> set[int]:  # noqa: ANN001
    return set(batch.actions.reshape(-1).tolist())


def test_sync_and_async_sampling_and_weight_sync_over_two_workers() -> None:
    ex = ray_executor(num_workers=2, num_envs_per_worker=2, cpus_per_worker=0.5, max_in_flight_per_worker=1)
    learner = Constant(0)
    ws = ex.worker_set(learner, "cpu")  # no policy_factory: each worker gets a copy of the learner's policy
    assert ws.num_envs == 4 and len(set(ws.worker_pids())) == 2 and os.getpid() not in ws.worker_pids()

    batches = ws.sample(5)
    assert [b.env_steps for b in batches] == [10, 10] and all(actions_of(b) == {0} for b in batches)
    learner.a.fill_(1)  # the learner changes; sample() sends its weights first
    assert all(actions_of(b) == {1} for b in ws.sample(5))

    seen = []
    synced = False
    for _ in range(20):  # until worker 1 has delivered a batch (then sync it alone to 0)
        for _batch, w in ws.sample_async(3):
            assert max(ws._in_flight) <= 1 and len(ws._pending) <= 2  # bounded in-flight requests
            if w == 1:
                ws.sync_weights({"a": torch.tensor(0)}, worker_ids=[1])  # reaches worker 1's next request
                synced = True
        if synced:
            break
    assert synced
    while {w for w, _ in seen} != {0, 1} or len(seen) < 4:
        seen += [(w, actions_of(b)) for b, w in ws.sample_async(3, min_batches=2)]
    assert all(acts == ({1} if w == 0 else {0}) for w, acts in seen), seen

    metrics = ex.metrics()
    assert metrics["executor/worker_restarts"] == 0
    for stage in ("env_step", "inference", "transfer", "wait"):
        assert metrics[f"time/{stage}_s"] > 0, stage
    ex.stop()
    assert ray.is_initialized()  # the executor did not start this cluster, so it leaves it running


def test_several_rollouts_per_request_are_the_rollouts_of_single_requests() -> None:
    """executor.rollouts_per_request=3: a worker makes three rollouts per request, one after the other, and the
    plan gets them one at a time: the same rollouts, in the same order, as three requests of one would give; a
    weight sync reaches the worker with its next request."""
    one = ray_executor(num_workers=1, num_envs_per_worker=2, cpus_per_worker=0.5)
    many = ray_executor(num_workers=1, num_envs_per_worker=2, cpus_per_worker=0.5, rollouts_per_request=3)
    a, b = one.worker_set(Constant(0), "cpu"), many.worker_set(Constant(0), "cpu")
    try:
        def collect(ws, n: int) -> list:  # noqa: ANN001
            out = []
            while len(out) < n:
                got = [x for x, _ in ws.sample_async(4, min_batches=1)]
                assert ws is a or len(got) % 3 == 0  # whole requests of three
                out += got
            return out + [x for x, _ in ws.drain()]

        xs, ys = collect(a, 6), collect(b, 6)
        assert len(ys) % 3 == 0 and len(xs) >= 6 and len(ys) >= 6
        for x, y in zip(xs[:6], ys[:6], strict=True):
            assert x.env_steps == y.env_steps == 8
            for key in ("obs", "actions", "rewards", "terminated", "truncated"):
                np.testing.assert_array_equal(getattr(x, key), getattr(y, key), err_msg=key)
        b.sync_weights({"a": torch.tensor(1)})
        later = collect(b, 12)
        assert actions_of(later[-1]) == {1} and all(actions_of(x) in ({0}, {1}) for x in later)
    finally:
        one.stop()
        many.stop()
    with pytest.raises(ConfigError, match=r"executor.rollouts_per_request=2: this algorithm's plan keeps rollout "
                                          r"info \(priorities\) in the object store"):
        ray_executor(num_workers=1, cpus_per_worker=0.5, rollouts_per_request=2).worker_set(
            Constant(0), "cpu", info_by_reference=("priorities",))


def test_more_workers_than_the_cluster_has_cpus_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"executor.num_workers=3 x executor.cpus_per_worker=1.0 needs 3 CPUs"):
        ray_executor(num_workers=3)


# ---------------------------------------------------------------------------------------------------- faults


def test_a_killed_worker_is_replaced_and_the_run_goes_on(tmp_path: Path) -> None:
    """DQN whose plan kills rollout worker 0 (SIGKILL on its pid) at its 4th iteration: the executor replaces it,
    the run reaches its stop condition, and ``executor/worker_restarts`` is logged as 1."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlrun.algos.dqn import DQN
    from rlrun.app.run import run_experiment
    from rlrun.config import compose
    from rlrun.registry import registry

    pids: list[list[int]] = []

    class KillingDQN(DQN):
        def training_step(self):  # noqa: ANN202
            pids.append(self.workers.worker_pids())
            if len(pids) == 4:
                os.kill(pids[-1][0], signal.SIGKILL)
            return super().training_step()

    registry.register("algo", "dqn_killing_test", KillingDQN, replace=True)
    try:
        cfg = compose(["executor=ray", "executor.num_workers=1", "stop.env_steps=160", "algo.learning_starts=32",
                       "algo.rollout_steps=16", "export.formats=[]", "logger=none", "logger.console.enabled=false",
                       "logger.tensorboard.enabled=true"])
        cfg.algo.name = "dqn_killing_test"
        summary = run_experiment(cfg, tmp_path, overrides=[])
    finally:
        registry._entries["algo"].pop("dqn_killing_test", None)
    assert summary["stop_reason"] == "env_steps" and summary["env_steps"] == 160
    assert pids[4][0] != pids[3][0] and pids[-1] == pids[4]  # replaced once, then kept
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert events.Scalars("executor/worker_restarts")[-1].value == 1


# ---------------------------------------------------------------------------------------------------- transfer


class Coin:
    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        return torch.randint(0, 2, (obs.shape[0],))


def test_a_batch_from_the_object_store_is_copied_out_exactly() -> None:
    """A batch travels in the form it was made in (each observation once, ``[T + 1, B]``, and the final
    observations of the ended episodes: random CartPole play ends several in 60 steps of 3 copies); what the driver
    gets from the object store and copies out (``owned``) equals it field by field and is writable."""
    import ray

    from rlrun.execution.ray_actor import batch_to_wire, owned

    worker = RolloutWorker(cartpole(), Coin(), num_envs=3, seed=0)
    batch = worker.sample(60)
    worker.close()
    got = owned(ray.get(ray.put(batch_to_wire(batch))))
    assert len(got.final_obs) == len(batch.episode_returns) >= 3
    for key in ("obs", "final_obs", "actions", "rewards", "terminated", "truncated"):
        np.testing.assert_array_equal(getattr(got, key), getattr(batch, key), err_msg=key)
        assert getattr(got, key).flags.writeable
    assert got.extras == {} and got.episode_returns == batch.episode_returns


def test_observations_through_shared_memory_equal_the_object_store_path() -> None:
    """The same seed through both transfers gives identical rollouts (sync and async); the shared path really ran
    (its slots exist in /dev/shm while the worker set lives), a killed worker's slots are unlinked and its
    replacement gets new ones, and stopping unlinks every slot. 4 copies x 4201 observations of CartPole: 263 KiB,
    just over the size below which rollouts stay in the object store."""
    from rlrun.execution.shared_memory_transfer import MIN_SHARED_BYTES

    steps = 4200
    assert steps * 4 * 4 * 4 >= MIN_SHARED_BYTES
    shared = ray_executor(num_workers=1, num_envs_per_worker=4, cpus_per_worker=0.5)
    plain = ray_executor(num_workers=1, num_envs_per_worker=4, cpus_per_worker=0.5,
                         observation_transfer="object_store")
    a, b = shared.worker_set(Constant(0), "cpu"), plain.worker_set(Constant(0), "cpu")
    assert a._pool is not None and b._pool is None
    try:
        def same(x, y) -> None:  # noqa: ANN001
            for key in ("obs", "final_obs", "last_obs", "actions", "rewards", "terminated", "truncated"):
                np.testing.assert_array_equal(getattr(x, key), getattr(y, key), err_msg=key)
            assert x.obs.flags.writeable

        same(a.sample(steps)[0], b.sample(steps)[0])
        names = set(a._pool._segments)
        assert len(names) == 1 and all(os.path.exists(f"/dev/shm/{n}") for n in names)
        xs = [x for x, _ in a.sample_async(steps, min_batches=2)] + [x for x, _ in a.drain()]
        ys = [y for y, _ in b.sample_async(steps, min_batches=2)] + [y for y, _ in b.drain()]
        assert len(xs) == len(ys) >= 2
        for x, y in zip(xs, ys, strict=True):
            same(x, y)
        names = set(a._pool._segments)
        os.kill(a.worker_pids()[0], signal.SIGKILL)
        a.sample(steps)  # the dead worker is replaced and its request sent again
        assert shared.restarts == 1
        assert not any(os.path.exists(f"/dev/shm/{n}") for n in names)
        a.sample(steps)
        assert set(a._pool._segments) and not set(a._pool._segments) & names  # the new worker's own slots
        names = set(a._pool._segments)
    finally:
        shared.stop()
        plain.stop()
    assert not any(os.path.exists(f"/dev/shm/{n}") for n in names)


PRELOAD_PROBE = """
import sys
import ray
from omegaconf import OmegaConf
from rlrun.config import RayExecutorConfig
from rlrun.envs.gym_env import GymEnvFactory
from rlrun.execution.ray_executor import RayExecutor

env = GymEnvFactory(OmegaConf.create({"name": "gym", "id": "CartPole-v1", "max_episode_steps": None,
                                      "frame_skip": 1, "kwargs": {}}))
ex = RayExecutor(OmegaConf.structured(RayExecutorConfig(num_cpus=2, preload_modules=PRELOAD)), env, seed=0)

@ray.remote(num_cpus=1)
def imported():
    return sorted(m for m in ("torch", "rlrun.execution.ray_actor") if m in sys.modules)

print("IMPORTED", ray.get(imported.remote()))  # a worker imports the preload modules before it takes work
ex.stop()
"""


@pytest.mark.parametrize("preload", [["torch", "rlrun.execution.ray_actor"], []])
def test_workers_of_a_cluster_the_executor_starts_import_the_preload_modules(preload: list[str]) -> None:
    """executor.preload_modules (default: torch and rlrun's worker code) are imported by the workers Ray starts
    ahead, before they get work; [] leaves them bare. A fresh process: the executor must start the cluster."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", PRELOAD_PROBE.replace("PRELOAD", repr(preload))],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("IMPORTED")][-1]
    assert line == f"IMPORTED {sorted(preload)}"


def test_an_unknown_observation_transfer_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"executor.observation_transfer=pickle: must be one of shared_memory"):
        ray_executor(observation_transfer="pickle")


def test_an_async_call_ends_with_the_batches_ready_when_min_batches_arrived() -> None:
    """A learner slower than its workers, at the extreme: before each item it takes, every request in flight has
    finished (the test waits for them). One sample_async call yields min_batches and the batches that were ready
    then, at most every request in flight (2 workers x 2), never the rollouts of the requests it sent meanwhile,
    so a plan's training_step() ends."""
    import ray

    def every_request_finished() -> None:
        pending = list(ws._pending)
        ready, _ = ray.wait(pending, num_returns=len(pending), timeout=120)
        assert len(ready) == len(pending)

    ex = ray_executor(num_workers=2, num_envs_per_worker=1, cpus_per_worker=0.5, max_in_flight_per_worker=2)
    ws = ex.worker_set(Constant(0), "cpu")
    try:
        for _ in ws.sample_async(2, min_batches=1):
            pass
        every_request_finished()
        got = 0
        for _batch, _w in ws.sample_async(2, min_batches=1):
            got += 1
            if got > 8:  # the bug this guards against: every top-up's rollout is ready by the next item: no end
                break
            every_request_finished()  # the top-up just sent included
        assert 1 <= got <= 4
    finally:
        ex.stop()
