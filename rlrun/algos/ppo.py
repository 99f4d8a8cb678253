"""PPO: clipped surrogate objective on GAE advantages, several epochs of minibatch steps per rollout
(Schulman et al. 2017, "Proximal Policy Optimization Algorithms", Algorithm 1; with the implementation details of
OpenAI Baselines' ppo2 as CleanRL's ppo.py keeps them: advantage normalisation per minibatch, value clipping,
global gradient clipping, linear learning-rate annealing, orthogonal initialisation).

What PPO shares with A2C and TRPO lives below the algorithms: the actor-critic network in
:mod:`rlrun.components.actor_critic`, the advantage estimator (GAE with time-limit truncation handled) in
:func:`rlrun.ops.truncation_aware_gae`, and the agent's acting, observing, advantages, learning-rate schedule and
weights, and the plan, in :mod:`rlrun.algos.on_policy`. This file holds what is PPO's: the optimizer (Adam) and the
update, epochs of shuffled minibatch steps on the clipped-surrogate loss. Its config schema is
``rlrun.algos.ppo_config.PPOConfig`` (each key documented there).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from rlrun.algos.on_policy import OnPolicyAgent, OnPolicyPlan
from rlrun.algos.ppo_config import PPOConfig
from rlrun.components.base import Component, api
from rlrun.components.distributions import make_distribution
from rlrun.components.optimizers import mean_scalars, minibatches, optimizer_step
from rlrun.components.optimizers.adam import Adam
from rlrun.components.policy_losses import ppo_loss
from rlrun.execution.rollout import Rollout
from rlrun.metric_names import (
    APPROX_KL,
    CLIP_EPS,
    CLIP_FRACTION,
    ENTROPY,
    EXPLAINED_VARIANCE,
    LOSS_POLICY,
    LOSS_VALUE,
    LR,
)
from rlrun.ops import explained_variance, flatten_time, map_nest

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------------- agent


class PPOAgent(OnPolicyAgent):
    """The PPO agent API: get_actions (with the log-probability the learner needs), observe (collect a rollout
    step by step from an application's loop), update (GAE + epochs of clipped-surrogate minibatch steps), weights.
    """

    routes_updates = True

    def __init__(self, cfg: PPOConfig, seed: int = 0, name: str = "ppo_agent") -> None:
        super().__init__(cfg, seed, name)

    def _make_optimizers(self, cfg: PPOConfig, seed: int) -> None:
        """``optimizer``: Adam over the whole network; ``fused=True``: one kernel over all parameters (the same
        update rule, fewer small ops)."""
        self.optimizer = Adam(self.network.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=True)

    # ------------------------------------------------------------------ learning

    @api
    def update(self, batch: Rollout | None = None) -> dict[str, Any]:
        """Learn on one time-major rollout ``[T, B, ...]`` (default: the steps ``observe()``'d since the last
        update) with the extras log_prob (and raw_action for Box actions). GAE advantages and returns under the
        current weights, then ``num_epochs`` epochs of shuffled minibatch steps on the PPO loss. Returns the mean
        loss terms over the gradient steps.

        With the device strategy's ``update_strategy`` (``device=replicas``, ``device.precision``) each minibatch
        step runs through it; with ``normalize_advantage`` each replica then normalises its own shard's advantages
        (as RLlib's multi-GPU towers do), so the update equals one replica's only without it."""
        rollout = self.normalize_rollout(batch if batch is not None else self._collected())
        values, adv, ret = self.advantages(rollout)
        lr = self.set_learning_rate()
        actions = rollout.extras["raw_action"] if self.continuous else rollout.actions
        per_step = {"actions": actions, "old_log_prob": rollout.extras["log_prob"], "advantages": adv,
                    "returns": ret, "old_values": values}
        cfg = self.cfg
        T, B = ret.shape
        if self.recurrent:  # minibatches of whole env-copy sequences (CleanRL's ppo_atari_lstm): items are columns
            data = {"columns": torch.arange(B), **map_nest(lambda x: x.transpose(0, 1), per_step)}
            minibatch_size = max(1, cfg.minibatch_size // T)
        else:
            data = flatten_time({"obs": rollout.obs, **per_step})
            minibatch_size = cfg.minibatch_size
        clip_eps = cfg.clip_eps * (self.remaining() if cfg.anneal_clip else 1.0)

        def loss_fn(mb: dict[str, Any]) -> tuple[torch.Tensor, dict]:
            if self.recurrent:  # re-unroll the minibatch's copies over the rollout: [T, b]
                params, v = self.unroll_rollout(rollout, mb.pop("columns"))
                mb = map_nest(lambda x: x.transpose(0, 1), mb)
            else:
                params, v = self.network(mb["obs"])
            dist = make_distribution(self.action_space, params)
            log_prob, entropy = dist.log_prob(mb["actions"]).reshape(-1), dist.entropy().reshape(-1)
            if self.recurrent:
                mb, v = flatten_time(mb), v.reshape(-1)
            t = ppo_loss(log_prob, mb["old_log_prob"], mb["advantages"], v, mb["returns"],
                         entropy, mb["old_values"], clip_eps=clip_eps, vf_clip_eps=cfg.vf_clip_eps,
                         vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef, normalize_advantage=cfg.normalize_advantage)
            return t.total, {LOSS_POLICY: t.policy.detach(), LOSS_VALUE: t.value.detach(),
                             ENTROPY: t.entropy.detach(), CLIP_FRACTION: t.clip_fraction,
                             APPROX_KL: t.approx_kl}

        steps = []
        for _ in range(cfg.num_epochs):
            for mb in minibatches(data, minibatch_size, self.generator):
                if self.update_strategy is None or self.recurrent:  # a recurrent minibatch is not sharded
                    loss, step = loss_fn(mb)
                    step.update(optimizer_step(self.optimizer, loss, cfg.max_grad_norm))
                else:
                    step = self.update_strategy.step(self.optimizer, loss_fn, mb, cfg.max_grad_norm)
                steps.append(step)
        info = mean_scalars(steps)
        self.env_steps += int(ret.numel())
        info[LR] = lr
        info[CLIP_EPS] = clip_eps
        info[EXPLAINED_VARIANCE] = explained_variance(values.flatten(), ret.flatten())
        return info


# ---------------------------------------------------------------------------------------------------- plan


class PPO(OnPolicyPlan):
    """The plan: sample ``rollout_steps`` agent steps of every env copy, learn on them (one PPO update), broadcast
    the new weights."""

    agent_class: type[Component] = PPOAgent

    def __init__(self, cfg: PPOConfig, *args: Any) -> None:
        super().__init__(cfg, *args)
        rollout = cfg.rollout_steps * self.workers.num_envs
        # minibatches() takes the whole rollout then: say so, it is not what was asked (a plan restored for eval or
        # export has no env copies, and no rollout to speak of)
        if 0 < rollout < cfg.minibatch_size:
            log.warning("algo.minibatch_size=%d is larger than a rollout (algo.rollout_steps=%d x %d env copies = %d "
                        "env steps): each epoch is one gradient step on the whole rollout. Set "
                        "algo.minibatch_size<=%d, or raise algo.rollout_steps.", cfg.minibatch_size,
                        cfg.rollout_steps, self.workers.num_envs, rollout, rollout)
