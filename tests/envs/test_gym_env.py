"""GymEnvFactory (rlrun/envs/gym_env.py): spec, single and vector env copies with SAME_STEP autoreset, the protocol
card, and config errors raised when the factory is built."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf

from rlrun.envs.gym_env import EnvSpec, GymEnvFactory
from rlrun.errors import ConfigError


def factory(env_id: str = "CartPole-v1", max_episode_steps: int | None = None, **kwargs) -> GymEnvFactory:
    return GymEnvFactory(OmegaConf.create({"name": "gym", "id": env_id, "max_episode_steps": max_episode_steps,
                                           "frame_skip": 1, "kwargs": kwargs}))


def test_spec_from_a_probe_env() -> None:
    f = factory()
    assert f.spec == EnvSpec("CartPole-v1", f.spec.observation_space, gym.spaces.Discrete(2), 1)
    assert f.spec.observation_space.shape == (4,)


def test_vector_env_autoresets_in_the_same_step_with_the_final_observation() -> None:
    """max_episode_steps=5: at agent step 5 both copies are truncated; the returned observation is already the next
    episode's first (SAME_STEP autoreset) and info["final_obs"] holds each copy's real last observation, which
    differs from it."""
    envs = factory(max_episode_steps=5).make_vector(2)
    try:
        envs.reset(seed=[0, 1])
        for step in range(1, 6):
            obs, _, terminated, truncated, info = envs.step(np.array([0, 1]))
            if step < 5:
                assert not (terminated | truncated).any()
        assert truncated.all() or terminated.all()
        for i in range(2):
            assert info["final_obs"][i].shape == (4,)
            assert not np.array_equal(info["final_obs"][i], obs[i])
    finally:
        envs.close()


def test_same_seeds_same_rollouts() -> None:
    f = factory()

    def run() -> list[np.ndarray]:
        envs = f.make_vector(3)
        obs, _ = envs.reset(seed=[4, 5, 6])
        out = [obs]
        for _ in range(40):
            out.append(envs.step(np.array([0, 1, 0]))[0])
        envs.close()
        return out

    a, b = run(), run()
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0][0], a[0][1]), "copies are seeded differently (seed + i)"


def test_make_accepts_evaluation_for_a_uniform_factory_interface() -> None:
    env = factory().make(evaluation=True)
    assert env.spec.id == "CartPole-v1"
    env.close()


def test_protocol_card() -> None:
    """The registered time limit (CartPole-v1: 500 agent steps) unless overridden; frame_skip 1; the gymnasium
    version; the registered entry point."""
    card = factory().protocol_card()
    assert (card["env_id"], card["env_factory"], card["frame_skip"], card["max_episode_steps"]) == \
        ("CartPole-v1", "gym", 1, 500)
    assert card["versions"]["gymnasium"] == gym.__version__
    assert card["registered"]["entry_point"].endswith("CartPoleEnv")
    assert factory(max_episode_steps=50).protocol_card()["max_episode_steps"] == 50


def test_unknown_id_lists_close_matches() -> None:
    with pytest.raises(ConfigError, match=r"env.id=CartPol-v1: not a registered gymnasium environment\. Close "
                                          r"matches: CartPole-v1"):
        factory("CartPol-v1")


def test_bad_kwargs_and_vector_mode_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="env.kwargs: CartPole-v1 does not accept"):
        factory(no_such_argument=1)
    with pytest.raises(ConfigError, match="executor.vector_mode=threads: must be sync or async"):
        factory().make_vector(2, "threads")


def test_a_missing_optional_dependency_is_one_line_with_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """LunarLander-v3 with Box2D unimportable: gymnasium's own DependencyNotInstalled hint, then rlrun's extra,
    as a ConfigError (one line, exit 2 on the command line) instead of a traceback."""
    import sys

    for name in [m for m in sys.modules if m.startswith("gymnasium.envs.box2d")]:
        monkeypatch.delitem(sys.modules, name)  # gymnasium imports the env's module again, which imports Box2D
    monkeypatch.setitem(sys.modules, "Box2D", None)  # import Box2D now raises ImportError
    with pytest.raises(ConfigError) as e:
        factory("LunarLander-v3")
    message = str(e.value)
    assert message.startswith("env.id=LunarLander-v3: Box2D is not installed")
    assert message.endswith("rlrun's extra installs it: pip install 'rlrun[box2d]'.") and "\n" not in message


def test_lunar_lander_runs_with_the_box2d_extra() -> None:
    """The development install has the extra: the tutorial env builds and steps."""
    f = factory("LunarLander-v3")
    assert f.spec.action_space == gym.spaces.Discrete(4) and f.spec.observation_space.shape == (8,)
    env = f.make()
    env.reset(seed=0)
    assert env.step(0)[0].shape == (8,)


def test_an_env_copy_in_a_subprocess_of_its_own_does_not_import_torch() -> None:
    """executor.vector_mode=async and pipelined spawn a process per env copy, which imports the env factories'
    modules to unpickle its copy's maker: they step gymnasium envs and must not pay torch's import (seconds each)."""
    import subprocess
    import sys

    probe = ("import sys, rlrun.envs.gym_env, rlrun.envs.atari, rlrun.envs.mujoco_env, rlrun.envs.minatar_env, "
             "rlrun.envs.registered; print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
