"""Action masks in single-agent envs: every algorithm family acts and learns without ever taking an illegal action
(rlrun/TicTacToe-v0 with ``illegal=raise``: a run that finishes has taken none; with ``algo.action_mask=off`` the
same run fails, the control that shows the check can fail), masks given in ``info`` travel in the observation, a
mask of the wrong size is one line and exit 2, and masked PPO learns to beat a random player."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same, run_rlrun

from rlrun import checkpoint as ckpt
from rlrun.app.run import run_experiment
from rlrun.config import compose
from rlrun.envs.action_masks import InfoMaskToObservation
from rlrun.envs.tictactoe import IllegalActionError, TicTacToeVsRandom
from rlrun.errors import ConfigError

TICTACTOE = ["env=tictactoe", "+env.kwargs.illegal=raise"]
QUIET = ["logger=none", "export.formats=[]", "checkpoint.at_end=false", "seed=0"]
FIXTURES = str(Path(__file__).resolve().parents[1] / "fixtures")

ALGOS = {  # a few thousand env steps each, with the settings that make many updates in them
    "ppo": ["algo=ppo", "algo.rollout_steps=32", "executor.num_envs=4"],
    "a2c": ["algo=a2c", "executor.num_envs=4"],
    "dqn": ["algo=dqn", "algo.learning_starts=200", "algo.epsilon_decay_steps=1000", "algo.epsilon_end=0.3"],
    "impala": ["algo=impala", "executor.num_envs=4"],
    "pqn": ["algo=pqn", "executor.num_envs=4", "algo.rollout_steps=32"],
}


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_no_illegal_action_is_ever_taken(algo: str, tmp_path: Path) -> None:
    cfg = compose([*ALGOS[algo], *TICTACTOE, *QUIET, "stop.env_steps=3000"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["env_steps"] >= 3000 and summary["episodes"] > 300, summary


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_without_the_mask_the_same_run_takes_an_illegal_action(algo: str, tmp_path: Path) -> None:
    cfg = compose([*ALGOS[algo], *TICTACTOE, *QUIET, "stop.env_steps=3000", "algo.action_mask=off"])
    with pytest.raises(IllegalActionError):
        run_experiment(cfg, tmp_path)


def test_a_mask_in_info_rides_in_the_observation_to_the_learner(tmp_path: Path) -> None:
    env = InfoMaskToObservation(TicTacToeVsRandom(mask_in="info"))
    obs, info = env.reset(seed=3)
    assert np.array_equal(obs["action_mask"], info["action_mask"]) and obs["action_mask"].sum() == 9
    obs, _, _, _, info = env.step(4)
    assert obs["action_mask"][4] == 0 and np.array_equal(obs["action_mask"], info["action_mask"])
    cfg = compose(["algo=ppo", "algo.rollout_steps=32", "executor.num_envs=4", *TICTACTOE, "+env.kwargs.mask_in=info",
                   *QUIET, "stop.env_steps=2000"])
    assert run_experiment(cfg, tmp_path)["env_steps"] >= 2000


def test_a_mask_of_the_wrong_size_is_one_line_and_exit_2(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(FIXTURES)
    import user_envs

    with pytest.raises(ConfigError, match=r"has shape \(3,\) but the env has 2 actions"):
        InfoMaskToObservation(user_envs.UserMaskedChain(mask_size=3)).reset(seed=0)
    proc = run_rlrun(["algo=ppo", "env.id=user_envs:UserMaskedChain-v0", "+env.kwargs.mask_size=3",
                      "stop.env_steps=64", "logger=none"], workdir, env={"PYTHONPATH": FIXTURES})
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "has shape (3,) but the env has 2 actions" in lines[0], proc.stderr


def test_masked_ppo_beats_a_random_player(tmp_path: Path) -> None:
    """A random first player scores about +0.3 against the random opponent (wins 58%, loses 29%); seeded masked
    PPO passes +0.6 over its last 100 games within 60k env steps."""
    cfg = compose(["algo=ppo", "executor.num_envs=8", "algo.rollout_steps=64", "algo.ent_coef=0.01", *TICTACTOE,
                   *QUIET, "stop.env_steps=60000", "stop.episode_return_mean=0.6", "return_window=100"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary
    random_return = _random_player_return(games=2000)
    assert 0.2 < random_return < 0.4 and summary["episode_return_mean"] > random_return + 0.25


def _random_player_return(games: int) -> float:
    env, rng, total = TicTacToeVsRandom(illegal="raise"), np.random.default_rng(0), 0.0
    for game in range(games):
        obs, _ = env.reset(seed=game)
        done = False
        while not done:
            obs, reward, done, _, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        total += reward
    return total / games



def test_apex_refuses_a_masked_env_in_one_line(workdir: Path) -> None:
    proc = run_rlrun(["algo=apex", "env=tictactoe", "stop.env_steps=64", "logger=none"], workdir)
    assert proc.returncode == 2 and "algo=apex: the env gives an action_mask" in proc.stderr, proc.stderr


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_stop_then_resume_equals_an_uninterrupted_run(algo: str, tmp_path: Path) -> None:
    """The masks ride in the observation, the random opponent's generator in the env's state: a masked run stopped
    and resumed ends with the weights, optimizer state, replay and generators of an uninterrupted one."""
    common = [*ALGOS[algo], *TICTACTOE, "logger=none", "export.formats=[]", "seed=0"]
    if algo == "ppo":
        common += ["algo.total_env_steps=384"]
    run_experiment(compose([*common, "stop.env_steps=384"]), tmp_path / "whole")
    run_experiment(compose([*common, "stop.env_steps=256"]), tmp_path / "parts")
    overrides = [f"resume={tmp_path / 'parts'}", "stop.env_steps=384"]
    run_experiment(compose(overrides), tmp_path / "unused", overrides=overrides)
    whole, parts = (ckpt.load_checkpoint(ckpt.checkpoint_path(tmp_path / d)) for d in ("whole", "parts"))
    assert parts["loop"]["env_steps"] == whole["loop"]["env_steps"] == 384
    assert_same(parts["algo"], whole["algo"], "algo")
    assert_same(parts["rng"], whole["rng"], "rng")
    assert parts["loop"]["episodes"] == whole["loop"]["episodes"] > 0
