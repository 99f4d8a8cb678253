"""Heads: map torso features to the quantities an algorithm acts and learns on."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.components.base import Component, api


class QHead(Component):
    """Linear action values Q(s, ·) for a Discrete action space: x [B, D] -> q [B, A]."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name or "q_head")

    def _build(self, x: sp.Space, actions: sp.Space) -> None:
        self.require("x", x, kinds=(sp.Box,), rank=1, floating=True)
        self.require("actions", actions, kinds=(sp.Discrete,))
        self.linear = nn.Linear(x.shape[0], actions.n)
        self.output_spaces["get_q"] = sp.Box(-np.inf, np.inf, (int(actions.n),), np.float32)

    @api
    def get_q(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)
