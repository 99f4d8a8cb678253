"""The local executor: the worker set lives in this process (env copies optionally in subprocesses).

The contract of a worker set is in ``rlrun/execution/worker_set.py``. Locally the workers live in this process
and sample one after another. With one worker (the default) it acts with the learner's own policy object, so
``sync_weights`` has nothing to do and ``policy_factory`` is not used. With ``executor.num_workers > 1`` and a
``policy_factory``, worker w acts with ``policy_factory(w)`` (e.g. Ape-X's per-worker epsilon) and gets the
learner's weights through ``sync_weights`` as a copy, exactly as a Ray worker does; without a factory every worker
acts with the learner's policy. Env copies are stepped in this process (``vector_mode=sync``), in one subprocess
each (``async``), or one at a time with batch-1 inference (``serial``, for debugging).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import torch

from rlrun.errors import CheckpointError
from rlrun.execution.dataset_recorder import EpisodeRecorder
from rlrun.execution.replay_shards import LocalReplayShardSet
from rlrun.execution.rollout_worker import EnvFactory, Policy, RolloutWorker
from rlrun.execution.sample_batch import SampleBatch
from rlrun.execution.timing import StageTimer
from rlrun.execution.worker_set import (
    PolicyFactory,
    from_wire,
    get_policy_weights,
    set_policy_weights,
    tensor_versions,
    to_wire,
)
from rlrun.metric_names import REPLAY_SHARD_RESTARTS, WORKER_RESTARTS


class LocalWorkerSet:
    """The worker-set interface (``rlrun/execution/worker_set.py``) with in-process workers.

    ``learner``: the learner's policy; ``own_policies``: whether the workers act with policies of their own (built
    by a policy factory), which ``sync_weights`` then sets from the learner's weights; ``recorder``: an
    :class:`~rlrun.execution.dataset_recorder.EpisodeRecorder` given every rollout, the workers numbered from
    ``first_worker`` (``record_dataset.id``)."""

    def __init__(self, workers: list[RolloutWorker], timer: StageTimer, learner: Policy | None = None,
                 own_policies: bool = False, recorder: EpisodeRecorder | None = None, first_worker: int = 0) -> None:
        self.workers = workers
        self.timer = timer
        self.recorder, self.first_worker = recorder, first_worker
        self.learner = learner
        self.own_policies = own_policies
        self._synced = False
        self._synced_version: tuple | None = None
        self._next_async = 0
        self.sync_weights()  # workers with policies of their own start from the learner's weights

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    @property
    def num_envs(self) -> int:
        return sum(w.num_envs for w in self.workers)

    def _count(self, batch: SampleBatch, worker: int) -> SampleBatch:
        if self.recorder is not None:
            self.recorder.add(batch, self.first_worker + worker)
        self.timer.add("env_step", batch.env_seconds)
        self.timer.add("inference", batch.inference_seconds)
        if batch.postprocess_seconds:
            self.timer.add("postprocess", batch.postprocess_seconds)
        return batch

    def sample(self, num_steps: int, explore: bool = True) -> list[SampleBatch]:
        """``num_steps`` agent steps of every env copy of every worker, one batch per worker (workers with policies
        of their own first get the learner's weights, unless the plan synced since the previous sample)."""
        if self.own_policies and not self._synced:
            self.sync_weights()
        self._synced = False
        return [self._count(w.sample(num_steps, explore), i) for i, w in enumerate(self.workers)]

    def sample_async(self, num_steps: int, explore: bool = True,
                     min_batches: int = 1) -> Iterator[tuple[SampleBatch, int]]:
        """``(batch, worker_id)`` for ``min_batches`` batches, the workers in turn (continuing where the previous
        call stopped): in one thread nothing runs ahead, so "as results arrive" is "one after the other"."""
        for _ in range(max(int(min_batches), 1)):
            i = self._next_async
            self._next_async = (i + 1) % len(self.workers)
            yield self._count(self.workers[i].sample(num_steps, explore), i), i

    def drain(self) -> list[tuple[SampleBatch, int]]:
        """Nothing is ever in flight locally."""
        return []

    def sync_weights(self, weights: Any = None, worker_ids: Sequence[int] | None = None) -> None:
        """Workers acting with the learner's policy object have nothing to sync. Workers with policies of their own
        get a copy of ``weights`` (default: the learner's ``get_weights()``, skipped when its tensors have not
        changed since the last broadcast), as a Ray worker would."""
        if not self.own_policies:
            return
        ids = range(len(self.workers)) if worker_ids is None else worker_ids
        if weights is None:
            version = tensor_versions(self.learner)
            if worker_ids is None and version is not None and version == self._synced_version:
                self._synced = True
                return
            weights = get_policy_weights(self.learner)
            if worker_ids is None:
                self._synced_version = version
        else:
            self._synced_version = None
        if worker_ids is None:
            self._synced = True
        for i in ids:
            set_policy_weights(self.workers[i].policy, from_wire(to_wire(weights)))  # a copy, as through Ray

    def worker_pids(self) -> list[int]:
        import os

        return [os.getpid() for _ in self.workers]

    def stop(self) -> None:
        for w in self.workers:
            w.close()


class LocalExecutor:
    def __init__(self, cfg: Any, env_factory: EnvFactory, seed: int) -> None:

        self.cfg, self.env_factory, self.seed = cfg, env_factory, seed
        self.timer = StageTimer()
        self._worker_sets: list[LocalWorkerSet] = []
        self._replay_shard_sets: list[Any] = []
        self.recorder: EpisodeRecorder | None = None  # record_dataset.id: set before the plan builds its workers

    @property
    def num_workers(self) -> int:
        """Rollout workers of every worker set this executor builds."""
        return int(self.cfg.num_workers)

    @property
    def num_envs_per_worker(self) -> int:
        return int(self.cfg.num_envs)

    def worker_set(self, policy: Policy, device: torch.device | str = "cpu",
                   policy_factory: PolicyFactory | None = None, own_policies: bool = False,
                   info_by_reference: Sequence[str] = ()) -> LocalWorkerSet:
        """``executor.num_workers`` in-process workers: one acts with ``policy`` itself; several act with
        ``policy_factory(w)`` when given (weights copied in by ``sync_weights``), else all with ``policy``.
        ``own_policies=True``: every worker acts with ``policy_factory(w)``, even a single one (a plan whose
        actors differ from its learner: Ape-X). ``info_by_reference``: nothing to do in-process (the info entries
        stay where they are). Worker w's env copy i is seeded ``seed + w * num_envs + i``, as on Ray."""
        n, per = self.num_workers, self.num_envs_per_worker
        own = (n > 1 or own_policies) and policy_factory is not None
        workers = []
        for w in range(n):
            acting = policy
            if own:
                acting = policy_factory(w)
                if isinstance(acting, torch.nn.Module):
                    acting = acting.to(device)
            workers.append(RolloutWorker(self.env_factory, acting, per, self.seed + w * per,
                                         str(self.cfg.vector_mode), device, worker_index=w,
                                         acting_seed_base=self.seed))
        ws = LocalWorkerSet(workers, self.timer, learner=policy, own_policies=own, recorder=self.recorder,
                            first_worker=sum(s.num_workers for s in self._worker_sets))
        self._worker_sets.append(ws)
        return ws

    def replay_shards(self, factory: Any, num_shards: int) -> Any:
        """``num_shards`` in-process replay shards, ``factory(i)`` each (``rlrun/execution/replay_shards.py``)."""
        shards = LocalReplayShardSet(factory, num_shards, self.timer)
        self._replay_shard_sets.append(shards)
        return shards

    def metrics(self) -> dict[str, float]:
        """``time/<stage>_s`` since the last call, and ``executor/worker_restarts`` (always 0 here; with replay
        shards also ``executor/replay_shard_restarts``, 0 too)."""
        out = {**self.timer.report(), WORKER_RESTARTS: 0}
        if self._replay_shard_sets:
            out[REPLAY_SHARD_RESTARTS] = 0
        return out

    def state_dict(self) -> dict[str, Any]:
        """Every worker's state (observations, episode accumulators, env copies' state) and its acting random stream,
        for a checkpoint.

        With ``vector_mode=async`` the env copies live in subprocesses and their state is not saved: a resumed run
        starts them from fresh resets (weights, optimizer, replay and counters are still restored)."""
        return {"worker_sets": [[w.get_state() for w in ws.workers] for ws in self._worker_sets],
                "worker_rngs": [[w.rng_state.clone() for w in ws.workers] for ws in self._worker_sets],
                "recorder": self.recorder.state_dict() if self.recorder is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore the workers' state; returns False where the env copies could not be restored exactly."""
        saved = state.get("worker_sets", [])
        if [len(s) for s in saved] != [len(ws.workers) for ws in self._worker_sets]:
            raise CheckpointError(f"the checkpoint holds {[len(s) for s in saved]} workers per worker set but the run "
                                  f"has {[len(ws.workers) for ws in self._worker_sets]}")
        exact = True
        for ws, ws_state in zip(self._worker_sets, saved, strict=True):
            for w, w_state in zip(ws.workers, ws_state, strict=True):
                exact = w.set_state(w_state) and exact
        rngs = state.get("worker_rngs")
        if rngs is None:  # a checkpoint from before workers had their own acting stream
            exact = False
        else:
            for ws, ws_rngs in zip(self._worker_sets, rngs, strict=True):
                for w, rng in zip(ws.workers, ws_rngs, strict=True):
                    w.rng_state = rng.clone()
        if self.recorder is not None and state.get("recorder") is not None:
            self.recorder.load_state_dict(state["recorder"])
        return exact

    def stop(self) -> None:
        for ws in self._worker_sets:
            ws.stop()
        self._worker_sets.clear()
        self._replay_shard_sets.clear()
