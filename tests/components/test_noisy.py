"""NoisyLinear (Fortunato et al. 2018): factorised noise by hand, the paper's initialisation, noise that changes only
when resampled, the mean weights without noise, and noisy Q heads built from spaces."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.heads import DuelingQHead, QHead
from rlrun.components.noisy import NoisyLinear, reset_noise, scale_noise, without_noise
from rlrun.components.testing import ComponentTest


def test_scale_noise_is_signed_square_root():
    assert_close(scale_noise(torch.tensor([4.0, -9.0, 0.0])), torch.tensor([2.0, -3.0, 0.0]))


def test_noisy_linear_is_the_factorised_formula_by_hand():
    """y = (mu_w + sigma_w * f(eps_out) f(eps_in)^T) x + mu_b + sigma_b * f(eps_out) (Fortunato et al. 2018, Eq. 9
    with Sec. 3(b)'s factorised noise), against the layer's own buffers."""
    torch.manual_seed(0)
    layer = NoisyLinear(3, 2)
    x = torch.randn(5, 3)
    weight = layer.weight_mu + layer.weight_sigma * layer.eps_out[:, None] * layer.eps_in[None, :]
    bias = layer.bias_mu + layer.bias_sigma * layer.eps_out
    assert_close(layer(x), x @ weight.T + bias)
    with torch.no_grad():  # acting and targets take the factorised path: the same outputs
        assert_close(layer(x), (x @ weight.T + bias).detach())
        assert_close(layer(x[0]), (x[0] @ weight.T + bias).detach())  # one observation, no batch rank
    with without_noise(layer):
        assert_close(layer(x), x @ layer.weight_mu.T + layer.bias_mu)
    assert layer.noisy  # restored after the block


def test_initialisation_follows_the_paper():
    """mu ~ U[-1/sqrt(p), 1/sqrt(p)], sigma = sigma_0 / sqrt(p) for p = 16 inputs, sigma_0 = 0.5."""
    layer = NoisyLinear(16, 4, std_init=0.5)
    assert float(layer.weight_mu.detach().abs().max()) <= 1 / math.sqrt(16)
    assert_close(layer.weight_sigma, torch.full((4, 16), 0.5 / 4))
    assert_close(layer.bias_sigma, torch.full((4,), 0.5 / 4))


def test_noise_changes_only_when_resampled_and_is_saved_with_the_weights():
    torch.manual_seed(1)
    layer = NoisyLinear(4, 3)
    x = torch.randn(2, 4)
    first = layer(x)
    assert_close(layer(x), first)  # a forward call draws nothing
    reset_noise(layer)
    assert not torch.allclose(layer(x), first)
    copy = NoisyLinear(4, 3)
    copy.load_state_dict(layer.state_dict())
    assert_close(copy(x), layer(x))  # an acting copy that loads the weights acts with the learner's sample


def test_noise_gets_gradients_into_sigma():
    layer = NoisyLinear(3, 2)
    layer(torch.ones(1, 3)).sum().backward()
    assert layer.weight_sigma.grad is not None and float(layer.weight_sigma.grad.abs().sum()) > 0


def test_noisy_q_heads_build_from_spaces():
    x = sp.Box(-1.0, 1.0, (8,), np.float32)
    for head in (QHead(noisy=True), DuelingQHead(noisy=True, hidden_size=4)):
        out = ComponentTest(head, {"x": x, "actions": sp.Discrete(3)}, batch_shape=(5,)).call("get_q")
        assert out.shape == (5, 3)
        assert any(isinstance(m, NoisyLinear) for m in head.modules())
        assert not any(type(m) is torch.nn.Linear for m in head.modules())
