"""TRPO: trust region policy optimisation (Schulman et al. 2015, "Trust Region Policy Optimization", Sec. 6 and
Appendix C), with a value-function baseline and GAE advantages (Schulman et al. 2016), as SB3-contrib's TRPO and
Spinning Up run it.

Every update: ``rollout_steps`` agent steps of every env copy, GAE advantages (normalised over the rollout), then

1. *one* policy step, by the optimizer module :class:`~rlrun.components.optimizers.TRPOStep` (TensorForce 0.3's
   natural gradient + line search; ``algo.policy_update`` chooses another module of the registry's ``optimizer``
   kind: ``natural_gradient`` = TNPG, ``multi_step`` = VPG with Adam, ``evolution_strategies`` = OpenAI-ES on the
   surrogate): minimise the surrogate
   ``L(theta) = -mean_t[pi_theta(a_t|s_t) / pi_old(a_t|s_t) * A_t]`` subject to
   ``mean_t KL(pi_old(.|s_t) || pi_theta(.|s_t)) <= max_kl`` (Eq. 14): conjugate gradient on ``F x = g`` with
   Fisher-vector products, a step scaled to the trust region, a backtracking line search that keeps the
   surrogate improving and the KL within ``max_kl``;
2. ``vf_epochs`` epochs of Adam minibatch steps on ``0.5 (R_t - V(s_t))^2`` (rlrun's ``value_loss``; SB3 drops
   the 1/2, which Adam's steps do not see, up to its epsilon) of a *separate* value network (its own torso and
   layer: a value step never moves the policy, which would defeat the trust region).

It is PPO's plan with a different update: the actor-critic network (:mod:`rlrun.components.actor_critic`, with
``shared_torso=False``), the truncation-aware advantage estimator (:func:`rlrun.ops.truncation_aware_gae`), acting,
observing, weights and the plan come from the PPO family's base, :mod:`rlrun.algos.on_policy`; this file holds
what differs (the optimizers, the surrogate and the update). Its config schema is
``rlrun.algos.trpo_config.TRPOConfig`` (each key documented there and in conf/algo/trpo.yaml).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.algos.base import DISCRETE_OR_BOX, check_action_space
from rlrun.algos.on_policy import OnPolicyAgent, OnPolicyPlan
from rlrun.algos.trpo_config import TRPOConfig
from rlrun.components.actor_critic import ActorCritic
from rlrun.components.base import Component, api
from rlrun.components.distributions import Categorical, DiagGaussian, make_distribution
from rlrun.components.optimizers import mean_scalars, minibatches, optimizer_step
from rlrun.components.optimizers.adam import Adam
from rlrun.components.policy_losses import apply_reduction, normalize_advantages, value_loss
from rlrun.execution.rollout import Rollout
from rlrun.metric_names import (
    ENTROPY,
    EXPECTED_IMPROVEMENT,
    EXPLAINED_VARIANCE,
    KL,
    LINE_SEARCH_ACCEPTED,
    LINE_SEARCH_BACKTRACKS,
    LOSS_POLICY,
    LOSS_VALUE,
    LR,
    STEP_FRACTION,
    SURROGATE_IMPROVEMENT,
)
from rlrun.ops import explained_variance, flatten_time
from rlrun.registry import registry

# ---------------------------------------------------------------------------------------------------- losses


def trpo_surrogate_loss(log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                        reduction: str = "mean") -> torch.Tensor:
    r"""Negated importance-sampled surrogate objective (Schulman et al. 2015, Eq. 14, with advantages for Q).

    .. math::

        L(\theta) = -\frac{\pi_\theta(a_t|s_t)}{\pi_{old}(a_t|s_t)} A_t
                  = -\exp(\log\pi_\theta(a_t|s_t) - \log\pi_{old}(a_t|s_t)) A_t

    At :math:`\theta = \theta_{old}` it equals :math:`-A_t` and its gradient is the policy gradient
    :math:`-\nabla\log\pi_\theta(a_t|s_t) A_t`. TRPO minimises its mean under a KL constraint
    (:class:`~rlrun.components.optimizers.TRPOStep`); unlike PPO's, nothing is clipped.

    Args:
        log_probs: log-probabilities of the actions taken under the current policy (differentiable), any shape.
        old_log_probs: the same under the policy before the update (same shape; treated as constants).
        advantages: advantage estimates (same shape; treated as constants).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the items.
    """
    if not log_probs.shape == old_log_probs.shape == advantages.shape:
        raise ValueError(f"trpo_surrogate_loss: log_probs {tuple(log_probs.shape)}, old_log_probs "
                         f"{tuple(old_log_probs.shape)} and advantages {tuple(advantages.shape)} must have one shape")
    ratio = torch.exp(log_probs - old_log_probs.detach())
    return apply_reduction(-ratio * advantages.detach(), reduction)


def mean_kl(old: Categorical | DiagGaussian, new: Categorical | DiagGaussian) -> torch.Tensor:
    r""":math:`\bar D_{KL}(\theta_{old}, \theta) = \mathrm{mean}_s\, KL(\pi_{old}(\cdot|s) \,\|\, \pi_\theta(\cdot|s))`,
    the trust-region constraint of Schulman et al. 2015 (Eq. 12-14), in nats. ``old`` holds detached parameters;
    the Hessian of this at :math:`\theta = \theta_{old}` is the Fisher information matrix (Appendix C)."""
    return old.kl(new).mean()


def make_policy_update(cfg: TRPOConfig, seed: int) -> Component:
    """The policy's optimizer module named by ``algo.policy_update``, built through the registry (kind
    ``optimizer``) from the keys that apply to it (see the schema's ``policy_update``)."""
    name = cfg.policy_update  # the schema declares the choices
    if name == "trpo":
        return registry.build("optimizer", "trpo", cfg.max_kl, cfg.cg_iters, cfg.cg_damping,
                              cfg.line_search_max_backtracks, cfg.line_search_accept_ratio,
                              cfg.line_search_backtrack_ratio, name="policy_optimizer")
    if name == "natural_gradient":
        return registry.build("optimizer", "natural_gradient", cfg.max_kl, cfg.cg_iters, cfg.cg_damping,
                              name="policy_optimizer")
    if name == "multi_step":
        adam = registry.build("optimizer", "gradient_step", "adam", lr=cfg.policy_lr, eps=cfg.adam_eps,
                              name="policy_adam")
        return registry.build("optimizer", "multi_step", adam, cfg.policy_epochs, cfg.policy_minibatch_size,
                              seed=seed + 1, name="policy_optimizer")
    return registry.build("optimizer", name, population=2 * cfg.es_pairs, sigma=cfg.es_sigma, lr=cfg.es_lr,
                          seed=seed + 1, name="policy_optimizer")


def _frozen(params: Any) -> Any:
    """Detached *copies* of policy parameters: a Gaussian's log-std is a view of the head's parameter, which the
    line search changes in place, so a detached view would follow it and the "old" policy would move too."""
    if isinstance(params, (tuple, list)):
        return type(params)(p.detach().clone() for p in params)
    return params.detach().clone()


# ---------------------------------------------------------------------------------------------------- agent


class TRPOAgent(OnPolicyAgent):
    """The TRPO agent: the PPO family's acting, observing, advantages and weights (:class:`OnPolicyAgent`; the
    actor-critic network, with separate actor and critic torsos); its update is one TRPO step of the actor and
    Adam epochs of the critic.

    Sub-components: ``network`` (ActorCritic) and ``policy_optimizer`` (the module ``algo.policy_update`` names,
    TRPOStep by default, over the actor's parameters: the actor torso, the policy layer and, for Box actions, the
    log-std); ``value_optimizer`` is the critic's Adam (over the critic torso and the value layer).
    """

    def __init__(self, cfg: TRPOConfig, seed: int = 0, name: str = "trpo_agent") -> None:
        super().__init__(cfg, seed, name)
        self.policy_optimizer = make_policy_update(cfg, seed)

    def _make_network(self, cfg: TRPOConfig) -> ActorCritic:
        """The actor-critic network with separate actor and critic torsos (never shared: a value step must not
        move the policy)."""
        return ActorCritic(cfg.network, list(cfg.hidden_sizes), cfg.activation, shared_torso=False,
                           orthogonal_init=cfg.orthogonal_init, init_log_std=cfg.init_log_std,
                           normalize_obs=cfg.normalize_obs, obs_clip=cfg.obs_clip, name="network",
                           action_mask=cfg.action_mask)

    def _make_optimizers(self, cfg: TRPOConfig, seed: int) -> None:
        """``value_optimizer``: the critic's Adam, for its epochs of minibatch steps (the actor's step is the module
        ``policy_optimizer``)."""
        self.value_optimizer = Adam(self.critic_parameters(), lr=cfg.lr, eps=cfg.adam_eps)

    def torch_optimizer(self) -> torch.optim.Optimizer:
        """The value function's Adam (the one with a learning rate; OnPolicyAgent.set_learning_rate sets it)."""
        return self.value_optimizer

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        check_action_space(self.cfg.name, DISCRETE_OR_BOX, actions)
        self.action_space = actions
        self.continuous = isinstance(actions, sp.Box)
        self.build_child(self.network, obs=obs, actions=actions)
        if self.reward_scaler is not None:
            self.build_child(self.reward_scaler)
        actor, critic = self.actor_parameters(), self.critic_parameters()
        ids = [id(p) for p in actor + critic]
        if len(set(ids)) != len(ids) or len(ids) != len(list(self.network.parameters())):
            raise RuntimeError(f"{self.name}: the actor's and the critic's parameters must split the network's "
                               f"exactly (a value step must not move the policy)")
        self.policy_optimizer.attach(actor)
        self._make_optimizers(self.cfg, self.seed)
        if self.continuous:  # samples are clipped to the bounds for the env; the learner uses the raw sample
            self.register_buffer("action_low", torch.as_tensor(actions.low, dtype=torch.float32))
            self.register_buffer("action_high", torch.as_tensor(actions.high, dtype=torch.float32))
        self.output_spaces["get_actions"] = actions

    def actor_parameters(self) -> list[nn.Parameter]:
        """The parameters of the policy: actor torso, policy layer, and the log-std of a Gaussian."""
        head = self.network.head
        params = [*self.network.torso.parameters(), *head.policy.parameters()]
        return params + [head.log_std] if self.continuous else params

    def critic_parameters(self) -> list[nn.Parameter]:
        """The parameters of the value function: critic torso and value layer."""
        return [*self.network.critic_torso.parameters(), *self.network.head.value.parameters()]

    # ------------------------------------------------------------------ learning

    @api
    def update(self, batch: Rollout | None = None) -> dict[str, Any]:
        """Learn on one time-major rollout ``[T, B, ...]`` (default: the steps ``observe()``'d since the last
        update; with the extra raw_action for Box actions; the behaviour log-probabilities are not needed, the
        policy before the update is the behaviour policy): GAE advantages and returns under the current weights,
        the policy's step on all ``T * B`` steps (one TRPO step by default; the module ``algo.policy_update``
        names, driven by the inputs it declares, ``step_inputs``), then ``vf_epochs`` epochs of value minibatch
        steps.

        Returns ``loss/policy`` (surrogate before the step), ``policy/surrogate_improvement`` (its decrease),
        ``policy/kl`` (mean KL from the old policy after the step, nats), ``policy/entropy`` (of the old policy,
        nats), ``loss/value`` (mean over the value steps), ``value/explained_variance``, ``learn/lr`` and
        ``gradient_steps`` (the value steps plus the policy's); with a trust-region module also
        ``policy/expected_improvement`` (the decrease its linear model predicted for the full step), and with
        trpo's line search ``policy/step_fraction``, ``policy/line_search_accepted`` and
        ``policy/line_search_backtracks``."""
        cfg = self.cfg
        rollout = self.normalize_rollout(batch if batch is not None else self._collected())
        values, adv, ret = self.advantages(rollout)
        lr = self.set_learning_rate()
        actions = rollout.extras["raw_action"] if self.continuous else rollout.actions
        obs, actions, adv, ret = (flatten_time(x) for x in (rollout.obs, actions, adv, ret))
        if cfg.normalize_advantage:
            adv = normalize_advantages(adv)

        with torch.no_grad():
            old = make_distribution(self.action_space, _frozen(self.network.get_policy(obs)))
            old_log_prob = old.log_prob(actions)
            entropy = old.entropy().mean()

        def policy() -> Categorical | DiagGaussian:
            return make_distribution(self.action_space, self.network.get_policy(obs))

        def surrogate_of(rows: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
            dist = make_distribution(self.action_space, self.network.get_policy(rows["obs"]))
            return trpo_surrogate_loss(dist.log_prob(rows["actions"]), rows["old_log_prob"], rows["advantages"]), {}

        rows = {"obs": obs, "actions": actions, "old_log_prob": old_log_prob, "advantages": adv}

        def kl_fn() -> torch.Tensor:
            return mean_kl(old, policy())

        module = self.policy_optimizer
        if "batch" in module.step_inputs:  # minibatch steps: the loss of rows; "loss" is their mean, not the first
            with torch.no_grad():
                before = surrogate_of(rows)[0]
            step = module.step(loss_fn=surrogate_of, batch=rows)
            step["loss"] = before
        else:
            inputs = {"loss_fn": lambda: surrogate_of(rows), "kl_fn": kl_fn}
            step = module.step(**{k: inputs[k] for k in module.step_inputs})
        if "loss_after" not in step:
            with torch.no_grad():
                step["loss_after"] = surrogate_of(rows)[0]
                step["kl"] = kl_fn()

        fits = []
        for _ in range(cfg.vf_epochs):
            for mb in minibatches({"obs": obs, "returns": ret}, cfg.vf_minibatch_size, self.generator):
                fits.append(optimizer_step(self.value_optimizer,
                                           value_loss(self.network.get_value(mb["obs"]), mb["returns"])))
        fit = mean_scalars(fits)
        self.env_steps += int(ret.numel())
        info = {
            LOSS_POLICY: float(step["loss"]),
            SURROGATE_IMPROVEMENT: float(step["loss"]) - float(step["loss_after"]),
            KL: float(step["kl"]),
            ENTROPY: float(entropy),
            LOSS_VALUE: float(fit["loss"]),
            EXPLAINED_VARIANCE: explained_variance(values.flatten(), ret),
            LR: lr,
            "gradient_steps": int(fit["gradient_steps"]) + int(step.get("gradient_steps", 1)),
        }
        for key, name in (("expected_improvement", EXPECTED_IMPROVEMENT),
                          ("step_fraction", STEP_FRACTION), ("accepted", LINE_SEARCH_ACCEPTED),
                          ("backtracks", LINE_SEARCH_BACKTRACKS)):
            if key in step:
                info[name] = float(step[key])
        return info


# ---------------------------------------------------------------------------------------------------- plan


class TRPO(OnPolicyPlan):
    """The plan (the PPO family's, :class:`OnPolicyPlan`): sample ``rollout_steps`` agent steps of every env copy,
    one TRPO update, broadcast."""

    agent_class = TRPOAgent
