"""env=minatar (rlrun/envs/minatar_env.py): MinAtar's ids registered by the factory, channel-first bool
observations, its settings passed to the game, seeded copies, the protocol card, bad ids refused, and DQN (with its
Young & Tian preset) and PPO running on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlrun import spaces as sp
from rlrun.app.run import run_experiment
from rlrun.config import MINATAR_GAMES, compose
from rlrun.errors import ConfigError
from rlrun.registry import registry

# MinAtar's object channels per game (its environments' state_shape)
CHANNELS = {"Asterix": 4, "Breakout": 4, "Freeway": 7, "Seaquest": 10, "SpaceInvaders": 6}


def _factory(*overrides: str):  # noqa: ANN202 - a MinAtarEnvFactory
    cfg = compose(["env=minatar", "logger=none", *overrides])
    return registry.build("env", cfg.env.name, cfg.env)


@pytest.mark.parametrize("game", MINATAR_GAMES)
def test_every_game_is_a_channel_first_bool_image_with_six_actions(game):
    spec = _factory(f"env.id={game}").spec
    assert spec.observation_space.shape == (CHANNELS[game], 10, 10)
    assert spec.observation_space.dtype == np.bool_
    assert spec.action_space == sp.Discrete(6) and spec.frame_skip == 1


def test_minimal_action_set_and_settings_reach_the_game():
    factory = _factory("env.id=Breakout", "env.minimal_action_set=true", "env.sticky_action_prob=0")
    assert factory.registered_id == "MinAtar/Breakout-v1" and factory.spec.action_space == sp.Discrete(3)
    assert factory.make().unwrapped.game.sticky_action_prob == 0.0
    seaquest = _factory("env.id=Seaquest", "env.difficulty_ramping=false").make().unwrapped.game
    assert seaquest.sticky_action_prob == 0.1 and seaquest.env.ramping is False


def test_no_deprecation_warning_for_the_full_action_set(recwarn):
    """MinAtar's -v0 (all actions) and -v1 (minimal set) are two action sets, not versions: making -v0 must not
    say it is out of date."""
    _factory("env.id=Freeway").make().close()
    assert not [w for w in recwarn if "out of date" in str(w.message)]


def test_observation_is_minatars_state_transposed():
    env = _factory("env.id=Seaquest").make()
    obs, _ = env.reset(seed=3)
    np.testing.assert_array_equal(obs, np.transpose(env.unwrapped.game.state(), (2, 0, 1)))
    assert obs.flags.c_contiguous and env.observation_space.contains(obs)


def test_seeded_copies_repeat_and_differ_between_seeds():
    def trajectory(seed: int) -> list[np.ndarray]:
        envs = _factory("env.id=Asterix").make_vector(2)
        out = [envs.reset(seed=[seed, seed + 1])[0]]
        for t in range(60):
            out.append(envs.step(np.array([t % 6, (t * 5) % 6]))[0])
        envs.close()
        return out

    a, b, c = trajectory(0), trajectory(0), trajectory(7)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_protocol_card_records_the_game_and_settings():
    card = _factory("env.id=Freeway").protocol_card()
    assert card["env_factory"] == "minatar" and card["gym_id"] == "MinAtar/Freeway-v0"
    assert card["sticky_action_prob"] == 0.1 and card["difficulty_ramping"] is True
    assert card["versions"]["minatar"] is not None and card["frame_skip"] == 1


def test_a_bad_id_is_a_config_error_naming_the_games():
    with pytest.raises(ConfigError, match="env.id=Pong.*Breakout"):
        compose(["env=minatar", "env.id=Pong"])


def test_dqn_preset_is_young_and_tian():
    """conf/algo_env/dqn_minatar.yaml: the MinAtar paper's network and hyperparameters (Young & Tian 2019)."""
    algo = compose(["algo=dqn", "env=minatar"]).algo
    assert [algo.network, algo.batch_size, algo.buffer_size, algo.learning_starts, algo.train_every,
            algo.target_update_every, algo.tau, algo.epsilon_end, algo.epsilon_decay_steps, algo.lr,
            algo.huber_delta] == ["minatar_cnn", 32, 100_000, 5000, 1, 1000, 1.0, 0.1, 100_000, 2.5e-4, 1.0]
    assert compose(["algo=dqn", "env=minatar"]).stop.env_steps == 5_000_000


def test_rainbow_preset_is_revisiting_rainbows():
    """conf/algo_env/rainbow_minatar.yaml: Obando-Ceron & Castro 2021's MinAtar Rainbow (their gin configs, agent
    and network): the conv alone under the heads, Adam 1e-4 (eps 3.125e-4), 51 atoms on [-100, 100], 3-step,
    prioritised with beta fixed at 0.5, an update per 4 frames, a target copy per 1,000 frames (250 updates), noisy
    layers of sigma_0 0.1 with a constant epsilon of 0.01, 10M frames."""
    cfg = compose(["algo=rainbow", "env=minatar"])
    a = cfg.algo
    assert [a.network, a.lr, a.adam_eps, a.num_atoms, a.v_min, a.v_max, a.n_step, a.batch_size, a.buffer_size,
            a.learning_starts, a.train_every, a.target_update_every * a.train_every, a.noisy, a.dueling, a.double_q,
            a.prioritized_replay] == ["minatar_conv", 1e-4, 3.125e-4, 51, -100.0, 100.0, 3, 32, 100_000, 1000, 4,
                                      1000, True, True, True, True]
    assert [a.noisy_std, a.noisy_epsilon, a.per_alpha, a.per_beta_start, a.per_beta_end] == [0.1, 0.01, 0.5, 0.5, 0.5]
    assert cfg.stop.env_steps == 10_000_000


@pytest.mark.parametrize("algo", [["algo=dqn", "algo.learning_starts=1900", "stop.env_steps=2000"],
                                  ["algo=ppo", "executor.num_envs=2", "algo.num_epochs=2", "stop.env_steps=512"]],
                         ids=["dqn", "ppo"])
def test_algorithms_run_on_breakout_with_the_minatar_cnn(tmp_path: Path, algo: list[str]):
    """rlrun algo=dqn env=minatar env.id=Breakout stop.env_steps=2000 (the preset; its warm-up cut to 1,900 env
    steps here so that the last 100 take gradient steps), and PPO with algo.network=auto, which picks the MinAtar
    CNN for the bool image."""
    cfg = compose([*algo, "env=minatar", "env.id=Breakout", "logger=none", "export.formats=[]",
                   "checkpoint.at_end=false", "seed=0"])
    assert cfg.algo.network in ("minatar_cnn", "auto")
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "env_steps" and summary["error"] is None, summary
    assert summary["env_steps"] >= cfg.stop.env_steps and summary["episodes"] > 0
