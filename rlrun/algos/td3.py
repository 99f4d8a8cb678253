"""TD3: twin delayed deep deterministic policy gradient (Fujimoto et al. 2018, "Addressing Function Approximation
Error in Actor-Critic Methods", Algorithm 1; as CleanRL's td3_continuous_action.py). Continuous (Box) actions only.

DDPG with three changes, each a few lines below: twin critics whose minimum is the target (clipped double
Q-learning, Sec. 4.2), clipped noise on the target action (target policy smoothing, Sec. 5.3), and the actor and
the target networks stepping once every ``policy_delay`` critic steps (delayed policy updates, Sec. 5.2).

Read top to bottom: the target (pure functions), the agent (its critic and its update), the plan. What TD3 shares
with SAC and DDPG (acting in the Box bounds, replay, the warm-up, the weights, the plan, the delayed actor step)
is ``rlrun/algos/off_policy_continuous.py``; the networks are ``rlrun/components/continuous_networks.py``. Its
config schema is ``rlrun.algos.td3_config.TD3Config`` (each key documented there).
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algos.off_policy_continuous import (
    ContinuousOffPolicy,
    DeterministicPolicyAgent,
    critic_regression_loss,
)
from rlrun.algos.td3_config import TD3Config
from rlrun.components.base import Component, api
from rlrun.components.continuous_networks import TwinQ
from rlrun.components.optimizers import optimizer_step
from rlrun.metric_names import LOSS_CRITIC, Q_MEAN

# ---------------------------------------------------------------------------------------------------- target


def smoothed_target_action(next_action: torch.Tensor, noise: torch.Tensor, policy_noise: float,
                           noise_clip: float) -> torch.Tensor:
    r"""Target policy smoothing (Fujimoto et al. 2018, Sec. 5.3, Eq. 15): the target actor's action with clipped
    noise, :math:`a' = \mathrm{clip}(\mu'(s') + \mathrm{clip}(\sigma \epsilon, -c, c), -1, 1)`, with
    :math:`\epsilon \sim N(0, I)` given as ``noise``, :math:`\sigma` = ``policy_noise``, :math:`c` = ``noise_clip``,
    in the normalised action units (CleanRL scales both by ``action_scale`` in env units: the same thing)."""
    return (next_action + (policy_noise * noise).clamp(-noise_clip, noise_clip)).clamp(-1.0, 1.0)


def td3_critic_target(rewards: torch.Tensor, discounts: torch.Tensor, next_q1: torch.Tensor,
                      next_q2: torch.Tensor) -> torch.Tensor:
    r"""Clipped double-Q target (Fujimoto et al. 2018, Sec. 4.2, Eq. 10, with Algorithm 1's smoothed action):
    :math:`y = r + d \min(Q'_1(s', a'), Q'_2(s', a'))`, ``d = gamma * (1 - terminated)`` (a time-limit truncation
    bootstraps from the real final observation). All ``[B]``; no gradient flows through the target."""
    return rewards + discounts * torch.minimum(next_q1, next_q2)


# ---------------------------------------------------------------------------------------------------- agent


class TD3Agent(DeterministicPolicyAgent):
    """The TD3 agent: :class:`DeterministicPolicyAgent` (acting, the delayed actor step) with twin critics."""

    def __init__(self, cfg: TD3Config, seed: int = 0, name: str = "td3_agent") -> None:
        super().__init__(cfg, seed, name)

    def make_critic(self, hidden_sizes: list[int], activation: str, name: str) -> Component:
        return TwinQ(hidden_sizes, activation, name=name)

    def q1(self, obs: Any, actions: torch.Tensor) -> torch.Tensor:
        return self.critic.first_q(obs, actions)  # the actor ascends the first critic only (Algorithm 1)

    @api
    def update(self, batch: dict | None = None) -> dict[str, torch.Tensor]:
        """One TD3 gradient step on ``batch`` (default: ``batch_size`` transitions sampled from replay; keys obs,
        action in [-1, 1], reward, next_obs, discount = gamma (1 - terminated)):

        1. the target :func:`td3_critic_target` of the target critics at the target actor's smoothed action
           (:func:`smoothed_target_action`);
        2. a step of both critics on :func:`critic_regression_loss`;
        3. every ``policy_delay``-th step: the actor's step and the targets' Polyak averaging
           (:meth:`delayed_actor_step`).

        Returns detached metrics: ``loss`` and ``loss/critic`` (the critics'), ``q/mean`` (both critics on the
        batch's actions), and ``loss/actor`` on the steps where the actor stepped.
        """
        cfg = self.cfg
        if batch is None:
            batch = self.memory.sample(cfg.batch_size)
        obs, next_obs = batch["obs"], batch["next_obs"]
        with torch.no_grad():
            next_action = self.target_actor(next_obs)
            next_action = smoothed_target_action(next_action, torch.randn_like(next_action), cfg.policy_noise,
                                                 cfg.noise_clip)
            target = td3_critic_target(batch["reward"].float(), batch["discount"].float(),
                                       *self.target_critic(next_obs, next_action))
        q1, q2 = self.critic(obs, batch["action"])
        critic_loss = optimizer_step(self.critic_optimizer, critic_regression_loss(target, q1, q2),
                                     cfg.max_grad_norm)["loss"]
        out = {"loss": critic_loss, LOSS_CRITIC: critic_loss, Q_MEAN: 0.5 * (q1 + q2).detach().mean()}
        return out | self.delayed_actor_step(obs)


# ---------------------------------------------------------------------------------------------------- plan


class TD3(ContinuousOffPolicy):
    """The shared off-policy plan (:class:`ContinuousOffPolicy`) with the TD3 agent."""

    agent_class = TD3Agent
