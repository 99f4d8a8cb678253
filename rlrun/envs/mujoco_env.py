"""gymnasium's MuJoCo continuous-control tasks (HalfCheetah, Hopper, Walker2d, Ant, Humanoid, Swimmer, ...) on the
``mujoco`` engine: ``rlrun env=mujoco env.id=Hopper-v5``.

The env copies are plain gymnasium envs (``GymEnvFactory``); this factory adds what a user of the group needs to
hear before anything starts: the engine is not importable (how to install it), the id is not one of gymnasium's
MuJoCo tasks (the close ones), and a protocol card that records the engine's version (scores of v4 and v5 tasks,
or of different engine versions, are not the same measure).

Observation normalisation and reward scaling, which the published MuJoCo results use, are algorithm keys
(``algo.normalize_obs``, ``algo.normalize_reward``; rlrun/components/normalizers.py), set by the presets in
conf/algo_env/*_mujoco.yaml, not wrappers of the env copies.
"""

from __future__ import annotations

import difflib
import logging
from typing import Any

import gymnasium as gym

from rlrun.envs.gym_env import GymEnvFactory
from rlrun.envs.protocol import versions
from rlrun.errors import ConfigError

log = logging.getLogger(__name__)
_SEEN_WARNINGS: set[str] = set()

INSTALL_HINT = "pip install 'mujoco>=3' (make install does: it is a dependency of rlrun)"


def mujoco_ids() -> list[str]:
    """gymnasium's registered MuJoCo task ids (every version), in registry order."""
    return [k for k, v in gym.registry.items() if "gymnasium.envs.mujoco" in str(v.entry_point)]


def _warning(message: str) -> None:
    if message not in _SEEN_WARNINGS:  # the same model-loading warning comes once per env copy
        _SEEN_WARNINGS.add(message)
        log.debug("mujoco: %s", message.strip())


def route_engine_warnings() -> None:
    """MuJoCo's compiler warnings (mujoco 4.0 + gymnasium 1.4: ``settotalmass`` is deprecated, harmless) go to
    the ``rlrun.envs.mujoco_env`` logger at debug level, once each, instead of a ``MUJOCO_LOG.TXT`` file that the
    engine otherwise appends to in the working directory of every process that makes an env copy."""
    import mujoco

    mujoco.set_mju_user_warning(_warning)


class MujocoEnvFactory(GymEnvFactory):
    """``env=mujoco``: a gymnasium MuJoCo task, checked for the engine and the id first."""

    def __init__(self, cfg: Any) -> None:
        try:
            import mujoco  # noqa: F401
        except ImportError as e:
            raise ConfigError(f"env=mujoco: the MuJoCo engine cannot be imported ({e}); {INSTALL_HINT}.") from None
        ids = mujoco_ids()
        if str(cfg.id) not in ids:
            close = difflib.get_close_matches(str(cfg.id), ids, n=5, cutoff=0.4)
            latest = sorted({i for i in ids if i.endswith("-v5")})
            hint = f"Close matches: {', '.join(close)}." if close else f"Tasks: {', '.join(latest)}."
            raise ConfigError(f"env.id={cfg.id}: not one of gymnasium's MuJoCo tasks. {hint}")
        route_engine_warnings()
        super().__init__(cfg)

    def make(self, evaluation: bool = False) -> gym.Env:
        route_engine_warnings()  # in every process that makes copies (Ray workers, async subprocesses)
        return super().make(evaluation)

    def protocol_card(self) -> dict[str, Any]:
        card = super().protocol_card()
        card["env_factory"] = "mujoco"
        card["versions"] = versions("gymnasium", "mujoco")
        return card
