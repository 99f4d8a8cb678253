"""The driver's shared-memory slots and a worker's writer (rlrun/execution/shared_memory_transfer.py), without Ray:
a rollout's observation leaves written into a lent slot come back equal through the driver's views; slots are
bounded per worker, reused after they are given back, replaced when too small, and unlinked when their worker
dies or the pool closes."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rlrun.execution.shared_memory_transfer import MIN_SHARED_BYTES, SlotPool, SlotWriter, available, slot_bytes

pytestmark = pytest.mark.skipif(not available(), reason="needs POSIX shared memory under /dev/shm (Linux)")


def on_disk(name: str) -> bool:
    return os.path.exists(os.path.join("/dev/shm", name.lstrip("/")))


def leaves(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"frames": rng.integers(0, 256, (16, 8, 4, 84, 84), dtype=np.uint8),
            "vector": rng.standard_normal((16, 8, 3)).astype(np.float32)}


def test_written_leaves_come_back_equal_and_read_only() -> None:
    pool, writer = SlotPool(slots_per_worker=2), SlotWriter()
    arrays = leaves()
    need = slot_bytes([a[0, 0].nbytes for a in arrays.values()], 16 * 8)
    assert need >= sum(a.nbytes for a in arrays.values()) and need >= MIN_SHARED_BYTES
    slot = pool.lend(0, need)
    shared = writer.write(slot, arrays)
    assert shared is not None and shared.name == slot.name
    views = pool.views(shared)
    assert list(views) == ["frames", "vector"]
    for key, value in arrays.items():
        np.testing.assert_array_equal(views[key], value)
        assert views[key].dtype == value.dtype and not views[key].flags.writeable
    del views
    writer.close()
    pool.close()
    assert not on_disk(slot.name)


def test_arrays_that_do_not_fit_are_refused() -> None:
    pool, writer = SlotPool(slots_per_worker=1), SlotWriter()
    slot = pool.lend(0, 1024)
    assert writer.write(slot, leaves()) is None  # the worker then sends them through the object store
    writer.close()
    pool.close()


def test_slots_are_bounded_per_worker_reused_and_replaced_when_too_small() -> None:
    pool = SlotPool(slots_per_worker=2)
    a, b = pool.lend(0, 1 << 20), pool.lend(0, 1 << 20)
    assert a.name != b.name and pool.lend(0, 1 << 20) is None  # both lent: the third request gets none
    other = pool.lend(1, 1 << 20)  # another worker has slots of its own
    assert other is not None
    pool.give_back(a)
    assert pool.lend(0, 1 << 20) == a  # the same segment again
    pool.give_back(a)
    bigger = pool.lend(0, 4 << 20)  # the free one is too small: replaced
    assert bigger.nbytes >= 4 << 20 and bigger.name != a.name and not on_disk(a.name) and on_disk(bigger.name)
    pool.close()
    assert not any(on_disk(s.name) for s in (b, other, bigger))


def test_a_dead_workers_slots_are_unlinked_and_never_lent_again() -> None:
    pool = SlotPool(slots_per_worker=2)
    lent, free = pool.lend(0, 1 << 20), pool.lend(0, 1 << 20)
    pool.give_back(free)
    kept = pool.lend(1, 1 << 20)
    pool.drop_worker(0)
    assert not on_disk(lent.name) and not on_disk(free.name) and on_disk(kept.name)
    pool.give_back(lent)  # a late give-back of a dropped slot is ignored
    fresh = pool.lend(0, 1 << 20)
    assert fresh.name not in (lent.name, free.name)
    pool.close()


def test_no_new_slot_without_room_in_dev_shm(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slot is made only while /dev/shm keeps HEADROOM_BYTES free beyond it (writing into a full tmpfs is a
    SIGBUS); the free-space reading is replaced here, as filling the machine's /dev/shm is not an option."""
    from rlrun.execution import shared_memory_transfer as smt

    pool = SlotPool(slots_per_worker=2)
    monkeypatch.setattr(smt, "free_shm_bytes", lambda: smt.HEADROOM_BYTES + (1 << 20) - 1)
    assert pool.lend(0, 1 << 20) is None  # one byte short: the object store carries this rollout
    monkeypatch.setattr(smt, "free_shm_bytes", lambda: smt.HEADROOM_BYTES + (1 << 20))
    slot = pool.lend(0, 1 << 20)
    assert slot is not None and on_disk(slot.name)
    pool.give_back(slot)
    monkeypatch.setattr(smt, "free_shm_bytes", lambda: 0)
    assert pool.lend(0, 1 << 20) == slot  # an existing slot needs no new room
    pool.close()


def test_the_writer_maps_a_bounded_number_of_slots() -> None:
    pool, writer = SlotPool(slots_per_worker=SlotWriter.MAX_MAPPED + 4), SlotWriter()
    small = {"x": np.arange(10, dtype=np.int64)}
    for i in range(SlotWriter.MAX_MAPPED + 4):
        slot = pool.lend(0, 4096)
        shared = writer.write(slot, {"x": small["x"] + i})
        np.testing.assert_array_equal(pool.views(shared)["x"], small["x"] + i)
        assert len(writer._maps) <= SlotWriter.MAX_MAPPED
    writer.close()
    pool.close()
