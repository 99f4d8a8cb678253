"""A rollout worker: steps a vector of env copies with a policy and returns transitions and finished episodes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.envs.gym_env import GymEnvFactory


class Policy(Protocol):
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor: ...


@dataclass
class SampleBatch:
    """Transitions from ``num_envs`` env copies over ``T`` agent steps, flattened to ``N = T * num_envs`` rows.

    ``next_obs`` of a finished copy is its real final observation. ``episodes`` holds (return, length) of every
    episode that ended in this batch. ``env_seconds``/``inference_seconds`` time the two acting stages.
    """

    obs: Any
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: Any
    terminated: np.ndarray
    truncated: np.ndarray
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    env_seconds: float = 0.0
    inference_seconds: float = 0.0

    @property
    def env_steps(self) -> int:
        return int(self.rewards.shape[0])


def _stack(space: sp.Space, values: list[Any]) -> Any:
    flats = [sp.flatten(space, v) for v in values]
    return sp.unflatten(space, {k: np.concatenate([f[k] for f in flats]) for k in flats[0]})


class RolloutWorker:
    def __init__(self, env_factory: GymEnvFactory, policy: Policy, num_envs: int, seed: int,
                 vector_mode: str = "sync", device: torch.device | str = "cpu") -> None:
        self.env_factory, self.policy, self.num_envs = env_factory, policy, num_envs
        self.spec = env_factory.spec
        self.device = torch.device(device)
        self.envs = env_factory.make_vector(num_envs, vector_mode)
        self.envs.action_space.seed(seed)
        self.obs, _ = self.envs.reset(seed=[seed + i for i in range(num_envs)])
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)

    def sample(self, num_steps: int, explore: bool = True) -> SampleBatch:
        space = self.spec.observation_space
        obs_l, act_l, rew_l, next_l, term_l, trunc_l = [], [], [], [], [], []
        returns: list[float] = []
        lengths: list[int] = []
        env_s = inf_s = 0.0
        for _ in range(num_steps):
            t0 = time.perf_counter()
            with torch.inference_mode():
                actions = self.policy.get_actions(sp.to_torch(space, self.obs, self.device), explore=explore)
            actions_np = actions.cpu().numpy()
            t1 = time.perf_counter()
            next_obs, rewards, terminated, truncated, info = self.envs.step(actions_np)
            t2 = time.perf_counter()
            env_s += t2 - t1
            inf_s += t1 - t0
            done = terminated | truncated
            real_next = next_obs
            if done.any():
                real_next = _with_final_obs(space, next_obs, info, done)
            obs_l.append(self.obs)
            act_l.append(actions_np)
            rew_l.append(rewards.astype(np.float32))
            next_l.append(real_next)
            term_l.append(terminated)
            trunc_l.append(truncated)
            self._returns += rewards
            self._lengths += 1
            for i in np.flatnonzero(done):
                returns.append(float(self._returns[i]))
                lengths.append(int(self._lengths[i]))
                self._returns[i] = 0.0
                self._lengths[i] = 0
            self.obs = next_obs
        return SampleBatch(_stack(space, obs_l), np.concatenate(act_l), np.concatenate(rew_l),
                           _stack(space, next_l), np.concatenate(term_l), np.concatenate(trunc_l),
                           returns, lengths, env_s, inf_s)

    def close(self) -> None:
        self.envs.close()


def _with_final_obs(space: sp.Space, next_obs: Any, info: dict, done: np.ndarray) -> Any:
    """next_obs with each finished copy's row replaced by its real final observation."""
    final = info["final_obs"]
    flat_next = sp.flatten(space, next_obs)
    out = {k: v.copy() for k, v in flat_next.items()}
    for i in np.flatnonzero(done):
        for k, v in sp.flatten(space, final[i]).items():
            out[k][i] = v
    return sp.unflatten(space, out)
