"""benchmarks/impala_actors.py: IMPALA's actors while learning, on its path."""

from __future__ import annotations


def test_impala_actors_measures_idle_thread_and_sync_on_its_path() -> None:
    """``benchmarks.impala_actors --smoke`` (IMPALA only, tiny batches): the idle mode acts without learning (no
    update), thread and sync modes learn, and every mode acts."""
    from benchmarks import impala_actors

    figures = impala_actors.main(["--smoke", "--algos", "impala", "--seconds", "10"])
    assert figures["updates/impala/idle"] == 0  # the harness's no-op learner
    for mode in ("thread", "sync"):
        assert figures[f"updates/impala/{mode}"] > 0
    for mode in ("idle", "thread", "sync"):
        assert figures[f"frames_per_s/impala/{mode}"] > 0
    assert figures["ratio/thread_vs_idle/impala"] > 0
