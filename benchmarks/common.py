"""What every benchmark shares: the hardware/software fingerprint, timing helpers, and the JSON result file."""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from rlrun.fingerprint import fingerprint as _fingerprint

RESULTS = Path(__file__).parent / "results"

# Environment variables of the suite runner (benchmarks/runner.py, ``rlrun-bench``); unset for a standalone run.
RESULTS_ENV = "RLRUN_BENCH_RESULTS"  # results folder instead of benchmarks/results (tests point it at a tmp dir)
OUT_ENV = "RLRUN_BENCH_OUT"  # the runner collects the record from this file (and logs it itself)
LOG_ENV = "RLRUN_BENCH_LOG"  # "0": a standalone run does not log its figures to TensorBoard/MLflow


def results_dir() -> Path:
    """Where result files go: ``$RLRUN_BENCH_RESULTS`` if set, else ``benchmarks/results``."""
    return Path(os.environ.get(RESULTS_ENV) or RESULTS)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (other work on the shared cores skews every figure)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        return []


def fingerprint() -> dict[str, Any]:
    """The hardware/software fingerprint (rlrun.fingerprint), with this checkout's git commit."""
    return _fingerprint(str(Path(__file__).resolve().parent))


def alternating_ratios(fn: Callable[[], Any], baseline: Callable[[], Any], rounds: int = 7, min_time_s: float = 0.2,
                       clocks: dict[str, Callable[[], float]] | None = None) -> dict[str, tuple[float, float, float]]:
    """``fn`` and ``baseline`` timed in rounds of alternating single calls (fn, baseline, baseline, fn, ...), so a
    burst of other work on the shared cores hits both sides alike. Each call is timed on every clock
    (default: ``wall`` = perf_counter and ``cpu`` = this thread's CPU time, which other processes on the cores
    barely disturb); per clock: (median fn time, median baseline time, median of per-round ratios fn/baseline).
    For calls of a millisecond or more; each round spends about ``min_time_s`` on the two together."""
    clocks = clocks or {"wall": time.perf_counter, "cpu": time.thread_time}
    fn()
    baseline()
    start = time.perf_counter()
    fn()
    baseline()
    calls = max(int(min_time_s / max(time.perf_counter() - start, 1e-9)), 1)
    per_round: dict[str, list[tuple[float, float]]] = {name: [] for name in clocks}
    for _ in range(rounds):
        spent = {name: [0.0, 0.0] for name in clocks}
        for i in range(calls):
            for side, f in (((0, fn), (1, baseline)) if i % 2 == 0 else ((1, baseline), (0, fn))):
                t0 = {name: clock() for name, clock in clocks.items()}
                f()
                for name, clock in clocks.items():
                    spent[name][side] += clock() - t0[name]
        for name in clocks:
            per_round[name].append((spent[name][0] / calls, spent[name][1] / calls))
    return {name: (statistics.median(a for a, _ in rows), statistics.median(b for _, b in rows),
                   statistics.median(a / b for a, b in rows)) for name, rows in per_round.items()}


def alternating_ratio(fn: Callable[[], Any], baseline: Callable[[], Any], rounds: int = 7,
                      min_time_s: float = 0.2) -> tuple[float, float, float]:
    """:func:`alternating_ratios` on the wall clock only: (median fn time, median baseline time, median ratio)."""
    return alternating_ratios(fn, baseline, rounds, min_time_s, {"wall": time.perf_counter})["wall"]


def write_result(name: str, figures: dict[str, Any], command: str) -> Path:
    """Write one result record ``{"benchmark", "command", "hardware", "figures", "load_average"}`` as JSON.

    Standalone: to ``<results>/<date>-<commit>-<name>.json`` (``-2``, ``-3``, ... for further runs of the day), then
    its numeric figures are logged to TensorBoard (``<results>/tb/``) and MLflow (benchmarks/tracking.py;
    ``RLRUN_BENCH_LOG=0`` turns that off). Under the suite
    runner (``$RLRUN_BENCH_OUT`` set): to that file only; the runner merges, compares and logs the records.
    """
    fp = fingerprint()
    record = {"benchmark": name, "command": command, "hardware": fp, "figures": figures,
              "load_average": load_average()}
    text = json.dumps(record, indent=2, sort_keys=True, default=_json_default) + "\n"
    collected = os.environ.get(OUT_ENV)
    if collected:
        path = Path(collected)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    path = folder / f"{stamp}-{fp['commit'] or 'nocommit'}-{name}.json"
    run = 2
    while path.exists():  # another run of the same benchmark on the same commit and day: keep both
        path = folder / f"{stamp}-{fp['commit'] or 'nocommit'}-{name}-{run}.json"
        run += 1
    path.write_text(text)
    if os.environ.get(LOG_ENV, "1") != "0":
        try:
            from benchmarks.tracking import log_records

            log_records([record], folder, suite=name, command=command)
        except Exception as e:  # noqa: BLE001 - the JSON file is written; logging is a convenience
            print(f"rlrun-bench: warning: logging {name} to TensorBoard/MLflow failed: {e}", file=sys.stderr)
    return path


def _json_default(value: Any) -> Any:
    """numpy scalars and other number-likes in figures are written as plain numbers (else as text)."""
    if type(value).__name__ == "bool_":  # numpy bool
        return bool(value)
    for cast in (int, float):
        try:
            if cast(value) == value:
                return cast(value)
        except (TypeError, ValueError):
            pass
    return str(value)


def publish(name: str, figures: dict[str, Any], command: str,
            show: Callable[[str], bool] = lambda key: True) -> Path:
    """Write the result file, print the float figures that ``show`` selects, and say where the file went."""
    import sys

    path = write_result(name, figures, command.strip())
    for key, value in figures.items():
        if isinstance(value, float) and show(key):
            print(f"{key:55s} {value:12.4f}")
    print(f"wrote {path}", file=sys.stderr)
    return path
