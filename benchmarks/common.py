"""What every benchmark shares: the hardware/software fingerprint, timing helpers, and the JSON result file."""

from __future__ import annotations

import datetime as dt
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from rlrun.fingerprint import fingerprint as _fingerprint

RESULTS = Path(__file__).parent / "results"


def fingerprint() -> dict[str, Any]:
    """The hardware/software fingerprint (rlrun.fingerprint), with this checkout's git commit."""
    return _fingerprint(str(Path(__file__).resolve().parent))


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
