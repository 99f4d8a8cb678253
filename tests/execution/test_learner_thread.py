"""LearnerThread (rlrun/execution/learner_thread.py) alone: it learns on what is put, in order, while the caller
goes on; the inbox is bounded; publish runs after every k-th update under the same lock; paused() holds updates
off; an error in the update reaches the caller; stop() ends the thread."""

from __future__ import annotations

import threading
import time

import pytest

from rlrun.execution.learner_thread import LearnerThread


def wait_until(predicate, timeout: float = 5.0) -> None:  # noqa: ANN001
    """Until ``predicate()`` holds (a condition, not a guess at how long the other thread takes)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_results_in_order_while_the_caller_goes_on() -> None:
    seen: list[int] = []
    entered, gate = threading.Event(), threading.Event()

    def update(x: int) -> int:
        entered.set()
        gate.wait(5)
        seen.append(x)
        return x * x

    learner = LearnerThread(update, max_queue=3)
    try:
        assert learner.put(1) and learner.put(2) and learner.put(3)
        assert entered.wait(5)  # the thread took item 1 and waits inside update: 2 and 3 queue, one slot left
        assert learner.free_slots() == 1 and learner.in_flight() == 3
        assert learner.put(4) and not learner.put(5)  # bounded: the fifth does not fit
        assert learner.drain() == []  # nothing finished: the caller was not blocked
        gate.set()
        learner.wait_idle(5)
        assert learner.drain() == [(1, 1), (2, 4), (3, 9), (4, 16)] and seen == [1, 2, 3, 4]
        assert learner.in_flight() == 0
        m = learner.metrics()
        assert m["learner/updates"] == 4 and m["learner/queue_depth"] == 0
    finally:
        learner.stop()
    assert not learner.alive


def test_publish_every_k_updates_under_the_lock() -> None:
    published: list[int] = []
    counter = {"n": 0}

    def update(x: int) -> None:
        counter["n"] += 1

    learner = LearnerThread(update, max_queue=10, publish=lambda: published.append(counter["n"]), publish_every=3)
    try:
        for i in range(7):
            learner.put(i)
        learner.wait_idle(5)
        assert published == [3, 6]
    finally:
        learner.stop()


def test_paused_holds_updates_off() -> None:
    done: list[int] = []
    learner = LearnerThread(lambda x: done.append(x), max_queue=5)
    try:
        with learner.paused():
            learner.put(1)
            wait_until(lambda: learner.free_slots() == 5)  # the thread took the item: it waits for the lock now
            assert done == []  # not while paused
        learner.wait_idle(5)
        assert done == [1]
    finally:
        learner.stop()


def test_an_error_in_the_update_reaches_the_caller() -> None:
    def update(x: int) -> None:
        raise ValueError(f"bad batch {x}")

    learner = LearnerThread(update)
    learner.put(7)
    with pytest.raises(ValueError, match="bad batch 7"):
        learner.wait_idle(5)
    with pytest.raises(ValueError, match="bad batch 7"):
        learner.drain()
    with pytest.raises(ValueError, match="bad batch 7"):
        learner.put(8)
    assert not learner.alive
