"""Compare a run's same-run ratios with the committed baseline (``benchmarks/baseline.json``), and rewrite it.

Only dimensionless ratios measured within one run are compared (``records.is_same_run_ratio``: ``ratio/...``,
``fraction...``): a fall of the ratio "rlrun vs bare PyTorch, both timed in this job" means rlrun got slower, on
any machine; an absolute time or speed from another machine or day means nothing here, so it is never compared,
even if someone writes it into the baseline by hand.

A figure *fell* when ``current < baseline * (1 - tolerance)`` (all compared ratios are higher-is-better). The
tolerance is per figure, stored in the baseline next to the value (the suite's defaults are used when the
baseline is rewritten), e.g. 0.2 for the logger ratios on a noisy 2-core machine.

Baseline file::

    {"about": "...", "updated": "<date>",
     "sources": [{"benchmarks": ["<benchmark>", ...], "command", "result", "hardware", "load_average"}, ...],
     "benchmarks": {"<benchmark>": {"<ratio figure>": {"value": 0.99, "tolerance": 0.2}, ...}, ...}}

``sources`` says which run each benchmark's entries come from: ``rlrun-bench ci --only X --update-baseline``
rewrites X's entries and moves X to a source of its own, the others keep theirs. (A baseline written before
sources were per benchmark has one ``source`` for all; it is read as that.)
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchmarks.records import is_same_run_ratio, numeric_figures

ABOUT = ("Same-run ratios of the CI benchmark set (rlrun-bench ci) and how far each may fall before CI fails "
         "(tolerance: relative fall, 0.2 = 20%). Rewrite with: rlrun-bench ci --update-baseline. Absolute times "
         "and speeds are never compared (they depend on the machine); see benchmarks/baseline.py.")


@dataclass
class Finding:
    benchmark: str
    figure: str
    baseline: float
    current: float | None
    tolerance: float

    @property
    def floor(self) -> float:
        """The lowest value that still passes."""
        return self.baseline * (1.0 - self.tolerance)

    @property
    def change(self) -> float | None:
        """Relative change from the baseline (-0.3 = 30% lower)."""
        if self.current is None or self.baseline == 0:
            return None
        return self.current / self.baseline - 1.0

    def line(self) -> str:
        if self.current is None:
            return f"{self.benchmark} {self.figure}: missing (baseline {self.baseline:.3f})"
        return (f"{self.benchmark} {self.figure}: {self.current:.3f} vs baseline {self.baseline:.3f} "
                f"({self.change:+.1%}; allowed down to {self.floor:.3f}, tolerance {self.tolerance:.0%})")


@dataclass
class Comparison:
    fell: list[Finding] = field(default_factory=list)
    passed: list[Finding] = field(default_factory=list)
    missing: list[Finding] = field(default_factory=list)
    """Baseline figures of a benchmark that ran but did not report them (renamed? failed?)."""
    ignored: list[str] = field(default_factory=list)
    """Baseline entries that are not same-run ratios: never compared."""
    not_in_baseline: list[str] = field(default_factory=list)
    """Ratio figures of this run that the baseline does not know yet (add them with --update-baseline)."""

    @property
    def ok(self) -> bool:
        return not self.fell

    def to_json(self) -> dict[str, Any]:
        def rows(items: list[Finding]) -> list[dict[str, Any]]:
            return [{**asdict(f), "floor": f.floor, "change": f.change} for f in items]

        return {"ok": self.ok, "fell": rows(self.fell), "passed": rows(self.passed), "missing": rows(self.missing),
                "ignored": self.ignored, "not_in_baseline": self.not_in_baseline}


def load_baseline(path: str | Path) -> dict[str, Any]:
    """The baseline file, or an empty baseline if there is none yet."""
    path = Path(path)
    if not path.exists():
        return {"about": ABOUT, "benchmarks": {}}
    data = json.loads(path.read_text())
    if not isinstance(data.get("benchmarks"), dict):
        raise ValueError(f"{path}: a baseline needs a 'benchmarks' object (see benchmarks/baseline.py)")
    return data


def compare(records: list[dict[str, Any]], baseline: dict[str, Any],
            compared: Callable[[str, str], bool] = lambda benchmark, figure: True) -> Comparison:
    """Compare the ratio figures of successful records with the baseline entries of the same benchmarks.

    Benchmarks that did not run (or failed: their failure is reported by the runner) are not compared.
    ``compared(benchmark, figure)`` picks the ratios listed as "not in the baseline yet" when missing from it.
    """
    result = Comparison()
    for record in records:
        if record.get("status", "ok") != "ok":
            continue
        name = record["benchmark"]
        figures = numeric_figures(record["figures"])
        entries = baseline.get("benchmarks", {}).get(name, {})
        for figure, entry in sorted(entries.items()):
            if not is_same_run_ratio(figure):
                result.ignored.append(f"{name} {figure}")
                continue
            finding = Finding(name, figure, float(entry["value"]), figures.get(figure), float(entry["tolerance"]))
            if finding.current is None:
                result.missing.append(finding)
            elif finding.current < finding.floor:
                result.fell.append(finding)
            else:
                result.passed.append(finding)
        result.not_in_baseline += [f"{name} {f}" for f in sorted(figures)
                                   if is_same_run_ratio(f) and f not in entries and compared(name, f)]
    return result


def updated_baseline(baseline: dict[str, Any], records: list[dict[str, Any]], tolerance_of: Callable[[str, str], float],
                     source: dict[str, Any] | None = None,
                     compared: Callable[[str, str], bool] = lambda benchmark, figure: True) -> dict[str, Any]:
    """The baseline with every successful benchmark's entries replaced by this run's ratio figures (those that
    ``compared(benchmark, figure)`` selects; absolute figures never).

    A figure keeps the tolerance it had in the baseline (someone may have tuned it); a new figure gets
    ``tolerance_of(benchmark, figure)``. Benchmarks that failed or did not run keep their old entries and their
    source; the rewritten ones get ``source`` (this run's command, result file, hardware and load).
    """
    benchmarks = {k: dict(v) for k, v in baseline.get("benchmarks", {}).items()}
    rewritten: list[str] = []
    for record in records:
        if record.get("status", "ok") != "ok":
            continue
        name = record["benchmark"]
        old = benchmarks.get(name, {})
        new = {}
        for figure, value in sorted(numeric_figures(record["figures"]).items()):
            if not is_same_run_ratio(figure) or not compared(name, figure):
                continue
            tol = old[figure]["tolerance"] if figure in old else tolerance_of(name, figure)
            new[figure] = {"value": round(value, 4), "tolerance": tol}
        benchmarks[name] = new
        rewritten.append(name)
    return {"about": ABOUT, "updated": dt.datetime.now(dt.timezone.utc).date().isoformat(),
            "sources": _sources_after(baseline, rewritten, source or {}),
            "benchmarks": dict(sorted(benchmarks.items()))}


def sources_of(baseline: dict[str, Any]) -> list[dict[str, Any]]:
    """Which run each benchmark's entries come from: ``[{"benchmarks": [names], ...the run's source}]``; a baseline
    of the older form, one ``source`` for every benchmark, gives that source for all of them."""
    if "sources" in baseline:
        return [dict(s) for s in baseline["sources"]]
    if baseline.get("source") or baseline.get("benchmarks"):
        return [{"benchmarks": sorted(baseline.get("benchmarks", {})), **baseline.get("source", {})}]
    return []


def _sources_after(baseline: dict[str, Any], rewritten: list[str], source: dict[str, Any]) -> list[dict[str, Any]]:
    """The baseline's sources with the ``rewritten`` benchmarks moved to ``source`` (sources left without a
    benchmark dropped)."""
    out = []
    for s in sources_of(baseline):
        names = [n for n in s.get("benchmarks", []) if n not in rewritten]
        if names:
            out.append({**s, "benchmarks": names})
    if rewritten:
        out.append({"benchmarks": sorted(rewritten), **source})
    return out


def write_baseline(path: str | Path, baseline: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(baseline, indent=2) + "\n")
