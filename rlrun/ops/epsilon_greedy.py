"""Epsilon-greedy action selection over action values, shared by DQN's ``EpsilonGreedy`` and Ape-X's actor.

One definition of the random stream, so a seed gives the same actions wherever it acts: per call, torch's global
generator draws a uniform action per row (``torch.randint``), then a uniform number in [0, 1) per row
(``torch.rand``); a row explores where that number is below its epsilon. Both are drawn whether or not any row
explores, so a run's draws do not depend on the Q-values.

On the CPU, for float32/float64 values, the argmax, the comparison and the selection run in numpy on the tensors'
memory: the same actions (numpy's and torch's argmax both give the first maximal index, NaN counting as maximal; a
float32 uniform is compared with a Python epsilon in float32 by both), with three torch dispatches fewer per call.
Acting on a small env, where a call runs between two env steps, that is 0.02-0.03 of the serial limit on CartPole x8
(``benchmarks/sampling_limit.py``; docs/results/performance.md, "Acting on cheap envs").
"""

from __future__ import annotations

import threading

import numpy as np
import torch

_NUMPY_DTYPES = (torch.float32, torch.float64)
_buffers = threading.local()  # per thread: {shape: (int64 tensor, float32 tensor)} the CPU draws are written into


def _draw_buffers(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """This thread's reusable tensors for one call's draws of ``shape``: ``torch.randint``/``torch.rand`` fill a new
    tensor with ``random_``/``uniform_``, so filling these gives the same values from the same generator state,
    without a factory call's argument parsing and allocation (~1.8 us of ~3 us per call, more between env steps)."""
    cache = getattr(_buffers, "by_shape", None)
    if cache is None:
        cache = _buffers.by_shape = {}
    pair = cache.get(shape)
    if pair is None:
        if len(cache) >= 16:  # a caller whose batch shape keeps changing: keep the cache small
            cache.clear()
        pair = cache[shape] = (torch.empty(shape, dtype=torch.int64), torch.empty(shape, dtype=torch.float32))
    return pair


def epsilon_greedy(q: torch.Tensor, num_actions: int, epsilon: float | torch.Tensor) -> torch.Tensor:
    """Actions ``q.shape[:-1]`` (int64): ``argmax q`` per row, or with probability ``epsilon`` (a float, or a tensor
    of one per row) a uniform action in ``[0, num_actions)``."""
    if q.device.type != "cpu" or q.dtype not in _NUMPY_DTYPES:
        greedy = q.argmax(dim=-1)
        random = torch.randint(0, num_actions, greedy.shape, device=q.device)
        eps = epsilon.to(q.device) if isinstance(epsilon, torch.Tensor) else epsilon
        return torch.where(torch.rand(greedy.shape, device=q.device) < eps, random, greedy)
    greedy = np.asarray(q.detach().numpy().argmax(axis=-1))
    random, uniform = _draw_buffers(greedy.shape)
    random.random_(0, num_actions)
    eps = epsilon.numpy() if isinstance(epsilon, torch.Tensor) else epsilon
    pick = uniform.uniform_().numpy() < eps
    if pick.any():
        greedy = np.where(pick, random.numpy(), greedy)
    return torch.from_numpy(greedy)
