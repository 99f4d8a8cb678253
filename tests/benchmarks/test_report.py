"""Markdown from result files (benchmarks/report.py): the suite's table and the Performance page's block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_records import baseline_of, record, suite_data

from benchmarks import baseline as bl
from benchmarks.report import END, START, MarkerError, replace_between_markers, suite_markdown, update_readme
from benchmarks.suite import Benchmark

README = f"# Project\n\nIntro.\n\n## Performance\n\nHow to run.\n\n{START}\nold table\n{END}\n\n## Next\n\nMore.\n"
DEMO = Benchmark("demo", "benchmarks.demo", "s", goals={"ratio/*": 0.97},
                 headline=("frames_per_s/*", "ratio/*"))

def test_readme_is_regenerated_between_the_markers_only(tmp_path: Path) -> None:
    """The block between the markers holds the headline figures of the suite's benchmarks, with their commands and
    goals, and what was not measured; a benchmark retired from the suite since that run is left out."""
    readme = tmp_path / "README.md"
    readme.write_text(README)
    result = tmp_path / "benchmarks" / "results" / "2026-11-21-abc1234.json"
    result.parent.mkdir(parents=True)
    rec = record("demo", {"frames_per_s": {"none": 2300.0}, "ratio/frames_per_s/tensorboard_vs_none": 0.99,
                          "start_ms/none": 1.0}, command="python -m benchmarks.demo --quick")
    retired = record("retired", {"frames_per_s/x": 1.0}, command="python -m benchmarks.retired")
    later = Benchmark("later", "benchmarks.later", "s")
    result.write_text(json.dumps(suite_data([rec, retired, record("later", {}, status="unavailable")])))
    assert update_readme(readme, result, (DEMO, later), root=tmp_path)
    text = readme.read_text()
    before, after = README.split(START)[0], README.split(END)[1]
    assert text.startswith(before + START) and text.endswith(END + after)
    block = text.split(START)[1].split(END)[0]
    assert "old table" not in block and "benchmarks/results/2026-11-21-abc1234.json" in block
    assert ("| demo | `frames_per_s/none` | 2,300 |  | `python -m benchmarks.demo --quick` |"
            in block)  # name and command on the benchmark's first row
    assert "|  | `ratio/frames_per_s/tensorboard_vs_none` | 0.990 | ≥ 0.97 (met) |  |" in block
    assert "Test CPU, 2 cores, GPU: none" in block and "torch 2.13.0+cpu" in block and "commit abc1234" in block
    assert "start_ms" not in block  # headline figures only; the .md file has them all
    assert "`later`: unavailable" in block
    assert "retired" not in block
    assert not update_readme(readme, result, (DEMO, later), root=tmp_path)  # idempotent


@pytest.mark.parametrize("text", ["no markers", f"{END}\nreversed\n{START}", f"{START} only"])
def test_readme_without_markers_is_an_error(text: str) -> None:
    with pytest.raises(MarkerError):
        replace_between_markers(text, "x")


def test_suite_markdown_shows_goals_baseline_and_what_was_not_measured() -> None:
    base = baseline_of({"a": {"ratio/x": (1.0, 0.2)}})
    records = [record("a", {"ratio/x": 0.5, "frames_per_s": 1234.5}), record("b", {}, status="failed")]
    records[1]["error"] = "exit status 1:\nTraceback ...\nRuntimeError: boom"
    data = suite_data(records, {"baseline": "b.json", **bl.compare(records, base).to_json()})
    md = suite_markdown(data, (Benchmark("a", "m", "s", goals={"ratio/*": 0.9}),))
    assert "| a | `ratio/x` | 0.500 | ≥ 0.9 (not met) | 1.000 (≥ 0.800) **FELL** |" in md
    assert "| a | `frames_per_s` | 1,234 |" in md
    assert "**b**: failed: RuntimeError: boom" in md and "1 fell" in md
    assert "load average (1 / 5 / 15 min): before 1.50 / 1.20 / 1.00, after 2.00 / 1.40 / 1.10" in md
