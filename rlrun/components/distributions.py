"""Action distributions: small classes over distribution parameters (the output of a policy head).

A distribution holds tensors with any number of leading batch ranks and offers ``sample()``, ``deterministic()``
(the mode), ``log_prob(actions)``, ``entropy()`` and ``kl(other)``; log-probabilities, entropies and KLs have the
batch shape (the event dimensions of a Gaussian are summed). ``make_distribution(action_space, params)`` picks the
class from the action space: Discrete -> :class:`Categorical` (params: logits), Box -> :class:`DiagGaussian`
(params: ``(mean, log_std)``). They are plain objects, not ``nn.Module``s: they have no parameters of their own,
gradients flow through them to the head that made ``params``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from rlrun import spaces as sp

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class Categorical:
    """Categorical distribution over ``A`` actions from unnormalised ``logits`` ``[*B, A]``.

    ``start`` is the first action's value (a gymnasium ``Discrete(n, start)``): samples and modes are
    ``start + index`` (int64) and ``log_prob`` takes such values. Logits of ``-inf`` mask an action out.
    """

    def __init__(self, logits: torch.Tensor, start: int = 0) -> None:
        """``logits``: unnormalised log-probabilities ``[*B, A]``; ``start``: value of action index 0."""
        self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)  # normalised: log p
        self.start = int(start)

    @property
    def probs(self) -> torch.Tensor:
        return self.logits.exp()

    @property
    def batch_shape(self) -> torch.Size:
        return self.logits.shape[:-1]

    def sample(self) -> torch.Tensor:
        """One action per batch item, ``[*B]`` int64 (not differentiable)."""
        with torch.no_grad():
            probs = self.probs.reshape(-1, self.logits.shape[-1])
            index = torch.multinomial(probs, 1, replacement=True).reshape(self.batch_shape)
        return index + self.start if self.start else index

    def deterministic(self) -> torch.Tensor:
        """The most probable action (the mode), ``[*B]`` int64."""
        index = self.logits.argmax(dim=-1)
        return index + self.start if self.start else index

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """``log p(a)`` for actions ``[*B]`` (integer values, ``start`` included)."""
        index = actions.long() - self.start if self.start else actions.long()
        return self.logits.gather(-1, index.unsqueeze(-1)).squeeze(-1)

    def _safe_logits(self) -> torch.Tensor:
        # -inf (masked) log-probabilities would give 0 * -inf = nan; p = 0 there, so any finite value will do.
        return self.logits.clamp(min=torch.finfo(self.logits.dtype).min)

    def entropy(self) -> torch.Tensor:
        """``H = -sum_a p(a) log p(a)``, ``[*B]``."""
        return -(self.probs * self._safe_logits()).sum(dim=-1)

    def kl(self, other: "Categorical") -> torch.Tensor:
        """``KL(self || other) = sum_a p(a) (log p(a) - log q(a))``, ``[*B]`` (inf where q(a) = 0 < p(a))."""
        p = self.probs
        terms = p * (self._safe_logits() - other._safe_logits())
        terms = torch.where(p > 0, terms, torch.zeros_like(terms))
        terms = torch.where((other.logits == -math.inf) & (p > 0), torch.full_like(terms, math.inf), terms)
        return terms.sum(dim=-1)


class DiagGaussian:
    """Diagonal Gaussian over actions with event shape ``mean.shape[-event_rank:]``.

    ``log_prob``, ``entropy`` and ``kl`` sum over the ``event_rank`` trailing dimensions. Samples are not squashed
    or clipped: clip to the action space's bounds where the action is sent to the environment.
    """

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor, event_rank: int = 1) -> None:
        """``mean``: ``[*B, *S]``; ``log_std``: natural log of the standard deviation, broadcastable to ``mean``;
        ``event_rank``: number of trailing dimensions of one action (``len(S)``)."""
        self.mean = mean
        self.log_std = log_std.expand_as(mean)
        self.event_dims = tuple(range(-int(event_rank), 0))

    @property
    def std(self) -> torch.Tensor:
        return self.log_std.exp()

    def _sum_event(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=self.event_dims) if self.event_dims else x

    def sample(self) -> torch.Tensor:
        """``mean + std * eps``, ``eps ~ N(0, I)``, ``[*B, *S]`` (not differentiable; see ``rsample``)."""
        with torch.no_grad():
            return self.rsample()

    def rsample(self) -> torch.Tensor:
        """A reparameterised sample: differentiable with respect to mean and log-std."""
        return self.mean + self.std * torch.randn_like(self.mean)

    def deterministic(self) -> torch.Tensor:
        """The mode: the mean."""
        return self.mean

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """``sum_i [-(a_i - mu_i)^2 / (2 sigma_i^2) - log sigma_i - log(2 pi) / 2]``, ``[*B]``."""
        z = (actions.to(self.mean.dtype) - self.mean) * torch.exp(-self.log_std)
        return self._sum_event(-0.5 * z.pow(2) - self.log_std - _HALF_LOG_2PI)

    def entropy(self) -> torch.Tensor:
        """``sum_i [1/2 + log(2 pi)/2 + log sigma_i]``, ``[*B]``."""
        return self._sum_event(self.log_std + (0.5 + _HALF_LOG_2PI))

    def kl(self, other: "DiagGaussian") -> torch.Tensor:
        """``KL(p || q) = sum_i [log(s_q/s_p) + (s_p^2 + (m_p - m_q)^2) / (2 s_q^2) - 1/2]``, ``[*B]``."""
        var_ratio = torch.exp(2.0 * (self.log_std - other.log_std))
        mean_term = ((self.mean - other.mean) * torch.exp(-other.log_std)).pow(2)
        return self._sum_event(other.log_std - self.log_std + 0.5 * (var_ratio + mean_term) - 0.5)


def make_distribution(action_space: sp.Space, params: Any) -> Categorical | DiagGaussian:
    """The action distribution for ``action_space`` with ``params`` from a policy head.

    Discrete(n, start) -> ``Categorical(logits=params, start)``; Box of shape S -> ``DiagGaussian(*params,
    event_rank=len(S))`` with ``params = (mean, log_std)``. Other spaces raise ``SpaceError`` naming the space.
    """
    if isinstance(action_space, sp.Discrete):
        return Categorical(params, start=int(action_space.start))
    if isinstance(action_space, sp.Box):
        if not isinstance(params, (tuple, list)) or len(params) != 2:
            raise sp.SpaceError(f"a {sp.describe(action_space)} action space needs params (mean, log_std), got "
                                f"{type(params).__name__}")
        mean, log_std = params
        return DiagGaussian(mean, log_std, event_rank=len(action_space.shape))
    raise sp.SpaceError(f"no action distribution for {sp.describe(action_space)}: supported are Discrete and Box")
