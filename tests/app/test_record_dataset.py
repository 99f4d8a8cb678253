"""``record_dataset.id``: a training run's collected episodes written as a Minari dataset at its end, real runs on
CartPole: every whole episode the run finished, nothing else; the provenance in the dataset and in MLflow; a stopped
and resumed run records what an uninterrupted one does; an offline run reads the dataset; bad input refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlrun import checkpoint as ckpt
from rlrun.app.run import run_experiment
from rlrun.config import compose, validate
from rlrun.errors import ConfigError
from rlrun.execution.dataset import minari_root
from rlrun.plain_data import decode

COMMON = ["algo=dqn", "env=cartpole", "executor.num_envs=2", "algo.learning_starts=100", "algo.hidden_sizes=[16]",
          "export.formats=[]", "logger.tensorboard.enabled=false", "logger.console.enabled=false"]


def episodes(root: Path, dataset_id: str) -> tuple[list, dict]:
    import minari

    with minari_root(str(root)):
        dataset = minari.load_dataset(dataset_id)
        return list(dataset.iterate_episodes()), dict(dataset.storage.metadata)


def test_a_run_writes_every_whole_episode_it_finished(tmp_path: Path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_dir = tmp_path / "run"
    summary = run_experiment(compose([*COMMON, "stop.env_steps=600", "record_dataset.id=cartpole/replay-v0",
                                      f"record_dataset.root={tmp_path}", f"logger.mlflow.tracking_uri={uri}"]),
                             run_dir)
    eps, meta = episodes(tmp_path, "cartpole/replay-v0")
    assert len(eps) == summary["episodes"] == summary["record_dataset"]["episodes"] == meta["rlrun.episodes"]
    for ep in eps:  # whole: only the last step ends it, and it ends it
        done = np.asarray(ep.terminations) | np.asarray(ep.truncations)
        assert done[-1] and not done[:-1].any() and len(ep.observations) == len(ep.actions) + 1
        assert set(np.asarray(ep.actions).tolist()) <= {0, 1} and np.all(np.asarray(ep.rewards) == 1.0)
    # what is not in it: the steps of the two copies' episodes still running at the stop (the workers' counters)
    worker = ckpt.load_checkpoint(ckpt.checkpoint_path(run_dir))["executor"]["worker_sets"][0][0]
    assert sum(len(ep.actions) for ep in eps) == summary["env_steps"] - int(np.sum(decode(worker["lengths"])))
    assert meta["rlrun.run_dir"] == str(run_dir.resolve()) and meta["rlrun.algo"] == "dqn"
    assert meta["rlrun.recorded_env_steps"] == summary["env_steps"]
    assert meta["rlrun.return_mean"] == pytest.approx(np.mean([np.sum(ep.rewards) for ep in eps]))

    from mlflow.tracking import MlflowClient

    params = MlflowClient(tracking_uri=uri).get_run(summary["mlflow_run_id"]).data.params
    assert params["record_dataset.id"] == "cartpole/replay-v0" and params["record_dataset.episodes"] == str(len(eps))

    # an offline run learns from it (its spaces are the env's)
    bc = run_experiment(compose(["algo=bc", "env=cartpole", "data=minari", "data.id=cartpole/replay-v0",
                                 f"data.root={tmp_path}", "stop.gradient_steps=20", "algo.hidden_sizes=[16]",
                                 "logger=none", "export.formats=[]"]), tmp_path / "bc")
    assert bc["data"]["transitions"] == sum(len(ep.actions) for ep in eps)


def test_only_the_first_env_steps_episodes_with_record_dataset_env_steps(tmp_path: Path):
    summary = run_experiment(compose([*COMMON, "stop.env_steps=600", "record_dataset.id=cartpole/early-v0",
                                      "record_dataset.env_steps=200", f"record_dataset.root={tmp_path}",
                                      "logger=none"]), tmp_path / "run")
    eps, meta = episodes(tmp_path, "cartpole/early-v0")
    assert 0 < len(eps) < summary["episodes"] and meta["rlrun.recorded_env_steps"] == 200
    # every step of the first 200 is in an episode that began there (the episodes are short: none is still running
    # at the stop), and the copies' last such episodes run past it, each whole
    assert 200 <= sum(len(ep.actions) for ep in eps) < summary["env_steps"]


def test_a_stopped_and_resumed_run_records_what_an_uninterrupted_one_does(tmp_path: Path):
    n = 300
    run_experiment(compose([*COMMON, f"stop.env_steps={2 * n}", "record_dataset.id=cartpole/whole-v0",
                            f"record_dataset.root={tmp_path}", "logger=none"]), tmp_path / "reference")
    run_dir = tmp_path / "run"
    run_experiment(compose([*COMMON, f"stop.env_steps={n}", "record_dataset.id=cartpole/first-v0",
                            f"record_dataset.root={tmp_path}", "logger=none"]), run_dir)
    overrides = [f"resume={run_dir}", f"stop.env_steps={2 * n}", "record_dataset.id=cartpole/resumed-v0"]
    run_experiment(compose(overrides), tmp_path / "unused", overrides=overrides)
    first, _ = episodes(tmp_path, "cartpole/first-v0")
    whole, _ = episodes(tmp_path, "cartpole/whole-v0")
    resumed, _ = episodes(tmp_path, "cartpole/resumed-v0")
    assert 0 < len(first) < len(whole) == len(resumed)
    for a, b in zip(whole, resumed, strict=True):
        for field in ("observations", "actions", "rewards", "terminations", "truncations"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


@pytest.mark.parametrize("overrides, message", [
    (["executor=ray"], "recording runs on executor=local in this version"),
    (["algo=apex"], "does not hand its rollouts' observations to the executor"),
    (["algo=bc", "data=minari", "data.id=x/y-v0", "stop.gradient_steps=5"], "an offline run (data=...) collects"),
])
def test_bad_combinations_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate(compose(["record_dataset.id=cartpole/replay-v0", *overrides]))


def test_an_existing_id_is_refused_before_the_run_directory_exists(tmp_path: Path):
    run_experiment(compose([*COMMON, "stop.env_steps=200", "record_dataset.id=cartpole/taken-v0",
                            f"record_dataset.root={tmp_path}", "logger=none"]), tmp_path / "first")
    out = tmp_path / "second"
    proc = subprocess.run([sys.executable, "-m", "rlrun.app.cli", *COMMON, "stop.env_steps=200", "logger=none",
                           "record_dataset.id=cartpole/taken-v0", f"record_dataset.root={tmp_path}",
                           f"hydra.run.dir={out}"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "record_dataset.id=cartpole/taken-v0: a dataset of that id exists" in lines[0]
    assert not out.exists()
