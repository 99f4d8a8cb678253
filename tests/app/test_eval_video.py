"""``eval.video=true``: every periodic evaluation records its episodes into ``<run dir>/videos/eval-<env step>/`` and
logs them to the trackers (TensorBoard's Images tab as a GIF, MLflow artifacts, W&B media), with the same figures as
without video; without the video extra it is one line and exit 2 before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import QUICK, only_summary, run_rlrun

pytest.importorskip("moviepy")  # the dev extra installs the video extra (make install)
pytest.importorskip("pygame")

EVAL = ["eval.interval_env_steps=150", "eval.episodes=2", "logger.console.enabled=false"]


def test_each_evaluation_records_its_episodes_and_the_trackers_get_them(
        workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    from loggers.test_wandb import history, offline_records
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("WANDB_SILENT", "true")
    run_rlrun([*QUICK, *EVAL, "eval.video=true", "logger.wandb.enabled=true", "logger.wandb.mode=offline"],
              workdir, check=True)
    summary = only_summary(workdir / "outputs")
    run_dir = Path(summary["run_dir"])
    # 300 env steps, an evaluation at the first report past each multiple of 150 (DQN's training steps are 16 env
    # steps: 160 and 304): two evaluations, of two episodes each
    steps = sorted(int(p.name.removeprefix("eval-")) for p in (run_dir / "videos").iterdir())
    assert len(steps) == 2 and steps[0] >= 150 and steps[1] == summary["eval_env_steps"] == summary["env_steps"]
    for step in steps:
        videos = sorted(p.name for p in (run_dir / "videos" / f"eval-{step}").iterdir())
        assert videos == ["eval-episode-0.mp4", "eval-episode-1.mp4"]
        assert all((run_dir / "videos" / f"eval-{step}" / v).stat().st_size > 0 for v in videos)

    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    stored = [a.path for a in client.list_artifacts(summary["mlflow_run_id"], f"videos/eval-{steps[0]}")]
    assert stored == [f"videos/eval-{steps[0]}/eval-episode-0.mp4", f"videos/eval-{steps[0]}/eval-episode-1.mp4"]

    rows = [r for r in history(offline_records(run_dir)) if any(k.startswith("eval/videos") for k in r)]
    assert [r["env_step"] for r in rows] == steps
    media = sorted((run_dir / "wandb").glob("offline-run-*/files/media/videos/eval/*.mp4"))
    assert len(media) == 4  # W&B copied the four episodes into its run files

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    gifs = events.Images("eval/video")  # each evaluation's first episode, an animated GIF at its env step
    assert [g.step for g in gifs] == steps and all(g.encoded_image_string.startswith(b"GIF89a") for g in gifs)

    # Recording changes nothing the run computes: the same evaluation figures as the same run without video.
    plain = tmp_path / "plain"
    plain.mkdir()
    run_rlrun([*QUICK, *EVAL, "logger=none"], plain, check=True)
    without = only_summary(plain / "outputs")
    assert (without["eval_return_mean"], without["eval_return_std"]) == (summary["eval_return_mean"],
                                                                       summary["eval_return_std"])
    assert not (Path(without["run_dir"]) / "videos").exists()


def test_without_the_video_extra_it_is_one_line_and_exit_2(workdir: Path, tmp_path: Path) -> None:
    """A fresh interpreter where ``import moviepy`` fails, as without the extra (sitecustomize blocks it)."""
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text("import sys\nsys.modules['moviepy'] = None\n")
    proc = run_rlrun([*EVAL, "eval.video=true", "stop.env_steps=1"], workdir, env={"PYTHONPATH": str(block)})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.strip() == ("rlrun: error: eval.video=true: moviepy not installed (recording writes mp4 "
                                   "through moviepy; classic-control envs render with pygame); "
                                   "pip install 'rlrun[video]'.")


def test_video_without_evaluations_says_what_to_set(workdir: Path) -> None:
    proc = run_rlrun(["eval.video=true", "stop.env_steps=1"], workdir)
    assert proc.returncode == 2 and "set eval.interval_env_steps" in proc.stderr, proc.stderr
