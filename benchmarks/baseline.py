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

Per CPU: this machine class is not always the same CPU, and some ratios move with it (a peer whose time is mostly
Python moves with the CPU more than rlrun's torch kernels do, on the same code). So the file may hold, beside the
entries above (the default), a section per CPU model::

    "by_cpu": {"<hardware.cpu>": {"sources": [...], "benchmarks": {"<benchmark>": {...}}}}

A run is compared with its CPU's entries of a benchmark where that section has them, else with the default ones
(a finding then names both CPUs). ``--update-baseline`` writes a benchmark's entries into the default when the
default's entries of it come from the same CPU (or from a source that names none, or there are none yet), and
into the run CPU's section otherwise: a run on another CPU never moves the default.
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
    baseline_cpu: str | None = None
    """The CPU of the run the baseline entry comes from (when its source names one)."""
    run_cpu: str | None = None
    """The CPU of this run."""

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

    @property
    def other_cpu(self) -> bool:
        """The baseline entry was measured on another CPU than this run's."""
        return bool(self.baseline_cpu and self.run_cpu and self.baseline_cpu != self.run_cpu)

    def line(self) -> str:
        if self.current is None:
            return f"{self.benchmark} {self.figure}: missing (baseline {self.baseline:.3f})"
        text = (f"{self.benchmark} {self.figure}: {self.current:.3f} vs baseline {self.baseline:.3f} "
                f"({self.change:+.1%}; allowed down to {self.floor:.3f}, tolerance {self.tolerance:.0%})")
        if self.other_cpu:
            text += (f"; the baseline was measured on {self.baseline_cpu}, this run on {self.run_cpu} (rlrun-bench ci "
                     f"--only {self.benchmark} --update-baseline here records this CPU's own entries)")
        return text


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
        run_cpu = cpu_of(record)
        entries, baseline_cpu = entries_for(baseline, name, run_cpu)
        for figure, entry in sorted(entries.items()):
            if not is_same_run_ratio(figure):
                result.ignored.append(f"{name} {figure}")
                continue
            finding = Finding(name, figure, float(entry["value"]), figures.get(figure), float(entry["tolerance"]),
                              baseline_cpu, run_cpu)
            if finding.current is None:
                result.missing.append(finding)
            elif finding.current < finding.floor:
                result.fell.append(finding)
            else:
                result.passed.append(finding)
        result.not_in_baseline += [f"{name} {f}" for f in sorted(figures)
                                   if is_same_run_ratio(f) and f not in entries and compared(name, f)]
    return result


def cpu_of(record: dict[str, Any]) -> str | None:
    """The CPU model a record (or a source) names in its ``hardware``, if any."""
    hardware = record.get("hardware")
    cpu = hardware.get("cpu") if isinstance(hardware, dict) else None
    return str(cpu) if cpu else None


def source_cpu(section: dict[str, Any], benchmark: str) -> str | None:
    """The CPU of the run a section's (the default's, or one CPU's) entries of ``benchmark`` come from."""
    for s in sources_of(section):
        if benchmark in s.get("benchmarks", []):
            return cpu_of(s)
    return None


def entries_for(baseline: dict[str, Any], benchmark: str, cpu: str | None) -> tuple[dict[str, Any], str | None]:
    """``(entries, the CPU they were measured on)`` to compare a run of ``benchmark`` on ``cpu`` with: that CPU's
    section's where it has them, else the default's (module docstring)."""
    own = baseline.get("by_cpu", {}).get(cpu, {}) if cpu else {}
    if benchmark in own.get("benchmarks", {}):
        return own["benchmarks"][benchmark], cpu
    return baseline.get("benchmarks", {}).get(benchmark, {}), source_cpu(baseline, benchmark)


def updated_baseline(baseline: dict[str, Any], records: list[dict[str, Any]], tolerance_of: Callable[[str, str], float],
                     source: dict[str, Any] | None = None,
                     compared: Callable[[str, str], bool] = lambda benchmark, figure: True) -> dict[str, Any]:
    """The baseline with every successful benchmark's entries replaced by this run's ratio figures (those that
    ``compared(benchmark, figure)`` selects; absolute figures never), in the default section or in the run CPU's
    (module docstring).

    A figure keeps the tolerance it had in the entries it replaces (someone may have tuned it; a CPU's new section
    starts from the default's); a new figure gets ``tolerance_of(benchmark, figure)``. Benchmarks that failed or did
    not run keep their old entries and their source; the rewritten ones get ``source`` (this run's command, result
    file, hardware and load).
    """
    source = source or {}
    benchmarks = {k: dict(v) for k, v in baseline.get("benchmarks", {}).items()}
    by_cpu = {cpu: {"sources": sources_of(sec),
                    "benchmarks": {k: dict(v) for k, v in sec.get("benchmarks", {}).items()}}
              for cpu, sec in baseline.get("by_cpu", {}).items()}
    rewritten: list[str] = []
    rewritten_by_cpu: dict[str, list[str]] = {}
    for record in records:
        if record.get("status", "ok") != "ok":
            continue
        name = record["benchmark"]
        cpu = cpu_of(source) if source else cpu_of(record)  # the run's: the source names its hardware
        default_cpu = source_cpu(baseline, name)
        own_section = bool(cpu and name in benchmarks and default_cpu and default_cpu != cpu)
        target = by_cpu.setdefault(cpu, {"sources": [], "benchmarks": {}})["benchmarks"] if own_section \
            else benchmarks
        old = target.get(name) or benchmarks.get(name, {})
        new = {}
        for figure, value in sorted(numeric_figures(record["figures"]).items()):
            if not is_same_run_ratio(figure) or not compared(name, figure):
                continue
            tol = old[figure]["tolerance"] if figure in old else tolerance_of(name, figure)
            new[figure] = {"value": round(value, 4), "tolerance": tol}
        target[name] = new
        (rewritten_by_cpu.setdefault(cpu, []) if own_section else rewritten).append(name)
    out = {"about": ABOUT, "updated": dt.datetime.now(dt.timezone.utc).date().isoformat(),
           "sources": _sources_after(baseline, rewritten, source),
           "benchmarks": dict(sorted(benchmarks.items()))}
    if by_cpu:
        out["by_cpu"] = {cpu: {"sources": _sources_after(sec, rewritten_by_cpu.get(cpu, []), source),
                               "benchmarks": dict(sorted(sec["benchmarks"].items()))}
                         for cpu, sec in sorted(by_cpu.items())}
    return out


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
