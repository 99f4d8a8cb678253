"""MinAtar's five games (Young & Tian 2019): ``rlrun env=minatar env.id=Breakout`` (also Asterix, Freeway, Seaquest,
SpaceInvaders).

MinAtar registers its gymnasium ids (``MinAtar/<Game>-v0``: all 6 actions; ``-v1``: the game's minimal set) only
when ``minatar.gym.register_envs()`` is called, which plain gymnasium never does: this factory calls it before it
makes a copy, in every process that makes one (the learner, Ray workers, async subprocesses), as the ALE's ids are
registered in :mod:`rlrun.envs.gym_env`.

An observation is ``[C, 10, 10]`` bool: MinAtar's ``10x10xC`` object channels (C = 4 to 10 by game) turned
channel-first, the layout rlrun's image torsos take. ``algo.network=auto`` gives such a 0/1 image the MinAtar
paper's small CNN (:class:`rlrun.components.networks.MinAtarCNN`). One agent step is one frame (no frame skip);
sticky actions (0.1) and difficulty ramping are MinAtar's own settings (``env.sticky_action_prob``,
``env.difficulty_ramping``). ``reset(seed=...)`` seeds the game's own generator (the spawns and sticky actions).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlrun.envs.gym_env import EnvSpec, GymEnvFactory
from rlrun.envs.protocol import gym_card, versions
from rlrun.errors import ConfigError

INSTALL_HINT = "pip install 'minatar>=1.0.15' (make install does: it is a dependency of rlrun)"


def register_minatar() -> None:
    """Register MinAtar's gymnasium ids once per process (``minatar.gym.register_envs``); ConfigError with how
    to install it where the package is missing."""
    if "MinAtar/Breakout-v0" in gym.registry:
        return
    try:
        from minatar.gym import register_envs
    except ImportError as e:
        raise ConfigError(f"env=minatar: the MinAtar package cannot be imported ({e}); {INSTALL_HINT}.") from None
    register_envs()


class ChannelsFirst(gym.ObservationWrapper):
    """``[H, W, C]`` -> ``[C, H, W]``, dtype kept (a contiguous copy: 10x10xC bools are a few hundred bytes)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        h, w, c = space.shape
        self.observation_space = gym.spaces.Box(np.transpose(space.low, (2, 0, 1)),
                                                np.transpose(space.high, (2, 0, 1)), (c, h, w), space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(observation, (2, 0, 1)))


class MinAtarEnvFactory(GymEnvFactory):
    """``env=minatar``: env copies of ``MinAtar/<env.id>-v0`` (or -v1), channel-first."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        register_minatar()
        self.registered_id = f"MinAtar/{cfg.id}-v{1 if cfg.minimal_action_set else 0}"
        if self.registered_id not in gym.registry:  # the schema's choices are MinAtar's games: a newer package?
            raise ConfigError(f"env.id={cfg.id}: MinAtar registers no {self.registered_id}.")
        self.vectorization = "copies"  # MinAtar has no batched vector env
        self.batched = False
        probe = self.make()
        self.spec = EnvSpec(str(cfg.id), probe.observation_space, probe.action_space, 1)
        probe.close()

    def make(self, evaluation: bool = False) -> gym.Env:
        """One env copy (the same for evaluation: MinAtar has no training-only wrappers)."""
        register_minatar()  # in this process, which may not be the one that built the factory
        kwargs = {"sticky_action_prob": float(self.cfg.sticky_action_prob),
                  "difficulty_ramping": bool(self.cfg.difficulty_ramping), **dict(self.cfg.kwargs or {})}
        if self.cfg.max_episode_steps is not None:
            kwargs["max_episode_steps"] = int(self.cfg.max_episode_steps)
        try:
            # by its spec: gymnasium would call the -v0 id (all actions) "out of date" beside -v1 (the minimal set)
            env = gym.make(gym.spec(self.registered_id), **kwargs)
        except TypeError as e:
            raise ConfigError(f"env.kwargs: {self.registered_id} does not accept these arguments ({e}).") from None
        return ChannelsFirst(env)

    def protocol_card(self) -> dict[str, Any]:
        limit = None if self.cfg.max_episode_steps is None else int(self.cfg.max_episode_steps)
        card = gym_card(self.cfg, limit, self.registered_id, "copies")
        card.update(env_factory="minatar", versions=versions("gymnasium", "minatar"),
                    gym_id=self.registered_id, observation="[C, 10, 10] bool, channel-first",
                    sticky_action_prob=float(self.cfg.sticky_action_prob),
                    difficulty_ramping=bool(self.cfg.difficulty_ramping),
                    minimal_action_set=bool(self.cfg.minimal_action_set))
        return card
