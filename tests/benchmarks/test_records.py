"""Result records (benchmarks/records.py, benchmarks/common.py): the schema every benchmark writes, result files and
how figures are flattened."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from suite_records import HARDWARE, record, suite_data

from benchmarks.records import (
    SchemaError,
    check_record,
    flatten_figures,
    numeric_figures,
    read_records,
    records_of,
    result_files,
    suite_files,
)


def test_write_result_writes_the_schema_for_the_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.common import OUT_ENV, write_result

    out = tmp_path / "collected.json"
    monkeypatch.setenv(OUT_ENV, str(out))
    path = write_result("demo", {"ratio/x": 0.5, "nested": {"frames_per_s": 10}}, "python -m benchmarks.demo")
    assert path == out
    [rec] = read_records(out)
    assert rec["benchmark"] == "demo" and rec["command"] == "python -m benchmarks.demo"
    assert {"cpu", "cores", "gpu", "versions", "commit", "date"} <= set(rec["hardware"])
    assert rec["hardware"]["versions"]["torch"].startswith("2.13")
    assert len(rec["load_average"]) in (0, 3)
    assert not list(tmp_path.glob("*-demo.json"))  # under the runner nothing else is written


def test_standalone_runs_of_one_benchmark_on_one_commit_keep_every_result(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.common import LOG_ENV, OUT_ENV, RESULTS_ENV, write_result

    monkeypatch.delenv(OUT_ENV, raising=False)
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    monkeypatch.setenv(LOG_ENV, "0")
    paths = [write_result("demo", {"x": float(i)}, "python -m benchmarks.demo") for i in range(3)]
    assert [p.name.split("-demo")[1] for p in paths] == [".json", "-2.json", "-3.json"]
    assert [read_records(p)[0]["figures"]["x"] for p in paths] == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("broken, message", [
    ({"command": "c", "hardware": HARDWARE, "figures": {}}, "missing key 'benchmark'"),
    ({"benchmark": "b", "command": "c", "hardware": {"cpu": "x"}, "figures": {}}, "hardware lacks"),
    ({"benchmark": "b", "command": "c", "hardware": HARDWARE, "figures": []}, "'figures' must be a dict"),
    ({"benchmark": "b", "command": "c", "hardware": HARDWARE, "figures": {}, "status": "meh"}, "status 'meh'")])
def test_records_outside_the_schema_are_refused(broken: dict, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        check_record(broken)


def test_suite_files_and_single_records_read_alike() -> None:
    rec = record("a", {"x": 1})
    assert records_of(rec) == [rec] and records_of(suite_data([rec])) == [rec]
    with pytest.raises(SchemaError, match="schema"):
        records_of({**suite_data([rec]), "schema": "other/9"})


def test_result_files_are_ordered_by_date_and_other_json_files_do_not_stop_the_listing(tmp_path: Path) -> None:
    """Oldest first by the recorded date; a JSON file that is not a fingerprinted record (a list, a note whose
    hardware is a sentence, broken JSON) sorts first and is not a suite file."""
    new, old = suite_data([record("a", {})]), suite_data([record("a", {})])
    new["date"], old["date"] = "2026-11-28T10:00:00", "2026-11-21T10:00:00"
    (tmp_path / "b-new.json").write_text(json.dumps(new))
    (tmp_path / "c-old.json").write_text(json.dumps(old))
    (tmp_path / "a-note.json").write_text(json.dumps({"hardware": "Intel Xeon, 2 cores", "figures": {}}))
    (tmp_path / "d-list.json").write_text("[1, 2]")
    (tmp_path / "e-broken.json").write_text("{")
    (tmp_path / "baseline.json").write_text("{}")
    names = [p.name for p in result_files(tmp_path)]
    assert names[-2:] == ["c-old.json", "b-new.json"] and "baseline.json" not in names and len(names) == 5
    assert [p.name for p in suite_files(tmp_path)] == ["c-old.json", "b-new.json"]


def test_figures_flatten_and_only_finite_numbers_are_logged() -> None:
    figures = {"pong": {"x1": {"frames_per_s": 3000.0, "blocks": [1, 2]}}, "ok": True, "n": 3, "bad": math.nan,
               "note": "text", "none": None}
    assert flatten_figures(figures)["pong/x1/frames_per_s"] == 3000.0
    assert numeric_figures(figures) == {"pong/x1/frames_per_s": 3000.0, "n": 3.0}
