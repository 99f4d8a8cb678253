"""Logger overhead: the same short DQN CartPole-v1 run with ``logger=none``, TensorBoard only
(``logger.mlflow.enabled=false``) and TensorBoard + MLflow (a local sqlite store), as env steps/s ratios against
``logger=none``, measured in this one process. Goal (issue 7): >= 0.97.

Each run goes through ``rlrun.app.run.run_experiment`` with the config the CLI would compose
(``rlrun.config.compose``), so the figure is what a user's run pays: the env steps/s of ``summary.json``
(its wall time includes starting the loggers and logging the params, not closing them). The console sink is off
in all three (it is the same in each and only adds noise). One untimed warm-up run per variant first (imports,
creating the MLflow tables), then ``--repeats`` rounds, each running the three variants in a rotated order;
a round's ratios are taken within the round, and medians over rounds are reported. The MLflow store is a fresh
sqlite file in a temporary folder (a remote tracking server would measure the network, not rlrun).

The same ratios per CPU second of this process (``ratio/env_steps_per_cpu_s/...``: CPU time of the whole run,
building included, every thread counted) are what CI compares: other work on the shared cores moves them far less
than the wall-clock ones.

Also reported, to explain the ratios: ``logger_start_ms/<variant>`` (starting the loggers and logging the params,
paid once per run inside its wall time) and ``logger_report_ms/<variant>`` (one report of 15 metrics, paid once per
second of training), medians over the rounds.

    python -m benchmarks.logger_overhead [--quick] [--env-steps N] [--repeats R]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import load_average, publish

VARIANTS = {  # name -> the logger overrides of the variant
    "none": ["logger=none"],
    "tensorboard": ["logger.mlflow.enabled=false"],
    "tensorboard_mlflow": [],
}
BASE = ["algo=dqn", "env=cartpole", "seed=0", "stop.episode_return_mean=null", "export.formats=[]",
        "checkpoint.at_end=false", "logger.console.enabled=false", "device.torch_threads=1"]


def variant_overrides(name: str, env_steps: int, mlflow_uri: str) -> list[str]:
    extra = [f"logger.mlflow.tracking_uri={mlflow_uri}"] if name == "tensorboard_mlflow" else []
    return [*BASE, f"stop.env_steps={env_steps}", *VARIANTS[name], *extra]


def one_run(overrides: list[str], work: Path) -> tuple[dict[str, Any], float]:
    """``(summary.json, CPU seconds of this process for the whole run)``: the CPU time counts every thread (the
    TensorBoard writer's too) and hardly any of the other work on the shared cores."""
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    cfg = compose(overrides)
    run_dir = Path(tempfile.mkdtemp(dir=work))
    try:
        cpu = time.process_time()
        summary = run_experiment(cfg, run_dir)
        return summary, time.process_time() - cpu
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def logger_costs(overrides: list[str], work: Path) -> tuple[float, float]:
    """Seconds to start the variant's loggers and log the params (inside a run's wall time), and seconds of one
    metrics report of 15 scalars (a run reports once per ``logger.report_interval_s``, default 1 s)."""
    from rlrun.app.run import flatten_config
    from rlrun.config import compose
    from rlrun.logging.fanout import MetricsLogger

    cfg = compose(overrides)
    run_dir = Path(tempfile.mkdtemp(dir=work))
    try:
        t0 = time.perf_counter()
        logger = MetricsLogger.from_config(cfg.logger, run_dir, "logger-cost", int(cfg.stop.env_steps))
        logger.log_params(flatten_config(cfg))
        t1 = time.perf_counter()
        logger.log_metrics({f"probe/metric{i}": float(i) for i in range(15)}, 1)
        t2 = time.perf_counter()
        logger.close({}, "FINISHED")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return t1 - t0, t2 - t1


def measure(env_steps: int, repeats: int, warmup_steps: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="rlrun-logger-overhead-"))
    uri = f"sqlite:///{work / 'mlflow.db'}"
    try:
        for name in VARIANTS:  # warm-up: imports, MLflow tables, TensorBoard writer start
            one_run(variant_overrides(name, warmup_steps, uri), work)
        names = list(VARIANTS)
        speeds: dict[str, list[float]] = {n: [] for n in names}
        cpu_speeds: dict[str, list[float]] = {n: [] for n in names}
        cpu_ratios: dict[str, list[float]] = {n: [] for n in names if n != "none"}
        start_s: dict[str, list[float]] = {n: [] for n in names}
        report_s: dict[str, list[float]] = {n: [] for n in names}
        ratios: dict[str, list[float]] = {n: [] for n in names if n != "none"}
        for r in range(repeats):
            order = names[r % len(names):] + names[:r % len(names)]
            this_round = {}
            for name in order:
                started, reported = logger_costs(variant_overrides(name, env_steps, uri), work)
                start_s[name].append(started)
                report_s[name].append(reported)
                summary, cpu_s = one_run(variant_overrides(name, env_steps, uri), work)
                if summary["stop_reason"] != "env_steps":
                    raise RuntimeError(f"{name}: the run stopped by {summary['stop_reason']} ({summary['error']})")
                this_round[name] = (summary["env_steps_per_second"], summary["env_steps"] / cpu_s)
                speeds[name].append(this_round[name][0])
                cpu_speeds[name].append(this_round[name][1])
            for name in ratios:
                ratios[name].append(this_round[name][0] / this_round["none"][0])
                cpu_ratios[name].append(this_round[name][1] / this_round["none"][1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures: dict[str, Any] = {"env_steps": env_steps, "repeats": repeats}
    for name, values in speeds.items():
        figures[f"env_steps_per_s/{name}"] = round(statistics.median(values), 1)
        figures[f"env_steps_per_s/{name}/rounds"] = [round(v, 1) for v in values]
        figures[f"logger_start_ms/{name}"] = round(statistics.median(start_s[name]) * 1e3, 2)
        figures[f"logger_report_ms/{name}"] = round(statistics.median(report_s[name]) * 1e3, 3)
        figures[f"env_steps_per_cpu_s/{name}"] = round(statistics.median(cpu_speeds[name]), 1)
    for name, values in ratios.items():
        figures[f"ratio/env_steps_per_s/{name}_vs_none"] = round(statistics.median(values), 4)
        figures[f"ratio/env_steps_per_s/{name}_vs_none/rounds"] = [round(v, 4) for v in values]
        figures[f"ratio/env_steps_per_cpu_s/{name}_vs_none"] = round(statistics.median(cpu_ratios[name]), 4)
        figures[f"ratio/env_steps_per_cpu_s/{name}_vs_none/rounds"] = [round(v, 4) for v in cpu_ratios[name]]
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CI settings: 5000 env steps, 3 rounds")
    parser.add_argument("--env-steps", type=int, help="env steps per run (default 10000; --quick 5000)")
    parser.add_argument("--repeats", type=int, help="rounds of the three variants (default 5; --quick 3)")
    args = parser.parse_args(argv)
    env_steps = args.env_steps or (5000 if args.quick else 10_000)
    repeats = args.repeats or (3 if args.quick else 5)
    before = load_average()
    start = time.perf_counter()
    figures = measure(env_steps, repeats, warmup_steps=min(1500, env_steps))
    figures["wall_time_s"] = round(time.perf_counter() - start, 1)
    figures["load_average_before"] = before
    command = "python -m benchmarks.logger_overhead " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("logger_overhead", figures, command)
    return figures


if __name__ == "__main__":
    main()
