"""Tests for FIFOQueue: order, bounds, timeouts (milliseconds) and wake-ups by other threads and by close().

Every test that needs a second thread waits until ``waiting()`` shows that thread blocked inside the queue, never
for an arbitrary sleep, and joins its threads with a timeout.
"""

from __future__ import annotations

import queue
import threading
import time

import pytest

from rlrun.components.fifo_queue import FIFOQueue, QueueClosed

WAIT = 5.0  # seconds: an upper bound that a passing test never reaches


def start(fn):
    result = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def wait_until(predicate):
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_first_in_first_out_and_size():
    q = FIFOQueue(3)
    for item in ("a", "b", "c"):
        q.put(item)
    assert q.size() == len(q) == 3
    assert [q.get(), q.get()] == ["a", "b"]
    q.put("d")
    assert [q.get(), q.get()] == ["c", "d"]
    assert q.size() == 0


def test_put_on_full_and_get_on_empty_time_out():
    q = FIFOQueue(1)
    with pytest.raises(queue.Empty):
        q.get(timeout=0)
    t0 = time.monotonic()
    with pytest.raises(queue.Empty, match="still empty after 0.01 s"):
        q.get(timeout=0.01)
    assert time.monotonic() - t0 >= 0.01
    q.put(1)
    with pytest.raises(queue.Full):
        q.put(2, timeout=0)
    t0 = time.monotonic()
    with pytest.raises(queue.Full, match=r"still full \(1 items\) after 0.01 s"):
        q.put(2, timeout=0.01)
    assert time.monotonic() - t0 >= 0.01
    assert q.get(timeout=0) == 1  # the timed-out put added nothing
    assert q.size() == 0


def test_producer_blocks_when_full_until_the_consumer_takes():
    q = FIFOQueue(2)
    producer, result = start(lambda: [q.put(i) for i in range(5)])
    wait_until(lambda: q.waiting() == {"get": 0, "put": 1})  # blocked on its third put
    assert producer.is_alive() and q.size() == 2
    got = [q.get(timeout=WAIT) for _ in range(5)]
    producer.join(WAIT)
    assert not producer.is_alive() and "error" not in result
    assert got == [0, 1, 2, 3, 4]


def test_blocked_get_is_woken_by_a_put():
    q = FIFOQueue(2)
    consumer, result = start(lambda: q.get(timeout=WAIT))
    wait_until(lambda: q.waiting()["get"] == 1)  # waiting on the empty queue
    assert consumer.is_alive()
    q.put({"rollout": 7})
    consumer.join(WAIT)
    assert not consumer.is_alive() and result == {"value": {"rollout": 7}}


def test_close_wakes_a_blocked_getter_and_a_blocked_putter():
    empty, full = FIFOQueue(1), FIFOQueue(1)
    full.put("x")
    getter, got = start(lambda: empty.get())  # no timeout: only close() can end it
    putter, put = start(lambda: full.put("y"))
    wait_until(lambda: empty.waiting()["get"] == 1 and full.waiting()["put"] == 1)
    assert getter.is_alive() and putter.is_alive()
    empty.close()
    full.close()
    getter.join(WAIT)
    putter.join(WAIT)
    assert not getter.is_alive() and not putter.is_alive()
    assert isinstance(got["error"], QueueClosed) and isinstance(put["error"], QueueClosed)
    assert full.closed and full.size() == 1
    assert empty.waiting() == full.waiting() == {"get": 0, "put": 0}


def test_items_put_before_close_are_still_delivered():
    q = FIFOQueue(3)
    q.put(1)
    q.put(2)
    q.close()
    q.close()  # idempotent
    with pytest.raises(QueueClosed, match="put"):
        q.put(3)
    assert [q.get(), q.get(timeout=0)] == [1, 2]
    with pytest.raises(QueueClosed, match="closed, empty"):
        q.get(timeout=0.01)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="positive integer"):
        FIFOQueue(0)
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        FIFOQueue(1).get(timeout=-1)
