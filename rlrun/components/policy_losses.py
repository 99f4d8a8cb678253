"""Policy-gradient losses: PPO (clipped surrogate), A2C and IMPALA (V-trace), as pure functions.

The pure functions take tensors and return tensors; they know nothing of networks or distributions: a policy
enters as the log-probabilities of the actions taken (``log_probs``) and its per-item ``entropy``, so they serve
any action distribution. Every function has a ``reduction`` argument: ``"mean"`` (default) or ``"sum"`` over all
items, or ``"none"`` for the per-item values (same shape as the inputs).

Each returns its terms as a named tuple (``total`` and the detached parts an algorithm logs: ``policy``,
``value``, ``entropy``; PPO's ``clip_fraction`` and ``approx_kl``, IMPALA's V-trace ``vs`` and
``pg_advantages``). An algorithm builds the
log-probabilities and entropies from its own distribution (rlrun/components/distributions.py) and calls them; they
are tested alone against hand-worked values (tests/components/test_policy_losses.py).

Sign convention: every loss is *minimised*; bonuses (entropy) enter with a minus sign.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlrun.ops import vtrace

__all__ = [
    "A2CLossTerms", "IMPALALossTerms", "PPOLossTerms",
    "a2c_loss", "a2c_policy_loss", "apply_reduction", "check_reduction", "check_same_shape", "impala_loss",
    "normalize_advantages", "ppo_clip_loss", "ppo_loss", "ppo_value_loss", "value_loss",
]

REDUCTIONS = ("mean", "sum", "none")


# ----------------------------------------------------------------------------------------------- helpers


def apply_reduction(x: torch.Tensor, reduction: str) -> torch.Tensor:
    """Reduce per-item values: ``"mean"`` or ``"sum"`` over all items, ``"none"`` returns ``x`` unchanged."""
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    if reduction == "none":
        return x
    raise ValueError(f"reduction '{reduction}' is not one of {', '.join(REDUCTIONS)}")


def check_reduction(reduction: str) -> None:
    """Raise a ValueError unless ``reduction`` is one of mean, sum, none."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction '{reduction}' is not one of {', '.join(REDUCTIONS)}")


def check_same_shape(**tensors: torch.Tensor | None) -> None:
    """Raise a ValueError naming the first argument whose shape differs from the first one's (None: not given)."""
    named = [(k, v) for k, v in tensors.items() if v is not None]
    ref_name, ref = named[0]
    for name, t in named[1:]:
        if t.shape != ref.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)} but {ref_name} has shape {tuple(ref.shape)}; "
                             f"the per-item inputs of a policy loss must have one shape")


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(A - mean(A)) / (std(A) + eps)`` over all items (unbiased std, as CleanRL / PPO2 normalise per minibatch).

    Args:
        advantages: advantage estimates, any shape; normalised over all elements together.
        eps: added to the standard deviation to avoid division by zero (dimensionless).

    A single item has no spread: it is only centred (giving 0).
    """
    centred = advantages - advantages.mean()
    if advantages.numel() < 2:
        return centred
    return centred / (advantages.std() + eps)


# ----------------------------------------------------------------------------------------------- pure losses


def ppo_clip_loss(log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                  clip_eps: float = 0.2, reduction: str = "mean") -> torch.Tensor:
    r"""Negated PPO clipped surrogate (Schulman et al. 2017, "Proximal Policy Optimization Algorithms", Eq. 7).

    .. math::

        L^{CLIP} = -\min\big(r_t A_t,\ \mathrm{clip}(r_t, 1-\epsilon, 1+\epsilon) A_t\big), \qquad
        r_t = \exp(\log\pi_\theta(a_t|s_t) - \log\pi_{old}(a_t|s_t))

    With ``A > 0`` the objective stops rewarding ``r > 1 + eps`` (the gradient there is zero); with ``A < 0`` it
    stops rewarding ``r < 1 - eps``. On the other side of 1 the unclipped term is the minimum and the gradient flows.

    Args:
        log_probs: log-probabilities of the actions taken under the current policy (differentiable), any shape.
        old_log_probs: log-probabilities of the same actions under the policy that collected them (same shape;
            treated as constants).
        advantages: advantage estimates of the actions (same shape; treated as constants).
        clip_eps: :math:`\epsilon`, half-width of the trust interval of the probability ratio (dimensionless;
            the paper uses 0.2).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the items.
    """
    check_same_shape(log_probs=log_probs, old_log_probs=old_log_probs, advantages=advantages)
    ratio = torch.exp(log_probs - old_log_probs.detach())
    adv = advantages.detach()
    surrogate = torch.min(ratio * adv, ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv)
    return apply_reduction(-surrogate, reduction)


def value_loss(values: torch.Tensor, returns: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    r"""Squared-error baseline loss :math:`\tfrac12 (R_t - V(s_t))^2` (Mnih et al. 2016, Algorithm S3's value update).

    Args:
        values: value estimates :math:`V(s_t)` (differentiable), any shape.
        returns: value targets :math:`R_t` (same shape; treated as constants).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the items.
    """
    check_same_shape(values=values, returns=returns)
    return apply_reduction(0.5 * (returns.detach() - values).pow(2), reduction)


def ppo_value_loss(values: torch.Tensor, returns: torch.Tensor, old_values: torch.Tensor | None = None,
                   clip_eps: float | None = None, reduction: str = "mean") -> torch.Tensor:
    r"""PPO value loss, optionally clipped around the values at collection time (PPO2 / CleanRL).

    Unclipped: :math:`\tfrac12 (V - R)^2`. Clipped (as OpenAI baselines' ``ppo2`` and CleanRL implement it; not in
    the paper): :math:`\tfrac12 \max\big((V - R)^2, (V_{old} + \mathrm{clip}(V - V_{old}, -\epsilon, \epsilon)
    - R)^2\big)`, a pessimistic bound that stops rewarding value moves of more than :math:`\epsilon`.

    Args:
        values: current value estimates :math:`V(s_t)` (differentiable), any shape.
        returns: value targets :math:`R_t` (same shape; constants).
        old_values: value estimates at collection time :math:`V_{old}(s_t)` (same shape; constants); required when
            ``clip_eps`` is set.
        clip_eps: :math:`\epsilon`, largest rewarded change of the value estimate, in units of return;
            ``None`` disables value clipping.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the items.
    """
    if clip_eps is None:
        return value_loss(values, returns, reduction)
    if old_values is None:
        raise ValueError("ppo_value_loss: value clipping (clip_eps set) needs old_values")
    check_same_shape(values=values, returns=returns, old_values=old_values)
    returns, old_values = returns.detach(), old_values.detach()
    unclipped = (values - returns).pow(2)
    clipped_values = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
    clipped = (clipped_values - returns).pow(2)
    return apply_reduction(0.5 * torch.max(unclipped, clipped), reduction)


def a2c_policy_loss(log_probs: torch.Tensor, advantages: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    r"""Policy-gradient loss :math:`-\log\pi(a_t|s_t) A_t` (Williams 1992; Mnih et al. 2016, Algorithm S3).

    Its gradient is the score-function estimate :math:`-\nabla\log\pi(a_t|s_t) A_t`; the advantage is a constant.

    Args:
        log_probs: log-probabilities of the actions taken (differentiable), any shape.
        advantages: advantage estimates (same shape; treated as constants).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the items.
    """
    check_same_shape(log_probs=log_probs, advantages=advantages)
    return apply_reduction(-log_probs * advantages.detach(), reduction)


class PPOLossTerms(NamedTuple):
    """Terms of :func:`ppo_loss` (each reduced as asked; ``clip_fraction`` and ``approx_kl`` are detached)."""

    total: torch.Tensor  # policy + vf_coef * value - ent_coef * entropy
    policy: torch.Tensor  # negated clipped surrogate (Eq. 7)
    value: torch.Tensor  # 0.5 * squared error, optionally clipped
    entropy: torch.Tensor  # policy entropy (nats; the bonus enters total with a minus sign)
    clip_fraction: torch.Tensor  # fraction of items with |ratio - 1| > clip_eps
    approx_kl: torch.Tensor  # estimate of KL(pi_old || pi): (ratio - 1) - log ratio


def ppo_loss(log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor, values: torch.Tensor,
             returns: torch.Tensor, entropy: torch.Tensor | None = None, old_values: torch.Tensor | None = None,
             clip_eps: float = 0.2, vf_clip_eps: float | None = None, vf_coef: float = 0.5, ent_coef: float = 0.0,
             normalize_advantage: bool = True, reduction: str = "mean") -> PPOLossTerms:
    r"""PPO's combined objective (Schulman et al. 2017, Eq. 9, negated): :math:`L^{CLIP} + c_1 L^{VF} - c_2 S`.

    ``policy`` is :func:`ppo_clip_loss` (Eq. 7), ``value`` is :func:`ppo_value_loss` (with the PPO2/CleanRL
    clipping when ``vf_clip_eps`` is set, and the ½ factor CleanRL uses), ``entropy`` the mean policy entropy.
    Diagnostics, as PPO2/CleanRL report them: ``clip_fraction`` = share of items with
    :math:`|r - 1| > \epsilon` (on the side where the advantage keeps the gradient such items are not clipped),
    ``approx_kl`` = :math:`(r - 1) - \log r`, an unbiased non-negative estimator of :math:`KL(\pi_{old}\|\pi)`.

    Args:
        log_probs: log-probabilities of the actions taken under the current policy (differentiable), any shape.
        old_log_probs: their log-probabilities under the collecting policy (same shape; constants).
        advantages: advantage estimates, e.g. GAE (same shape; constants).
        values: current value estimates (differentiable; same shape).
        returns: value targets, e.g. GAE advantages + old values (same shape; constants).
        entropy: per-item policy entropy in nats (differentiable; same shape); ``None`` = no entropy bonus.
        old_values: value estimates at collection time (same shape); needed when ``vf_clip_eps`` is set.
        clip_eps: :math:`\epsilon` of the probability-ratio clipping (dimensionless; paper: 0.2).
        vf_clip_eps: clip range of the value update in units of return; ``None`` = unclipped value loss.
        vf_coef: :math:`c_1`, weight of the value loss (CleanRL: 0.5).
        ent_coef: :math:`c_2`, weight of the entropy bonus (CleanRL Atari: 0.01, MuJoCo: 0.0).
        normalize_advantage: normalise advantages to zero mean, unit std over the given items first
            (:func:`normalize_advantages`; CleanRL's ``norm_adv``, on by default there).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the items; the diagnostics are means for ``"mean"``
            and ``"sum"`` and per item for ``"none"``.
    """
    check_reduction(reduction)
    check_same_shape(log_probs=log_probs, old_log_probs=old_log_probs, advantages=advantages, values=values,
                     returns=returns, entropy=entropy, old_values=old_values)
    adv = normalize_advantages(advantages.detach()) if normalize_advantage else advantages.detach()
    policy = ppo_clip_loss(log_probs, old_log_probs, adv, clip_eps, "none")
    value = ppo_value_loss(values, returns, old_values, vf_clip_eps, "none")
    ent = entropy if entropy is not None else torch.zeros_like(policy)
    total = policy + vf_coef * value - ent_coef * ent
    with torch.no_grad():
        log_ratio = log_probs - old_log_probs
        ratio = log_ratio.exp()
        clipped = ((ratio - 1.0).abs() > clip_eps).to(policy.dtype)
        kl = (ratio - 1.0) - log_ratio
    diag = "none" if reduction == "none" else "mean"
    r = reduction
    return PPOLossTerms(apply_reduction(total, r), apply_reduction(policy, r), apply_reduction(value, r),
                        apply_reduction(ent, r), apply_reduction(clipped, diag), apply_reduction(kl, diag))


class A2CLossTerms(NamedTuple):
    """Terms of :func:`a2c_loss`, each reduced as asked."""

    total: torch.Tensor  # policy + vf_coef * value - ent_coef * entropy
    policy: torch.Tensor  # -log pi(a|s) * A
    value: torch.Tensor  # 0.5 * (R - V)^2
    entropy: torch.Tensor  # policy entropy (nats)


def a2c_loss(log_probs: torch.Tensor, advantages: torch.Tensor, values: torch.Tensor, returns: torch.Tensor,
             entropy: torch.Tensor | None = None, vf_coef: float = 0.5, ent_coef: float = 0.01,
             normalize_advantage: bool = False, reduction: str = "mean") -> A2CLossTerms:
    r"""Advantage actor-critic loss (Mnih et al. 2016, "Asynchronous Methods for Deep RL", Algorithm S3 and Sec. 4):

    .. math::

        L = -\log\pi(a_t|s_t) A_t + c_v \tfrac12 (R_t - V(s_t))^2 - c_e H(\pi(\cdot|s_t))

    Args:
        log_probs: log-probabilities of the actions taken (differentiable), any shape.
        advantages: advantage estimates, e.g. ``R_t - V(s_t)`` or GAE (same shape; treated as constants, so passing
            ``returns - values`` with gradient attached is safe).
        values: value estimates :math:`V(s_t)` (differentiable; same shape).
        returns: value targets :math:`R_t`, e.g. n-step returns (same shape; constants).
        entropy: per-item policy entropy in nats (same shape); ``None`` = no entropy bonus.
        vf_coef: :math:`c_v`, weight of the value loss (baselines A2C: 0.5).
        ent_coef: :math:`c_e`, weight of the entropy bonus (Mnih et al.: 0.01).
        normalize_advantage: normalise advantages over the given items first (off in the paper).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the items.
    """
    check_reduction(reduction)
    check_same_shape(log_probs=log_probs, advantages=advantages, values=values, returns=returns, entropy=entropy)
    adv = normalize_advantages(advantages.detach()) if normalize_advantage else advantages.detach()
    policy = a2c_policy_loss(log_probs, adv, "none")
    value = value_loss(values, returns, "none")
    ent = entropy if entropy is not None else torch.zeros_like(policy)
    total = policy + vf_coef * value - ent_coef * ent
    r = reduction
    return A2CLossTerms(apply_reduction(total, r), apply_reduction(policy, r), apply_reduction(value, r),
                        apply_reduction(ent, r))


class IMPALALossTerms(NamedTuple):
    """Terms of :func:`impala_loss` (losses reduced as asked; ``vs`` and ``pg_advantages`` are ``[T, B]``)."""

    total: torch.Tensor  # policy + vf_coef * value - ent_coef * entropy
    policy: torch.Tensor  # -log pi(a_s|x_s) * A^pg_s
    value: torch.Tensor  # 0.5 * (v_s - V(x_s))^2
    entropy: torch.Tensor  # policy entropy (nats)
    vs: torch.Tensor  # V-trace value targets, detached
    pg_advantages: torch.Tensor  # V-trace policy-gradient advantages, detached


def impala_loss(log_probs: torch.Tensor, behaviour_log_probs: torch.Tensor, rewards: torch.Tensor,
                discounts: torch.Tensor, values: torch.Tensor, bootstrap_value: torch.Tensor,
                entropy: torch.Tensor | None = None, vf_coef: float = 0.5, ent_coef: float = 0.01,
                clip_rho_threshold: float | None = 1.0, clip_pg_rho_threshold: float | None = 1.0,
                reduction: str = "mean") -> IMPALALossTerms:
    r"""IMPALA's actor-critic loss with V-trace targets (Espeholt et al. 2018, Sec. 4, Eq. 1 and Sec. 4.2).

    With :math:`(v_s, A^{pg}_s)` = :func:`rlrun.ops.vtrace` of the importance weights
    :math:`\log\rho_s = \log\pi(a_s|x_s) - \log\mu(a_s|x_s)`:

    .. math::

        L = -\log\pi(a_s|x_s) A^{pg}_s + c_v \tfrac12 (v_s - V(x_s))^2 - c_e H(\pi(\cdot|x_s))

    i.e. the policy gradient :math:`\rho_s \nabla\log\pi(a_s|x_s)(r_s + \gamma v_{s+1} - V(x_s))`, the baseline
    gradient :math:`(v_s - V(x_s))\nabla V(x_s)` and the entropy bonus of Sec. 4.2. TorchBeast sums over
    ``[T, B]`` (``reduction="sum"``) with ``vf_coef`` = its ``baseline_cost`` 0.5 and ``ent_coef`` = its
    ``entropy_cost`` 0.0006.

    Args:
        log_probs: ``[T, B]`` log-probabilities of the actions taken under the learner (target) policy
            :math:`\pi` (differentiable).
        behaviour_log_probs: ``[T, B]`` their log-probabilities under the actors' behaviour policy :math:`\mu`.
        rewards: ``[T, B]`` reward of step ``t``.
        discounts: ``[T, B]`` per-step discount ``gamma * (1 - done_t)`` (``rlrun.ops`` done convention).
        values: ``[T, B]`` learner value estimates :math:`V(x_t)` (differentiable).
        bootstrap_value: ``[B]`` :math:`V(x_T)` of the observation after the last step (constant).
        entropy: ``[T, B]`` policy entropy in nats (differentiable); ``None`` = no entropy bonus.
        vf_coef: :math:`c_v`, weight of the baseline loss (paper / TorchBeast: 0.5).
        ent_coef: :math:`c_e`, weight of the entropy bonus (TorchBeast default 0.0006; paper's Atari: 0.01).
        clip_rho_threshold: :math:`\bar\rho` of the value target (paper: 1.0); ``None`` = no clipping.
        clip_pg_rho_threshold: :math:`\bar\rho^{pg}` of the policy-gradient weight (1.0); ``None`` = no clipping.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over the ``T * B`` items.
    """
    check_reduction(reduction)
    check_same_shape(log_probs=log_probs, behaviour_log_probs=behaviour_log_probs, rewards=rewards,
                     discounts=discounts, values=values, entropy=entropy)
    log_rhos = log_probs.detach() - behaviour_log_probs.detach()
    targets = vtrace(log_rhos, discounts, rewards, values.detach(), bootstrap_value.detach(),
                     clip_rho_threshold=clip_rho_threshold, clip_pg_rho_threshold=clip_pg_rho_threshold)
    policy = a2c_policy_loss(log_probs, targets.pg_advantages, "none")
    value = value_loss(values, targets.vs, "none")
    ent = entropy if entropy is not None else torch.zeros_like(policy)
    total = policy + vf_coef * value - ent_coef * ent
    r = reduction
    return IMPALALossTerms(apply_reduction(total, r), apply_reduction(policy, r), apply_reduction(value, r),
                           apply_reduction(ent, r), targets.vs, targets.pg_advantages)
