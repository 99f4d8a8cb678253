"""``env=mujoco`` (rlrun/envs/mujoco_env.py) on the real mujoco engine, and user envs by gymnasium's ``module:EnvId``
(rlrun/envs/gym_env.py: ``registered_id``): spaces, protocol card, and each bad input as one clear error."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_rlrun
from omegaconf import OmegaConf

from rlrun.envs.gym_env import GymEnvFactory
from rlrun.envs.mujoco_env import MujocoEnvFactory, mujoco_ids
from rlrun.errors import ConfigError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def cfg(env_id: str, name: str = "mujoco") -> object:
    return OmegaConf.create({"name": name, "id": env_id, "max_episode_steps": None, "frame_skip": 1, "kwargs": {}})


def test_hopper_spaces_steps_and_protocol_card() -> None:
    f = MujocoEnvFactory(cfg("Hopper-v5"))
    assert f.spec.observation_space.shape == (11,) and f.spec.action_space.shape == (3,)
    assert np.all(f.spec.action_space.low == -1.0)
    envs = f.make_vector(2)
    try:
        obs, _ = envs.reset(seed=[0, 1])
        assert obs.shape == (2, 11) and not np.array_equal(obs[0], obs[1])
        obs2, reward, *_ = envs.step(np.zeros((2, 3), np.float32))
        assert obs2.shape == (2, 11) and reward.shape == (2,)
    finally:
        envs.close()
    card = f.protocol_card()
    assert card["env_factory"] == "mujoco" and card["max_episode_steps"] == 1000
    assert card["versions"]["mujoco"] and card["versions"]["gymnasium"]


def test_the_locomotion_tasks_are_there() -> None:
    ids = mujoco_ids()
    for task in ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5", "Swimmer-v5",
                 "InvertedPendulum-v5"):
        assert task in ids
    assert "CartPole-v1" not in ids


def test_an_unknown_mujoco_id_names_close_matches() -> None:
    with pytest.raises(ConfigError, match=r"env.id=Hoper-v5: not one of gymnasium's MuJoCo tasks\. Close matches: "
                                          r"Hopper-v5"):
        MujocoEnvFactory(cfg("Hoper-v5"))
    with pytest.raises(ConfigError, match="not one of gymnasium's MuJoCo tasks"):
        MujocoEnvFactory(cfg("CartPole-v1"))  # registered, but not a MuJoCo task


def test_without_the_engine_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mujoco", None)  # import mujoco now raises ImportError
    with pytest.raises(ConfigError, match=r"env=mujoco: the MuJoCo engine cannot be imported .*pip install"):
        MujocoEnvFactory(cfg("Hopper-v5"))


# ------------------------------------------------------------------------------------------ module:EnvId


@pytest.fixture
def fixtures_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES))


def test_a_user_env_by_module_and_id(fixtures_on_path: None) -> None:
    f = GymEnvFactory(cfg("user_envs:UserChain-v0", "gym"))
    assert f.registered_id == "UserChain-v0" and f.spec.id == "user_envs:UserChain-v0"
    env = f.make()
    env.reset(seed=0)
    total = sum(env.step(1)[1] for _ in range(5))
    assert total == 1.0
    assert f.protocol_card()["max_episode_steps"] == 50


@pytest.mark.parametrize("env_id, message", [
    ("no_such_module_xyz:Env-v0", r"cannot import module no_such_module_xyz"),
    ("user_envs_broken:Env-v0", r"module user_envs_broken was imported but registers no env Env-v0"),
    (":Env-v0", r"write a user env as module.path:EnvId-v0"),
])
def test_bad_module_ids_are_clear(fixtures_on_path: None, env_id: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GymEnvFactory(cfg(env_id, "gym"))


def test_cli_trains_on_a_user_env_and_refuses_a_bad_mujoco_id(workdir: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}
    ok = run_rlrun(["algo=ppo", "env.id=user_envs:UserChain-v0", "executor.num_envs=2", "stop.env_steps=256",
                    "stop.episode_return_mean=null", "logger=none", "export.formats=[]"], workdir, env=env)
    assert ok.returncode == 0, ok.stderr
    bad = run_rlrun(["algo=ppo", "env=mujoco", "env.id=Hoper-v5", "logger=none"], workdir)
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "Close matches: Hopper-v5" in lines[0], bad.stderr
    dqn = run_rlrun(["algo=dqn", "env=mujoco", "env.id=Hopper-v5", "logger=none"], workdir)
    assert dqn.returncode == 2 and len(dqn.stderr.strip().splitlines()) == 1 and "Box" in dqn.stderr, dqn.stderr
    assert not (workdir / "MUJOCO_LOG.TXT").exists()  # the engine's warnings go to logging, not a file here
