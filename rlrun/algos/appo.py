"""APPO: asynchronous PPO, IMPALA's actor-learner plan with PPO's clipped surrogate on V-trace-corrected
advantages (RLlib's APPO; Schulman et al. 2017, Eq. 7; Espeholt et al. 2018, Eq. 1).

Everything but the loss is IMPALA's (:mod:`rlrun.algos.impala`): the network, acting with behaviour
log-probabilities, the asynchronous plan, truncation-aware bootstrapping and the optional LSTM. Each learner batch
of unrolls is used for ``num_epochs`` gradient steps (RLlib's ``num_sgd_iter``) on

    L = -min(r A, clip(r, 1 - eps, 1 + eps) A) + vf_coef 1/2 (v_s - V(x_s))^2 - ent_coef H + kl_coef KL(mu || pi)

with ``r = pi(a|x) / mu(a|x)`` the ratio to the behaviour policy mu that acted, ``v_s`` the V-trace targets
and ``A = r_s + gamma_s v_{s+1} - V(x_s)`` V-trace's policy-gradient advantage *without* its clipped weight
rho^pg (the PPO ratio takes its place; RLlib multiplies both). V-trace is recomputed under the current weights at
every gradient step. Config schema: ``rlrun.algos.appo_config.APPOConfig`` (conf/algo/appo.yaml).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from rlrun.algos.appo_config import APPOConfig
from rlrun.algos.impala import IMPALA, IMPALAAgent
from rlrun.components.base import api
from rlrun.components.distributions import make_distribution
from rlrun.components.optimizers import optimizer_step
from rlrun.components.policy_losses import (
    apply_reduction,
    check_reduction,
    check_same_shape,
    ppo_clip_loss,
    value_loss,
)
from rlrun.execution.rollout import Rollout
from rlrun.metric_names import CLIP_FRACTION, ENTROPY, EXPLAINED_VARIANCE, KL, LOSS_POLICY, LOSS_VALUE, LR, VS_MEAN
from rlrun.ops import explained_variance, vtrace


class APPOLossTerms(NamedTuple):
    """Terms of :func:`appo_loss` (reduced as asked; ``vs`` and ``advantages`` ``[T, B]``, detached)."""

    total: torch.Tensor  # policy + vf_coef * value - ent_coef * entropy + kl_coef * kl
    policy: torch.Tensor  # negated clipped surrogate
    value: torch.Tensor  # 0.5 * (v_s - V(x_s))^2
    entropy: torch.Tensor  # policy entropy (nats)
    kl: torch.Tensor  # KL(mu || pi) (0 when not given)
    clip_fraction: torch.Tensor  # fraction of items with |ratio - 1| > clip_eps
    vs: torch.Tensor  # V-trace value targets
    advantages: torch.Tensor  # r_s + gamma_s v_{s+1} - V(x_s)


def appo_loss(log_probs: torch.Tensor, behaviour_log_probs: torch.Tensor, rewards: torch.Tensor,
              discounts: torch.Tensor, values: torch.Tensor, bootstrap_value: torch.Tensor,
              entropy: torch.Tensor | None = None, kl: torch.Tensor | None = None, clip_eps: float = 0.4,
              vf_coef: float = 0.5, ent_coef: float = 0.01, kl_coef: float = 0.0,
              clip_rho_threshold: float | None = 1.0, reduction: str = "mean") -> APPOLossTerms:
    r"""APPO's loss on a time-major ``[T, B]`` batch: PPO's clipped surrogate (Schulman et al. 2017, Eq. 7) with
    the ratio :math:`r_s = \pi(a_s|x_s)/\mu(a_s|x_s)` to the behaviour policy, on the advantages of V-trace
    (Espeholt et al. 2018, Eq. 1 and Sec. 4.2):

    .. math::

        A_s = r_s + \gamma_s v_{s+1} - V(x_s), \qquad v_T = V(x_T),

    .. math::

        L = -\min(r_s A_s, \mathrm{clip}(r_s, 1-\epsilon, 1+\epsilon) A_s)
            + c_v \tfrac12 (v_s - V(x_s))^2 - c_e H(\pi(\cdot|x_s)) + c_{kl} \mathrm{KL}(\mu \| \pi)

    where :math:`v_s` are V-trace targets under the current :math:`\pi` (:math:`\bar\rho` =
    ``clip_rho_threshold``). V-trace's policy-gradient weight :math:`\rho^{pg}_s` is left out of :math:`A_s`:
    the (clipped) ratio :math:`r_s` is the importance weight.

    Args:
        log_probs: ``[T, B]`` log-probabilities of the actions under the current policy (differentiable).
        behaviour_log_probs: ``[T, B]`` their log-probabilities under the behaviour policy :math:`\mu` (constants).
        rewards: ``[T, B]`` reward of step ``t``.
        discounts: ``[T, B]`` ``gamma * (1 - done_t)``.
        values: ``[T, B]`` :math:`V(x_t)` under the current weights (differentiable).
        bootstrap_value: ``[B]`` :math:`V(x_T)` (constant).
        entropy: ``[T, B]`` policy entropy in nats; ``None`` = no bonus.
        kl: ``[T, B]`` :math:`\mathrm{KL}(\mu \| \pi)` per item (differentiable in :math:`\pi`); ``None`` = 0.
        clip_eps: :math:`\epsilon`, half-width of the ratio's trust interval (RLlib APPO ``clip_param`` 0.4).
        vf_coef: :math:`c_v`, weight of the value loss.
        ent_coef: :math:`c_e`, weight of the entropy bonus.
        kl_coef: :math:`c_{kl}`, weight of the KL penalty (0: none).
        clip_rho_threshold: :math:`\bar\rho` of the V-trace targets; ``None`` = no clipping.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the ``T * B`` items.
    """
    check_reduction(reduction)
    check_same_shape(log_probs=log_probs, behaviour_log_probs=behaviour_log_probs, rewards=rewards,
                     discounts=discounts, values=values, entropy=entropy, kl=kl)
    behaviour_log_probs = behaviour_log_probs.detach()
    targets = vtrace(log_probs.detach() - behaviour_log_probs, discounts, rewards, values.detach(),
                     bootstrap_value.detach(), clip_rho_threshold=clip_rho_threshold, clip_pg_rho_threshold=None)
    vs_next = torch.cat([targets.vs[1:], bootstrap_value.detach().unsqueeze(0)], dim=0)
    advantages = (rewards + discounts * vs_next - values.detach()).detach()
    policy = ppo_clip_loss(log_probs, behaviour_log_probs, advantages, clip_eps, "none")
    value = value_loss(values, targets.vs, "none")
    ent = entropy if entropy is not None else torch.zeros_like(policy)
    kl_term = kl if kl is not None else torch.zeros_like(policy)
    total = policy + vf_coef * value - ent_coef * ent + kl_coef * kl_term
    ratio = torch.exp(log_probs.detach() - behaviour_log_probs)
    clip_fraction = ((ratio - 1.0).abs() > clip_eps).float().mean()
    r = reduction
    return APPOLossTerms(apply_reduction(total, r), apply_reduction(policy, r), apply_reduction(value, r),
                         apply_reduction(ent, r), apply_reduction(kl_term, r), clip_fraction, targets.vs, advantages)


class APPOAgent(IMPALAAgent):
    """IMPALA's agent with APPO's update: ``num_epochs`` gradient steps on :func:`appo_loss` per learner batch."""

    def __init__(self, cfg: APPOConfig, seed: int = 0, name: str = "appo_agent") -> None:
        super().__init__(cfg, seed, name)

    def _behaviour(self, rollout: Rollout) -> Any:
        """The behaviour policy's distribution, from the parameters recorded while acting."""
        if self.continuous:
            return make_distribution(self.action_space, (rollout.extras["behaviour_mean"],
                                                         rollout.extras["behaviour_log_std"]))
        return make_distribution(self.action_space, rollout.extras["behaviour_logits"])

    @api
    def update(self, batch: Rollout) -> dict[str, Any]:
        """``num_epochs`` gradient steps on the APPO loss over the whole batch of unrolls (with the extras of
        :meth:`IMPALAAgent.update`); V-trace targets recomputed at each. Returns the mean terms over the steps
        (``loss``: before each step) and ``gradient_steps``."""
        rollout, cfg = batch, self.cfg
        lr = self.set_learning_rate()
        first, state0 = self._first_and_state(rollout)
        actions = self._actions(rollout)
        behaviour = self._behaviour(rollout) if cfg.use_kl_loss else None
        stats: dict[str, Any] = {}

        def loss_fn() -> tuple[torch.Tensor, dict]:
            dist, values, rewards, discounts, bootstrap = self._forward_terms(rollout, state0, first)
            kl = behaviour.kl(dist) if behaviour is not None else None
            t = appo_loss(dist.log_prob(actions), rollout.extras["log_prob"], rewards, discounts, values, bootstrap,
                          dist.entropy(), kl, clip_eps=cfg.clip_eps, vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef,
                          kl_coef=cfg.kl_coef if cfg.use_kl_loss else 0.0,
                          clip_rho_threshold=cfg.clip_rho_threshold, reduction=cfg.loss_reduction)
            stats.update(values=values.detach(), vs=t.vs)
            return t.total, {LOSS_POLICY: t.policy.detach(), LOSS_VALUE: t.value.detach(),
                             ENTROPY: t.entropy.detach(), KL: t.kl.detach(),
                             CLIP_FRACTION: t.clip_fraction, VS_MEAN: t.vs.mean()}

        totals: dict[str, float] = {}
        for _ in range(cfg.num_epochs):
            with self.autocast():
                loss, info = loss_fn()
            info.update(optimizer_step(self.optimizer, loss.float(), cfg.max_grad_norm))
            for k, v in info.items():
                totals[k] = totals.get(k, 0.0) + float(v)
        out: dict[str, Any] = {k: v / cfg.num_epochs for k, v in totals.items()}
        self.env_steps += int(rollout.rewards.numel())
        self.updates += 1
        out["gradient_steps"] = cfg.num_epochs
        out[LR] = lr
        out[EXPLAINED_VARIANCE] = explained_variance(stats["values"].flatten(), stats["vs"].flatten())
        return out


class APPO(IMPALA):
    """The plan (IMPALA's): unrolls as they arrive, one APPO update per ``batch_size`` unrolls, weights to the
    workers that produced them."""

    agent_class = APPOAgent
