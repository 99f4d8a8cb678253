"""Noisy nets (Fortunato et al. 2018, "Noisy Networks for Exploration"): linear layers whose weights carry learnt
Gaussian noise, so that exploration is the network's own, state-dependent and annealed by learning, instead of
epsilon-greedy's.

- ``NoisyLinear``: ``y = (mu_w + sigma_w * eps_w) x + mu_b + sigma_b * eps_b`` with *factorised* Gaussian noise
  (Sec. 3(b)): ``eps_w[i, j] = f(eps_out[i]) f(eps_in[j])``, ``eps_b = f(eps_out)``, ``f(x) = sign(x) sqrt(|x|)``:
  p + q unit Gaussian draws for a p x q layer instead of p q + q.
- ``reset_noise(module)``: a fresh noise sample in every noisy layer of a module; ``without_noise(module)``: the
  block runs on the mean weights (greedy evaluation).
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator

import torch
from torch import nn
from torch.nn import functional as F


def scale_noise(x: torch.Tensor) -> torch.Tensor:
    """``f(x) = sign(x) sqrt(|x|)`` (Fortunato et al. 2018, Sec. 3(b), the factorised noise's real function)."""
    return x.sign() * x.abs().sqrt()


class NoisyLinear(nn.Module):
    """A linear layer with factorised Gaussian noise on its weights and biases (Fortunato et al. 2018, Eq. 9).

    Initialisation as the paper's factorised case (Sec. 3.2): ``mu ~ U[-1/sqrt(p), 1/sqrt(p)]`` for ``p`` inputs,
    ``sigma = sigma_0 / sqrt(p)`` with ``sigma_0 = 0.5``. The noise is a buffer (saved with the weights, so an acting
    copy that loads them acts with the learner's sample) that changes only in :meth:`reset_noise`: an agent draws
    it once per gradient step (as CleanRL's ``rainbow_atari.py``), not per forward call.
    """

    def __init__(self, in_features: int, out_features: int, std_init: float = 0.5) -> None:
        """``std_init``: sigma_0 of the paper (0.5 for factorised noise)."""
        super().__init__()
        self.in_features, self.out_features, self.std_init = int(in_features), int(out_features), float(std_init)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("eps_in", torch.zeros(in_features))
        self.register_buffer("eps_out", torch.zeros(out_features))
        self.noisy = True  # False inside without_noise(): the mean weights
        self.reset_parameters()
        self.reset_noise()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        with torch.no_grad():
            self.weight_mu.uniform_(-bound, bound)
            self.bias_mu.uniform_(-bound, bound)
            self.weight_sigma.fill_(self.std_init / math.sqrt(self.in_features))
            self.bias_sigma.fill_(self.std_init / math.sqrt(self.in_features))

    @torch.no_grad()
    def reset_noise(self) -> None:
        """Draw the p + q unit Gaussians of a new factorised sample (torch's generator)."""
        self.eps_in.copy_(scale_noise(torch.randn(self.in_features, device=self.eps_in.device)))
        self.eps_out.copy_(scale_noise(torch.randn(self.out_features, device=self.eps_out.device)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.noisy:
            return F.linear(x, self.weight_mu, self.bias_mu)
        bias = self.bias_mu + self.bias_sigma * self.eps_out
        if torch.is_grad_enabled():
            weight = self.weight_mu + self.weight_sigma * torch.outer(self.eps_out, self.eps_in)
            return F.linear(x, weight, bias)
        # Acting and targets: (sigma * eps_out eps_in^T) x = eps_out * (sigma (eps_in * x)), so the noisy weight
        # (out x in, three passes over it) is never formed: for one observation those passes cost more than the product.
        return F.linear(x, self.weight_mu, bias) + F.linear(x * self.eps_in, self.weight_sigma) * self.eps_out

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, std_init={self.std_init}"


def linear_layer(in_features: int, out_features: int, noisy: bool = False, std_init: float = 0.5) -> nn.Module:
    """``nn.Linear``, or a :class:`NoisyLinear` with ``noisy``: what a head builds its output layers with."""
    return NoisyLinear(in_features, out_features, std_init) if noisy else nn.Linear(in_features, out_features)


def noisy_layers(module: nn.Module) -> list[NoisyLinear]:
    return [m for m in module.modules() if isinstance(m, NoisyLinear)]


def reset_noise(module: nn.Module) -> None:
    """A new noise sample in every :class:`NoisyLinear` of ``module``."""
    for layer in noisy_layers(module):
        layer.reset_noise()


@contextlib.contextmanager
def without_noise(module: nn.Module) -> Iterator[None]:
    """Run the block on the mean weights of ``module``'s noisy layers (greedy evaluation, ``explore=False``)."""
    layers = noisy_layers(module)
    for layer in layers:
        layer.noisy = False
    try:
        yield
    finally:
        for layer in layers:
            layer.noisy = True
