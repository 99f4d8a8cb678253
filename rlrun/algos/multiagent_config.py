"""The config schema of multi-agent training (``algo=multiagent``, rlrun/algos/multiagent.py): several policies in
one environment, each trained by its own algorithm, and the mapping of the env's agents to them.

``env=pettingzoo`` selects ``algo=multiagent`` (one PPO policy shared by every agent); ``algo=<name>`` with a
multi-agent env trains one shared policy of that algorithm. A preset with two algorithms::

    policies:
      adversary: {algo: dqn, lr: 0.0005}
      good: {algo: ppo}
    mapping:
      "adversary_*": adversary
      "*": good

No heavy imports: the CLI loads every schema at start-up.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from rlrun.errors import ConfigError
from rlrun.schema import Declared, key

FROZEN_KEYS = ("checkpoint", "checkpoint_policy")
"""A policy entry's keys that load it, frozen, from a run's checkpoint (self-play against an earlier self):
``checkpoint: <run dir or checkpoint file>``; ``checkpoint_policy: <policy id in that run>`` (default: the same
id; ignored for a single-agent run's checkpoint)."""
UNTRAINED = ("random",)
"""Policy "algorithms" that act without learning: ``random`` draws uniformly from the agent's action space
(a baseline, or the opponent of a learner)."""


@dataclass
class MultiAgentConfig(Declared):
    """Policies by name and the mapping from agent ids to them (RLlib's ``policies`` / ``policy_mapping_fn``)."""

    key_prefix: ClassVar[str] = "algo"
    open_maps: ClassVar[tuple[str, ...]] = ("policies", "mapping")  # new keys from the command line, without +

    name: str = "multiagent"
    policies: dict[str, Any] = key(factory=lambda: {"shared": {"algo": "ppo"}})
    """Policy name -> its algorithm and keys: ``{algo: <name>, <key>: <value>, ...}``. ``algo`` is any single-agent
    algorithm of ``rlrun keys`` (``ppo``, ``dqn``, ``sac``, ``a2c``, ``trpo``, ...) or ``random`` (acts uniformly,
    not trained); the other keys are that algorithm's (``rlrun keys algo=ppo``), defaults as in ``algo=<name>``.
    ``train: false`` keeps a policy fixed (it acts, it does not learn); ``checkpoint: <run dir>`` (and
    ``checkpoint_policy: <id>``) loads it, frozen, from an earlier run: self-play against a past self. Default: one
    PPO policy, ``shared``."""
    mapping: dict[str, str] = key(factory=dict)
    """Agent id pattern (``fnmatch``: ``adversary_*``, ``player_1``, ``*``) -> policy name; the first pattern that
    matches an agent, in the order written, decides; an agent no pattern matches acts with the policy ``shared``
    (parameter sharing: with the default, every agent). On the command line:
    ``algo.mapping={adversary_*:adv,agent_*:good}``."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """The run's budget in env steps (agent steps); the YAML default is ${stop.env_steps}. A policy whose algorithm
    anneals its learning rate over ``total_env_steps`` gets its agents' share of it unless its entry sets one."""

    @classmethod
    def check_config(cls, node: dict[str, Any]) -> None:
        """Each policy's entry against its algorithm's schema (unknown keys with close matches, types, ranges):
        rlrun.config.validate calls this before anything starts."""
        from rlrun.config import check_node  # lazily: rlrun.config imports the schemas (an import cycle)
        from rlrun.registry import RegistryError, registry  # lazily: the schemas load before the registry

        policies = node.get("policies") or {}
        if not policies:
            raise ConfigError("algo.policies: empty; define at least one policy, e.g. algo.policies.shared.algo=ppo.")
        for name, entry in policies.items():
            check_policy_id(str(name))
            algo, _, keys = policy_entry(str(name), entry)
            if algo in UNTRAINED:
                continue
            if algo == cls.name:
                raise ConfigError(f"algo.policies.{name}.algo=multiagent: a policy's algorithm is a single-agent "
                                  f"one (ppo, dqn, sac, ...).")
            try:
                schema = registry.schema("algo", algo)
            except RegistryError as e:
                raise ConfigError(f"algo.policies.{name}.algo: {e}") from None
            check_node(schema, keys, prefix=f"algo.policies.{name}")
        for pattern, policy in (node.get("mapping") or {}).items():
            if str(policy) not in policies:
                raise ConfigError(f"algo.mapping: pattern {pattern} names policy {policy}, which algo.policies does "
                                  f"not define (defined: {', '.join(map(str, policies))}).")


DEFAULT_POLICY = "shared"
# A policy id names a directory of the run (export/<id>/) and a module of the plan (torch refuses '.' there).
_POLICY_ID = re.compile(r"[A-Za-z0-9_-]+")


def check_policy_id(name: str) -> None:
    """Refuse a policy id that is not a plain name (letters, digits, ``_``, ``-``): it becomes a path."""
    if not _POLICY_ID.fullmatch(name):
        safe = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "p"
        raise ConfigError(f"algo.policies: policy id {name!r} may hold only letters, digits, _ and - (it names a "
                          f"directory of the run, export/<id>/); rename it, e.g. {safe}.")


def policy_of(agent: str, mapping: dict[str, str]) -> str:
    """The policy ``mapping`` gives ``agent``: the first pattern (in order) that matches its id, else ``shared``."""
    for pattern, policy in mapping.items():
        if fnmatch.fnmatchcase(agent, str(pattern)):
            return str(policy)
    return DEFAULT_POLICY


def map_agents(agents: list[str], mapping: dict[str, str], policies: dict[str, Any]) -> dict[str, str]:
    """``agent -> policy`` for every agent, or a ConfigError naming the first agent left without a policy (or
    mapped to a policy that is not defined)."""
    out = {}
    for agent in agents:
        policy = policy_of(agent, mapping)
        if policy == DEFAULT_POLICY and policy not in policies:
            patterns = ", ".join(map(str, mapping)) or "none"
            raise ConfigError(f"algo.mapping: agent {agent} matches no pattern ({patterns}) and there is no policy "
                              f"{DEFAULT_POLICY} for the others, so it has no policy. Add a pattern for it, e.g. "
                              f"algo.mapping={{{agent}:{next(iter(policies), 'p')}}}.")
        if policy not in policies:
            raise ConfigError(f"algo.mapping: agent {agent} is mapped to policy {policy}, which algo.policies does not "
                              f"define (defined: {', '.join(policies) or 'none'}).")
        out[agent] = policy
    return out


def policy_entry(name: str, entry: Any) -> tuple[str, bool, dict[str, Any]]:
    """``(algo, trained, algorithm keys)`` of policy ``name``'s entry in ``algo.policies``."""
    if not isinstance(entry, dict) or "algo" not in entry:
        raise ConfigError(f"algo.policies.{name}: give the policy's algorithm, e.g. algo.policies.{name}.algo=ppo "
                          f"(a mapping with an 'algo' key and that algorithm's keys).")
    keys = {k: v for k, v in entry.items() if k not in ("algo", "train", *FROZEN_KEYS)}
    algo = str(entry["algo"])
    trained = bool(entry.get("train", True)) and algo not in UNTRAINED and entry.get("checkpoint") is None
    if algo in UNTRAINED and keys:
        raise ConfigError(f"algo.policies.{name}: algo={algo} takes no keys (got {', '.join(keys)}).")
    return algo, trained, keys


def shared_policy_config(algo_cfg: Any) -> MultiAgentConfig:
    """``algo=<name>`` with a multi-agent env: one policy, ``shared``, of that algorithm and config, for every
    agent (parameter sharing)."""
    keys = {k: v for k, v in vars(algo_cfg).items() if k != "name"}
    return MultiAgentConfig(policies={"shared": {"algo": algo_cfg.name, **keys}}, mapping={"*": "shared"},
                            total_env_steps=keys.get("total_env_steps"))
