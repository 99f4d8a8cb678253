"""Chaos: faults injected into a run with ``executor=ray`` for ``--minutes``; the run must finish, learn to its
usual level, and count every loss. Two targets:

- ``--target process`` (default): a rollout worker or a replay shard of Ape-X on CartPole SIGKILLed at random every
  ``--every`` seconds;
- ``--target node``: a two-node ``ray start`` cluster (the head, the driver's node, with 1 CPU; a second node with 2,
  its own raylet and object store) and ``executor.placement=spread``; every ``--every`` seconds the second node's
  whole process group is SIGKILLed (a lost machine: the GCS notices only when its heartbeats stop) and a fresh node
  joins ``--down`` seconds later. For each of ``--algos`` (Ape-X, IMPALA and PPO on CartPole), the same run without
  kills to the same env steps comes after it (``--baseline``), so the returns compare at equal experience.

The run joins a ``ray start --head`` cluster of the benchmark's own (``benchmarks/ray_head.py``), so the benchmark
sees the actors' processes: every ``--every`` seconds it SIGKILLs one process of that cluster (below its head
process), chosen at random among those whose command line names a rollout worker (``ray::RemoteRolloutWorker``) or a
replay shard (``ray::ReplayShard``). At the end it reads ``summary.json`` and the run's TensorBoard events: the run's
stop reason, its training return (``episode_return_mean``, the 20-episode mean), and ``executor/worker_restarts`` and
``executor/replay_shard_restarts``, which must equal the kills of each kind (``restarts_match``: 1 or 0). A killed
shard comes back empty, so learning slows with each shard kill; the figure to compare is the return of the same run
without kills (``--baseline``, the same budget, run first in the same invocation).

    python -m benchmarks.chaos [--minutes 10] [--every 30] [--seed 0] [--baseline]
    python -m benchmarks.chaos --target node [--algos apex,impala,ppo] [--minutes 10] [--every 60] [--baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import load_average, publish
from benchmarks.ray_head import ENV, RLRUN, kill_node, ray_head, start_node, stop_run, wait_for_cpus

KINDS = {"worker": "ray::RemoteRolloutWorker", "shard": "ray::ReplayShard"}


def actor_pids(kind: str, head: int) -> list[int]:
    """The live processes of the benchmark's cluster (below its head process: never another run's) whose command
    line starts with the actor's Ray process title."""
    from benchmarks.peers.processes import process_tree

    title = KINDS[kind].encode()
    out = []
    for pid in sorted(process_tree(head)):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(title):
                out.append(pid)
        except OSError:
            continue
    return out


def last_scalar(run_dir: Path, tag: str) -> float | None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    return events.Scalars(tag)[-1].value if tag in events.Tags()["scalars"] else None


def one_run(tmp: Path, name: str, seconds: float, every: float | None, seed: int) -> dict[str, Any]:
    """Ape-X on CartPole for ``seconds`` of wall time; with ``every``, a kill every ``every`` seconds."""
    rng = random.Random(seed)
    kills = {"worker": 0, "shard": 0}
    run_dir = tmp / name
    overrides = ["algo=apex", "executor=ray", f"seed={seed}", f"stop.wall_time_s={seconds}",
                 "stop.env_steps=1000000000", "executor.max_worker_restarts=1000",
                 "executor.max_replay_shard_restarts=1000", "logger.mlflow.enabled=false",
                 "logger.tensorboard.enabled=true", "export.formats=[]", f"hydra.run.dir={run_dir}"]
    with ray_head(2) as (address, head):
        err = open(tmp / f"{name}.stderr", "w")
        proc = subprocess.Popen([RLRUN, *overrides, f"executor.address={address}"], env=ENV, cwd=tmp,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        try:
            t0 = time.monotonic()
            while proc.poll() is None:
                time.sleep(1.0 if every is None else max(0.0, every - (time.monotonic() - t0) % every))
                if every is None or proc.poll() is not None or time.monotonic() - t0 > seconds - every / 2:
                    continue
                kind = rng.choice(sorted(KINDS))
                pids = actor_pids(kind, head.pid)
                if pids:
                    os.kill(rng.choice(pids), signal.SIGKILL)
                    kills[kind] += 1
            proc.wait(timeout=seconds + 300)
        finally:
            stop_run(proc)
            err.close()
    summary = json.loads((run_dir / "summary.json").read_text())
    restarts = {"worker": last_scalar(run_dir, "executor/worker_restarts"),
                "shard": last_scalar(run_dir, "executor/replay_shard_restarts")}
    out = {f"{name}/stop_reason": summary["stop_reason"], f"{name}/return_mean": summary["episode_return_mean"],
           f"{name}/env_steps": summary["env_steps"]}
    if every is not None:
        out.update({f"{name}/kills_worker": kills["worker"], f"{name}/kills_shard": kills["shard"],
                    f"{name}/restarts_worker": restarts["worker"], f"{name}/restarts_shard": restarts["shard"],
                    f"{name}/lost_env_steps": last_scalar(run_dir, "executor/lost_env_steps"),
                    f"{name}/restarts_match": int(restarts["worker"] == kills["worker"]
                                                  and restarts["shard"] == kills["shard"])})
    return out


def node_run(tmp: Path, name: str, algo: str, seed: int, every: float | None, down: float,
             seconds: float | None = None, env_steps: int | None = None) -> dict[str, Any]:
    """``algo`` on CartPole on a head (1 CPU) and a second node (2 CPUs) for ``seconds`` of wall time or
    ``env_steps``; with ``every``, the second node killed every ``every`` seconds and replaced ``down`` s later."""
    run_dir = tmp / f"{algo}-{name}"  # one per run: its cli.log and TensorBoard events are its own
    stop = [f"stop.wall_time_s={seconds}", "stop.env_steps=1000000000"] if env_steps is None else [
        f"stop.env_steps={env_steps}"]
    overrides = [f"algo={algo}", "env=cartpole", "executor=ray", "executor.placement=spread", "executor.num_workers=2",
                 f"seed={seed}", *stop, "stop.episode_return_mean=null", "executor.max_worker_restarts=1000",
                 "executor.max_replay_shard_restarts=1000", "logger.mlflow.enabled=false",
                 "logger.tensorboard.enabled=true", "export.formats=[]", f"hydra.run.dir={run_dir}"]
    kills = 0
    with ray_head(1) as (address, _):
        node = start_node(address, 2)
        err = open(tmp / f"{algo}-{name}.stderr", "w")
        proc = None
        try:
            wait_for_cpus(address, 3)
            proc = subprocess.Popen([RLRUN, *overrides, f"executor.address={address}"], env=ENV, cwd=tmp,
                                    stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
            t0 = time.monotonic()
            while proc.poll() is None:
                time.sleep(1.0)
                elapsed = time.monotonic() - t0
                if every is None or elapsed < (kills + 1) * every or elapsed > seconds - every / 2:
                    continue
                kill_node(node)
                kills += 1
                time.sleep(down)
                node = start_node(address, 2)
            proc.wait(timeout=(seconds or 0) + 600)
        finally:
            if proc is not None:
                stop_run(proc)
            kill_node(node)
            err.close()
    if not (run_dir / "summary.json").exists():
        tail = (tmp / f"{algo}-{name}.stderr").read_text().strip().splitlines()[-15:]
        raise RuntimeError(f"{algo} {name}: the run wrote no summary.json; its stderr ends:\n" + "\n".join(tail))
    summary = json.loads((run_dir / "summary.json").read_text())
    at = f"{algo}/{name}"
    out = {f"{at}/stop_reason": summary["stop_reason"], f"{at}/error": summary["error"],
           f"{at}/return_mean": summary["episode_return_mean"], f"{at}/env_steps": summary["env_steps"],
           f"{at}/wall_s": summary.get("wall_time_s")}
    if every is not None:
        said = (run_dir / "cli.log").read_text()  # the run's warnings: a line per loss
        out.update({f"{at}/node_kills": kills,
                    f"{at}/warned_worker_losses": said.count("; starting a new one (restart"),
                    f"{at}/warned_shard_losses": said.count("; starting an empty one (restart"),
                    f"{at}/restarts_worker": last_scalar(run_dir, "executor/worker_restarts"),
                    f"{at}/restarts_shard": last_scalar(run_dir, "executor/replay_shard_restarts"),
                    f"{at}/lost_env_steps": last_scalar(run_dir, "executor/lost_env_steps")})
    return out


def node_chaos(tmp: Path, algos: list[str], minutes: float, every: float, down: float, seed: int,
               baseline: bool) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for algo in algos:
        chaos = node_run(tmp, "chaos", algo, seed, every, down, seconds=minutes * 60)
        figures.update(chaos)
        if baseline and chaos[f"{algo}/chaos/env_steps"]:
            base = node_run(tmp, "baseline", algo, seed, None, down, env_steps=chaos[f"{algo}/chaos/env_steps"])
            figures.update(base)
            if base[f"{algo}/baseline/return_mean"] and chaos[f"{algo}/chaos/return_mean"] is not None:
                figures[f"{algo}/ratio_return_chaos_vs_baseline"] = round(
                    chaos[f"{algo}/chaos/return_mean"] / base[f"{algo}/baseline/return_mean"], 3)
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=("process", "node"), default="process")
    parser.add_argument("--algos", default="apex,impala,ppo", help="--target node: the algorithms, one run each")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=None,
                        help="seconds between kills (default: 30 for processes, 60 for nodes)")
    parser.add_argument("--down", type=float, default=10.0, help="--target node: seconds before a new node joins")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", action="store_true", help="first the same run without kills")
    parser.add_argument("--smoke", action="store_true", help="a 40 s run, a kill every 10 s: checks the path only")
    args = parser.parse_args(argv)
    if args.every is None:
        args.every = 60.0 if args.target == "node" else 30.0
    if args.smoke:
        args.minutes, args.every = 40 / 60, 10.0
    figures: dict[str, Any] = {"target": args.target, "minutes": args.minutes, "every_s": args.every,
                               "seed": args.seed, "load_average_before": load_average()}
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        if args.target == "node":
            figures["down_s"] = args.down
            figures.update(node_chaos(Path(tmp), args.algos.split(","), args.minutes, args.every, args.down,
                                      args.seed, args.baseline))
        elif args.baseline:
            figures.update(one_run(Path(tmp), "baseline", args.minutes * 60, None, args.seed))
        if args.target == "process":
            figures.update(one_run(Path(tmp), "chaos", args.minutes * 60, args.every, args.seed))
    if figures.get("baseline/return_mean") and figures.get("chaos/return_mean") is not None:
        figures["ratio_return_chaos_vs_baseline"] = round(figures["chaos/return_mean"]
                                                          / figures["baseline/return_mean"], 3)
    figures["load_average_after"] = load_average()
    if args.smoke:
        return figures
    command = "python -m benchmarks.chaos " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("chaos", figures, command)
    return figures


if __name__ == "__main__":
    main()
