"""The worker-set interface: what a plan calls to get rollouts, whatever executor runs it.

A plan gets its worker set from the executor and never imports ``ray``::

    self.workers = executor.worker_set(self.agent, device, policy_factory=ActingPolicy(cfg, spec))
    batches = self.workers.sample(cfg.rollout_steps)                  # one SampleBatch per worker, in order
    for batch, worker in self.workers.sample_async(cfg.rollout_steps): # as each worker's rollout finishes
        ...
        self.workers.sync_weights(worker_ids=[worker])                 # only that worker, before its next rollout
    self.workers.sync_weights()                                        # broadcast the learner's weights

The contract (``executor=local`` and ``executor=ray`` both keep it; ``tests/execution/`` checks it):

- ``executor.worker_set(policy, device="cpu", policy_factory=None) -> WorkerSet``. ``policy`` is the learner's
  acting object (``get_actions(obs, explore)``, and ``get_weights()``/``set_weights()`` where weights move).
  Locally the worker acts with that very object: no copy, nothing to sync. A remote worker builds its own policy
  with ``policy_factory(worker_index)`` (a picklable callable ``int -> Policy``, run inside the worker); without
  one, every remote worker gets a pickled copy of ``policy`` (fine for a small policy; a plan whose acting object
  carries learner-only state, e.g. a replay memory, should pass a factory).
- **Weights.** Every worker starts acting with the learner policy's weights as they were when the worker set was built
  (whatever ``policy_factory`` initialised). ``sync_weights(weights=None, worker_ids=None)``: ``weights`` is what the
  remote policy's ``set_weights`` takes (the learner's ``get_weights()``); ``None`` means "the learner policy's current
  ``get_weights()``" (``state_dict()`` if it has none). ``worker_ids=None`` broadcasts (one copy of the weights in Ray's
  object store, read by every worker); a list syncs only those workers. ``get_weights()`` must hold every piece of state
  that acting depends on (DQN: the Q-network *and* the epsilon schedule's step), or a remote worker acts differently
  from a local one. A synchronous ``sample()`` first pushes the learner's weights when the plan has not synced since the
  previous sample (``executor.sync_weights_on_sample``, default true), so a plan written for the local executor acts
  with up-to-date weights on Ray too. With ``weights=None`` and a policy that is an ``nn.Module``, nothing is sent while
  none of its parameters and buffers has changed since the last sync (their version counters tell): acting state kept
  outside the module's tensors must be synced explicitly.
- **Synchronous sampling.** ``sample(num_steps, explore=True) -> list[SampleBatch]``: ``num_steps`` agent steps
  of every env copy of every worker, one batch per worker in worker order (time-major:
  ``rlrun/execution/sample_batch.py``); returns when all have arrived.
- **Asynchronous sampling.** ``sample_async(num_steps, explore=True, min_batches=1)`` is an iterator of
  ``(batch, worker_id)``. Every worker keeps up to ``executor.max_in_flight_per_worker`` sample requests pending;
  they keep running while the plan learns, between calls. A call blocks until ``min_batches`` batches have
  arrived, yields them and every other one that is ready, and ends. A worker's next request is sent when the plan
  asks for the next item after its batch, so a ``sync_weights(worker_ids=[w])`` in the loop body reaches worker
  ``w`` before its next rollout. Locally (one worker, same thread) it samples ``min_batches`` batches in turn.
- ``drain() -> list[(batch, worker_id)]``: wait for the requests in flight and return their rollouts, sending no
  new ones (before switching to synchronous sampling, or to leave the workers idle).
- ``num_envs`` (env copies over all workers), ``num_workers``, ``worker_pids()`` (for tests and fault
  injection), ``stop()``. Before building a worker set, a plan can read ``executor.num_workers`` and
  ``executor.num_envs_per_worker`` (e.g. to give each worker's policy its share of per-actor settings).
- **Worker-side hooks.** A worker calls its policy's optional ``reset_episodes(done_mask)`` after every env step
  and ``postprocess_batch(batch) -> batch`` once per rollout, in the worker's process (autograd enabled): the place
  for work that belongs with the actor (Ape-X initial priorities, A3C gradients). Data that is not one value per
  step goes into ``SampleBatch.info`` (tensors travel as numpy arrays). The time it takes is the ``postprocess``
  stage of ``executor.metrics()``.
- The executor has ``timer`` (a :class:`~rlrun.execution.timing.StageTimer` the plan times ``learn`` and
  ``replay`` with), ``metrics()`` (``time/<stage>_s`` since the last call and ``executor/worker_restarts``),
  ``state_dict()``/``load_state_dict()`` (workers' env copies and acting random streams, for checkpoints) and
  ``stop()``.

Seeds: env copy i of worker w is reset with ``seed + w * num_envs_per_worker + i``; worker w acts with its own
torch random stream seeded from ``(seed, w)`` (``rollout_worker.acting_seed``). So executor=local and executor=ray
with one worker sample the same transitions from the same weights.

Two optional arguments of ``executor.worker_set`` serve plans whose actors are not their learner (Ape-X):
``own_policies=True`` makes even a single local worker act with ``policy_factory(0)`` (weights copied in by
``sync_weights``, as on Ray), and ``info_by_reference=("transitions",)`` names ``SampleBatch.info`` entries that the
plan only forwards: on Ray they stay in the object store and the batch holds their object refs, so a rollout's
frames go from the worker to a replay shard without passing through the driver (locally they are the values
themselves). A ``postprocess_batch`` hook may drop the batch's observations (``obs`` and ``final_obs`` set to
None) once it has moved what the learner needs into ``info``; counts and episodes still come with the batch.

Replay shards (Ape-X) sit behind an interface of the same kind, ``executor.replay_shards(factory, num_shards)``:
``add``, ``sample_async``, ``update_priorities`` on in-process shards or shard actors; its contract is in
``rlrun/execution/replay_shards.py``.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np
import torch

from rlrun.errors import ConfigError
from rlrun.execution.rollout_worker import Policy
from rlrun.execution.sample_batch import SampleBatch

PolicyFactory = Callable[[int], Policy]
"""worker index -> the policy that worker acts with (built inside the worker process); must be picklable."""


class WorkerSet(Protocol):
    num_workers: int

    @property
    def num_envs(self) -> int: ...

    def sample(self, num_steps: int, explore: bool = True) -> list[SampleBatch]: ...

    def sample_async(self, num_steps: int, explore: bool = True,
                     min_batches: int = 1) -> Iterator[tuple[SampleBatch, int]]: ...

    def drain(self) -> list[tuple[SampleBatch, int]]: ...

    def sync_weights(self, weights: Any = None, worker_ids: Sequence[int] | None = None) -> None: ...

    def worker_pids(self) -> list[int]: ...

    def stop(self) -> None: ...


def get_policy_weights(policy: Any) -> Any:
    """The policy's ``get_weights()``, or its ``state_dict()`` when it has no such method."""
    get = getattr(policy, "get_weights", None)
    return get() if callable(get) else policy.state_dict()


def set_policy_weights(policy: Any, weights: Any) -> None:
    """The inverse of :func:`get_policy_weights`."""
    set_ = getattr(policy, "set_weights", None)
    if callable(set_):
        set_(weights)
    else:
        policy.load_state_dict(weights)


class WireTensor:
    """A tensor travelling between processes as a numpy array: Ray moves numpy arrays without pickling their bytes
    (a 6.7 MB Nature-CNN state dict: ~9 ms through the object store as numpy, ~20 ms as torch tensors here)."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __reduce__(self) -> tuple:
        return WireTensor, (self.array,)


def to_wire(value: Any) -> Any:
    """A nest (dicts, lists, tuples) for another process: tensors detached, on the CPU, as :class:`WireTensor`."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        try:
            return WireTensor(t.numpy())
        except TypeError:  # a dtype numpy lacks (bfloat16): as a tensor
            return t
    if isinstance(value, dict):
        return type(value)((k, to_wire(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(to_wire(v) for v in value)
    return value


def from_wire(value: Any) -> Any:
    """Inverse of :func:`to_wire`: tensors again (copied: the received arrays may be read-only views)."""
    if isinstance(value, WireTensor):
        return torch.from_numpy(np.array(value.array))
    if isinstance(value, dict):
        return type(value)((k, from_wire(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(from_wire(v) for v in value)
    return value


def tensor_versions(policy: Any) -> tuple | None:
    """What changes whenever a module's parameters or buffers change in place (an optimizer step, a
    ``load_state_dict``, a ``+=``): each tensor's identity and version counter; None for a non-module."""
    if not isinstance(policy, torch.nn.Module):
        return None
    return tuple((id(t), t._version) for t in itertools.chain(policy.parameters(), policy.buffers()))


class PolicyCopy:
    """The default policy factory of a remote worker: a pickled copy of the learner's policy object, taken when the
    worker set is built (weights then arrive through ``sync_weights``)."""

    MAX_BYTES = 256 * 2**20  # a bigger policy object (a replay memory inside?) needs a real policy_factory

    def __init__(self, policy: Any) -> None:
        size = policy_bytes(policy)
        if size > self.MAX_BYTES:
            raise ConfigError(f"the policy object has {size / 2**20:.0f} MiB of tensors (a replay memory inside it?): "
                              f"too much to copy into every remote rollout worker. The plan must pass "
                              f"executor.worker_set(..., policy_factory=...) building an acting-only policy.")
        self.policy = policy

    def __call__(self, worker_index: int) -> Any:
        return self.policy


def policy_bytes(policy: Any) -> int:
    """Bytes of the tensors of a policy object (``nn.Module``: its state dict); 0 when it has none."""
    state = getattr(policy, "state_dict", None)
    if not callable(state):
        return 0
    return sum(t.numel() * t.element_size() for t in state().values() if isinstance(t, torch.Tensor))
