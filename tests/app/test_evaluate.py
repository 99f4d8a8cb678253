"""``rlrun eval`` (rlrun/app/evaluate.py): a checkpoint's policy without exploration for N episodes; the mean score
printed, written to eval.json and logged to the run's MLflow run; optional video with gymnasium's RecordVideo."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import run_rlrun
from crafted import crafted_copy, recording_server

from rlrun.app.evaluate import EVAL_SEED_OFFSET, _key_values_as_options, evaluate
from rlrun.errors import RlrunError
from rlrun.export import restore


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """800 env steps of DQN on CartPole (in this process) with an MLflow run in a store of its own."""
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    root = tmp_path_factory.mktemp("eval")
    cfg = compose(["stop.env_steps=800", "algo.learning_starts=100", "algo.hidden_sizes=[32]", "seed=2",
                   "export.formats=[]", "logger.tensorboard.enabled=false", "logger.console.enabled=false",
                   f"logger.mlflow.tracking_uri=sqlite:///{root / 'mlflow.db'}"])
    run_experiment(cfg, root / "run")
    return root / "run"


def naive_greedy_returns(run_dir: Path, episodes: int, seed: int) -> list[float]:
    """A deliberately plain reference: gym.make, argmax of the restored Q-network, reset(seed) once."""
    restored = restore(run_dir)
    env = gym.make("CartPole-v1")
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        total, done = 0.0, False
        while not done:
            with torch.no_grad():
                action = int(restored.algo.agent.q(torch.as_tensor(obs)[None]).argmax())
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
        returns.append(total)
    restored.close()
    return returns


def test_rlrun_eval_records_the_mean_score(trained_run: Path, tmp_path: Path) -> None:
    store = f"sqlite:///{trained_run.parent / 'mlflow.db'}"
    proc = run_rlrun(["eval", str(trained_run), "episodes=3", f"tracking_uri={store}"], tmp_path, check=True)
    result = json.loads((trained_run / "eval.json").read_text())
    expected = naive_greedy_returns(trained_run, 3, seed=2 + EVAL_SEED_OFFSET)
    assert result["returns"] == expected and result["episodes"] == 3 and result["explore"] is False
    assert result["return_mean"] == pytest.approx(np.mean(expected))
    assert result["checkpoint_env_steps"] == 800 and result["seed"] == 2 + EVAL_SEED_OFFSET
    assert sum(result["lengths"]) == sum(expected)  # CartPole: reward 1 per step
    assert f"return mean {np.mean(expected):.1f}" in proc.stdout and "3 episodes without exploration" in proc.stdout

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store)
    evaluation = client.get_run(result["mlflow_eval_run_id"])
    trained = client.get_run(result["mlflow_run_id"])
    history = client.get_metric_history(evaluation.info.run_id, "eval/return_mean")
    assert [(m.step, m.value) for m in history] == [(800, pytest.approx(np.mean(expected)))]
    # its own run, nested under the training run, which it leaves as it ended
    assert evaluation.data.tags["mlflow.parentRunId"] == trained.info.run_id
    assert evaluation.info.run_name == f"eval-{trained.info.run_name}" and evaluation.info.status == "FINISHED"
    assert evaluation.data.params["episodes"] == "3" and evaluation.data.params["checkpoint_env_steps"] == "800"
    assert "eval/return_mean" not in trained.data.metrics
    assert trained.info.end_time < evaluation.info.start_time


def test_evaluation_is_greedy_and_seeded(trained_run: Path) -> None:
    """Same seed, same episodes; the score differs from the exploring policy's (epsilon is still high here)."""
    a = evaluate(trained_run, episodes=2, seed=7, write=False)
    b = evaluate(trained_run, episodes=2, seed=7, write=False)
    assert a.returns == b.returns == naive_greedy_returns(trained_run, 2, seed=7)
    assert a.lengths == [int(r) for r in a.returns]


def test_video_recording(trained_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("moviepy")
    pytest.importorskip("pygame")
    result = evaluate(trained_run, episodes=1, seed=0, video_dir=tmp_path / "videos", write=False)
    videos = sorted((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 1000, videos
    assert result.video_dir == str((tmp_path / "videos").resolve())


def test_bad_eval_input_is_one_clear_error(trained_run: Path) -> None:
    with pytest.raises(RlrunError, match="episodes=0: must be at least 1"):
        evaluate(trained_run, episodes=0)
    with pytest.raises(RlrunError, match="unknown setting 'episode=3'"):
        _key_values_as_options([str(trained_run), "episode=3"])
    assert _key_values_as_options(["run", "episodes=4", "seed=1"]) == ["run", "--episodes", "4", "--seed", "1"]


def test_a_checkpoint_does_not_choose_where_eval_sends_mlflow_data(trained_run: Path, tmp_path: Path) -> None:
    """A checkpoint naming another tracking server (a listener on 127.0.0.1 here) with the user's token in the
    environment: rlrun eval sends nothing there (MLflow would add Authorization: Bearer <token>); it evaluates,
    writes eval.json and says where the run's MLflow run is. The user's own store gets nothing either."""
    with recording_server() as (url, requests):
        logger = {"mlflow": {"enabled": True, "tracking_uri": url}}
        crafted = crafted_copy(trained_run, tmp_path / "crafted", {"tracking_uri": url, "run_id": "0" * 32},
                               logger=logger)
        proc = run_rlrun(["eval", str(crafted), "episodes=1"], tmp_path,
                         env={"MLFLOW_TRACKING_TOKEN": "secret-token-123"})
    assert proc.returncode == 0, proc.stderr
    assert requests == []
    assert "eval.json only" in proc.stderr and "secret-token-123" not in proc.stdout + proc.stderr
    result = json.loads((crafted / "eval.json").read_text())
    assert result["episodes"] == 1 and result["mlflow_run_id"] is None
    assert not (tmp_path / "mlflow.db").exists()


def test_rlrun_eval_imports_no_module_a_checkpoint_names(trained_run: Path, tmp_path: Path) -> None:
    """A checkpoint whose saved config has env.id=<module>:CartPole-v1, the module on the path (importing it runs its
    code; here it creates a marker file): rlrun eval refuses with one line naming the module and exits 2 without
    importing it; with --allow-import <module> the user trusts it, and the evaluation runs."""
    marker = tmp_path / "imported"
    (tmp_path / "evil_env.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    crafted = crafted_copy(trained_run, tmp_path / "crafted", env={"id": "evil_env:CartPole-v1"})
    env = {"PYTHONPATH": str(tmp_path)}
    proc = run_rlrun(["eval", str(crafted), "episodes=1"], tmp_path, env=env)
    assert proc.returncode == 2 and not marker.exists()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "asks to import evil_env (env.id=evil_env:CartPole-v1)" in lines[0]
    assert "--allow-import" in lines[0] and not (crafted / "eval.json").exists()

    proc = run_rlrun(["eval", str(crafted), "episodes=1", "--allow-import", "evil_env"], tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists() and json.loads((crafted / "eval.json").read_text())["env"] == "evil_env:CartPole-v1"
