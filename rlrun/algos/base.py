"""What every algorithm's plan provides to the run loop."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.algos.multiagent_config import shared_policy_config
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError, RlrunError
from rlrun.metric_names import GRAD_NORM, GRADIENT_STEPS, LOSS_TOTAL, REPLAY_SIZE
from rlrun.registry import registry

LEARNER_METRIC_NAMES = {"loss": LOSS_TOTAL, "grad_norm": GRAD_NORM}
"""The names an update's generic info keys are reported under; an update's other keys (``loss/policy``, ...) are
reported as they are."""


def learner_metrics(info: dict[str, Any]) -> dict[str, float]:
    """An update's info as metrics: :data:`LEARNER_METRIC_NAMES` applied, values as floats."""
    return {LEARNER_METRIC_NAMES.get(k, k): float(v) for k, v in info.items()}


@dataclass(frozen=True)
class ActionSpaces:
    """The action spaces an algorithm takes (its plan's ``takes_actions``), and what a user whose env has another
    should do instead."""

    needs: str
    """What the algorithm needs, as the message says it: ``a Discrete action space``."""
    accepts: Callable[[sp.Space], bool]
    fix: str
    """The way out: another env, or an algorithm that takes the env's actions."""


def _float_box(space: sp.Space) -> bool:
    return isinstance(space, sp.Box) and np.issubdtype(np.dtype(space.dtype), np.floating)


DISCRETE = ActionSpaces("a Discrete action space", lambda s: isinstance(s, sp.Discrete),
                        "Choose an env with discrete actions (e.g. env=cartpole), or an algorithm for continuous "
                        "actions (algo=sac, algo=ppo).")
CONTINUOUS = ActionSpaces("a continuous (float Box) action space", _float_box,
                          "Choose an env with continuous actions (e.g. env=pendulum), or a discrete-action algorithm "
                          "(algo=dqn, algo=ppo).")
DISCRETE_OR_BOX = ActionSpaces("a Discrete or Box action space", lambda s: isinstance(s, (sp.Discrete, sp.Box)),
                               "Wrap the env so that its actions are one Discrete or Box space.")


def check_action_space(algo: str, takes: ActionSpaces, space: sp.Space, env_id: str | None = None) -> None:
    """Refuse an action space ``algo`` does not take, in one line (the CLI exits 2 on a ``ConfigError``) naming the
    algorithm, the env (``env_id``, where the caller knows it) and its space, and the fix. Plans check the env spec
    before building their agent (:meth:`Algorithm.check_env_actions`); an agent built straight from spaces checks
    them in its build."""
    if takes.accepts(space):
        return
    env = f"env {env_id}" if env_id else "the env"
    raise ConfigError(f"algo={algo} needs {takes.needs}, but {env} has {sp.describe(space)}. {takes.fix}")


@dataclass
class IterationResult:
    """What one ``training_step()`` did: env steps sampled, episodes finished, and scalar metrics."""

    env_steps: int = 0
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    game_scores: list[float] = field(default_factory=list)
    """Raw scores of the whole games that ended (Atari: unclipped, all lives; ``SampleBatch.game_scores``); the run
    loop logs them as ``episode/game_score_mean``. Empty for envs without games (CartPole)."""
    game_lengths: list[int] = field(default_factory=list)
    """Agent steps of those games, in the same order."""

    def add_batch(self, batch: Any) -> None:
        """Count a ``SampleBatch`` the plan consumed: its env steps, finished episodes and finished games."""
        self.env_steps += batch.env_steps
        self.episode_returns += batch.episode_returns
        self.episode_lengths += batch.episode_lengths
        self.game_scores += batch.game_scores
        self.game_lengths += batch.game_lengths


class Algorithm(ABC):
    """Base of a plan: built from its config, the env spec, an executor and a device; one ``training_step`` at a
    time. ``state_dict``/``load_state_dict`` cover everything a checkpoint needs to continue. ``agent_class``: the
    class of its root component (whose declared capabilities rlrun reads before building anything)."""

    agent_class: ClassVar[type | None] = None
    takes_actions: ClassVar[ActionSpaces | None] = None
    """The action spaces the algorithm takes (:data:`DISCRETE`, :data:`CONTINUOUS`, :data:`DISCRETE_OR_BOX`); None:
    its agent checks what it builds from (a plan of plans)."""

    def __init__(self, cfg: Any, spec: EnvSpec, executor: Any, device: torch.device, seed: int) -> None:
        self.cfg, self.spec, self.executor, self.device, self.seed = cfg, spec, executor, device, seed

    def stop_due(self) -> bool:
        """True when the run should stop now (its wall time is up, or Ctrl-C): a plan that owes many gradient steps
        in one ``training_step`` checks it between them and keeps the rest for later (the run loop sets
        ``stop_check``; a plan outside a run never stops early)."""
        check = getattr(self, "stop_check", None)
        return bool(check()) if check is not None else False

    @classmethod
    def check_env_actions(cls, cfg: Any, spec: EnvSpec) -> None:
        """Refuse an env whose action space this algorithm does not take (``takes_actions``), before ``make_agent``
        builds anything."""
        if cls.takes_actions is not None:
            check_action_space(cfg.name, cls.takes_actions, spec.action_space, spec.id)

    @classmethod
    def make_agent(cls, cfg: Any, spec: EnvSpec, seed: int) -> Any:
        """The algorithm's root component, built from the env spec (``rlrun graph`` prints it); None if the
        algorithm is not built from components."""
        return None

    @abstractmethod
    def training_step(self) -> IterationResult:
        """One iteration of the plan: sample, store, learn; what it did."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything a checkpoint needs to continue exactly."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""

    def acting_policy(self) -> Any:
        """The component that chooses actions, ``get_actions(obs, explore)``: what ``rlrun eval`` runs without
        exploration and ``rlrun export`` exports. Default: the ``agent`` attribute, when the plan has one."""
        agent = getattr(self, "agent", None)
        if agent is None or not callable(getattr(agent, "get_actions", None)):
            raise RlrunError(f"{type(self).__name__} has no acting policy (an 'agent' with get_actions(obs, explore)); "
                             f"define acting_policy() to evaluate or export it.")
        return agent

    def acting_copy(self, weights: Any) -> Any:
        """A fresh agent (``make_agent``) given ``weights``: the acting policy of a plan whose own agent may be
        inside an update on a learner thread."""
        agent = self.make_agent(self.cfg, self.spec, self.seed).to(self.device)
        agent.set_weights(weights)
        return agent

    def stop(self) -> None:
        self.executor.stop()


class ReplayPlan(Algorithm):
    """The plan of the replay learners (DQN and its siblings; SAC, TD3 and DDPG): sample ``rollout_steps`` agent
    steps of every env copy, store them in the agent's replay, and once ``learning_starts`` env steps are stored take
    the gradient steps the replay ratio owes (:meth:`updates_owed`; a fraction carries over to the next call).

    A subclass names its ``agent_class`` (built from the config, a seed and the env's spaces; ``update()`` takes one
    gradient step and returns its info, ``memory`` is its replay), :meth:`store` where the agent's storing differs,
    and :meth:`report` for its metrics. Remote workers act with a copy built from :meth:`acting_config` (no replay
    storage); weights reach them by ``sync_weights``."""

    @classmethod
    def make_agent(cls, cfg: Any, spec: EnvSpec, seed: int) -> Any:
        cls.check_env_actions(cfg, spec)
        return cls.agent_class(cfg, seed).build(obs=spec.observation_space, actions=spec.action_space)

    @classmethod
    def acting_config(cls, cfg: Any) -> Any:
        """The config of a worker's acting copy: the learner's, with a replay of one item."""
        return replace(cfg, buffer_size=1)

    def __init__(self, cfg: Any, spec: EnvSpec, executor: Any, device: torch.device, seed: int) -> None:
        super().__init__(cfg, spec, executor, device, seed)
        self.agent = self.make_agent(cfg, spec, seed).to(device)
        self.policy_factory = functools.partial(type(self).make_agent, self.acting_config(cfg), spec)
        self.workers = executor.worker_set(self.agent, device, policy_factory=self.policy_factory)
        self.timer = executor.timer
        self.env_steps = 0
        self.gradient_steps = 0
        self.update_budget = 0.0  # gradient steps owed (fractional carry-over)

    def updates_owed(self, env_steps: int) -> float:
        """Gradient steps ``env_steps`` new env steps owe at the replay ratio: one per ``train_every``."""
        return env_steps / self.cfg.train_every

    def store(self, batch: Any) -> None:
        """Put a worker's ``SampleBatch`` into the agent's replay."""
        self.agent.observe(*batch.transitions())

    def report(self, result: IterationResult, infos: list[dict[str, Any]]) -> None:
        """Put the metrics of this step's updates (``infos``, one per gradient step) into ``result``."""

    def training_step(self) -> IterationResult:
        result = IterationResult()
        for batch in self.workers.sample(self.cfg.rollout_steps):
            with self.timer("replay"):
                self.store(batch)
            result.add_batch(batch)
        self.env_steps += result.env_steps
        if self.env_steps < self.cfg.learning_starts:
            return result
        self.update_budget += self.updates_owed(result.env_steps)
        infos = []
        with self.timer("learn"):
            while self.update_budget >= 1.0:
                infos.append(self.agent.update())
                self.update_budget -= 1.0
        self.gradient_steps += len(infos)
        self.report(result, infos)
        result.metrics[REPLAY_SIZE] = self.agent.memory.size()
        result.metrics[GRADIENT_STEPS] = self.gradient_steps
        return result

    def state_dict(self) -> dict[str, Any]:
        return {"agent": self.agent.state_dict(), "env_steps": self.env_steps,
                "gradient_steps": self.gradient_steps, "update_budget": self.update_budget}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.env_steps = int(state["env_steps"])
        self.gradient_steps = int(state["gradient_steps"])
        self.update_budget = float(state["update_budget"])


class ThreadedLearner:
    """What a plan with an optional learner thread (``self.learner``: a ``LearnerThread`` or None) shares: the
    weights it last published for workers (``self.published``), its state taken and restored between two updates,
    a consistent acting copy, and the thread stopped with the plan. The plan defines ``_state()`` / ``_load()``;
    ``_synced_after_load()`` sends the restored weights to the workers in sync mode."""

    learner: Any = None
    last_update_metrics: dict[str, float] = {}  # replaced, never changed in place (see _report_latest_update)

    def _publish(self) -> None:
        self.published = self.agent.get_weights()

    def _report_latest_update(self, result: Any, finished: dict[str, float] | None) -> None:
        """Thread mode: put the metrics of the learner's latest update (loss terms, policy lag) into ``result``.
        ``finished``: those of the updates that finished during this training step, or None when none did; the
        last ones given are reported with every step until newer ones replace them, so a report (which falls on
        whichever step its interval ends at) never lacks them once the learner has updated."""
        if finished is not None:
            self.last_update_metrics = dict(finished)
        result.metrics.update(self.last_update_metrics)

    def state_dict(self) -> dict[str, Any]:
        if self.learner is None:
            return self._state()
        with self.learner.paused():  # between two updates; batches still queued are not state
            return self._state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.learner is None:
            self._load(state)
            self._synced_after_load()
            return
        with self.learner.paused():
            self._load(state)
        self._publish()
        self.workers.sync_weights(self.published)

    def _synced_after_load(self) -> None:
        self.workers.sync_weights()  # the restored weights, before the next rollout of a remote worker

    def acting_policy(self) -> Any:
        """The learner's agent; with a learner thread a copy with the last published weights (the agent may be
        inside an update on its thread)."""
        return self.agent if self.learner is None else self.acting_copy(self.published)

    def stop(self) -> None:
        if self.learner is not None:
            self.learner.stop()
        super().stop()


def build_plan(algo_cfg: Any, env_factory: Any, executor: Any, device: torch.device, seed: int,
               data: Any = None) -> Algorithm:
    """The plan ``algo_cfg`` (a schema object) names, on ``env_factory``'s env: a single-agent algorithm on a
    multi-agent env (``env=pettingzoo algo=ppo``) becomes one policy shared by every agent (``shared_policy_config``).
    The run, ``rlrun eval`` and ``rlrun export`` build their algorithm here, then load the frozen policies'
    checkpoints (``rlrun.checkpoint.load_frozen_policies``). Only the named algorithm's module is imported.
    ``data``: the dataset an offline plan learns from (``data=...``; an online plan takes none)."""
    if getattr(env_factory, "multiagent", False) and algo_cfg.name != "multiagent":
        algo_cfg = shared_policy_config(algo_cfg)
    plan = registry.get("algo", algo_cfg.name)
    if data is None:
        return plan(algo_cfg, env_factory.spec, executor, device, seed)
    if not getattr(plan, "offline", False):
        raise ConfigError(f"data=...: algo={algo_cfg.name} learns online from the env, not from a dataset; choose "
                          f"an offline algorithm (algo=bc, algo=iql, algo=cql) or drop data=.")
    return plan(algo_cfg, env_factory.spec, executor, device, seed, data=data)
