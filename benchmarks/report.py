"""Markdown from result files: the full table of a suite run (``<date>-<commit>.md``, printed by the runner) and the
Performance page's block (docs/results/performance.md), a short table per benchmark, regenerated between
``<!-- perf:start -->`` and ``<!-- perf:end -->``."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Any

from benchmarks.records import flatten_figures, numeric_figures
from benchmarks.suite import SUITE, Benchmark, by_name

START, END = "<!-- perf:start -->", "<!-- perf:end -->"


class MarkerError(ValueError):
    """The README lacks the Performance markers (or has them out of order)."""


def fmt(value: Any) -> str:
    """A figure as a table cell: large numbers with thousands separators, ratios with 3 decimals."""
    if isinstance(value, bool) or value is None:
        return "–" if value is None else str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.1f}"
        if abs(value) >= 10:
            return f"{value:.2f}"
        return f"{value:.3f}"
    if isinstance(value, list):
        return ", ".join(fmt(v) for v in value)
    return str(value).replace("|", "\\|")


def hardware_line(hw: dict[str, Any]) -> str:
    v = hw.get("versions", {})
    packages = ", ".join(f"{k} {v[k]}" for k in ("torch", "gymnasium", "ale-py", "ray", "numpy") if v.get(k))
    return (f"{hw.get('cpu') or 'unknown CPU'}, {hw.get('cores')} cores, GPU: {hw.get('gpu') or 'none'}; "
            f"Python {hw.get('python')}, {packages}; commit {hw.get('commit') or 'unknown'}")


def load_line(load: Any) -> str:
    if isinstance(load, dict):
        return f"before {fmt_load(load.get('before'))}, after {fmt_load(load.get('after'))}"
    return fmt_load(load)


def fmt_load(values: Any) -> str:
    return " / ".join(f"{x:.2f}" for x in values) if values else "unknown"


def last_line(text: str | None) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _goal_cell(bench: Benchmark | None, figure: str, value: Any) -> str:
    goal = bench.goal(figure) if bench else None
    if goal is None or not isinstance(value, (int, float)):
        return ""
    return f"≥ {goal:g} ({'met' if value >= goal else 'not met'})"


def _baseline_cells(comparison: dict[str, Any], name: str, figure: str) -> str:
    for kind in ("fell", "passed", "missing"):
        for row in comparison.get(kind, []):
            if row["benchmark"] == name and row["figure"] == figure:
                return f"{fmt(row['baseline'])} (≥ {fmt(row['floor'])}){' **FELL**' if kind == 'fell' else ''}"
    return ""


def suite_markdown(data: dict[str, Any], suite: tuple[Benchmark, ...] = SUITE) -> str:
    """Every figure of a suite file, one table, with the hardware, commands, goals and baseline comparison."""
    benches = by_name(suite)
    comparison = data.get("comparison") or {}
    lines = [f"# rlrun benchmarks: `{data.get('command')}`", "",
             f"- date: {data.get('date')}; wall time {fmt(data.get('wall_time_s'))} s",
             f"- hardware: {hardware_line(data.get('hardware', {}))}",
             f"- load average (1 / 5 / 15 min): {load_line(data.get('load_average'))}", ""]
    lines += ["| benchmark | figure | value | goal | baseline (floor) |", "| --- | --- | --- | --- | --- |"]
    notes = []
    for record in data["results"]:
        name, status = record["benchmark"], record.get("status", "ok")
        if status != "ok":
            why = "; ".join(record.get("notes", [])) or last_line(record.get("error"))
            notes.append(f"- **{name}**: {status}{': ' + why if why else ''}")
            continue
        for figure, value in flatten_figures(record["figures"]).items():
            if figure.endswith("/rounds") or figure.endswith("/seeds"):
                continue
            lines.append(f"| {name} | `{figure}` | {fmt(value)} | {_goal_cell(benches.get(name), figure, value)} | "
                         f"{_baseline_cells(comparison, name, figure)} |")
    lines += ["", "Commands:", ""]
    lines += [f"- {r['benchmark']} ({r.get('status', 'ok')}, {fmt(r.get('wall_time_s'))} s): `{r['command']}`"
              for r in data["results"] if r.get("status", "ok") != "unavailable"]
    if notes:
        lines += ["", "Not measured:", "", *notes]
    if comparison:
        fell = comparison.get("fell", [])
        lines += ["", f"Baseline comparison (same-run ratios only): {len(comparison.get('passed', []))} passed, "
                      f"{len(fell)} fell, {len(comparison.get('missing', []))} missing."]
        for row in fell:
            lines.append(f"- FELL: {row['benchmark']} `{row['figure']}` {fmt(row['current'])} < floor "
                         f"{fmt(row['floor'])} (baseline {fmt(row['baseline'])}, tolerance {row['tolerance']:.0%})")
    return "\n".join(lines) + "\n"


def _figure_regex(pattern: str) -> re.Pattern[str]:
    """``samples_per_s/{case}/rlrun`` -> a regex whose named groups are the row's parts (one path segment each)."""
    parts = re.split(r"\{(\w+)\}", pattern)
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+?)" for i, p in enumerate(parts)))


def pivot(figures: dict[str, float], columns: tuple[tuple[str, str], ...]
          ) -> tuple[list[str], list[tuple[str, dict[str, str]]]]:
    """The figures a ``Benchmark.table`` names, as (headings, rows): a row per value of the patterns' braced parts
    (in the order the figures first give them), each row its label and its figure name per heading. Pairs that
    share a heading share a column (a figure one task has and another names differently)."""
    headings = list(dict.fromkeys(h for h, _ in columns))
    rows: dict[str, dict[str, str]] = {}
    for heading, pattern in columns:
        regex = _figure_regex(pattern)
        for figure in figures:
            m = regex.fullmatch(figure)
            if m:
                rows.setdefault(" / ".join(m.groupdict().values()), {})[heading] = figure
    return headings, list(rows.items())


def _table_lines(bench: Benchmark, figures: dict[str, float]) -> list[str]:
    """A benchmark's table on the Performance page: pivoted by ``bench.table``, else a row per headline figure."""
    if not bench.table:
        lines = ["| figure | value | goal |", "| --- | --- | --- |"]
        return lines + [f"| `{f}` | {fmt(v)} | {_goal_cell(bench, f, v)} |"
                        for f, v in figures.items() if bench.is_headline(f)]
    headings, rows = pivot(figures, bench.table)
    row_heading = " / ".join(dict.fromkeys(n for _, p in bench.table for n in _figure_regex(p).groupindex))
    # A goal every row of a column shares goes into its heading, the cells saying only where it is not met; a goal
    # of some rows only stays in their cells.
    shared = {}
    for heading in headings:
        goals = {bench.goal(cells[heading]) for _, cells in rows if heading in cells}
        shared[heading] = goals.pop() if len(goals) == 1 else None
    titles = [h + (f" (goal ≥ {shared[h]:g})" if shared[h] is not None else "") for h in headings]
    lines = [f"| {row_heading} | {' | '.join(titles)} |", "| --- " * (len(headings) + 1) + "|"]
    for label, cells in rows:
        shown = []
        for heading in headings:
            figure = cells.get(heading)
            if figure is None:
                shown.append("")
                continue
            value, goal = figures[figure], bench.goal(figure)
            note = "" if goal is None else "not met" if value < goal else "" if shared[heading] else "met"
            goal_text = "" if shared[heading] is not None or goal is None else f"goal ≥ {goal:g}: "
            shown.append(fmt(value) + (f" (**{goal_text}{note}**)" if note == "not met" else
                                       f" ({goal_text}{note})" if note else ""))
        lines.append(f"| {label} | {' | '.join(shown)} |")
    return lines


def readme_section(data: dict[str, Any], source: str, suite: tuple[Benchmark, ...] = SUITE) -> str:
    """The Performance page's block: a short table per benchmark of the newest suite run (its question, command,
    figures and goals), under one line of date and hardware."""
    benches = by_name(suite)
    lines = [f"<!-- generated by `rlrun-bench readme` from {source}; do not edit by hand -->", "",
             f"Measured by `{data.get('command')}` on {str(data.get('date', ''))[:10]}: "
             f"{hardware_line(data.get('hardware', {}))}. Load average (1 / 5 / 15 min) "
             f"{load_line(data.get('load_average'))} (other work shares these cores)."]
    unavailable = []
    for record in data["results"]:
        name, status = record["benchmark"], record.get("status", "ok")
        bench = benches.get(name)
        if bench is None:  # retired since that run: the page shows the suite as it is
            continue
        if status != "ok":
            why = "; ".join(record.get("notes", [])) or last_line(record.get("error"))
            unavailable.append(f"- `{name}`: {status}{' (' + why + ')' if why else ''}")
            continue
        figures = {f: v for f, v in numeric_figures(record["figures"]).items()
                   if not any(fnmatch.fnmatchcase(f, p) for p in bench.retired)}  # cases retired since that run
        lines += ["", f"**{bench.title or name}** (`{name}`: `{record['command']}`)", "",
                  *_table_lines(bench, figures)]
    if unavailable:
        lines += ["", "Not measured in this run:", "", *unavailable]
    lines += ["", "Every figure of the run, with the baseline's: its `.md` file beside the JSON."]
    return "\n".join(lines)


def replace_between_markers(text: str, block: str, start: str = START, end: str = END) -> str:
    """``text`` with everything between the markers replaced by ``block`` (the markers and the rest unchanged)."""
    i, j = text.find(start), text.find(end)
    if i < 0 or j < 0 or j < i:
        raise MarkerError(f"the README needs the markers {start} and {end} (in that order) around the generated "
                          f"Performance table")
    return text[:i + len(start)] + "\n" + block.strip("\n") + "\n" + text[j:]


def update_readme(readme: Path, result: Path, suite: tuple[Benchmark, ...] = SUITE, root: Path | None = None
                  ) -> bool:
    """Regenerate the README's Performance block from a suite file; returns whether the README changed."""
    data = json.loads(Path(result).read_text())
    if "results" not in data:
        raise ValueError(f"{result} is not a suite file (rlrun-bench ci writes one)")
    try:
        source = str(Path(result).resolve().relative_to((root or Path(readme).resolve().parent).resolve()))
    except ValueError:
        source = Path(result).name
    text = Path(readme).read_text()
    new = replace_between_markers(text, readme_section(data, source, suite))
    if new != text:
        Path(readme).write_text(new)
    return new != text
