"""A bounded, thread-safe FIFO queue for actor -> learner rollouts.

The queue between acting and learning in IMPALA (Espeholt et al. 2018, Sec. 3: actors send trajectories to the
learner "via a queue") and TorchBeast (Küttler et al. 2019): bounded, so that fast actors block instead of
filling memory with stale rollouts (the bound limits policy lag), and closable, so that shutdown wakes every
waiting thread instead of leaving it blocked forever. It holds Python objects (a rollout nest of tensors, an
index into shared buffers), so it is a plain class, not a Component: it holds no records of its own space.

Differences from ``queue.Queue``: ``close()`` (waiters wake and raise :class:`QueueClosed`; items already queued
can still be taken), and no ``task_done``/``join``.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Any


class QueueClosed(Exception):
    """The queue was closed: nothing more can be put, and nothing is left to get."""


class FIFOQueue:
    """First in, first out, at most ``capacity`` items; ``put`` blocks while full and ``get`` while empty.

    Args:
        capacity: the most items held at once (> 0); a ``put`` beyond it waits for a ``get``.
    """

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or int(capacity) != capacity or capacity <= 0:
            raise ValueError(f"queue capacity must be a positive integer, got {capacity!r}")
        self.capacity = int(capacity)
        self._items: collections.deque[Any] = collections.deque()
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._closed = False
        self._waiting = {"get": 0, "put": 0}  # threads blocked in get() / put() now

    @staticmethod
    def _deadline(timeout: float | None) -> float | None:
        if timeout is None:
            return None
        if timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds or None, got {timeout}")
        return time.monotonic() + timeout

    def _wait(self, side: str, condition: threading.Condition, deadline: float | None) -> bool:
        """Wait on ``condition`` until notified or the deadline; False if the deadline has passed."""
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        self._waiting[side] += 1
        try:
            condition.wait(remaining)
        finally:
            self._waiting[side] -= 1
        return True

    def put(self, item: Any, timeout: float | None = None) -> None:
        """Append ``item``, waiting while the queue is full.

        Args:
            item: any object.
            timeout: seconds to wait for room; ``None`` waits forever, ``0`` does not wait.

        Raises:
            queue.Full: still full after ``timeout`` seconds.
            QueueClosed: the queue is (or gets) closed before the item is added.
        """
        deadline = self._deadline(timeout)
        with self._not_full:
            while not self._closed and len(self._items) >= self.capacity:
                if not self._wait("put", self._not_full, deadline):
                    raise queue.Full(f"queue still full ({self.capacity} items) after {timeout} s")
            if self._closed:
                raise QueueClosed("put() on a closed queue")
            self._items.append(item)
            self._not_empty.notify()

    def get(self, timeout: float | None = None) -> Any:
        """Remove and return the oldest item, waiting while the queue is empty.

        Args:
            timeout: seconds to wait for an item; ``None`` waits forever, ``0`` does not wait.

        Raises:
            queue.Empty: still empty after ``timeout`` seconds.
            QueueClosed: the queue is closed and empty (items put before ``close()`` are still returned).
        """
        deadline = self._deadline(timeout)
        with self._not_empty:
            while not self._closed and not self._items:
                if not self._wait("get", self._not_empty, deadline):
                    raise queue.Empty(f"queue still empty after {timeout} s")
            if not self._items:
                raise QueueClosed("get() on a closed, empty queue")
            item = self._items.popleft()
            self._not_full.notify()
            return item

    def size(self) -> int:
        """Items held now."""
        with self._lock:
            return len(self._items)

    __len__ = size

    def waiting(self) -> dict[str, int]:
        """Threads blocked now in ``get`` (learner starved) and in ``put`` (actors held back by a full queue)."""
        with self._lock:
            return dict(self._waiting)

    def close(self) -> None:
        """Refuse further puts and wake every waiting thread (idempotent)."""
        with self._lock:
            self._closed = True
            self._not_empty.notify_all()
            self._not_full.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed
