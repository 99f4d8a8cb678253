"""Any registered gymnasium environment, single or vectorised (one worker's env copies)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from rlrun import spaces as sp
from rlrun.errors import ConfigError


@dataclass(frozen=True)
class EnvSpec:
    """What an algorithm needs to know of an environment to build itself."""

    id: str
    observation_space: sp.Space
    action_space: sp.Space
    frame_skip: int = 1


class GymEnvFactory:
    """Makes env copies of ``cfg.id`` with gymnasium; ``make_vector`` steps them together.

    Vector envs reset finished copies in the same step (gymnasium's SAME_STEP autoreset): the observation returned
    for a finished copy is its reset observation and the real final observation is in ``info["final_obs"]``, which
    is what a transition's ``next_obs`` needs after a time-limit truncation.
    """

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        if cfg.id not in gym.registry:
            _import_env_packages()
        if cfg.id not in gym.registry:
            close = difflib.get_close_matches(cfg.id, list(gym.registry), n=5, cutoff=0.5)
            hint = f" Close matches: {', '.join(close)}." if close else ""
            raise ConfigError(f"env.id={cfg.id}: not a registered gymnasium environment.{hint}")
        probe = self.make()
        self.spec = EnvSpec(cfg.id, probe.observation_space, probe.action_space, int(cfg.frame_skip))
        probe.close()

    def make(self, evaluation: bool = False) -> gym.Env:
        """One env copy. ``evaluation`` is accepted for a uniform factory interface (the Atari factory drops its
        training-only wrappers for it); a plain gymnasium env is the same either way."""
        kwargs = dict(self.cfg.kwargs or {})
        if self.cfg.max_episode_steps is not None:
            kwargs["max_episode_steps"] = int(self.cfg.max_episode_steps)
        try:
            return gym.make(self.cfg.id, **kwargs)
        except TypeError as e:
            raise ConfigError(f"env.kwargs: {self.cfg.id} does not accept these arguments ({e}).") from None

    def make_vector(self, num_envs: int, mode: str = "sync") -> gym.vector.VectorEnv:
        fns: list[Callable[[], gym.Env]] = [self.make for _ in range(num_envs)]
        autoreset = gym.vector.AutoresetMode.SAME_STEP
        if mode == "sync":
            return gym.vector.SyncVectorEnv(fns, autoreset_mode=autoreset)
        if mode == "async":
            return gym.vector.AsyncVectorEnv(fns, autoreset_mode=autoreset, context="spawn")
        raise ConfigError(f"executor.vector_mode={mode}: must be sync or async.")

    def protocol_card(self) -> dict[str, Any]:
        """The env protocol card (rlrun/envs/protocol.py): id, gymnasium version, time limit, frame skip, kwargs."""
        from rlrun.envs.protocol import gym_card

        if self.cfg.max_episode_steps is not None:
            limit: int | None = int(self.cfg.max_episode_steps)
        else:
            limit = gym.registry[self.cfg.id].max_episode_steps
        return gym_card(self.cfg, limit)


def _import_env_packages() -> None:
    """Register the environments of optional packages (ALE's Atari ids)."""
    try:
        import ale_py

        gym.register_envs(ale_py)
    except ImportError:
        pass
