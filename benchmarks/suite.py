"""The benchmark suite: every benchmark of issue 7 by name, what it needs, how CI runs it, how it is judged.

A :class:`Benchmark` names a module run as ``python -m <module> <args>``. Its ``requires`` are checked before it
runs: a benchmark whose algorithm, executor, module or hardware does not exist yet is listed as *unavailable* with
the reason (never faked), and becomes available by itself once they land. ``ci_args`` puts it in the CI set
(``rlrun-bench ci`` / ``make bench``) with reduced settings; ``tolerances`` say by how much a same-run ratio may
fall below the committed baseline before CI fails; ``goals`` are the issue's targets, shown but not enforced.

To add a benchmark: write ``benchmarks/<name>.py`` with a ``main(argv)`` that ends with
``benchmarks.common.write_result(name, figures, command)`` (name ratio figures ``ratio/...`` or
``fraction.../...``), then add an entry to :data:`SUITE`.
"""

from __future__ import annotations

import fnmatch
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable

DEFAULT_TOLERANCE = 0.25  # a ratio may fall 25% below its baseline before CI fails (noisy 2-core machines)


# ---------------------------------------------------------------------------------------------- requirements


@dataclass(frozen=True)
class Registered:
    """An entry of rlrun's registry, e.g. ``Registered("executor", "ray")``."""

    kind: str
    name: str

    def missing(self) -> str | None:
        from rlrun.registry import registry

        if self.name in registry.names(self.kind):
            return None
        return f"{self.kind}={self.name} does not exist yet"


@dataclass(frozen=True)
class Module:
    """A Python module that must be importable (the benchmark's own module, or a peer library)."""

    name: str
    why: str = ""

    def missing(self) -> str | None:
        try:
            found = importlib.util.find_spec(self.name) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            return None
        return f"module {self.name} is not there{': ' + self.why if self.why else ''}"


@dataclass(frozen=True)
class ConfigKeys:
    """Keys a config schema must have, e.g. the DQN options a benchmark switches."""

    schema: str  # "module:Class"
    keys: tuple[str, ...]

    def missing(self) -> str | None:
        from dataclasses import fields

        from rlrun.registry import import_string

        have = {f.name for f in fields(import_string(self.schema))}
        lacking = [k for k in self.keys if k not in have]
        if not lacking:
            return None
        return f"{self.schema.split(':')[-1]} has no {', '.join(lacking)} key{'s' if len(lacking) > 1 else ''} yet"


@dataclass(frozen=True)
class CudaGPU:
    def missing(self) -> str | None:
        from rlrun.fingerprint import gpu_name

        return None if gpu_name() else "needs a CUDA GPU (device=cuda); this machine has none"


# ---------------------------------------------------------------------------------------------- benchmarks


@dataclass(frozen=True)
class Benchmark:
    name: str
    """Suite name: ``rlrun-bench <name>``; the ``benchmark`` field of its records."""
    module: str
    """Run as ``python -m <module> <args>`` from the checkout's root."""
    summary: str
    """One line: what it measures and against what."""
    ci_args: tuple[str, ...] | None = None
    """Arguments in the CI set (reduced settings); None: not in the CI set."""
    full_args: tuple[str, ...] = ()
    """Arguments of ``rlrun-bench <name>`` / ``rlrun-bench all`` (the full measurement)."""
    requires: tuple[Any, ...] = ()
    """Requirements (Registered, Module, ConfigKeys, CudaGPU); each unmet one is a reason it is unavailable."""
    compared: tuple[str, ...] = ("ratio/*", "fraction*")
    """Patterns (fnmatch) of the same-run ratios that ``--update-baseline`` puts into the baseline, i.e. that CI
    compares (the others are reported only: e.g. wall-clock ratios whose CPU-time twin is steadier)."""
    tolerances: dict[str, float] = field(default_factory=dict)
    """Ratio-figure pattern (fnmatch, first match wins) -> largest allowed relative fall below the baseline."""
    goals: dict[str, float] = field(default_factory=dict)
    """Ratio-figure pattern -> the issue's goal (a lower bound), shown in tables."""
    headline: tuple[str, ...] = ()
    """Figure patterns shown on the Performance page, a row each, where ``table`` is empty (all figures go to the
    JSON and Markdown files)."""
    title: str = ""
    """The question the benchmark answers, as the Performance page heads its table (default: its name)."""
    table: tuple[tuple[str, str], ...] = ()
    """The Performance page's table: (column heading, figure pattern) pairs, the pattern naming the parts that
    make a row in braces (``samples_per_s/{case}/rlrun``): a row per value of those parts, a column per pair, so a
    reader compares cases along a row instead of reading one figure per line."""
    retired: tuple[str, ...] = ()
    """Figure patterns of cases the benchmark no longer runs: an older record's are left off the Performance page."""
    derive: Callable[[dict[str, Any]], dict[str, float]] | None = None
    """Extra same-run ratios computed from the module's figures (e.g. speed ratios from overheads)."""
    timeout_s: float = 900.0
    """The runner stops the benchmark (and reports it failed) after this many seconds."""

    def unavailable(self) -> list[str]:
        """Why it cannot run here and now (empty: it can)."""
        reasons = []
        for req in (Module(self.module, "the benchmark is not written yet"), *self.requires):
            try:
                reason = req.missing()
            except Exception as e:  # noqa: BLE001 - a broken check is a reason too, not a crash of the suite
                reason = f"checking {req} failed: {e}"
            if reason:
                reasons.append(reason)
        return reasons

    def is_compared(self, figure: str) -> bool:
        return any(fnmatch.fnmatchcase(figure, p) for p in self.compared)

    def tolerance(self, figure: str) -> float:
        for pattern, tol in self.tolerances.items():
            if fnmatch.fnmatchcase(figure, pattern):
                return tol
        return DEFAULT_TOLERANCE

    def goal(self, figure: str) -> float | None:
        for pattern, goal in self.goals.items():
            if fnmatch.fnmatchcase(figure, pattern):
                return goal
        return None

    def is_headline(self, figure: str) -> bool:
        return any(fnmatch.fnmatchcase(figure, p) for p in self.headline)


SUITE: tuple[Benchmark, ...] = (
    Benchmark(
        "learner_throughput", "benchmarks.learner_throughput",
        "samples/s through the DQN agent's update() vs a hand-written PyTorch step of the same network and loss "
        "(Nature CNN on 4x84x84 uint8; an MLP [64, 64]), and each algorithm's update beside its own",
        ci_args=("--quick",),
        compared=("ratio/samples_per_cpu_s/*",), tolerances={"ratio/*": 0.2},
        goals={"ratio/*": 0.9},
        headline=("samples_per_s/*/rlrun", "ratio/*"),
        title="The learner against bare PyTorch",
        retired=("*/ppo_cartpole_mlp/*",),
        # per CPU-second: the ratio CI compares (wall-clock samples/s moves with whatever else shares the cores)
        table=(("rlrun samples/s", "samples_per_s/{case}/rlrun"),
               ("rlrun / bare PyTorch, per CPU-second", "ratio/samples_per_cpu_s/{case}/rlrun_vs_bare"))),
    Benchmark(
        "peers", "benchmarks.peers",
        "rlrun beside Stable-Baselines3, CleanRL (its scripts unchanged), TorchRL and Sample Factory, each in its "
        "own venv, in one invocation: Pong acting and training frames/s at equal settings, start-up, peak memory of "
        "the process tree; MuJoCo PPO wall time for 1M env steps with the return beside it (when named); ratios",
        ci_args=("--quick",),
        compared=("ratio/pong_*/frames_per_s/*", "*/fraction_ran"),
        tolerances={"ratio/*": 0.35, "*/fraction_ran": 0.35},
        headline=("ratio/*", "*/first_episode_s", "*/peak_rss_mib", "*/frames_per_s", "*/startup_s", "*/wall_s",
                  "*/final_return"),
        title="rlrun beside its peers, seed 0",
        retired=("*cartpole_*",),
        table=(("frames/s", "{task}/{contender}/frames_per_s"),
               ("rlrun's frames/s / its", "ratio/{task}/frames_per_s/rlrun_over_{contender}"),
               ("start-up (s)", "{task}/{contender}/first_episode_s"), ("start-up (s)", "{task}/{contender}/startup_s"),
               ("peak RSS (MiB)", "{task}/{contender}/peak_rss_mib")),
        timeout_s=5400),
    Benchmark(
        "training_parts", "benchmarks.training_parts",
        "rlrun's PPO training step (the peers' pong_training settings) split into acting and the update, beside the "
        "same parts by hand (the matched bare update, the raw env copies, the bare forward, a hand-written acting "
        "loop): the ceiling they set, rlrun's fraction of it, and all against "
        "Sample Factory's frames per CPU-second from the newest peers record (not in CI: a minute of CNN updates)",
        goals={"ratio/rlrun_over_sample_factory": 2.0},  # issue 19: 2x Sample Factory per core, equal settings
        headline=("*/frames_per_s", "fraction_of_*", "ratio/*", "share/update")),
    Benchmark(
        "device_compile", "benchmarks.device_compile",
        "device.compile=true: torch.compile speed-up of the DQN agent's update and act paths on the CPU, and the "
        "one-off compile time (not in CI: compiling takes minutes)",
        headline=("speedup/*", "compile_s/*"),
        timeout_s=1200),
    Benchmark(
        "executor_agreement", "benchmarks.executor_agreement",
        "asynchronous plans (a3c; impala, appo, apex when registered): env steps to a CartPole mean return of 150 "
        "on executor=local vs executor=ray over seeds, medians and an exact Mann-Whitney p-value (not in CI: "
        "minutes of Ray runs)",
        requires=(Registered("executor", "ray"), ConfigKeys("rlrun.algos.a2c_config:A2CConfig", ("mode",))),
        headline=("median_env_steps/*", "ratio/*", "p_value/*"),
        timeout_s=1800),
    Benchmark(
        "soak", "benchmarks.soak",
        "rlrun algo=apex env=pong executor=ray for 60 minutes: the PSS of every process and the object store's use "
        "each minute, growth per hour after warm-up (goal < 5%; not in CI: an hour)",
        requires=(Registered("algo", "apex"), Registered("executor", "ray")),
        headline=("growth_per_hour/*", "slope_mib_per_hour/*"), timeout_s=5400),
    Benchmark(
        "chaos", "benchmarks.chaos",
        "Ape-X CartPole with executor=ray, a rollout worker or replay shard SIGKILLed every 30 s for 10 minutes: the "
        "run finishes, its return vs the same run without kills, restarts = kills (not in CI: 20 minutes)",
        requires=(Registered("algo", "apex"), Registered("executor", "ray")),
        headline=("chaos/*", "ratio_*"), timeout_s=3600),
    # -- not runnable yet: listed with what they wait for, so they cannot be mistaken for measured figures
    Benchmark(
        "pong_long", "benchmarks.pong_long",
        "long learning runs: Pong to >= +18 with apex, impala and ppo on a GPU, frames and wall time (not in CI; "
        "`python -m benchmarks.pong_long --smoke` checks its path on a CPU)",
        requires=(CudaGPU(), Registered("algo", "apex"), Registered("algo", "impala"), Registered("algo", "ppo"))),
    Benchmark(
        "apex_actors", "benchmarks.apex_actors",
        "rlrun algo=apex env=pong executor=ray per learner mode (thread, sync): actor frames/s while learning vs "
        "acting only, learner updates/s, replay ratio, stop overshoot, RSS (not in CI: minutes per mode)",
        requires=(Registered("algo", "apex"), Registered("executor", "ray")),
        goals={"ratio/acting_while_learning_vs_acting_only/thread": 0.5},
        headline=("ratio/*", "learner_updates_per_s/*", "stop_overshoot_s/*"), timeout_s=1800),
    Benchmark(
        "impala_actors", "benchmarks.impala_actors",
        "rlrun algo=impala|appo env=pong executor=ray with the learner idle, on its thread, and in sync: actor "
        "frames/s while learning vs acting only, learner updates/s, policy lag, RSS (not in CI: minutes per mode)",
        requires=(Registered("algo", "impala"), Registered("algo", "appo"), Registered("executor", "ray")),
        goals={"ratio/thread_vs_idle/impala": 0.5, "ratio/thread_vs_idle/appo": 0.5},
        headline=("ratio/*", "learner_updates_per_s/*", "policy_lag_mean/*"), timeout_s=2400),
    Benchmark(
        "replay_memory", "benchmarks.replay_memory",
        "replay bytes per Atari transition with each frame stored once vs whole stacks, on a real Pong stream; "
        "insert and sample time",
        full_args=("--transitions", "6000"),
        goals={"ratio/bytes_whole_vs_dedup/*": 56464 / 8192},  # issue 14: <= 8 KB of today's 56 KB per transition
        headline=("bytes_per_transition/*", "ratio/bytes_whole_vs_dedup/*")),
)


def by_name(suite: tuple[Benchmark, ...] = SUITE) -> dict[str, Benchmark]:
    return {b.name: b for b in suite}


def ci_set(suite: tuple[Benchmark, ...] = SUITE) -> list[Benchmark]:
    return [b for b in suite if b.ci_args is not None]
