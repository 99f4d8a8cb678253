"""benchmarks/plots.py: PNGs over commits from the result files."""

from __future__ import annotations

import json
from pathlib import Path

from suite_records import HARDWARE, record, suite_data


def test_plots_are_drawn_from_the_result_files(tmp_path: Path) -> None:
    from benchmarks.plots import collect, plot_all

    for i, (commit, fps, frac) in enumerate((("aaa1111", 900.0, 0.7), ("bbb2222", 1000.0, 0.8))):
        hw = {**HARDWARE, "commit": commit, "date": f"2026-11-2{i}T00:00:00+00:00"}
        data = suite_data([{**record("actors", {"pong/x1/frames_per_s/rlrun_local": fps,
                                                "fraction_of_limit/pong/x1/local": frac}), "hardware": hw}])
        data["date"] = hw["date"]
        (tmp_path / f"{commit}.json").write_text(json.dumps(data))
    (tmp_path / "baseline.json").write_text("{}")  # not a result file
    (tmp_path / "other.json").write_text(json.dumps(record("env", {"cartpole/1env/frames_per_s": 1e5})))
    labels, series = collect(tmp_path)["actors"]
    assert labels == ["2026-11-20\naaa1111", "2026-11-21\nbbb2222"]  # only the files that hold the benchmark
    assert series["fraction_of_limit/pong/x1/local"] == {0: 0.7, 1: 0.8}
    pngs = plot_all(tmp_path, tmp_path / "plots")
    assert [p.name for p in pngs] == ["actors.png", "env.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
