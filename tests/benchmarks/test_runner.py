"""The runner (benchmarks/runner.py, rlrun-bench): failing, hanging and noisy benchmarks, the result file, one real tiny
benchmark through it, and the console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from suite_records import HARDWARE, baseline_of

from benchmarks.records import (
    SCHEMA,
    numeric_figures,
    read_records,
)
from benchmarks.runner import run_suite
from benchmarks.suite import Benchmark, Registered, by_name

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


def test_rlrun_bench_console_script_lists_the_suite() -> None:
    exe = Path(sys.executable).parent / "rlrun-bench"
    env = {k: v for k, v in os.environ.items() if k != "RLRUN_BENCH_RESULTS"}
    proc = subprocess.run([str(exe), "list"], capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert "learner_throughput" in proc.stdout and "pong_long" in proc.stdout and "unavailable" in proc.stdout
    bad = subprocess.run([str(exe), "nonsense"], capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 2 and "unknown command or benchmark 'nonsense'" in bad.stderr
