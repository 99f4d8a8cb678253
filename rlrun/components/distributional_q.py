"""The Q-network and loss of the distributional DQN family: C51 (Bellemare et al. 2017) and QR-DQN (Dabney et al.
2018). The arithmetic is in :mod:`rlrun.ops.distributional`; this module wires it to networks and replay batches.

- ``AtomQHead``: torso features -> one vector of N outputs per action ``[B, A, N]``, plain or dueling (Wang et al.
  2016, Eq. 9 per atom, as Rainbow's, Hessel et al. 2018, Eq. in Sec. 3), with linear or noisy layers.
- ``DistributionalQNetwork``: torso + ``AtomQHead``. ``forward`` gives the Q-values ``[B, A]`` (the distribution's
  mean) like :class:`~rlrun.components.q_network.QNetwork`, so exploration, acting and Ape-X's actor priorities
  use it unchanged; ``distribution`` gives the return distribution the loss learns: categorical log-probabilities
  on the support (``kind="categorical"``) or quantile values (``kind="quantile"``).
- ``DistributionalLoss`` and ``distributional_q_loss``: DQN's ``q_loss`` for a distribution (same signature, so
  DQN's learner takes its gradient step with either).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from rlrun import spaces as sp
from rlrun.components.base import Component, ComponentBuildError, api
from rlrun.components.heads import dueling_q, in_float32
from rlrun.components.networks import make_torso
from rlrun.components.noisy import linear_layer
from rlrun.ops.action_mask import apply_action_mask, mask_space_of
from rlrun.ops.distributional import (
    categorical_loss,
    categorical_projection,
    categorical_support,
    quantile_huber_loss,
    quantile_midpoints,
)

__all__ = ["AtomQHead", "DistributionalLoss", "DistributionalQNetwork", "distributional_q_loss"]

KINDS = ("categorical", "quantile")


class AtomQHead(Component):
    """x ``[B, D]`` -> ``[B, A, N]``: N outputs (atoms' logits or quantiles) per action of a Discrete space.
    ``dueling``: a value stream ``[B, N]`` and an advantage stream ``[B, A, N]`` combined per atom by
    :func:`~rlrun.components.heads.dueling_q` (the mean over actions); ``noisy``: noisy layers of sigma_0
    ``noisy_std``."""

    def __init__(self, num_atoms: int, dueling: bool = False, noisy: bool = False, noisy_std: float = 0.5,
                 name: str | None = None) -> None:
        super().__init__(name or "atom_q_head")
        self.num_atoms, self.dueling, self.noisy, self.noisy_std = int(num_atoms), bool(dueling), noisy, noisy_std

    def _build(self, x: sp.Space, actions: sp.Space) -> None:
        self.require("x", x, kinds=(sp.Box,), rank=1, floating=True)
        self.require("actions", actions, kinds=(sp.Discrete,))
        width, self.num_actions = int(x.shape[0]), int(actions.n)
        self.advantage = linear_layer(width, self.num_actions * self.num_atoms, self.noisy, self.noisy_std)
        if self.dueling:
            self.value = linear_layer(width, self.num_atoms, self.noisy, self.noisy_std)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (self.num_actions, self.num_atoms), np.float32)

    @api
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = in_float32(self.advantage, x).unflatten(-1, (self.num_actions, self.num_atoms))
        if not self.dueling:
            return out
        # dueling_q aggregates over the last axis: put the actions there, then back
        return dueling_q(in_float32(self.value, x), out.transpose(-1, -2)).transpose(-1, -2)


class DistributionalQNetwork(Component):
    """Torso + :class:`AtomQHead`: obs -> the return distribution of each action, and its mean Q(obs, ·)."""

    def __init__(self, kind: str, num_atoms: int, v_min: float = -10.0, v_max: float = 10.0,
                 network: str = "mlp", hidden_sizes: list[int] | tuple[int, ...] = (64, 64), activation: str = "relu",
                 dueling: bool = False, noisy: bool = False, noisy_std: float = 0.5, name: str = "q",
                 action_mask: str = "auto") -> None:
        """``kind``: "categorical" (C51: ``num_atoms`` atoms on ``[v_min, v_max]``) or "quantile" (QR-DQN:
        ``num_atoms`` quantiles; v_min, v_max unused); the rest as :class:`~rlrun.components.q_network.QNetwork`."""
        super().__init__(name)
        if kind not in KINDS:
            raise ValueError(f"kind '{kind}' is not one of {', '.join(KINDS)}")
        self.kind, self.action_mask = kind, action_mask
        self._torso_args = (network, list(hidden_sizes), activation)
        # a named torso is made now (a bad name fails before the build); auto waits for the observation space
        self.torso = None if network == "auto" else make_torso(network, list(hidden_sizes), activation, "torso")
        self._head_args = (num_atoms, dueling, noisy, noisy_std)
        self.head: AtomQHead | None = None  # made at the build, after the torso: one parameter order
        if kind == "categorical":
            self.register_buffer("support", categorical_support(v_min, v_max, num_atoms))

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.masked = self.action_mask != "off" and mask_space_of(obs, actions, "algo.action_mask=auto") is not None
        if self.torso is None:
            network, hidden_sizes, activation = self._torso_args
            self.torso = make_torso(network, hidden_sizes, activation, "torso", obs=obs)
        self.head = AtomQHead(*self._head_args, name="q_head")
        self.build_child(self.torso, obs=obs)
        self.build_child(self.head, x=self.torso.output("forward"), actions=actions)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (int(actions.n),), np.float32)
        self.output_spaces["distribution"] = self.head.output_spaces["forward"]

    @api
    def distribution(self, obs: Any) -> torch.Tensor:
        """``[B, A, N]``: log-probabilities of the atoms (categorical) or the quantile values (quantile)."""
        out = self.head(self.torso(obs))
        return F.log_softmax(out, dim=-1) if self.kind == "categorical" else out

    def mean(self, distribution: torch.Tensor) -> torch.Tensor:
        """Q = the distribution's mean ``[..., A]``: ``sum_i p_i z_i``, or the quantiles' average."""
        if self.kind == "categorical":
            return (distribution.exp() * self.support).sum(dim=-1)
        return distribution.mean(dim=-1)

    @api
    def forward(self, obs: Any) -> torch.Tensor:
        """Q-values ``[B, A]``, illegal actions masked as :class:`~rlrun.components.q_network.QNetwork`'s."""
        q = self.mean(self.distribution(obs))
        return apply_action_mask(q, obs) if self.masked else q


class DistributionalLoss(Component):
    """Per item: C51's cross-entropy against the projected target, or QR-DQN's quantile Huber loss (threshold
    ``kappa``). ``double_q``: the bootstrap action is the online network's argmax (Hessel et al. 2018's Rainbow)."""

    def __init__(self, kind: str, double_q: bool = True, kappa: float = 1.0, name: str | None = None) -> None:
        super().__init__(name or "loss")
        if kind not in KINDS:
            raise ValueError(f"kind '{kind}' is not one of {', '.join(KINDS)}")
        self.kind, self.double_q, self.kappa = kind, bool(double_q), float(kappa)

    def _build(self, q: sp.Space, actions: sp.Space) -> None:
        self.require("q", q, kinds=(sp.Box,), rank=1, floating=True)
        self.require("actions", actions, kinds=(sp.Discrete,))
        if int(actions.n) != q.shape[0]:
            raise ComponentBuildError(f"{self.name}: q has {q.shape[0]} action values but actions is "
                                      f"{sp.describe(actions)}")
        self.output_spaces["per_item"] = sp.Box(-np.inf, np.inf, (), np.float32)

    @api
    def per_item(self, predicted: torch.Tensor, next_distribution: torch.Tensor, rewards: torch.Tensor,
                 discounts: torch.Tensor, support: torch.Tensor | None = None) -> torch.Tensor:
        """The loss of each item ``[B]``: ``predicted`` ``[B, N]`` (the taken action's log-probabilities or
        quantiles), ``next_distribution`` ``[B, N]`` (the target network's at the bootstrap action; probabilities
        are taken from its log-probabilities here), ``discounts`` ``gamma^n (1 - terminated)``."""
        if self.kind == "categorical":
            target = categorical_projection(next_distribution.exp(), rewards, discounts, support)
            return categorical_loss(predicted, target)
        targets = rewards.unsqueeze(-1) + discounts.unsqueeze(-1) * next_distribution
        taus = quantile_midpoints(predicted.shape[-1], device=predicted.device)
        return quantile_huber_loss(predicted, targets, taus, self.kappa)


def distributional_q_loss(q: DistributionalQNetwork, target_q: DistributionalQNetwork, loss: DistributionalLoss,
                          data: tuple[dict, torch.Tensor | None]) -> tuple[torch.Tensor, dict]:
    """``(loss, {"td_error": per-item loss})`` on a replay batch ``data = (batch, weights)``, as DQN's
    :func:`~rlrun.components.q_network.q_loss`: the mean of the (importance-weighted) per-item losses. The per-item
    loss stands for the TD error in prioritised replay, as Rainbow's priorities are the KL loss (Hessel et al. 2018,
    Sec. 3)."""
    batch, weights = data
    rows = torch.arange(batch["action"].shape[0], device=batch["action"].device)
    predicted = q.distribution(batch["obs"])[rows, batch["action"].long()]
    with torch.no_grad():
        next_target = target_q.distribution(batch["next_obs"])
        select = q(batch["next_obs"]) if loss.double_q else target_q.mean(next_target)
        if target_q.masked and not loss.double_q:  # the bootstrap action is a legal one
            select = apply_action_mask(select, batch["next_obs"])
        bootstrap = next_target[rows, select.argmax(dim=-1)]
    per_item = loss.per_item(predicted, bootstrap, batch["reward"], batch["discount"],
                             getattr(target_q, "support", None))
    weighted = per_item if weights is None else per_item * weights
    return weighted.mean(), {"td_error": per_item.detach()}
