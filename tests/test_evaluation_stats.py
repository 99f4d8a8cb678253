"""The evaluation statistics on worked examples, and the bootstrap against a naive loop at a fixed seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlrun import evaluation_stats as es


def test_iqm_drops_a_quarter_from_each_end() -> None:
    # 8 scores: drop 2 lowest (1, 2) and 2 highest (7, 8): mean(3, 4, 5, 6) = 4.5
    assert es.iqm(np.array([8, 1, 7, 2, 6, 3, 5, 4])) == pytest.approx(4.5)
    # 5 scores: drop floor(5/4) = 1 each end: mean(2, 3, 10) = 5, where the mean is 23.2
    assert es.iqm(np.array([10, 1, 3, 2, 100])) == pytest.approx(5.0)
    # under 4 scores nothing is dropped
    assert es.iqm(np.array([1.0, 2.0, 9.0])) == pytest.approx(4.0)
    # along an axis: one IQM per row
    np.testing.assert_allclose(es.iqm(np.array([[8, 1, 7, 2, 6, 3, 5, 4], [1, 1, 1, 1, 9, 9, 9, 9]])), [4.5, 5.0])


def test_iqm_matches_scipy_trim_mean() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for n in (4, 5, 7, 10, 13):
        x = rng.normal(size=n)
        assert es.iqm(x) == pytest.approx(stats.trim_mean(x, 0.25))


def _naive_quantile(values: list[float], q: float) -> float:
    """numpy's default (linear) quantile, written out."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    lo = math.floor(position)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (position - lo) * (ordered[hi] - ordered[lo])


def _naive_iqm(values: list[float]) -> float:
    ordered = sorted(values)
    cut = len(ordered) // 4
    kept = ordered[cut:len(ordered) - cut]
    return sum(kept) / len(kept)


def test_stratified_bootstrap_matches_a_naive_loop_at_a_fixed_seed() -> None:
    tasks = [np.array([1.0, 5.0, 2.0, 8.0, 3.0]), np.array([10.0, 12.0, 11.0])]
    reps, seed = 300, 7
    got = es.bootstrap_ci(tasks, es.iqm, reps=reps, seed=seed)
    # The reference: one uniform per resampled run, replicate by replicate, task by task.
    u = np.random.default_rng(seed).random((reps, 8))
    replicates = []
    for r in range(reps):
        sample, column = [], 0
        for t in tasks:
            for _ in range(len(t)):
                sample.append(float(t[int(u[r, column] * len(t))]))
                column += 1
        replicates.append(_naive_iqm(sample))
    # point: IQM of all 8 scores pooled: sorted 1 2 3 5 8 10 11 12, drop 2 each end: mean(3, 5, 8, 10) = 6.5
    assert got.value == pytest.approx(6.5)
    assert got.low == pytest.approx(_naive_quantile(replicates, 0.025))
    assert got.high == pytest.approx(_naive_quantile(replicates, 0.975))
    assert got.low < got.value < got.high
    # the same seed gives the same interval; another seed another one
    assert es.bootstrap_ci(tasks, es.iqm, reps=reps, seed=seed) == got
    assert es.bootstrap_ci(tasks, es.iqm, reps=reps, seed=seed + 1) != got


def test_bootstrap_intervals_worked_by_hand() -> None:
    # equal scores: every replicate is the same, the interval is the point
    assert es.bootstrap_ci(np.array([3.0, 3.0, 3.0]), es.mean) == es.Interval(3.0, 3.0, 3.0)
    # two scores 0 and 1: a replicate's mean is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4; the 2.5% and 97.5%
    # quantiles of 2000 replicates are 0 and 1
    got = es.bootstrap_ci(np.array([0.0, 1.0]), es.mean)
    assert (got.value, got.low, got.high) == (0.5, 0.0, 1.0)
    # a (runs, tasks) matrix is rliable's layout: columns are tasks
    matrix = np.array([[1.0, 10.0], [2.0, 20.0]])
    assert es.bootstrap_ci(matrix, es.mean) == es.bootstrap_ci([matrix[:, 0], matrix[:, 1]], es.mean)


def test_probability_of_improvement_worked_by_hand() -> None:
    # X = 1 2 3 against Y = 2 2 0: pairs won 1 (1>0) + 2 (2>0, two ties 2=2 at half) + 3 (3>2, 3>2, 3>0) = 6 of 9
    x, y = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 0.0])
    assert es.probability_of_improvement_point([x], [y]) == pytest.approx(6 / 9)
    assert es.probability_of_improvement_point([y], [x]) == pytest.approx(3 / 9)
    # two tasks weigh the same: (6/9 + 1) / 2
    assert es.probability_of_improvement([x, np.array([5.0])], [y, np.array([1.0])]).value == pytest.approx(5 / 6)
    # X always above Y: every replicate says 1
    assert es.probability_of_improvement(np.array([1.0, 1.0]), np.array([0.0, 0.0])) == es.Interval(1.0, 1.0, 1.0)


def test_probability_of_improvement_interval_matches_a_naive_loop() -> None:
    x, y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 2.5, 0.0])
    reps, seed = 200, 11
    got = es.probability_of_improvement(x, y, reps=reps, seed=seed)
    u = np.random.default_rng(seed).random((reps, 7))  # X's 4 runs, then Y's 3
    replicates = []
    for r in range(reps):
        xs = [x[int(u[r, j] * 4)] for j in range(4)]
        ys = [y[int(u[r, 4 + j] * 3)] for j in range(3)]
        wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in xs for b in ys)
        replicates.append(wins / 12)
    assert got.low == pytest.approx(_naive_quantile(replicates, 0.025))
    assert got.high == pytest.approx(_naive_quantile(replicates, 0.975))


def test_performance_profile_worked_by_hand() -> None:
    tasks = [np.array([0.0, 1.0, 2.0, 3.0]), np.array([10.0, 20.0])]
    # task 1 above 0.5, 2.5, 15: 3/4, 1/4, 0; task 2: 1, 1, 1/2; averaged over the tasks
    np.testing.assert_allclose(es.performance_profile(tasks, np.array([0.5, 2.5, 15.0])), [0.875, 0.625, 0.25])
    low, high = es.performance_profile_band(tasks, np.array([0.5, 2.5, 15.0]))
    assert np.all(low <= [0.875, 0.625, 0.25]) and np.all(high >= [0.875, 0.625, 0.25])
    assert np.all(low >= 0) and np.all(high <= 1)


def test_curve_band_resamples_whole_curves() -> None:
    curves = np.array([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0]])  # two runs, three points
    value, low, high = es.curve_band(curves, es.mean)
    np.testing.assert_allclose(value, [0.0, 2.0, 3.0])
    # a replicate is run 0 twice, run 1 twice, or one of each: at point 1 its mean is 1, 3 or 2
    np.testing.assert_allclose(low, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(high, [0.0, 3.0, 4.0])


def test_seeds_to_resolve_worked_by_hand() -> None:
    # d = 1, pooled variance 2: n = 2 * (1.96 + 0.8416)^2 * 2 / 1 = 31.4 -> 32
    assert es.seeds_to_resolve(np.array([0.0, 2.0]), np.array([1.0, 3.0])) == 32
    # a difference twice as large needs a quarter of the seeds
    assert es.seeds_to_resolve(np.array([0.0, 2.0]), np.array([2.0, 4.0])) == 8
    assert es.seeds_to_resolve(np.array([1.0]), np.array([2.0, 3.0])) is None  # one run: no spread to estimate
    assert es.seeds_to_resolve(np.array([1.0, 2.0]), np.array([1.0, 2.0])) is None  # no difference


def test_bad_scores_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one score"):
        es.bootstrap_ci([np.array([1.0]), np.array([])])
    with pytest.raises(ValueError, match="NaN"):
        es.bootstrap_ci(np.array([1.0, np.nan]))


def test_matches_rliable_where_installed() -> None:
    """rliable's IQM and probability of improvement agree on the points (its intervals use another generator)."""
    metrics = pytest.importorskip("rliable.metrics")
    scores = np.random.default_rng(0).normal(size=(6, 3))
    other = scores + 0.3
    assert es.iqm(scores.reshape(-1)) == pytest.approx(metrics.aggregate_iqm(scores))
    assert es.probability_of_improvement(other, scores).value == pytest.approx(
        metrics.probability_of_improvement(other, scores))
