"""Partially observable versions of classic-control tasks: the velocity entries of the observation are masked to 0,
so a policy must infer them from the observations it has seen (a memory: ``algo.recurrent=lstm|gru``).

``CartPoleNoVel-v1`` is RL Zoo's (rl-baselines3-zoo ``rl_zoo3/import_envs.py`` and ``MaskVelocityWrapper``, the task
of sb3-contrib's RecurrentPPO benchmark): CartPole-v1 with the cart velocity (index 1) and pole angular velocity
(index 3) set to 0; the observation keeps its 4 entries. ``rlrun.envs.registered`` registers it with gymnasium,
so ``env=cartpole_novel`` (``env.id=CartPoleNoVel-v1``) is known in every process that makes a copy.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

__all__ = ["VELOCITY_INDICES", "MaskVelocity", "make_cartpole_novel"]

VELOCITY_INDICES = {"CartPole-v1": (1, 3)}
"""The observation entries that are velocities, per task (RL Zoo's ``MaskVelocityWrapper.velocity_indices``)."""


class MaskVelocity(gym.ObservationWrapper):
    """Sets the observation entries ``indices`` to 0 (the space is unchanged: the entries are there, always 0)."""

    def __init__(self, env: gym.Env, indices: tuple[int, ...]) -> None:
        super().__init__(env)
        self.mask = np.ones(env.observation_space.shape, dtype=env.observation_space.dtype)
        self.mask[list(indices)] = 0

    def observation(self, observation: Any) -> Any:
        return observation * self.mask


def make_cartpole_novel(**kwargs: Any) -> gym.Env:
    """CartPole-v1's dynamics with its velocities masked (the time limit is the registration's, as CartPole-v1's)."""
    return MaskVelocity(CartPoleEnv(**kwargs), VELOCITY_INDICES["CartPole-v1"])

