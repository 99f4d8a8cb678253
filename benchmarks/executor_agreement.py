"""Executor agreement with asynchronous workers: do learning curves under ``executor=ray`` (workers truly
asynchronous, gradients or rollouts applied as they arrive) agree with ``executor=local`` (the same workers taking
turns in one process) for the asynchronous plans? Issue 4: "with async workers, the learning curves agree
statistically".

Synchronous plans need no statistics: with one worker their first K updates are bit-identical on both executors
(``tests/execution/test_ray_executor.py``). An asynchronous plan on Ray is not deterministic (which worker's
result arrives first depends on the OS scheduler), so this benchmark runs several seeds on each executor and
compares the distributions of a learning-curve statistic: the env steps until the mean return of the last 20
episodes first reaches ``--threshold`` (CartPole-v1; a run that never gets there within the budget counts as the
budget). Figures per plan: the per-seed env steps on each executor, their medians, ``ratio/<plan>/ray_over_local``
(median env steps on Ray / on local: 1 = the same sample efficiency), and ``p_value/<plan>`` of a two-sided exact
Mann-Whitney U test (every split of the pooled runs enumerated: no normal approximation at these sample sizes).
A p-value below 0.05 says the curves differ; above it, no difference is detectable with this many seeds.

Plans measured when registered: ``a3c`` (``algo=a2c algo.mode=async``), and ``impala``, ``appo`` and ``apex``
when they exist. Both executors use 2 workers with the same env copies per worker; Ray runs on one local cluster
of 2 CPUs started once. Not in the CI set (minutes of Ray runs).

    python -m benchmarks.executor_agreement [--seeds 0,1,2,3,4,5] [--plans a3c,impala] [--threshold 150]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from typing import Any

from benchmarks.common import load_average, publish

# plan -> (overrides of both executors, algorithm that must be registered)
PLANS: dict[str, tuple[list[str], str]] = {
    "a3c": (["algo=a2c", "algo.mode=async"], "a2c"),
    "impala": (["algo=impala"], "impala"),
    "appo": (["algo=appo"], "appo"),
    "apex": (["algo=apex", "algo.learner=sync"], "apex"),  # the deterministic plan (thread mode: a measured ratio)
}
ENVS_PER_WORKER = 4
EXECUTORS = {
    "local": ["executor=local", "executor.num_workers=2", f"executor.num_envs={ENVS_PER_WORKER}"],
    "ray": ["executor=ray", "executor.num_workers=2", f"executor.num_envs_per_worker={ENVS_PER_WORKER}"],
}


def mann_whitney_exact(a: list[float], b: list[float]) -> float:
    """Two-sided exact p-value of the Mann-Whitney U test of samples ``a`` and ``b`` (ties get mid-ranks): the share
    of all ``C(n_a + n_b, n_a)`` splits of the pooled values whose rank sum is at least as far from its mean as the
    observed one."""
    pooled = sorted(a + b)
    ranks: dict[float, float] = {}
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1] == pooled[i]:
            j += 1
        ranks[pooled[i]] = (i + j) / 2 + 1
        i = j + 1
    all_ranks = [ranks[v] for v in a + b]
    n_a = len(a)
    expected = n_a * (len(all_ranks) + 1) / 2
    observed = abs(sum(ranks[v] for v in a) - expected)
    splits = list(itertools.combinations(range(len(all_ranks)), n_a))
    extreme = sum(1 for idx in splits if abs(sum(all_ranks[k] for k in idx) - expected) >= observed - 1e-9)
    return extreme / len(splits)


def run_once(plan: str, executor: str, seed: int, threshold: float, budget: int) -> tuple[int, float]:
    """One run to ``threshold`` (or the budget): (env steps at the stop, the 20-episode mean then)."""
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    overrides = [*PLANS[plan][0], *EXECUTORS[executor], f"seed={seed}", f"stop.env_steps={budget}",
                 f"stop.episode_return_mean={threshold}", "logger=none", "logger.console.enabled=false",
                 "export.formats=[]", "checkpoint.at_end=false"]
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix=f"agreement-{plan}-{executor}-") as tmp:
        summary = run_experiment(compose(overrides), Path(tmp) / "run")
    steps = int(summary["env_steps"]) if summary["stop_reason"] == "episode_return_mean" else budget
    return steps, float(summary.get("episode_return_mean") or 0.0)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2,3,4,5", help="comma-separated seeds, run on both executors")
    parser.add_argument("--plans", default=",".join(PLANS), help=f"comma-separated, of {', '.join(PLANS)}")
    parser.add_argument("--threshold", type=float, default=150.0, help="20-episode mean return to reach")
    parser.add_argument("--budget", type=int, default=60_000, help="env steps per run at most")
    args = parser.parse_args(argv)
    import ray

    from rlrun.registry import registry

    seeds = [int(s) for s in args.seeds.split(",") if s]
    figures: dict[str, Any] = {"threshold": args.threshold, "budget_env_steps": args.budget, "seeds": seeds,
                               "workers": 2, "envs_per_worker": ENVS_PER_WORKER,
                               "load_average_before": load_average()}
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        for plan in [p for p in args.plans.split(",") if p]:
            if plan not in PLANS:
                parser.error(f"unknown plan {plan}; plans: {', '.join(PLANS)}")
            if PLANS[plan][1] not in registry.names("algo"):
                figures[f"unavailable/{plan}"] = f"algo={PLANS[plan][1]} does not exist yet"
                continue
            steps: dict[str, list[int]] = {"local": [], "ray": []}
            for seed in seeds:  # interleaved, so machine noise hits both executors alike
                for executor in EXECUTORS:
                    n, _ = run_once(plan, executor, seed, args.threshold, args.budget)
                    steps[executor].append(n)
                    print(f"{plan} {executor} seed {seed}: {n} env steps", file=sys.stderr)
            for executor, values in steps.items():
                figures[f"env_steps/{plan}/{executor}"] = values
                figures[f"median_env_steps/{plan}/{executor}"] = float(statistics.median(values))
            figures[f"ratio/{plan}/ray_over_local"] = round(
                statistics.median(steps["ray"]) / statistics.median(steps["local"]), 4)
            figures[f"p_value/{plan}"] = round(mann_whitney_exact(steps["local"], steps["ray"]), 4)
    finally:
        ray.shutdown()
    figures["load_average_after"] = load_average()
    command = "python -m benchmarks.executor_agreement " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("executor_agreement", figures, command)
    return figures


if __name__ == "__main__":
    main()
