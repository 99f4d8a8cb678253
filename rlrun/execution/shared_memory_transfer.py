"""Rollout observations from a Ray worker to the driver through shared memory instead of Ray's object store.

On one machine a rollout's frames need not go through Ray's object store (issue 4, MEASURED.md: ~0.8-1.5 GB/s for
a 16 x 64 x 4 x 84 x 84 uint8 rollout, most of it the worker's serialisation into a fresh store object) when a plain
shared-memory segment that both processes keep mapped moves them at memory speed (one copy in and one out). The
driver owns the segments:

- :class:`SlotPool` (driver): per worker a few POSIX shared-memory segments ("slots"), each lent to one sample
  request (its name and size ride on the request) and taken back when the driver has copied the rollout out, so a
  slot is never written while the driver reads it. A worker has at most ``max_in_flight_per_worker`` (async) or one
  (sync) request out, so that many slots per worker suffice; a request finds none free only if that bound is
  broken, and then goes through the object store, as does one for which /dev/shm lacks the room for a new slot
  (:data:`HEADROOM_BYTES`). Slots lent to a worker that died are dropped, never reused (a
  dying process might still write). The driver unlinks every segment at ``close()``; if it dies first, Python's
  resource tracker unlinks them.
- :class:`SlotWriter` (worker): maps the slots it is lent (by name, without registering them with its own resource
  tracker: the driver owns them), writes the observations of a packed rollout into one and returns a
  :class:`SharedArrays` descriptor in place of ``batch.obs``.

Only observations travel this way (nearly all of a Pong rollout's bytes); the other fields stay in the object
store. The encoding is exact: a test compares every field with the object-store path.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_SHARED_BYTES = 256 * 1024
"""Rollouts whose observations are smaller than this go through the object store (Ray inlines small objects in its
reply anyway; a segment per request would cost more than it saves)."""

SHM_DIR = "/dev/shm"
HEADROOM_BYTES = 256 * 1024 * 1024
"""A new slot is made only while /dev/shm keeps this much free beyond it: tmpfs pages are taken when written, and a
process writing into a full /dev/shm dies of SIGBUS (Docker's default /dev/shm is 64 MiB; Ray's object store may
live there too). Without the room the request goes through the object store."""


def free_shm_bytes() -> int:
    """Bytes free in /dev/shm now (0 where it cannot be read)."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


@dataclass(frozen=True)
class Slot:
    """A segment lent to one request: its name and size in bytes."""

    name: str
    nbytes: int


@dataclass(frozen=True)
class SharedArrays:
    """Where a rollout's observation leaves lie in a slot: ``(key, byte offset, shape, dtype)`` each."""

    name: str
    leaves: tuple[tuple[str, int, tuple[int, ...], str], ...]


def _aligned(n: int) -> int:
    return (n + 63) // 64 * 64


def nbytes_of(arrays: dict[str, np.ndarray]) -> int:
    """Bytes a slot needs for ``arrays`` (each leaf 64-byte aligned)."""
    return sum(_aligned(a.nbytes) for a in arrays.values())


def slot_bytes(leaf_bytes: list[int], rows: int) -> int:
    """Bytes a slot needs for ``rows`` rows of leaves of ``leaf_bytes`` bytes per row (as :func:`nbytes_of`)."""
    return sum(_aligned(rows * b) for b in leaf_bytes)


class SlotPool:
    """The driver's shared-memory segments, per worker; see the module docstring."""

    def __init__(self, slots_per_worker: int) -> None:
        self.slots_per_worker = int(slots_per_worker)
        self._segments: dict[str, Any] = {}  # name -> multiprocessing.shared_memory.SharedMemory
        self._owner: dict[str, int] = {}  # name -> worker
        self._free: dict[int, list[str]] = {}

    def lend(self, worker: int, nbytes: int) -> Slot | None:
        """A free slot of ``worker`` with room for ``nbytes`` (a too small free one is replaced by a bigger one);
        None when all of its slots are lent or /dev/shm lacks the room for a new one (:data:`HEADROOM_BYTES`)."""
        from multiprocessing import shared_memory

        free = self._free.setdefault(worker, [])
        for name in free:
            if self._segments[name].size >= nbytes:
                free.remove(name)
                return Slot(name, self._segments[name].size)
        owned = sum(1 for w in self._owner.values() if w == worker)
        if not free and owned >= self.slots_per_worker:
            return None
        if free_shm_bytes() < nbytes + HEADROOM_BYTES:
            return None
        if free:  # every free slot is too small: replace one
            self._drop(free.pop(0))
        segment = shared_memory.SharedMemory(create=True, size=int(nbytes))
        self._segments[segment.name] = segment
        self._owner[segment.name] = worker
        return Slot(segment.name, segment.size)

    def give_back(self, slot: Slot) -> None:
        """The driver is done with ``slot``'s contents: it may be lent again."""
        worker = self._owner.get(slot.name)
        if worker is not None:
            self._free.setdefault(worker, []).append(slot.name)

    def drop_worker(self, worker: int) -> None:
        """``worker`` died: unlink its slots (lent or free); a new worker gets new ones."""
        for name in [n for n, w in self._owner.items() if w == worker]:
            self._drop(name)
        self._free.pop(worker, None)

    def views(self, shared: SharedArrays) -> dict[str, np.ndarray]:
        """Read-only arrays over the slot's bytes (valid until the slot is given back: copy what is kept)."""
        buf = self._segments[shared.name].buf
        out = {}
        for key, offset, shape, dtype in shared.leaves:
            count = int(np.prod(shape, dtype=np.int64))
            array = np.frombuffer(buf, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
            array.flags.writeable = False
            out[key] = array
        return out

    def owns(self, name: str) -> bool:
        return name in self._segments

    def close(self) -> None:
        for name in list(self._segments):
            self._drop(name)
        self._free.clear()

    def _drop(self, name: str) -> None:
        segment = self._segments.pop(name)
        self._owner.pop(name, None)
        for free in self._free.values():
            if name in free:
                free.remove(name)
        try:
            segment.close()
        except BufferError:  # a view is still alive somewhere: the mapping goes with it, the name goes now
            pass
        try:
            segment.unlink()
        except FileNotFoundError:
            pass


class SlotWriter:
    """A worker's side: maps the slots it is lent and writes observation leaves into them."""

    MAX_MAPPED = 8  # slots kept mapped (the driver lends a few per worker; older names were replaced)

    def __init__(self) -> None:
        self._maps: dict[str, mmap.mmap] = {}

    def write(self, slot: Slot, arrays: dict[str, np.ndarray]) -> SharedArrays | None:
        """``arrays`` copied into ``slot``; None (use the object store) when they do not fit."""
        if nbytes_of(arrays) > slot.nbytes:
            return None
        target = self._map(slot)
        leaves, offset = [], 0
        for key, array in arrays.items():
            array = np.ascontiguousarray(array)
            view = np.frombuffer(target, dtype=array.dtype, count=array.size, offset=offset).reshape(array.shape)
            np.copyto(view, array)
            leaves.append((key, offset, tuple(array.shape), array.dtype.str))
            offset += _aligned(array.nbytes)
        return SharedArrays(slot.name, tuple(leaves))

    def _map(self, slot: Slot) -> mmap.mmap:
        if slot.name not in self._maps:
            while len(self._maps) >= self.MAX_MAPPED:
                self._close(next(iter(self._maps)))
            # Opened as a file under /dev/shm (where Linux keeps POSIX shared memory) rather than through
            # multiprocessing.shared_memory, which on Python < 3.13 registers the segment with this process's
            # resource tracker, which would unlink the driver's segment when this worker exits.
            fd = os.open(os.path.join(SHM_DIR, slot.name.lstrip("/")), os.O_RDWR)
            try:
                self._maps[slot.name] = mmap.mmap(fd, slot.nbytes)
            finally:
                os.close(fd)
        return self._maps[slot.name]

    def _close(self, name: str) -> None:
        try:
            self._maps.pop(name).close()
        except BufferError:
            pass

    def close(self) -> None:
        for name in list(self._maps):
            self._close(name)


def available() -> bool:
    """Whether this machine has POSIX shared memory where :class:`SlotWriter` opens it (Linux's /dev/shm)."""
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)
