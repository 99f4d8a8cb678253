"""The regression gate (benchmarks/baseline.py): same-run ratios against the committed baseline, each with its
tolerance; absolute figures never compared; partial and per-CPU updates."""

from __future__ import annotations

import pytest
from suite_records import baseline_of, record

from benchmarks import baseline as bl
from benchmarks.records import (
    is_same_run_ratio,
)
from benchmarks.runner import ROOT
from benchmarks.suite import by_name


def test_a_ratio_that_fell_more_than_its_tolerance_fails() -> None:
    """Baseline 0.98, tolerance 0.2: floor = 0.98 * (1 - 0.2) = 0.784. Current 0.70 < 0.784: it fell, by
    0.70 / 0.98 - 1 = -28.6%."""
    base = baseline_of({"b": {"ratio/env_steps_per_s/tensorboard_vs_none": (0.98, 0.2)}})
    result = bl.compare([record("b", {"ratio": {"env_steps_per_s": {"tensorboard_vs_none": 0.70}}})], base)
    assert not result.ok
    [fell] = result.fell
    assert fell.figure == "ratio/env_steps_per_s/tensorboard_vs_none"
    assert fell.floor == pytest.approx(0.784)
    assert fell.change == pytest.approx(0.70 / 0.98 - 1)
    assert "0.700 vs baseline 0.980" in fell.line() and "0.784" in fell.line()


@pytest.mark.parametrize("current", [0.80, 0.784, 0.95, 1.30])
def test_a_noisy_ratio_within_tolerance_passes(current: float) -> None:
    """Floor 0.98 * 0.8 = 0.784: 0.80 (18% lower, noise) and exactly the floor pass; higher is always fine."""
    base = baseline_of({"b": {"ratio/x": (0.98, 0.2)}})
    result = bl.compare([record("b", {"ratio/x": current})], base)
    assert result.ok and len(result.passed) == 1 and not result.fell


def test_absolute_times_are_never_compared() -> None:
    """Even written into the baseline by hand, an absolute speed that fell 100x is not a finding; and rewriting the
    baseline never stores absolute figures, only the run's ratios."""
    base = baseline_of({"b": {"env_steps_per_s/none": (5000.0, 0.2), "build_ms/agent": (1.0, 0.2),
                              "ratio/x": (1.0, 0.2)}})
    current = record("b", {"env_steps_per_s/none": 50.0, "build_ms/agent": 100.0, "ratio/x": 0.99})
    result = bl.compare([current], base)
    assert result.ok and [f.figure for f in result.passed] == ["ratio/x"]
    assert sorted(result.ignored) == ["b build_ms/agent", "b env_steps_per_s/none"]
    new = bl.updated_baseline({"benchmarks": {}}, [current], lambda b, f: 0.25)
    assert new["benchmarks"] == {"b": {"ratio/x": {"value": 0.99, "tolerance": 0.25}}}


@pytest.mark.parametrize("figure, is_ratio", [
    ("ratio/env_steps_per_s/tensorboard_vs_none", True), ("fraction_of_limit/pong/x4/local", True),
    ("fraction_reached/rlrun_dqn/450", True), ("ratio/rlrun_wrappers_vs_gymnasium_wrappers", True),
    ("env_steps_per_s/none", False), ("pong/x1/frames_per_s/serial_limit", False),
    ("build_ratio/dueling_double_dqn_per_vs_rlgraph_650ms", False),  # an absolute time over a constant
    ("time_s/rlrun_dqn/450", False), ("samples_per_s/cartpole_mlp/ratio", False)])
def test_only_same_run_ratios_are_comparable(figure: str, is_ratio: bool) -> None:
    assert is_same_run_ratio(figure) is is_ratio


def test_missing_figures_failed_benchmarks_and_new_ratios() -> None:
    base = baseline_of({"a": {"ratio/gone": (1.0, 0.2)}, "b": {"ratio/y": (1.0, 0.2)}})
    records = [record("a", {"ratio/new": 0.5}), record("b", {}, status="failed")]
    result = bl.compare(records, base)
    assert result.ok  # a missing figure is reported, not a fall; a failed benchmark is the runner's business
    assert [f.figure for f in result.missing] == ["ratio/gone"] and result.not_in_baseline == ["a ratio/new"]
    assert "missing" in result.missing[0].line()


def test_updating_the_baseline_keeps_tolerances_and_failed_benchmarks() -> None:
    base = baseline_of({"a": {"ratio/x": (1.0, 0.3)}, "b": {"ratio/y": (0.9, 0.2)}})
    records = [record("a", {"ratio/x": 0.95, "ratio/z": 0.5, "time_s": 3.0}), record("b", {}, status="failed")]
    new = bl.updated_baseline(base, records, lambda b, f: 0.25, source={"command": "rlrun-bench ci"})
    assert new["benchmarks"]["a"] == {"ratio/x": {"value": 0.95, "tolerance": 0.3},
                                      "ratio/z": {"value": 0.5, "tolerance": 0.25}}
    only_x = bl.updated_baseline(base, records, lambda b, f: 0.25, compared=lambda b, f: f == "ratio/x")
    assert only_x["benchmarks"]["a"] == {"ratio/x": {"value": 0.95, "tolerance": 0.3}}
    assert new["benchmarks"]["b"] == {"ratio/y": {"value": 0.9, "tolerance": 0.2}}
    assert new["sources"] == [{"benchmarks": ["b"]}, {"benchmarks": ["a"], "command": "rlrun-bench ci"}]
    assert "never compared" in new["about"]


def test_a_partial_update_moves_only_the_benchmarks_that_ran_to_the_new_source() -> None:
    """``rlrun-bench ci --only a --update-baseline`` on a baseline of the older form (one ``source`` for all):
    ``a`` gets this run's source, ``b`` and ``c`` keep the old one; a second partial update, of ``b``, leaves ``c``
    alone under the old source and ``a`` under the first."""
    old_run = {"command": "rlrun-bench ci --update-baseline", "hardware": {"cpu": "AMD EPYC"}}
    base = {**baseline_of({"a": {"ratio/x": (1.0, 0.3)}, "b": {"ratio/y": (0.9, 0.2)}, "c": {"ratio/z": (0.5, 0.2)}}),
            "source": old_run}
    assert bl.sources_of(base) == [{"benchmarks": ["a", "b", "c"], **old_run}]
    first = {"command": "rlrun-bench ci --only a --update-baseline", "hardware": {"cpu": "AMD EPYC"}}
    new = bl.updated_baseline(base, [record("a", {"ratio/x": 0.8})], lambda b, f: 0.25, source=first)
    assert "source" not in new
    assert new["sources"] == [{"benchmarks": ["b", "c"], **old_run}, {"benchmarks": ["a"], **first}]
    second = {"command": "rlrun-bench ci --only b --update-baseline"}
    again = bl.updated_baseline(new, [record("b", {"ratio/y": 0.7})], lambda b, f: 0.25, source=second)
    assert again["sources"] == [{"benchmarks": ["c"], **old_run}, {"benchmarks": ["a"], **first},
                                {"benchmarks": ["b"], **second}]
    assert again["benchmarks"]["a"]["ratio/x"]["value"] == 0.8 and again["benchmarks"]["c"]["ratio/z"]["value"] == 0.5


def test_a_run_on_another_cpu_gets_entries_of_its_own_and_is_compared_with_them() -> None:
    """The default entries of ``a`` come from an AMD EPYC run. An update on Intel Xeon cores writes a Xeon section
    (the default untouched, tolerances taken from it); then a Xeon run is compared with the Xeon entries, an EPYC
    run with the default ones, and a run on a third CPU with the default ones, its finding naming both CPUs. An
    update on the EPYC cores rewrites the default again."""
    epyc, xeon = {"cpu": "AMD EPYC"}, {"cpu": "Intel Xeon"}
    base = {**baseline_of({"a": {"ratio/x": (4.7, 0.35)}}), "sources": [{"benchmarks": ["a"], "hardware": epyc}]}

    def run(cpu: str, value: float) -> dict:
        return {**record("a", {"ratio/x": value}), "hardware": {"cpu": cpu}}

    new = bl.updated_baseline(base, [run("Intel Xeon", 7.7)], lambda b, f: 0.2,
                              source={"command": "rlrun-bench ci --only a --update-baseline", "hardware": xeon})
    assert new["benchmarks"] == base["benchmarks"] and new["sources"] == base["sources"]
    assert new["by_cpu"]["Intel Xeon"]["benchmarks"] == {"a": {"ratio/x": {"value": 7.7, "tolerance": 0.35}}}
    assert new["by_cpu"]["Intel Xeon"]["sources"] == [{"benchmarks": ["a"], "command":
                                                       "rlrun-bench ci --only a --update-baseline", "hardware": xeon}]
    assert bl.entries_for(new, "a", "Intel Xeon") == ({"ratio/x": {"value": 7.7, "tolerance": 0.35}}, "Intel Xeon")
    assert bl.entries_for(new, "a", "AMD EPYC") == ({"ratio/x": {"value": 4.7, "tolerance": 0.35}}, "AMD EPYC")

    on_xeon = bl.compare([run("Intel Xeon", 4.8)], new)  # fine on EPYC, a fall on the Xeon
    [fell] = on_xeon.fell
    assert fell.baseline == 7.7 and not fell.other_cpu and "measured on" not in fell.line()
    assert bl.compare([run("AMD EPYC", 4.8)], new).ok
    [other] = bl.compare([run("Some ARM", 2.0)], new).fell
    assert other.baseline == 4.7 and other.other_cpu
    assert "measured on AMD EPYC, this run on Some ARM" in other.line() and "--only a --update-baseline" in other.line()

    again = bl.updated_baseline(new, [run("AMD EPYC", 5.0)], lambda b, f: 0.2, source={"hardware": epyc})
    assert again["benchmarks"]["a"]["ratio/x"]["value"] == 5.0
    assert again["by_cpu"]["Intel Xeon"] == new["by_cpu"]["Intel Xeon"]


def test_the_committed_baseline_holds_only_ratios_with_tolerances() -> None:
    base = bl.load_baseline(ROOT / "benchmarks" / "baseline.json")
    names = by_name()
    assert base["benchmarks"], "benchmarks/baseline.json is empty: run rlrun-bench ci --update-baseline"
    sections = [base, *base.get("by_cpu", {}).values()]
    for section in sections:
        for bench, figures in section["benchmarks"].items():
            assert bench in names
            assert bl.source_cpu(section, bench), f"{bench}: no source names the CPU its entries come from"
            for figure, entry in figures.items():
                assert is_same_run_ratio(figure), figure
                assert 0 < entry["tolerance"] < 1 and entry["value"] > 0
    for cpu, section in base.get("by_cpu", {}).items():  # a CPU's section holds runs on that CPU only
        assert all(bl.cpu_of(s) == cpu for s in bl.sources_of(section)), cpu
