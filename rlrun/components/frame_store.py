"""Replay storage for stacked image observations that keeps each distinct frame once.

An Atari transition's ``obs`` and ``next_obs`` are stacks of the last 4 frames ``[4, 84, 84]`` uint8: stored as
they come, 56 KB per transition, of which one frame (7 KB) is new. A :class:`FrameStore` keeps a ring of single
frames and, per record, the frame ids of each stack; stacks are rebuilt by index when sampled. Which frames are
the same is found from their contents, not assumed from the env's layout: each frame gets a 128-bit fingerprint
(two independent random linear hashes of its 8-byte words, mod 2^64 each), frames share a slot only when both
hashes agree (two different frames are confused with a probability below 2^-100 per pair: far below a bit flip
in RAM, and without the 14 KB of reads per frame a byte comparison costs), and the hashes of recently written
frames are kept so a frame that reappears in a later insert (the frames shared by consecutive rollout fragments,
a per-step insert, an n-step ``next_obs``) is found again. Episode boundaries, resets that repeat a frame, and
n-step transitions need no special case.

Frames live in a ring of ``frame_capacity`` slots (default ``ceil(frames_per_record * capacity)``, enough for
the 0.96-1.02 new frames per transition of a Pong stream measured by benchmarks/replay_memory.py), numbered by a
running *serial*. A record whose oldest frame has been overwritten is no longer valid (``valid``): the memory
holding the store never samples it. When records need more frames than budgeted, the oldest records become
invalid first (the effective capacity shrinks); the memory's ``bytes_per_record()`` says what storage costs.

Everything is a buffer or extra state of the module (saved in checkpoints with the memory; a resumed run writes
and dedups exactly as an uninterrupted one).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.errors import ConfigError

RECENT_WINDOW = 16384  # frames whose hashes are remembered for dedup across inserts


def is_frame_stack(space: sp.Space) -> bool:
    """A stack of images a FrameStore can hold: uint8 Box ``[S, H, W]`` with ``S >= 2`` and ``H * W % 8 == 0``."""
    return (isinstance(space, sp.Box) and np.dtype(space.dtype) == np.uint8 and len(space.shape) == 3
            and space.shape[0] >= 2 and (space.shape[1] * space.shape[2]) % 8 == 0)


class FrameStore(Component):
    """Frames of stacked uint8 observations ``[S, H, W]``, each distinct frame stored once per ring pass.

    Low level: ``put(stacks)`` takes any number of stacks ``[N, S, H, W]`` and returns their frame serials
    ``[N, S]`` int64; ``get(serials)`` rebuilds the stacks; ``alive(serials)`` says which still have all frames.

    For a memory of ``record_capacity`` slots whose records hold stacks under ``keys`` (e.g. obs and next_obs):
    ``write(slots, {key: stacks})`` stores them (serials per slot and key), ``read(slots)`` gives them back,
    ``valid(slots)`` and ``stale(size)`` say which slots lost a frame to the ring.
    """

    def __init__(self, frame_capacity: int, record_capacity: int = 0, keys: tuple[str, ...] = (), seed: int = 0,
                 name: str = "frame_store") -> None:
        super().__init__(name)
        if frame_capacity <= 0:
            raise ValueError(f"frame_capacity must be positive, got {frame_capacity}")
        self.frame_capacity = int(frame_capacity)
        self.record_capacity, self.keys = int(record_capacity), tuple(keys)
        self.seed = int(seed)
        self._recent: dict[int, tuple[int, int]] = {}  # first hash -> (serial, second hash) of a recent frame

    def _build(self, stacks: sp.Space) -> None:
        if not is_frame_stack(stacks):
            raise ValueError(f"{self.name}: expects a uint8 Box [S, H, W] (S >= 2, H*W divisible by 8), got "
                             f"{sp.describe(stacks)}")
        s, h, w = stacks.shape
        self.stack, self.frame_shape = int(s), (int(h), int(w))
        self.register_buffer("frames", torch.zeros((self.frame_capacity, h, w), dtype=torch.uint8))
        self.register_buffer("written", torch.zeros((), dtype=torch.int64))  # frames written so far (next serial)
        for key in self.keys:  # the serials of each record's stacks
            self.register_buffer(self._ids(key), torch.zeros((self.record_capacity, s), dtype=torch.int64))
        # the smallest serial each record uses (-1: never written, -2: lost a frame); and a lower bound of it over
        # the records that still have every frame (so that ``stale`` scans only when a loss is possible)
        self.register_buffer("min_serial", torch.full((self.record_capacity,), -1, dtype=torch.int64))
        self.register_buffer("min_live", torch.zeros((), dtype=torch.int64))
        words = (h * w) // 8
        rng = np.random.default_rng([self.seed, 0xF4A3E])
        # two independent hashes, odd coefficients (an odd multiplier is invertible mod 2^64)
        self._coef = rng.integers(0, 2 ** 63, size=(words, 2), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        self.output_spaces["get"] = stacks

    # ------------------------------------------------------------------ writing

    def _hashes(self, frames: np.ndarray) -> np.ndarray:
        """Two 64-bit hashes per frame ``[M, H, W]`` -> ``[M, 2]`` uint64: the sums of its words times odd random
        coefficients (mod 2^64: numpy's unsigned products and sums wrap)."""
        words = np.ascontiguousarray(frames).reshape(len(frames), -1).view(np.uint64)
        with np.errstate(over="ignore"):
            return words @ self._coef

    @api
    def put(self, stacks: Any) -> torch.Tensor:
        stacks = np.asarray(stacks.cpu() if isinstance(stacks, torch.Tensor) else stacks, dtype=np.uint8)
        n = stacks.shape[0]
        frames = np.ascontiguousarray(stacks.reshape(n * self.stack, *self.frame_shape))
        both = self._hashes(frames)
        h1, h2 = both[:, 0], both[:, 1]
        # Distinct frames of this call: one representative per first hash; a frame whose second hash differs from
        # its representative's is a collision of the first and gets a slot of its own.
        uniq, rep, inverse = np.unique(h1, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        same = h2 == h2[rep[inverse]]
        first = int(self.written)
        # A frame written before this call is shared only if it will outlive the records that use it: what this
        # call may write cannot overwrite it, and it is younger than the ring's slack beyond one frame per record
        # (a frame seen long ago, e.g. a repeated screen, is stored again rather than making a new record depend on
        # the oldest part of the ring, which goes long before the record leaves the memory).
        slack = self.frame_capacity - self.record_capacity if self.record_capacity else self.frame_capacity
        lowest_safe = max(first + len(frames) - self.frame_capacity, first - max(0, slack))
        found = [self._recent.get(h, (-1, 0)) for h in uniq.tolist()]
        old = np.fromiter((f[0] for f in found), dtype=np.int64, count=len(uniq))
        old_h2 = np.fromiter((f[1] for f in found), dtype=np.uint64, count=len(uniq))
        usable = (old >= lowest_safe) & (old >= 0) & (old < first) & (old_h2 == h2[rep])
        fresh = np.nonzero(~usable)[0]  # distinct frames to write, in order of first appearance
        fresh = fresh[np.argsort(rep[fresh], kind="stable")]
        rep_serial = old.copy()
        rep_serial[fresh] = first + np.arange(len(fresh))
        serials = rep_serial[inverse]
        to_write = [rep[fresh]]
        extra = np.nonzero(~same)[0]
        if extra.size:
            serials[extra] = first + len(fresh) + np.arange(extra.size)
            to_write.append(extra)
        written = np.concatenate(to_write)
        if written.size:
            if written.size > self.frame_capacity:
                raise ValueError(f"{self.name}: one insert has {written.size} distinct frames, more than the "
                                 f"{self.frame_capacity} the store holds; raise its frame capacity")
            slots = (first + np.arange(written.size)) % self.frame_capacity
            self.frames.numpy()[slots] = frames[written]
            self.written.fill_(first + written.size)
            for a, serial, b in zip(uniq[fresh].tolist(), rep_serial[fresh].tolist(), h2[rep[fresh]].tolist(),
                                    strict=True):
                self._recent[a] = (serial, b)
            if len(self._recent) > 2 * RECENT_WINDOW:
                self._prune()
        return torch.from_numpy(serials.reshape(n, self.stack))

    @staticmethod
    def _ids(key: str) -> str:
        return "ids_" + key.replace("/", "__")

    @api
    def write(self, slots: torch.Tensor, stacks: dict[str, Any]) -> None:
        """Store the stacks of the records going into ``slots`` ``[N]`` (one ``[N, S, H, W]`` array per key)."""
        parts = [np.asarray(stacks[k].cpu() if isinstance(stacks[k], torch.Tensor) else stacks[k], dtype=np.uint8)
                 for k in self.keys]
        n = len(parts[0])
        serials = self.put(np.concatenate(parts) if len(parts) > 1 else parts[0])
        slots = torch.as_tensor(slots, dtype=torch.int64).cpu()
        for i, key in enumerate(self.keys):
            getattr(self, self._ids(key))[slots] = serials[i * n:(i + 1) * n]
        mins = serials.reshape(len(self.keys), n, -1).amin(dim=(0, 2))
        self.min_serial[slots] = mins
        self.min_live.fill_(min(int(self.min_live), int(mins.min())) if n else int(self.min_live))

    @api
    def read(self, slots: torch.Tensor) -> dict[str, torch.Tensor]:
        """The stacks of the records in ``slots`` ``[N]``, one ``[N, S, H, W]`` per key (host memory)."""
        slots = torch.as_tensor(slots, dtype=torch.int64).cpu()
        return {key: self.get(getattr(self, self._ids(key)).index_select(0, slots)) for key in self.keys}

    @api
    def valid(self, slots: torch.Tensor) -> torch.Tensor:
        """``[N]`` bool: the records in ``slots`` still have every frame."""
        slots = torch.as_tensor(slots, dtype=torch.int64).cpu()
        return self.min_serial.index_select(0, slots) >= self.oldest_alive()

    def stale(self, size: int) -> np.ndarray:
        """Slots among the first ``size`` whose records lost a frame since the last call, marked lost; callers
        zero their sampling weight. O(1) unless a loss is possible (the oldest frame held passed ``min_live``);
        then one scan, which also tightens ``min_live``."""
        oldest = self.oldest_alive()
        if oldest <= int(self.min_live):
            return np.zeros(0, dtype=np.int64)
        mins = self.min_serial[:size]
        lost_mask = (mins >= 0) & (mins < oldest)
        lost = lost_mask.nonzero().squeeze(1)
        self.min_serial[lost] = -2
        live = mins[mins >= oldest]
        self.min_live.fill_(int(live.min()) if live.numel() else oldest)
        return lost.numpy()

    def _prune(self) -> None:
        keep = int(self.written) - RECENT_WINDOW
        self._recent = {h: v for h, v in self._recent.items() if v[0] >= keep}

    def _apply(self, fn: Any, recurse: bool = True) -> "FrameStore":
        """The frames stay in host memory whatever device the agent moves to (``get`` results are moved by the
        memory): replay of this size belongs in RAM, and dedup compares frames with numpy views of the ring."""
        return self

    # ------------------------------------------------------------------ reading

    @api
    def get(self, serials: torch.Tensor) -> torch.Tensor:
        """Stacks ``[N, S, H, W]`` uint8 of frame serials ``[N, S]``."""
        slots = torch.remainder(serials.to(torch.int64), self.frame_capacity)
        return self.frames.index_select(0, slots.reshape(-1).to(self.frames.device)).reshape(
            *serials.shape, *self.frame_shape)

    @api
    def alive(self, serials: torch.Tensor) -> torch.Tensor:
        """``[N]`` bool: every frame of the stack is still in the ring."""
        oldest = serials.reshape(serials.shape[0], -1).min(dim=1).values
        return oldest >= int(self.written) - self.frame_capacity

    def oldest_alive(self) -> int:
        """The smallest serial still in the ring."""
        return max(0, int(self.written) - self.frame_capacity)

    def frame_bytes(self) -> int:
        return self.frame_shape[0] * self.frame_shape[1]

    # ------------------------------------------------------------------ state

    def _ring_buffers(self) -> dict[str, torch.Tensor]:
        frames = getattr(self, "frames", None)
        return {} if frames is None else {"frames": frames}  # {} before the build

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self._ring_buffers():
            save_filled(destination, prefix, self._ring_buffers(), int(self.written), self.frame_capacity)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any) -> None:
        load_filled(state_dict, prefix, self._ring_buffers())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def get_extra_state(self) -> Any:
        m = len(self._recent)
        keys = np.fromiter(self._recent.keys(), dtype=np.uint64, count=m)
        serials = np.fromiter((v[0] for v in self._recent.values()), dtype=np.int64, count=m)
        seconds = np.fromiter((v[1] for v in self._recent.values()), dtype=np.uint64, count=m)
        return {"recent_hashes": torch.from_numpy(keys.view(np.int64).copy()),
                "recent_serials": torch.from_numpy(serials),
                "recent_second_hashes": torch.from_numpy(seconds.view(np.int64).copy())}

    def set_extra_state(self, state: Any) -> None:
        keys = state["recent_hashes"].cpu().numpy().view(np.uint64).tolist()
        serials = state["recent_serials"].cpu().numpy().tolist()
        seconds = state["recent_second_hashes"].cpu().numpy().view(np.uint64).tolist()
        self._recent = {k: (s, b) for k, s, b in zip(keys, serials, seconds, strict=True)}


def frame_capacity_for(capacity: int, frames_per_record: float, stack: int) -> int:
    """The frame ring for ``capacity`` records at ``frames_per_record`` new frames each, plus one record's worth
    of whole stacks (obs and next_obs) so that the newest record is always whole."""
    return int(math.ceil(capacity * frames_per_record)) + 2 * stack


def attach_frame_store(memory: Component, leaves: dict[str, sp.Space], capacity: int,
                       frames_per_record: float | None, seed: int) -> "FrameStore | None":
    """Build a FrameStore as ``memory.frames`` for the record leaves that are frame stacks (all of one space, e.g.
    obs and next_obs) when ``frames_per_record`` is set; None (and nothing built) otherwise."""
    if frames_per_record is None:
        return None
    if frames_per_record <= 0:
        raise ConfigError(f"algo.frames_per_record={frames_per_record}: must be positive (about 1.1 for Atari "
                          f"streams), or null to store every frame stack whole.")
    keys = tuple(k for k, leaf in leaves.items() if is_frame_stack(leaf))
    if not keys or any(not sp.same(leaves[k], leaves[keys[0]]) for k in keys):
        return None
    space = leaves[keys[0]]
    store = FrameStore(frame_capacity_for(capacity, frames_per_record, space.shape[0]), capacity, keys, seed,
                       name="frames")
    memory.build_child(store, stacks=space)
    return store


def save_filled(destination: dict, prefix: str, names: Any, filled: int, capacity: int) -> None:
    """In a ``state_dict`` being written: keep only the first ``filled`` rows of each preallocated ring buffer
    ``names`` while the ring has not yet wrapped (rows past them were never written: zeros). A replay memory sized
    for a million Atari transitions then checkpoints what it holds, not its ~8 GB of capacity. Copies: a slice
    would still pin (and ``torch.save`` write) the whole storage."""
    if filled >= capacity:
        return
    for name in names:
        destination[prefix + name] = destination[prefix + name][:filled].clone()


def load_filled(state_dict: dict, prefix: str, buffers: dict[str, torch.Tensor]) -> None:
    """In a ``state_dict`` being loaded: pad each trimmed buffer (:func:`save_filled`) with zero rows back to the
    live buffer's capacity, so the loaded ring is the saved one exactly."""
    for name, live in buffers.items():
        saved = state_dict.get(prefix + name)
        if (saved is not None and saved.dim() == live.dim() and saved.shape[1:] == live.shape[1:]
                and saved.shape[0] < live.shape[0]):
            full = torch.zeros(live.shape, dtype=saved.dtype, device=saved.device)
            full[:saved.shape[0]] = saved
            state_dict[prefix + name] = full


def storage_bytes(module: torch.nn.Module) -> int:
    """Bytes of every buffer of a memory (its frame store's ring included): what its storage costs."""
    return sum(b.numel() * b.element_size() for b in module.buffers())
