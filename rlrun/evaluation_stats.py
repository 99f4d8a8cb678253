"""Statistics of evaluation scores over seeds (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical
Precipice"): the interquartile mean, stratified-bootstrap confidence intervals, the probability of improvement and
performance profiles. NumPy only, no torch: these summarise finished runs (``rlrun compare``, sweep summaries,
``rlrun-plot``), not learner tensors (``ops/stats.py`` holds those).

Scores come as ``tasks``: one 1-D array of per-run scores for each task (an env, or one setting's only env), so the
seed count may differ between tasks. An aggregate (IQM, mean) pools every run of every task, as rliable does on its
``(runs, tasks)`` matrix. The bootstrap is *stratified*: each replicate resamples the runs of each task with
replacement, independently of the other tasks, and draws its random numbers from ``numpy.random.default_rng(seed)``
so an interval is the same at the same seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

Tasks = Sequence[np.ndarray] | np.ndarray
Statistic = Callable[[np.ndarray], np.ndarray]  # (replicates, runs) -> (replicates,)

REPS = 2000  # bootstrap replicates: rliable's default count for its interval estimates
CONFIDENCE = 0.95
FEW_SEEDS = 5  # under this many seeds an interval is wide (Agarwal et al. 2021, section 4)


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval ``[low, high]``."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.4g} [{self.low:.4g}, {self.high:.4g}]"

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}


def as_tasks(scores: Tasks) -> list[np.ndarray]:
    """``scores`` as a list of 1-D float arrays, one per task: a 1-D array is one task, a 2-D array is
    ``(runs, tasks)`` (rliable's layout), a list holds each task's runs. Every task needs a run and no NaN."""
    if isinstance(scores, np.ndarray):
        array = np.asarray(scores, dtype=float)
        tasks = [array] if array.ndim == 1 else [array[:, t] for t in range(array.shape[1])]
    else:
        tasks = [np.asarray(t, dtype=float).reshape(-1) for t in scores]
    if not tasks or any(t.size == 0 for t in tasks):
        raise ValueError("every task needs at least one score")
    if any(np.isnan(t).any() for t in tasks):
        raise ValueError("scores hold NaN")
    return tasks


def iqm(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean along ``axis``: the mean of the scores left after dropping ``floor(n / 4)`` of the lowest
    and as many of the highest (``scipy.stats.trim_mean(scores, 0.25)``, rliable's IQM). Under 4 scores it is the
    mean."""
    ordered = np.sort(np.asarray(scores, dtype=float), axis=axis)
    n = ordered.shape[axis]
    cut = n // 4
    return np.take(ordered, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def mean(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(scores, dtype=float).mean(axis=axis)


def resample_indices(sizes: Sequence[int], reps: int, seed: int) -> list[np.ndarray]:
    """For each task of ``sizes[t]`` runs, ``(reps, sizes[t])`` run indices drawn uniformly with replacement.

    All uniforms are drawn at once, ``(reps, sum(sizes))`` from ``default_rng(seed)``, replicate by replicate and
    task by task within a replicate; index ``floor(u * n)``. A naive loop over replicates and tasks reads the same
    numbers in the same order (the tests' reference).
    """
    uniforms = np.random.default_rng(seed).random((reps, int(sum(sizes))))
    out, start = [], 0
    for n in sizes:
        out.append(np.minimum((uniforms[:, start:start + n] * n).astype(np.int64), n - 1))
        start += n
    return out


def percentile_interval(point: float, replicates: np.ndarray, confidence: float = CONFIDENCE) -> Interval:
    """The percentile bootstrap interval: the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the
    replicates (numpy's default linear interpolation)."""
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [tail, 1.0 - tail])
    return Interval(float(point), float(low), float(high))


def bootstrap_ci(scores: Tasks, statistic: Statistic = iqm, reps: int = REPS, confidence: float = CONFIDENCE,
                 seed: int = 0) -> Interval:
    """``statistic`` of every run of every task pooled, with its stratified-bootstrap percentile interval."""
    tasks = as_tasks(scores)
    point = float(statistic(np.concatenate(tasks)[None, :])[0])
    picks = resample_indices([t.size for t in tasks], reps, seed)
    resampled = np.concatenate([t[i] for t, i in zip(tasks, picks, strict=True)], axis=1)
    return percentile_interval(point, statistic(resampled), confidence)


def probability_of_improvement_point(x: Sequence[np.ndarray], y: Sequence[np.ndarray]) -> float:
    """P(X > Y): for each task, the chance that a run of X scores above a run of Y (ties count half: the
    Mann-Whitney U statistic over ``n_x * n_y``), averaged over tasks."""
    per_task = []
    for xt, yt in zip(x, y, strict=True):
        greater = (xt[:, None] > yt[None, :]).mean()
        ties = (xt[:, None] == yt[None, :]).mean()
        per_task.append(greater + 0.5 * ties)
    return float(np.mean(per_task))


def probability_of_improvement(x: Tasks, y: Tasks, reps: int = REPS, confidence: float = CONFIDENCE,
                               seed: int = 0) -> Interval:
    """P(X > Y) with its interval: each replicate resamples X's and Y's runs of each task independently (the
    uniforms of X's tasks first, then Y's, from one ``default_rng(seed)`` draw)."""
    xs, ys = as_tasks(x), as_tasks(y)
    if len(xs) != len(ys):
        raise ValueError(f"X has {len(xs)} tasks and Y {len(ys)}: compare on the same tasks")
    point = probability_of_improvement_point(xs, ys)
    picks = resample_indices([t.size for t in xs] + [t.size for t in ys], reps, seed)
    total = np.zeros(reps)
    for xt, yt, ix, iy in zip(xs, ys, picks[:len(xs)], picks[len(xs):], strict=True):
        a, b = xt[ix][:, :, None], yt[iy][:, None, :]  # (reps, n_x, 1), (reps, 1, n_y)
        total += (a > b).mean(axis=(1, 2)) + 0.5 * (a == b).mean(axis=(1, 2))
    return percentile_interval(point, total / len(xs), confidence)


def performance_profile(scores: Tasks, thresholds: np.ndarray) -> np.ndarray:
    """The score distribution: for each threshold tau, the fraction of runs scoring above tau, averaged over tasks
    (each task weighs the same whatever its seed count)."""
    tasks = as_tasks(scores)
    taus = np.asarray(thresholds, dtype=float)
    return np.mean([(t[None, :] > taus[:, None]).mean(axis=1) for t in tasks], axis=0)


def performance_profile_band(scores: Tasks, thresholds: np.ndarray, reps: int = REPS,
                             confidence: float = CONFIDENCE, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The stratified-bootstrap percentile band ``(low, high)`` of :func:`performance_profile`."""
    tasks = as_tasks(scores)
    taus = np.asarray(thresholds, dtype=float)
    picks = resample_indices([t.size for t in tasks], reps, seed)
    curves = np.mean([(t[i][:, :, None] > taus[None, None, :]).mean(axis=1)
                      for t, i in zip(tasks, picks, strict=True)], axis=0)  # (reps, thresholds)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(curves, [tail, 1.0 - tail], axis=0)
    return low, high


def curve_band(curves: np.ndarray, statistic: Statistic = iqm, reps: int = REPS, confidence: float = CONFIDENCE,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(value, low, high)`` at each point of learning curves ``(runs, points)`` already on a common x grid:
    the statistic over runs and its bootstrap band (the same resampled runs at every point, so a band is the
    spread of whole curves)."""
    curves = np.asarray(curves, dtype=float)
    value = statistic(curves.T)  # (points,)
    (picks,) = resample_indices([curves.shape[0]], reps, seed)
    replicates = statistic(np.moveaxis(curves[picks], 1, 2))  # (reps, points, runs) -> (reps, points)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [tail, 1.0 - tail], axis=0)
    return value, low, high


# Two-sided 5% test at 80% power under a normal approximation: (z_0.975 + z_0.8)^2.
_Z_SQUARED = (1.959964 + 0.841621) ** 2


def seeds_to_resolve(x: np.ndarray, y: np.ndarray) -> int | None:
    """About how many seeds per side a two-sided 5% test of the difference of means would need to detect the
    observed difference with 80% power: ``n = 2 (z_0.975 + z_0.8)^2 s^2 / d^2`` with ``d`` the difference of the
    sample means and ``s^2`` the pooled sample variance (ddof=1). None where it cannot be estimated (under 2 runs
    a side, no difference or no spread)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 2 or y.size < 2:
        return None
    d = float(y.mean() - x.mean())
    pooled = ((x.size - 1) * x.var(ddof=1) + (y.size - 1) * y.var(ddof=1)) / (x.size + y.size - 2)
    if d == 0.0 or pooled == 0.0:
        return None
    return int(np.ceil(2.0 * _Z_SQUARED * pooled / d ** 2))
