"""The shared base of the actor-critic algorithms that learn from the rollouts their workers just collected: the
PPO family (PPO, A2C, TRPO: :class:`OnPolicyAgent`, :class:`OnPolicyPlan`) and the IMPALA family (IMPALA, APPO:
on-policy up to the actors' lag, which V-trace corrects; they share :class:`ActorCriticPlan` and the helpers).

This is a base the algorithms build on, not an algorithm: no ``rlrun.algos.<name>`` imports another's module for
these. The network is :class:`rlrun.components.actor_critic.ActorCritic`, the advantage estimator
:func:`rlrun.ops.truncation_aware_gae`.

The rollout a plan hands its agent is :class:`rlrun.execution.rollout.Rollout`. Read top to bottom: what an
actor-critic agent is built with (``build_actor_critic``, ``clip_to_bounds``, ``make_reward_scaler``,
``rmsprop_or_adam``), the agent base of the PPO family (acting, observing, advantages, the learning-rate schedule,
the optimizer's state, weights; a subclass adds its optimizers and its ``update``), then the plans.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable

import torch

from rlrun import spaces as sp
from rlrun.algos.base import DISCRETE_OR_BOX, Algorithm, IterationResult, check_action_space, learner_metrics
from rlrun.components.acting_state import ActingState
from rlrun.components.actor_critic import ActorCritic
from rlrun.components.base import Component, api
from rlrun.components.distributions import make_distribution
from rlrun.components.normalizers import RewardScaler
from rlrun.components.optimizers.adam import Adam
from rlrun.components.optimizers.lr_schedule import LinearDecay
from rlrun.components.recurrent_actor_critic import (
    RecurrentActorCritic,
    State,
    add_time,
    drop_time,
    sequence_starts,
    value_after_step,
)
from rlrun.envs.gym_env import EnvSpec
from rlrun.execution.rollout import Rollout
from rlrun.metric_names import GRADIENT_STEPS, UPDATES
from rlrun.ops import flatten_time, map_nest, truncation_aware_gae

# ---------------------------------------------------------------------------------------------------- building


def build_actor_critic(agent: Component, obs: sp.Space, actions: sp.Space) -> None:
    """The build of an actor-critic agent (PPO, A2C, IMPALA, APPO) with ``agent.network``: Discrete or Box actions
    only, the network built from the spaces, and for Box actions the bounds samples are clipped to for the env (the
    learner uses the raw sample)."""
    check_action_space(agent.cfg.name, DISCRETE_OR_BOX, actions)
    agent.action_space = actions
    agent.continuous = isinstance(actions, sp.Box)
    agent.build_child(agent.network, obs=obs, actions=actions)
    if agent.continuous:
        agent.register_buffer("action_low", torch.as_tensor(actions.low, dtype=torch.float32))
        agent.register_buffer("action_high", torch.as_tensor(actions.high, dtype=torch.float32))
    agent.output_spaces["get_actions"] = actions


def clip_to_bounds(agent: Component, actions: torch.Tensor) -> torch.Tensor:
    """Box actions clipped to the bounds :func:`build_actor_critic` registered; Discrete ones as they are."""
    if not agent.continuous:
        return actions
    return torch.maximum(torch.minimum(actions, agent.action_high), agent.action_low)


def make_reward_scaler(cfg: Any) -> RewardScaler | None:
    """The agent's reward scaler when ``algo.normalize_reward`` (discounted with ``algo.gamma``), else None."""
    if not getattr(cfg, "normalize_reward", False):
        return None
    return RewardScaler(cfg.gamma, cfg.reward_clip, name="reward_scaler")


def rmsprop_or_adam(cfg: Any, params: Any, **rmsprop_kwargs: Any) -> torch.optim.Optimizer:
    """The ``torch.optim`` optimizer ``algo.optimizer`` names over ``params``: RMSProp (``algo.rmsprop_alpha``,
    ``algo.optimizer_eps`` and ``rmsprop_kwargs``) or Adam (``algo.optimizer_eps``), at ``algo.lr``; A2C's and
    IMPALA's optimizer."""
    # the schemas declare the choices (rmsprop | adam)
    if cfg.optimizer == "rmsprop":
        return torch.optim.RMSprop(params, lr=cfg.lr, alpha=cfg.rmsprop_alpha, eps=cfg.optimizer_eps,
                                   **rmsprop_kwargs)
    return Adam(params, lr=cfg.lr, eps=cfg.optimizer_eps)


def policy_factory(algo_cls: Any, cfg: Any, spec: EnvSpec) -> Callable[[int], Component]:
    """A picklable ``worker_index -> acting policy`` for executors whose workers build their own copy (Ray): the
    algorithm's agent built from ``cfg`` and ``spec`` (seeded by the worker index); weights arrive by
    ``sync_weights``."""
    return functools.partial(algo_cls.make_worker_policy, cfg, spec)


# ---------------------------------------------------------------------------------------------------- agent


class OnPolicyAgent(Component):
    """What the agents of the PPO family (PPO, A2C, TRPO) share: the actor-critic ``network``
    (:class:`~rlrun.components.actor_critic.ActorCritic`), an optional ``reward_scaler``, acting (get_actions, with
    the log-probability the learner needs), observing (collect a rollout step by step from an application's loop),
    truncation-aware GAE advantages under the current weights, the linear learning-rate schedule, and weights.

    A subclass makes its optimizer(s) in :meth:`_make_optimizers` (called at the end of the build, once the
    parameters exist), names the ``torch.optim`` optimizer the schedule drives in :meth:`torch_optimizer` (by
    default ``self.optimizer``; its state is saved with the agent's), and defines the ``update`` API; it may replace
    the network (:meth:`_make_network`) and the build (:meth:`_build`: by default :func:`build_actor_critic`).
    ``generator`` draws the minibatches of an update that takes several (its state is saved too).

    With ``algo.recurrent=lstm|gru`` (PPO, A2C) the network is a
    :class:`~rlrun.components.recurrent_actor_critic.RecurrentActorCritic`: acting keeps a state per env copy
    (:class:`~rlrun.components.acting_state.ActingState`, zeroed by the ``reset_episodes`` worker hook) and records
    it before every step (extras ``state_0``, ``state_1``, ...); the learner re-unrolls each env copy's sequence from
    the state recorded at the rollout's first step (:meth:`unroll_rollout`).
    """

    learns_from = "observe"

    def __init__(self, cfg: Any, seed: int = 0, name: str = "on_policy_agent") -> None:
        super().__init__(name)
        self.cfg = cfg
        self.network = self._make_network(cfg)
        self.reward_scaler = make_reward_scaler(cfg)
        self.seed = seed
        self.generator = torch.Generator().manual_seed(int(seed))
        self.update_strategy: Any = None
        """The device strategy's update (``device=replicas``, ``device.precision``: a
        ``rlrun.devices.replicas.ReplicatedUpdate``, set by rlrun.devices on an agent that ``routes_updates``): its
        gradient steps run through it; None: :func:`rlrun.components.optimizers.optimizer_step`."""
        self.register_buffer("env_steps", torch.zeros((), dtype=torch.int64))  # env steps trained on (LR schedule)
        self._steps: list[dict[str, Any]] = []  # observe()'d time steps not yet used by update()
        self.lr_schedule = LinearDecay(cfg.lr, cfg.anneal_lr, cfg.total_env_steps, name)
        self._acting = ActingState()  # the recurrent state per env copy while acting (recurrent only)

    @property
    def recurrent(self) -> bool:
        """The network has a recurrent core (``algo.recurrent=lstm|gru``; TRPO's schema has no such key)."""
        return getattr(self.cfg, "recurrent", "none") != "none"

    def _make_network(self, cfg: Any) -> ActorCritic | RecurrentActorCritic:
        """The actor-critic network from ``algo.network``, ``hidden_sizes``, ``activation``, ``shared_torso``,
        ``orthogonal_init``, ``init_log_std``, ``normalize_obs`` and ``obs_clip``; with ``algo.recurrent`` a
        recurrent one (``recurrent_size`` units)."""
        if self.recurrent:
            return RecurrentActorCritic(cfg.network, list(cfg.hidden_sizes), cfg.activation, cfg.recurrent,
                                        cfg.recurrent_size, cfg.shared_torso, cfg.orthogonal_init, cfg.init_log_std,
                                        cfg.normalize_obs, cfg.obs_clip, name="network", action_mask=cfg.action_mask)
        return ActorCritic(cfg.network, list(cfg.hidden_sizes), cfg.activation, cfg.shared_torso,
                           cfg.orthogonal_init, cfg.init_log_std, cfg.normalize_obs, cfg.obs_clip, name="network",
                           action_mask=cfg.action_mask)

    def _make_optimizers(self, cfg: Any, seed: int) -> None:
        """Subclasses: make the optimizer(s) over the built network's parameters (``self.optimizer`` by default)."""
        raise NotImplementedError

    def torch_optimizer(self) -> torch.optim.Optimizer:
        """The ``torch.optim`` optimizer whose learning rate :meth:`set_learning_rate` sets and whose state is saved
        with the agent's."""
        return self.optimizer

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        build_actor_critic(self, obs, actions)
        if self.reward_scaler is not None:
            self.build_child(self.reward_scaler)
        self._make_optimizers(self.cfg, self.seed)

    def get_extra_state(self) -> Any:
        return {"optimizer": self.torch_optimizer().state_dict(), "generator": self.generator.get_state()}

    def set_extra_state(self, state: Any) -> None:
        # A deep copy: torch's Optimizer.load_state_dict keeps same-device tensors as they are, so loading another
        # agent's live state (in memory, not from a file) would share its moment tensors.
        self.torch_optimizer().load_state_dict(copy.deepcopy(state["optimizer"]))
        self.generator.set_state(state["generator"])

    # ------------------------------------------------------------------ acting

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> Any:
        """``explore=False``: the mode of the policy (clipped to a Box's bounds). ``explore=True``: a sample, as
        ``(actions, {"log_prob": [B]})`` (plus ``"raw_action"``, the unclipped sample, for Box actions, and with a
        recurrent core the state before the step, ``state_0``, ``state_1``, ... ``[B, H]``); a rollout worker
        records these extras per step. With a recurrent core both modes advance the per-copy state."""
        state = None
        if self.recurrent:
            state = self._acting.before_step(obs, self.network.initial_state)
            params, _, new_state = self.network.unroll(add_time(obs), state)
            params = drop_time(params)
            self._acting.after_step(new_state)
        else:
            params = self.network.get_policy(obs)
        dist = make_distribution(self.action_space, params)
        if not explore:
            return self._clip(dist.deterministic())
        sample = dist.sample()
        extras = {"log_prob": dist.log_prob(sample)}
        if self.continuous:
            extras["raw_action"] = sample
        if state is not None:
            extras.update({f"state_{i}": s for i, s in enumerate(state)})
        return self._clip(sample), extras

    @property
    def reset_episodes(self) -> Callable[[Any], None] | None:
        """The worker hook a recurrent policy has (after every env step: zero the state of the env copies whose
        episode ended); None for a feed-forward one, which keeps no per-copy state (and so may act on groups of
        copies: ``executor.vector_mode=pipelined``)."""
        return self._acting.reset if self.recurrent else None

    def initial_state(self, batch_size: int) -> State:
        """The zero recurrent state of ``batch_size`` env copies (None without a core): an episode's first."""
        return self.network.initial_state(batch_size) if self.recurrent else None

    def greedy_step(self, obs: Any, state: State) -> tuple[torch.Tensor, ...]:
        """``(greedy actions, *next state)`` from the ``state`` the caller holds: the exported recurrent policy."""
        params, _, new_state = self.network.unroll(add_time(obs), tuple(state))
        return (self._clip(make_distribution(self.action_space, drop_time(params)).deterministic()), *new_state)

    def acting_state(self) -> State:
        """A copy of the per-env-copy recurrent state while acting (None before the first step or without a
        core): saved with the plan's checkpoint."""
        return self._acting.snapshot()

    def set_acting_state(self, state: State) -> None:
        self._acting.restore(state)

    def _clip(self, actions: torch.Tensor) -> torch.Tensor:
        return clip_to_bounds(self, actions)

    @api
    def observe(self, obs: Any, actions: Any, rewards: Any, next_obs: Any, terminated: Any, truncated: Any,
                extras: dict[str, Any]) -> None:
        """Collect one time step of ``B`` env copies (``[B, ...]`` each; ``next_obs``: the real next observation,
        the final one where an episode ended; ``extras``: what ``get_actions`` returned with the actions); the
        next ``update()`` without a batch learns on the steps collected since the last one."""
        self._steps.append({"obs": obs, "next_obs": next_obs, "actions": actions, "rewards": rewards,
                            "terminated": terminated, "truncated": truncated, **extras})

    def _collected(self) -> Rollout:
        """The ``observe()``'d steps as a time-major rollout (:meth:`Rollout.from_steps`)."""
        if not self._steps:
            raise RuntimeError(f"{self.name}.update(): no batch given and no steps observe()'d since the last update")
        steps, self._steps = self._steps, []
        return Rollout.from_steps(steps, self.input_spaces["obs"], self.device)

    # ------------------------------------------------------------------ learning

    def advantages(self, rollout: Rollout) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(values, advantages, returns)`` ``[T, B]`` of a time-major rollout under the current weights."""
        T, B = rollout.rewards.shape
        with torch.no_grad():
            if self.recurrent:
                values, next_values = self.recurrent_values(rollout)
            else:
                values = self.network.get_value(flatten_time(rollout.obs)).reshape(T, B)
                next_values = self.bootstrap_values(rollout)
            adv, ret = truncation_aware_gae(rollout.rewards.float(), values, next_values, self.terminations(rollout),
                                            rollout.truncated, self.cfg.gamma, self.cfg.gae_lambda)
        return values, adv, ret

    def terminations(self, rollout: Rollout) -> torch.Tensor:
        """``[T, B]``: the steps the advantage estimator treats as an episode's end with value 0: the terminations,
        and also the time-limit truncations with ``algo.bootstrap_truncated=false`` (CleanRL's convention)."""
        if self.cfg.bootstrap_truncated:
            return rollout.terminated
        return rollout.terminated.bool() | rollout.truncated.bool()

    def bootstrap_values(self, rollout: Rollout) -> torch.Tensor:
        """``V(s'_t)`` ``[T, B]`` where :func:`truncation_aware_gae` reads it: after a time-limit truncation and at
        the last step; 0 elsewhere (never read: there ``s'_t`` is ``s_{t+1}``, whose value is ``values[t + 1]``).
        One value pass over those rows only (:meth:`Rollout.next_obs`), instead of over every next observation
        (which doubled the update's value forward work: benchmarks/learner_throughput.py)."""
        T, B = rollout.rewards.shape
        needed = rollout.truncated.bool() & ~self.terminations(rollout).bool()
        needed[-1] = True
        rows = rollout.rows(needed)
        out = torch.zeros(T * B, device=rows.device)
        out[rows] = self.network.get_value(rollout.next_obs(rows)).float()
        return out.reshape(T, B).to(rollout.rewards.device)

    def sequence_starts(self, rollout: Rollout) -> tuple[torch.Tensor, State]:
        """What a recurrent learner unrolls from: ``first`` ``[T, B]`` (step t starts an episode: ``done[t - 1]``;
        at t = 0 the recorded state is already reset) and the state recorded before the rollout's first step."""
        return sequence_starts(self.network, rollout.done, rollout.extras)

    def unroll_rollout(self, rollout: Rollout, columns: torch.Tensor | None = None) -> tuple[Any, torch.Tensor]:
        """The recurrent network over the whole rollout (or the env copies ``columns``), each copy's sequence from
        its recorded first state with resets at episode starts: ``(policy params [T, b, ...], values [T, b])``."""
        first, state0 = self.sequence_starts(rollout)
        obs = rollout.obs
        if columns is not None:
            obs = map_nest(lambda x: x[:, columns], obs)
            first, state0 = first[:, columns], tuple(s[columns] for s in state0)
        params, values, _ = self.network.unroll(obs, state0, first)
        return params, values

    def recurrent_values(self, rollout: Rollout) -> tuple[torch.Tensor, torch.Tensor]:
        """``(values, next values)`` ``[T, B]`` of a recurrent network, as :meth:`bootstrap_values` reads them:
        ``V(s'_t)`` after the last step from the state after it, and after a mid-rollout truncation from the state
        after that step (by unrolling that copy up to it: rare)."""
        first, state0 = self.sequence_starts(rollout)
        T, B = rollout.rewards.shape
        _, values, final = self.network.unroll(rollout.obs, state0, first)
        next_values = torch.zeros(T, B, device=values.device)
        last = rollout.next_obs(rollout.step_rows(T - 1))
        next_values[T - 1] = self.network.unroll(add_time(last), final)[1][0].float()
        mid = (rollout.truncated.bool() & ~self.terminations(rollout).bool())[:T - 1]
        for t, b in torch.nonzero(mid).tolist():
            next_obs = rollout.next_obs(rollout.step_rows(t)[b:b + 1])
            next_values[t, b] = value_after_step(self.network, rollout.obs, next_obs, state0, first, t, b).float()
        return values.float(), next_values.to(rollout.rewards.device)

    def normalize_rollout(self, rollout: Rollout) -> Rollout:
        """The first step of every update: fold the rollout's raw observations into the observation normaliser
        (``algo.normalize_obs``) and scale its rewards by the running std of the discounted return
        (``algo.normalize_reward``); returns the rollout with the scaled rewards. The statistics change once per
        update, before advantages are computed, so values, advantages and the loss all see the same ones (the
        behaviour log-probabilities were recorded under the previous ones, as in Brax's PPO)."""
        self.network.update_obs_statistics(flatten_time(rollout.obs))  # a no-op without normalize_obs
        if self.reward_scaler is not None:
            rollout = rollout.replace(rewards=self.reward_scaler.scale(rollout.rewards, rollout.terminated,
                                                                       rollout.truncated))
        return rollout

    def remaining(self) -> float:
        """The share of the learning-rate schedule still ahead (PPO's ``anneal_clip`` follows it too)."""
        return self.lr_schedule.remaining(int(self.env_steps))

    def learning_rate(self) -> float:
        """The learning rate now: ``lr * remaining()`` when annealing, else ``lr``."""
        return self.lr_schedule.rate(int(self.env_steps))

    def set_learning_rate(self) -> float:
        """Put :meth:`learning_rate` into the optimizer (before each update); returns it."""
        return self.lr_schedule.apply(self.torch_optimizer(), int(self.env_steps))

    # ------------------------------------------------------------------ weights

    @api
    def get_weights(self) -> dict[str, torch.Tensor]:
        """The acting policy's weights (the actor-critic network), detached copies."""
        return {k: v.detach().clone() for k, v in self.network.state_dict().items()}

    @api
    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.network.load_state_dict(weights)


# ---------------------------------------------------------------------------------------------------- plans


class ActorCriticPlan(Algorithm):
    """What the PPO family (PPO, A2C, TRPO) and the IMPALA family (IMPALA, APPO) build alike: the learner's agent of
    ``agent_class`` from the env spec, and the same agent, seeded by the worker index, as a worker's policy."""

    agent_class: type[Component]
    takes_actions = DISCRETE_OR_BOX

    @classmethod
    def make_agent(cls, cfg: Any, spec: EnvSpec, seed: int) -> Component:
        cls.check_env_actions(cfg, spec)
        return cls.agent_class(cfg, seed).build(obs=spec.observation_space, actions=spec.action_space)

    @classmethod
    def make_worker_policy(cls, cfg: Any, spec: EnvSpec, worker_index: int) -> Component:
        """What a remote (or, with several local workers, an in-process) rollout worker acts with: by default the
        agent itself, seeded by the worker index (through :func:`policy_factory`)."""
        return cls.make_agent(cfg, spec, worker_index)


class OnPolicyPlan(ActorCriticPlan):
    """The plan of the PPO family: sample ``rollout_steps`` agent steps of every env copy, learn on them (one
    ``agent.update`` of the subclass's ``agent_class``), broadcast the new weights."""

    def __init__(self, cfg: Any, spec: EnvSpec, executor: Any, device: torch.device, seed: int) -> None:
        super().__init__(cfg, spec, executor, device, seed)
        self.agent = self.make_agent(cfg, spec, seed).to(device)
        self.policy_factory = policy_factory(type(self), cfg, spec)
        self.workers = executor.worker_set(self.agent, device, policy_factory=self.policy_factory)
        self.timer = executor.timer
        self.env_steps = 0
        self.updates = 0  # training_step() calls, one update (a rollout learnt on) each
        self.gradient_steps = 0

    def training_step(self) -> IterationResult:
        batches = self.workers.sample(self.cfg.rollout_steps)
        result = IterationResult()
        for b in batches:
            result.add_batch(b)  # env steps, episodes, and Atari's whole-game scores
        self.env_steps += result.env_steps
        with self.timer("learn"):
            rollout = Rollout.from_samples(batches, self.spec.observation_space, self.device)
            info = self.agent.update(rollout)
        self.workers.sync_weights(self.agent.get_weights())
        self.updates += 1
        self.gradient_steps += int(info.pop("gradient_steps", 1))
        result.metrics.update(learner_metrics(info))
        result.metrics[UPDATES] = self.updates
        result.metrics[GRADIENT_STEPS] = self.gradient_steps
        return result

    def state_dict(self) -> dict[str, Any]:
        state = {"agent": self.agent.state_dict(), "env_steps": self.env_steps, "updates": self.updates,
                 "gradient_steps": self.gradient_steps}
        if self.agent.recurrent:  # where the env copies' memories stand: a resumed run acts on from there
            state["acting_state"] = self.agent.acting_state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.env_steps = int(state["env_steps"])
        self.updates = int(state["updates"])
        self.gradient_steps = int(state["gradient_steps"])
        if self.agent.recurrent:
            self.agent.set_acting_state(state.get("acting_state"))
        self.workers.sync_weights()  # remote workers' policies hold their initial weights until told otherwise
