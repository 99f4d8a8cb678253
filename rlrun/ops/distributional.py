"""The distributional DQN family's arithmetic, as pure tensor functions.

- C51 (Bellemare, Dabney & Munos 2017, "A Distributional Perspective on Reinforcement Learning", Algorithm 1): the
  return distribution on a fixed support of atoms; the Bellman target ``r + discount * z`` projected back onto that
  support (:func:`categorical_projection`), learnt by cross-entropy (:func:`categorical_loss`).
- QR-DQN (Dabney, Rowland, Bellemare & Munos 2018, "Distributional Reinforcement Learning with Quantile
  Regression"): the return distribution as N quantiles at the midpoints ``tau_hat_i = (2i + 1) / 2N`` (Lemma 2,
  :func:`quantile_midpoints`), learnt by the quantile Huber loss (Eq. 10, :func:`quantile_huber_loss`).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def categorical_support(v_min: float, v_max: float, num_atoms: int) -> torch.Tensor:
    """The C51 atoms ``z_i = v_min + i * (v_max - v_min) / (N - 1)``, ``i = 0 .. N-1`` (float32 ``[N]``)."""
    if not v_min < v_max:
        raise ValueError(f"the support needs v_min < v_max, got v_min={v_min}, v_max={v_max}")
    if num_atoms < 2:
        raise ValueError(f"the support needs at least 2 atoms, got {num_atoms}")
    return torch.linspace(float(v_min), float(v_max), int(num_atoms))


def categorical_projection(next_probs: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor,
                           support: torch.Tensor) -> torch.Tensor:
    """The target distribution of C51 (Bellemare et al. 2017, Algorithm 1): each atom ``z_j`` of the bootstrap's
    distribution ``next_probs`` moves to ``Tz_j = r + discount * z_j``, clipped to ``[v_min, v_max]``, and its
    probability is split between the two atoms around it in proportion to the distance (``b_j = (Tz_j - v_min) /
    dz``; ``l = floor(b_j)`` gets ``p_j (u - b_j)``, ``u = ceil(b_j)`` gets ``p_j (b_j - l)``). An atom landing
    exactly on ``z_l`` (``l = u``) gives it all of ``p_j``: Algorithm 1 as printed would drop that mass.

    ``discounts`` is ``gamma^n * (1 - terminated)`` as in DQN's replay (0 at a termination: every atom lands on
    ``r``). Shapes: ``next_probs`` ``[B, N]``, ``rewards`` and ``discounts`` ``[B]``, ``support`` ``[N]`` -> ``[B, N]``,
    each row summing to the row of ``next_probs``'s sum.
    """
    num_atoms = support.shape[0]
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    moved = (rewards.unsqueeze(-1) + discounts.unsqueeze(-1) * support).clamp(v_min, v_max)
    b = ((moved - v_min) / delta).clamp(0, num_atoms - 1)  # clamp: float rounding at v_max
    lower, upper = b.floor(), b.ceil()
    to_lower = next_probs * (upper - b + (lower == upper).to(b.dtype))
    to_upper = next_probs * (b - lower)
    target = torch.zeros_like(next_probs)
    target.scatter_add_(-1, lower.long(), to_lower)
    target.scatter_add_(-1, upper.long(), to_upper)
    return target


def categorical_loss(log_probs: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    """Cross-entropy ``-sum_i m_i log p_i`` of the predicted distribution (log-probabilities ``[B, N]`` of the taken
    action) against the projected target ``m`` ``[B, N]`` (Bellemare et al. 2017, Algorithm 1's output), per item
    ``[B]``. Its gradient is the KL divergence's (the target's entropy is a constant)."""
    return -(target_probs * log_probs).sum(dim=-1)


def quantile_midpoints(num_quantiles: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``tau_hat_i = (2i + 1) / (2N)``, ``i = 0 .. N-1``: the quantile fractions QR-DQN's N outputs estimate (Dabney et
    al. 2018, Lemma 2: the midpoints minimise the 1-Wasserstein distance to the true distribution)."""
    n = int(num_quantiles)
    if n < 1:
        raise ValueError(f"need at least 1 quantile, got {num_quantiles}")
    return (2 * torch.arange(n, device=device, dtype=torch.float32) + 1) / (2 * n)


def quantile_huber_loss(quantiles: torch.Tensor, targets: torch.Tensor, taus: torch.Tensor,
                        kappa: float = 1.0) -> torch.Tensor:
    """The quantile Huber loss of QR-DQN (Dabney et al. 2018, Eq. 10 and Algorithm 1), per item:

        sum_i mean_j rho^kappa_{tau_i}(T theta_j - theta_i),
        rho^kappa_tau(u) = |tau - 1{u < 0}| * L_kappa(u) / kappa,   L_kappa: the Huber loss of threshold kappa,

    and with ``kappa = 0`` the plain quantile regression loss ``rho_tau(u) = u (tau - 1{u < 0})`` (Eq. 8).

    ``quantiles`` ``[B, N]``: theta_i(s, a), the prediction at fractions ``taus`` ``[N]``; ``targets`` ``[B, N']``:
    the target samples T theta_j = r + discount * theta_j(s', a*) (no gradient flows into them) -> ``[B]``.
    """
    u = targets.detach().unsqueeze(-2) - quantiles.unsqueeze(-1)  # [B, N, N']: u_ij = T theta_j - theta_i
    weight = (taus.unsqueeze(-1) - (u < 0).to(u.dtype)).abs()
    if kappa > 0:
        elementwise = F.huber_loss(u, torch.zeros_like(u), reduction="none", delta=kappa) / kappa
    else:
        elementwise = u.abs()
    return (weight * elementwise).mean(dim=-1).sum(dim=-1)
