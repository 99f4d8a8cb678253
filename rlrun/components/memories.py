"""Memories: replay storage preallocated from the record space."""

from __future__ import annotations

from typing import Any

import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.components.frame_store import attach_frame_store, load_filled, save_filled, storage_bytes


class ReplayMemory(Component):
    """Uniform replay over a ring buffer of ``capacity`` records.

    Built from the space of one record (a Dict space, e.g. obs, action, reward, next_obs, discount); storage is
    one preallocated tensor per leaf, ``[capacity, *leaf_shape]``. ``insert`` takes a batch of records (leading
    rank B); ``sample`` draws ``batch_size`` records uniformly with replacement, using the memory's own seeded
    generator (saved in checkpoints with the storage).

    ``frames_per_record`` (e.g. 1.15): leaves that are stacks of uint8 frames (Atari obs and next_obs) go to a
    :class:`~rlrun.components.frame_store.FrameStore` that keeps each distinct frame once, with a ring of that
    many frames per record; a record that lost a frame to the ring is never sampled. None: every leaf whole.
    """

    def __init__(self, capacity: int, seed: int = 0, name: str | None = None,
                 frames_per_record: float | None = None) -> None:
        super().__init__(name or "memory")
        if capacity <= 0:
            raise ValueError(f"replay capacity must be positive, got {capacity}")
        self.capacity = int(capacity)
        self.seed = int(seed)
        self.frames_per_record = frames_per_record
        self.generator = torch.Generator().manual_seed(seed)

    def _build(self, records: sp.Space) -> None:
        self.require("records", records, kinds=(sp.Dict,))
        self._leaves = sp.flatten_space(records)
        self.frames = attach_frame_store(self, self._leaves, self.capacity, self.frames_per_record, self.seed)
        framed = self.frames.keys if self.frames is not None else ()
        self._names = {key: self._buf(key) for key in self._leaves if key not in framed}  # leaf key -> buffer
        for key, leaf in self._leaves.items():
            if key in framed:
                continue
            self.register_buffer(self._buf(key), torch.zeros((self.capacity, *sp.shape(leaf)), dtype=sp.dtype(leaf)))
        self.register_buffer("index", torch.zeros((), dtype=torch.int64))
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.output_spaces["sample"] = records

    @staticmethod
    def _buf(key: str) -> str:
        return "store_" + key.replace("/", "__")

    @api
    def insert(self, records: Any) -> None:
        flat = sp.flatten(self.input_spaces["records"], records)
        n = next(iter(flat.values())).shape[0]
        if n > self.capacity:  # only the newest ``capacity`` records survive a ring-buffer write anyway
            flat = {key: value[n - self.capacity:] for key, value in flat.items()}
            start = (int(self.index) + n - self.capacity) % self.capacity
            n_write = self.capacity
        else:
            start, n_write = int(self.index), n
        if self.frames is not None:
            slots = (torch.arange(n_write) + start) % self.capacity
            self.frames.write(slots, {key: flat[key][len(flat[key]) - n_write:] for key in self.frames.keys})
        # At most two contiguous slices (before and after the wrap): slice writes, no index tensor.
        first = min(n_write, self.capacity - start)
        for key, value in flat.items():
            if key not in self._names:
                continue
            buf = getattr(self, self._names[key])
            value = torch.as_tensor(value).to(device=buf.device, dtype=buf.dtype)
            buf[start:start + first] = value[:first]
            if first < n_write:
                buf[:n_write - first] = value[first:]
        self.index.fill_((start + n_write) % self.capacity)
        self.count.fill_(min(int(self.count) + n, self.capacity))

    @api
    def sample(self, batch_size: int) -> Any:
        size = int(self.count)
        if size == 0:
            raise RuntimeError(f"{self.name}: cannot sample from an empty memory")
        idx = torch.randint(0, size, (batch_size,), generator=self.generator)
        if self.frames is not None:  # redraw the records that lost a frame (the oldest ones): uniform over the rest
            for _ in range(100):
                bad = (~self.frames.valid(idx)).nonzero().squeeze(1)
                if bad.numel() == 0:
                    break
                idx[bad] = torch.randint(0, size, (bad.numel(),), generator=self.generator)
            else:
                raise RuntimeError(f"{self.name}: almost no record still has all its frames; raise "
                                   f"frames_per_record (now {self.frames_per_record})")
        idx = idx.to(self.index.device)
        out = {key: getattr(self, name).index_select(0, idx) for key, name in self._names.items()}
        if self.frames is not None:
            out.update({k: v.to(idx.device) for k, v in self.frames.read(idx).items()})
        return sp.unflatten(self.input_spaces["records"], out)

    @api
    def size(self) -> int:
        return int(self.count)

    def bytes_per_record(self) -> float:
        """Storage bytes over capacity (the frame ring included)."""
        return storage_bytes(self) / self.capacity

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """The state as written: the record buffers only up to ``count`` until the ring is full (save_filled)."""
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self.built:
            save_filled(destination, prefix, self._names.values(), int(self.count), self.capacity)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any) -> None:
        if self.built:
            load_filled(state_dict, prefix, {name: getattr(self, name) for name in self._names.values()})
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def get_extra_state(self) -> Any:
        return {"generator": self.generator.get_state()}

    def set_extra_state(self, state: Any) -> None:
        self.generator.set_state(state["generator"])
