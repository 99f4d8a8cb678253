"""A rollout worker in its own process, as a Ray actor (:class:`RemoteRolloutWorker`), and the form a batch takes
on the way to the driver (:func:`batch_to_wire`) and back into the driver's own arrays (:func:`owned`).

A rollout travels in the form it was made in (``rlrun/execution/sample_batch.py``: each observation once,
``[T + 1, B]``, plus the final observations of the episodes that ended; 100 x 4 x 84 x 84 uint8 is 2.7 MiB: ~3 ms
through the object store on this machine class). With a shared-memory slot the driver lent to the request, the
observations go there instead of into the object store (``rlrun/execution/shared_memory_transfer.py``).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.execution.rollout_worker import EnvFactory, RolloutWorker
from rlrun.execution.sample_batch import SampleBatch, map_nest
from rlrun.execution.shared_memory_transfer import Slot, SlotWriter
from rlrun.execution.worker_set import PolicyFactory, from_wire, set_policy_weights, to_wire


def batch_to_wire(batch: SampleBatch) -> SampleBatch:
    """The batch as a worker sends it: its ``info`` tensors as numpy arrays (``worker_set.to_wire``)."""
    return replace(batch, info=to_wire(batch.info))


def owned(batch: SampleBatch) -> SampleBatch:
    """A batch fetched from the object store (observations possibly viewing a lent shared-memory slot) with every
    array copied into this process (writable; the store's object and the slot can be freed at once) and its
    ``info`` back from the wire."""
    def copy(x: Any) -> Any:
        return map_nest(np.array, x) if x is not None else None

    return replace(batch, obs=copy(batch.obs), final_obs=copy(batch.final_obs), actions=np.array(batch.actions),
                   rewards=np.array(batch.rewards), terminated=np.array(batch.terminated),
                   truncated=np.array(batch.truncated), extras={k: np.array(v) for k, v in batch.extras.items()},
                   info=from_wire(batch.info))


# ---------------------------------------------------------------------------------------------------- the actor


class RemoteRolloutWorker:
    """A rollout worker in its own process (made a Ray actor by :class:`RayWorkerSet`)."""

    def __init__(self, env_factory: EnvFactory, policy_factory: PolicyFactory, worker_index: int, stream_index: int,
                 num_envs: int, env_seed: int, acting_seed_base: int, vector_mode: str, device: str,
                 torch_threads: int) -> None:
        """``worker_index``: what ``policy_factory`` is called with; ``stream_index``: the index the acting random
        stream is seeded from (``worker_index`` for a first actor; past every index used for a replacement)."""
        torch.set_num_threads(int(torch_threads))
        policy = policy_factory(worker_index)
        if isinstance(policy, torch.nn.Module):
            policy = policy.to(device)
        self.worker = RolloutWorker(env_factory, policy, num_envs, env_seed, vector_mode, device,
                                    worker_index=stream_index, acting_seed_base=acting_seed_base)
        self.space = self.worker.spec.observation_space
        self._slots = SlotWriter()

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this worker runs on (shared-memory transfer needs the driver's)."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def set_weights(self, weights: Any) -> None:
        set_policy_weights(self.worker.policy, from_wire(weights))

    def sample(self, num_steps: int, explore: bool, weights: Any = None, slot: Slot | None = None) -> SampleBatch:
        """A rollout; ``weights`` (when not None) are set first: a weight sync rides on the next request. With a
        ``slot`` (shared memory the driver lent to this request) the observations go there and ``batch.obs`` is
        their :class:`SharedArrays` descriptor."""
        if weights is not None:
            set_policy_weights(self.worker.policy, from_wire(weights))
        batch = self.worker.sample(num_steps, explore)
        t0 = time.perf_counter()
        sent = batch_to_wire(batch)
        if slot is not None and sent.obs is not None:
            shared = self._slots.write(slot, sp.flatten(self.space, sent.obs))
            if shared is not None:
                sent = replace(sent, obs=shared)
        return replace(sent, transfer_seconds=time.perf_counter() - t0)

    def sample_many(self, num_steps: int, explore: bool, weights: Any, rollouts: int) -> list[SampleBatch]:
        """``rollouts`` rollouts of :meth:`sample`, one after the other, in one request (``weights``, when not None,
        set before the first); through the object store."""
        return [self.sample(num_steps, explore, weights if i == 0 else None) for i in range(int(rollouts))]

    def sample_split(self, num_steps: int, explore: bool, weights: Any, keys: Sequence[str],
                     slot: Slot | None = None) -> tuple:
        """:meth:`sample`, returned as ``(batch, info[keys[0]], info[keys[1]], ...)`` with those entries taken
        out of the batch: called with ``num_returns=1 + len(keys)``, each is an object of its own in the store,
        which the driver can hand on (to a replay shard) without fetching it."""
        batch = self.sample(num_steps, explore, weights, slot)
        return (batch, *[batch.info.pop(k, None) for k in keys])

    def get_state(self) -> dict[str, Any]:
        return {"worker": self.worker.get_state(), "rng": self.worker.rng_state.clone()}

    def set_state(self, state: dict[str, Any]) -> bool:
        exact = self.worker.set_state(state["worker"])
        self.worker.rng_state = state["rng"].clone()
        return exact

    def close(self) -> None:
        self.worker.close()
        self._slots.close()

