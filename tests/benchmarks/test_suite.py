"""The suite's registry (benchmarks/suite.py): what each benchmark waits for, the CI set and how it is judged."""

from __future__ import annotations

from benchmarks.suite import SUITE, Benchmark, Registered, by_name, ci_set


def test_benchmarks_wait_for_what_does_not_exist_yet() -> None:
    waiting = Benchmark("w", "benchmarks.runner", "s", requires=(Registered("executor", "no_such_executor"),))
    ready = Benchmark("r", "benchmarks.runner", "s", requires=(Registered("executor", "local"),))
    unwritten = Benchmark("u", "benchmarks.no_such_module", "s")
    assert waiting.unavailable() == ["executor=no_such_executor does not exist yet"]
    assert ready.unavailable() == []
    assert "benchmarks.no_such_module is not there" in unwritten.unavailable()[0]
    not_runnable = {b.name for b in SUITE if b.unavailable()}
    from rlrun.fingerprint import gpu_name

    assert ("pong_long" in not_runnable) == (not gpu_name())  # listed without a GPU, never faked
    from rlrun.registry import registry

    assert ("soak" in not_runnable) == ("apex" not in registry.names("algo"))


def test_the_ci_set_and_its_judgement() -> None:
    names = {b.name for b in ci_set()}
    assert {"learner_throughput", "peers"} == names
    suite = by_name()
    assert suite["learner_throughput"].goal("ratio/samples_per_cpu_s/cartpole_mlp/rlrun_vs_bare") == 0.9
    assert suite["learner_throughput"].tolerance("ratio/samples_per_cpu_s/cartpole_mlp/rlrun_vs_bare") == 0.2
    assert suite["peers"].tolerance("pong_acting/rlrun/fraction_ran") == 0.35
    assert suite["peers"].tolerance("something/else") == 0.25  # the default
    assert suite["learner_throughput"].is_compared("ratio/samples_per_cpu_s/cartpole_mlp/rlrun_vs_bare")
    assert not suite["learner_throughput"].is_compared("ratio/samples_per_s/cartpole_mlp/rlrun_vs_bare")
