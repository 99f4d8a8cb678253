"""A rollout worker: steps a vector of env copies with a policy and returns transitions and finished episodes.

A worker owns its env copies and an *acting random stream*: a torch generator state of its own, seeded from
``(seed, worker index)``, swapped in as torch's global generator while it samples (and swapped out after). So the
random draws of an exploring policy (epsilon-greedy's ``torch.rand``) do not depend on what the learner draws in
between, nor on where the worker runs: worker 0 in this process and worker 0 in a Ray actor act identically.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from rlrun import spaces as sp


class EnvFactory(Protocol):
    """What the execution layer needs of an env factory (``GymEnvFactory``, ``AtariEnvFactory``, a plugin's).

    Must be picklable: the Ray executor sends it to every rollout worker, and async vector envs to subprocesses.
    """

    spec: Any
    """``rlrun.envs.gym_env.EnvSpec``: id, observation and action spaces, frame skip."""

    def make(self, evaluation: bool = False) -> Any:
        """One env copy; ``evaluation=True``: no training-only wrappers (Atari: whole games, raw scores)."""

    def make_vector(self, num_envs: int, mode: str = "sync") -> Any:
        """``num_envs`` copies as a gymnasium vector env with SAME_STEP autoreset; ``mode``: sync | async."""

    def protocol_card(self) -> dict[str, Any]:
        """The env protocol card (``rlrun/envs/protocol.py``): a JSON-able dict."""


class Policy(Protocol):
    """What a worker acts with. ``get_actions`` returns the actions ``[B, ...]``, or ``(actions, extras)`` where
    ``extras`` is a dict of tensors with the same leading rank B that the worker records per step in
    ``SampleBatch.extras`` (e.g. behaviour ``logits``/``log_prob`` and ``value`` for on-policy and V-trace
    learners)."""

    def get_actions(self, obs: Any, explore: bool = True) -> Any: ...


# Optional policy hooks a worker calls when the policy defines them (a plain function attribute lookup, once):
#   reset_episodes(done: np.ndarray[bool, B]) -> None: after every env step, the env copies whose episode ended (a
#       recurrent policy zeroes their state; their next observation starts a new episode).
#   postprocess_batch(batch: SampleBatch) -> SampleBatch: once per sample(), in the worker's process, with the
#       worker's acting random stream and autograd enabled (RLlib's postprocess_trajectory): Ape-X actors compute
#       initial priorities here, A3C workers their gradients (into ``SampleBatch.info``).


VECTOR_MODES = ("sync", "async", "serial")


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
    game_scores: list[float] = field(default_factory=list)
    """Raw scores of the whole games that ended in this batch (Atari: unclipped rewards over all lives, from
    ``rlrun.envs.atari.games_from_infos``); empty for envs without the ``game_score`` info (CartPole)."""
    game_lengths: list[int] = field(default_factory=list)
    """Agent steps of those games, in the same order."""
    transfer_seconds: float = 0.0
    """Seconds spent packing this batch for another process (Ray executor; 0 in-process)."""
    info: dict[str, Any] = field(default_factory=dict)
    """Worker-computed data that is not one value per row (a ``postprocess_batch`` hook's gradients, statistics):
    a nest of tensors, arrays and numbers; tensors travel between processes as numpy arrays."""
    postprocess_seconds: float = 0.0
    """Seconds of the policy's ``postprocess_batch`` hook in the worker (0 without one)."""

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


def acting_seed(seed: int, worker_index: int) -> int:
    """The seed of worker ``worker_index``'s acting random stream: mixed from the run seed and the index (numpy's
    SeedSequence), so it is neither the run seed itself (which seeded the networks' initial weights) nor another
    worker's."""
    return int(np.random.SeedSequence([int(seed), int(worker_index), 0x5EED]).generate_state(1, np.uint64)[0]
               & 0x7FFF_FFFF_FFFF_FFFF)


def _games_from_infos(info: dict, done: np.ndarray) -> list[tuple[float, int]]:
    from rlrun.envs.atari import games_from_infos  # lazily: only envs that report games reach here with keys

    return games_from_infos(info, done)


class RolloutWorker:
    """Steps ``num_envs`` env copies with ``policy`` (epsilon-greedy etc. is the policy's business).

    The per-step path is kept short because with few env copies it runs once per env step: a leaf observation
    space (CartPole's Box) goes to torch with ``torch.from_numpy`` (no copy) instead of the nested
    ``spaces.to_torch``, the whole rollout runs under one ``torch.inference_mode``, and episode bookkeeping only
    loops over copies that finished.

    ``seed``: env copy i is reset with ``seed + i`` (the executor passes ``run seed + worker_index * num_envs``).
    ``worker_index``: with the run seed ``acting_seed_base`` (default ``seed``) it seeds the acting random stream
    (module docstring). ``vector_mode``: sync | async (the factory's vector env) | serial (sync env copies, and the
    policy called on one observation at a time, batch 1: for debugging batching; the same transitions as sync
    for a policy without randomness).
    """

    def __init__(self, env_factory: EnvFactory, policy: Policy, num_envs: int, seed: int,
                 vector_mode: str = "sync", device: torch.device | str = "cpu", worker_index: int = 0,
                 acting_seed_base: int | None = None) -> None:
        if vector_mode not in VECTOR_MODES:
            from rlrun.errors import ConfigError

            raise ConfigError(f"executor.vector_mode={vector_mode}: must be one of {', '.join(VECTOR_MODES)}.")
        self.env_factory, self.policy, self.num_envs = env_factory, policy, num_envs
        self.spec = env_factory.spec
        self.device = torch.device(device)
        self.worker_index = worker_index
        self.serial = vector_mode == "serial"
        self.envs = env_factory.make_vector(num_envs, "sync" if self.serial else vector_mode)
        self.envs.action_space.seed(seed)
        self.obs, _ = self.envs.reset(seed=[seed + i for i in range(num_envs)])
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._acting_seed = acting_seed(seed if acting_seed_base is None else acting_seed_base, worker_index)
        self.rng_state = torch.Generator().manual_seed(self._acting_seed).get_state()
        self._cuda_rng_state: torch.Tensor | None = None
        space = self.spec.observation_space
        # The fast path: one leaf whose numpy dtype is already the torch dtype of the space, on the CPU.
        self._leaf_dtype = (None if sp.is_nested(space) or self.device.type != "cpu"
                            else sp.dtype(space))
        self._reset_episodes = _hook(policy, "reset_episodes")
        self._postprocess = _hook(policy, "postprocess_batch")

    def _obs_to_torch(self, obs: Any) -> Any:
        if self._leaf_dtype is not None and isinstance(obs, np.ndarray):
            t = torch.from_numpy(obs)
            if t.dtype == self._leaf_dtype:
                return t
            return t.to(self._leaf_dtype)
        return sp.to_torch(self.spec.observation_space, obs, self.device)

    def _act(self, obs: Any, explore: bool) -> Any:
        if not self.serial:
            return self.policy.get_actions(self._obs_to_torch(obs), explore=explore)
        space = self.spec.observation_space
        flat = sp.flatten(space, obs)
        outs = [self.policy.get_actions(self._obs_to_torch(sp.unflatten(space, {k: v[i:i + 1]
                                                                                 for k, v in flat.items()})),
                                        explore=explore)
                for i in range(self.num_envs)]
        if isinstance(outs[0], tuple):
            return (torch.cat([a for a, _ in outs]),
                    {key: torch.cat([e[key] for _, e in outs]) for key in outs[0][1]})
        return torch.cat(outs)

    def sample(self, num_steps: int, explore: bool = True) -> SampleBatch:
        """``num_steps`` agent steps of every env copy, acting with the worker's own random stream."""
        outer = torch.get_rng_state()
        torch.set_rng_state(self.rng_state)
        cuda = self.device.type == "cuda"
        if cuda:
            outer_cuda = torch.cuda.get_rng_state(self.device)
            if self._cuda_rng_state is None:
                with torch.cuda.device(self.device):
                    torch.cuda.manual_seed(self._acting_seed)
            else:
                torch.cuda.set_rng_state(self._cuda_rng_state, self.device)
        try:
            batch = self._sample(num_steps, explore)
            if self._postprocess is not None:
                t0 = time.perf_counter()
                batch = self._postprocess(batch)
                batch.postprocess_seconds = time.perf_counter() - t0
            return batch
        finally:
            self.rng_state = torch.get_rng_state()
            torch.set_rng_state(outer)
            if cuda:
                self._cuda_rng_state = torch.cuda.get_rng_state(self.device)
                torch.cuda.set_rng_state(outer_cuda, self.device)

    def _sample(self, num_steps: int, explore: bool) -> SampleBatch:
        space = self.spec.observation_space
        obs_l, act_l, rew_l, next_l, term_l, trunc_l = [], [], [], [], [], []
        extras_l: dict[str, list[np.ndarray]] = {}
        returns: list[float] = []
        lengths: list[int] = []
        games: list[tuple[float, int]] = []
        env_s = inf_s = 0.0
        clock = time.perf_counter
        with torch.inference_mode():
            for _ in range(num_steps):
                t0 = clock()
                actions = self._act(self.obs, explore)
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
                if self._reset_episodes is not None:
                    self._reset_episodes(done)
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
                    if "final_info" in info:
                        games += _games_from_infos(info, done)
                next_l.append(real_next)
                self.obs = next_obs
        return SampleBatch(_stack(space, obs_l), np.concatenate(act_l), np.concatenate(rew_l),
                           _stack(space, next_l), np.concatenate(term_l), np.concatenate(trunc_l),
                           returns, lengths, env_s, inf_s, self.num_envs,
                           {k: np.concatenate(v) for k, v in extras_l.items()}, self.obs,
                           [s for s, _ in games], [n for _, n in games])

    def get_state(self) -> dict[str, Any]:
        """The worker's own state between samples (current observations, episode accumulators); the env copies'
        state is read by ``rlrun.checkpoint`` from ``self.envs``, the acting random stream is ``rng_state``."""
        return {"obs": self.obs, "returns": self._returns, "lengths": self._lengths}

    def set_state(self, state: dict[str, Any]) -> None:
        self.obs, self._returns, self._lengths = state["obs"], state["returns"], state["lengths"]

    def close(self) -> None:
        self.envs.close()


def _hook(policy: Any, name: str) -> Any:
    """The policy's optional hook ``name`` (see the comment above ``VECTOR_MODES``), or None."""
    hook = getattr(policy, name, None)
    return hook if callable(hook) else None


def _with_final_obs(space: sp.Space, next_obs: Any, info: dict, done: np.ndarray) -> Any:
    """next_obs with each finished copy's row replaced by its real final observation."""
    final = info["final_obs"]
    flat_next = sp.flatten(space, next_obs)
    out = {k: v.copy() for k, v in flat_next.items()}
    for i in np.flatnonzero(done):
        for k, v in sp.flatten(space, final[i]).items():
            out[k][i] = v
    return sp.unflatten(space, out)
