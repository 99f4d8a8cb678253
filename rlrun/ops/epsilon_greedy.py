"""Epsilon-greedy action selection over action values, shared by DQN's ``EpsilonGreedy`` and Ape-X's actor.

One definition of the random stream, so a seed gives the same actions wherever it acts: per call, torch's global
generator draws a uniform action per row (``torch.randint``), then a uniform number in [0, 1) per row
(``torch.rand``); a row explores where that number is below its epsilon. Both are drawn whether or not any row
explores, so a run's draws do not depend on the Q-values.

On the CPU, for float32/float64 values, the argmax, the comparison and the selection run in numpy on the tensors'
memory: the same actions (numpy's and torch's argmax both give the first maximal index, NaN counting as maximal; a
float32 uniform is compared with a Python epsilon in float32 by both), with three torch dispatches fewer per call;
the draws are written into tensors kept per thread and shape (``random_``/``uniform_``, what ``torch.randint`` and
``torch.rand`` run on a new tensor) and read through numpy views made once: on a small env a call runs between
two env steps, so its dispatches are a visible share of acting.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

_NUMPY_DTYPES = (torch.float32, torch.float64)
_buffers = threading.local()  # per thread: {shape: _Draws} the CPU draws are written into


class _Draws:
    """One call's draws of one shape, reused: ``torch.randint``/``torch.rand`` fill a new tensor with
    ``random_``/``uniform_``, so filling these tensors gives the same values from the same generator state, without a
    factory call's argument parsing and allocation; the numpy views of them are made once."""

    __slots__ = ("actions", "actions_np", "uniform", "uniform_np")

    def __init__(self, shape: tuple[int, ...]) -> None:
        with torch.inference_mode(False):  # normal tensors: filled in place inside inference mode and outside it
            self.actions = torch.empty(shape, dtype=torch.int64)
            self.uniform = torch.empty(shape, dtype=torch.float32)
        self.actions_np, self.uniform_np = self.actions.numpy(), self.uniform.numpy()


def _draws(shape: tuple[int, ...]) -> _Draws:
    cache = getattr(_buffers, "by_shape", None)
    if cache is None:
        cache = _buffers.by_shape = {}
    draws = cache.get(shape)
    if draws is None:
        if len(cache) >= 16:  # a caller whose batch shape keeps changing: keep the cache small
            cache.clear()
        draws = cache[shape] = _Draws(shape)
    return draws


def epsilon_greedy(q: torch.Tensor, num_actions: int, epsilon: float | torch.Tensor) -> torch.Tensor:
    """Actions ``q.shape[:-1]`` (int64): ``argmax q`` per row, or with probability ``epsilon`` (a float, or a tensor
    of one per row) a uniform action in ``[0, num_actions)``."""
    if not q.is_cpu or q.dtype not in _NUMPY_DTYPES:
        greedy = q.argmax(dim=-1)
        random = torch.randint(0, num_actions, greedy.shape, device=q.device)
        eps = epsilon.to(q.device) if isinstance(epsilon, torch.Tensor) else epsilon
        return torch.where(torch.rand(greedy.shape, device=q.device) < eps, random, greedy)
    greedy = np.asarray((q.detach() if q.requires_grad else q).numpy().argmax(axis=-1))
    draws = _draws(greedy.shape)
    draws.actions.random_(0, num_actions)
    draws.uniform.uniform_()
    pick = draws.uniform_np < (epsilon.numpy() if isinstance(epsilon, torch.Tensor) else epsilon)
    if np.count_nonzero(pick):
        greedy = np.where(pick, draws.actions_np, greedy)
    return torch.from_numpy(greedy)
