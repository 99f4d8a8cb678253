"""Losses: pure functions of tensors, wrapped as components so they can be built and tested from spaces."""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from rlrun import spaces as sp
from rlrun.components.base import Component, ComponentBuildError, api


def dqn_td_error(q: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor,
                 q_next_target: torch.Tensor, q_next_online: torch.Tensor | None = None) -> torch.Tensor:
    """TD error ``y - Q(s, a)`` of (double) DQN, per item.

    ``y = r + discount * Q_target(s', argmax_a' Q_select(s', a'))`` where ``Q_select`` is the online network for
    double DQN (van Hasselt et al. 2016, Eq. 4) or the target network for DQN (Mnih et al. 2015, Eq. 2).
    ``discounts`` is ``gamma^n * (1 - terminated)``: 0 at a terminal step (no bootstrap), ``gamma^n`` after a
    time-limit truncation (bootstrap from the real final observation). Shapes: q, q_next_*: [B, A]; others: [B].
    """
    q_taken = q.gather(1, actions.long().unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        select = q_next_online if q_next_online is not None else q_next_target
        next_actions = select.argmax(dim=1, keepdim=True)
        bootstrap = q_next_target.gather(1, next_actions).squeeze(1)
        target = rewards + discounts * bootstrap
    return target - q_taken


def dqn_loss(td_error: torch.Tensor, huber_delta: float | None = 1.0, weights: torch.Tensor | None = None,
             reduction: str = "mean") -> torch.Tensor:
    """Huber (or squared, ``huber_delta=None``) loss of the TD error, optionally importance-weighted (PER)."""
    if huber_delta is None:
        per_item = 0.5 * td_error.pow(2)
    else:
        per_item = F.huber_loss(td_error, torch.zeros_like(td_error), reduction="none", delta=huber_delta)
    if weights is not None:
        per_item = per_item * weights
    if reduction == "none":
        return per_item
    if reduction == "sum":
        return per_item.sum()
    return per_item.mean()


class DQNLoss(Component):
    """(Double) DQN loss component: returns (scalar loss, per-item TD error for priority updates)."""

    def __init__(self, double_q: bool = True, huber_delta: float | None = 1.0, name: str | None = None) -> None:
        super().__init__(name or "loss")
        self.double_q = double_q
        self.huber_delta = huber_delta

    def _build(self, q: sp.Space, actions: sp.Space) -> None:
        self.require("q", q, kinds=(sp.Box,), rank=1, floating=True)
        self.require("actions", actions, kinds=(sp.Discrete,))
        if int(actions.n) != q.shape[0]:
            raise ComponentBuildError(f"{self.name}: q has {q.shape[0]} action values but actions is "
                                      f"{sp.describe(actions)}")
        self.output_spaces["loss"] = sp.Tuple((sp.Box(-np.inf, np.inf, (), np.float32),
                                               sp.Box(-np.inf, np.inf, (), np.float32)))

    @api
    def loss(self, q: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor,
             q_next_target: torch.Tensor, q_next_online: torch.Tensor | None = None,
             weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        td = dqn_td_error(q, actions, rewards, discounts, q_next_target,
                          q_next_online if self.double_q else None)
        return dqn_loss(td, self.huber_delta, weights), td.detach()
