"""Proportional prioritised experience replay (Schaul, Quan, Antonoglou & Silver, ICLR 2016).

Item ``i`` with priority ``p_i`` is sampled with probability (Eq. 1)

    P(i) = p_i^alpha / sum_k p_k^alpha,        p_i = |delta_i| + eps   (Sec. 3.3, "proportional prioritization")

and its update is scaled by the importance-sampling weight (Eq. 2 and Sec. 3.4)

    w_i = (N * P(i))^-beta / max_j w_j,

where ``N`` is the number of items held and the maximum runs over every item held (the smallest ``P(j)``, read from
a min tree), so weights only ever scale an update down. ``beta`` is annealed linearly from ``beta_start`` to
``beta_end`` (Sec. 3.4: "linearly annealing beta from its initial value beta_0 to 1"). New items get the largest
priority seen so far, so every transition is replayed at least once with high probability (Algorithm 1, line 6).
Sampling is stratified (App. B.2.1): the total mass is split into ``batch_size`` equal segments and one value is
drawn uniformly from each.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.components.exploration import LinearSchedule
from rlrun.components.frame_store import attach_frame_store, load_filled, save_filled, storage_bytes
from rlrun.components.segment_tree import MinSegmentTree, SumSegmentTree


class PrioritizedReplayMemory(Component):
    """A ring buffer of ``capacity`` records, sampled in proportion to ``priority^alpha``.

    Built like ``ReplayMemory``: from the space of one record (a Dict space), with one preallocated tensor per
    leaf, ``[capacity, *leaf_shape]``. ``insert`` takes a batch of records (leading rank B); ``sample`` returns
    ``(records, indices, weights)``; ``update_priorities(indices, td_errors)`` sets ``p = |td| + eps``. The sum
    and min trees (numpy, CPU), the running max priority and the seeded generator are saved in checkpoints with
    the storage (``get_extra_state``); ``timestep`` (sample calls so far, for the beta schedule) is a buffer.

    Args:
        capacity: number of records held; the oldest is overwritten once full.
        alpha: priority exponent (0 = uniform sampling, 1 = fully proportional); 0.6 is the paper's setting for
            the proportional variant.
        beta_start: importance-sampling exponent at timestep 0; 0.4 is the paper's proportional-variant setting.
        beta_end: importance-sampling exponent reached after ``beta_steps`` and kept after (1 = full correction).
        beta_steps: number of ``sample()`` calls (gradient steps) over which beta moves from start to end.
        eps: added to ``|td_error|`` so no item's priority is 0 (an item with priority 0 is never sampled).
        seed: seed of the memory's own ``torch.Generator`` (the stratified uniform draws).
        name: component name (default ``"memory"``).
    """

    def __init__(self, capacity: int, alpha: float = 0.6, beta_start: float = 0.4, beta_end: float = 1.0,
                 beta_steps: int = 100_000, eps: float = 1e-6, seed: int = 0, name: str | None = None,
                 frames_per_record: float | None = None) -> None:
        super().__init__(name or "memory")
        if capacity <= 0:
            raise ValueError(f"replay capacity must be positive, got {capacity}")
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        if not (0 <= beta_start <= 1 and 0 <= beta_end <= 1):
            raise ValueError(f"beta_start and beta_end must be in [0, 1], got {beta_start} and {beta_end}")
        if eps < 0:
            raise ValueError(f"eps must be >= 0, got {eps}")
        self.capacity = int(capacity)
        self.alpha = float(alpha)
        self.eps = float(eps)
        self.beta_schedule = LinearSchedule(beta_start, beta_end, beta_steps)
        self.generator = torch.Generator().manual_seed(seed)
        self.sum_tree = SumSegmentTree(self.capacity)  # p_i^alpha
        self.min_tree = MinSegmentTree(self.capacity)  # p_i^alpha
        self.max_priority = 1.0  # largest p_i (before the exponent) seen so far; given to new items
        self.seed, self.frames_per_record = int(seed), frames_per_record

    def _build(self, records: sp.Space) -> None:
        self.require("records", records, kinds=(sp.Dict,))
        self._leaves = sp.flatten_space(records)
        self.frames = attach_frame_store(self, self._leaves, self.capacity, self.frames_per_record, self.seed)
        self._framed = self.frames.keys if self.frames is not None else ()
        for key, leaf in self._leaves.items():
            if key in self._framed:
                continue
            self.register_buffer(self._buf(key), torch.zeros((self.capacity, *sp.shape(leaf)), dtype=sp.dtype(leaf)))
        self.register_buffer("index", torch.zeros((), dtype=torch.int64))
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("timestep", torch.zeros((), dtype=torch.int64))
        self.output_spaces["sample"] = sp.Tuple((
            records,
            sp.Box(0, self.capacity - 1, (), np.int64),
            sp.Box(0.0, 1.0, (), np.float32),
        ))

    @staticmethod
    def _buf(key: str) -> str:
        return "store_" + key.replace("/", "__")

    def beta(self) -> float:
        """The importance-sampling exponent at the current timestep."""
        return self.beta_schedule(int(self.timestep))

    @api
    def insert(self, records: Any, td_errors: Any = None) -> torch.Tensor:
        """Store a batch of records (leading rank B); returns the slots written, ``[B]`` int64.

        New records get the largest priority seen so far, or ``|td_errors| + eps`` when given (``[B]``, e.g.
        computed by the actors as in Ape-X, Horgan et al. 2018, Algorithm 1). If B exceeds the capacity only the
        last ``capacity`` records are kept (as if inserted one by one).
        """
        flat = sp.flatten(self.input_spaces["records"], records)
        n = int(next(iter(flat.values())).shape[0])
        if td_errors is not None:
            td = self._td_numpy(td_errors)
            if td.size != n:
                raise ValueError(f"{self.name}.insert: {n} records but {td.size} td_errors")
        start = int(self.index)
        keep = min(n, self.capacity)
        first = start + n - keep
        idx = (torch.arange(keep, device=self.index.device) + first) % self.capacity
        for key, value in flat.items():
            if key in self._framed:
                continue
            buf = getattr(self, self._buf(key))
            buf[idx] = torch.as_tensor(value)[n - keep:].to(device=buf.device, dtype=buf.dtype)
        if self.frames is not None:
            self.frames.write(idx.cpu(), {key: flat[key][n - keep:] for key in self._framed})
        slots = idx.cpu().numpy()
        if td_errors is None:
            self._set_priorities(slots, np.full(keep, self.max_priority))
        else:
            self._set_priorities(slots, np.abs(td[n - keep:]) + self.eps)
        self.index.fill_((start + n) % self.capacity)
        self.count.fill_(min(int(self.count) + n, self.capacity))
        if self.frames is not None:  # records that lost a frame to the frame ring are never sampled again
            self._drop(self.frames.stale(int(self.count)))
        return idx

    def _drop(self, slots: np.ndarray) -> None:
        """Sampling weight 0 for ``slots`` (sum tree 0, min tree +inf) until they are written again."""
        if slots.size:
            self.sum_tree[slots] = np.zeros(slots.size)
            self.min_tree[slots] = np.full(slots.size, np.inf)

    @api
    def sample(self, batch_size: int) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """``batch_size`` records by stratified proportional sampling, their slots and importance weights.

        Returns ``(records, indices [batch_size] int64, weights [batch_size] float32)`` with weights in (0, 1]
        computed with the current beta; then advances ``timestep`` by one.
        """
        size = int(self.count)
        if size == 0:
            raise RuntimeError(f"{self.name}: cannot sample from an empty memory")
        if batch_size <= 0:
            raise ValueError(f"{self.name}: batch_size must be positive, got {batch_size}")
        total = self.sum_tree.sum()
        if not total > 0:
            raise RuntimeError(f"{self.name}: every item held has priority 0 (eps=0 and zero TD errors)")
        u = torch.rand(batch_size, generator=self.generator, dtype=torch.float64).numpy()
        values = (np.arange(batch_size) + u) * (total / batch_size)
        slots = self.sum_tree.find_prefixsum_idx(values)
        # w_i / max_j w_j = (N P(i))^-beta / (N P_min)^-beta = (P_min / P(i))^beta; N cancels.
        beta = self.beta()
        weights = (self.min_tree.min() / self.sum_tree[slots]) ** beta
        self.timestep += 1
        device = self.index.device
        idx = torch.from_numpy(slots).to(device)
        out = {key: getattr(self, self._buf(key))[idx] for key in self._leaves if key not in self._framed}
        if self.frames is not None:
            out.update({k: v.to(device) for k, v in self.frames.read(idx).items()})
        records = sp.unflatten(self.input_spaces["records"], out)
        return records, idx, torch.from_numpy(weights).to(device=device, dtype=torch.float32)

    @api
    def update_priorities(self, indices: Any, td_errors: Any) -> None:
        """Set the priorities of slots ``indices`` to ``|td_errors| + eps`` (a repeated slot takes its last value)."""
        idx = torch.as_tensor(indices).detach().cpu().numpy().astype(np.int64).reshape(-1)
        td = self._td_numpy(td_errors)
        if idx.shape != td.shape:
            raise ValueError(f"{self.name}.update_priorities: {idx.size} indices but {td.size} td_errors")
        size = int(self.count)
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            raise IndexError(f"{self.name}.update_priorities: slot indices must be in [0, {size}), got "
                             f"{idx[(idx < 0) | (idx >= size)][:3]}")
        self._set_priorities(idx, np.abs(td) + self.eps)
        if self.frames is not None:  # a record dropped after it was sampled stays dropped
            self._drop(idx[~self.frames.valid(torch.from_numpy(idx)).numpy()])

    def _td_numpy(self, td_errors: Any) -> np.ndarray:
        td = torch.as_tensor(td_errors).detach().cpu().to(torch.float64).numpy().reshape(-1)
        if not np.all(np.isfinite(td)):
            raise ValueError(f"{self.name}: td_errors must be finite, got {td[~np.isfinite(td)][:3]}")
        return td

    def _set_priorities(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        """Write ``p^alpha`` into both trees. An item with priority 0 (possible only with eps=0) is never sampled,
        so the min tree holds +inf for it: it does not count in ``max_j w_j``."""
        scaled = priorities ** self.alpha
        self.sum_tree[slots] = scaled
        self.min_tree[slots] = np.where(scaled > 0, scaled, np.inf)
        if priorities.size:
            self.max_priority = max(self.max_priority, float(priorities.max()))

    @api
    def size(self) -> int:
        return int(self.count)

    def bytes_per_record(self) -> float:
        """Storage bytes over capacity (the frame ring included; the sum and min trees, 2 x 16 bytes, not)."""
        return storage_bytes(self) / self.capacity

    def probabilities(self) -> torch.Tensor:
        """P(i) of every slot held, ``[size]`` float64 (Eq. 1); for inspection and tests."""
        leaves = self.sum_tree.leaves()[: int(self.count)]
        return torch.from_numpy(leaves / self.sum_tree.sum())

    def _record_buffers(self) -> dict[str, torch.Tensor]:
        if not self.built:
            return {}
        return {self._buf(k): getattr(self, self._buf(k)) for k in self._leaves if k not in self._framed}

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """The state as written: the record buffers only up to ``count`` until the ring is full (save_filled);
        the sum and min trees stay whole (a few bytes per slot)."""
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self.built:
            save_filled(destination, prefix, self._record_buffers(), int(self.count), self.capacity)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any) -> None:
        load_filled(state_dict, prefix, self._record_buffers())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def get_extra_state(self) -> Any:
        return {"generator": self.generator.get_state(), "max_priority": self.max_priority,
                "sum_tree": torch.from_numpy(self.sum_tree.tree.copy()),
                "min_tree": torch.from_numpy(self.min_tree.tree.copy())}

    def set_extra_state(self, state: Any) -> None:
        self.generator.set_state(state["generator"])
        self.max_priority = float(state["max_priority"])
        self.sum_tree.tree[:] = state["sum_tree"].cpu().numpy()
        self.min_tree.tree[:] = state["min_tree"].cpu().numpy()
