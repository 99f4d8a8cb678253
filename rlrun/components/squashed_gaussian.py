"""The tanh-squashed diagonal Gaussian policy of SAC (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and
Applications", Appendix C "Enforcing Action Bounds"): a distribution and the head that makes its parameters.

``u ~ N(mean, std)``, ``a = tanh(u)`` in ``(-1, 1)``; by the change of variables (Appendix C)

    log pi(a | s) = log N(u | mean, std) - sum_i log(1 - tanh(u_i)^2).

``a`` lives in ``[-1, 1]^d``; the algorithm rescales it to the action space's bounds for the environment (an affine
map whose constant log-Jacobian is left out here, as in Stable-Baselines3's SAC: the entropy target refers to the
normalised actions).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.components.distributions import DiagGaussian

_LOG_2 = math.log(2.0)


def tanh_log_abs_det_jacobian(u: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(u)^2)`` elementwise, computed stably as ``2 (log 2 - u - softplus(-2 u))``.

    ``1 - tanh(u)^2 = sech(u)^2 = 4 / (e^u + e^-u)^2 = 4 e^{-2u} / (1 + e^{-2u})^2``, so its log is
    ``2 log 2 - 2 u - 2 log(1 + e^{-2u}) = 2 (log 2 - u - softplus(-2u))``; it stays finite where ``tanh(u)`` rounds
    to +-1 in float32 (|u| > ~9), where ``log(1 - tanh(u)^2)`` would be ``log 0 = -inf`` (Spinning Up's SAC uses
    this form; CleanRL adds 1e-6 inside the log instead).
    """
    return 2.0 * (_LOG_2 - u - F.softplus(-2.0 * u))


class SquashedDiagGaussian:
    """``a = tanh(u)``, ``u ~ N(mean, exp(log_std))`` diagonal, with event shape ``mean.shape[-event_rank:]``.

    ``log_prob`` sums over the event dimensions (batch shape out). There is no closed-form entropy: SAC estimates
    it by ``-log pi(a)`` of a sample.
    """

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor, event_rank: int = 1) -> None:
        """``mean``, ``log_std``: of the Gaussian before the squashing, ``[*B, *S]`` (``log_std`` broadcastable);
        ``event_rank``: number of trailing dimensions of one action (``len(S)``)."""
        self.base = DiagGaussian(mean, log_std, event_rank)

    def rsample_with_log_prob(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised squashed sample ``a`` ``[*B, *S]`` in (-1, 1) and its ``log pi(a)`` ``[*B]``
        (computed from the pre-squash sample ``u``, so it stays exact where ``a`` rounds to +-1)."""
        u = self.base.rsample()
        return torch.tanh(u), self._log_prob_of_pre_tanh(u)

    def sample(self) -> torch.Tensor:
        """A squashed sample (not differentiable)."""
        with torch.no_grad():
            return torch.tanh(self.base.rsample())

    def deterministic(self) -> torch.Tensor:
        """``tanh(mean)``: the squashed mean (what SAC acts with when evaluating; not the mode of ``a`` in general)."""
        return torch.tanh(self.base.mean)

    def log_prob(self, actions: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        """``log pi(a)`` of given squashed actions ``[*B, *S]``; ``u = atanh(a)`` with ``a`` clipped to
        ``[-1 + eps, 1 - eps]`` (an action exactly at a bound has density 0 before the clip)."""
        a = actions.to(self.base.mean.dtype).clamp(-1.0 + eps, 1.0 - eps)
        return self._log_prob_of_pre_tanh(torch.atanh(a))

    def _log_prob_of_pre_tanh(self, u: torch.Tensor) -> torch.Tensor:
        return self.base.log_prob(u) - self.base._sum_event(tanh_log_abs_det_jacobian(u))


class SquashedGaussianHead(Component):
    """Features x ``[B, D]`` -> ``(mean, log_std)`` ``[B, *S]`` each, of the Gaussian that a
    :class:`SquashedDiagGaussian` squashes, for a Box action space of shape S.

    Both are linear in x (the log-std is state-dependent, as in SAC). The log-std is bounded smoothly to
    ``[log_std_min, log_std_max]`` by ``min + (max - min) (tanh(raw) + 1) / 2`` (Spinning Up / CleanRL's
    ``sac_continuous_action.py``, bounds -5 and 2), so the standard deviation stays in ``[e^-5, e^2]``.
    """

    def __init__(self, log_std_min: float = -5.0, log_std_max: float = 2.0, name: str | None = None) -> None:
        """``log_std_min``/``log_std_max``: bounds of the natural-log standard deviation (CleanRL: -5, 2)."""
        super().__init__(name or "squashed_gaussian_head")
        if not log_std_min < log_std_max:
            raise ValueError(f"log_std_min ({log_std_min}) must be below log_std_max ({log_std_max})")
        self.log_std_min, self.log_std_max = float(log_std_min), float(log_std_max)

    def _build(self, x: sp.Space, actions: sp.Space) -> None:
        self.require("x", x, kinds=(sp.Box,), rank=1, floating=True)
        self.require("actions", actions, kinds=(sp.Box,), floating=True)
        self.action_shape = tuple(int(d) for d in actions.shape)
        n = int(np.prod(self.action_shape, dtype=np.int64))
        self.mean = nn.Linear(int(x.shape[0]), n)
        self.log_std = nn.Linear(int(x.shape[0]), n)
        mean_space = sp.Box(-np.inf, np.inf, self.action_shape, np.float32)
        log_std_space = sp.Box(self.log_std_min, self.log_std_max, self.action_shape, np.float32)
        self.output_spaces["get_policy"] = sp.Tuple((mean_space, log_std_space))

    @api
    def get_policy(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lead = x.shape[:-1]
        mean = self.mean(x).reshape(*lead, *self.action_shape)
        raw = torch.tanh(self.log_std(x)).reshape(*lead, *self.action_shape)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (raw + 1.0)
        return mean, log_std
