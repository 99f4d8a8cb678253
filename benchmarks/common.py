"""What every benchmark shares: the hardware/software fingerprint, timing helpers, and the JSON result file."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

RESULTS = Path(__file__).parent / "results"


def fingerprint() -> dict[str, Any]:
    import importlib.metadata as md

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for pkg in ("torch", "numpy", "gymnasium", "ale-py", "ray", "hydra-core", "mlflow-skinny"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    gpu = None
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu, "python": platform.python_version(),
            "versions": versions, "commit": commit, "date": dt.datetime.now(dt.timezone.utc).isoformat()}


def time_per_call(fn: Callable[[], Any], min_time_s: float = 0.2, repeats: int = 5) -> float:
    """Median seconds per call of ``fn`` over ``repeats`` timed blocks of at least ``min_time_s`` each."""
    fn()
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time_s / 4:
            break
        n *= 2
    n = max(int(n * (min_time_s / max(elapsed, 1e-9)) / 4) if elapsed < min_time_s else n, 1)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n)
    return statistics.median(samples)


def interleaved_ratio(fn: Callable[[], Any], baseline: Callable[[], Any], rounds: int = 7,
                      min_time_s: float = 0.1) -> tuple[float, float, float]:
    """(median fn time, median baseline time, median of per-round ratios), the two timed alternately so that
    machine noise hits both alike."""
    a, b, r = [], [], []
    for _ in range(rounds):
        ta = time_per_call(fn, min_time_s, 1)
        tb = time_per_call(baseline, min_time_s, 1)
        a.append(ta)
        b.append(tb)
        r.append(ta / tb)
    return statistics.median(a), statistics.median(b), statistics.median(r)


def write_result(name: str, figures: dict[str, Any], command: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    fp = fingerprint()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    path = RESULTS / f"{stamp}-{fp['commit'] or 'nocommit'}-{name}.json"
    path.write_text(json.dumps({"benchmark": name, "command": command, "hardware": fp, "figures": figures},
                               indent=2, sort_keys=True) + "\n")
    return path
