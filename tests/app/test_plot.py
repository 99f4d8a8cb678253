"""rlrun-plot: learning curves and frames/s from the TensorBoard event files of real (tiny) runs, as a PNG; the
mean ± std over seeds worked out by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_rlrun

from rlrun.app.plot import FPS_TAG, RETURN_TAG, RunCurves, aggregate, group_runs, read_run

PLOT = str(Path(sys.executable).parent / "rlrun-plot")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_aggregate_two_seeds_on_their_shared_x_values() -> None:
    """Seed A: (0,0) (10,10) (20,20); seed B: (0,10) (20,30), so B at x=10 interpolates to 20.
    Grid = {0, 10, 20}; A = [0, 10, 20], B = [10, 20, 30]; mean = [5, 15, 25]; std (ddof=0) = [5, 5, 5]."""
    x, mean, std = aggregate([(np.array([0.0, 10, 20]), np.array([0.0, 10, 20])),
                              (np.array([0.0, 20]), np.array([10.0, 30]))])
    np.testing.assert_allclose(x, [0, 10, 20])
    np.testing.assert_allclose(mean, [5, 15, 25])
    np.testing.assert_allclose(std, [5, 5, 5])


def test_aggregate_keeps_only_the_frames_every_seed_reached() -> None:
    """A: (0,0) (10,10) (30,30); B: (5,0) (25,20). Shared range [5, 25]; grid = the x values there: {5, 10, 25}.
    A = [5, 10, 25]; B = [0, 5, 20]; mean = [2.5, 7.5, 22.5]; std = [2.5, 2.5, 2.5]."""
    x, mean, std = aggregate([(np.array([0.0, 10, 30]), np.array([0.0, 10, 30])),
                              (np.array([5.0, 25]), np.array([0.0, 20]))])
    np.testing.assert_allclose(x, [5, 10, 25])
    np.testing.assert_allclose(mean, [2.5, 7.5, 22.5])
    np.testing.assert_allclose(std, [2.5, 2.5, 2.5])


def test_aggregate_caps_the_grid_and_passes_one_curve_through() -> None:
    many = (np.arange(1000.0), np.arange(1000.0))
    x, mean, std = aggregate([many, many], points=50)
    assert len(x) == 50 and x[0] == 0 and x[-1] == 999
    np.testing.assert_allclose(mean, x)
    np.testing.assert_allclose(std, 0)
    x, mean, std = aggregate([(np.array([1.0, 2]), np.array([3.0, 4]))])
    np.testing.assert_allclose(mean, [3, 4])
    np.testing.assert_allclose(std, 0)


def test_groups_are_the_overrides_less_the_seed() -> None:
    def run(*overrides: str) -> RunCurves:
        return RunCurves(Path("/r"), list(overrides))

    runs = [run("algo.lr=0.001", "seed=0", "stop.env_steps=9"), run("algo.lr=0.001", "seed=1", "stop.env_steps=9"),
            run("algo.lr=0.0003", "seed=0", "stop.env_steps=9")]
    groups, common = group_runs(runs)
    assert {k: len(v) for k, v in groups.items()} == {"algo.lr=0.001": 2, "algo.lr=0.0003": 1}
    assert common == ["stop.env_steps=9"]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real runs (seeds 0 and 1) that report after every training_step, so each logs many points."""
    work = tmp_path_factory.mktemp("plot")
    run_rlrun(["-m", "seed=0,1", "stop.env_steps=1500", "algo.learning_starts=100", "logger.console.enabled=false",
               "logger.mlflow.enabled=false", "logger.report_interval_s=0", "hydra.sweep.dir=sw"], work, check=True)
    return work / "sw"


def test_read_run_gives_return_and_fps_against_frames(sweep_dir: Path) -> None:
    run_dir = next(p for p in sweep_dir.iterdir() if p.name.startswith("0-"))
    summary = json.loads((run_dir / "summary.json").read_text())
    run = read_run(run_dir)
    assert run.overrides[0] == "seed=0" and run.x_is_frames
    x, y = run.curves[RETURN_TAG]
    assert len(x) >= 2 and np.all(np.diff(x) > 0)
    assert x[-1] == summary["frames"] and y[-1] == pytest.approx(summary["episode_return_mean"])
    assert FPS_TAG in run.curves and np.all(run.curves[FPS_TAG][1] > 0)


def test_rlrun_plot_writes_a_png_for_a_sweep_and_for_a_run(sweep_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "curves.png"
    proc = subprocess.run([PLOT, str(sweep_dir), "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out} (2 runs in 1 group)" in proc.stdout
    assert out.read_bytes()[:8] == PNG_SIGNATURE
    import matplotlib.image

    image = matplotlib.image.imread(out)
    assert image.shape[0] > 300 and image.shape[1] > 600
    assert image[..., :3].std() > 0.05  # not a blank canvas: curves, axes and labels were drawn

    run_dir = next(p for p in sweep_dir.iterdir() if p.name.startswith("1-"))
    proc = subprocess.run([PLOT, str(run_dir)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "(1 run in 1 group)" in proc.stdout
    assert (run_dir / "learning_curves.png").read_bytes()[:8] == PNG_SIGNATURE


def test_rlrun_plot_without_event_files_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run([PLOT, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no TensorBoard event files" in proc.stderr and "Traceback" not in proc.stderr


def test_overrides_of_a_run_directory_are_text_not_interpolations(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A run directory's .hydra/overrides.yaml is shown as written: an interpolation someone put there
    (${oc.env:SECRET}) is not resolved into the plot's labels."""
    from rlrun.app.plot import run_overrides

    monkeypatch.setenv("RLRUN_TEST_SECRET", "hunter2")
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- algo=dqn\n- run_name=${oc.env:RLRUN_TEST_SECRET}\n")
    assert run_overrides(tmp_path) == ["algo=dqn", "run_name=${oc.env:RLRUN_TEST_SECRET}"]


def test_profiles_span_every_groups_final_returns() -> None:
    """x: 1, 2, 3, 4; y: 10. Thresholds from 1 - 0.45 to 10 + 0.45 (5% of the spread 9 either side), 3 points:
    0.55, 5.5, 10.45. Fraction above them: x 1, 0, 0; y 1, 1, 0."""
    from rlrun.app.plot import profiles

    taus, by_group = profiles({"x": np.array([1.0, 2.0, 3.0, 4.0]), "y": np.array([10.0])}, points=3)
    np.testing.assert_allclose(taus, [0.55, 5.5, 10.45])
    np.testing.assert_allclose(by_group["x"][0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(by_group["y"][0], [1.0, 1.0, 0.0])
    low, high = by_group["x"][1:]
    assert np.all(low <= by_group["x"][0]) and np.all(by_group["x"][0] <= high)


def test_a_normaliser_puts_envs_on_one_scale_and_each_setting_spans_them(tmp_path: Path) -> None:
    """With --normaliser a setting's runs on CartPole and Acrobot are one group, each return as (r - low) /
    (high - low); an env the file lacks is one line and exit 2."""
    for env, kind in (("CartPole-v1", "cartpole"), ("Acrobot-v1", "acrobot")):
        run_rlrun([f"env={kind}", f"env.id={env}", "stop.env_steps=600", "executor.num_envs=1",
                   "algo.learning_starts=100", "logger.console.enabled=false", "logger.mlflow.enabled=false",
                   f"hydra.run.dir=runs/{kind}"], tmp_path, check=True)
    table = tmp_path / "scores.yaml"
    table.write_text("CartPole-v1: {low: 0, high: 500}\nAcrobot-v1: {low: -500, high: 0}\n")
    out = tmp_path / "curves.png"
    proc = subprocess.run([PLOT, str(tmp_path / "runs"), "--normaliser", str(table), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "(2 runs in 1 group)" in proc.stdout and out.read_bytes()[:8] == PNG_SIGNATURE
    from rlrun.app.plot import normalised

    runs = {r.env: r for r in (read_run(d) for d in (tmp_path / "runs").iterdir())}
    assert set(runs) == {"gym:CartPole-v1", "gym:Acrobot-v1"}
    scales = {"CartPole-v1": (0.0, 500.0), "Acrobot-v1": (-500.0, 0.0)}
    for env, (low, high) in (("gym:CartPole-v1", (0.0, 500.0)), ("gym:Acrobot-v1", (-500.0, 0.0))):
        raw = runs[env].curves[RETURN_TAG][1]
        np.testing.assert_allclose(normalised(runs[env], scales).curves[RETURN_TAG][1], (raw - low) / (high - low))
    table.write_text("CartPole-v1: {low: 0, high: 500}\n")
    proc = subprocess.run([PLOT, str(tmp_path / "runs"), "--normaliser", str(table)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "no entry for gym:Acrobot-v1" in proc.stderr and "add 'Acrobot-v1: {low: L, high: H}'" in proc.stderr
