"""OpenAI-ES (Salimans et al. 2017): a gradient-free step that drives any loss callable
(:class:`EvolutionStrategies`), with its rank transform (:func:`centered_ranks`)."""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Iterable

import torch
from torch import nn

from rlrun.components.base import Component, api
from rlrun.components.optimizers.flat_params import flat, set_flat


def centered_ranks(x: torch.Tensor) -> torch.Tensor:
    """Ranks of ``x`` mapped linearly onto ``[-0.5, 0.5]`` (OpenAI-ES's fitness shaping; ties get distinct ranks
    in index order). A single value maps to 0."""
    n = x.numel()
    if n < 2:
        return torch.zeros_like(x, dtype=torch.float32)
    ranks = torch.empty(n, dtype=torch.float32)
    ranks[torch.argsort(x.reshape(-1), stable=True)] = torch.arange(n, dtype=torch.float32)
    return (ranks / (n - 1) - 0.5).reshape(x.shape)


class EvolutionStrategies(Component):
    """OpenAI evolution strategies (Salimans et al. 2017, "Evolution Strategies as a Scalable Alternative to RL",
    Algorithm 1 with antithetic sampling and fitness shaping), minimising any loss callable without gradients.

    Per step, with ``theta`` the flat parameters and ``P = population // 2`` noise vectors ``eps_i ~ N(0, I)``:
    evaluate ``F+_i = -loss(theta + sigma * eps_i)`` and ``F-_i = -loss(theta - sigma * eps_i)`` (antithetic,
    "mirrored" pairs), replace the ``2P`` fitnesses by their centred ranks ``R`` in ``[-0.5, 0.5]``, and take
    ``theta += lr / (2 P sigma) * sum_i (R+_i - R-_i) eps_i`` (plain gradient ascent on the smoothed fitness).
    Rank shaping makes the step invariant to monotone transformations of the loss.
    """

    step_inputs: ClassVar[tuple[str, ...]] = ("loss_fn",)
    """What ``step`` takes, declared (as by every optimizer module) so an owner can drive a module chosen by name
    from config: ``loss_fn() -> (loss, info)``, called without gradients."""

    def __init__(self, population: int = 32, sigma: float = 0.02, lr: float = 0.01, seed: int = 0,
                 name: str | None = None) -> None:
        """``population``: perturbed parameter vectors evaluated per step (even: ``population // 2`` antithetic
        pairs), i.e. ``loss_fn`` calls per step besides the one at the centre; ``sigma``: standard deviation of the
        parameter noise (in parameter units; paper: 0.02); ``lr``: step size of the update (paper: 0.01 with Adam;
        here plain SGD); ``seed``: seed of the noise generator (its state is saved with the component)."""
        super().__init__(name or "evolution_strategies")
        if int(population) < 2 or int(population) % 2:
            raise ValueError(f"population must be an even number >= 2 (antithetic pairs), got {population}")
        if sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        self.population, self.sigma, self.lr = int(population), float(sigma), float(lr)
        self.generator = torch.Generator().manual_seed(int(seed))
        self._params: list[nn.Parameter] = []

    def attach(self, parameters: Iterable[nn.Parameter]) -> "EvolutionStrategies":
        """Set the parameters the search moves (those with ``requires_grad``; no gradients are computed)."""
        self._params = [p for p in parameters if p.requires_grad]
        return self

    def _loss(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]]) -> tuple[float, dict]:
        loss, info = loss_fn()
        return float(loss), info

    @api
    @torch.no_grad()
    def step(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]]) -> dict:
        """One ES update; ``loss_fn() -> (loss, info)`` is evaluated ``population + 1`` times, without gradients.
        Returns ``loss_fn``'s info at the centre with ``"loss"`` (before the step), ``"population/loss_mean"``,
        ``"population/loss_min"``."""
        if not self._params:
            raise RuntimeError(f"{self.name}: attach() the parameters before step()")
        theta = flat(p.detach() for p in self._params).clone()
        loss, info = self._loss(loss_fn)
        pairs = self.population // 2
        noise = torch.randn((pairs, theta.numel()), generator=self.generator, dtype=torch.float32)
        noise = noise.to(device=theta.device, dtype=theta.dtype)
        losses = torch.empty(pairs, 2)
        for i in range(pairs):
            for j, sign in enumerate((1.0, -1.0)):
                set_flat(self._params, theta + sign * self.sigma * noise[i])
                losses[i, j] = self._loss(loss_fn)[0]
        ranks = centered_ranks(-losses)  # fitness = -loss
        weights = (ranks[:, 0] - ranks[:, 1]).to(device=theta.device, dtype=theta.dtype)
        ascent = weights @ noise / (2 * pairs * self.sigma)
        set_flat(self._params, theta + self.lr * ascent)
        info = {k: (v.detach() if isinstance(v, torch.Tensor) else v) for k, v in info.items()}
        info.update({"loss": torch.tensor(loss), "population/loss_mean": losses.mean(),
                     "population/loss_min": losses.min()})
        return info

    def get_extra_state(self) -> Any:
        return {"generator": self.generator.get_state()}

    def set_extra_state(self, state: Any) -> None:
        if state.get("generator") is not None:
            self.generator.set_state(state["generator"])
