"""The GPU kit (benchmarks/gpu) cannot rot between GPU machines: its dry run and its wheel folder, in every make test.

- the dry run (``rlrun-bench gpu --dry-run``: the kit's four stages on the CPU with tiny budgets, the packages the
  GPU machine lacks made unimportable) exits 0 and writes every result file the docs promise, each holding what its
  stage measured: the CUDA tests ran on the CPU and passed (not all skipped), the learner figures, the actors'
  figures for both modes, Pong's summary;
- the wheel folder builds from ``wheels.txt`` for CPython 3.12, every wheel's requirements resolve against the folder
  and the machine's packages, every dependency of rlrun is carried, on the machine or excluded with a reason, and
  it fits the call's 64 MiB with the working tree;
- the dry run's import blocker works (a kit stage needing Ray would fail here), and a stage that overruns its
  budget is stopped with its processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RLRUN_BENCH = str(Path(sys.executable).parent / "rlrun-bench")


def test_the_dry_run_writes_every_result_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([RLRUN_BENCH, "gpu", "--dry-run", "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)
    log = (out / "kit.log").read_text() if (out / "kit.log").is_file() else ""
    assert proc.returncode == 0, f"{proc.stderr[-3000:]}\n{log[-6000:]}"
    assert sorted(p.name for p in out.iterdir()) == ["actors.json", "cuda_tests.xml", "kit.json", "kit.log",
                                                      "learner.json", "pong.json"]
    index = json.loads((out / "kit.json").read_text())
    assert index["dry_run"] is True and index["machine"]["torch"]
    assert [(name, s["exit_code"]) for name, s in index["stages"].items()] == [
        ("cuda_tests", 0), ("learner", 0), ("actors", 0), ("pong", 0)]

    suite = ET.parse(out / "cuda_tests.xml").getroot().find("testsuite")
    tests, skipped = int(suite.get("tests")), int(suite.get("skipped"))
    assert int(suite.get("failures")) == 0 and int(suite.get("errors")) == 0
    ran = {case.get("name") for case in suite.iter("testcase") if case.find("skipped") is None}
    assert tests - skipped >= 10 and "test_every_update_on_the_device_equals_the_cpu_update[sac_pendulum_mlp]" in ran

    learner = json.loads((out / "learner.json").read_text())["figures"]
    assert learner["device"] == "cpu"
    for case in ("cartpole_mlp", "ppo_atari_nature_cnn", "sac_pendulum_mlp", "cartpole_mlp/compiled"):
        assert learner[f"samples_per_s/{case}/rlrun"] > 0 and learner[f"samples_per_s/{case}/bare"] > 0

    actors = json.loads((out / "actors.json").read_text())["figures"]
    assert actors["executor"] == "local"
    assert actors["frames_per_s/appo/idle"] > 0 and actors["frames_per_s/appo/thread"] > 0
    assert actors["updates/appo/thread"] > 0 and actors["updates/appo/idle"] == 0  # idle: no learning

    pong = json.loads((out / "pong.json").read_text())
    assert pong["summary"]["env"] == "Pong" and pong["summary"]["env_steps"] > 0
    assert pong["summary"]["stop_reason"] == "wall_time_s" and "device=cpu" in pong["command"]
    assert pong["curves"]["perf/frames_per_s"]


@pytest.fixture(scope="module")
def wheel_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel folder, built once (needs the package registry, as make install does)."""
    from benchmarks.gpu.wheels import build

    folder = tmp_path_factory.mktemp("whl")
    build(folder)
    return folder


def test_the_wheel_folder_builds_resolves_and_fits(wheel_folder: Path) -> None:
    from benchmarks.gpu.wheels import CARRY_LIMIT, build, pinned, wheel_name

    wheels = build(wheel_folder)  # checks resolution and size again (raises on a problem)
    assert {wheel_name(w) for w in wheels} == set(pinned())
    assert all("cp312" in w.name or "py3-none-any" in w.name or "py2.py3-none-any" in w.name for w in wheels)
    assert sum(w.stat().st_size for w in wheels) < CARRY_LIMIT // 4


def test_a_missing_requirement_and_an_uncovered_dependency_are_named(wheel_folder: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks can fail: gymnasium's farama-notifications dropped from the folder (the machine lacks it), and a
    dependency of rlrun that is neither carried, on the machine, nor excluded."""
    import shutil

    from benchmarks.gpu import wheels

    folder = tmp_path / "whl"
    shutil.copytree(wheel_folder, folder)
    next(folder.glob("Farama_Notifications-*.whl")).unlink()
    monkeypatch.setattr(wheels, "rlrun_dependencies", lambda: ["gymnasium", "no-such-package"])
    problems = wheels.check(folder)
    assert any("requires farama-notifications" in p for p in problems)
    assert any("farama-notifications: pinned in wheels.txt but not in the folder" in p for p in problems)
    assert any("rlrun depends on no-such-package" in p for p in problems)


def test_the_dry_run_makes_the_missing_packages_unimportable() -> None:
    from benchmarks.gpu.kit import stage_env

    env = stage_env(Path("/nonexistent"), dry_run=True)
    probe = "import importlib, sys\nfor m in ('ray', 'mlflow.tracking', 'gymnasium'):\n" \
            "    try: importlib.import_module(m); print(m, 'ok')\n    except ImportError: print(m, 'missing')\n"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:3] == ["ray missing", "mlflow.tracking missing", "gymnasium ok"]


def test_a_stage_over_its_budget_is_stopped_with_its_children(tmp_path: Path) -> None:
    """A stage that starts a child and sleeps: stopped at 1 s, the child (same process group) gone too."""
    from benchmarks.gpu.kit import run_stage

    pid_file = tmp_path / "child.pid"
    script = (f"import subprocess, time; p = subprocess.Popen(['sleep', '60']); "
              f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    code, seconds = run_stage([sys.executable, "-c", script], dict(os.environ), 1.0, tmp_path / "kit.log")
    assert code is None and seconds < 10
    child = int(pid_file.read_text())
    for _ in range(50):  # the killed child is reaped by init shortly after its parent is gone
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the stage's child outlived the stage")
    assert "exit None" in (tmp_path / "kit.log").read_text()
