"""Replay shards: a prioritised replay memory split over several shards, behind one interface on every executor.

Ape-X (Horgan et al. 2018, Sec. 3) keeps its replay apart from the learner, and RLlib Flow's Ape-X plan shards it
over several actors so that storing rollouts and sampling batches do not queue behind one process. A plan gets a
shard set from its executor and never imports ``ray``::

    self.replay = executor.replay_shards(factory, num_shards)        # factory(shard_index) -> a built memory
    self.replay.add(payload)                                          # round-robin over the shards
    for (records, indices, weights), shard in self.replay.sample_async(batch_size, num_batches):
        info = self.agent.update(records, weights)
        self.replay.update_priorities(shard, indices, info["td_error"])

The contract (``executor=local`` and ``executor=ray`` both keep it; ``tests/execution/test_replay_shards.py``):

- ``executor.replay_shards(factory, num_shards) -> ReplayShardSet``. ``factory(shard_index)`` (picklable; run in
  the shard's process) returns a *built* memory with the API of
  :class:`~rlrun.components.prioritized_replay.PrioritizedReplayMemory`: ``insert(records, td_errors)``,
  ``sample(batch_size) -> (records, indices, weights)``, ``update_priorities(indices, td_errors)``, ``size()``.
- **Payloads.** ``add(payload, shard=None)`` stores ``{"records": <nest of arrays, leading rank K>,
  "priorities": [K] | None}`` (priorities ``None``: the memory's largest so far) in shard ``shard``, or in the next
  shard round-robin. ``payload`` may also be what a worker set handed over in place of a ``SampleBatch.info`` entry
  named in ``worker_set(..., info_by_reference=...)``: on Ray an object reference, so the frames go from the
  rollout worker to the shard without passing through the driver.
- **Sampling.** ``sample_async(batch_size, num_batches)`` yields ``((records, indices, weights), shard_id)``
  ``num_batches`` times (fewer when no shard holds anything), the shards in turn; on Ray up to
  ``executor.replay_max_in_flight`` sample requests stay pending, also between calls (bounded prefetch, as in
  RLlib's ``Replay(num_async=...)``), so a batch may have been drawn before the previous priority update.
  ``sample(batch_size)`` is one such item, or None. Each shard draws and weights its batch by its own priorities
  (``w_i`` normalised within the shard).
- ``update_priorities(shard_id, indices, priorities)`` sets ``|priorities| + eps`` (asynchronously on Ray); indices
  past what the shard holds (a batch drawn from a shard since replaced) are ignored.
- ``size()`` (records held over all shards; on Ray as last reported by the shards), ``num_shards``,
  ``shard_pids()`` (fault injection in tests), ``restarts``, ``state_dict()``/``load_state_dict()``, ``stop()``.
- **Bounds and faults (Ray).** Adds and priority updates not yet finished are at most
  ``executor.replay_max_pending_ops`` per shard (the driver waits beyond that), so neither the object store nor a
  shard's mailbox grows with the run. A shard actor that dies is replaced by an empty one (its records are lost, as
  when an Ape-X replay server restarts), the run goes on, and ``executor/replay_shard_restarts`` counts it; more
  than ``executor.max_replay_shard_restarts`` end the run with an error.
- **Checkpoints.** The local set is an ``nn.Module`` holding its memories, so ``rlrun.checkpoint`` leaves them out
  under ``checkpoint.replay=false`` as it does DQN's memory. The Ray set's ``state_dict()`` holds the records each
  shard has (not its empty capacity), read from the actors.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Iterator, Protocol

import numpy as np
import torch

from rlrun.errors import CheckpointError, ConfigError, RlrunError, one_line
from rlrun.execution.ray_placement import await_placement, lost_errors, shard_strategy
from rlrun.execution.timing import StageTimer
from rlrun.execution.worker_set import from_wire, to_wire

log = logging.getLogger(__name__)

ShardFactory = Callable[[int], Any]
"""shard index -> a built prioritised memory (run in the shard's process); must be picklable."""

Samples = tuple[Any, torch.Tensor, torch.Tensor]
"""(records, indices [B] int64, importance weights [B] float32), as ``PrioritizedReplayMemory.sample`` returns."""


class ReplayShardSet(Protocol):
    num_shards: int
    restarts: int

    def add(self, payload: Any, shard: int | None = None) -> None: ...

    def sample(self, batch_size: int) -> tuple[Samples, int] | None: ...

    def sample_async(self, batch_size: int, num_batches: int) -> Iterator[tuple[Samples, int]]: ...

    def update_priorities(self, shard: int, indices: Any, priorities: Any) -> None: ...

    def size(self) -> int: ...

    def shard_pids(self) -> list[int]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> Any: ...

    def stop(self) -> None: ...


# ---------------------------------------------------------------------------------------------------- one shard


class ReplayShard:
    """One shard: a memory from ``factory(index)`` and the calls a shard set makes on it. The same object serves
    in-process (executor=local) and as a Ray actor (executor=ray); values that cross processes are wire nests
    (``worker_set.to_wire``)."""

    def __init__(self, factory: ShardFactory, index: int, torch_threads: int | None = None) -> None:
        if torch_threads is not None:
            torch.set_num_threads(int(torch_threads))
        self.index = int(index)
        self.memory = factory(self.index)

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this shard runs on (as an actor; its placement: ``rlrun/execution/ray_placement.py``)."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def add(self, payload: dict[str, Any]) -> int:
        """Insert ``payload["records"]`` with ``payload["priorities"]`` as initial |TD| (None: the max so far);
        returns the records held after it."""
        payload = _writable(from_wire(payload))  # arrays read from Ray's object store are read-only views
        records, priorities = payload["records"], payload.get("priorities")
        if _rows(records):
            self.memory.insert(records, priorities)
        return self.memory.size()

    def sample(self, batch_size: int, wire: bool = False) -> Samples | None:
        """A prioritised batch, or None while the shard is empty."""
        if self.memory.size() == 0:
            return None
        samples = self.memory.sample(int(batch_size))
        return to_wire(samples) if wire else samples

    def update_priorities(self, indices: Any, priorities: Any) -> int:
        """Set priorities of the slots held; slots past the records held (drawn before a restart) are skipped.
        Returns how many were set."""
        idx = torch.as_tensor(from_wire(indices)).reshape(-1)
        prio = torch.as_tensor(from_wire(priorities)).reshape(-1)
        keep = idx < self.memory.size()
        if not bool(keep.all()):
            idx, prio = idx[keep], prio[keep]
        if idx.numel():
            self.memory.update_priorities(idx, prio)
        return int(idx.numel())

    def size(self) -> int:
        return self.memory.size()

    def get_state(self) -> dict[str, Any]:
        """The memory's state dict with only the rows held (not the empty rest of its capacity), as wire tensors."""
        rows = rows_held(self.memory)
        state = {k: (v[:rows[k]] if k in rows else v) for k, v in self.memory.state_dict().items()}
        return to_wire(state)

    def set_state(self, state: dict[str, Any]) -> int:
        state = from_wire(state)
        full = dict(self.memory.named_buffers())  # at capacity (a memory's state_dict is trimmed to its rows)
        rows = rows_held(self.memory)
        for key, value in state.items():
            if key in rows:
                buf = full[key].clone()
                buf[: value.shape[0]] = value
                state[key] = buf
        self.memory.load_state_dict(state)
        return self.memory.size()


def rows_held(memory: Any) -> dict[str, int]:
    """State-dict keys of a memory's per-row storage -> rows in use (records held; written frames of a frame
    store): a shard's state carries only those rows."""
    count = memory.size()
    rows = {k: count for k in memory.state_dict() if k.startswith("store_")}
    frames = getattr(memory, "frames", None)
    if frames is not None:
        rows.update({f"frames.{frames._ids(k)}": count for k in frames.keys})
        rows["frames.min_serial"] = count
        rows["frames.frames"] = min(int(frames.written), frames.frame_capacity)
    return rows


def _writable(value: Any) -> Any:
    """A nest with every read-only numpy array copied (torch warns on read-only arrays)."""
    if isinstance(value, dict):
        return {k: _writable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return np.array(value)
    return value


def _rows(records: Any) -> int:
    while isinstance(records, dict):
        records = next(iter(records.values()))
    return int(records.shape[0])


# ---------------------------------------------------------------------------------------------------- local


class LocalReplayShardSet(torch.nn.Module):
    """The shard-set interface with in-process shards (a module holding their memories, so checkpoints see them).

    Everything is synchronous and in one thread: ``sample_async`` draws its batches one after another."""

    def __init__(self, factory: ShardFactory, num_shards: int, timer: StageTimer | None = None) -> None:
        super().__init__()
        if int(num_shards) < 1:
            raise ConfigError(f"replay shards: num_shards={num_shards}: must be at least 1.")
        self.shards = [ReplayShard(factory, i) for i in range(int(num_shards))]
        self.memories = torch.nn.ModuleList([s.memory for s in self.shards])
        self.timer = timer
        self.restarts = 0
        # Round-robin positions (buffers: saved with the memories' state, restored for an exact resume).
        self.register_buffer("next_add", torch.zeros((), dtype=torch.int64))
        self.register_buffer("next_sample", torch.zeros((), dtype=torch.int64))

    @property
    def num_shards(self) -> int:
        return len(self.shards)

    def add(self, payload: Any, shard: int | None = None) -> None:
        if shard is None:
            shard = int(self.next_add)
            self.next_add.fill_((shard + 1) % self.num_shards)
        self.shards[shard].add(payload)

    def sample(self, batch_size: int) -> tuple[Samples, int] | None:
        """The next non-empty shard's batch (round-robin), or None when every shard is empty."""
        for _ in range(self.num_shards):
            shard = int(self.next_sample)
            self.next_sample.fill_((shard + 1) % self.num_shards)
            samples = self.shards[shard].sample(batch_size)
            if samples is not None:
                return samples, shard
        return None

    def sample_async(self, batch_size: int, num_batches: int) -> Iterator[tuple[Samples, int]]:
        for _ in range(int(num_batches)):
            item = self.sample(batch_size)
            if item is None:
                return
            yield item

    def update_priorities(self, shard: int, indices: Any, priorities: Any) -> None:
        self.shards[shard].update_priorities(indices, priorities)

    def size(self) -> int:
        return sum(s.size() for s in self.shards)

    def shard_sizes(self) -> list[int]:
        return [s.size() for s in self.shards]

    def shard_pids(self) -> list[int]:
        return [os.getpid()] * self.num_shards

    def stop(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------------- ray


class RayReplayShardSet:
    """The shard-set interface over Ray actors (one :class:`ReplayShard` each); built by ``RayExecutor``."""

    def __init__(self, executor: Any, factory: ShardFactory, num_shards: int) -> None:
        import ray

        if int(num_shards) < 1:
            raise ConfigError(f"replay shards: num_shards={num_shards}: must be at least 1.")
        cfg = executor.cfg
        self.executor, self.cfg = executor, cfg
        self.timer: StageTimer = executor.timer
        self.num_shards = int(num_shards)
        self.max_in_flight = int(cfg.replay_max_in_flight)
        self.max_pending_ops = int(cfg.replay_max_pending_ops)
        self._actor_class = ray.remote(num_cpus=float(cfg.cpus_per_replay_shard), max_restarts=0,
                                       max_concurrency=1)(ReplayShard)
        self._factory_ref = ray.put(factory)
        self._generation = [0] * self.num_shards
        self._nodes: list[str | None] = [None] * self.num_shards  # where each shard's actor was asked to run
        self._sizes = [0] * self.num_shards  # records held, as last reported by each shard
        self._added = [0] * self.num_shards  # adds sent to the shard's current actor
        self._ops: dict[Any, tuple[int, int, str]] = {}  # add / update_priorities refs -> (shard, generation, kind)
        self._samples: dict[Any, tuple[int, int]] = {}  # sample requests in flight -> (shard, generation)
        self._next_add = 0
        self._next_sample = 0
        self.actors = [self._make_actor(i) for i in range(self.num_shards)]
        for i, ref in enumerate([a.pid.remote() for a in self.actors]):
            try:
                ray.get(ref)
            except lost_errors() as e:
                if getattr(e, "actor_init_failed", False):
                    self.stop()
                    raise RlrunError(f"executor=ray: a replay shard could not start: {one_line(e)}") from None
                self._restart(i, e)  # its node went while it started: replaced as after any other loss
            except Exception as e:  # noqa: BLE001 - one clear error for a shard that cannot start
                self.stop()
                raise RlrunError(f"executor=ray: a replay shard could not start: {one_line(e)}") from None

    @property
    def restarts(self) -> int:
        return int(self.executor.replay_restarts)

    def _make_actor(self, i: int, avoid: frozenset[str] = frozenset()) -> Any:
        strategy = shard_strategy(i, self.cfg.cpus_per_replay_shard, avoid)
        self._nodes[i] = getattr(strategy, "node_id", None)
        return self._actor_class.options(scheduling_strategy=strategy).remote(
            self._factory_ref, i, int(self.cfg.worker_torch_threads))

    def _restart(self, i: int, error: BaseException) -> None:
        """Replace shard ``i`` (its process or its node died) by an empty one on another node; a replacement that
        dies while starting (its node was going too) is one more loss, replaced in turn, within the restart limit."""
        import ray

        ex = self.executor
        avoid = {self._nodes[i]} - {None}
        while True:
            ex.replay_restarts += 1
            if ex.replay_restarts > int(self.cfg.max_replay_shard_restarts):
                raise RlrunError(f"replay shard {i} died ({one_line(error)}) and the run has restarted replay shards "
                                 f"{ex.replay_restarts - 1} times already (executor.max_replay_shard_restarts="
                                 f"{self.cfg.max_replay_shard_restarts}); stopping.") from error
            log.warning("replay shard %d died (%s); starting an empty one (restart %d)", i, one_line(error),
                        ex.replay_restarts)
            try:
                ray.kill(self.actors[i], no_restart=True)
            except Exception:  # noqa: BLE001 - it is dead already
                pass
            self._generation[i] += 1
            self._sizes[i] = self._added[i] = 0
            for table in (self._ops, self._samples):
                for ref in [r for r, v in table.items() if v[0] == i]:
                    del table[ref]
            self.actors[i] = self._make_actor(i, frozenset(avoid))
            try:
                await_placement(self.actors[i].pid.remote(), f"replay shard {i} (lost: {one_line(error, 120)})",
                                float(self.cfg.cpus_per_replay_shard), float(self.cfg.restart_timeout_s))
                return
            except lost_errors() as e:  # died while starting: its node is going too
                error = e
                avoid |= {self._nodes[i]} - {None}

    def _settle(self, refs: list[Any]) -> None:
        """Collect finished adds / priority updates among ``refs`` (all ready): sizes, or a dead shard."""
        import ray

        lost = lost_errors()
        for ref in refs:
            entry = self._ops.pop(ref, None)
            if entry is None:
                continue
            shard, generation, kind = entry
            try:
                value = ray.get(ref)
            except lost as e:
                if generation == self._generation[shard]:
                    self._restart(shard, e)
                continue
            if kind == "add" and generation == self._generation[shard]:
                self._sizes[shard] = int(value)

    def _reap(self) -> None:
        import ray

        if self._ops:
            ready, _ = ray.wait(list(self._ops), num_returns=len(self._ops), timeout=0)
            self._settle(ready)

    def _bound(self, shard: int) -> None:
        """Wait while shard ``shard`` has more than ``replay_max_pending_ops`` unfinished adds/updates."""
        import ray

        while True:
            mine = [r for r, (s, _, _) in self._ops.items() if s == shard]
            if len(mine) <= self.max_pending_ops:
                return
            t0 = time.perf_counter()
            ready, _ = ray.wait(mine, num_returns=len(mine) - self.max_pending_ops)
            self.timer.add("replay_wait", time.perf_counter() - t0)
            self._settle(ready)

    def _send(self, shard: int, kind: str, method: str, *args: Any) -> None:
        ref = getattr(self.actors[shard], method).remote(*args)
        self._ops[ref] = (shard, self._generation[shard], kind)
        self._bound(shard)

    # ------------------------------------------------------------ the interface

    def add(self, payload: Any, shard: int | None = None) -> None:
        if shard is None:
            shard = self._next_add
            self._next_add = (shard + 1) % self.num_shards
        self._added[shard] += 1
        self._send(shard, "add", "add", payload if _is_ref(payload) else to_wire(payload))
        self._reap()

    def _top_up(self, batch_size: int) -> None:
        """Send sample requests, round-robin over the shards that have had records sent to them."""
        for _ in range(self.num_shards * self.max_in_flight):
            if len(self._samples) >= self.max_in_flight:
                return
            shard = self._next_sample
            self._next_sample = (shard + 1) % self.num_shards
            if self._added[shard] == 0 and self._sizes[shard] == 0:
                continue
            ref = self.actors[shard].sample.remote(int(batch_size), True)
            self._samples[ref] = (shard, self._generation[shard])

    def sample_async(self, batch_size: int, num_batches: int) -> Iterator[tuple[Samples, int]]:
        import ray

        lost = lost_errors()
        got = 0
        while got < int(num_batches):
            self._top_up(batch_size)
            if not self._samples:
                return
            t0 = time.perf_counter()
            ready, _ = ray.wait(list(self._samples), num_returns=1)
            self.timer.add("replay_wait", time.perf_counter() - t0)
            shard, generation = self._samples.pop(ready[0])
            try:
                value = ray.get(ready[0])
            except lost as e:
                if generation == self._generation[shard]:
                    self._restart(shard, e)
                continue
            if generation != self._generation[shard]:
                continue
            if value is None:  # empty (a replacement whose adds have not arrived)
                continue
            got += 1
            yield from_wire(value), shard
        self._reap()

    def sample(self, batch_size: int) -> tuple[Samples, int] | None:
        return next(iter(self.sample_async(batch_size, 1)), None)

    def update_priorities(self, shard: int, indices: Any, priorities: Any) -> None:
        self._send(shard, "update", "update_priorities", to_wire(indices), to_wire(priorities))

    def size(self) -> int:
        self._reap()
        return sum(self._sizes)

    def shard_sizes(self) -> list[int]:
        self._reap()
        return list(self._sizes)

    def flush(self) -> None:
        """Wait until every add and priority update sent has finished."""
        import ray

        while self._ops:
            ready, _ = ray.wait(list(self._ops), num_returns=len(self._ops))
            self._settle(ready)

    def _call_all(self, method: str, *per_shard: Any) -> list[Any]:
        """``method`` of every shard (after the calls sent to it before); a dead shard is replaced first."""
        import ray

        lost = lost_errors()
        self.flush()
        out = []
        for i in range(self.num_shards):
            args = [a[i] for a in per_shard]
            while True:
                try:
                    out.append(ray.get(getattr(self.actors[i], method).remote(*args)))
                    break
                except lost as e:
                    self._restart(i, e)
        return out

    def shard_pids(self) -> list[int]:
        return self._call_all("pid")

    def state_dict(self) -> dict[str, Any]:
        """Every shard's records and priorities (read from the actors), and the round-robin positions."""
        return {"shards": [from_wire(s) for s in self._call_all("get_state")], "next_add": self._next_add,
                "next_sample": self._next_sample}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        shards = state["shards"]
        if len(shards) != self.num_shards:
            raise CheckpointError(f"the checkpoint holds {len(shards)} replay shards but the run has "
                                  f"{self.num_shards}")
        self._samples.clear()  # drawn before the restore
        sizes = self._call_all("set_state", [to_wire(s) for s in shards])
        self._sizes = [int(s) for s in sizes]
        self._added = [int(s > 0) for s in sizes]
        self._next_add, self._next_sample = int(state["next_add"]), int(state["next_sample"])

    def stop(self) -> None:
        import ray

        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []
        self._ops.clear()
        self._samples.clear()


def _is_ref(value: Any) -> bool:
    try:
        import ray
    except ImportError:  # pragma: no cover - ray is a dependency of executor=ray only
        return False
    return isinstance(value, ray.ObjectRef)



def shard_capacity(total: int, num_shards: int) -> int:
    """Records per shard for a total replay capacity split evenly (at least 1)."""
    return max(int(total) // max(int(num_shards), 1), 1)


def seed_of_shard(seed: int, index: int) -> int:
    """The seed of shard ``index``'s sampling generator, mixed from the run seed (numpy's SeedSequence)."""
    return int(np.random.SeedSequence([int(seed), int(index), 0x5A4D]).generate_state(1, np.uint32)[0])
