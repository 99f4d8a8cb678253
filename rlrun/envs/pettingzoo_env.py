"""PettingZoo multi-agent environments (``env=pettingzoo env.id=mpe2.simple_spread_v3``): through PettingZoo's
parallel API where the module has one (every live agent acts at each step, ``env.step({agent: action})``), else
its AEC API (turn-based games: ``pettingzoo.classic.tictactoe_v3``, one agent acts at a time and its reward is what
it gathered since its previous turn; ``env.api`` records which).

Turn-based classic games give each agent a Dict observation ``{observation, action_mask}``: the policies see both,
and the actor-critic and Q-network components apply the mask (illegal actions get no probability and no greedy
choice: :func:`rlrun.ops.apply_action_mask`); the ``random`` policy draws among the legal actions.

``env.id`` names the env's module, as PettingZoo publishes them: ``mpe2.simple_spread_v3`` (the MPE tasks now live
in the ``mpe2`` package), ``pettingzoo.butterfly.pistonball_v6``, ``pettingzoo.sisl.multiwalker_v9``; a bare name
(``simple_spread_v3``) is looked up in ``mpe2`` and PettingZoo's families. The module's ``parallel_env(**kwargs)``
makes a copy (``env.kwargs``). The per-agent spaces come from the env (``observation_space(agent)``,
``action_space(agent)``) for every agent it may have (``possible_agents``): agents that are not alive at a step
simply do not act there (rlrun/execution/multiagent_sampler.py keeps one column of steps per agent).

The factory's ``spec`` is a :class:`MultiAgentSpec`; the multi-agent plan (rlrun/algos/multiagent.py) gives each
policy the :class:`~rlrun.envs.gym_env.EnvSpec` of the agents mapped to it.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any

from rlrun import spaces as sp
from rlrun.envs.gym_env import EnvSpec
from rlrun.envs.protocol import versions
from rlrun.errors import ConfigError

FAMILIES = ("mpe2", "pettingzoo.butterfly", "pettingzoo.classic", "pettingzoo.sisl", "pettingzoo.atari")
INSTALL_HINT = "pip install pettingzoo mpe2 (make install does: they are dependencies of rlrun)"


@dataclass(frozen=True)
class MultiAgentSpec:
    """What the multi-agent plan needs of an environment: its agents and each one's spaces."""

    id: str
    agents: tuple[str, ...]
    observation_spaces: dict[str, sp.Space]
    action_spaces: dict[str, sp.Space]
    frame_skip: int = 1

    def policy_spec(self, agents: list[str], where: str) -> EnvSpec:
        """The single-agent spec a policy acting for ``agents`` is built from: their spaces, which must be the same
        (a ConfigError naming the two agents that differ and ``where``, the policy)."""
        first = agents[0]
        for agent in agents[1:]:
            for kind, spaces in (("observation", self.observation_spaces), ("action", self.action_spaces)):
                if not sp.same(spaces[first], spaces[agent]):
                    raise ConfigError(f"{where}: agents {first} and {agent} have different {kind} spaces "
                                      f"({sp.describe(spaces[first])} vs {sp.describe(spaces[agent])}); one policy "
                                      f"needs one space. Map them to different policies in algo.mapping.")
        return EnvSpec(f"{self.id}:{first}" if len(agents) == 1 else self.id, self.observation_spaces[first],
                       self.action_spaces[first], self.frame_skip)


def import_env_module(env_id: str) -> Any:
    """The module of ``env.id``: a dotted path, or a bare name found in :data:`FAMILIES`; a ConfigError naming the
    close matches otherwise."""
    try:
        importlib.import_module("pettingzoo")
    except ImportError:
        raise ConfigError(f"env=pettingzoo: the pettingzoo package is not importable; {INSTALL_HINT}.") from None
    candidates = [env_id] if "." in env_id else [f"{family}.{env_id}" for family in FAMILIES]
    for name in candidates:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and not name.startswith(e.name):  # the module exists but lacks a dependency
                raise ConfigError(f"env.id={env_id}: importing {name} needs {e.name} ({e}); install PettingZoo's "
                                  f"extra for that family, e.g. pip install 'pettingzoo[butterfly]'.") from None
            continue
        if not hasattr(module, "parallel_env") and not hasattr(module, "env"):
            raise ConfigError(f"env.id={env_id}: module {name} has neither parallel_env() nor env(); give a "
                              f"PettingZoo env module such as mpe2.simple_spread_v3.")
        return module
    known = known_env_ids()
    close = difflib.get_close_matches(env_id, known, n=4, cutoff=0.5)
    hint = f" Close matches: {', '.join(close)}." if close else " E.g. mpe2.simple_spread_v3."
    raise ConfigError(f"env.id={env_id}: no such PettingZoo env module.{hint}")


def known_env_ids() -> list[str]:
    """The env modules of the installed families (``mpe2.simple_spread_v3``, ...), for close-match hints."""
    out = []
    for family in FAMILIES:
        try:
            package = importlib.import_module(family)
        except Exception:  # noqa: BLE001 - a family whose optional dependencies are missing
            continue
        out += [f"{family}.{m.name}" for m in pkgutil.iter_modules(package.__path__) if m.name[-3:-1] == "_v"]
    return out


class PettingZooEnvFactory:
    """Makes parallel-API copies of ``env.id`` (module docstring); ``multiagent`` tells the run to train with the
    multi-agent plan."""

    multiagent = True

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.module = import_env_module(str(cfg.id))
        self.api = "parallel" if hasattr(self.module, "parallel_env") else "aec"
        probe = self.make()
        agents = tuple(probe.possible_agents)
        self.spec = MultiAgentSpec(str(cfg.id), agents, {a: probe.observation_space(a) for a in agents},
                                   {a: probe.action_space(a) for a in agents}, int(cfg.frame_skip))
        probe.close()

    def __getstate__(self) -> dict[str, Any]:  # to a sampler's process (executor=ray): the module by its name
        return {k: v for k, v in self.__dict__.items() if k != "module"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.module = import_env_module(str(self.cfg.id))

    def make(self, evaluation: bool = False) -> Any:
        """One env copy, parallel or AEC (``api``; ``evaluation`` is accepted for the factories' common interface)."""
        make = self.module.parallel_env if self.api == "parallel" else self.module.env
        try:
            return make(**dict(self.cfg.kwargs or {}))
        except TypeError as e:
            raise ConfigError(f"env.kwargs: {self.cfg.id}.{make.__name__} does not accept these arguments "
                              f"({e}).") from None

    def protocol_card(self) -> dict[str, Any]:
        """The env protocol card: module, kwargs, agents and their spaces, package versions."""
        return {"env": str(self.cfg.id), "api": f"pettingzoo.{self.api}", "kwargs": dict(self.cfg.kwargs or {}),
                "agents": list(self.spec.agents),
                "observation_spaces": {a: sp.describe(s) for a, s in self.spec.observation_spaces.items()},
                "action_spaces": {a: sp.describe(s) for a, s in self.spec.action_spaces.items()},
                "frame_skip": self.spec.frame_skip, "versions": versions("pettingzoo", "mpe2", "gymnasium")}
