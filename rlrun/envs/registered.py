"""rlrun's own gymnasium ids, registered when an env factory's module is imported (in every process that makes an
env copy, Ray workers included): ``CartPoleNoVel-v1`` (RL Zoo's id: CartPole with its velocities hidden,
rlrun/envs/pomdp.py), ``rlrun/TicTacToe-v0`` (action masks, rlrun/envs/tictactoe.py) and
``rlrun/GoalGrid-v0`` (a Dict observation of an image and a vector, rlrun/envs/goal_grid.py)."""

from __future__ import annotations

import gymnasium as gym

IDS = {
    "CartPoleNoVel-v1": dict(entry_point="rlrun.envs.pomdp:make_cartpole_novel", max_episode_steps=500,
                             reward_threshold=475.0),
    "rlrun/TicTacToe-v0": dict(entry_point="rlrun.envs.tictactoe:TicTacToeVsRandom"),
    "rlrun/GoalGrid-v0": dict(entry_point="rlrun.envs.goal_grid:GoalGrid", max_episode_steps=20),
}

for env_id, kwargs in IDS.items():
    if env_id not in gym.registry:
        gym.register(id=env_id, **kwargs)
