"""``rlrun collect``: a run's policy played into a Minari dataset with its provenance; the refusals of bad input;
an offline run on that dataset logs the provenance to MLflow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlrun.app.collect import CollectConfig, collect, main
from rlrun.app.run import run_experiment
from rlrun.config import compose
from rlrun.errors import CheckpointError, ConfigError
from rlrun.execution.dataset import load_minari, minari_root


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A short SAC run on Pendulum-v1 (its policy need not be good: collect copies whatever it does)."""
    run_dir = tmp_path_factory.mktemp("sac") / "run"
    run_experiment(compose(["algo=sac", "env=pendulum", "stop.env_steps=300", "algo.learning_starts=100",
                            "algo.hidden_sizes=[16]", "logger=none", "export.formats=[]"]), run_dir)
    return run_dir


def test_collect_writes_the_episodes_and_their_provenance(trained: Path, tmp_path: Path):
    found = collect(str(trained), CollectConfig(id="pendulum/test-v0", episodes=3, epsilon=0.5, seed=7,
                                                root=str(tmp_path)))
    assert found["episodes"] == 3 and found["transitions"] == 600 and len(found["returns"]) == 3
    import minari

    with minari_root(str(tmp_path)):
        dataset = minari.load_dataset("pendulum/test-v0")
        meta = dataset.storage.metadata
        assert dataset.spec.env_spec.id == "Pendulum-v1"
        returns = [float(np.sum(ep.rewards)) for ep in dataset.iterate_episodes()]
    assert returns == pytest.approx(found["returns"])
    assert meta["rlrun.algo"] == "sac" and meta["rlrun.checkpoint_env_steps"] == 304  # rollouts of 8 agent steps
    assert meta["rlrun.run_dir"] == str(trained.resolve()) and meta["rlrun.epsilon"] == 0.5
    assert meta["rlrun.return_mean"] == pytest.approx(np.mean(returns))

    again = collect(str(trained), CollectConfig(id="pendulum/test-v1", episodes=3, epsilon=0.5, seed=7,
                                                root=str(tmp_path)))
    assert again["returns"] == found["returns"]  # seeded: the same episodes

    with pytest.raises(ConfigError, match="a dataset of that id exists"):
        collect(str(trained), CollectConfig(id="pendulum/test-v0", episodes=1, root=str(tmp_path)))

    # the dataset's provenance reaches the offline run's MLflow params
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    summary = run_experiment(compose(["algo=bc", "env=pendulum", "data=minari", "data.id=pendulum/test-v0",
                                      f"data.root={tmp_path}", "stop.gradient_steps=100", "algo.hidden_sizes=[16]",
                                      f"logger.mlflow.tracking_uri={uri}", "logger.tensorboard.enabled=false",
                                      "logger.console.enabled=false", "export.formats=[]"]), tmp_path / "bc")
    params = MlflowClient(tracking_uri=uri).get_run(summary["mlflow_run_id"]).data.params
    assert params["data.id"] == "pendulum/test-v0" and params["data.provenance.algo"] == "sac"
    assert params["data.provenance.run_dir"] == str(trained.resolve()) and params["data.transitions"] == "600"
    assert summary["data"]["provenance.checkpoint_env_steps"] == 304


@pytest.mark.parametrize("algo", ["sac", "ppo"])
def test_explore_acts_as_in_training_seeded_and_in_bounds(trained: Path, tmp_path: Path, algo: str):
    """dataset.explore plays the policy's sampled actions (SAC's; PPO's, which come with its rollout extras) instead
    of its greedy ones: other actions from the same reset, the same ones again for the same seed, all in Pendulum's
    [-2, 2]; the provenance says so."""
    import minari

    run = trained
    if algo == "ppo":
        run = tmp_path / "ppo"
        run_experiment(compose(["algo=ppo", "env=pendulum", "stop.env_steps=256", "algo.rollout_steps=128",
                                "algo.num_epochs=1", "logger=none", "export.formats=[]"]), run)

    def actions(dataset_id: str, explore: bool) -> np.ndarray:
        collect(str(run), CollectConfig(id=dataset_id, episodes=1, seed=3, explore=explore, root=str(tmp_path)))
        with minari_root(str(tmp_path)):
            dataset = minari.load_dataset(dataset_id)
            assert dataset.storage.metadata["rlrun.explore"] is explore
            return next(dataset.iterate_episodes()).actions

    greedy, sampled, again = (actions("pendulum/greedy-v0", False), actions("pendulum/explore-v0", True),
                              actions("pendulum/explore-v1", True))
    assert np.array_equal(sampled, again) and not np.allclose(sampled[:5], greedy[:5])
    assert sampled.min() >= -2.0 and sampled.max() <= 2.0


@pytest.mark.parametrize("argv, error, message", [
    (["{run}", "dataset.episodes=2"], ConfigError, "give the new dataset's id"),
    (["{run}", "dataset.id=a-v0", "dataset.epsilon=2"], ConfigError, r"dataset.epsilon=2.0: must be in \[0, 1\]"),
    (["{run}", "dataset.id=a-v0", "dataset.episode=2"], ConfigError, "dataset.episode: unknown setting"),
    (["{tmp}", "dataset.id=a-v0"], CheckpointError, "no checkpoint in this directory"),
])
def test_bad_input_is_refused_in_one_line(trained: Path, tmp_path: Path, argv, error, message):
    args = [a.format(run=trained, tmp=tmp_path) for a in argv] + [f"dataset.root={tmp_path}"]
    with pytest.raises(error, match=message) as info:
        main(args)
    assert info.value.exit_code == 2


def test_an_offline_run_reads_a_collected_dataset(trained: Path, tmp_path: Path):
    """The dataset's spaces are the env's; its transitions are the episodes' steps."""
    collect(str(trained), CollectConfig(id="pendulum/read-v0", episodes=2, root=str(tmp_path)))
    cfg = compose(["algo=iql", "env=pendulum", "data=minari", "data.id=pendulum/read-v0", f"data.root={tmp_path}",
                   "stop.gradient_steps=1"])
    from rlrun.registry import registry

    data = load_minari(cfg.data, registry.build("env", "gym", cfg.env).spec)
    assert len(data) == 400 and data.obs.shape == (400, 3) and data.action.shape == (400, 1)
    assert not data.terminated.any()  # Pendulum-v1 only truncates
