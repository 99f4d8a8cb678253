"""Several epochs of shuffled minibatch gradient steps over one batch as an optimizer module (:class:`MultiStep`:
TRPO's ``algo.policy_update=multi_step``, VPG)."""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Iterable, Iterator

import torch
from torch import nn

from rlrun.components.base import Component, api
from rlrun.components.optimizers.gradient_step import GradientStep
from rlrun.ops.time_major import map_nest


def _batch_size(batch: Any) -> int:
    """Leading dimension shared by every tensor of a (nested) dict batch."""
    sizes: dict[str, int] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}/{k}" if path else str(k))
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                walk(v, f"{path}/{i}" if path else str(i))
        elif isinstance(value, torch.Tensor):
            if value.dim() == 0:
                raise ValueError(f"batch entry '{path}' is a scalar; every entry needs a leading batch dimension")
            sizes[path] = int(value.shape[0])
        else:
            raise TypeError(f"batch entry '{path}' is a {type(value).__name__}, not a tensor")

    walk(batch, "")
    if not sizes:
        raise ValueError("the batch holds no tensors")
    if len(set(sizes.values())) > 1:
        raise ValueError("batch entries disagree on the leading (batch) dimension: "
                         + ", ".join(f"{k}: {n}" for k, n in sizes.items()))
    return next(iter(sizes.values()))


def _scalar(value: Any) -> float | None:
    """``value`` as a float if it is a number or a one-element tensor, else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach())
    return None


def minibatches(batch: Any, minibatch_size: int | None, generator: torch.Generator) -> Iterator[Any]:
    """One epoch over ``batch`` (a nest of tensors sharing a leading dimension ``N``): a fresh permutation of the
    ``N`` items drawn from ``generator``, cut into minibatches of ``minibatch_size`` items (the last may be smaller;
    None: the whole batch, permuted), so every item is used exactly once."""
    n = _batch_size(batch)
    for idx in torch.randperm(n, generator=generator).split(minibatch_size or n):
        yield map_nest(lambda t, idx=idx: t.index_select(0, idx.to(t.device)), batch)


def mean_scalars(infos: list[dict]) -> dict[str, Any]:
    """The mean over the gradient steps' infos of every scalar entry (numbers and one-element tensors; others are
    left out), as 0-d tensors, plus ``"gradient_steps"``: the number of infos."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for info in infos:
        for key, value in info.items():
            x = _scalar(value)
            if x is not None:
                sums[key] = sums.get(key, 0.0) + x
                counts[key] = counts.get(key, 0) + 1
    out: dict[str, Any] = {k: torch.tensor(sums[k] / counts[k]) for k in sums}
    out["gradient_steps"] = len(infos)
    return out


class MultiStep(Component):
    """Several epochs of gradient steps over shuffled minibatches of one batch (TensorForce's ``MultiStep`` +
    ``SubsamplingStep``; the minibatches of :func:`rlrun.components.optimizers.minibatches`).

    ``step(loss_fn, batch)``: ``batch`` is a (nested) dict of tensors sharing a leading dimension ``N``; each epoch
    draws a fresh permutation of the ``N`` items and cuts it into ``ceil(N / minibatch_size)`` minibatches (the last
    may be smaller), and for each calls ``optimizer.step(lambda: loss_fn(minibatch))`` — so every item is used
    exactly once per epoch, and there are ``num_epochs * ceil(N / minibatch_size)`` gradient steps in all.
    """

    step_inputs: ClassVar[tuple[str, ...]] = ("loss_fn", "batch")
    """What ``step`` takes, declared (as by every optimizer module) so an owner can drive a module chosen by name
    from config: ``loss_fn(minibatch) -> (loss, info)`` and the batch it cuts into minibatches."""

    def __init__(self, optimizer: GradientStep, num_epochs: int = 4, minibatch_size: int | None = 64, seed: int = 0,
                 name: str | None = None) -> None:
        """``optimizer``: the gradient step applied to each minibatch (a sub-component); ``num_epochs``: passes over
        the batch per call (CleanRL PPO: 4 for Atari, 10 for MuJoCo); ``minibatch_size``: items per gradient step
        (None: the whole batch, one step per epoch);
        ``seed``: seed of the shuffling generator (its state is saved with the component)."""
        super().__init__(name or "multi_step")
        if int(num_epochs) < 1:
            raise ValueError(f"num_epochs must be >= 1, got {num_epochs}")
        if minibatch_size is not None and int(minibatch_size) < 1:
            raise ValueError(f"minibatch_size must be >= 1 (or None: the whole batch), got {minibatch_size}")
        self.optimizer = optimizer
        self.num_epochs = int(num_epochs)
        self.minibatch_size = None if minibatch_size is None else int(minibatch_size)
        self.generator = torch.Generator().manual_seed(int(seed))

    def _build(self, batch: Any = None) -> None:
        """Optionally given the space of the batch (a Dict space); nothing to create."""

    def attach(self, parameters: Iterable[nn.Parameter]) -> "MultiStep":
        """Set the parameters the wrapped gradient step optimises."""
        self.optimizer.attach(parameters)
        return self

    @api
    def step(self, loss_fn: Callable[[Any], tuple[torch.Tensor, dict]], batch: Any) -> dict:
        """Run ``num_epochs`` epochs of minibatch steps; ``loss_fn(minibatch) -> (loss, info)``.

        Returns the mean over all gradient steps of every scalar entry of the steps' infos (``"loss"`` included;
        non-scalar entries are left out), plus ``"gradient_steps"``, the number of steps taken.
        """
        infos = []
        for _ in range(self.num_epochs):
            for minibatch in minibatches(batch, self.minibatch_size, self.generator):
                infos.append(self.optimizer.step(lambda mb=minibatch: loss_fn(mb)))
        return mean_scalars(infos)

    def get_extra_state(self) -> Any:
        return {"generator": self.generator.get_state()}

    def set_extra_state(self, state: Any) -> None:
        if state.get("generator") is not None:
            self.generator.set_state(state["generator"])
