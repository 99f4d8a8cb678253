"""A small task whose observation is a Dict of an image and a vector, and that needs both: the goal is seen only
in the image, the agent's own place only in the vector (docs/action-masks.md, the multi-input torso's task).

A ``size`` x ``size`` grid; the agent starts on a random square, the goal on another. Observation: ``{"image":
bool [1, size, size] (the goal's square), "position": float32 [2] (the agent's row and column, over size - 1)}``.
Actions: up, down, left, right (a move into the wall stays put). Reward: +1 on reaching the goal (the episode
ends), and 0.1 per square the move brought the agent closer (minus 0.1 per square farther), a shaping that keeps
the task learnable in seconds. The registered id ``rlrun/GoalGrid-v0`` ends an episode after 20 steps.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlrun import spaces as sp

MOVES = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])


class GoalGrid(gym.Env):
    """Find the goal seen in an image, from a position given as a vector (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, size: int = 5) -> None:
        if size < 3:
            raise ValueError(f"size must be >= 3 (a 3x3 convolution's input), got {size}")
        self.size = int(size)
        self.observation_space = sp.Dict({"image": sp.Box(0, 1, (1, size, size), np.bool_),
                                          "position": sp.Box(0.0, 1.0, (2,), np.float32)})
        self.action_space = sp.Discrete(4)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        cells = self.np_random.choice(self.size * self.size, size=2, replace=False)
        self.agent, self.goal = np.array(divmod(int(cells[0]), self.size)), np.array(divmod(int(cells[1]), self.size))
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        before = np.abs(self.agent - self.goal).sum()
        self.agent = np.clip(self.agent + MOVES[int(action)], 0, self.size - 1)
        after = np.abs(self.agent - self.goal).sum()
        reached = bool(after == 0)
        return self._obs(), float(reached) + 0.1 * float(before - after), reached, False, {}

    def _obs(self) -> dict:
        image = np.zeros((1, self.size, self.size), np.bool_)
        image[0, self.goal[0], self.goal[1]] = True
        return {"image": image, "position": (self.agent / (self.size - 1)).astype(np.float32)}
