"""Heads: map torso features to the quantities an algorithm acts and learns on."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.components.noisy import linear_layer


def in_float32(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)`` for a network's output layer: in float32 when ``x`` comes from a torso run in a lower precision
    (``device.precision=bf16``: the update under ``torch.autocast``), on the features upcast and with autocast off, so
    the action values, logits and log-probabilities an update compares with its behaviour policy's are not rounded
    to bfloat16 (~3 significant digits), which the CPU's autocast would otherwise keep through ``log_softmax``."""
    if x.dtype in (torch.bfloat16, torch.float16):
        with torch.autocast(x.device.type, enabled=False):
            return layer(x.float())
    return layer(x)


class QHead(Component):
    """Linear action values Q(s, ·) for a Discrete action space: x [B, D] -> q [B, A]. ``noisy``: the linear layer is
    a :class:`~rlrun.components.noisy.NoisyLinear` (noisy nets, Fortunato et al. 2018) of sigma_0 ``noisy_std``."""

    def __init__(self, name: str | None = None, noisy: bool = False, noisy_std: float = 0.5) -> None:
        super().__init__(name or "q_head")
        self.noisy, self.noisy_std = bool(noisy), float(noisy_std)

    def _build(self, x: sp.Space, actions: sp.Space) -> None:
        self.require("x", x, kinds=(sp.Box,), rank=1, floating=True)
        self.require("actions", actions, kinds=(sp.Discrete,))
        self.linear = linear_layer(int(x.shape[0]), int(actions.n), self.noisy, self.noisy_std)
        self.output_spaces["get_q"] = sp.Box(-np.inf, np.inf, (int(actions.n),), np.float32)

    @api
    def get_q(self, x: torch.Tensor) -> torch.Tensor:
        return in_float32(self.linear, x)


def dueling_q(value: torch.Tensor, advantages: torch.Tensor, aggregation: str = "mean") -> torch.Tensor:
    """Dueling aggregation of Wang et al. 2016: ``Q = V + A - mean_a A`` (Eq. 9) or ``- max_a A`` (Eq. 8).

    ``value`` ``[*B]``, ``advantages`` ``[*B, A]`` -> ``Q`` ``[*B, A]``. Subtracting the mean (or max) makes V and A
    identifiable: adding a constant to every advantage leaves Q unchanged.
    """
    if aggregation == "mean":
        baseline = advantages.mean(dim=-1, keepdim=True)
    elif aggregation == "max":
        baseline = advantages.amax(dim=-1, keepdim=True)
    else:
        raise ValueError(f"dueling aggregation '{aggregation}' is not one of mean, max")
    return value.unsqueeze(-1) + advantages - baseline


class DuelingQHead(Component):
    """Dueling action values (Wang et al. 2016): a value stream V(s) and an advantage stream A(s, ·) combined by
    :func:`dueling_q`. x ``[B, D]`` -> q ``[B, A]`` for a Discrete action space; a drop-in for :class:`QHead`.
    """

    def __init__(self, hidden_size: int = 0, aggregation: str = "mean", name: str | None = None,
                 noisy: bool = False, noisy_std: float = 0.5) -> None:
        """``hidden_size``: width of a hidden ReLU layer in each stream (Wang et al. used 512 on the conv features;
        0 = each stream is one linear layer on the torso's features); ``aggregation``: "mean" (Eq. 9, used in the
        paper's experiments) or "max" (Eq. 8); ``noisy``: the streams' layers are noisy
        (:class:`~rlrun.components.noisy.NoisyLinear` of sigma_0 ``noisy_std``)."""
        super().__init__(name or "dueling_q_head")
        self.noisy, self.noisy_std = bool(noisy), float(noisy_std)
        if aggregation not in ("mean", "max"):
            raise ValueError(f"dueling aggregation '{aggregation}' is not one of mean, max")
        if hidden_size < 0:
            raise ValueError(f"hidden_size must be >= 0, got {hidden_size}")
        self.hidden_size = int(hidden_size)
        self.aggregation = aggregation

    def _stream(self, width: int, out: int) -> nn.Module:
        if not self.hidden_size:
            return linear_layer(width, out, self.noisy, self.noisy_std)
        return nn.Sequential(linear_layer(width, self.hidden_size, self.noisy, self.noisy_std), nn.ReLU(),
                             linear_layer(self.hidden_size, out, self.noisy, self.noisy_std))

    def _build(self, x: sp.Space, actions: sp.Space) -> None:
        self.require("x", x, kinds=(sp.Box,), rank=1, floating=True)
        self.require("actions", actions, kinds=(sp.Discrete,))
        self.value = self._stream(int(x.shape[0]), 1)
        self.advantage = self._stream(int(x.shape[0]), int(actions.n))
        self.output_spaces["get_q"] = sp.Box(-np.inf, np.inf, (int(actions.n),), np.float32)

    @api
    def get_q(self, x: torch.Tensor) -> torch.Tensor:
        value = in_float32(self.value, x).squeeze(-1)
        return dueling_q(value, in_float32(self.advantage, x), self.aggregation)


class PolicyValueHead(Component):
    """Actor-critic head: action-distribution parameters and a state value from torso features x ``[B, D]``.

    - Discrete(A) actions: ``get_policy`` returns logits ``[B, A]``.
    - Box actions of shape S: ``get_policy`` returns ``(mean, log_std)``, each ``[B, *S]``, of a diagonal Gaussian;
      the mean is linear in x, the log-std is a learned parameter independent of the state (broadcast, no copy),
      as in PPO's MuJoCo policy (Schulman et al. 2017). Actions are not squashed or clipped here.
    - ``get_value`` returns V(s) ``[B]``; ``forward`` returns ``(policy params, value)``.

    Turn the parameters into a distribution with ``rlrun.components.distributions.make_distribution(actions,
    params)``.
    """

    def __init__(self, init_log_std: float = 0.0, orthogonal_init: bool = False, name: str | None = None) -> None:
        """``init_log_std``: initial value of the Gaussian's log-std (natural log, per action dimension; Box
        actions only); ``orthogonal_init``: orthogonal weights with gain 0.01 for the policy layer and 1.0 for the
        value layer, zero biases (as in CleanRL's / OpenAI Baselines' PPO; False: PyTorch's default init)."""
        super().__init__(name or "policy_value_head")
        self.init_log_std = float(init_log_std)
        self.orthogonal_init = bool(orthogonal_init)

    def _build(self, x: sp.Space, actions: sp.Space) -> None:
        self.require("x", x, kinds=(sp.Box,), rank=1, floating=True)
        self.require("actions", actions, kinds=(sp.Discrete, sp.Box))
        width = int(x.shape[0])
        self.value = nn.Linear(width, 1)
        value_space = sp.Box(-np.inf, np.inf, (), np.float32)
        if isinstance(actions, sp.Discrete):
            self.continuous = False
            self.policy = nn.Linear(width, int(actions.n))
            policy_space: sp.Space = sp.Box(-np.inf, np.inf, (int(actions.n),), np.float32)
        else:
            self.require("actions", actions, floating=True)
            self.continuous = True
            self.action_shape = tuple(int(d) for d in actions.shape)
            self.policy = nn.Linear(width, int(np.prod(self.action_shape, dtype=np.int64)))
            self.log_std = nn.Parameter(torch.full(self.action_shape, self.init_log_std))
            gauss = sp.Box(-np.inf, np.inf, self.action_shape, np.float32)
            policy_space = sp.Tuple((gauss, gauss))
        if self.orthogonal_init:
            for layer, gain in ((self.policy, 0.01), (self.value, 1.0)):
                nn.init.orthogonal_(layer.weight, gain)
                nn.init.zeros_(layer.bias)
        self.output_spaces["get_policy"] = policy_space
        self.output_spaces["get_value"] = value_space
        self.output_spaces["forward"] = sp.Tuple((policy_space, value_space))

    @api
    def get_policy(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        out = in_float32(self.policy, x)
        if not self.continuous:
            return out
        mean = out.reshape(*out.shape[:-1], *self.action_shape)
        return mean, self.log_std.expand_as(mean)

    @api
    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return in_float32(self.value, x).squeeze(-1)

    @api
    def forward(self, x: torch.Tensor) -> tuple:
        return self.get_policy(x), self.get_value(x)
