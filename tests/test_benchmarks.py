"""The benchmark suite as a product (benchmarks/): baseline comparison, result schema, README regeneration, the
runner's handling of failing benchmarks, TensorBoard/MLflow logging, plots, and one real tiny benchmark run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks import baseline as bl
from benchmarks.records import (
    SCHEMA,
    SchemaError,
    check_record,
    flatten_figures,
    is_same_run_ratio,
    numeric_figures,
    read_records,
    records_of,
    result_files,
    suite_files,
)
from benchmarks.report import END, START, MarkerError, replace_between_markers, suite_markdown, update_readme
from benchmarks.runner import ROOT, run_suite
from benchmarks.suite import SUITE, Benchmark, Registered, _api_speed_ratios, by_name, ci_set

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


# ---------------------------------------------------------------------------------------------- baseline


def test_a_ratio_that_fell_more_than_its_tolerance_fails() -> None:
    """Baseline 0.98, tolerance 0.2: floor = 0.98 * (1 - 0.2) = 0.784. Current 0.70 < 0.784: it fell, by
    0.70 / 0.98 - 1 = -28.6%."""
    base = baseline_of({"logger_overhead": {"ratio/env_steps_per_s/tensorboard_vs_none": (0.98, 0.2)}})
    result = bl.compare([record("logger_overhead", {"ratio": {"env_steps_per_s": {"tensorboard_vs_none": 0.70}}})],
                        base)
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


# ---------------------------------------------------------------------------------------------- schema


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


# ---------------------------------------------------------------------------------------------- README


README = f"# Project\n\nIntro.\n\n## Performance\n\nHow to run.\n\n{START}\nold table\n{END}\n\n## Next\n\nMore.\n"


def test_readme_is_regenerated_between_the_markers_only(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README)
    result = tmp_path / "benchmarks" / "results" / "2026-11-21-abc1234.json"
    result.parent.mkdir(parents=True)
    rec = record("logger_overhead", {"env_steps_per_s": {"none": 2300.0}, "ratio/env_steps_per_s/tensorboard_vs_none":
                                     0.99, "logger_start_ms/none": 1.0},
                 command="python -m benchmarks.logger_overhead --quick")
    result.write_text(json.dumps(suite_data([rec, record("scaling", {}, status="unavailable")])))
    assert update_readme(readme, result, root=tmp_path)
    text = readme.read_text()
    before, after = README.split(START)[0], README.split(END)[1]
    assert text.startswith(before + START) and text.endswith(END + after)
    block = text.split(START)[1].split(END)[0]
    assert "old table" not in block and "benchmarks/results/2026-11-21-abc1234.json" in block
    assert ("| logger_overhead | `env_steps_per_s/none` | 2,300 |  | `python -m benchmarks.logger_overhead --quick` |"
            in block)  # name and command on the benchmark's first row
    assert "|  | `ratio/env_steps_per_s/tensorboard_vs_none` | 0.990 | ≥ 0.97 (met) |  |" in block
    assert "Test CPU, 2 cores, GPU: none" in block and "torch 2.13.0+cpu" in block and "commit abc1234" in block
    assert "logger_start_ms" not in block  # headline figures only; the .md file has them all
    assert "`scaling`: unavailable" in block
    assert not update_readme(readme, result, root=tmp_path)  # idempotent


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


# ---------------------------------------------------------------------------------------------- suite registry


def test_benchmarks_wait_for_what_does_not_exist_yet() -> None:
    waiting = Benchmark("w", "benchmarks.runner", "s", requires=(Registered("executor", "no_such_executor"),))
    ready = Benchmark("r", "benchmarks.runner", "s", requires=(Registered("executor", "local"),))
    unwritten = Benchmark("u", "benchmarks.no_such_module", "s")
    assert waiting.unavailable() == ["executor=no_such_executor does not exist yet"]
    assert ready.unavailable() == []
    assert "benchmarks.no_such_module is not there" in unwritten.unavailable()[0]
    not_runnable = {b.name for b in SUITE if b.unavailable()}
    from rlrun.fingerprint import gpu_name

    assert ("pong_long" in not_runnable) == (not gpu_name())  # listed without a GPU, never faked
    from rlrun.registry import registry

    assert ("scaling" in not_runnable) == ("apex" not in registry.names("algo"))


def test_the_ci_set_and_its_judgement() -> None:
    names = {b.name for b in ci_set()}
    assert {"logger_overhead", "learner_throughput", "sampling_limit", "time_to_threshold", "env_speed",
            "component_overhead", "multiagent_sampling", "peers"} == names
    suite = by_name()
    assert suite["logger_overhead"].goal("ratio/env_steps_per_s/tensorboard_vs_none") == 0.97
    assert suite["sampling_limit"].tolerance("fraction_of_limit/pong/x4/local") == 0.3
    assert suite["sampling_limit"].tolerance("fraction_of_limit/pong/x4/ray") == 0.4
    # issue 19's goals: local >= 0.8 and ray >= 0.6 of the serial limit; the hand-written reference has none
    assert suite["sampling_limit"].goal("fraction_of_limit/cartpole/x8/local") == 0.8
    assert suite["sampling_limit"].goal("fraction_of_limit/cartpole/x8/ray") == 0.6
    assert suite["sampling_limit"].goal("fraction_of_limit/cartpole/x8/hand_written") is None
    assert suite["logger_overhead"].tolerance("something/else") == 0.25  # the default
    assert suite["logger_overhead"].is_compared("ratio/env_steps_per_cpu_s/tensorboard_vs_none")
    assert not suite["logger_overhead"].is_compared("ratio/env_steps_per_s/tensorboard_vs_none")


@pytest.mark.parametrize("a, b, p", [
    ([1, 2], [3, 4], 2 / 6),          # rank sums 3 vs the mean 5: splits {1,2} and {3,4} are as extreme: 2 of 6
    ([1, 2, 3], [4, 5, 6], 2 / 20),   # perfectly separated, 3 vs 3: 2 of C(6,3) = 20
    ([1, 4], [2, 3], 1.0),            # rank sum 5 = its mean: every split is at least as extreme
    ([1, 1], [1, 2], 1.0),            # ties: mid-ranks 2, 2, 2, 4; observed |6 - 5| = 1, every split >= 1
    ([10, 11, 12, 13], [1, 2, 3, 4], 2 / 70),
])
def test_exact_mann_whitney_p_values(a: list, b: list, p: float) -> None:
    """Hand-enumerated two-sided exact p-values (the executor-agreement benchmark's test); scipy agrees where it is
    installed."""
    from benchmarks.executor_agreement import mann_whitney_exact

    assert mann_whitney_exact(a, b) == pytest.approx(p)
    scipy_stats = pytest.importorskip("scipy.stats")
    if len(set(a + b)) == len(a + b):  # scipy's exact method assumes no ties
        assert scipy_stats.mannwhitneyu(a, b, method="exact").pvalue == pytest.approx(p)


def test_component_overhead_ratios_are_derived_as_speed_ratios() -> None:
    """t_api / t_bare - 1 = 0.25 (25% overhead) -> speed ratio 1 / 1.25 = 0.8; -0.2 -> 1.25 (faster)."""
    derived = _api_speed_ratios({"act_overhead/cartpole_mlp/batch1": 0.25, "act_overhead/atari/batch256": -0.2,
                                 "act_us/cartpole_mlp/batch1/api": 30.0})
    assert derived == {"ratio/act_speed_api_vs_bare/cartpole_mlp/batch1": pytest.approx(0.8),
                       "ratio/act_speed_api_vs_bare/atari/batch256": pytest.approx(1.25)}


def test_serial_limit_and_medians_with_misses() -> None:
    """Env 3000 steps/s and policy 1500/s one after the other: 1 / (1/3000 + 1/1500) = 1000 steps/s.
    Seeds reaching a threshold in [10, miss, 30] s: median of [10, inf, 30] = 30; [miss, miss, 5]: a miss."""
    from benchmarks.sampling_limit import serial_limit
    from benchmarks.time_to_threshold import _median_or_none

    assert serial_limit(3000.0, 1500.0) == pytest.approx(1000.0)
    assert _median_or_none([10.0, None, 30.0]) == 30.0 and _median_or_none([None, None, 5.0]) is None


def test_sampling_limit_measures_rlrun_beside_the_limit_and_a_hand_written_actor() -> None:
    """One round on CartPole x2, local executor: every side measured (rlrun with exploration on and off), and the
    fractions are the ratios of the measured speeds (one round: the medians are those speeds)."""
    from benchmarks.sampling_limit import measure, serial_limit

    f = measure("cartpole", 2, rounds=1, seconds=0.05, executors=["local"])
    speed = {side: f[f"cartpole/x2/env_steps_per_s/{side}"]
             for side in ("raw_env", "policy_forward", "serial_limit", "hand_written", "rlrun_local",
                          "rlrun_local_greedy")}
    assert all(v > 100 for v in speed.values()), speed
    assert speed["serial_limit"] == pytest.approx(serial_limit(speed["raw_env"], speed["policy_forward"]), rel=1e-3)
    assert f["fraction_of_limit/cartpole/x2/local"] == pytest.approx(speed["rlrun_local"] / speed["serial_limit"],
                                                                     rel=2e-3)
    assert f["fraction_of_limit/cartpole/x2/hand_written"] == pytest.approx(
        speed["hand_written"] / speed["serial_limit"], rel=2e-3)
    assert f["fraction_of_hand_written/cartpole/x2/local"] == pytest.approx(
        speed["rlrun_local"] / speed["hand_written"], rel=2e-3)
    assert f["fraction_of_limit/cartpole/x2/local_greedy"] == pytest.approx(
        speed["rlrun_local_greedy"] / speed["serial_limit"], rel=2e-3)
    shares = [f[f"time_share/cartpole/x2/local/{part}"] for part in ("env", "inference", "other")]
    assert sum(shares) == pytest.approx(1.0, abs=0.01)


def test_training_parts_set_rlrun_beside_the_ceiling_on_pong(tmp_path: Path) -> None:
    """``benchmarks.training_parts --rounds 1 --rollout-steps 32`` (the Pong task's path at a quarter of its rollout):
    rlrun's Pong PPO step (its update timed apart) beside the hand-written update, the raw env copies and the bare
    forward for the same work; the ceiling is their sum. Away from the task's settings no Sample Factory ratio is
    written (a peers record is there to be found)."""
    pytest.importorskip("ale_py")
    (tmp_path / "2026-01-02-bbbbbbb-peers.json").write_text(json.dumps(
        record("peers", {"pong_training/sample_factory/frames_per_cpu_s": 1000.0})))
    out = tmp_path / "record.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.training_parts", "--rounds", "1",
                           "--rollout-steps", "32"], cwd=ROOT,
                          env={**os.environ, "RLRUN_BENCH_OUT": str(out), "RLRUN_BENCH_RESULTS": str(tmp_path),
                               "RLRUN_BENCH_LOG": "0"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    f = json.loads(out.read_text())["figures"]
    assert f["env"] == "pong" and f["frames_per_step"] == 32 * 8 * 4 and f["rollout_steps"] == 32
    step, update, acting = f["rlrun/step_s"], f["rlrun/update_s"], f["rlrun/acting_s"]
    assert 0 < update < step and acting == pytest.approx(step - update, abs=2e-4)
    parts = [f[f"parts/{p}_s"] for p in ("bare_update", "raw_env", "bare_forward")]
    assert all(p > 0 for p in parts) and f["ceiling/step_s"] == pytest.approx(sum(parts), abs=3e-4)
    assert f["ceiling/frames_per_s"] == pytest.approx(1024 / sum(parts), rel=2e-3)
    assert f["fraction_of_ceiling"] == pytest.approx(sum(parts) / step, rel=2e-3)
    assert f["rlrun/frames_per_s"] == pytest.approx(1024 / step, rel=2e-3)
    hand = f["parts/bare_update_s"] + f["parts/hand_written_acting_s"]
    assert f["parts/hand_written_acting_s"] > 0 and f["hand_written/step_s"] == pytest.approx(hand, abs=2e-4)
    assert f["fraction_of_hand_written"] == pytest.approx(hand / step, rel=2e-3)
    assert not any(k.startswith(("sample_factory/", "ratio/ceiling_over", "ratio/rlrun_over")) for k in f)


def test_training_parts_on_cartpole_run_the_ppo_preset_beside_its_parts() -> None:
    """``--env cartpole``, one round in this process: rlrun algo=ppo env=cartpole (its preset: 8 copies, rollouts of
    32, frame skip 1) beside the hand-written parts, the same sums as on Pong."""
    from benchmarks.training_parts import measure

    f = measure(1, "cartpole")
    assert f["env"] == "cartpole" and f["rollout_steps"] == 32 and f["frames_per_step"] == 32 * 8
    parts = [f[f"parts/{p}_s"] for p in ("bare_update", "raw_env", "bare_forward")]
    assert all(p > 0 for p in parts) and f["ceiling/step_s"] == pytest.approx(sum(parts), abs=3e-4)
    assert f["hand_written/step_s"] == pytest.approx(f["parts/bare_update_s"] + f["parts/hand_written_acting_s"],
                                                     abs=2e-4)
    assert 0 < f["rlrun/update_s"] < f["rlrun/step_s"]


def test_training_parts_read_sample_factory_from_the_newest_peers_record(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Sample Factory's Pong training frames per CPU-second: from the newest peers result file holding it (a
    runner's suite file or a standalone record; a file that is not a result is skipped), or from the one named;
    None without one."""
    from benchmarks.training_parts import sample_factory_per_cpu_s

    monkeypatch.setenv("RLRUN_BENCH_RESULTS", str(tmp_path))
    assert sample_factory_per_cpu_s(None) is None
    key = "pong_training/sample_factory/frames_per_cpu_s"
    (tmp_path / "2026-01-01-aaaaaaa-peers.json").write_text(json.dumps(record("peers", {key: 500.0})))
    (tmp_path / "2026-01-02-bbbbbbb-peers.json").write_text(json.dumps(suite_data([record("peers", {key: 1000.0})])))
    (tmp_path / "2026-01-03-ccccccc-peers.json").write_text(json.dumps(record("peers", {"cartpole_ppo/sb3/x": 1.0})))
    (tmp_path / "2026-01-04-ddddddd-peers.json").write_text(json.dumps({"figures": {key: 1.0}}))  # not a record
    assert sample_factory_per_cpu_s(None) == (1000.0, "2026-01-02-bbbbbbb-peers.json")
    assert sample_factory_per_cpu_s(tmp_path / "2026-01-01-aaaaaaa-peers.json") == (500.0,
                                                                                   "2026-01-01-aaaaaaa-peers.json")


def test_time_to_threshold_crossings_and_peer_ratios() -> None:
    """20-episode window: 19 returns of 500 are not a mean yet; the 20th (440) gives (19*500 + 440)/20 = 497:
    both 450 and 475 are reached then. Peer ratio = peer's median time / rlrun's = 30 / 20 = 1.5."""
    from benchmarks.time_to_threshold import Crossings, summarize

    c = Crossings((450.0, 475.0), start=0.0)
    c.add([500.0] * 19, env_steps=1000)
    assert c.reached == {} and not c.done
    c.add([440.0], env_steps=1100)
    assert c.done and {thr: steps for thr, (_, steps) in c.reached.items()} == {450.0: 1100, 475.0: 1100}

    def runs(*times: float | None) -> list[Crossings]:
        out = []
        for t in times:
            r = Crossings((450.0,), 0.0)
            if t is not None:
                r.reached[450.0] = (t, int(t * 1000))
            out.append(r)
        return out

    figures = summarize({"rlrun_dqn": runs(20.0, 25.0, None), "sb3_ppo": runs(30.0, 31.0, 29.0)}, (450.0,))
    assert figures["time_s/rlrun_dqn/450"] == 25.0 and figures["fraction_reached/rlrun_dqn/450"] == round(2 / 3, 4)
    assert figures["time_s/sb3_ppo/450"] == 30.0 and figures["env_steps/sb3_ppo/450"] == 30000
    assert figures["ratio/time_to_450/sb3_ppo_over_rlrun_dqn"] == pytest.approx(30.0 / 25.0)


def test_time_to_threshold_variants_parse_and_refuse_other_forms() -> None:
    from benchmarks.time_to_threshold import parse_variant

    assert parse_variant("copies_10:env.vectorization=copies  algo.num_epochs=10") == (
        "copies_10", ("env.vectorization=copies", "algo.num_epochs=10"))
    for bad in ("no_colon", ":algo.lr=1", "name:", "name:algo.lr", "a@b:algo.lr=1", "a/b:algo.lr=1"):
        with pytest.raises(SystemExit, match="NAME:key=value"):
            parse_variant(bad)


def test_time_to_threshold_runs_a_variant_beside_the_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PPO on CartPole to a mean of 20 (reached within 2,048 env steps), the preset (8 copies: 256 env steps an
    iteration) and a variant on 5 env copies (160): both contenders, the variant's overrides applied and in the record,
    and the means over seeds that all reached it."""
    from benchmarks.common import OUT_ENV
    from benchmarks.time_to_threshold import main

    monkeypatch.setenv(OUT_ENV, str(tmp_path / "record.json"))
    figures = main(["--algos", "ppo", "--seeds", "0,1", "--peers", "off", "--budget-env-steps", "2048",
                    "--thresholds", "20", "--variant", "copies:env.vectorization=copies executor.num_envs=5"])
    assert figures["variant/copies"] == "env.vectorization=copies executor.num_envs=5"
    for who in ("rlrun_ppo", "rlrun_ppo:copies"):
        assert figures[f"fraction_reached/{who}/20"] == 1.0
        seeds = figures[f"time_s/{who}/20/seeds"]
        assert figures[f"time_s_mean/{who}/20"] == pytest.approx(sum(seeds) / 2, abs=0.01)
    assert all(n % 256 == 0 for n in figures["env_steps/rlrun_ppo/20/seeds"])
    assert all(n % 160 == 0 for n in figures["env_steps/rlrun_ppo:copies/20/seeds"])
    assert json.loads((tmp_path / "record.json").read_text())["benchmark"] == "time_to_threshold"


# ---------------------------------------------------------------------------------------------- runner


# The runner's collection protocol: a benchmark writes its record to $RLRUN_BENCH_OUT (benchmarks.common.write_result
# does; written out here so the fake starts in milliseconds: write_result's fingerprint imports torch).
FAKE_OK = f"""
import json, os
record = {{"benchmark": "fake_ok", "command": "python -m fake_ok", "hardware": {HARDWARE!r},
          "figures": {{"ratio/x": 0.5, "frames_per_s": 100.0}}}}
open(os.environ["RLRUN_BENCH_OUT"], "w").write(json.dumps(record))
"""
# Reports 0.5 on its first run and 1.0 on later ones (a count in a file beside it): a fall that noise made.
FAKE_FLAKY = f"""
import json, os, pathlib
count = pathlib.Path(__file__).with_suffix(".count")
runs = int(count.read_text()) if count.exists() else 0
count.write_text(str(runs + 1))
record = {{"benchmark": "fake_flaky", "command": "python -m fake_flaky", "hardware": {HARDWARE!r},
          "figures": {{"ratio/x": 0.5 if runs == 0 else 1.0, "ratio/y": 0.9 if runs == 0 else 0.1}}}}
open(os.environ["RLRUN_BENCH_OUT"], "w").write(json.dumps(record))
"""
FAKE_BROKEN = "raise RuntimeError('boom: this benchmark is broken')\n"
FAKE_HANG = "import time\ntime.sleep(60)\n"


@pytest.fixture
def fake_benchmarks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Benchmark]:
    """Three small benchmark modules (ok, broken, hanging) on the path of this process (where the runner checks
    that a module exists) and of the benchmark processes (PYTHONPATH, given to run_suite)."""
    mods = tmp_path / "mods"
    mods.mkdir()
    for name, code in (("fake_ok", FAKE_OK), ("fake_broken", FAKE_BROKEN), ("fake_hang", FAKE_HANG),
                       ("fake_flaky", FAKE_FLAKY)):
        (mods / f"{name}.py").write_text(textwrap.dedent(code))
    monkeypatch.syspath_prepend(str(mods))
    return {"fake_ok": Benchmark("fake_ok", "fake_ok", "works"),
            "fake_broken": Benchmark("fake_broken", "fake_broken", "raises"),
            "fake_hang": Benchmark("fake_hang", "fake_hang", "hangs", timeout_s=1.5),
            "fake_flaky": Benchmark("fake_flaky", "fake_flaky", "noisy"),
            "fake_later": Benchmark("fake_later", "fake_ok", "waits",
                                    requires=(Registered("executor", "no_such_executor"),))}


def test_a_failing_benchmark_is_reported_and_the_others_still_run(tmp_path: Path, fake_benchmarks: dict,
                                                                    capsys: pytest.CaptureFixture) -> None:
    results, baseline = tmp_path / "results", tmp_path / "baseline.json"
    baseline.write_text(json.dumps(baseline_of({"fake_ok": {"ratio/x": (0.5, 0.2)}})))
    jobs = [(fake_benchmarks[n], []) for n in ("fake_broken", "fake_hang", "fake_ok", "fake_later")]
    code, path = run_suite(jobs, "ci", "rlrun-bench ci", results=results, baseline_path=baseline, mlflow=False,
                           extra_env={"PYTHONPATH": str(tmp_path / "mods")}, echo=False)
    assert code == 1  # the broken and the hung benchmark fail the job
    data = json.loads(path.read_text())
    assert path.name.endswith(f"-{data['hardware']['commit'] or 'nocommit'}.json") and data["schema"] == SCHEMA
    status = {r["benchmark"]: r["status"] for r in data["results"]}
    assert status == {"fake_broken": "failed", "fake_hang": "timeout", "fake_ok": "ok", "fake_later": "unavailable"}
    broken = data["results"][0]
    assert "RuntimeError: boom" in broken["error"] and broken["command"] == "python -m fake_broken"
    ok = data["results"][2]
    assert ok["figures"]["ratio/x"] == 0.5 and ok["command"] == "python -m fake_ok"
    assert set(ok["load_average"]) == {"before", "after"} and ok["wall_time_s"] > 0
    assert data["comparison"]["ok"] and len(data["comparison"]["passed"]) == 1
    assert "fake_broken (failed), fake_hang (timeout)" in capsys.readouterr().err
    assert path.with_suffix(".md").exists() and list((results / "tb" / "fake_ok").glob("events.out.tfevents.*"))
    assert not list((results / "tmp").glob("*.json"))


def test_a_fallen_ratio_fails_the_run_and_names_the_figure(tmp_path: Path, fake_benchmarks: dict,
                                                           capsys: pytest.CaptureFixture) -> None:
    """fake_ok reports ratio/x = 0.5; baseline 1.0 with tolerance 0.3 -> floor 0.7 > 0.5: fell."""
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(baseline_of({"fake_ok": {"ratio/x": (1.0, 0.3)}})))
    code, path = run_suite([(fake_benchmarks["fake_ok"], [])], "fake_ok", "rlrun-bench fake_ok",
                           results=tmp_path / "r", baseline_path=baseline, mlflow=False, tensorboard=False,
                           extra_env={"PYTHONPATH": str(tmp_path / "mods")}, echo=False)
    assert code == 1 and path.name.endswith("-fake_ok.json")
    err = capsys.readouterr().err
    assert "fake_ok ratio/x: 0.500 vs baseline 1.000" in err
    [rec] = read_records(path)
    assert rec["retry"]["figures"]["ratio/x"] == 0.5  # confirmed by a second run before failing
    # accepting the run as the new baseline: no failure, and the tolerance the figure had is kept
    code, _ = run_suite([(fake_benchmarks["fake_ok"], [])], "fake_ok", "rlrun-bench fake_ok", results=tmp_path / "r",
                        baseline_path=baseline, update_baseline=True, mlflow=False, tensorboard=False,
                        extra_env={"PYTHONPATH": str(tmp_path / "mods")}, echo=False)
    assert code == 0
    assert json.loads(baseline.read_text())["benchmarks"]["fake_ok"] == {"ratio/x": {"value": 0.5, "tolerance": 0.3}}


def test_a_fall_that_a_second_run_does_not_confirm_passes(tmp_path: Path, fake_benchmarks: dict) -> None:
    """fake_flaky: ratio/x = 0.5 then 1.0 (baseline 1.0, floor 0.8); ratio/y = 0.9 then 0.1 (baseline 0.9). The
    first run falls on x, so the benchmark runs again; of each compared ratio the better run is kept: x = 1.0,
    y = 0.9: nothing fell."""
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(baseline_of({"fake_flaky": {"ratio/x": (1.0, 0.2), "ratio/y": (0.9, 0.2)}})))
    code, path = run_suite([(fake_benchmarks["fake_flaky"], [])], "fake_flaky", "rlrun-bench fake_flaky",
                           results=tmp_path / "r", baseline_path=baseline, mlflow=False, tensorboard=False,
                           extra_env={"PYTHONPATH": str(tmp_path / "mods")}, echo=False)
    assert code == 0
    [rec] = read_records(path)
    assert numeric_figures(rec["figures"]) == {"ratio/x": 1.0, "ratio/y": 0.9}
    assert rec["retry"]["figures"] == {"ratio/x": 1.0, "ratio/y": 0.1} and "run twice" in rec["notes"][0]
    assert (tmp_path / "mods" / "fake_flaky.count").read_text() == "2"


def test_one_real_tiny_benchmark_through_the_runner(tmp_path: Path) -> None:
    bench = by_name()["learner_throughput"]
    code, path = run_suite([(bench, ["--cases", "cartpole_mlp", "--rounds", "1", "--min-time", "0.05"])],
                           "learner_throughput", "rlrun-bench learner_throughput", results=tmp_path,
                           baseline_path=tmp_path / "none.json", mlflow=False, tensorboard=False, echo=False)
    assert code == 0
    [rec] = read_records(path)
    assert rec["status"] == "ok" and rec["benchmark"] == "learner_throughput"
    assert rec["command"] == "python -m benchmarks.learner_throughput --cases cartpole_mlp --rounds 1 --min-time 0.05"
    figures = rec["figures"]
    assert figures["samples_per_s/cartpole_mlp/rlrun"] > 0 and figures["samples_per_s/cartpole_mlp/bare"] > 0
    assert 0 < figures["ratio/samples_per_s/cartpole_mlp/rlrun_vs_bare"] < 10
    assert rec["hardware"]["versions"]["torch"].startswith("2.13")


def test_learner_throughput_has_a_case_for_every_algorithm() -> None:
    """Every registered algorithm has a learner case (or is reported unavailable, never silently left out); every
    case names a registered algorithm; the CI baseline holds the CPU-time ratio of every case."""
    from benchmarks.learner_throughput import ALGO_CASES, ALGOS, ALL_CASES
    from rlrun.registry import registry

    algos = set(registry.names("algo"))
    assert {case.algo for case in ALGO_CASES.values()} <= algos
    assert {"dqn", "ppo", "a2c", "trpo"} <= set(ALGOS)
    baseline = bl.load_baseline(ROOT / "benchmarks" / "baseline.json")["benchmarks"]["learner_throughput"]
    assert set(baseline) == {f"ratio/samples_per_cpu_s/{case}/rlrun_vs_bare" for case in ALL_CASES}


def test_learner_throughput_refuses_a_reference_that_computes_something_else() -> None:
    """The two sides must agree on their first two updates before anything is timed: a bare update whose loss is
    off by 1% (rtol 1e-4) stops the benchmark, naming the case and both values."""
    from benchmarks.learner_throughput import Pair, measure

    losses = iter([1.0, 2.0])
    pair = Pair(lambda: {"loss": next(losses)}, lambda: {"loss": 1.01}, 8)
    with pytest.raises(AssertionError, match=r"demo: update 0: the agent's loss 1.0 != the bare update's 1.01"):
        measure("demo", pair, rounds=1, min_time_s=0.01)
    same = Pair(lambda: {"loss": 0.5}, lambda: {"loss": 0.5}, 8)
    figures = measure("same", same, rounds=1, min_time_s=0.01)
    assert figures["batch_size/same"] == 8 and figures["ratio/samples_per_cpu_s/same/rlrun_vs_bare"] > 0


def test_learner_throughput_sac_case_builds_the_run_agent_and_agrees(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The SAC case end to end (the cheapest composed case: MLP on Pendulum): the config composed as
    ``rlrun algo=sac env=pendulum`` builds the agent, its update and the hand-written one agree on critic, actor
    and temperature losses (else measure() raises), and the figures come out."""
    from benchmarks.common import LOG_ENV, RESULTS_ENV
    from benchmarks.learner_throughput import main

    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    monkeypatch.setenv(LOG_ENV, "0")
    figures = main(["--cases", "sac_pendulum_mlp", "--rounds", "1", "--min-time", "0.05"])
    assert figures["batch_size/sac_pendulum_mlp"] == 256
    assert figures["samples_per_cpu_s/sac_pendulum_mlp/bare"] > 0
    assert 0 < figures["ratio/samples_per_cpu_s/sac_pendulum_mlp/rlrun_vs_bare"] < 10
    assert figures["settings/sac_pendulum_mlp"].startswith("rlrun algo=sac env=pendulum")


# ---------------------------------------------------------------------------------------------- logging, plots, CLI


def test_figures_go_to_mlflow_as_a_parent_run_with_a_child_per_benchmark(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from benchmarks.tracking import EXPERIMENT, log_records

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    where = log_records([record("a", {"ratio/x": 0.9, "nested": {"frames_per_s": 10.0}, "note": "text"}),
                         record("b", {}, status="failed")], tmp_path, "ci", "rlrun-bench ci", uri=uri)
    assert where["mlflow_uri"] == uri and where["mlflow_run_id"]
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    children = {r.data.tags["rlrun.bench.benchmark"]: r for r in runs if r.info.run_id != where["mlflow_run_id"]}
    assert children["a"].data.metrics == {"ratio/x": 0.9, "nested/frames_per_s": 10.0}
    assert children["a"].data.tags["mlflow.parentRunId"] == where["mlflow_run_id"]
    assert children["b"].info.status == "FAILED" and "rlrun.hw.cpu" in children["a"].data.tags
    assert list((tmp_path / "tb" / "a").glob("events.out.tfevents.*"))


def test_plots_are_drawn_from_the_result_files(tmp_path: Path) -> None:
    from benchmarks.plots import collect, plot_all

    for i, (commit, fps, frac) in enumerate((("aaa1111", 900.0, 0.7), ("bbb2222", 1000.0, 0.8))):
        hw = {**HARDWARE, "commit": commit, "date": f"2026-11-2{i}T00:00:00+00:00"}
        data = suite_data([{**record("sampling_limit", {"pong/x1/frames_per_s/rlrun_local": fps,
                                                        "fraction_of_limit/pong/x1/local": frac}), "hardware": hw}])
        data["date"] = hw["date"]
        (tmp_path / f"{commit}.json").write_text(json.dumps(data))
    (tmp_path / "baseline.json").write_text("{}")  # not a result file
    (tmp_path / "other.json").write_text(json.dumps(record("env_speed", {"cartpole/1env/frames_per_s": 1e5})))
    labels, series = collect(tmp_path)["sampling_limit"]
    assert labels == ["2026-11-20\naaa1111", "2026-11-21\nbbb2222"]  # only the files that hold the benchmark
    assert series["fraction_of_limit/pong/x1/local"] == {0: 0.7, 1: 0.8}
    pngs = plot_all(tmp_path, tmp_path / "plots")
    assert [p.name for p in pngs] == ["env_speed.png", "sampling_limit.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)


def test_rlrun_bench_console_script_lists_the_suite() -> None:
    exe = Path(sys.executable).parent / "rlrun-bench"
    env = {k: v for k, v in os.environ.items() if k != "RLRUN_BENCH_RESULTS"}
    proc = subprocess.run([str(exe), "list"], capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert "logger_overhead" in proc.stdout and "scaling" in proc.stdout and "unavailable" in proc.stdout
    bad = subprocess.run([str(exe), "nonsense"], capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 2 and "unknown command or benchmark 'nonsense'" in bad.stderr


def test_pong_long_runs_every_preset_on_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU benchmark's path on the CPU (--smoke: 256 agent steps of each preset): every run stops at its frame
    budget, its figures are filled, and a smoke run writes no result file."""
    from benchmarks import pong_long

    monkeypatch.setenv("RLRUN_BENCH_RESULTS", str(tmp_path))
    figures = pong_long.main(["--smoke"])
    for algo in pong_long.RUNS:
        assert figures[f"stop_reason/{algo}"] == "env_steps" and figures[f"reached/{algo}"] == 0
        assert figures[f"frames_per_s/{algo}"] > 0
    assert list(tmp_path.iterdir()) == []


def test_ray_startup_and_transfer_are_measured(tmp_path: Path) -> None:
    """``benchmarks.executor_throughput --quick --startup-runs 1`` without throughput settings: one fresh process
    per variant starts a local Ray cluster and 2 Pong workers up to their first rollout, and one more joins a running
    cluster (a ``ray start --head`` of the benchmark's own, ``executor.address``); the record holds every variant's
    phases (which add up; the join's probe reached the head's GCS), the Ray processes' memory, the peer's figure,
    and both transfer paths."""
    pytest.importorskip("ray")
    out = tmp_path / "record.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.executor_throughput", "--quick", "--settings", "",
                           "--no-batching", "--startup-runs", "1"], cwd=ROOT,
                          env={**os.environ, "RLRUN_BENCH_OUT": str(out)}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    for variant in ("ray_startup/", "ray_startup/no_preload/", "ray_startup/existing_cluster/"):
        init, workers, total = (figures[f"{variant}{k}"] for k in
                                ("ray_init_s", "workers_to_first_sample_s", "init_to_first_sample_s"))
        assert 0 <= init < total and 0 < workers < total and abs(init + workers - total) <= 0.02  # joining: ~0.04 s
    assert figures["ray_startup/cpu_s"] > 0 and figures["ray_startup/no_preload/cpu_s"] > 0
    assert figures["ray_startup/existing_cluster/joined"] is True  # the head's cluster, not one of its own
    assert figures["ray_startup/existing_cluster/init_to_first_sample_all_s"] == [
        figures["ray_startup/existing_cluster/init_to_first_sample_s"]]
    assert figures["ray_startup/runs"] == 1 and figures["ray_startup/workers"] == 2
    assert figures["ray_startup/init_to_first_sample_all_s"] == [figures["ray_startup/init_to_first_sample_s"]]
    assert figures["ray_memory/processes"] >= 4 and figures["ray_memory/rss_mib"] > figures["ray_memory/pss_mib"] > 0
    assert figures["ray_startup/rllib_peer_init_to_first_sample_s"] == 17.0
    assert not any(k.startswith(("pong/", "fraction_of_limit/")) for k in figures)  # no throughput settings
    assert figures["transfer/rollout_mb"] == 28.9
    for path in ("object_store", "shared_memory"):
        ms, rate = figures[f"transfer/{path}/ms_per_rollout"], figures[f"transfer/{path}/gb_per_s"]
        assert ms > 0 and abs(rate - 28.9 / ms) <= 0.02 * rate + 0.01
        assert figures[f"transfer/{path}/worker_cpu_ms_per_rollout"] > 0


def test_replay_memory_meets_the_bytes_goal_on_a_real_pong_stream(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks.replay_memory --quick``: 1,600 Pong transitions into a memory that stores each frame once and
    one that stores whole stacks (it checks they sample the same records): under 8 KB per transition against
    56 KB, for DQN's, Ape-X's and per-step inserts. Sizes, not timings."""
    from benchmarks import replay_memory

    monkeypatch.setenv("RLRUN_BENCH_RESULTS", str(tmp_path))
    monkeypatch.setenv("RLRUN_BENCH_LOG", "0")
    figures = replay_memory.main(["--quick"])
    for label in ("dqn_rollout4", "apex_batch50", "per_step"):
        assert figures[f"bytes_per_transition/whole/{label}"] > 56_000
        assert figures[f"bytes_per_transition/dedup/{label}"] < 8_192
        assert 0.9 < figures[f"frames_per_transition/dedup/{label}"] < 1.1
    assert len(list(tmp_path.glob("*-replay_memory.json"))) == 1


def test_apex_actors_runs_both_learner_modes_on_its_path() -> None:
    """``benchmarks.apex_actors --smoke``: the headline command on Ray for a few seconds per learner mode, tiny
    batches: both modes learn (gradient steps), actors act while learning, and the run stops near its wall time."""
    from benchmarks import apex_actors

    figures = apex_actors.main(["--smoke", "--seconds", "15"])
    for mode in ("thread", "sync"):
        assert figures[f"gradient_steps/{mode}"] > 0
        assert figures[f"frames_per_s/while_learning/{mode}"] > 0
        assert figures[f"stop_overshoot_s/{mode}"] < 15


def test_impala_actors_measures_idle_thread_and_sync_on_its_path() -> None:
    """``benchmarks.impala_actors --smoke`` (IMPALA only, tiny batches): the idle mode acts without learning (no
    update), thread and sync modes learn, and every mode acts."""
    from benchmarks import impala_actors

    figures = impala_actors.main(["--smoke", "--algos", "impala", "--seconds", "10"])
    assert figures["updates/impala/idle"] == 0  # the harness's no-op learner
    for mode in ("thread", "sync"):
        assert figures[f"updates/impala/{mode}"] > 0
    for mode in ("idle", "thread", "sync"):
        assert figures[f"frames_per_s/impala/{mode}"] > 0
    assert figures["ratio/thread_vs_idle/impala"] > 0
