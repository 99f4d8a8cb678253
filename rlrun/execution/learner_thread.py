"""A learner on its own thread, fed by a bounded queue (RLlib Flow's ``Concurrently`` of a learner thread, IMPALA's
and TorchBeast's learner loop), kept as a plain object a plan calls.

The plan (the driver thread) keeps sampling, storing and updating priorities; it ``put``s work items (replay
batches) while the inbox has room, and ``drain``s the results the learner produced since. The learner thread
takes an item, calls ``update(item)``, puts ``(item, result)`` in the outbox, and after every ``publish_every``
updates calls ``publish()`` (e.g. copy the new weights into a slot the plan sends to actors from): all while
holding ``lock``, so a plan that needs the learner's state whole (a checkpoint) takes ``paused()`` and gets it
between two updates.

Bounded memory: at most ``max_queue`` items wait in the inbox (a ``rlrun.components.fifo_queue.FIFOQueue``, closed by
``stop()`` so a learner waiting for work wakes at once); the outbox holds at most what the plan has not
drained (each item yields one result). An exception in ``update`` stops the thread and is raised again in the plan
by the next ``put``/``drain``. ``stop()`` ends the thread after its current update.

Metrics (``metrics()``, since the last call): ``learner/updates`` (total), ``learner/updates_per_s``,
``learner/busy_fraction`` (share of wall time spent in updates), ``learner/queue_depth`` (items waiting now),
``learner/idle_s`` (time the thread waited for work).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any, Callable, Iterator

from rlrun.components.fifo_queue import FIFOQueue, QueueClosed
from rlrun.metric_names import (
    LEARNER_BUSY_FRACTION,
    LEARNER_IDLE_S,
    LEARNER_QUEUE_DEPTH,
    LEARNER_UPDATES,
    LEARNER_UPDATES_PER_S,
)


class LearnerThread:
    """``update(item) -> result`` on a daemon thread, fed through a bounded inbox."""

    def __init__(self, update: Callable[[Any], Any], max_queue: int = 2, publish: Callable[[], None] | None = None,
                 publish_every: int = 1, name: str = "rlrun-learner") -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be at least 1, got {max_queue}")
        self._update, self._publish = update, publish
        self.publish_every = max(1, int(publish_every))
        self.max_queue = int(max_queue)
        self._inbox = FIFOQueue(self.max_queue)  # bounded and closable: stop() wakes a learner waiting for work
        self._outbox: queue.Queue = queue.Queue()
        self._unfinished = 0  # items put whose results are not in the outbox yet
        self._count = threading.Lock()
        self.lock = threading.Lock()  # held during each update (and publish)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.updates = 0
        self._busy_s = 0.0
        self._idle_s = 0.0
        self._since = time.perf_counter()
        self._updates_at_report = 0
        self._busy_at_report = 0.0
        self._idle_at_report = 0.0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        while not self._stop.is_set():
            waited = time.perf_counter()
            try:
                item = self._inbox.get(timeout=0.05)
            except queue.Empty:
                self._idle_s += time.perf_counter() - waited
                continue
            except QueueClosed:  # stopped while waiting
                return
            self._idle_s += time.perf_counter() - waited
            if self._stop.is_set():  # stopped: items still queued are dropped
                return
            try:
                with self.lock:
                    start = time.perf_counter()
                    result = self._update(item)
                    self.updates += 1
                    if self._publish is not None and self.updates % self.publish_every == 0:
                        self._publish()
                    self._busy_s += time.perf_counter() - start
            except BaseException as e:  # noqa: BLE001 - raised again in the plan's thread
                self._error = e
                self._stop.set()
                self._inbox.close()
                self._done_one()
                return
            self._outbox.put((item, result))
            self._done_one()

    def _done_one(self) -> None:
        with self._count:
            self._unfinished -= 1

    # ------------------------------------------------------------------ the plan's side

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def free_slots(self) -> int:
        """Items the inbox takes now without waiting."""
        return max(0, self.max_queue - self._inbox.size())

    def put(self, item: Any, timeout: float | None = None) -> bool:
        """Queue ``item`` for the learner; False when the inbox stayed full for ``timeout`` seconds (None: do not
        wait at all)."""
        self._check()
        with self._count:  # counted first: the learner may finish it before put() returns
            self._unfinished += 1
        try:
            self._inbox.put(item, timeout=0 if timeout is None else timeout)
        except (queue.Full, QueueClosed):
            self._done_one()
            self._check()
            return False
        return True

    def drain(self) -> list[tuple[Any, Any]]:
        """The ``(item, result)`` pairs finished since the last call, in order."""
        out = []
        while True:
            try:
                out.append(self._outbox.get_nowait())
            except queue.Empty:
                break
        self._check()
        return out

    def in_flight(self) -> int:
        """Items queued or being learnt on, whose results have not been drained."""
        return self._unfinished

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No update runs inside the block (the one running finishes first)."""
        with self.lock:
            yield

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Until the inbox is empty and no update runs (or ``timeout`` seconds): every item put has a result."""
        deadline = time.monotonic() + timeout
        while self._unfinished and self.alive and time.monotonic() < deadline:
            self._check()
            time.sleep(0.002)
        self._check()

    def metrics(self) -> dict[str, float]:
        now = time.perf_counter()
        dt = max(now - self._since, 1e-9)
        busy, idle, updates = self._busy_s, self._idle_s, self.updates
        out = {LEARNER_UPDATES: float(updates),
               LEARNER_UPDATES_PER_S: (updates - self._updates_at_report) / dt,
               LEARNER_BUSY_FRACTION: min(1.0, (busy - self._busy_at_report) / dt),
               LEARNER_IDLE_S: idle - self._idle_at_report,
               LEARNER_QUEUE_DEPTH: float(self._inbox.size())}
        self._since, self._updates_at_report, self._busy_at_report, self._idle_at_report = now, updates, busy, idle
        return out

    def stop(self, timeout: float = 30.0) -> None:
        """End the thread after its current update; items still queued are dropped."""
        self._stop.set()
        self._inbox.close()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
