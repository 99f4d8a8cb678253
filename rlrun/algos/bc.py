"""BC: behaviour cloning from a dataset (Pomerleau 1991; the offline-RL baseline of D4RL, Fu et al. 2020, and of
CORL's ``any_percent_bc.py``, Tarasov et al. 2022). Discrete actions: a categorical policy trained on the
cross-entropy of the dataset's actions; Box actions: a deterministic tanh policy trained on the squared error of the
dataset's actions normalised to ``[-1, 1]`` (CORL's BC). Its config schema is ``rlrun.algos.bc_config.BCConfig``.

Read top to bottom: the two losses (pure functions), the discrete policy, the agent, then the plan, which is the
shared offline plan (``rlrun/algos/offline.py``: gradient steps on batches of the dataset, no env steps).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlrun import spaces as sp
from rlrun.algos.base import DISCRETE_OR_BOX
from rlrun.algos.bc_config import BCConfig
from rlrun.algos.offline import OfflinePlan, learning_batch, obs_normalizer
from rlrun.components.base import Component, api
from rlrun.components.continuous_networks import DeterministicActor
from rlrun.components.networks import MLP
from rlrun.components.optimizers import optimizer_step
from rlrun.components.optimizers.adam import Adam
from rlrun.errors import ConfigError
from rlrun.metric_names import LOSS_BC

# ---------------------------------------------------------------------------------------------------- losses


def bc_discrete_loss(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    r"""The negative log-likelihood of the dataset's actions under a categorical policy:
    :math:`-E[\log \pi(a|s)]` with :math:`\pi = \mathrm{softmax}(\text{logits})`; ``logits`` ``[B, n]``, ``actions``
    ``[B]`` integers."""
    return F.cross_entropy(logits, actions.long())


def bc_continuous_loss(actions_pi: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    r"""The squared error of a deterministic policy to the dataset's actions, both in ``[-1, 1]`` (CORL's BC):
    :math:`E\|\mu(s) - a\|^2 / d`, the mean over the batch and the action's ``d`` dimensions."""
    return (actions_pi - actions).pow(2).mean()


# ---------------------------------------------------------------------------------------------------- networks


class CategoricalPolicy(Component):
    """obs -> logits ``[B, n]`` of a Discrete action: an MLP torso and a linear output."""

    def __init__(self, hidden_sizes: list[int], activation: str, name: str = "policy") -> None:
        super().__init__(name)
        self.torso = MLP(hidden_sizes, activation, name="torso")

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.require("actions", actions, kinds=(sp.Discrete,))
        self.build_child(self.torso, obs=obs)
        self.out = nn.Linear(int(self.torso.output_spaces["forward"].shape[0]), int(actions.n))
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (int(actions.n),), np.float32)

    @api
    def forward(self, obs: Any) -> torch.Tensor:
        return self.out(self.torso(obs))


# ---------------------------------------------------------------------------------------------------- agent


class BCAgent(Component):
    """The BC agent: a categorical policy (Discrete actions) or a deterministic tanh actor (Box actions, rescaled
    to the bounds), one Adam optimizer; ``get_actions`` is greedy (the arg-max, or the actor's action: the dataset's
    behaviour without its noise) or, exploring, samples the categorical policy."""

    def __init__(self, cfg: BCConfig, seed: int = 0, name: str = "bc_agent") -> None:
        super().__init__(name)
        self.cfg = cfg
        self.obs_normalizer = obs_normalizer(cfg)

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        if self.obs_normalizer is not None:
            self.build_child(self.obs_normalizer, obs=obs)
        hidden, act = list(self.cfg.hidden_sizes), self.cfg.activation
        self.discrete = isinstance(actions, sp.Discrete)
        if self.discrete:
            self.policy = CategoricalPolicy(hidden, act)
            self.build_child(self.policy, obs=obs, actions=actions)
        else:
            low, high = np.asarray(actions.low, np.float64), np.asarray(actions.high, np.float64)
            if not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise ConfigError(f"algo=bc fits a tanh policy in the Box bounds, so they must be finite; got "
                                  f"{sp.describe(actions)}.")
            self.register_buffer("action_scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
            self.register_buffer("action_bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))
            self.policy = DeterministicActor(hidden, act, name="policy")
            self.build_child(self.policy, obs=obs, actions=sp.Box(-1.0, 1.0, actions.shape, np.float32))
        self.optimizer = Adam(self.policy.parameters(), lr=self.cfg.lr)
        self.output_spaces["get_actions"] = actions

    def get_extra_state(self) -> Any:
        return {"optimizer": self.optimizer.state_dict()}

    def set_extra_state(self, state: Any) -> None:
        # a deep copy: torch's Optimizer.load_state_dict would share another agent's live moment tensors
        self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))

    def learning_batch(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A dataset batch with Box actions in ``[-1, 1]`` (BC needs no discount; gamma 1 leaves it unused)."""
        if self.discrete:
            return learning_batch(batch, 1.0)
        return learning_batch(batch, 1.0, self.action_scale, self.action_bias)

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        """Env actions ``[B]`` (Discrete: the arg-max, or a sample when exploring) or ``[B, *S]`` (Box: the
        actor's action in the bounds)."""
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        if self.discrete:
            logits = self.policy(obs)
            if explore:
                return torch.distributions.Categorical(logits=logits).sample()
            return logits.argmax(dim=-1)
        return self.action_bias + self.action_scale * self.policy(obs)

    @api
    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on :func:`bc_discrete_loss` or :func:`bc_continuous_loss` of a
        :meth:`learning_batch`; returns ``loss`` and ``loss/bc``, detached."""
        if self.discrete:
            loss = bc_discrete_loss(self.policy(batch["obs"]), batch["action"])
        else:
            loss = bc_continuous_loss(self.policy(batch["obs"]), batch["action"])
        value = optimizer_step(self.optimizer, loss)["loss"]
        return {"loss": value, LOSS_BC: value}

    @api
    def get_weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.policy.state_dict().items()}

    @api
    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.policy.load_state_dict(weights)


# ---------------------------------------------------------------------------------------------------- plan


class BC(OfflinePlan):
    """The shared offline plan (:class:`OfflinePlan`) with the BC agent."""

    takes_actions = DISCRETE_OR_BOX
    agent_class = BCAgent
