"""The C51 projection and QR-DQN's quantile Huber loss: worked examples, and each against a naive reference written
in the papers' notation (one sample, one atom at a time)."""

from __future__ import annotations

import math

import pytest
import torch

from rlrun.ops.distributional import (
    categorical_loss,
    categorical_projection,
    categorical_support,
    quantile_huber_loss,
    quantile_midpoints,
)


def naive_projection(p: list[float], r: float, discount: float, z: list[float]) -> list[float]:
    """Bellemare et al. 2017, Algorithm 1, one sample: for each atom j, Tz_j = [r + discount z_j] clipped, b_j =
    (Tz_j - V_min) / dz, l = floor(b_j), u = ceil(b_j); m_l += p_j (u - b_j), m_u += p_j (b_j - l); and where b_j
    is a whole number (l = u) m_l += p_j, the mass the printed algorithm would lose."""
    n, v_min, v_max = len(z), z[0], z[-1]
    dz = (v_max - v_min) / (n - 1)
    m = [0.0] * n
    for j in range(n):
        tz = min(max(r + discount * z[j], v_min), v_max)
        b = (tz - v_min) / dz
        lo, up = math.floor(b), math.ceil(b)
        if lo == up:
            m[lo] += p[j]
        else:
            m[lo] += p[j] * (up - b)
            m[up] += p[j] * (b - lo)
    return m


def test_support_is_evenly_spaced_and_refuses_an_empty_range():
    torch.testing.assert_close(categorical_support(-1.0, 1.0, 5), torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0]))
    with pytest.raises(ValueError, match="v_min < v_max"):
        categorical_support(1.0, 1.0, 5)
    with pytest.raises(ValueError, match="at least 2 atoms"):
        categorical_support(0.0, 1.0, 1)


def test_projection_worked_example():
    """Support z = [0, 1, 2] (dz = 1), p = [0.2, 0.5, 0.3].

    Item 1, r = 0.5, discount 0.5: Tz = [0.5, 1.0, 1.5]. Atom 0 -> b = 0.5: 0.1 to z_0, 0.1 to z_1; atom 1 lands on
    z_1 exactly: 0.5 to z_1; atom 2 -> b = 1.5: 0.15 to z_1 and z_2. m = [0.1, 0.75, 0.15].
    Item 2, terminal (discount 0), r = 5: every atom lands on r, clipped to V_max = 2: m = [0, 0, 1].
    Item 3, r = -1, discount 1: Tz = [-1, 0, 1], the first clipped to V_min = 0: m = [0.2 + 0.5, 0.3, 0].
    """
    z = torch.tensor([0.0, 1.0, 2.0])
    p = torch.tensor([[0.2, 0.5, 0.3]] * 3)
    m = categorical_projection(p, torch.tensor([0.5, 5.0, -1.0]), torch.tensor([0.5, 0.0, 1.0]), z)
    torch.testing.assert_close(m, torch.tensor([[0.1, 0.75, 0.15], [0.0, 0.0, 1.0], [0.7, 0.3, 0.0]]))


@pytest.mark.parametrize("n_step", [1, 3])
def test_projection_matches_the_papers_algorithm_sample_by_sample(n_step: int):
    """Random distributions on a 51-atom support over [-10, 10] (dz = 0.4), n-step discounts gamma^n (1 - terminal)
    with some terminals, and rewards on the grid so that some atoms land exactly on support points."""
    g = torch.Generator().manual_seed(0)
    z = categorical_support(-10.0, 10.0, 51)
    batch = 64
    p = torch.softmax(torch.randn(batch, 51, generator=g), dim=-1)
    rewards = torch.randint(-30, 31, (batch,), generator=g).float() * 0.4  # multiples of dz: exact landings
    rewards[::3] += torch.rand(batch, generator=g)[::3]  # and some off the grid
    terminal = torch.rand(batch, generator=g) < 0.25
    discounts = (0.99 ** n_step) * (~terminal).float()
    discounts[::5] = 1.0  # discount 1 with an on-grid reward: every atom lands exactly on an atom
    m = categorical_projection(p, rewards, discounts, z)
    want = torch.tensor([naive_projection(p[i].tolist(), float(rewards[i]), float(discounts[i]), z.tolist())
                         for i in range(batch)])
    torch.testing.assert_close(m, want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(m.sum(-1), torch.ones(batch))  # no mass is lost


def test_categorical_loss_is_the_cross_entropy():
    """m = [0.25, 0.75], p = [0.5, 0.5]: -(0.25 ln 0.5 + 0.75 ln 0.5) = ln 2."""
    loss = categorical_loss(torch.tensor([[0.5, 0.5]]).log(), torch.tensor([[0.25, 0.75]]))
    torch.testing.assert_close(loss, torch.tensor([math.log(2.0)]))


def test_quantile_midpoints():
    torch.testing.assert_close(quantile_midpoints(4), torch.tensor([0.125, 0.375, 0.625, 0.875]))


def naive_quantile_huber(theta: list[float], target: list[float], taus: list[float], kappa: float) -> float:
    """Dabney et al. 2018, Eq. 10 / Algorithm 1, one sample: sum_i (1/N') sum_j rho^kappa_{tau_i}(Ttheta_j - theta_i),
    rho^kappa_tau(u) = |tau - 1{u < 0}| L_kappa(u) / kappa, L_kappa(u) = u^2 / 2 if |u| <= kappa else
    kappa (|u| - kappa / 2); kappa = 0: rho_tau(u) = u (tau - 1{u < 0})."""
    total = 0.0
    for i, tau in enumerate(taus):
        for tj in target:
            u = tj - theta[i]
            if kappa == 0:
                rho = u * (tau - (1.0 if u < 0 else 0.0))
            else:
                huber = 0.5 * u * u if abs(u) <= kappa else kappa * (abs(u) - 0.5 * kappa)
                rho = abs(tau - (1.0 if u < 0 else 0.0)) * huber / kappa
            total += rho / len(target)
    return total


def test_quantile_huber_worked_example():
    """N = 2 (tau = 1/4, 3/4), theta = [0, 1], one target sample Ttheta = 2, kappa = 1.
    u = [2, 1]: both >= 0, weights tau = [1/4, 3/4]; L_1(2) = 1 * (2 - 1/2) = 1.5, L_1(1) = 0.5.
    Loss = 1/4 * 1.5 + 3/4 * 0.5 = 0.75."""
    loss = quantile_huber_loss(torch.tensor([[0.0, 1.0]]), torch.tensor([[2.0]]), quantile_midpoints(2), 1.0)
    torch.testing.assert_close(loss, torch.tensor([0.75]))


@pytest.mark.parametrize("kappa", [0.0, 0.5, 1.0, 2.0])
def test_quantile_huber_matches_the_papers_formula(kappa: float):
    g = torch.Generator().manual_seed(1)
    theta = torch.randn(16, 8, generator=g) * 3
    targets = torch.randn(16, 8, generator=g) * 3
    taus = quantile_midpoints(8)
    loss = quantile_huber_loss(theta, targets, taus, kappa)
    want = torch.tensor([naive_quantile_huber(theta[b].tolist(), targets[b].tolist(), taus.tolist(), kappa)
                         for b in range(16)])
    torch.testing.assert_close(loss, want, atol=1e-5, rtol=1e-5)


def test_quantile_huber_gradient_moves_quantiles_towards_their_fractions():
    """With targets spread uniformly, the tau = 1/4 quantile is pushed down and the 3/4 one up from the middle."""
    theta = torch.zeros(1, 2, requires_grad=True)
    targets = torch.linspace(-1, 1, 101).unsqueeze(0)
    quantile_huber_loss(theta, targets, quantile_midpoints(2), 0.0).sum().backward()
    assert theta.grad[0, 0] > 0 > theta.grad[0, 1]  # descent lowers theta_0 and raises theta_1
