"""Markdown from result files (benchmarks/report.py): the suite's table and the Performance page's block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_records import baseline_of, record, suite_data

from benchmarks import baseline as bl
from benchmarks.report import (
    END,
    START,
    MarkerError,
    readme_section,
    replace_between_markers,
    suite_markdown,
    update_readme,
)
from benchmarks.suite import Benchmark

README = f"# Project\n\nIntro.\n\n## Performance\n\nHow to run.\n\n{START}\nold table\n{END}\n\n## Next\n\nMore.\n"
DEMO = Benchmark("demo", "benchmarks.demo", "s", goals={"ratio/*": 0.97},
                 headline=("frames_per_s/*", "ratio/*"), retired=("*/old_case",))

def test_readme_is_regenerated_between_the_markers_only(tmp_path: Path) -> None:
    """The block between the markers holds the headline figures of the suite's benchmarks, with their commands and
    goals, and what was not measured; a benchmark retired from the suite since that run is left out, and so is a
    case a benchmark retired."""
    readme = tmp_path / "README.md"
    readme.write_text(README)
    result = tmp_path / "benchmarks" / "results" / "2026-11-21-abc1234.json"
    result.parent.mkdir(parents=True)
    rec = record("demo", {"frames_per_s": {"none": 2300.0, "old_case": 9.0},
                          "ratio/frames_per_s/tensorboard_vs_none": 0.99, "start_ms/none": 1.0},
                 command="python -m benchmarks.demo --quick")
    retired = record("retired", {"frames_per_s/x": 1.0}, command="python -m benchmarks.retired")
    later = Benchmark("later", "benchmarks.later", "s")
    result.write_text(json.dumps(suite_data([rec, retired, record("later", {}, status="unavailable")])))
    assert update_readme(readme, result, (DEMO, later), root=tmp_path)
    text = readme.read_text()
    before, after = README.split(START)[0], README.split(END)[1]
    assert text.startswith(before + START) and text.endswith(END + after)
    block = text.split(START)[1].split(END)[0]
    assert "old table" not in block and "benchmarks/results/2026-11-21-abc1234.json" in block
    assert "(`demo`: `python -m benchmarks.demo --quick`)" in block  # its name and command above its table
    assert "| `frames_per_s/none` | 2,300 |  |" in block  # no table declared: a row per headline figure
    assert "| `ratio/frames_per_s/tensorboard_vs_none` | 0.990 | ≥ 0.97 (met) |" in block
    assert "Test CPU, 2 cores, GPU: none" in block and "torch 2.13.0+cpu" in block and "commit abc1234" in block
    assert "start_ms" not in block  # headline figures only; the .md file has them all
    assert "`later`: unavailable" in block
    assert "retired" not in block and "old_case" not in block
    assert not update_readme(readme, result, (DEMO, later), root=tmp_path)  # idempotent


def test_a_declared_table_puts_cases_in_rows_and_figures_in_columns() -> None:
    """``Benchmark.table``: a row per value of the braced parts, a column per heading (two patterns may share one),
    a goal all of a column's rows share in its heading and a goal only some rows have in their cells; a case
    without a figure leaves its cell empty."""
    bench = Benchmark("peers", "m", "s", title="Beside the peers",
                      goals={"ratio/*/sb3_over_rlrun": 2.0},
                      table=(("time (s)", "{task}/{who}/time_s"),
                             ("its time / rlrun's", "ratio/{task}/{who}_over_rlrun"),
                             ("start-up (s)", "{task}/{who}/first_episode_s"),
                             ("start-up (s)", "{task}/{who}/startup_s")))
    figures = {"cartpole/rlrun/time_s": 3.0, "cartpole/sb3/time_s": 5.7, "ratio/cartpole/sb3_over_rlrun": 1.9,
               "ratio/cartpole/cleanrl_over_rlrun": 6.0, "cartpole/rlrun/first_episode_s": 1.0,
               "pong/rlrun/startup_s": 2.5, "cartpole/rlrun/peak_rss_mib": 260.0}
    block = readme_section(suite_data([record("peers", figures)]), "x.json", (bench,))
    assert "**Beside the peers** (`peers`: `python -m benchmarks.x`)" in block
    assert "| task / who | time (s) | its time / rlrun's | start-up (s) |" in block
    assert "| cartpole / rlrun | 3.000 |  | 1.000 |" in block
    assert "| cartpole / sb3 | 5.700 | 1.900 (**goal ≥ 2: not met**) |  |" in block  # this row's goal only
    assert "| cartpole / cleanrl |  | 6.000 |  |" in block and "| pong / rlrun |  |  | 2.500 |" in block
    assert "peak_rss" not in block  # a figure no column names is left to the run's own .md file
    shared = Benchmark("l", "m", "s", goals={"ratio/*": 0.9}, table=(("rlrun / bare", "ratio/{case}"),))
    block = readme_section(suite_data([record("l", {"ratio/a": 0.95, "ratio/b": 0.8})]), "x.json", (shared,))
    assert "| case | rlrun / bare (goal ≥ 0.9) |" in block  # every row's goal: in the heading
    assert "| a | 0.950 |" in block and "| b | 0.800 (**not met**) |" in block


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
