"""The tanh-squashed Gaussian (rlrun/components/squashed_gaussian.py): the log-Jacobian correction and the
log-probability against hand-worked numbers and torch.distributions' own tanh transform, the head built alone."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributions import Independent, Normal, TransformedDistribution
from torch.distributions.transforms import TanhTransform

from rlrun import spaces as sp
from rlrun.components.base import ComponentBuildError
from rlrun.components.squashed_gaussian import (
    SquashedDiagGaussian,
    SquashedGaussianHead,
    tanh_log_abs_det_jacobian,
)
from rlrun.components.testing import ComponentTest


def test_log_jacobian_worked_example_and_stability():
    """log(1 - tanh(u)^2): u = 0 -> log 1 = 0; u = atanh(0.6) = ln 2 (since atanh(x) = 0.5 ln((1+x)/(1-x)) =
    0.5 ln 4) -> log(1 - 0.36) = log 0.64 = -0.4462871. At u = 20, tanh(u) is 1.0 in float32, so the naive form is
    log 0 = -inf, while the exact value is 2 (log 2 - 20 - softplus(-40)) = -38.613706."""
    u = torch.tensor([0.0, math.log(2.0), 20.0, -20.0])
    out = tanh_log_abs_det_jacobian(u)
    torch.testing.assert_close(out, torch.tensor([0.0, math.log(0.64), 2 * (math.log(2) - 20), 2 * (math.log(2) - 20)]))
    assert torch.log(1 - torch.tanh(u[2]) ** 2) == -math.inf  # what the stable form avoids
    v = torch.linspace(-4, 4, 41, dtype=torch.float64)
    torch.testing.assert_close(tanh_log_abs_det_jacobian(v), torch.log(1 - torch.tanh(v) ** 2))


def test_log_prob_worked_example():
    """mean 0, log-std 0 (sigma 1), one action dimension, a = 0.6: u = atanh(0.6) = ln 2 = 0.6931472;
    log N(u) = -u^2 / 2 - ln(2 pi) / 2 = -0.2402265 - 0.9189385 = -1.1591650;
    log pi(a) = log N(u) - log(1 - 0.6^2) = -1.1591650 + 0.4462871 = -0.7128779."""
    dist = SquashedDiagGaussian(torch.zeros(1, 1), torch.zeros(1, 1))
    expected = -(math.log(2.0) ** 2) / 2 - 0.5 * math.log(2 * math.pi) - math.log(0.64)
    assert expected == pytest.approx(-0.7128779, abs=1e-6)
    torch.testing.assert_close(dist.log_prob(torch.tensor([[0.6]])), torch.tensor([expected]))
    torch.testing.assert_close(dist.deterministic(), torch.zeros(1, 1))


@pytest.mark.parametrize("event_shape", [(1,), (3,), (2, 2)])
def test_log_prob_matches_torch_tanh_transform(event_shape):
    """Against torch.distributions (a Normal pushed through TanhTransform, the event dims summed): the sample's own
    log-probability from rsample_with_log_prob and log_prob of given actions agree with it."""
    g = torch.Generator().manual_seed(0)
    batch = (5,)
    mean = torch.randn(*batch, *event_shape, generator=g, dtype=torch.float64)
    log_std = 0.3 * torch.randn(*batch, *event_shape, generator=g, dtype=torch.float64)
    ref = Independent(TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform()]), len(event_shape))
    dist = SquashedDiagGaussian(mean, log_std, event_rank=len(event_shape))
    torch.manual_seed(1)
    a, logp = dist.rsample_with_log_prob()
    assert a.shape == (*batch, *event_shape) and logp.shape == batch
    assert (a.abs() < 1).all()
    torch.testing.assert_close(logp, ref.log_prob(a))
    torch.testing.assert_close(dist.log_prob(a), ref.log_prob(a))
    torch.testing.assert_close(dist.deterministic(), torch.tanh(mean))


def test_samples_are_reparameterised():
    """Gradients of the sample and of its log-probability reach both the mean and the log-std."""
    mean = torch.zeros(4, 2, requires_grad=True)
    log_std = torch.zeros(4, 2, requires_grad=True)
    a, logp = SquashedDiagGaussian(mean, log_std).rsample_with_log_prob()
    (a.sum() + logp.sum()).backward()
    assert mean.grad.abs().sum() > 0 and log_std.grad.abs().sum() > 0
    assert not SquashedDiagGaussian(mean, log_std).sample().requires_grad


@pytest.mark.parametrize("action_shape", [(1,), (2, 3)])
def test_head_built_alone(action_shape):
    """x Box(8,) -> (mean, log_std) of the action's shape; the log-std stays in [-5, 2] even for huge features."""
    head = SquashedGaussianHead(-5.0, 2.0)
    actions = sp.Box(-1.0, 1.0, action_shape, np.float32)
    test = ComponentTest(head, {"x": sp.Box(-1.0, 1.0, (8,), np.float32), "actions": actions}, batch_shape=(6,))
    mean, log_std = test.call("get_policy")
    assert mean.shape == log_std.shape == (6, *action_shape)
    big = test.sample("x") * 1e4
    log_std = test.call("get_policy", x=big)[1].detach()  # the declared Box(-5, 2) log-std space is checked by the test
    assert float(log_std.min()) >= -5.0 and float(log_std.max()) <= 2.0
    assert torch.isclose(log_std, torch.tensor(-5.0)).any() or torch.isclose(log_std, torch.tensor(2.0)).any()


def test_head_rejects_discrete_actions_and_bad_bounds():
    with pytest.raises(ComponentBuildError, match=r"squashed_gaussian_head.actions expects Box"):
        SquashedGaussianHead().build(x=sp.Box(-1.0, 1.0, (4,), np.float32), actions=sp.Discrete(2))
    with pytest.raises(ValueError, match="log_std_min"):
        SquashedGaussianHead(2.0, -5.0)
