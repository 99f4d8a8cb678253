"""The local executor: the worker set lives in this process (env copies optionally in subprocesses)."""

from __future__ import annotations

from typing import Any

import torch

from rlrun.envs.gym_env import GymEnvFactory
from rlrun.execution.rollout_worker import Policy, RolloutWorker, SampleBatch
from rlrun.execution.timing import StageTimer


class LocalWorkerSet:
    """The worker-set interface plans use: ``sample`` from every worker, ``sync_weights``, ``stop``.

    Locally there is one worker that acts with the learner's own policy object, so weights never need copying.
    """

    def __init__(self, worker: RolloutWorker, timer: StageTimer) -> None:
        self.workers = [worker]
        self.timer = timer

    @property
    def num_envs(self) -> int:
        return sum(w.num_envs for w in self.workers)

    def sample(self, num_steps: int, explore: bool = True) -> list[SampleBatch]:
        """``num_steps`` agent steps of every env copy of every worker, one batch per worker."""
        batches = [w.sample(num_steps, explore) for w in self.workers]
        for b in batches:
            self.timer.add("env_step", b.env_seconds)
            self.timer.add("inference", b.inference_seconds)
        return batches

    def sync_weights(self, weights: Any = None) -> None:
        """Nothing to do locally: the worker acts with the learner's policy object itself."""

    def stop(self) -> None:
        for w in self.workers:
            w.close()


class LocalExecutor:
    def __init__(self, cfg: Any, env_factory: GymEnvFactory, seed: int) -> None:
        self.cfg, self.env_factory, self.seed = cfg, env_factory, seed
        if cfg.num_envs < 1:
            from rlrun.errors import ConfigError

            raise ConfigError(f"executor.num_envs={cfg.num_envs}: must be at least 1.")
        self.timer = StageTimer()
        self._worker_sets: list[LocalWorkerSet] = []

    def worker_set(self, policy: Policy, device: torch.device | str = "cpu") -> LocalWorkerSet:
        worker = RolloutWorker(self.env_factory, policy, int(self.cfg.num_envs), self.seed,
                               str(self.cfg.vector_mode), device)
        ws = LocalWorkerSet(worker, self.timer)
        self._worker_sets.append(ws)
        return ws

    def state_dict(self) -> dict[str, Any]:
        """Every worker's state (observations, episode accumulators, env copies' state) for a checkpoint.

        With ``vector_mode=async`` the env copies live in subprocesses and their state is not saved: a resumed run
        starts them from fresh resets (weights, optimizer, replay and counters are still restored)."""
        from rlrun.checkpoint import worker_state

        return {"worker_sets": [[worker_state(w) for w in ws.workers] for ws in self._worker_sets]}

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore the workers' state; returns False where the env copies could not be restored exactly."""
        from rlrun.checkpoint import set_worker_state
        from rlrun.errors import CheckpointError

        saved = state.get("worker_sets", [])
        if [len(s) for s in saved] != [len(ws.workers) for ws in self._worker_sets]:
            raise CheckpointError(f"the checkpoint holds {[len(s) for s in saved]} workers per worker set but the run "
                                  f"has {[len(ws.workers) for ws in self._worker_sets]}")
        exact = True
        for ws, ws_state in zip(self._worker_sets, saved, strict=True):
            for w, w_state in zip(ws.workers, ws_state, strict=True):
                exact = set_worker_state(w, w_state) and exact
        return exact

    def stop(self) -> None:
        for ws in self._worker_sets:
            ws.stop()
        self._worker_sets.clear()
