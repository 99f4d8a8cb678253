"""benchmarks/learner_throughput.py: a case per algorithm, agreement before timing, the SAC case end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import baseline as bl
from benchmarks.runner import ROOT


def test_learner_throughput_has_a_case_for_every_algorithm() -> None:
    """Every registered algorithm has a learner case (or is reported unavailable, never silently left out); every
    case names a registered algorithm; the CI baseline holds the CPU-time ratio of every case."""
    from benchmarks.learner_throughput import ALGO_CASES, ALGOS, ALL_CASES
    from rlrun.registry import registry

    algos = set(registry.names("algo"))
    assert {case.algo for case in ALGO_CASES.values()} <= algos
    assert {"dqn", "ppo", "a2c", "trpo"} <= set(ALGOS)
    baseline = bl.load_baseline(ROOT / "benchmarks" / "baseline.json")["benchmarks"]["learner_throughput"]
    assert set(baseline) == {f"ratio/samples_per_cpu_s/{case}/rlrun_vs_bare" for case in ALL_CASES}


def test_learner_throughput_refuses_a_reference_that_computes_something_else() -> None:
    """The two sides must agree on their first two updates before anything is timed: a bare update whose loss is
    off by 1% (rtol 1e-4) stops the benchmark, naming the case and both values."""
    from benchmarks.learner_throughput import Pair, measure

    losses = iter([1.0, 2.0])
    pair = Pair(lambda: {"loss": next(losses)}, lambda: {"loss": 1.01}, 8)
    with pytest.raises(AssertionError, match=r"demo: update 0: the agent's loss 1.0 != the bare update's 1.01"):
        measure("demo", pair, rounds=1, min_time_s=0.01)
    same = Pair(lambda: {"loss": 0.5}, lambda: {"loss": 0.5}, 8)
    figures = measure("same", same, rounds=1, min_time_s=0.01)
    assert figures["batch_size/same"] == 8 and figures["ratio/samples_per_cpu_s/same/rlrun_vs_bare"] > 0


def test_learner_throughput_sac_case_builds_the_run_agent_and_agrees(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The SAC case end to end (the cheapest composed case: MLP on Pendulum): the config composed as
    ``rlrun algo=sac env=pendulum`` builds the agent, its update and the hand-written one agree on critic, actor
    and temperature losses (else measure() raises), and the figures come out."""
    from benchmarks.common import LOG_ENV, RESULTS_ENV
    from benchmarks.learner_throughput import main

    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    monkeypatch.setenv(LOG_ENV, "0")
    figures = main(["--cases", "sac_pendulum_mlp", "--rounds", "1", "--min-time", "0.05"])
    assert figures["batch_size/sac_pendulum_mlp"] == 256
    assert figures["samples_per_cpu_s/sac_pendulum_mlp/bare"] > 0
    assert 0 < figures["ratio/samples_per_cpu_s/sac_pendulum_mlp/rlrun_vs_bare"] < 10
    assert figures["settings/sac_pendulum_mlp"].startswith("rlrun algo=sac env=pendulum")
