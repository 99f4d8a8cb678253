"""A2C: synchronous advantage actor-critic (Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement
Learning", Algorithm S3, run synchronously over env copies as in OpenAI Baselines' a2c and SB3's A2C).

Every update: ``rollout_steps`` agent steps of every env copy, advantages from the n-step returns (``gae_lambda=1``,
the paper's estimator; ``< 1`` gives GAE), and *one* gradient step on

    L = -log pi(a_t|s_t) A_t + vf_coef * 1/2 (R_t - V(s_t))^2 - ent_coef * H(pi(.|s_t))

(:func:`rlrun.components.policy_losses.a2c_loss`) averaged over the rollout. It is PPO's plan with a different
update: the actor-critic network, the truncation-aware advantage estimator and the plan come from
:mod:`rlrun.algos.ppo`; this file holds what differs (the optimizer and the loss). Its config schema is
``rlrun.config.A2CConfig`` (each key documented there and in conf/algo/a2c.yaml).

The asynchronous variant (A3C: workers compute gradients on their own rollouts and the learner applies them as
they arrive) is not here: the worker-set interface plans use (``sample``, ``sync_weights``) has no per-worker
gradient computation yet.
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algos.ppo import PPO, PPOAgent, _flatten_time, explained_variance
from rlrun.components.base import Component, api
from rlrun.components.distributions import make_distribution
from rlrun.components.optimizers import GradientStep
from rlrun.components.policy_losses import a2c_loss
from rlrun.config import A2CConfig


class A2CAgent(PPOAgent):
    """The A2C agent: PPO's acting, observing and weights; its update is one gradient step on the A2C loss."""

    def __init__(self, cfg: A2CConfig, seed: int = 0, name: str = "a2c_agent") -> None:
        super().__init__(cfg, seed, name)

    @staticmethod
    def _make_optimizer(cfg: A2CConfig, seed: int) -> Component:
        """One RMSProp (Mnih et al. 2016; alpha 0.99) or Adam step per rollout."""
        if cfg.optimizer == "rmsprop":
            kwargs = {"alpha": cfg.rmsprop_alpha, "eps": cfg.optimizer_eps}
        elif cfg.optimizer == "adam":
            kwargs = {"eps": cfg.optimizer_eps}
        else:
            from rlrun.errors import ConfigError

            raise ConfigError(f"algo.optimizer={cfg.optimizer}: not one of rmsprop, adam.")
        return GradientStep(cfg.optimizer, lr=cfg.lr, max_grad_norm=cfg.max_grad_norm, **kwargs)

    def torch_optimizer(self) -> torch.optim.Optimizer:
        return self.optimizer.optimizer  # GradientStep -> torch.optim.RMSprop / Adam

    @api
    def update(self, batch: dict[str, Any] | None = None) -> dict[str, Any]:
        """Learn on one time-major rollout ``[T, B, ...]`` (default: the steps ``observe()``'d since the last
        update; keys as for :meth:`PPOAgent.update`): n-step / GAE advantages under the current weights, then one
        gradient step on the A2C loss over all ``T * B`` steps."""
        rollout = batch if batch is not None else self._collected()
        values, adv, ret = self.advantages(rollout)
        lr = self.set_learning_rate()
        actions = rollout["raw_action"] if self.continuous else rollout["actions"]
        obs, actions, adv, ret = (_flatten_time(x) for x in (rollout["obs"], actions, adv, ret))
        cfg = self.cfg

        def loss_fn() -> tuple[torch.Tensor, dict]:
            params, v = self.network(obs)
            dist = make_distribution(self.action_space, params)
            t = a2c_loss(dist.log_prob(actions), adv, v, ret, dist.entropy(), vf_coef=cfg.vf_coef,
                         ent_coef=cfg.ent_coef, normalize_advantage=cfg.normalize_advantage)
            return t.total, {"loss/policy": t.policy.detach(), "loss/value": t.value.detach(),
                             "policy/entropy": t.entropy.detach()}

        info = self.optimizer.step(loss_fn)
        self.env_steps += int(ret.numel())
        info["learn/lr"] = lr
        info["value/explained_variance"] = explained_variance(values.flatten(), ret)
        return info


class A2C(PPO):
    """The plan (PPO's): sample ``rollout_steps`` agent steps of every env copy, one A2C update, broadcast."""

    agent_class = A2CAgent
