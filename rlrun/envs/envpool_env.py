"""``env.backend=envpool``: a worker's Atari env copies stepped by envpool's C++ thread pool (optional extra:
``pip install 'rlrun[envpool]'``, envpool 1.2.5; ~600 MiB with its MuJoCo assets).

:class:`EnvPoolVectorEnv` is a gymnasium ``VectorEnv`` that a rollout worker steps exactly like the gymnasium
backend's ``SyncVectorEnv``: SAME_STEP autoreset (a finished copy's real last observation is in
``info["final_obs"]``, the returned observation is the next episode's first), the same info keys (``lives``, and
under ``final_info`` the ``game_score``/``game_length`` of whole games; rlrun/envs/atari.py) and, for the same
protocol, the same observations: envpool's frame pipeline (no-ops, frame skip with max-pool, grayscale, area
resize, channel-first stack) gives bit-identical frames to rlrun's wrappers (tests/envs/test_atari.py).

How the protocol is split: envpool runs the emulator and the frame pipeline with ``episodic_life=False`` and
``reward_clip=False`` (so it resets a game only at game over and reports raw rewards); this class adds the life-loss
episode ends, reward clipping and the game score in numpy over the batch, as :class:`TerminalOnLifeLoss`,
:class:`SignReward` and :class:`GameScore` do per copy. envpool's own ``episodic_life`` is not used because a
forced reset of a copy (what SAME_STEP needs) restarts its whole game.

Differences from the gymnasium backend that remain:
- the random no-op counts at reset come from envpool's RNG, so the same seed gives other no-op counts (with
  ``noop_max=1`` they agree, and so do the frames); ``noop_max=0`` is refused (envpool always takes one);
- envpool cuts a game off after ``ceil(max_episode_frames / frame_skip)`` agent steps counted after the no-ops; the
  ALE counts ``max_episode_frames`` from the reset, no-op frames included (at most ``noop_max`` frames apart);
- ``kwargs`` (mode, difficulty) and ``max_pool=false`` are not supported (envpool always max-pools); the factory
  refuses them with a ConfigError;
- the env copies' state is not saved in checkpoints (as with async gymnasium copies): a resumed run starts them
  from fresh resets.

Seeding: envpool seeds its copies when the pool is created, so the pool is (re)made at ``reset(seed=...)``: copy i
gets ``seed[i]`` (``reset(seed=s)`` gives copy i ``s + i``; an unseeded first reset gives copy i seed ``i``). The
pool runs in sync mode (a batch is every copy), so ``reset(env_id)`` after a step is safe (calling
``async_reset`` while copies are still stepping can hang).

Overlap: ``step`` is ``step_async`` (envpool's ``send``: the C++ threads start stepping every copy and the call
returns) then ``step_wait`` (``recv``, then the life-loss/clipping/score bookkeeping above), the same two-phase API
as gymnasium's ``AsyncVectorEnv``. A rollout worker with ``executor.vector_mode=pipelined`` holds two such pools
(half its copies each) and computes one half's actions while the other half steps
(``rlrun/execution/rollout_worker.py``).
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from rlrun.errors import ConfigError

INT32_MAX = 2**31 - 1


def check_envpool(factory: Any) -> None:
    """ConfigError unless envpool is installed and can run ``factory``'s game under its protocol."""
    cfg = factory.cfg
    try:
        import envpool
    except ImportError:
        raise ConfigError("env.backend=envpool: envpool is not installed; pip install 'rlrun[envpool]' "
                          "(envpool 1.2.5), or use env.backend=gymnasium.") from None
    task = f"{factory.game}-v5"
    if task not in envpool.list_all_envs():
        raise ConfigError(f"env.backend=envpool: envpool {envpool.__version__} has no {task}; "
                          f"use env.backend=gymnasium.")
    if not cfg.max_pool and int(cfg.frame_skip) > 1:
        raise ConfigError("env.max_pool=false: envpool always max-pools the last two frames of a skip; "
                          "use env.backend=gymnasium.")
    if cfg.kwargs:
        raise ConfigError(f"env.kwargs={dict(cfg.kwargs)}: not supported with env.backend=envpool "
                          f"(it makes its own ALE envs); use env.backend=gymnasium.")
    if int(cfg.noop_max) == 0:
        raise ConfigError("env.noop_max=0: envpool always takes at least one no-op frame at reset; use noop_max>=1 "
                          "or env.backend=gymnasium.")
    if int(cfg.envpool_threads) < 0:
        raise ConfigError(f"env.envpool_threads={cfg.envpool_threads}: must be 0 (one per core) or more.")


class EnvPoolVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` copies of the factory's game in one envpool pool; see the module docstring."""

    def __init__(self, factory: Any, num_envs: int) -> None:
        cfg = factory.cfg
        if num_envs < 1:
            raise ConfigError(f"num_envs={num_envs}: must be at least 1.")
        self.num_envs = int(num_envs)
        self.single_observation_space = factory.spec.observation_space
        self.single_action_space = factory.spec.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self.task = f"{factory.game}-v5"
        self.terminal_on_life_loss = bool(cfg.terminal_on_life_loss)
        self.clip_rewards = bool(cfg.clip_rewards)
        frame_skip = int(cfg.frame_skip)
        max_steps = (INT32_MAX if cfg.max_episode_frames is None
                     else -(-int(cfg.max_episode_frames) // frame_skip))
        threads = int(cfg.envpool_threads) or min(self.num_envs, os.cpu_count() or 1)
        self.make_kwargs: dict[str, Any] = dict(
            env_type="gymnasium", num_envs=self.num_envs, batch_size=self.num_envs, num_threads=threads,
            frame_skip=frame_skip, noop_max=int(cfg.noop_max), stack_num=int(cfg.frame_stack),
            img_height=int(cfg.screen_size), img_width=int(cfg.screen_size), gray_scale=bool(cfg.grayscale),
            repeat_action_probability=float(cfg.repeat_action_probability),
            full_action_space=bool(cfg.full_action_space), max_episode_steps=max_steps, episodic_life=False,
            reward_clip=False, use_fire_reset=False, use_inter_area_resize=True)
        self.pool: Any = None
        self._stepping = False  # a step_async is waiting for its step_wait
        self.lives = np.zeros(self.num_envs, dtype=np.int64)
        self.game_score = np.zeros(self.num_envs, dtype=np.float64)
        self.game_length = np.zeros(self.num_envs, dtype=np.int64)

    def _make_pool(self, seeds: list[int]) -> None:
        import envpool

        if self.pool is not None:
            self.pool.close()
        self.pool = envpool.make(self.task, seed=[int(s) for s in seeds], **self.make_kwargs)

    def reset(self, *, seed: int | list[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every copy (options are not supported). A seed (int s: copy i gets s + i; or one per copy)
        remakes the pool, since envpool seeds copies only at creation."""
        if options:
            raise ValueError("EnvPoolVectorEnv.reset: options are not supported")
        if self._stepping:  # collect a step still in progress: envpool cannot reset copies that are stepping
            self.step_wait()
        if seed is not None or self.pool is None:
            if seed is None:
                seeds = list(range(self.num_envs))
            elif isinstance(seed, (int, np.integer)):
                seeds = [int(seed) + i for i in range(self.num_envs)]
            else:
                seeds = [int(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ValueError(f"reset: {len(seeds)} seeds for {self.num_envs} env copies")
            self._make_pool(seeds)
        obs, info = self.pool.reset()
        obs, info = _in_env_order(obs, info)
        self.lives[:] = info["lives"]
        self.game_score[:] = 0.0
        self.game_length[:] = 0
        return obs, {"lives": self.lives.copy(), "_lives": np.ones(self.num_envs, dtype=bool)}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Hand every copy its action and return at once: envpool's C++ threads step them while this thread works
        on (a pipelined rollout worker acts on its other copies meanwhile). :meth:`step_wait` collects the step."""
        if self._stepping:
            raise RuntimeError("EnvPoolVectorEnv.step_async: the previous step has not been collected (step_wait)")
        self.pool.send(np.asarray(actions).astype(np.int32, copy=False))
        self._stepping = True

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The step :meth:`step_async` started (blocks until every copy has stepped): what :meth:`step` returns."""
        if not self._stepping:
            raise RuntimeError("EnvPoolVectorEnv.step_wait: no step in progress (call step_async first)")
        self._stepping = False
        obs, raw, game_terminated, truncated, info = self.pool.recv()
        raw, game_terminated, truncated = raw.copy(), game_terminated.copy(), truncated.copy()
        obs, raw, game_terminated, truncated, info = _in_env_order(obs, info, raw, game_terminated, truncated)
        raw = raw.astype(np.float64)
        lives = np.asarray(info["lives"], dtype=np.int64)
        self.game_score += raw
        self.game_length += 1
        game_over = game_terminated | truncated
        terminated = game_terminated.copy()
        if self.terminal_on_life_loss:
            terminated |= (lives > 0) & (lives < self.lives)
        self.lives = lives
        rewards = np.sign(raw) if self.clip_rewards else raw
        done = terminated | truncated
        ones = np.ones(self.num_envs, dtype=bool)
        infos: dict[str, Any] = {"lives": lives.copy(), "_lives": ones}
        if done.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(done):
                final_obs[i] = obs[i].copy()
            infos["final_obs"], infos["_final_obs"] = final_obs, done.copy()
            final_info: dict[str, Any] = {"lives": lives.copy(), "_lives": done.copy()}
            if game_over.any():
                final_info.update(game_score=np.where(game_over, self.game_score, 0.0), _game_score=game_over.copy(),
                                  game_length=np.where(game_over, self.game_length, 0),
                                  _game_length=game_over.copy())
            infos["final_info"], infos["_final_info"] = final_info, done.copy()
            if game_over.any():
                ids = np.flatnonzero(game_over)
                obs = obs.copy()
                reset_obs, reset_info = self.pool.reset(ids.astype(np.int32))
                order = np.argsort(reset_info["env_id"])
                obs[ids] = reset_obs[order]
                self.lives[ids] = np.asarray(reset_info["lives"])[order]
                infos["lives"][ids] = self.lives[ids]
                self.game_score[ids] = 0.0
                self.game_length[ids] = 0
        return obs, rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        if self.pool is not None:
            if self._stepping:
                self.pool.recv()
                self._stepping = False
            self.pool.close()
            self.pool = None


def _in_env_order(obs: np.ndarray, info: dict[str, Any], *arrays: np.ndarray) -> tuple[Any, ...]:
    """The batch sorted by env copy index (a sync pool usually returns it so already)."""
    env_id = np.asarray(info["env_id"])
    if np.array_equal(env_id, np.arange(len(env_id))):
        return (obs, *arrays, info)
    order = np.argsort(env_id)
    info = {k: (np.asarray(v)[order] if k in ("env_id", "lives") else v) for k, v in info.items()}
    return (obs[order], *(a[order] for a in arrays), info)
