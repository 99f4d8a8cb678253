"""Soak: Ape-X on Pong with ``executor=ray`` for an hour, memory sampled every minute; does anything grow?

RLlib's Ape-X and IMPALA were known to fill Ray's object store or grow to tens of GB over long runs (ray#8227,
ray#4498). This benchmark runs the headline command, ``rlrun algo=apex env=pong executor=ray``, joined to a
``ray start --head`` cluster of its own (so its object store can be read from outside the run), and every
``--every`` seconds samples

- the PSS (proportional set size: shared pages split between their sharers, so the sum over processes is the
  memory the run really holds) of every process of the run: the driver (learner, in ``rlrun``'s process), the Ray
  worker processes (rollout workers and replay shards: ``ray::`` in their command line) and Ray's own (GCS, raylet,
  agents), from ``/proc/<pid>/smaps_rollup``;
- the object store's use (``ray memory --stats-only``: the plasma bytes of the objects in it).

Result: per series, the least-squares slope (MiB per hour) over the samples after ``--warmup`` minutes and that
slope as a fraction of the series' level at the end of the warm-up (``growth_per_hour/<series>``; goal < 0.05).
The replay capacity is lowered (``--buffer-size``, default 100k transitions, ~0.8 GB) so that the replay is full
before the warm-up ends: a replay filling up is growth by design, not a leak.

    python -m benchmarks.soak [--minutes 60] [--every 60] [--warmup 15] [--buffer-size 100000]
    python -m benchmarks.soak --smoke   # a 1-minute run of CartPole Ape-X: checks the path
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import load_average, publish
from benchmarks.peers.processes import process_tree
from benchmarks.ray_head import ENV, RAY_CLI, RLRUN, ray_head, stop_run

SERIES = ("driver", "ray_workers", "ray_system", "total", "object_store")


def pss_mib(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0.0
    m = re.search(r"^Pss:\s+(\d+) kB", text, re.MULTILINE)
    return int(m.group(1)) / 1024 if m else 0.0


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def object_store_mib(address: str) -> float | None:
    """Plasma bytes in use, from ``ray memory --stats-only`` ("Plasma memory usage N MiB, M objects")."""
    out = subprocess.run([RAY_CLI, "memory", "--stats-only", f"--address={address}"], env=ENV, capture_output=True,
                         text=True, timeout=60)
    m = re.search(r"Plasma memory usage (\d+(?:\.\d+)?) MiB", out.stdout)
    return float(m.group(1)) if m else None


def sample(driver: int, head: int, address: str) -> dict[str, float | None]:
    out = {"driver": 0.0, "ray_workers": 0.0, "ray_system": 0.0}
    for pid in set(process_tree(driver)) | set(process_tree(head)):
        mib = pss_mib(pid)
        if pid == driver:
            out["driver"] += mib
        elif "ray::" in cmdline(pid):
            out["ray_workers"] += mib
        else:
            out["ray_system"] += mib
    out["total"] = out["driver"] + out["ray_workers"] + out["ray_system"]
    out["object_store"] = object_store_mib(address)
    return out


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) points, in MiB per hour."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return 0.0 if var == 0 else 3600 * sum((t - mt) * (v - mv) for t, v in points) / var


def summarise(samples: list[dict[str, Any]], warmup_s: float) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for series in SERIES:
        points = [(s["t"], s[series]) for s in samples if s["t"] >= warmup_s and s.get(series) is not None]
        if len(points) < 3:
            continue
        slope = slope_per_hour(points)
        level = points[0][1]
        figures[f"slope_mib_per_hour/{series}"] = round(slope, 2)
        figures[f"level_mib_after_warmup/{series}"] = round(level, 1)
        figures[f"level_mib_at_end/{series}"] = round(points[-1][1], 1)
        figures[f"growth_per_hour/{series}"] = round(slope / level, 4) if level > 0 else None
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=15.0, help="minutes left out of the slopes")
    parser.add_argument("--buffer-size", type=int, default=100_000, help="replay capacity (full before the warmup)")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the Ray cluster")
    parser.add_argument("--smoke", action="store_true", help="1 minute of CartPole Ape-X: checks the path only")
    args = parser.parse_args(argv)
    if args.smoke:
        args.minutes, args.every, args.warmup = 1.0, 10.0, 0.0
    run_overrides = (["algo=apex", "executor=ray", "stop.env_steps=100000000", "logger=none",
                      "logger.console.enabled=false", "export.formats=[]"] if args.smoke else
                     ["algo=apex", "env=pong", "executor=ray", f"algo.buffer_size={args.buffer_size}",
                      "stop.env_steps=1000000000", "logger.mlflow.enabled=false", "export.formats=[]",
                      "checkpoint.at_end=false"])
    figures: dict[str, Any] = {"minutes": args.minutes, "every_s": args.every, "warmup_min": args.warmup,
                               "buffer_size": None if args.smoke else args.buffer_size, "cpus": args.cpus,
                               "command": "rlrun " + " ".join(run_overrides) + " executor.address=<the head>",
                               "load_average_before": load_average()}
    samples: list[dict[str, Any]] = []
    # the object store of conf/algo_env/apex_executor/ray.yaml (a joined cluster ignores executor.object_store_memory)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp, ray_head(args.cpus, 2_000_000_000) as (address, head):
        stderr = Path(tmp) / "stderr.txt"
        with open(stderr, "w") as err:
            driver = subprocess.Popen([RLRUN, *run_overrides, f"executor.address={address}",
                                       f"hydra.run.dir={tmp}/run"], env=ENV, cwd=tmp, stdout=subprocess.DEVNULL,
                                      stderr=err, start_new_session=True)
        try:
            t0 = time.monotonic()
            while time.monotonic() - t0 < args.minutes * 60:
                time.sleep(max(0.0, args.every - (time.monotonic() - t0) % args.every))
                if driver.poll() is not None:
                    raise RuntimeError(f"the run ended early (exit {driver.returncode}): "
                                       f"{stderr.read_text()[-2000:]}")
                s = sample(driver.pid, head.pid, address)
                s["t"] = round(time.monotonic() - t0, 1)
                samples.append(s)
                print(json.dumps(s), file=sys.stderr, flush=True)
        finally:
            stop_run(driver)
    figures.update(summarise(samples, args.warmup * 60))
    figures["samples"] = samples
    figures["load_average_after"] = load_average()
    if args.smoke:
        return figures
    command = "python -m benchmarks.soak " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("soak", figures, command, show=lambda key: key.startswith(("growth", "slope")))
    return figures


if __name__ == "__main__":
    main()
