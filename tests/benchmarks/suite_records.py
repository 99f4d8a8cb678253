"""Records, suite files and baselines in the runner's schema, for the tests of benchmarks/."""

from __future__ import annotations

from benchmarks.records import SCHEMA

HARDWARE = {"cpu": "Test CPU", "cores": 2, "gpu": None, "python": "3.11.7", "commit": "abc1234",
            "date": "2026-11-21T12:00:00+00:00", "versions": {"torch": "2.13.0+cpu", "gymnasium": "1.4.0"}}


def record(name: str, figures: dict, status: str = "ok", command: str = "python -m benchmarks.x") -> dict:
    return {"benchmark": name, "command": command, "hardware": HARDWARE, "figures": figures, "status": status}


def suite_data(records: list[dict], comparison: dict | None = None) -> dict:
    data = {"schema": SCHEMA, "suite": "ci", "command": "rlrun-bench ci", "hardware": HARDWARE,
            "date": HARDWARE["date"], "wall_time_s": 300.0, "load_average": {"before": [1.5, 1.2, 1.0],
                                                                             "after": [2.0, 1.4, 1.1]},
            "results": records}
    if comparison is not None:
        data["comparison"] = comparison
    return data


def baseline_of(entries: dict[str, dict[str, tuple[float, float]]]) -> dict:
    return {"benchmarks": {b: {f: {"value": v, "tolerance": t} for f, (v, t) in figs.items()}
                           for b, figs in entries.items()}}
