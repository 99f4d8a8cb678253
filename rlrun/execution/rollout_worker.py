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
    """What a worker acts with. ``get_actions`` returns the actions ``[B, ...]``, or ``(actions, extras)`` where
    ``extras`` is a dict of tensors with the same leading rank B that the worker records per step in
    ``SampleBatch.extras`` (e.g. behaviour ``logits``/``log_prob`` and ``value`` for on-policy and V-trace
    learners)."""

    def get_actions(self, obs: Any, explore: bool = True) -> Any: ...


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
    num_envs: int = 1
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-step policy outputs recorded at acting time (rows as for ``actions``)."""
    last_obs: Any = None
    """The observation after the last step of every env copy ``[B, ...]`` (a reset one where a copy finished):
    what an on-policy learner bootstraps from."""

    @property
    def env_steps(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def num_steps(self) -> int:
        """T: agent steps per env copy in this batch."""
        return self.env_steps // self.num_envs

    def time_major(self, rows: Any) -> Any:
        """Rows ``[T * B, ...]`` (this batch's order: step-major) as ``[T, B, ...]``; nests are reshaped leafwise."""
        def reshape(x: Any) -> Any:
            return x.reshape(self.num_steps, self.num_envs, *x.shape[1:])
        if isinstance(rows, dict):
            return {k: self.time_major(v) for k, v in rows.items()}
        if isinstance(rows, tuple):
            return tuple(self.time_major(v) for v in rows)
        return reshape(rows)


def _stack(space: sp.Space, values: list[Any]) -> Any:
    """Concatenate per-step (nested) values along the batch rank; one plain concatenate for a leaf space."""
    if not sp.is_nested(space):
        return np.concatenate(values)
    flats = [sp.flatten(space, v) for v in values]
    return sp.unflatten(space, {k: np.concatenate([f[k] for f in flats]) for k in flats[0]})


class RolloutWorker:
    """Steps ``num_envs`` env copies with ``policy`` (epsilon-greedy etc. is the policy's business).

    The per-step path is kept short because with few env copies it runs once per env step: a leaf observation
    space (CartPole's Box) goes to torch with ``torch.from_numpy`` (no copy) instead of the nested
    ``spaces.to_torch``, the whole rollout runs under one ``torch.inference_mode``, and episode bookkeeping only
    loops over copies that finished.
    """

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
        space = self.spec.observation_space
        # The fast path: one leaf whose numpy dtype is already the torch dtype of the space, on the CPU.
        self._leaf_dtype = (None if sp.is_nested(space) or self.device.type != "cpu"
                            else sp.dtype(space))

    def _obs_to_torch(self, obs: Any) -> Any:
        if self._leaf_dtype is not None and isinstance(obs, np.ndarray):
            t = torch.from_numpy(obs)
            if t.dtype == self._leaf_dtype:
                return t
            return t.to(self._leaf_dtype)
        return sp.to_torch(self.spec.observation_space, obs, self.device)

    def sample(self, num_steps: int, explore: bool = True) -> SampleBatch:
        space = self.spec.observation_space
        obs_l, act_l, rew_l, next_l, term_l, trunc_l = [], [], [], [], [], []
        extras_l: dict[str, list[np.ndarray]] = {}
        returns: list[float] = []
        lengths: list[int] = []
        env_s = inf_s = 0.0
        clock = time.perf_counter
        with torch.inference_mode():
            for _ in range(num_steps):
                t0 = clock()
                actions = self.policy.get_actions(self._obs_to_torch(self.obs), explore=explore)
                if isinstance(actions, tuple):
                    actions, extras = actions
                    for key, value in extras.items():
                        extras_l.setdefault(key, []).append(value.cpu().numpy())
                actions_np = actions.numpy() if actions.device.type == "cpu" else actions.cpu().numpy()
                t1 = clock()
                next_obs, rewards, terminated, truncated, info = self.envs.step(actions_np)
                t2 = clock()
                env_s += t2 - t1
                inf_s += t1 - t0
                done = terminated | truncated
                real_next = next_obs
                obs_l.append(self.obs)
                act_l.append(actions_np)
                rew_l.append(rewards.astype(np.float32, copy=False))
                term_l.append(terminated)
                trunc_l.append(truncated)
                self._returns += rewards
                self._lengths += 1
                if done.any():
                    real_next = _with_final_obs(space, next_obs, info, done)
                    for i in np.flatnonzero(done):
                        returns.append(float(self._returns[i]))
                        lengths.append(int(self._lengths[i]))
                        self._returns[i] = 0.0
                        self._lengths[i] = 0
                next_l.append(real_next)
                self.obs = next_obs
        return SampleBatch(_stack(space, obs_l), np.concatenate(act_l), np.concatenate(rew_l),
                           _stack(space, next_l), np.concatenate(term_l), np.concatenate(trunc_l),
                           returns, lengths, env_s, inf_s, self.num_envs,
                           {k: np.concatenate(v) for k, v in extras_l.items()}, self.obs)

    def get_state(self) -> dict[str, Any]:
        """The worker's own state between samples (current observations, episode accumulators); the env copies'
        state is read by ``rlrun.checkpoint`` from ``self.envs``."""
        return {"obs": self.obs, "returns": self._returns, "lengths": self._lengths}

    def set_state(self, state: dict[str, Any]) -> None:
        self.obs, self._returns, self._lengths = state["obs"], state["returns"], state["lengths"]

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
