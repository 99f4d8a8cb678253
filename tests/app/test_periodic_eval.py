"""Evaluation during training (rlrun/app/periodic_eval.py, eval.*) and checkpoint history (checkpoint.keep_last,
checkpoint.keep_best): evaluations land in TensorBoard and summary.json at multiples of the interval, leave the
training itself bitwise unchanged (local executor), run on a driver thread on the Ray executor, keep the best
evaluation's checkpoint as best.pt (which rlrun eval and export take), and bad settings are one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_same, run_rlrun

from rlrun import checkpoint as ckpt

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

BASE = ["algo=ppo", "stop.env_steps=6144", "stop.episode_return_mean=null",
       "algo.rollout_steps=64", "export.formats=[]", "algo.total_env_steps=6144"]
PPO = [*BASE, "executor.num_envs=4"]
EVAL = ["eval.interval_env_steps=1500", "eval.episodes=3"]


def train(overrides: list[str], run_dir: Path) -> dict:
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    return run_experiment(compose(overrides), run_dir)


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={SCALARS: 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("eval") / "run"
    train([*PPO, *EVAL, "checkpoint.keep_best=true", "checkpoint.keep_last=3", "checkpoint.interval_env_steps=2048",
           "logger.mlflow.enabled=false"], run_dir)
    return run_dir


def test_evaluations_at_each_interval_in_tensorboard_and_the_summary(evaluated_run: Path) -> None:
    points = scalars(evaluated_run, "eval/return_mean")
    steps = [s for s, _ in points]
    # one per multiple of 1500 reached (rollouts are 256 env steps: the first step at or past each multiple)
    assert steps == [1536, 3072, 4608, 6144]
    assert len(scalars(evaluated_run, "eval/return_std")) == 4
    summary = json.loads((evaluated_run / "summary.json").read_text())
    assert summary["eval_env_steps"] == 6144 and summary["eval_return_mean"] == pytest.approx(points[-1][1])
    assert summary["eval_return_best"] == pytest.approx(max(v for _, v in points))
    assert points[-1][1] > points[0][1]  # the greedy policy improved while training


def test_checkpoint_history_and_best(evaluated_run: Path) -> None:
    folder = evaluated_run / "checkpoints"
    assert sorted(p.name for p in folder.glob("*.pt")) == ["best.pt", "latest.pt", "step-000000004096.pt",
                                                           "step-000000006144.pt"]
    summary = json.loads((evaluated_run / "summary.json").read_text())
    best = ckpt.load_checkpoint(folder / "best.pt")
    assert best["eval"]["best"] == pytest.approx(summary["eval_return_best"])
    assert best["loop"]["env_steps"] == best["eval"]["best_env_steps"]  # the state that was evaluated
    older = ckpt.load_checkpoint(folder / "step-000000004096.pt")
    assert older["loop"]["env_steps"] == 4096


def test_evaluation_leaves_training_unchanged(evaluated_run: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    train([*PPO, "logger=none", "checkpoint.interval_env_steps=2048"], plain)
    a = ckpt.load_checkpoint(ckpt.checkpoint_path(evaluated_run))
    b = ckpt.load_checkpoint(ckpt.checkpoint_path(plain))
    assert_same(a["algo"], b["algo"], "algo")
    assert_same(a["rng"], b["rng"], "rng")


def test_rlrun_eval_and_export_take_best(evaluated_run: Path, workdir: Path) -> None:
    best = evaluated_run / "checkpoints" / "best.pt"
    proc = run_rlrun(["eval", str(best), "episodes=2"], workdir)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((evaluated_run / "eval.json").read_text())
    assert result["checkpoint"] == str(best.resolve())
    out = workdir / "exported"
    proc = run_rlrun(["export", str(best), "--out", str(out)], workdir)
    assert proc.returncode == 0, proc.stderr
    assert (out / "policy.pt").is_file()


def test_background_evaluation_on_the_ray_executor(tmp_path: Path) -> None:
    run_dir = tmp_path / "ray"
    summary = train([*BASE, *EVAL, "executor=ray", "executor.num_workers=1", "executor.num_cpus=1",
                     "executor.num_envs_per_worker=4", "logger.mlflow.enabled=false"], run_dir)
    points = scalars(run_dir, "eval/return_mean")
    assert points and all(s % 1536 == 0 for s, _ in points)  # logged at the step its snapshot was taken
    assert summary["eval_return_mean"] is not None


@pytest.mark.parametrize("args, message", [
    (["checkpoint.keep_best=true"], "checkpoint.keep_best=true needs evaluations"),
    (["eval.interval_env_steps=100", "eval.episodes=0"], "eval.episodes=0: must be >= 1"),
    (["checkpoint.keep_last=0"], "checkpoint.keep_last=0: must be >= 1"),
    (["eval.interval_env_steps=-5"], "eval.interval_env_steps=-5: must be >= 1"),
])
def test_bad_settings_are_one_line(args: list[str], message: str, workdir: Path) -> None:
    proc = run_rlrun([*args, "logger=none"], workdir)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (workdir / "outputs").exists() or not list((workdir / "outputs").rglob("summary.json"))
