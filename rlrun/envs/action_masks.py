"""Action masks given in ``info`` (the gymnasium convention Minigrid and PettingZoo's wrappers use) moved into the
observation, where rlrun's networks read them (:mod:`rlrun.ops.action_mask`).

A mask that rides in the observation travels wherever the observation goes: through the vector env's autoreset
(``final_obs`` keeps the final step's mask), in the rollout a learner reads, in replayed transitions (``next_obs``:
DQN's bootstrap takes the best *legal* next action), to Ray workers and back.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlrun import spaces as sp
from rlrun.errors import ConfigError
from rlrun.spaces import MASK_KEY

OBSERVATION_KEY = "observation"
"""The key of the env's own observation beside the mask (PettingZoo's classic games use the same two keys)."""


def info_has_mask(env: gym.Env) -> bool:
    """Whether ``env`` gives ``action_mask`` in the info of ``reset`` and its observation has none (resets it)."""
    _, info = env.reset(seed=0)
    has_obs_mask = isinstance(env.observation_space, sp.Dict) and MASK_KEY in env.observation_space.spaces
    return MASK_KEY in info and not has_obs_mask


class InfoMaskToObservation(gym.ObservationWrapper):
    """``obs`` -> ``{"observation": obs, "action_mask": info["action_mask"]}`` at every reset and step.

    The mask must have one 0/1 entry per action of the env's Discrete action space; a mask of another size, or a
    step whose info lacks the mask, is a ConfigError naming the env."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        if not isinstance(env.action_space, sp.Discrete):
            raise ConfigError(f"env {env.spec.id if env.spec else env}: info carries an {MASK_KEY} but the actions "
                              f"are {sp.describe(env.action_space)}; masks apply to Discrete actions only.")
        self.num_actions = int(env.action_space.n)
        mask = sp.Box(0, 1, (self.num_actions,), np.int8)
        self.observation_space = sp.Dict({OBSERVATION_KEY: env.observation_space, MASK_KEY: mask})
        self._mask: np.ndarray | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._mask = self._mask_of(info)
        return self.observation(obs), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._mask = self._mask_of(info)
        return self.observation(obs), reward, terminated, truncated, info

    def observation(self, observation: Any) -> dict:
        return {OBSERVATION_KEY: observation, MASK_KEY: self._mask}

    def _mask_of(self, info: dict) -> np.ndarray:
        name = self.env.spec.id if self.env.spec else type(self.env).__name__
        if MASK_KEY not in info:
            raise ConfigError(f"env {name}: info has no {MASK_KEY} at this step although reset gave one; give it at "
                              f"every step.")
        mask = np.asarray(info[MASK_KEY])
        if mask.shape != (self.num_actions,):
            raise ConfigError(f"env {name}: info[{MASK_KEY!r}] has shape {mask.shape} but the env has "
                              f"{self.num_actions} actions; give one 0/1 entry per action.")
        return mask.astype(np.int8)
