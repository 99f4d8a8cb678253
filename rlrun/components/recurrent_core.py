"""The recurrent core between a torso and the heads of a recurrent actor-critic (IMPALA, APPO, PPO, A2C):
``RecurrentCore``, one LSTM or GRU layer over time-major sequences whose state is reset at episode starts."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.components.base import Component, api

__all__ = ["RECURRENT_KINDS", "RecurrentCore"]

RECURRENT_KINDS = ("lstm", "gru")
"""The cores ``algo.recurrent`` names (``none``: no core)."""

State = tuple[torch.Tensor, ...]
"""A core's state: ``(h, c)`` of an LSTM, ``(h,)`` of a GRU, each ``[B, H]``."""


class RecurrentCore(Component):
    """One LSTM or GRU layer over time-major sequences whose state is reset to zero at episode starts.

    ``forward(x, state, first)``: ``x`` ``[T, B, D]``; ``state`` (``None``: zeros) a tuple of ``[B, H]`` tensors:
    ``(h, c)`` for ``lstm``, ``(h,)`` for ``gru``; ``first`` ``[T, B]`` (bool or 0/1; ``None``: no resets) marks
    the first step of an episode: that item's state is zeroed *before* the step is processed, as in IMPALA /
    TorchBeast's ``AtariNet``. Returns ``(outputs [T, B, H], state after step T - 1)``. The sequence is cut only at
    the time steps where some item resets, and each piece runs as one ``nn.LSTM`` / ``nn.GRU`` call.

    Declared output spaces: ``forward`` is the space of the per-step outputs (Box(H,)), the port a head is built
    from; ``initial_state`` the space of the state tuple.
    """

    def __init__(self, kind: str = "lstm", hidden_size: int = 256, name: str | None = None) -> None:
        """``kind``: ``lstm`` | ``gru``; ``hidden_size``: width H of the hidden (and LSTM cell) state."""
        super().__init__(name or "recurrent_core")
        if kind not in RECURRENT_KINDS:
            raise ValueError(f"{self.name}: kind {kind!r} is not one of {', '.join(RECURRENT_KINDS)}")
        self.kind, self.hidden_size = kind, int(hidden_size)

    @property
    def state_size(self) -> int:
        """Tensors in the state: 2 for an LSTM, 1 for a GRU."""
        return 2 if self.kind == "lstm" else 1

    def _build(self, x: sp.Space) -> None:
        self.require("x", x, kinds=(sp.Box,), rank=1, floating=True)
        rnn = nn.LSTM if self.kind == "lstm" else nn.GRU
        self.rnn = rnn(int(x.shape[0]), self.hidden_size)
        h = sp.Box(-np.inf, np.inf, (self.hidden_size,), np.float32)
        self.output_spaces["forward"] = h
        self.output_spaces["initial_state"] = sp.Tuple((h,) * self.state_size)

    @api
    def initial_state(self, batch_size: int) -> State:
        """The zero state, each tensor ``[batch_size, H]``, on the core's device."""
        w = self.rnn.weight_hh_l0
        return tuple(torch.zeros(batch_size, self.hidden_size, dtype=w.dtype, device=w.device)
                     for _ in range(self.state_size))

    @api
    def forward(self, x: torch.Tensor, state: State | None = None,
                first: torch.Tensor | None = None) -> tuple[torch.Tensor, State]:
        if state is None:
            state = self.initial_state(x.shape[1])
        s = tuple(t.unsqueeze(0).to(x.dtype) for t in state)  # nn.LSTM / nn.GRU take [layers, B, H]
        if first is None:
            out, s = self._run(x, s)
            return out, tuple(t[0] for t in s)
        first = first.bool()
        keep = (~first).to(x.dtype).unsqueeze(-1)  # [T, B, 1]: 0 where the state is reset before the step
        cuts = (torch.nonzero(first[1:].any(dim=1)).flatten() + 1).tolist()
        bounds = [0, *cuts, x.shape[0]]
        outs = []
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            out, s = self._run(x[start:end], tuple(t * keep[start] for t in s))
            outs.append(out)
        return (outs[0] if len(outs) == 1 else torch.cat(outs)), tuple(t[0] for t in s)

    def _run(self, x: torch.Tensor, s: State) -> tuple[torch.Tensor, State]:
        if self.kind == "lstm":
            out, (h, c) = self.rnn(x, s)
            return out, (h, c)
        out, h = self.rnn(x, s[0])
        return out, (h,)
