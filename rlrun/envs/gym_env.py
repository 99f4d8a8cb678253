"""Any registered gymnasium environment, single or vectorised (one worker's env copies)."""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from rlrun import spaces as sp
from rlrun.envs import registered  # noqa: F401 - rlrun's own ids (CartPoleNoVel-v1, ...) in every process
from rlrun.envs.action_masks import InfoMaskToObservation, info_has_mask
from rlrun.envs.protocol import gym_card
from rlrun.envs.vector_entry_point import adapter_for, can_adapt, make_same_step
from rlrun.errors import ConfigError, one_line

# gymnasium's optional dependencies that an rlrun extra of the same name installs (pyproject.toml)
OPTIONAL_EXTRAS = ("box2d",)


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

    ``cfg.vectorization``: copies (default: one env object per copy in gymnasium's Sync/AsyncVectorEnv) |
    vector_entry_point (the id's own batched vector env, adapted to SAME_STEP autoreset:
    rlrun/envs/vector_entry_point.py; refused here, before anything starts, for an id that has none) | auto (the
    batched env where the id has one rlrun adapts and the vector mode keeps the copies in the worker's process;
    copies otherwise). The choices are declared and checked with the schema (``rlrun.config.GymEnvConfig``).
    """

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.registered_id = registered_id(str(cfg.id))
        self.vectorization = str(getattr(cfg, "vectorization", None) or "copies")
        if self.vectorization == "vector_entry_point":
            adapter_for(self.registered_id)  # a ConfigError for an id without one
        self.batched = self.vectorization == "vector_entry_point" or (
            self.vectorization == "auto" and can_adapt(self.registered_id))
        self.info_mask = False
        probe = self.make()
        if info_has_mask(probe):  # the mask rides in the observation from here on (rlrun/envs/action_masks.py)
            self.info_mask = True
            probe.close()
            probe = self.make()
        self.spec = EnvSpec(cfg.id, probe.observation_space, probe.action_space, int(cfg.frame_skip))
        probe.close()
        if self.batched:
            self.make_vector(1).close()  # a ConfigError for kwargs its constructor does not take

    def vectorization_for(self, mode: str) -> str:
        """What steps a worker's copies in vector mode ``mode``: vector_entry_point (the id's batched env) or
        copies."""
        if not self.batched:
            return "copies"
        if self.vectorization == "vector_entry_point":
            return "vector_entry_point"
        from rlrun.config import VECTOR_ENTRY_MODES  # loads Hydra: only where auto found a batched env

        return "vector_entry_point" if mode in VECTOR_ENTRY_MODES else "copies"

    def make(self, evaluation: bool = False) -> gym.Env:
        """One env copy. ``evaluation`` is accepted for a uniform factory interface (the Atari factory drops its
        training-only wrappers for it); a plain gymnasium env is the same either way. An env that gives its action
        mask in ``info`` has it moved into the observation (``{"observation", "action_mask"}``)."""
        env = self._make()
        return InfoMaskToObservation(env) if getattr(self, "info_mask", False) else env

    def _make(self) -> gym.Env:
        kwargs = dict(self.cfg.kwargs or {})
        if self.cfg.max_episode_steps is not None:
            kwargs["max_episode_steps"] = int(self.cfg.max_episode_steps)
        try:
            return gym.make(self.cfg.id, **kwargs)
        except TypeError as e:
            raise ConfigError(f"env.kwargs: {self.cfg.id} does not accept these arguments ({e}).") from None
        except gym.error.DependencyNotInstalled as e:  # an optional package of gymnasium's (Box2D, MuJoCo, ...)
            extra = next((f" rlrun's extra installs it: pip install 'rlrun[{name}]'." for name in OPTIONAL_EXTRAS
                          if name in str(e).lower()), "")
            raise ConfigError(f"env.id={self.cfg.id}: {one_line(e, limit=400)}{extra}") from None

    def make_vector(self, num_envs: int, mode: str = "sync") -> gym.vector.VectorEnv:
        """``num_envs`` copies stepped together with SAME_STEP autoreset; ``mode``: sync (in this process) | async
        (a subprocess per copy; not with ``env.vectorization=vector_entry_point``)."""
        if self.vectorization == "vector_entry_point":  # chosen, not auto's choice: the mode must suit it
            from rlrun.config import check_vectorization  # loads Hydra: only where this option is chosen

            check_vectorization(self.vectorization, mode)
        if self.vectorization_for(mode) == "vector_entry_point":
            kwargs = dict(self.cfg.kwargs or {})
            if self.cfg.max_episode_steps is not None:
                kwargs["max_episode_steps"] = int(self.cfg.max_episode_steps)
            return make_same_step(str(self.cfg.id), self.registered_id, num_envs, kwargs)
        fns: list[Callable[[], gym.Env]] = [self.make for _ in range(num_envs)]
        autoreset = gym.vector.AutoresetMode.SAME_STEP
        if mode == "sync":
            return gym.vector.SyncVectorEnv(fns, autoreset_mode=autoreset)
        if mode == "async":
            return gym.vector.AsyncVectorEnv(fns, autoreset_mode=autoreset, context="spawn")
        raise ConfigError(f"executor.vector_mode={mode}: must be sync or async.")

    def protocol_card(self) -> dict[str, Any]:
        """The env protocol card (rlrun/envs/protocol.py): id, gymnasium version, time limit, frame skip, kwargs."""
        if self.cfg.max_episode_steps is not None:
            limit: int | None = int(self.cfg.max_episode_steps)
        else:
            limit = gym.registry[self.registered_id].max_episode_steps
        return gym_card(self.cfg, limit, self.registered_id, self.vectorization_for("sync"))


def registered_id(env_id: str) -> str:
    """The registry id of ``env_id`` once it is known to gymnasium, or a ConfigError naming close matches.

    ``module.path:EnvId-v0`` (gymnasium's form for an env a user wrote) imports ``module.path`` first, which
    registers its envs, and gives ``EnvId-v0``; ``gym.make`` accepts the whole string (it imports the module in
    every process that makes a copy, Ray workers included). A plain id outside the registry gets the optional
    packages' ids (ALE) registered before it is refused.
    """
    name = env_id
    if ":" in env_id:
        module, _, name = env_id.partition(":")
        if not module or not name or ":" in name:
            raise ConfigError(f"env.id={env_id}: write a user env as module.path:EnvId-v0 (one colon).")
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError(f"env.id={env_id}: cannot import module {module} ({e}); put it on PYTHONPATH or "
                              f"install its package.") from None
        except Exception as e:  # the user's module failed while it ran
            raise ConfigError(f"env.id={env_id}: importing module {module} failed: {type(e).__name__}: {e}") from None
        if name not in gym.registry:
            raise ConfigError(f"env.id={env_id}: module {module} was imported but registers no env {name} "
                              f"(gymnasium.register(id='{name}', entry_point=...) in the module).")
        return name
    if name not in gym.registry:
        _import_env_packages()
    if name not in gym.registry:
        close = difflib.get_close_matches(name, list(gym.registry), n=5, cutoff=0.5)
        hint = f" Close matches: {', '.join(close)}." if close else ""
        raise ConfigError(f"env.id={name}: not a registered gymnasium environment.{hint} An env of your own: "
                          f"env.id=my_package.module:MyEnv-v0.")
    return name


def _import_env_packages() -> None:
    """Register the environments of optional packages (ALE's Atari ids)."""
    try:
        import ale_py

        gym.register_envs(ale_py)
    except ImportError:
        pass
