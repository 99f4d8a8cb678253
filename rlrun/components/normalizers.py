"""Running-statistics normalisers: observation normalisation and reward scaling as the MuJoCo references use them
(OpenAI Baselines' ``VecNormalize``, CleanRL's ``ppo_continuous_action`` through gymnasium's ``NormalizeObservation``
/ ``NormalizeReward`` wrappers, SB3's ``VecNormalize``).

Why components of the agent and not gymnasium wrappers on each env copy: a wrapper keeps its statistics in the
env copy it wraps, so N env copies (and every Ray worker) would hold N different normalisations, the greedy policy
``rlrun eval`` and ``rlrun export`` use would have none, and a checkpoint would have to reach into every worker's
envs. Here the statistics are buffers of the agent: one set per run, saved with its weights (exact resume),
broadcast to the workers with the weights (the observation normaliser is part of the acting network), and folded
into an exported policy (which then takes raw observations). The learner updates them from each rollout's raw data
before it learns on it, as Brax's PPO does with its running statistics.

- :class:`RunningMeanStd`: mean and variance over every value seen so far (Chan et al.'s parallel update, float64),
  the arithmetic of Baselines' ``RunningMeanStd`` (initial count 1e-4, mean 0, variance 1).
- :class:`ObservationNormalizer`: ``clip((obs - mean) / sqrt(var + eps), -clip, clip)`` per observation dimension.
- :class:`RewardScaler`: rewards divided by the running std of the discounted return (not the reward itself), the
  return kept per env copy as ``ret = ret * gamma + r`` and zeroed after an episode ends (terminated or
  truncated, as Baselines' and SB3's ``VecNormalize``), then clipped to ``[-clip, clip]``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.errors import ConfigError


def fold_moments(mean: Any, var: Any, count: Any, batch_mean: Any, batch_var: Any, n: int) -> tuple[Any, Any, Any]:
    """Chan, Golub & LeVeque's parallel update: ``(mean, var, count)`` of the values seen so far and a batch of ``n``
    values with ``batch_mean``, ``batch_var`` folded in. Float64 tensors and Python floats alike, with the same
    rounding (``(1 / total) * n`` is how torch evaluates ``n / total`` for a tensor ``total``)."""
    delta = batch_mean - mean
    total = count + n
    mean = mean + delta * ((1.0 / total) * n)
    var = (var * count + batch_var * n + delta * delta * (count * n / total)) / total
    return mean, var, total


class RunningMeanStd(torch.nn.Module):
    """Mean and variance of every value seen so far, per element of ``shape`` (buffers: mean, var, count)."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(float(epsilon), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Fold in a batch ``[N, *shape]`` (Chan, Golub & LeVeque's parallel variance)."""
        x = x.detach().to(torch.float64).reshape(-1, *self.mean.shape)
        n = x.shape[0]
        if n == 0:
            return
        mean, var, count = fold_moments(self.mean, self.var, self.count, x.mean(0), x.var(0, unbiased=False), n)
        self.mean.copy_(mean)
        self.var.copy_(var)
        self.count.copy_(count)


class ObservationNormalizer(Component):
    """Box observations -> ``clip((obs - mean) / sqrt(var + eps), -clip, clip)`` as float32, with running
    statistics the learner updates (:meth:`update`); acting and learning only read them."""

    def __init__(self, clip: float = 10.0, epsilon: float = 1e-8, name: str = "obs_normalizer") -> None:
        super().__init__(name)
        self.clip, self.epsilon = float(clip), float(epsilon)

    def _build(self, obs: sp.Space) -> None:
        if not isinstance(obs, sp.Box) or np.dtype(obs.dtype).kind != "f":
            raise ConfigError(f"algo.normalize_obs=true needs a float Box observation space, got {sp.describe(obs)}; "
                              f"set algo.normalize_obs=false for this env.")
        self.stats = RunningMeanStd(tuple(obs.shape))
        self.output_spaces["forward"] = sp.Box(-self.clip, self.clip, obs.shape, np.float32)

    @api
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        std = torch.sqrt(self.stats.var + self.epsilon)
        out = (obs.to(torch.float64) - self.stats.mean) / std
        return out.clamp(-self.clip, self.clip).to(torch.float32)

    @torch.no_grad()
    def update(self, obs: torch.Tensor) -> None:
        """Fold raw observations ``[N, *shape]`` into the statistics."""
        self.stats.update(obs)


class RewardScaler(Component):
    """Rewards ``[T, B]`` of a time-major rollout -> ``clip(r / sqrt(var(G) + eps), -clip, clip)`` where ``G`` is
    the running discounted return of each env copy (column) and ``var(G)`` its running variance.

    The per-copy returns carry over from one rollout to the next (columns are env copies in worker order, the same
    every rollout), so they are state: kept in the module's extra state, saved and restored with it."""

    def __init__(self, gamma: float, clip: float = 10.0, epsilon: float = 1e-8, name: str = "reward_scaler") -> None:
        super().__init__(name)
        self.gamma, self.clip, self.epsilon = float(gamma), float(clip), float(epsilon)
        self.stats = RunningMeanStd(())
        self.returns: torch.Tensor | None = None  # [B] float64, created at the first rollout

    def _build(self, rewards: sp.Space | None = None) -> None:
        pass

    @api
    @torch.no_grad()
    def scale(self, rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
        """Scaled rewards ``[T, B]`` (float32); updates the statistics and the per-copy returns step by step."""
        T, B = rewards.shape
        if self.returns is None or self.returns.shape[0] != B:
            self.returns = torch.zeros(B, dtype=torch.float64)
        r = rewards.detach().cpu().to(torch.float64).numpy()
        done = (terminated.bool() | truncated.bool()).cpu().numpy()
        scaled = np.empty_like(r)
        # Each step's returns are folded into the statistics as RunningMeanStd.update does (fold_moments), on Python
        # floats instead of 0-d tensors: the same numbers (tested bit for bit) at a fraction of the cost (per step,
        # a handful of 0-d tensor ops was a tenth of PPO MuJoCo's wall time). One copy's batch mean is its
        # return and its variance 0; several copies' come from torch's own reductions, as update() computes them.
        returns = self.returns.numpy().copy()
        mean, var, count = float(self.stats.mean), float(self.stats.var), float(self.stats.count)
        for t in range(T):
            returns = returns * self.gamma + r[t]
            if B == 1:
                batch_mean, batch_var = float(returns[0]), 0.0
            else:
                x = torch.from_numpy(returns)
                batch_mean, batch_var = float(x.mean(0)), float(x.var(0, unbiased=False))
            mean, var, count = fold_moments(mean, var, count, batch_mean, batch_var, B)
            scaled[t] = r[t] / math.sqrt(var + self.epsilon)
            returns[done[t]] = 0.0
        self.returns = torch.from_numpy(returns)
        self.stats.mean.fill_(mean)
        self.stats.var.fill_(var)
        self.stats.count.fill_(count)
        return torch.from_numpy(scaled).clamp(-self.clip, self.clip).to(torch.float32).to(rewards.device)

    def get_extra_state(self) -> Any:
        return {"returns": None if self.returns is None else self.returns.clone()}

    def set_extra_state(self, state: Any) -> None:
        returns = state.get("returns") if isinstance(state, dict) else None
        self.returns = None if returns is None else torch.as_tensor(returns, dtype=torch.float64).clone()
