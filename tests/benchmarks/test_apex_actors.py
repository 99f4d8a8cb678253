"""benchmarks/apex_actors.py: Ape-X's actors while learning, on its path."""

from __future__ import annotations


def test_apex_actors_runs_both_learner_modes_on_its_path() -> None:
    """``benchmarks.apex_actors --smoke``: the headline command on Ray for a few seconds per learner mode, tiny
    batches: both modes learn (gradient steps), actors act while learning, and the run stops near its wall time."""
    from benchmarks import apex_actors

    figures = apex_actors.main(["--smoke", "--seconds", "15"])
    for mode in ("thread", "sync"):
        assert figures[f"gradient_steps/{mode}"] > 0
        assert figures[f"frames_per_s/while_learning/{mode}"] > 0
        assert figures[f"stop_overshoot_s/{mode}"] < 15
