"""DDPG: deep deterministic policy gradient (Lillicrap et al. 2016, "Continuous control with deep reinforcement
learning", Algorithm 1), as CleanRL's ddpg_continuous_action.py keeps it: Gaussian exploration noise instead of the
paper's Ornstein-Uhlenbeck process, 256 x 256 networks, and the actor and target updates every second critic step
(``policy_delay``; the paper's is every step, ``algo.policy_delay=1``). Continuous (Box) actions only.

Read top to bottom: the target (a pure function), the agent (its critic and its update), the plan. What DDPG shares
with SAC and TD3 (acting in the Box bounds, replay, the warm-up, the weights, the plan, the delayed actor step) is
``rlrun/algos/off_policy_continuous.py``; the networks are ``rlrun/components/continuous_networks.py``. Its config
schema is ``rlrun.algos.ddpg_config.DDPGConfig`` (each key documented there).
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algos.ddpg_config import DDPGConfig
from rlrun.algos.off_policy_continuous import (
    ContinuousOffPolicy,
    DeterministicPolicyAgent,
    critic_regression_loss,
)
from rlrun.components.base import Component, api
from rlrun.components.continuous_networks import QFunction
from rlrun.components.optimizers import optimizer_step
from rlrun.metric_names import LOSS_CRITIC, Q_MEAN

# ---------------------------------------------------------------------------------------------------- target


def ddpg_critic_target(rewards: torch.Tensor, discounts: torch.Tensor, next_q: torch.Tensor) -> torch.Tensor:
    r"""The critic's target (Lillicrap et al. 2016, Algorithm 1): :math:`y = r + d\, Q'(s', \mu'(s'))` of the target
    critic at the target actor's action, ``d = gamma * (1 - terminated)`` (a time-limit truncation bootstraps from
    the real final observation). All ``[B]``; no gradient flows through the target."""
    return rewards + discounts * next_q


# ---------------------------------------------------------------------------------------------------- agent


class DDPGAgent(DeterministicPolicyAgent):
    """The DDPG agent: :class:`DeterministicPolicyAgent` (acting, the delayed actor step) with one critic."""

    def __init__(self, cfg: DDPGConfig, seed: int = 0, name: str = "ddpg_agent") -> None:
        super().__init__(cfg, seed, name)

    def make_critic(self, hidden_sizes: list[int], activation: str, name: str) -> Component:
        return QFunction(hidden_sizes, activation, name=name)

    def q1(self, obs: Any, actions: torch.Tensor) -> torch.Tensor:
        return self.critic(obs, actions)

    @api
    def update(self, batch: dict | None = None) -> dict[str, torch.Tensor]:
        """One DDPG gradient step on ``batch`` (default: ``batch_size`` transitions sampled from replay; keys obs,
        action in [-1, 1], reward, next_obs, discount = gamma (1 - terminated)):

        1. the target :func:`ddpg_critic_target` of the target critic at the target actor's action;
        2. a step of the critic on :func:`critic_regression_loss`;
        3. every ``policy_delay``-th step: the actor's step and the targets' Polyak averaging
           (:meth:`delayed_actor_step`).

        Returns detached metrics: ``loss`` and ``loss/critic``, ``q/mean`` (the critic on the batch's actions), and
        ``loss/actor`` on the steps where the actor stepped.
        """
        cfg = self.cfg
        if batch is None:
            batch = self.memory.sample(cfg.batch_size)
        obs, next_obs = batch["obs"], batch["next_obs"]
        with torch.no_grad():
            next_q = self.target_critic(next_obs, self.target_actor(next_obs))
            target = ddpg_critic_target(batch["reward"].float(), batch["discount"].float(), next_q)
        q = self.critic(obs, batch["action"])
        critic_loss = optimizer_step(self.critic_optimizer, critic_regression_loss(target, q),
                                     cfg.max_grad_norm)["loss"]
        out = {"loss": critic_loss, LOSS_CRITIC: critic_loss, Q_MEAN: q.detach().mean()}
        return out | self.delayed_actor_step(obs)


# ---------------------------------------------------------------------------------------------------- plan


class DDPG(ContinuousOffPolicy):
    """The shared off-policy plan (:class:`ContinuousOffPolicy`) with the DDPG agent."""

    agent_class = DDPGAgent
