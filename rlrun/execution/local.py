"""The local executor: the worker set lives in this process (env copies optionally in subprocesses).

The contract of a worker set is in ``rlrun/execution/worker_set.py``. Locally there is one worker that acts with
the learner's own policy object (so ``sync_weights`` has nothing to do and ``policy_factory`` is not used); its
env copies are stepped in this process (``vector_mode=sync``), in one subprocess each (``async``), or one at a
time with batch-1 inference (``serial``, for debugging).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import torch

from rlrun.execution.rollout_worker import VECTOR_MODES, EnvFactory, Policy, RolloutWorker, SampleBatch
from rlrun.execution.timing import StageTimer
from rlrun.execution.worker_set import PolicyFactory


class LocalWorkerSet:
    """The worker-set interface (``rlrun/execution/worker_set.py``) with one in-process worker."""

    def __init__(self, worker: RolloutWorker, timer: StageTimer) -> None:
        self.workers = [worker]
        self.timer = timer

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    @property
    def num_envs(self) -> int:
        return sum(w.num_envs for w in self.workers)

    def _count(self, batch: SampleBatch) -> SampleBatch:
        self.timer.add("env_step", batch.env_seconds)
        self.timer.add("inference", batch.inference_seconds)
        return batch

    def sample(self, num_steps: int, explore: bool = True) -> list[SampleBatch]:
        """``num_steps`` agent steps of every env copy of every worker, one batch per worker."""
        return [self._count(w.sample(num_steps, explore)) for w in self.workers]

    def sample_async(self, num_steps: int, explore: bool = True,
                     min_batches: int = 1) -> Iterator[tuple[SampleBatch, int]]:
        """``(batch, worker_id)`` for ``min_batches`` batches, the workers in turn: in one thread nothing runs
        ahead, so "as results arrive" is "one after the other"."""
        for k in range(max(int(min_batches), 1)):
            i = k % len(self.workers)
            yield self._count(self.workers[i].sample(num_steps, explore)), i

    def drain(self) -> list[tuple[SampleBatch, int]]:
        """Nothing is ever in flight locally."""
        return []

    def sync_weights(self, weights: Any = None, worker_ids: Sequence[int] | None = None) -> None:
        """Nothing to do locally: the worker acts with the learner's policy object itself."""

    def worker_pids(self) -> list[int]:
        import os

        return [os.getpid() for _ in self.workers]

    def stop(self) -> None:
        for w in self.workers:
            w.close()


class LocalExecutor:
    def __init__(self, cfg: Any, env_factory: EnvFactory, seed: int) -> None:
        from rlrun.errors import ConfigError

        self.cfg, self.env_factory, self.seed = cfg, env_factory, seed
        if cfg.num_envs < 1:
            raise ConfigError(f"executor.num_envs={cfg.num_envs}: must be at least 1.")
        if cfg.vector_mode not in VECTOR_MODES:
            raise ConfigError(f"executor.vector_mode={cfg.vector_mode}: must be one of {', '.join(VECTOR_MODES)}.")
        self.timer = StageTimer()
        self._worker_sets: list[LocalWorkerSet] = []

    def worker_set(self, policy: Policy, device: torch.device | str = "cpu",
                   policy_factory: PolicyFactory | None = None) -> LocalWorkerSet:
        """One worker acting with ``policy`` itself (``policy_factory`` is for remote workers; unused here)."""
        worker = RolloutWorker(self.env_factory, policy, int(self.cfg.num_envs), self.seed,
                               str(self.cfg.vector_mode), device, worker_index=0)
        ws = LocalWorkerSet(worker, self.timer)
        self._worker_sets.append(ws)
        return ws

    def metrics(self) -> dict[str, float]:
        """``time/<stage>_s`` since the last call, and ``executor/worker_restarts`` (always 0 here)."""
        return {**self.timer.report(), "executor/worker_restarts": 0}

    def state_dict(self) -> dict[str, Any]:
        """Every worker's state (observations, episode accumulators, env copies' state) and its acting random stream,
        for a checkpoint.

        With ``vector_mode=async`` the env copies live in subprocesses and their state is not saved: a resumed run
        starts them from fresh resets (weights, optimizer, replay and counters are still restored)."""
        from rlrun.checkpoint import worker_state

        return {"worker_sets": [[worker_state(w) for w in ws.workers] for ws in self._worker_sets],
                "worker_rngs": [[w.rng_state.clone() for w in ws.workers] for ws in self._worker_sets]}

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
        rngs = state.get("worker_rngs")
        if rngs is None:  # a checkpoint from before workers had their own acting stream
            exact = False
        else:
            for ws, ws_rngs in zip(self._worker_sets, rngs, strict=True):
                for w, rng in zip(ws.workers, ws_rngs, strict=True):
                    w.rng_state = rng.clone()
        return exact

    def stop(self) -> None:
        for ws in self._worker_sets:
            ws.stop()
        self._worker_sets.clear()
