"""IQL: implicit Q-learning (Kostrikov, Nair and Levine 2021, "Offline Reinforcement Learning with Implicit
Q-Learning", Algorithm 1; as CORL's ``iql.py``, Tarasov et al. 2022). Box actions; learns from a dataset.

IQL never evaluates Q on an action the dataset does not hold: V(s) fits an upper expectile of Q(s, a) over the
dataset's actions (an in-sample estimate of the best action's value), Q fits r + gamma V(s'), and the policy
regresses onto the dataset's actions weighted by exp(beta (Q - V)) (advantage-weighted regression). The policy is a
deterministic tanh actor (CORL's ``iql_deterministic``): the weighted log-likelihood of a Gaussian with a fixed
variance is the weighted squared error.

Read top to bottom: the losses (pure functions), the agent (networks, update), then the plan, the shared offline
plan (``rlrun/algos/offline.py``). Acting in the Box bounds, the optimizers' checkpointed state and the weights are
the continuous-action base's (``rlrun/algos/off_policy_continuous.py``); the networks are
``rlrun/components/continuous_networks.py``. Its config schema is ``rlrun.algos.iql_config.IQLConfig``.
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun import spaces as sp
from rlrun.algos.base import CONTINUOUS
from rlrun.algos.iql_config import IQLConfig
from rlrun.algos.off_policy_continuous import ContinuousOffPolicyAgent, critic_regression_loss
from rlrun.algos.offline import OfflinePlan, learning_batch, obs_normalizer
from rlrun.components.base import api
from rlrun.components.continuous_networks import DeterministicActor, TwinQ, ValueFunction
from rlrun.components.optimizers import optimizer_step
from rlrun.components.optimizers.adam import Adam
from rlrun.metric_names import LOSS_ACTOR, LOSS_CRITIC, LOSS_VALUE, Q_MEAN

# ---------------------------------------------------------------------------------------------------- losses


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    r"""The asymmetric squared loss of IQL's value function (Kostrikov et al. 2021, Eq. 5):
    :math:`L_2^\tau(u) = |\tau - \mathbb{1}(u < 0)|\, u^2`, the mean over ``diff`` ``[B]`` with
    :math:`u = Q(s, a) - V(s)`. With :math:`\tau > 0.5` an underestimate of Q (``u > 0``) costs more than an
    overestimate, so V fits the :math:`\tau`-expectile of Q over the dataset's actions."""
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return (weight * diff.pow(2)).mean()


def advantage_weights(advantage: torch.Tensor, beta: float, max_weight: float) -> torch.Tensor:
    r"""The weights of IQL's policy extraction (Kostrikov et al. 2021, Eq. 7; Peng et al. 2019's AWR):
    :math:`\min(\exp(\beta (Q(s, a) - V(s))), w_{max})`, detached: the policy is regressed towards a dataset action in
    proportion to how much better it is than V says the state is worth."""
    return torch.exp(beta * advantage.detach()).clamp(max=max_weight)


def weighted_regression_loss(actions_pi: torch.Tensor, actions: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    r"""Advantage-weighted regression of a deterministic policy: :math:`E[w \, \|\mu(s) - a\|^2]`, the squared error
    summed over the action's dimensions (CORL's deterministic IQL); ``actions_pi``, ``actions`` ``[B, d]``,
    ``weights`` ``[B]``."""
    return (weights * (actions_pi - actions).pow(2).reshape(weights.shape[0], -1).sum(dim=1)).mean()


# ---------------------------------------------------------------------------------------------------- agent


class IQLAgent(ContinuousOffPolicyAgent):
    """The IQL agent: twin critics with a target copy, a value network and a deterministic tanh actor, one Adam
    optimizer each; ``get_actions`` is the actor's action (no exploration: nothing is acted while learning)."""

    def __init__(self, cfg: IQLConfig, seed: int = 0, name: str = "iql_agent") -> None:
        super().__init__(cfg, seed, name)
        hidden, act = list(cfg.hidden_sizes), cfg.activation
        self.actor = DeterministicActor(hidden, act, name="actor")
        self.critic = TwinQ(hidden, act, name="critic")
        self.target_critic = TwinQ(hidden, act, name="target_critic")
        self.value = ValueFunction(hidden, act, name="value")
        self.obs_normalizer = obs_normalizer(cfg)

    def _build_networks(self, obs: sp.Space, unit: sp.Box) -> None:
        if self.obs_normalizer is not None:
            self.build_child(self.obs_normalizer, obs=obs)
        self.build_child(self.actor, obs=obs, actions=unit)
        self.build_child(self.critic, obs=obs, actions=unit)
        self.build_target_copy(self.target_critic, self.critic, obs=obs, actions=unit)
        self.build_child(self.value, obs=obs)
        cfg = self.cfg
        self.actor_optimizer = Adam(self.actor.parameters(), lr=cfg.actor_lr)
        self.critic_optimizer = Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.value_optimizer = Adam(self.value.parameters(), lr=cfg.value_lr)

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer, "value": self.value_optimizer}

    def learning_batch(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A dataset batch with the discount and the action in ``[-1, 1]``."""
        return learning_batch(batch, self.cfg.gamma, self.action_scale, self.action_bias)

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        """Env actions ``[B, *S]``: the actor's, rescaled to the Box bounds (the same whether exploring or not)."""
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        return self._to_env(self.actor(obs))

    @api
    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One IQL gradient step on a :meth:`learning_batch` (Kostrikov et al. 2021, Algorithm 1, in CORL's order):

        1. V on :func:`expectile_loss` of ``min(Q'_1, Q'_2)(s, a) - V(s)`` (target critics, the dataset's action);
        2. the twin critics on :func:`critic_regression_loss` towards ``r + discount V(s')`` (V just updated);
        3. the actor on :func:`weighted_regression_loss` with :func:`advantage_weights` of step 1's advantage;
        4. Polyak-average the target critics.

        Returns detached metrics: ``loss`` (the critics'), ``loss/value``, ``loss/critic``, ``loss/actor``,
        ``q/mean``."""
        obs, action = batch["obs"], batch["action"]
        with torch.no_grad():
            target_q = torch.minimum(*self.target_critic(obs, action))
            next_v = self.value(batch["next_obs"])
        advantage = target_q - self.value(obs)
        value_loss = optimizer_step(self.value_optimizer, expectile_loss(advantage, self.cfg.expectile))["loss"]

        q1, q2 = self.critic(obs, action)
        target = batch["reward"] + batch["discount"] * next_v
        critic_loss = optimizer_step(self.critic_optimizer, critic_regression_loss(target, q1, q2))["loss"]

        weights = advantage_weights(advantage, self.cfg.beta, self.cfg.max_weight)
        actor_loss = optimizer_step(self.actor_optimizer,
                                    weighted_regression_loss(self.actor(obs), action, weights))["loss"]
        self.target_sync.step(self.critic, self.target_critic)
        return {"loss": critic_loss, LOSS_VALUE: value_loss, LOSS_CRITIC: critic_loss, LOSS_ACTOR: actor_loss,
                Q_MEAN: 0.5 * (q1 + q2).detach().mean()}


# ---------------------------------------------------------------------------------------------------- plan


class IQL(OfflinePlan):
    """The shared offline plan (:class:`OfflinePlan`) with the IQL agent; Box actions only."""

    takes_actions = CONTINUOUS
    agent_class = IQLAgent
