"""benchmarks/apex_actors.py: Ape-X's actors while learning, on its path."""

from __future__ import annotations


def test_apex_actors_learns_while_acting_on_its_path() -> None:
    """``benchmarks.apex_actors --smoke --modes thread``: the headline command on Ray for a few seconds with the
    learner on its thread (the mode of the benchmark's goal), tiny batches: it learns (gradient steps), its actors act
    while it learns, and the run stops near its wall time. The other mode differs only in ``algo.learner``, whose
    runs tests/algos/test_apex.py covers."""
    from benchmarks import apex_actors

    figures = apex_actors.main(["--smoke", "--modes", "thread", "--seconds", "15"])
    assert figures["gradient_steps/thread"] > 0
    assert figures["frames_per_s/while_learning/thread"] > 0
    assert figures["stop_overshoot_s/thread"] < 15
    assert "gradient_steps/sync" not in figures  # only the modes asked for run
