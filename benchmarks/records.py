"""The result schema: one *record* per benchmark run, and the files that hold records.

A record (what ``benchmarks.common.write_result`` writes, and what the runner adds to)::

    {"benchmark": "learner_throughput",              # the suite name of the benchmark
     "command": "python -m benchmarks.learner_throughput --quick",   # how to measure it again
     "hardware": {...},                               # rlrun.fingerprint: cpu, cores, gpu, python, versions,
                                                      #   commit, date
     "figures": {"ratio/...": 0.99, ...},             # numbers (nested dicts allowed: flattened with "/")
     "load_average": [1min, 5min, 15min],             # optional: at the end of the run
     "status": "ok" | "failed" | "timeout" | "unavailable",   # optional (runner): missing means ok
     "error": "...", "wall_time_s": 12.3, "notes": [...]}     # optional (runner)

Files: a standalone run writes one record, ``<date>-<commit>-<benchmark>.json``; a suite run (``rlrun-bench ci``)
writes ``<date>-<commit>.json``, a *suite file* ``{"schema", "suite", "command", "hardware", "date",
"wall_time_s", "load_average", "results": [records], "comparison": {...}}``. :func:`read_records` reads either.

Figure names carry their unit (``.../env_steps_per_s/...``, ``..._ms``); dimensionless figures measured within one
run are named ``ratio/...`` or ``fraction...`` (first path segment): only those may be compared with a baseline
(:func:`is_same_run_ratio`), never absolute times or speeds measured on another machine or day.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

SCHEMA = "rlrun-bench/1"
STATUSES = ("ok", "failed", "timeout", "unavailable")
RATIO_PREFIXES = ("ratio", "fraction")
HARDWARE_KEYS = ("cpu", "cores", "gpu", "python", "versions", "commit", "date")


class SchemaError(ValueError):
    """A result record or file that does not follow the schema (the message names the key)."""


def flatten_figures(figures: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested figure dicts joined with "/": ``{"pong/x1": {"fps": 3}}`` -> ``{"pong/x1/fps": 3}``."""
    out: dict[str, Any] = {}
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_figures(value, name + "/"))
        else:
            out[name] = value
    return out


def numeric_figures(figures: dict[str, Any]) -> dict[str, float]:
    """The flattened figures that are finite numbers (bools, strings, lists and NaN/inf left out)."""
    out = {}
    for key, value in flatten_figures(figures).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            out[key] = float(value)
    return out


def is_same_run_ratio(figure: str) -> bool:
    """Whether a figure is a dimensionless ratio of two quantities measured in the same run (so it may be compared
    across runs and machines): its first path segment starts with ``ratio`` or ``fraction``.

    >>> is_same_run_ratio("ratio/env_steps_per_s/tensorboard_vs_none"), is_same_run_ratio("build_ms/agent")
    (True, False)
    """
    return figure.split("/", 1)[0].startswith(RATIO_PREFIXES)


def check_record(record: Any) -> dict[str, Any]:
    """Raise SchemaError unless ``record`` follows the record schema; return it."""
    if not isinstance(record, dict):
        raise SchemaError(f"a record must be a JSON object, got {type(record).__name__}")
    for key, kind in (("benchmark", str), ("command", str), ("hardware", dict), ("figures", dict)):
        if key not in record:
            raise SchemaError(f"record {record.get('benchmark', '?')}: missing key '{key}'")
        if not isinstance(record[key], kind):
            raise SchemaError(f"record {record.get('benchmark', '?')}: '{key}' must be a {kind.__name__}")
    missing = [k for k in HARDWARE_KEYS if k not in record["hardware"]]
    if missing:
        raise SchemaError(f"record {record['benchmark']}: hardware lacks {', '.join(missing)} (rlrun.fingerprint)")
    status = record.get("status", "ok")
    if status not in STATUSES:
        raise SchemaError(f"record {record['benchmark']}: status '{status}' is not one of {', '.join(STATUSES)}")
    return record


def records_of(data: Any) -> list[dict[str, Any]]:
    """The records of a loaded result file: a suite file's ``results``, or the file itself if it is a record."""
    if isinstance(data, dict) and "results" in data:
        if data.get("schema") != SCHEMA:
            raise SchemaError(f"suite file schema is {data.get('schema')!r}, expected {SCHEMA!r}")
        return [check_record(r) for r in data["results"]]
    return [check_record(data)]


def read_records(path: str | Path) -> list[dict[str, Any]]:
    return records_of(json.loads(Path(path).read_text()))


def result_files(folder: str | Path) -> list[Path]:
    """The result files in a folder (``*.json`` but the baseline), oldest first by their recorded date."""
    files = [p for p in Path(folder).glob("*.json") if p.name != "baseline.json"]

    def date(p: Path) -> str:
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            return ""
        if not isinstance(data, dict):
            return ""
        hardware = data.get("hardware")  # a note's hardware may be a sentence, not a fingerprint
        return str(data.get("date") or (hardware.get("date") if isinstance(hardware, dict) else None) or "")

    return sorted(files, key=lambda p: (date(p), p.name))


def suite_files(folder: str | Path) -> list[Path]:
    """The suite files (``rlrun-bench ci`` and friends) in a folder, oldest first."""
    out = []
    for p in result_files(folder):
        try:
            if "results" in json.loads(p.read_text()):
                out.append(p)
        except (OSError, ValueError):
            continue
    return out


def iter_all_records(folder: str | Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``(file, record)`` for every readable record in the folder's result files, oldest file first; files that
    are not result files are skipped."""
    for path in result_files(folder):
        try:
            for record in read_records(path):
                yield path, record
        except (OSError, ValueError):
            continue
