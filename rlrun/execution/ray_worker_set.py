"""The worker-set interface (``rlrun/execution/worker_set.py``) over Ray actors (:class:`RayWorkerSet`): sampling
requests and their bounds, weights riding on requests, shared-memory slots lent per request, and fault handling
(a dead worker replaced, its lost request sent again). How the executor uses it: ``rlrun/execution/ray_executor.py``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.errors import ConfigError, RlrunError, one_line
from rlrun.execution.ray_actor import RemoteRolloutWorker, owned
from rlrun.execution.ray_placement import (
    await_placement,
    lost_errors,
    node_may_be_gone,
    through_client,
    worker_strategy,
)
from rlrun.execution.rollout_worker import Policy
from rlrun.execution.sample_batch import SampleBatch
from rlrun.execution.shared_memory_transfer import MIN_SHARED_BYTES, SharedArrays, Slot, SlotPool, slot_bytes
from rlrun.execution.shared_memory_transfer import available as shared_memory_available
from rlrun.execution.worker_set import (
    PolicyCopy,
    PolicyFactory,
    WireTensor,
    get_policy_weights,
    tensor_versions,
    to_wire,
)

log = logging.getLogger(__name__)


class RayWorkerSet:
    """The worker-set interface (``rlrun/execution/worker_set.py``) over Ray actors; see the module docstring.
    ``executor``: the :class:`~rlrun.execution.ray_executor.RayExecutor` that builds it (its settings, timer and
    restart counters)."""

    def __init__(self, executor: Any, policy: Policy, policy_factory: PolicyFactory | None,
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
        # Async requests ask for this many rollouts each (executor.rollouts_per_request); sync ones for one.
        self.rollouts_per_request = int(cfg.rollouts_per_request)
        if self.rollouts_per_request > 1 and self.info_by_reference:
            raise ConfigError(f"executor.rollouts_per_request={self.rollouts_per_request}: this algorithm's plan "
                              f"keeps rollout info ({', '.join(self.info_by_reference)}) in the object store, one "
                              f"object per rollout request; use executor.rollouts_per_request=1.")
        self._actor_class = ray.remote(num_cpus=float(cfg.cpus_per_worker), max_restarts=0, max_concurrency=1,
                                       scheduling_strategy=worker_strategy(cfg))(RemoteRolloutWorker)
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
            if cfg.observation_transfer == "shared_memory" and shared_memory_available() and not through_client() \
            else None
        self._obs_leaf_bytes = [int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize
                                for s in sp.flatten_space(self.space).values()]
        self._on_this_node: list[bool] = [False] * self.num_workers
        self._nodes: list[str | None] = [None] * self.num_workers  # the node each worker's actor started on
        self._driver_node = None if through_client() else ray.get_runtime_context().get_node_id()
        self._lent: dict[Any, Slot] = {}  # request -> the slot lent to it
        self.actors = [self._make_actor(w) for w in range(self.num_workers)]
        self._wait_ready()
        self.sync_weights()  # the workers start from the learner's weights (they go with the first requests)

    def _wait_ready(self) -> None:
        """Block until every actor is built (env copies made and reset), turning a failure into one clear error; a
        worker that no node has room for within ``START_TIMEOUT_S`` (other jobs' actors took the CPUs after this
        run counted them) is a PlacementError. A worker whose node is lost while it starts is replaced as after
        any other loss (counted, within ``executor.max_worker_restarts``): a node may go at any time."""
        from ray.exceptions import RayActorError, RayTaskError

        refs = [a.node_id.remote() for a in self.actors]
        for w, ref in enumerate(refs):
            try:
                node = await_placement(ref, f"rollout worker {w}", float(self.cfg.cpus_per_worker), START_TIMEOUT_S,
                                       again=False)
                self._nodes[w] = node
                self._on_this_node[w] = self._pool is not None and node == self._driver_node
            except (RayActorError, RayTaskError) as e:
                if isinstance(e, RayActorError) and not e.actor_init_failed:
                    self._restart(w, e)  # its process or node went before it ran: not a bad build
                    continue
                cause = getattr(e, "cause", None) or getattr(getattr(e, "error", None), "cause", None)
                if isinstance(cause, RlrunError):
                    raise cause from None
                raise RlrunError(f"executor=ray: a rollout worker could not start: {one_line(e)}") from None

    # ------------------------------------------------------------ workers

    @property
    def num_envs(self) -> int:
        return self.num_workers * self.envs_per_worker

    def _make_actor(self, w: int, avoid: frozenset[str] = frozenset()) -> Any:
        """Worker ``w``'s actor, on no node in ``avoid``. A replacement (after ``r`` restarts in all) seeds its env
        copies and acting stream past every seed the run has used (``seed + r * num_envs + w * num_envs_per_worker``).
        """
        seed, n = self.executor.seed, self.envs_per_worker
        r = self.executor.restarts
        env_seed = seed + r * self.num_envs + w * n
        actor_class = self._actor_class.options(scheduling_strategy=worker_strategy(self.cfg, avoid)) if avoid \
            else self._actor_class
        return actor_class.remote(self._env_factory_ref, self._factory_ref, w, w + r * self.num_workers, n,
                                        env_seed, seed, str(self.cfg.vector_mode), str(self.cfg.worker_device),
                                        int(self.cfg.worker_torch_threads))

    def _restart(self, w: int, error: BaseException, lost_requests: int = 0, rollouts_per_request: int = 1) -> None:
        """Replace worker ``w`` (its process or its node died): a new actor where the placement finds room, the
        rollouts it owed counted as lost (``executor/lost_env_steps``). Waits for the new actor to start; when no
        node has room for it within ``executor.restart_timeout_s``: a PlacementError (the run stops)."""

        ex = self.executor
        ex.lost_env_steps += int(lost_requests) * rollouts_per_request * self._async_args[0] * self.envs_per_worker
        avoid: set[str] = set()  # nodes this worker's failures point at; never the driver's, which outlives them
        while True:  # a replacement that dies while starting (its node was going too) is one more loss
            if node_may_be_gone(error) and self._nodes[w] not in (None, self._driver_node):
                avoid.add(self._nodes[w])
            try:
                self._replace(w, error, frozenset(avoid))
                return
            except lost_errors() as e:
                error = e

    def _replace(self, w: int, error: BaseException, avoid: frozenset[str]) -> None:
        """One try of :meth:`_restart`: count it, make the new actor, wait for it to start."""
        import ray

        ex = self.executor
        ex.restarts += 1
        if ex.restarts > int(self.cfg.max_worker_restarts):
            raise RlrunError(f"rollout worker {w} died ({one_line(error)}) and the run has restarted workers "
                             f"{ex.restarts - 1} times already (executor.max_worker_restarts="
                             f"{self.cfg.max_worker_restarts}); stopping.") from error
        log.warning("rollout worker %d died (%s); starting a new one (restart %d)", w, one_line(error), ex.restarts)
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
        self.actors[w] = self._make_actor(w, avoid)
        if self._pool is not None:  # its slots are not reused (the dead process might still write)
            self._pool.drop_worker(w)
        node = await_placement(self.actors[w].node_id.remote(), f"rollout worker {w} (lost: {one_line(error, 120)})",
                               float(self.cfg.cpus_per_worker), float(self.cfg.restart_timeout_s))
        self._nodes[w] = node
        self._on_this_node[w] = self._pool is not None and node == self._driver_node
        self._unsent[w] = self._weights[w] is not None  # the new actor gets the last weights with its first request

    def _fetch(self, ref: Any) -> SampleBatch:
        """A finished rollout: get it from the object store, rebuild it, count its stages."""
        return self._fetch_all(ref)[0]

    def _fetch_all(self, ref: Any) -> list[SampleBatch]:
        """The rollouts of a finished request (one, or ``rollouts_per_request`` of an async one): from the object
        store, rebuilt, their stages counted."""
        import ray

        t0 = time.perf_counter()
        info_refs = self._info_refs.pop(ref, None)
        slot = self._lent.pop(ref, None)
        try:
            got = ray.get(ref)
            batches = got if isinstance(got, list) else [got]
            if isinstance(batches[0].obs, SharedArrays):
                batches[0] = replace(batches[0], obs=sp.unflatten(self.space, self._pool.views(batches[0].obs)))
            batches = [owned(b) for b in batches]  # copies the observations out of the slot or the store
        finally:
            if slot is not None:
                self._pool.give_back(slot)
        if info_refs is not None:
            batches[0].info.update(zip(self.info_by_reference, info_refs, strict=True))
        transfer = time.perf_counter() - t0
        for batch in batches:
            self.timer.add("transfer", transfer / len(batches) + batch.transfer_seconds)
            self.timer.add("env_step", batch.env_seconds)
            self.timer.add("inference", batch.inference_seconds)
            if batch.postprocess_seconds:
                self.timer.add("postprocess", batch.postprocess_seconds)
        return batches

    def _wait(self, refs: list[Any], timeout: float | None, num_returns: int = 1) -> list[Any]:
        import ray

        t0 = time.perf_counter()
        ready, _ = ray.wait(refs, num_returns=num_returns, timeout=timeout)
        self.timer.add("wait", time.perf_counter() - t0)
        return ready

    # ------------------------------------------------------------ the interface

    def sample(self, num_steps: int, explore: bool = True) -> list[SampleBatch]:
        lost = lost_errors()
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
                except lost as e:
                    self._async_args = (int(num_steps), bool(explore))
                    self._restart(w, e, lost_requests=1)
                    todo[w] = self._request(w, num_steps, explore)
        return batches  # type: ignore[return-value]

    def _request(self, w: int, num_steps: int, explore: bool, rollouts: int = 1) -> Any:
        """Send worker ``w`` a sample request (``rollouts`` rollouts of ``num_steps``), with the weights it has not
        had yet."""
        weights = self._weights[w] if self._unsent[w] else None
        self._unsent[w] = False
        if rollouts > 1:  # several rollouts: through the object store (cheap envs' observations are small)
            return self.actors[w].sample_many.remote(num_steps, explore, weights, rollouts)
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
        if nbytes < MIN_SHARED_BYTES or not self._on_this_node[w]:
            return None
        return self._pool.lend(w, nbytes)

    def sample_async(self, num_steps: int, explore: bool = True,
                     min_batches: int = 1) -> Iterator[tuple[SampleBatch, int]]:
        lost = lost_errors()
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
                batches = self._fetch_all(ready[0])
            except lost as e:
                self._restart(w, e, lost_requests=self._in_flight[w] + 1,
                              rollouts_per_request=self.rollouts_per_request)
                self._top_up(w)
                continue
            try:
                for batch in batches:
                    got += 1
                    yield batch, w
            finally:
                self._top_up(w)  # after the plan's loop body: a weight sync there precedes the next request

    def drain(self) -> list[tuple[SampleBatch, int]]:
        """Wait for every request in flight (``sample_async``) and return their rollouts without sending new
        ones: after it, no worker is busy."""
        lost = lost_errors()
        out = []
        while self._pending:
            ready = self._wait(list(self._pending), None)
            w, generation = self._pending.pop(ready[0])
            if generation != self._generation[w]:
                self._info_refs.pop(ready[0], None)
                continue
            self._in_flight[w] -= 1
            try:
                out.extend((batch, w) for batch in self._fetch_all(ready[0]))
            except lost as e:
                self._restart(w, e, lost_requests=self._in_flight[w] + 1,
                              rollouts_per_request=self.rollouts_per_request)
        return out

    def _top_up(self, w: int) -> None:
        while self._in_flight[w] < int(self.cfg.max_in_flight_per_worker):
            ref = self._request(w, *self._async_args, rollouts=self.rollouts_per_request)
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

        lost = lost_errors()
        out = []
        for w in range(self.num_workers):
            while True:
                try:
                    out.append(ray.get(getattr(self.actors[w], method).remote(*args)))
                    break
                except lost as e:
                    self._restart(w, e, lost_requests=self._in_flight[w],
                                  rollouts_per_request=self.rollouts_per_request)
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


START_TIMEOUT_S = 300.0  # a first start (process, imports, env copies) may take long on a loaded node
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

