"""V-trace off-policy value targets and policy-gradient advantages (IMPALA)."""

from __future__ import annotations

import numbers
from typing import NamedTuple, Optional

import torch

from rlrun.ops.checks import check_shape, check_time_major

__all__ = ["VTraceReturns", "vtrace"]


class VTraceReturns(NamedTuple):
    """Outputs of :func:`vtrace`, both ``[T, B]`` and detached.

    Attributes:
        vs: the V-trace value targets :math:`v_s`.
        pg_advantages: the policy-gradient advantages
            :math:`\\rho^{pg}_s (r_s + \\gamma_s v_{s+1} - V(x_s))`.
    """

    vs: torch.Tensor
    pg_advantages: torch.Tensor


def _check_threshold(name: str, value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be None or a positive real number, got {value!r}")
    return float(value)


@torch.no_grad()
def vtrace(
    log_rhos: torch.Tensor,
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
) -> VTraceReturns:
    r"""V-trace targets and policy-gradient advantages.

    Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance
    Weighted Actor-Learner Architectures", ICML 2018, Eq. 1 (value target) and
    Sec. 4.2 (policy gradient), with :math:`\lambda = 1`:

    .. math::

        v_s = V(x_s) + \sum_{t=s}^{T-1}
              \Big(\prod_{i=s}^{t-1} \gamma_i c_i\Big) \delta_t V, \qquad
        \delta_t V = \rho_t \big(r_t + \gamma_t V(x_{t+1}) - V(x_t)\big),

    where :math:`\rho_t = \min(\bar\rho, \pi(a_t|x_t)/\mu(a_t|x_t))`
    (``clip_rho_threshold`` = :math:`\bar\rho`), :math:`c_i = \min(1,
    \pi(a_i|x_i)/\mu(a_i|x_i))` (truncated trace, :math:`\bar c = 1`), the
    paper's :math:`\gamma^{t-s}` is generalised to the product of per-step
    discounts :math:`\gamma_i`, and :math:`V(x_T)` = ``bootstrap_value``.  The
    policy-gradient advantage (Sec. 4.2) is

    .. math::

        A^{pg}_s = \rho^{pg}_s \big(r_s + \gamma_s v_{s+1} - V(x_s)\big),
        \qquad v_T = V(x_T),

    with :math:`\rho^{pg}_s = \min(\bar\rho^{pg}, \pi/\mu)`
    (``clip_pg_rho_threshold``).  Computed with the backward recursion
    :math:`v_s - V(x_s) = \delta_s V + \gamma_s c_s (v_{s+1} - V(x_{s+1}))`
    (vectorised over the batch) under ``torch.no_grad()``, as in TorchBeast;
    the outputs are detached targets.

    Done convention: ``discounts[t] = gamma * (1 - done_t)`` where ``done_t`` is
    the done flag returned by the step that produced ``rewards[t]``; a zero
    discount stops both the bootstrap in :math:`\delta_t V` and the trace, so
    nothing after an episode end reaches :math:`v_s` for :math:`s \le t`.

    Args:
        log_rhos: ``[T, B]`` float, :math:`\log \pi(a_t|x_t) - \log \mu(a_t|x_t)`,
            learner (target) policy minus behaviour policy log-probabilities of
            the actions taken.
        discounts: ``[T, B]`` float, per-step discount ``gamma * (1 - done_t)``.
        rewards: ``[T, B]`` float, reward of step ``t``.
        values: ``[T, B]`` float, :math:`V(x_t)` under the learner's value
            function.
        bootstrap_value: ``[B]`` float, :math:`V(x_T)`, value of the observation
            following the last step.
        clip_rho_threshold: :math:`\bar\rho`, upper clip of the importance
            weight in :math:`\delta_t V`; ``None`` disables clipping.
        clip_pg_rho_threshold: :math:`\bar\rho^{pg}`, upper clip of the
            importance weight in the policy-gradient advantage; ``None``
            disables clipping.

    Returns:
        :class:`VTraceReturns` ``(vs, pg_advantages)``, both ``[T, B]``, detached.

    Raises:
        ValueError: if a shape does not match ``log_rhos``' ``[T, B]``, or a
            threshold is neither ``None`` nor a positive number.
    """
    T, B = check_time_major("log_rhos", log_rhos)
    check_shape("discounts", discounts, (T, B), "log_rhos")
    check_shape("rewards", rewards, (T, B), "log_rhos")
    check_shape("values", values, (T, B), "log_rhos")
    check_shape("bootstrap_value", bootstrap_value, (B,), "log_rhos.shape[1]")
    clip_rho_threshold = _check_threshold("clip_rho_threshold", clip_rho_threshold)
    clip_pg_rho_threshold = _check_threshold("clip_pg_rho_threshold", clip_pg_rho_threshold)

    rhos = torch.exp(log_rhos)
    clipped_rhos = rhos if clip_rho_threshold is None else rhos.clamp(max=clip_rho_threshold)
    cs = rhos.clamp(max=1.0)

    bootstrap = bootstrap_value.unsqueeze(0)
    values_t_plus_1 = torch.cat([values[1:], bootstrap], dim=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)
    traces = discounts * cs

    vs_minus_v_xs = torch.empty_like(values)
    acc = torch.zeros_like(bootstrap_value)
    for t in range(T - 1, -1, -1):
        acc = deltas[t] + traces[t] * acc
        vs_minus_v_xs[t] = acc
    vs = vs_minus_v_xs + values

    vs_t_plus_1 = torch.cat([vs[1:], bootstrap], dim=0)
    clipped_pg_rhos = (
        rhos if clip_pg_rho_threshold is None else rhos.clamp(max=clip_pg_rho_threshold)
    )
    pg_advantages = clipped_pg_rhos * (rewards + discounts * vs_t_plus_1 - values)
    return VTraceReturns(vs=vs.detach(), pg_advantages=pg_advantages.detach())
