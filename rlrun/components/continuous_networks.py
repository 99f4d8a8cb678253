"""The networks of the off-policy continuous-control agents (SAC, TD3, DDPG, IQL, CQL), over a Box action
normalised to ``[-1, 1]`` (the agents rescale to the env's bounds): the action-value critic ``Q(s, a)``, a twin of
them (clipped double Q), the state-value function ``V(s)`` (IQL's) and the deterministic tanh actor of TD3, DDPG
and IQL. Each is built from the observation and action spaces
and tested alone (tests/components/test_continuous_networks.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.components.networks import MLP, FlattenObservation


class QFunction(Component):
    """``Q(s, a)``: the flattened observation and the (normalised) action concatenated, an MLP, a linear output.
    obs ``[B, ...]``, actions ``[B, *S]`` -> ``[B]``."""

    def __init__(self, hidden_sizes: list[int], activation: str, name: str = "q") -> None:
        super().__init__(name)
        self.flatten = FlattenObservation("flatten")
        self.torso = MLP(hidden_sizes, activation, name="torso")

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.require("actions", actions, kinds=(sp.Box,), floating=True)
        self.build_child(self.flatten, obs=obs)
        width = int(self.flatten.output_spaces["forward"].shape[0]) + sp.flat_dim(actions)
        self._action_rank = len(actions.shape)
        self.build_child(self.torso, obs=sp.Box(-np.inf, np.inf, (width,), np.float32))
        self.out = nn.Linear(int(self.torso.output_spaces["forward"].shape[0]), 1)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (), np.float32)

    @api
    def forward(self, obs: Any, actions: torch.Tensor) -> torch.Tensor:
        a = actions.reshape(*actions.shape[: actions.dim() - self._action_rank], -1).to(torch.float32)
        return self.out(self.torso(torch.cat([self.flatten(obs), a], dim=-1))).squeeze(-1)


class TwinQ(Component):
    """Two independent Q-networks (clipped double Q; Fujimoto et al. 2018, used by SAC's Algorithm 1):
    ``forward(obs, actions) -> (Q1, Q2)``, each ``[B]``."""

    def __init__(self, hidden_sizes: list[int], activation: str, name: str = "critic") -> None:
        super().__init__(name)
        self.q1 = QFunction(hidden_sizes, activation, name="q1")
        self.q2 = QFunction(hidden_sizes, activation, name="q2")

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.build_child(self.q1, obs=obs, actions=actions)
        self.build_child(self.q2, obs=obs, actions=actions)
        q = self.q1.output_spaces["forward"]
        self.output_spaces["forward"] = sp.Tuple((q, q))

    @api
    def forward(self, obs: Any, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.q1(obs, actions), self.q2(obs, actions)

    @api
    def first_q(self, obs: Any, actions: torch.Tensor) -> torch.Tensor:
        """``Q1(s, a)`` alone ``[B]``: what TD3's actor ascends (Fujimoto et al. 2018, Algorithm 1)."""
        return self.q1(obs, actions)


class ValueFunction(Component):
    """``V(s)``: the flattened observation, an MLP, a linear output (IQL's value network, Kostrikov et al. 2021).
    obs ``[B, ...]`` -> ``[B]``."""

    def __init__(self, hidden_sizes: list[int], activation: str, name: str = "value") -> None:
        super().__init__(name)
        self.torso = MLP(hidden_sizes, activation, name="torso")

    def _build(self, obs: sp.Space) -> None:
        self.build_child(self.torso, obs=obs)
        self.out = nn.Linear(int(self.torso.output_spaces["forward"].shape[0]), 1)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (), np.float32)

    @api
    def forward(self, obs: Any) -> torch.Tensor:
        return self.out(self.torso(obs)).squeeze(-1)


class DeterministicActor(Component):
    """``mu(s) = tanh(W h(s) + b)`` in ``[-1, 1]^d``: an MLP torso and a linear layer squashed by tanh (the actor of
    DDPG, Lillicrap et al. 2016, and TD3, Fujimoto et al. 2018; CleanRL's ``Actor`` before its rescaling to the Box
    bounds, which the agent does). obs ``[B, ...]`` -> actions ``[B, *S]``."""

    def __init__(self, hidden_sizes: list[int], activation: str, name: str = "actor") -> None:
        super().__init__(name)
        self.torso = MLP(hidden_sizes, activation, name="torso")

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.require("actions", actions, kinds=(sp.Box,), floating=True)
        self.build_child(self.torso, obs=obs)
        self._action_shape = tuple(int(d) for d in actions.shape)
        self.out = nn.Linear(int(self.torso.output_spaces["forward"].shape[0]), sp.flat_dim(actions))
        self.output_spaces["forward"] = sp.Box(-1.0, 1.0, self._action_shape, np.float32)

    @api
    def forward(self, obs: Any) -> torch.Tensor:
        a = torch.tanh(self.out(self.torso(obs)))
        return a.reshape(*a.shape[:-1], *self._action_shape)
