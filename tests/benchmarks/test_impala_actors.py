"""benchmarks/impala_actors.py: IMPALA's actors while learning, on its path."""

from __future__ import annotations


def test_impala_actors_measures_idle_and_thread_on_its_path() -> None:
    """``benchmarks.impala_actors --smoke --modes idle,thread`` (IMPALA only, tiny batches): the idle mode acts
    without learning (no update), the thread mode learns, both act, and the goal's ratio (thread over idle) comes
    out. The sync mode differs only in ``algo.learner``, whose runs tests/algos/test_impala.py covers."""
    from benchmarks import impala_actors

    figures = impala_actors.main(["--smoke", "--algos", "impala", "--modes", "idle,thread", "--seconds", "10"])
    assert figures["updates/impala/idle"] == 0  # the harness's no-op learner
    assert figures["updates/impala/thread"] > 0
    for mode in ("idle", "thread"):
        assert figures[f"frames_per_s/impala/{mode}"] > 0
    assert figures["ratio/thread_vs_idle/impala"] > 0
    assert figures["ratio/sync_vs_idle/impala"] is None  # only the modes asked for run
