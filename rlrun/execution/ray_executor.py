"""The Ray executor: rollout workers as Ray actors, the learner (the plan) in the driver process.

``executor=ray`` starts a local Ray cluster (``ray.init(num_cpus=executor.num_cpus, include_dashboard=False)``)
unless Ray is running in this process already (a test's cluster) or ``executor.address`` names one (``auto``: the
cluster ``ray start`` made on this machine; ``ray://host:10001``: Ray Client). It shuts down only a cluster it
started. The worker-set contract is in ``rlrun/execution/worker_set.py``; here is how this executor keeps it.

- **Workers.** ``num_workers`` actors (:class:`RemoteRolloutWorker`, ``cpus_per_worker`` CPUs each), each a
  :class:`~rlrun.execution.rollout_worker.RolloutWorker` with ``num_envs_per_worker`` env copies and one torch
  thread (``worker_torch_threads``), acting with the policy its ``policy_factory(worker_index)`` builds.
- **Transfer.** A rollout comes back through Ray's object store in the form it was made in
  (``rlrun/execution/sample_batch.py``: each observation once, ``[T + 1, B]``, plus the final observations of
  the episodes that ended; there is no ``next_obs`` to drop or rebuild; 100 x 4 x 84 x 84 uint8 is 2.7 MiB:
  ~3 ms through the object store on this machine class). The driver copies the arrays out of the object store
  (:func:`owned`: writable, and the object is freed at once).
  ``observation_transfer=shared_memory`` (default) keeps a worker's observations out of the object store when it
  runs on the driver's node: each request carries a shared-memory slot the driver lends it, the worker writes the
  observations there, and the driver copies them out and lends the slot again
  (``rlrun/execution/shared_memory_transfer.py``; rollouts under 256 KiB of observations, workers on other nodes
  and ``object_store`` use the store).
- **Start-up.** A local cluster this executor starts has its workers import ``executor.preload_modules`` (torch
  and the worker code) as soon as Ray starts them, during ``ray.init``, so the imports overlap the driver's own
  set-up instead of delaying the first rollout.
- **Weights** ride on a worker's next sample request (no extra round trip): inline when small, otherwise put in
  the object store once and read by every worker.
- **Bounded in-flight requests and object lifetimes.** ``sample_async`` keeps at most
  ``max_in_flight_per_worker`` requests per worker; the driver holds no reference to a rollout after handing it to
  the plan, and at most one weights object per worker (the last one sent, re-sent to a restarted worker), so the
  object store holds O(num_workers x max_in_flight_per_worker) rollouts whatever the run's length.
  ``object_store_memory`` caps the store of a cluster this executor starts.
- **Fault handling.** A worker whose process dies (``RayActorError``) is replaced by a new actor (fresh env
  copies, seeded past every seed used so far, so it does not replay the same episodes; the last weights sent to
  it), its lost request is sent again, the run goes on and ``executor/worker_restarts`` counts it; more than
  ``max_worker_restarts`` restarts end the run with an error.
- **Replay shards** (``replay_shards()``, algo=apex; ``rlrun/execution/replay_shards.py``): one actor per shard
  (``cpus_per_replay_shard`` CPUs), fed straight from the workers' object refs (``info_by_reference``: the worker's
  sample task returns those info entries as objects of their own), at most ``replay_max_in_flight`` sample requests
  and ``replay_max_pending_ops`` unfinished adds/updates per shard; a dead shard is replaced empty and counted in
  ``executor/replay_shard_restarts`` (``max_replay_shard_restarts``).
- **Timing** (``metrics()``): ``time/env_step_s`` and ``time/inference_s`` summed over workers (they run in
  parallel, so the sum may exceed the wall time), ``time/transfer_s`` (the driver's share of moving rollouts and
  weights: getting, copying out, putting), ``time/wait_s`` (the driver blocked until a rollout was ready), and the
  plan's own ``learn``/``replay``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.errors import ConfigError, RlrunError
from rlrun.execution.rollout_worker import EnvFactory, Policy, RolloutWorker
from rlrun.execution.sample_batch import SampleBatch, map_nest
from rlrun.execution.shared_memory_transfer import (
    MIN_SHARED_BYTES,
    SharedArrays,
    Slot,
    SlotPool,
    SlotWriter,
    slot_bytes,
)
from rlrun.execution.shared_memory_transfer import available as shared_memory_available
from rlrun.execution.timing import StageTimer
from rlrun.execution.worker_set import (
    PolicyCopy,
    PolicyFactory,
    WireTensor,
    from_wire,
    get_policy_weights,
    set_policy_weights,
    tensor_versions,
    to_wire,
)

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------- transfer


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


# ---------------------------------------------------------------------------------------------------- worker set


class RayWorkerSet:
    """The worker-set interface (``rlrun/execution/worker_set.py``) over Ray actors; see the module docstring."""

    def __init__(self, executor: "RayExecutor", policy: Policy, policy_factory: PolicyFactory | None,
                 info_by_reference: Sequence[str] = ()) -> None:
        import ray

        cfg = executor.cfg
        # SampleBatch.info entries left in the object store: the batch carries their object refs instead.
        self.info_by_reference = tuple(info_by_reference)
        self._info_refs: dict[Any, list[Any]] = {}  # a rollout's ref -> the refs of its info entries
        self.executor, self.cfg, self.policy = executor, cfg, policy
        self.timer = executor.timer
        self.space = executor.env_factory.spec.observation_space
        self.num_workers = int(cfg.num_workers)
        self.envs_per_worker = int(cfg.num_envs_per_worker)
        self._actor_class = ray.remote(num_cpus=float(cfg.cpus_per_worker), max_restarts=0,
                                       max_concurrency=1)(RemoteRolloutWorker)
        self._factory_ref = ray.put(policy_factory if policy_factory is not None else PolicyCopy(policy))
        self._env_factory_ref = ray.put(executor.env_factory)
        self._weights: list[Any] = [None] * self.num_workers  # the last weights given to each worker
        self._unsent = [False] * self.num_workers  # worker w's next request carries self._weights[w]
        self._versions: list[tuple | None] = [None] * self.num_workers  # the learner policy's tensors when sent
        self._synced = False  # the plan synced since the last synchronous sample
        self._generation = [0] * self.num_workers
        self._pending: dict[Any, tuple[int, int]] = {}  # async request -> (worker, generation)
        self._in_flight = [0] * self.num_workers
        self._async_args: tuple[int, bool] = (1, True)
        # Shared-memory transfer of observations (rlrun/execution/shared_memory_transfer.py) for workers on this
        # process's node: per worker True/False, or the object ref of a new actor's node id not yet known.
        self._pool = SlotPool(int(cfg.max_in_flight_per_worker) + 1) \
            if cfg.observation_transfer == "shared_memory" and shared_memory_available() else None
        self._obs_leaf_bytes = [int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize
                                for s in sp.flatten_space(self.space).values()]
        self._on_this_node: list[Any] = [False] * self.num_workers
        self._lent: dict[Any, Slot] = {}  # request -> the slot lent to it
        self.actors = [self._make_actor(w) for w in range(self.num_workers)]
        self._wait_ready()
        self.sync_weights()  # the workers start from the learner's weights (they go with the first requests)

    def _wait_ready(self) -> None:
        """Block until every actor is built (env copies made and reset), turning a failure into one clear error."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        try:
            nodes = ray.get([a.node_id.remote() for a in self.actors])
        except (RayActorError, RayTaskError) as e:
            cause = getattr(e, "cause", None) or getattr(getattr(e, "error", None), "cause", None)
            if isinstance(cause, RlrunError):
                raise cause from None
            raise RlrunError(f"executor=ray: a rollout worker could not start: {_one_line(e)}") from None
        if self._pool is not None:
            here = ray.get_runtime_context().get_node_id()
            self._on_this_node = [node == here for node in nodes]

    def _shared_memory_for(self, w: int) -> bool:
        """Whether worker ``w`` shares this process's node (a replacement's answer is read once it is ready)."""
        import ray

        known = self._on_this_node[w]
        if isinstance(known, bool):
            return known
        ready, _ = ray.wait([known], timeout=0)
        if not ready:
            return False
        try:
            self._on_this_node[w] = ray.get(ready[0]) == ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - it died again: the restart path deals with that
            self._on_this_node[w] = False
        return self._on_this_node[w]

    # ------------------------------------------------------------ workers

    @property
    def num_envs(self) -> int:
        return self.num_workers * self.envs_per_worker

    def _make_actor(self, w: int) -> Any:
        """Worker ``w``'s actor. A replacement (after ``r`` restarts in all) seeds its env copies and acting stream
        past every seed the run has used (``seed + r * num_envs + w * num_envs_per_worker``)."""
        seed, n = self.executor.seed, self.envs_per_worker
        r = self.executor.restarts
        env_seed = seed + r * self.num_envs + w * n
        return self._actor_class.remote(self._env_factory_ref, self._factory_ref, w, w + r * self.num_workers, n,
                                        env_seed, seed, str(self.cfg.vector_mode), str(self.cfg.worker_device),
                                        int(self.cfg.worker_torch_threads))

    def _restart(self, w: int, error: BaseException) -> None:
        import ray

        ex = self.executor
        ex.restarts += 1
        if ex.restarts > int(self.cfg.max_worker_restarts):
            raise RlrunError(f"rollout worker {w} died ({_one_line(error)}) and the run has restarted workers "
                             f"{ex.restarts - 1} times already (executor.max_worker_restarts="
                             f"{self.cfg.max_worker_restarts}); stopping.") from error
        log.warning("rollout worker %d died (%s); starting a new one (restart %d)", w, _one_line(error), ex.restarts)
        try:
            ray.kill(self.actors[w], no_restart=True)
        except Exception:  # noqa: BLE001 - it is dead already
            pass
        self._generation[w] += 1
        self._in_flight[w] = 0
        for ref in [r for r, (wid, _) in self._pending.items() if wid == w]:
            del self._pending[ref]
            self._info_refs.pop(ref, None)
            self._lent.pop(ref, None)
        self.actors[w] = self._make_actor(w)
        if self._pool is not None:  # its slots are not reused (the dead process might still write)
            self._pool.drop_worker(w)
            self._on_this_node[w] = self.actors[w].node_id.remote()
        self._unsent[w] = self._weights[w] is not None  # the new actor gets the last weights with its first request

    def _fetch(self, ref: Any) -> SampleBatch:
        """A finished rollout: get it from the object store, rebuild it, count its stages."""
        import ray

        t0 = time.perf_counter()
        info_refs = self._info_refs.pop(ref, None)
        slot = self._lent.pop(ref, None)
        try:
            batch = ray.get(ref)
            if isinstance(batch.obs, SharedArrays):
                batch = replace(batch, obs=sp.unflatten(self.space, self._pool.views(batch.obs)))
            batch = owned(batch)  # copies the observations out of the slot or the store
        finally:
            if slot is not None:
                self._pool.give_back(slot)
        if info_refs is not None:
            batch.info.update(zip(self.info_by_reference, info_refs, strict=True))
        self.timer.add("transfer", time.perf_counter() - t0 + batch.transfer_seconds)
        self.timer.add("env_step", batch.env_seconds)
        self.timer.add("inference", batch.inference_seconds)
        if batch.postprocess_seconds:
            self.timer.add("postprocess", batch.postprocess_seconds)
        return batch

    def _wait(self, refs: list[Any], timeout: float | None, num_returns: int = 1) -> list[Any]:
        import ray

        t0 = time.perf_counter()
        ready, _ = ray.wait(refs, num_returns=num_returns, timeout=timeout)
        self.timer.add("wait", time.perf_counter() - t0)
        return ready

    # ------------------------------------------------------------ the interface

    def sample(self, num_steps: int, explore: bool = True) -> list[SampleBatch]:
        from ray.exceptions import RayActorError

        if self.cfg.sync_weights_on_sample and not self._synced:
            self.sync_weights()
        self._synced = False
        batches: list[SampleBatch | None] = [None] * self.num_workers
        todo = {w: self._request(w, num_steps, explore) for w in range(self.num_workers)}
        while todo:
            self._wait(list(todo.values()), None, len(todo))
            for w, ref in list(todo.items()):
                try:
                    batches[w] = self._fetch(ref)
                    del todo[w]
                except RayActorError as e:
                    self._restart(w, e)
                    todo[w] = self._request(w, num_steps, explore)
        return batches  # type: ignore[return-value]

    def _request(self, w: int, num_steps: int, explore: bool) -> Any:
        """Send worker ``w`` a sample request, with the weights it has not had yet."""
        weights = self._weights[w] if self._unsent[w] else None
        self._unsent[w] = False
        slot = self._lend(w, num_steps)
        if self.info_by_reference:
            refs = self.actors[w].sample_split.options(num_returns=1 + len(self.info_by_reference)).remote(
                num_steps, explore, weights, self.info_by_reference, slot)
            self._info_refs[refs[0]] = list(refs[1:])
            ref = refs[0]
        else:
            ref = self.actors[w].sample.remote(num_steps, explore, weights, slot)
        if slot is not None:
            self._lent[ref] = slot
        return ref

    def _lend(self, w: int, num_steps: int) -> Slot | None:
        """A shared-memory slot for worker ``w``'s next rollout of ``num_steps`` steps, or None (object store):
        observations too small to gain, a worker on another node, or every slot of the worker lent."""
        if self._pool is None:
            return None
        nbytes = slot_bytes(self._obs_leaf_bytes, (int(num_steps) + 1) * self.envs_per_worker)  # obs [T + 1, B]
        if nbytes < MIN_SHARED_BYTES or not self._shared_memory_for(w):
            return None
        return self._pool.lend(w, nbytes)

    def sample_async(self, num_steps: int, explore: bool = True,
                     min_batches: int = 1) -> Iterator[tuple[SampleBatch, int]]:
        from ray.exceptions import RayActorError

        self._async_args = (int(num_steps), bool(explore))
        for w in range(self.num_workers):
            self._top_up(w)
        got = 0
        last: set[Any] | None = None  # once min_batches arrived: the requests ready then, the last ones yielded
        while self._pending:
            if got >= min_batches and last is None:
                last = set(self._wait(list(self._pending), 0, len(self._pending)))
            if last is not None:  # requests sent since (top-ups) wait for the next call: the call ends
                ready = [ref for ref in self._pending if ref in last][:1]
                if not ready:
                    return
            else:
                ready = self._wait(list(self._pending), None)
            w, generation = self._pending.pop(ready[0])
            if generation != self._generation[w]:
                self._info_refs.pop(ready[0], None)
                continue  # a request to an actor that has been replaced
            self._in_flight[w] -= 1
            try:
                batch = self._fetch(ready[0])
            except RayActorError as e:
                self._restart(w, e)
                self._top_up(w)
                continue
            got += 1
            try:
                yield batch, w
            finally:
                self._top_up(w)  # after the plan's loop body: a weight sync there precedes the next request

    def drain(self) -> list[tuple[SampleBatch, int]]:
        """Wait for every request in flight (``sample_async``) and return their rollouts without sending new
        ones: after it, no worker is busy."""
        from ray.exceptions import RayActorError

        out = []
        while self._pending:
            ready = self._wait(list(self._pending), None)
            w, generation = self._pending.pop(ready[0])
            if generation != self._generation[w]:
                self._info_refs.pop(ready[0], None)
                continue
            self._in_flight[w] -= 1
            try:
                out.append((self._fetch(ready[0]), w))
            except RayActorError as e:
                self._restart(w, e)
        return out

    def _top_up(self, w: int) -> None:
        while self._in_flight[w] < int(self.cfg.max_in_flight_per_worker):
            ref = self._request(w, *self._async_args)
            self._pending[ref] = (w, self._generation[w])
            self._in_flight[w] += 1

    def sync_weights(self, weights: Any = None, worker_ids: Sequence[int] | None = None) -> None:
        import ray

        self._synced = True
        targets = list(range(self.num_workers) if worker_ids is None else worker_ids)
        version = tensor_versions(self.policy) if weights is None else None
        if version is not None:
            targets = [w for w in targets if self._versions[w] != version]  # unchanged since their last sync
            if not targets:
                return
        with self.timer("transfer"):
            value = to_wire(get_policy_weights(self.policy) if weights is None else weights)
            # Small weights ride inline in the requests; big ones are put in the object store once for all.
            if len(targets) > 1 and _nbytes(value) > INLINE_WEIGHTS_BYTES:
                value = ray.put(value)
            for w in targets:
                self._weights[w] = value
                self._unsent[w] = True
                self._versions[w] = version

    def _call_all(self, method: str, *args: Any) -> list[Any]:
        """``method`` of every worker (after the requests sent to it before); a dead worker is replaced first."""
        import ray
        from ray.exceptions import RayActorError

        out = []
        for w in range(self.num_workers):
            while True:
                try:
                    out.append(ray.get(getattr(self.actors[w], method).remote(*args)))
                    break
                except RayActorError as e:
                    self._restart(w, e)
        return out

    def worker_pids(self) -> list[int]:
        return self._call_all("pid")

    def get_states(self) -> list[dict[str, Any]]:
        return self._call_all("get_state")

    def set_states(self, states: list[dict[str, Any]]) -> bool:
        import ray

        return all(ray.get([a.set_state.remote(s) for a, s in zip(self.actors, states, strict=True)]))

    def stop(self) -> None:
        import ray

        try:
            ray.get([a.close.remote() for a in self.actors], timeout=10)
        except Exception:  # noqa: BLE001 - a dead or stuck worker is killed below anyway
            pass
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []
        self._pending.clear()
        self._info_refs.clear()
        self._lent.clear()
        if self._pool is not None:
            self._pool.close()


OBSERVATION_TRANSFERS = ("shared_memory", "object_store")
INLINE_WEIGHTS_BYTES = 256 * 1024  # weights smaller than this are sent inside each request instead of ray.put


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, WireTensor):
        return value.array.nbytes
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:200] + ("..." if len(text) > 200 else "") or type(e).__name__


# ---------------------------------------------------------------------------------------------------- executor


class RayExecutor:
    """Builds :class:`RayWorkerSet` s on a Ray cluster; see the module docstring."""

    def __init__(self, cfg: Any, env_factory: EnvFactory, seed: int) -> None:
        _validate(cfg)
        self.cfg, self.env_factory, self.seed = cfg, env_factory, seed
        self.timer = StageTimer()
        self.restarts = 0
        self.replay_restarts = 0  # replay shard actors replaced (rlrun/execution/replay_shards.py)
        self._worker_sets: list[RayWorkerSet] = []
        self._replay_shard_sets: list[Any] = []
        self._started_ray = False
        import ray

        start = time.perf_counter()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                                      "log_to_driver": True}
            address = cfg.address or os.environ.get("RAY_ADDRESS")  # ray.init() itself would connect there
            if address:
                kwargs["address"] = str(address)
            else:
                kwargs["num_cpus"] = int(cfg.num_cpus) if cfg.num_cpus is not None else os.cpu_count()
                if cfg.object_store_memory is not None:
                    kwargs["object_store_memory"] = int(cfg.object_store_memory)
                kwargs["_system_config"] = {"worker_niceness": int(cfg.worker_niceness)}
                if cfg.get("preload_modules"):  # imported by the workers Ray starts ahead, while the driver works
                    kwargs["_system_config"]["preload_python_modules"] = [str(m) for m in cfg.preload_modules]
            try:
                ray.init(**kwargs)
            except Exception as e:  # noqa: BLE001 - e.g. no cluster at executor.address
                raise RlrunError(f"executor=ray: cannot start or reach a Ray cluster "
                                 f"(address={address or 'a new local cluster'}): {_one_line(e)}") from None
            self._started_ray = not address
        self.init_seconds = time.perf_counter() - start
        cpus = ray.cluster_resources().get("CPU", 0.0)
        need = int(cfg.num_workers) * float(cfg.cpus_per_worker)
        if need > cpus:
            self.stop()
            raise ConfigError(f"executor.num_workers={cfg.num_workers} x executor.cpus_per_worker="
                              f"{cfg.cpus_per_worker} needs {need:g} CPUs but the Ray cluster has {cpus:g}: the "
                              f"workers would wait forever. Lower them, or raise executor.num_cpus.")

    @property
    def num_workers(self) -> int:
        """Rollout workers (actors) of every worker set this executor builds."""
        return int(self.cfg.num_workers)

    @property
    def num_envs_per_worker(self) -> int:
        return int(self.cfg.num_envs_per_worker)

    def worker_set(self, policy: Policy, device: torch.device | str = "cpu",
                   policy_factory: PolicyFactory | None = None, own_policies: bool = False,
                   info_by_reference: Sequence[str] = ()) -> RayWorkerSet:
        """``num_workers`` remote workers; each acts with ``policy_factory(worker_index)`` (default: a copy of
        ``policy``) and gets the learner's weights through ``sync_weights``. ``device`` is the learner's; the
        workers act on ``executor.worker_device``. ``own_policies``: remote workers always have their own (the
        flag is for the local executor). ``info_by_reference``: those ``SampleBatch.info`` entries stay in the
        object store and the batch holds their object refs (to hand to replay shards unread)."""
        import ray

        free = ray.available_resources().get("CPU", 0.0)
        need = int(self.cfg.num_workers) * float(self.cfg.cpus_per_worker)
        if need > free + 1e-9:
            raise ConfigError(f"executor=ray: {self.cfg.num_workers} workers x {self.cfg.cpus_per_worker} CPUs need "
                              f"{need:g} free CPUs but the Ray cluster has {free:g} free (other actors hold the rest): "
                              f"the workers would wait forever. Lower executor.cpus_per_worker or num_workers.")
        if policy_factory is None and torch.device(device).type != "cpu":
            raise ConfigError(f"executor=ray with the learner on {device}: the plan must pass a policy_factory to "
                              f"worker_set() (a copy of a {device} policy cannot be unpickled in a CPU worker).")
        ws = RayWorkerSet(self, policy, policy_factory, info_by_reference)
        self._worker_sets.append(ws)
        return ws

    def replay_shards(self, factory: Any, num_shards: int) -> Any:
        """``num_shards`` replay shard actors, ``factory(i)`` each (``rlrun/execution/replay_shards.py``), with
        ``executor.cpus_per_replay_shard`` CPUs each."""
        from rlrun.execution.replay_shards import RayReplayShardSet

        shards = RayReplayShardSet(self, factory, num_shards)
        self._replay_shard_sets.append(shards)
        return shards

    def metrics(self) -> dict[str, float]:
        """``time/<stage>_s`` since the last call, and ``executor/worker_restarts`` (since the run started); with
        replay shards also ``executor/replay_shard_restarts``."""
        out = {**self.timer.report(), "executor/worker_restarts": self.restarts}
        if self._replay_shard_sets:
            out["executor/replay_shard_restarts"] = self.replay_restarts
        return out

    def state_dict(self) -> dict[str, Any]:
        """Every remote worker's state (as the local executor's, read in the workers). Exact for synchronous
        sampling; rollouts in flight (``sample_async``) are not in it."""
        states = [ws.get_states() for ws in self._worker_sets]
        return {"worker_sets": [[s["worker"] for s in ss] for ss in states],
                "worker_rngs": [[s["rng"] for s in ss] for ss in states]}

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        from rlrun.errors import CheckpointError

        saved, rngs = state.get("worker_sets", []), state.get("worker_rngs")
        if [len(s) for s in saved] != [ws.num_workers for ws in self._worker_sets] or rngs is None:
            raise CheckpointError(f"the checkpoint holds {[len(s) for s in saved]} workers per worker set but the run "
                                  f"has {[ws.num_workers for ws in self._worker_sets]}")
        exact = True
        for ws, ws_state, ws_rngs in zip(self._worker_sets, saved, rngs, strict=True):
            exact = ws.set_states([{"worker": s, "rng": r} for s, r in zip(ws_state, ws_rngs, strict=True)]) and exact
        return exact

    def stop(self) -> None:
        for ws in self._worker_sets:
            ws.stop()
        self._worker_sets.clear()
        for shards in self._replay_shard_sets:
            shards.stop()
        self._replay_shard_sets.clear()
        if self._started_ray:
            import ray

            ray.shutdown()
            self._started_ray = False


def _validate(cfg: Any) -> None:
    # each key's range and choices are declared on RayExecutorConfig (rlrun.schema); here only what spans keys
    if cfg.address and cfg.num_cpus is not None:
        log.warning("executor.num_cpus=%s is ignored: executor.address=%s names an existing cluster",
                    cfg.num_cpus, cfg.address)
