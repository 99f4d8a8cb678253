"""A rollout worker: steps a vector of env copies with a policy and returns transitions and finished episodes.

A worker owns its env copies and an *acting random stream*: a torch generator state of its own, seeded from
``(seed, worker index)``, swapped in as torch's global generator while it samples (and swapped out after). So the
random draws of an exploring policy (epsilon-greedy's ``torch.rand``) do not depend on what the learner draws in
between, nor on where the worker runs: worker 0 in this process and worker 0 in a Ray actor act identically.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.envs.env_state import set_vector_env_state, vector_env_state
from rlrun.errors import ConfigError
from rlrun.execution.sample_batch import SampleBatch, map_nest, stack_nests
from rlrun.plain_data import decode, encode


class EnvFactory(Protocol):
    """What the execution layer needs of an env factory (``GymEnvFactory``, ``AtariEnvFactory``, a plugin's).

    Must be picklable: the Ray executor sends it to every rollout worker, and async vector envs to subprocesses.
    """

    spec: Any
    """``rlrun.envs.gym_env.EnvSpec``: id, observation and action spaces, frame skip."""

    def make(self, evaluation: bool = False) -> Any:
        """One env copy; ``evaluation=True``: no training-only wrappers (Atari: whole games, raw scores)."""

    def make_vector(self, num_envs: int, mode: str = "sync") -> Any:
        """``num_envs`` copies as a gymnasium vector env with SAME_STEP autoreset (``info["final_obs"]`` set at the
        steps where a copy's episode ended, and only there); ``mode``: sync | async."""

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
#   acting_state() -> state, set_acting_state(state) -> None: the per-copy recurrent state, in the worker's
#       get_state()/set_state() so that a checkpoint holds it where the worker is remote.
#   postprocess_batch(batch: SampleBatch) -> SampleBatch: once per sample(), in the worker's process, with the
#       worker's acting random stream and autograd enabled (RLlib's postprocess_trajectory): Ape-X actors compute
#       initial priorities here, A3C workers their gradients (into ``SampleBatch.info``).


VECTOR_MODES = ("sync", "async", "serial", "pipelined")
PIPELINE_GROUPS = 2  # vector_mode=pipelined: groups of env copies, one stepping while the policy acts on another


def _stack(space: sp.Space, values: list[Any]) -> Any:
    """Concatenate per-step (nested) values along the batch rank; one plain concatenate for a leaf space."""
    if not sp.is_nested(space):
        return np.concatenate(values)
    flats = [sp.flatten(space, v) for v in values]
    return sp.unflatten(space, {k: np.concatenate([f[k] for f in flats]) for k in flats[0]})


class EnvGroups:
    """The env copies of a ``vector_mode=pipelined`` worker: ``groups`` vector envs of consecutive copies (group g
    holds copies ``bounds[g][0]`` to ``bounds[g][1] - 1``, sizes differing by at most one), each made by the
    factory's ``make_vector(n, "async")`` and stepped in two phases (``step_async`` returns at once, ``step_wait``
    collects): envpool's C++ thread pool, or gymnasium's ``AsyncVectorEnv`` (a subprocess per copy).

    Its copies live outside this thread, so (like ``async``) their state is not in checkpoints: the attribute is
    ``groups``, not gymnasium's ``envs`` list, and ``rlrun.checkpoint.vector_env_state`` gives None."""

    def __init__(self, env_factory: EnvFactory, num_envs: int, groups: int = PIPELINE_GROUPS) -> None:
        from gymnasium.vector.utils import batch_space

        if num_envs < groups:
            raise ConfigError(f"executor.vector_mode=pipelined needs at least {groups} env copies per worker (one "
                              f"group steps while the policy acts on another); got {num_envs}.")
        sizes = [num_envs // groups + (1 if g < num_envs % groups else 0) for g in range(groups)]
        starts = np.cumsum([0, *sizes])
        self.bounds = [(int(lo), int(hi)) for lo, hi in zip(starts[:-1], starts[1:], strict=True)]
        self.num_envs = num_envs
        self.groups: list[Any] = []
        try:
            for n in sizes:
                self.groups.append(env_factory.make_vector(n, "async"))
                if not callable(getattr(self.groups[-1], "step_wait", None)):
                    raise ConfigError(f"executor.vector_mode=pipelined: {type(self.groups[-1]).__name__} has no "
                                      f"step_async/step_wait (two-phase stepping); use vector_mode=sync.")
        except BaseException:
            self.close()
            raise
        self.action_space = batch_space(env_factory.spec.action_space, num_envs)
        self.space = env_factory.spec.observation_space

    def reset(self, *, seed: list[int]) -> tuple[Any, dict[str, Any]]:
        """Reset every copy, copy i with ``seed[i]``; the observations of all copies in copy order (no infos)."""
        obs = [g.reset(seed=list(seed[lo:hi]))[0] for g, (lo, hi) in zip(self.groups, self.bounds, strict=True)]
        return _stack(self.space, obs), {}

    def close(self) -> None:
        for g in self.groups:
            g.close()


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
    for a policy without randomness) | pipelined (the copies in two groups, :class:`EnvGroups`: the policy
    computes one group's actions while the other group's copies step in envpool's C++ threads or in subprocesses,
    so env stepping and inference overlap on different cores, as in Sample Factory's double-buffered sampling;
    the policy sees half the copies per call, the transitions are those of sync for a policy without randomness,
    and a policy with a ``reset_episodes`` hook (per-copy recurrent state) is refused).
    """

    def __init__(self, env_factory: EnvFactory, policy: Policy, num_envs: int, seed: int,
                 vector_mode: str = "sync", device: torch.device | str = "cpu", worker_index: int = 0,
                 acting_seed_base: int | None = None) -> None:
        if vector_mode not in VECTOR_MODES:
            raise ConfigError(f"executor.vector_mode={vector_mode}: must be one of {', '.join(VECTOR_MODES)}.")
        self.env_factory, self.policy, self.num_envs = env_factory, policy, num_envs
        self.spec = env_factory.spec
        self.device = torch.device(device)
        self.worker_index = worker_index
        self.serial = vector_mode == "serial"
        self.pipelined = vector_mode == "pipelined"
        if self.pipelined and _hook(policy, "reset_episodes") is not None:
            raise ConfigError(f"executor.vector_mode=pipelined: the policy ({type(policy).__name__}) keeps per-copy "
                              f"state (reset_episodes) and must act on all copies at once; use vector_mode=sync.")
        self.envs = (EnvGroups(env_factory, num_envs) if self.pipelined
                     else env_factory.make_vector(num_envs, "sync" if self.serial else vector_mode))
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
            batch = (self._sample_pipelined if self.pipelined else self._sample)(num_steps, explore)
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
        obs_l, act_l, rew_l, term_l, trunc_l, final_l = [], [], [], [], [], []
        extras_l: dict[str, list[np.ndarray]] = {}
        returns: list[float] = []
        lengths: list[int] = []
        games: list[tuple[float, int]] = []
        env_s = inf_s = 0.0
        # The per-step path (with a few env copies it runs once per env step, ~100-150 us on CartPole x8): bound
        # methods, the acting call and the episode counters are hoisted; what can wait for the whole rollout does
        # (rewards' float32 cast, episode lengths); an env step where no copy's episode ended is told by the
        # missing ``final_obs`` info key (a vector env with SAME_STEP autoreset sets it only for ended copies),
        # without computing ``terminated | truncated``.
        clock, step, reset_episodes = time.perf_counter, self.envs.step, self._reset_episodes
        get_actions, to_torch = self.policy.get_actions, self._obs_to_torch
        if (self._leaf_dtype is not None and isinstance(self.obs, np.ndarray)
                and self.obs.dtype == np.dtype(self.spec.observation_space.dtype)):
            to_torch = torch.from_numpy  # a leaf observation already of the space's dtype: no copy, no check
        on_cpu = self.device.type == "cpu"
        ep_returns = self._returns
        begun = -self._lengths  # per copy: the step of this rollout at which its episode began (<= 0: before)
        obs = self.obs
        taken = 0  # steps done (the episode lengths are kept right if a step raises)
        try:
            with torch.inference_mode():
                for t in range(num_steps):
                    t0 = clock()
                    actions = (self._act(obs, explore) if self.serial
                               else get_actions(to_torch(obs), explore=explore))
                    if isinstance(actions, tuple):
                        actions, extras = actions
                        for key, value in extras.items():
                            extras_l.setdefault(key, []).append(value.cpu().numpy())
                    actions_np = actions.numpy() if on_cpu else actions.cpu().numpy()
                    t1 = clock()
                    next_obs, rewards, terminated, truncated, info = step(actions_np)
                    t2 = clock()
                    env_s += t2 - t1
                    inf_s += t1 - t0
                    if reset_episodes is not None:
                        reset_episodes(terminated | truncated)
                    obs_l.append(obs)
                    act_l.append(actions_np)
                    rew_l.append(rewards)
                    term_l.append(terminated)
                    trunc_l.append(truncated)
                    ep_returns += rewards
                    if "final_obs" in info:
                        final = info["final_obs"]
                        for i in np.flatnonzero(terminated | truncated):
                            final_l.append(final[i])
                            returns.append(float(ep_returns[i]))
                            lengths.append(int(t + 1 - begun[i]))
                            ep_returns[i] = 0.0
                            begun[i] = t + 1
                        if "final_info" in info:
                            games += _games_from_infos(info, terminated | truncated)
                    obs = next_obs
                    self.obs = obs
                    taken = t + 1
        finally:
            self._lengths = (taken - begun).astype(np.int64, copy=False)
        obs_l.append(obs)
        return SampleBatch(stack_nests(obs_l), np.stack(act_l), np.stack(rew_l).astype(np.float32, copy=False),
                           np.stack(term_l), np.stack(trunc_l), self._finals(final_l), returns, lengths, env_s, inf_s,
                           {k: np.stack(v) for k, v in extras_l.items()},
                           [s for s, _ in games], [n for _, n in games])

    def _finals(self, finals: list[Any]) -> Any:
        """The final observations of the episodes that ended, stacked ``[K, ...]`` (empty leaves where K = 0)."""
        if finals:
            return stack_nests([map_nest(np.asarray, f) for f in finals])
        return map_nest(lambda x: np.empty((0, *np.shape(x)[1:]), np.asarray(x).dtype), self.obs)

    def _sample_pipelined(self, num_steps: int, explore: bool) -> SampleBatch:
        """:meth:`_sample` with the copies in groups (``vector_mode=pipelined``): group g's actions for step t are
        computed while group g-1's copies step. Slot s = (t, g) in order t-major: act on slot s and start its step,
        then collect slot s-1's step. Rows are written straight into [T + 1, B] buffers (one copy per observation), and
        steps are collected in copy order, so episodes and games are listed as in sync mode. ``env_seconds`` is the
        time this thread spent starting and waiting for steps (stepping that overlapped inference is not in it)."""
        space = self.spec.observation_space
        groups, bounds = self.envs.groups, self.envs.bounds
        k, t_max, n = len(groups), num_steps, self.num_envs
        flat = sp.flatten(space, self.obs)
        obs_buf = {key: np.empty((t_max + 1, n, *v.shape[1:]), v.dtype) for key, v in flat.items()}
        finals: list[tuple[int, Any]] = []  # (flat step t * n + b, final observation) of every ended episode
        rew_buf = np.empty((t_max, n), np.float32)
        term_buf = np.empty((t_max, n), bool)
        trunc_buf = np.empty((t_max, n), bool)
        act_buf: np.ndarray | None = None
        extras_buf: dict[str, np.ndarray] = {}
        current = [{key: v[lo:hi] for key, v in flat.items()} for lo, hi in bounds]  # each group's observations
        returns: list[float] = []
        lengths: list[int] = []
        games: list[tuple[float, int]] = []
        env_s = inf_s = 0.0
        clock = time.perf_counter
        leaf = not sp.is_nested(space)
        in_flight: set[int] = set()  # groups whose step was started and not collected

        def act(t: int, g: int) -> None:
            nonlocal act_buf, env_s, inf_s
            lo, hi = bounds[g]
            for key, v in current[g].items():
                obs_buf[key][t, lo:hi] = v
            t0 = clock()
            obs = current[g][""] if leaf else sp.unflatten(space, current[g])
            actions = self.policy.get_actions(self._obs_to_torch(obs), explore=explore)
            if isinstance(actions, tuple):
                actions, extras = actions
                for key, value in extras.items():
                    value = value.cpu().numpy()
                    if key not in extras_buf:
                        extras_buf[key] = np.empty((t_max, n, *value.shape[1:]), value.dtype)
                    extras_buf[key][t, lo:hi] = value
            actions_np = actions.numpy() if actions.device.type == "cpu" else actions.cpu().numpy()
            if act_buf is None:
                act_buf = np.empty((t_max, n, *actions_np.shape[1:]), actions_np.dtype)
            act_buf[t, lo:hi] = actions_np
            t1 = clock()
            groups[g].step_async(actions_np)
            in_flight.add(g)
            env_s += clock() - t1
            inf_s += t1 - t0

        def collect(t: int, g: int) -> None:
            nonlocal env_s
            lo, hi = bounds[g]
            t0 = clock()
            in_flight.discard(g)
            next_obs, rewards, terminated, truncated, info = groups[g].step_wait()
            env_s += clock() - t0
            rew_buf[t, lo:hi] = rewards
            term_buf[t, lo:hi] = terminated
            trunc_buf[t, lo:hi] = truncated
            current[g] = sp.flatten(space, next_obs)
            self._returns[lo:hi] += rewards
            self._lengths[lo:hi] += 1
            done = terminated | truncated
            if done.any():
                final = info["final_obs"]
                for i in np.flatnonzero(done):
                    finals.append((t * n + lo + i, final[i]))
                    returns.append(float(self._returns[lo + i]))
                    lengths.append(int(self._lengths[lo + i]))
                    self._returns[lo + i] = 0.0
                    self._lengths[lo + i] = 0
                if "final_info" in info:
                    games.extend(_games_from_infos(info, done))

        slots = [(t, g) for t in range(t_max) for g in range(k)]
        with torch.inference_mode():
            try:
                for s, slot in enumerate(slots):
                    act(*slot)
                    if s >= 1:
                        collect(*slots[s - 1])
                collect(*slots[-1])
            except BaseException:
                for g in list(in_flight):  # leave no step in flight: the next call would find the copies busy
                    try:
                        groups[g].step_wait()
                    except Exception:  # noqa: BLE001 - the first error is the one to report
                        pass
                raise
        whole = {key: np.concatenate([c[key] for c in current]) for key in flat}
        for key, v in whole.items():
            obs_buf[key][t_max] = v
        self.obs = whole[""] if leaf else sp.unflatten(space, whole)
        assert act_buf is not None
        finals.sort(key=lambda item: item[0])  # collected in slot order; final_obs is in step order
        return SampleBatch(obs_buf[""] if leaf else sp.unflatten(space, obs_buf), act_buf, rew_buf, term_buf,
                           trunc_buf, self._finals([f for _, f in finals]), returns, lengths, env_s, inf_s,
                           extras_buf, [sc for sc, _ in games], [ln for _, ln in games])

    def get_state(self) -> dict[str, Any]:
        """The worker's state between samples as plain data (rlrun.plain_data; a checkpoint holds it): current
        observations, episode accumulators and every env copy's state (rlrun.envs.env_state; None for async
        copies, which live in subprocesses), and a recurrent policy's per-copy state (its ``acting_state`` hook: the
        env copies' memories, which on a remote worker live nowhere else). The acting random stream is
        ``rng_state``, kept by the executor."""
        acting = _hook(self.policy, "acting_state")
        return {"obs": encode(self.obs), "returns": encode(self._returns), "lengths": encode(self._lengths),
                "envs": vector_env_state(self.envs), "acting": None if acting is None else acting()}

    def set_state(self, state: dict[str, Any]) -> bool:
        """Restore :meth:`get_state`'s result; returns False (and leaves the freshly reset env copies as they are)
        where the env state could not be held (async env copies)."""
        if state["envs"] is None or vector_env_state(self.envs) is None:
            return False
        set_vector_env_state(self.envs, state["envs"])
        self.obs, self._returns = decode(state["obs"]), decode(state["returns"])
        self._lengths = decode(state["lengths"])
        set_acting = _hook(self.policy, "set_acting_state")
        if set_acting is not None and state.get("acting") is not None:  # where the copies' episodes stand
            set_acting(state["acting"])
        return True

    def close(self) -> None:
        self.envs.close()


def _hook(policy: Any, name: str) -> Any:
    """The policy's optional hook ``name`` (see the comment above ``VECTOR_MODES``), or None."""
    hook = getattr(policy, name, None)
    return hook if callable(hook) else None
