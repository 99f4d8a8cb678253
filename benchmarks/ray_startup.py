"""Ray start-up: what ``executor=ray`` costs before the first rollout, next to ``executor=local``.

Per repeat, in this process: build the Ray executor (``ray.init`` of a fresh local cluster: ``init_s``), its worker
set (``num_workers`` actors, each importing rlrun and building its env copies: ``workers_ready_s``), and take the
first synchronous sample of ``rollout_steps`` agent steps per copy (``first_sample_s``); then the memory of the
processes this start-up created (the Ray cluster and the workers; summed resident set sizes, which count shared
pages once per process: an upper bound), and stop everything. The same for ``executor=local`` (executor, worker
set, first sample) as the reference. Medians over repeats; times are this machine's (not compared in CI).

MEASURED.md, the same machine class: ``ray.init`` 2.7 s, an idle local cluster ~0.5 GiB in 10 processes; RLlib's
``ray.init`` to first sample 17 s.

    python -m benchmarks.ray_startup [--repeats N] [--workers W] [--env cartpole]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import load_average, write_result
from benchmarks.dqn_networks import dqn_agent

ROLLOUT_STEPS = 16


def descendants_rss_mib(root: int) -> tuple[int, float]:
    """(number of processes, summed VmRSS in MiB) of every live descendant of ``root`` (Linux /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= frontier
    total_kib = 0
    for pid in found:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return len(found), total_kib / 1024


def start_up(executor_name: str, env: str, workers: int) -> dict[str, float]:
    from rlrun.graph_command import compose
    from rlrun.registry import registry

    extra = ([f"executor.num_workers={workers}", "executor.num_envs_per_worker=1"] if executor_name == "ray"
             else ["executor.num_envs=1"])
    cfg = compose([f"env={env}", f"executor={executor_name}", *extra])
    factory = registry.build("env", cfg.env.name, cfg.env)
    spec = factory.spec
    network = "nature_cnn" if len(spec.observation_space.shape) == 3 else "mlp"
    agent = dqn_agent(spec.observation_space, spec.action_space, network)
    t0 = time.perf_counter()
    executor = registry.build("executor", cfg.executor.name, cfg.executor, factory, 0)
    t1 = time.perf_counter()
    try:
        ws = executor.worker_set(agent, torch.device("cpu"))
        t2 = time.perf_counter()
        ws.sample(ROLLOUT_STEPS)
        t3 = time.perf_counter()
        processes, rss = descendants_rss_mib(os.getpid())
    finally:
        executor.stop()
    return {"init_s": t1 - t0, "workers_ready_s": t2 - t1, "first_sample_s": t3 - t2, "total_s": t3 - t0,
            "processes": float(processes), "rss_mib": rss}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="cluster start-ups (medians reported)")
    parser.add_argument("--workers", type=int, default=2, help="executor.num_workers")
    parser.add_argument("--env", default="cartpole", help="an env config option")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    figures: dict[str, Any] = {"repeats": args.repeats, "num_workers": args.workers, "env": args.env,
                               "load_average_before": load_average()}
    for name in ("local", "ray"):
        runs = [start_up(name, args.env, args.workers) for _ in range(args.repeats)]
        for key in runs[0]:
            value = statistics.median(r[key] for r in runs)
            figures[f"{name}/{key}"] = round(value, 3) if key != "processes" else int(value)
    figures["load_average_after"] = load_average()
    command = "python -m benchmarks.ray_startup " + " ".join(sys.argv[1:] if argv is None else argv)
    path = write_result("ray_startup", figures, command.strip())
    for key, value in figures.items():
        print(f"{key:40s} {value}")
    print(f"wrote {path}", file=sys.stderr)
    return figures


if __name__ == "__main__":
    main()
