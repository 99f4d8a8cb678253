"""benchmarks/executor_agreement.py: its exact Mann-Whitney test."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("a, b, p", [
    ([1, 2], [3, 4], 2 / 6),          # rank sums 3 vs the mean 5: splits {1,2} and {3,4} are as extreme: 2 of 6
    ([1, 2, 3], [4, 5, 6], 2 / 20),   # perfectly separated, 3 vs 3: 2 of C(6,3) = 20
    ([1, 4], [2, 3], 1.0),            # rank sum 5 = its mean: every split is at least as extreme
    ([1, 1], [1, 2], 1.0),            # ties: mid-ranks 2, 2, 2, 4; observed |6 - 5| = 1, every split >= 1
    ([10, 11, 12, 13], [1, 2, 3, 4], 2 / 70),
])
def test_exact_mann_whitney_p_values(a: list, b: list, p: float) -> None:
    """Hand-enumerated two-sided exact p-values (the executor-agreement benchmark's test); scipy agrees where it is
    installed."""
    from benchmarks.executor_agreement import mann_whitney_exact

    assert mann_whitney_exact(a, b) == pytest.approx(p)
    scipy_stats = pytest.importorskip("scipy.stats")
    if len(set(a + b)) == len(a + b):  # scipy's exact method assumes no ties
        assert scipy_stats.mannwhitneyu(a, b, method="exact").pvalue == pytest.approx(p)
