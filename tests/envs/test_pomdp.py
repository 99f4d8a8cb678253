"""CartPoleNoVel-v1 (rlrun/envs/pomdp.py): CartPole-v1's dynamics with the velocity entries masked to 0."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlrun.envs import registered  # noqa: F401 - registers CartPoleNoVel-v1


def test_velocities_are_zero_and_positions_are_cartpoles():
    """The same seed and actions in CartPole-v1 and CartPoleNoVel-v1: entries 0 and 2 (cart position, pole angle)
    equal, entries 1 and 3 (the velocities) always 0, the same rewards, ends and 500-step limit."""
    full, novel = gym.make("CartPole-v1"), gym.make("CartPoleNoVel-v1")
    assert novel.observation_space == full.observation_space and novel.spec.max_episode_steps == 500
    a, _ = full.reset(seed=3)
    b, _ = novel.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(60):
        assert np.array_equal(b[[0, 2]], a[[0, 2]]) and np.all(b[[1, 3]] == 0.0)
        action = int(rng.integers(2))
        a, ra, ta, ua, _ = full.step(action)
        b, rb, tb, ub, _ = novel.step(action)
        assert (ra, ta, ua) == (rb, tb, ub)
        if ta or ua:
            a, _ = full.reset(seed=4)
            b, _ = novel.reset(seed=4)
    assert np.any(a[[1, 3]] != 0.0)  # the full task has velocities to hide
