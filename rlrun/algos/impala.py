"""IMPALA: actors act with a possibly stale copy of the policy and record their behaviour log-probabilities; the
learner corrects for the lag with V-trace (Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with
Importance Weighted Actor-Learner Architectures", Sec. 4, Eq. 1 and Sec. 4.2).

The plan is asynchronous, as RLlib Flow's IMPALA: ``workers.sample_async`` yields unrolls of ``unroll_length``
agent steps from whichever worker finishes; once ``batch_size`` env-copy unrolls are held, the learner takes one
gradient step on them (time-major ``[T, B]``, the loss of :func:`rlrun.components.policy_losses.impala_loss`) and
sends its new weights to the workers whose unrolls it consumed (``sync_weights(worker_ids=...)``). On
``executor=local`` the unrolls come one after another from the learner's own policy (no lag): it is then a
synchronous actor-critic with V-trace targets, and still learns. The policy lag (learner updates minus the
weights version an unroll was acted with) is reported as ``learn/policy_lag_mean`` / ``learn/policy_lag_max``.

Episode ends: a termination ends the trace (discount 0); a time-limit truncation also cuts it (the next row is a
new episode) but bootstraps from the value of the episode's real final observation (the rollout's ``final_obs``),
folded into the reward as :func:`rlrun.ops.truncation_aware_gae` does. The unroll's own bootstrap is the value of
step T - 1's next observation: the one the next unroll starts from where the copy goes on (the batch's
``last_obs``), the final observation where it ended.

Optional recurrent core (``recurrent=lstm|gru``; IMPALA's Atari network has an LSTM): torso -> core ->
policy/value head (:class:`rlrun.components.recurrent_actor_critic.RecurrentActorCritic`). The acting policy
keeps one recurrent state per env copy, zeroes it where an episode ended (the worker calls ``reset_episodes``
after every env step) and records the state before every step (extras ``state_0``, ``state_1``, ...); the learner
unrolls the core over the T steps of each unroll from the state recorded at its first step, resetting it at
episode starts inside the unroll.

Read top to bottom: the network, the agent (act, learn, weights), the plan. ``rlrun.algos.appo`` reuses all of it
with PPO's clipped surrogate. Config schema: ``rlrun.algos.impala_config.IMPALAConfig`` (conf/algo/impala.yaml).
"""

from __future__ import annotations

import contextlib
import copy
import math
from typing import Any, Iterator

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.algos.base import IterationResult, ThreadedLearner, learner_metrics
from rlrun.algos.impala_config import IMPALAConfig
from rlrun.algos.on_policy import (
    ActorCriticPlan,
    build_actor_critic,
    clip_to_bounds,
    policy_factory,
    rmsprop_or_adam,
)
from rlrun.components.acting_state import ActingState
from rlrun.components.base import Component, api
from rlrun.components.distributions import make_distribution
from rlrun.components.optimizers import optimizer_step
from rlrun.components.optimizers.lr_schedule import LinearDecay
from rlrun.components.policy_losses import impala_loss
from rlrun.components.recurrent_actor_critic import (
    RecurrentActorCritic,
    State,
    add_time,
    drop_time,
    sequence_starts,
    value_after_step,
)
from rlrun.envs.gym_env import EnvSpec
from rlrun.execution.learner_thread import LearnerThread
from rlrun.execution.rollout import Rollout
from rlrun.metric_names import (
    ENTROPY,
    EXPLAINED_VARIANCE,
    GRADIENT_STEPS,
    LOSS_POLICY,
    LOSS_VALUE,
    LR,
    POLICY_LAG_MAX,
    POLICY_LAG_MEAN,
    RHO_CLIPPED_FRACTION,
    RHO_MEAN,
    UPDATES,
    VS_MEAN,
)
from rlrun.ops import explained_variance

# ---------------------------------------------------------------------------------------------------- agent


class IMPALAAgent(Component):
    """The IMPALA agent API: get_actions (with the behaviour log-probability, the weights version and, with an LSTM,
    the recurrent state the learner needs), reset_episodes (worker hook), update (V-trace actor-critic step on a
    time-major batch of unrolls), weights (with their version)."""

    learns_from = "rollouts"  # rlrun.make_agent: update() takes the time-major steps an application observed
    autocasts_updates = True  # device.precision=bf16 (V-trace runs over whole unrolls: no replica shards)

    def __init__(self, cfg: IMPALAConfig, seed: int = 0, name: str = "impala_agent") -> None:
        super().__init__(name)
        self.cfg = cfg
        self.network = RecurrentActorCritic(cfg.network, list(cfg.hidden_sizes), cfg.activation, cfg.recurrent,
                                            cfg.recurrent_size, cfg.shared_torso, cfg.orthogonal_init, name="network",
                                            action_mask=cfg.action_mask)
        self.update_autocast: tuple[str, torch.dtype] | None = None
        """The update's autocast ``(device type, dtype)`` (``device.precision=bf16``, set by rlrun.devices), or None:
        every gradient step's loss runs under it (:meth:`autocast`)."""
        self.register_buffer("env_steps", torch.zeros((), dtype=torch.int64))  # env steps learnt on (LR schedule)
        self.register_buffer("updates", torch.zeros((), dtype=torch.int64))  # learner updates = weights version
        self.lr_schedule = LinearDecay(cfg.lr, cfg.anneal_lr, cfg.total_env_steps, name)
        self._acting = ActingState()

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        build_actor_critic(self, obs, actions)
        # one RMSProp (Espeholt et al. 2018, with momentum) or Adam step per learner batch
        self.optimizer = rmsprop_or_adam(self.cfg, self.network.parameters(), momentum=self.cfg.rmsprop_momentum)

    def get_extra_state(self) -> Any:
        return {"optimizer": self.optimizer.state_dict()}

    def set_extra_state(self, state: Any) -> None:
        # a deep copy: torch's Optimizer.load_state_dict would share another agent's live moment tensors
        self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context a gradient step's loss runs in: ``torch.autocast`` with :attr:`update_autocast`, or none."""
        if self.update_autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.update_autocast[0], dtype=self.update_autocast[1])

    # ------------------------------------------------------------------ acting

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> Any:
        """``explore=False``: the mode of the policy (clipped to a Box's bounds). ``explore=True``: a sample, as
        ``(actions, extras)`` with the behaviour policy's ``log_prob`` [B], its parameters (``behaviour_logits``
        [B, A], or ``behaviour_mean``/``behaviour_log_std`` for Box actions, with the unclipped ``raw_action``),
        the ``weights_version`` [B] acted with, and with an LSTM the state before the step (``state_0``,
        ``state_1``, ... [B, H]: see :data:`State`). With an LSTM both modes advance the per-copy recurrent state."""
        state = None
        if self.cfg.recurrent != "none":
            state = self._acting.before_step(obs, self.network.initial_state)
        params, _, new_state = self.network.unroll(add_time(obs), state)
        params = drop_time(params)
        self._acting.after_step(new_state)
        dist = make_distribution(self.action_space, params)
        if not explore:
            return self._clip(dist.deterministic())
        sample = dist.sample()
        extras = {"log_prob": dist.log_prob(sample),
                  "weights_version": self.updates.expand(sample.shape[0]).clone()}
        if self.continuous:
            extras.update(raw_action=sample, behaviour_mean=params[0], behaviour_log_std=params[1])
        else:
            extras["behaviour_logits"] = params
        if state is not None:
            extras.update({f"state_{i}": s for i, s in enumerate(state)})
        return self._clip(sample), extras

    def _clip(self, actions: torch.Tensor) -> torch.Tensor:
        return clip_to_bounds(self, actions)

    def reset_episodes(self, done: np.ndarray) -> None:
        """Worker hook, after every env step: zero the recurrent state of the env copies whose episode ended."""
        self._acting.reset(done)

    def initial_state(self, batch_size: int) -> State:
        """The zero recurrent state of ``batch_size`` env copies (None without a core): an episode's first."""
        return self.network.initial_state(batch_size)

    def greedy_step(self, obs: Any, state: State) -> tuple[torch.Tensor, ...]:
        """``(greedy actions, *next state)`` from the ``state`` the caller holds: the exported recurrent policy."""
        params, _, new_state = self.network.unroll(add_time(obs), tuple(state))
        return (self._clip(make_distribution(self.action_space, drop_time(params)).deterministic()), *new_state)

    def acting_state(self) -> State:
        """The per-env-copy recurrent state while acting (None before the first step or without a core)."""
        return self._acting.snapshot()

    def set_acting_state(self, state: State) -> None:
        self._acting.restore(state)

    # ------------------------------------------------------------------ learning

    def set_learning_rate(self) -> float:
        """Put the learning rate into the optimizer (``lr``, annealed linearly to 0 when ``anneal_lr``)."""
        return self.lr_schedule.apply(self.optimizer, int(self.env_steps))

    def _first_and_state(self, rollout: Rollout) -> tuple[torch.Tensor | None, State]:
        """The learner's LSTM inputs: ``first`` [T, B] (step t starts an episode: ``done[t - 1]``; at t = 0 the
        recorded state is already reset) and the state recorded before each unroll's first step."""
        if self.cfg.recurrent == "none":
            return None, None
        return sequence_starts(self.network, rollout.done, rollout.extras)

    def targets_inputs(self, rollout: Rollout, final_state: State, state0: State,
                       first: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rewards, discounts, bootstrap_value)`` for V-trace under the current weights (no gradient):
        ``discounts = gamma (1 - done)``; at a truncation (not a termination) the reward gets
        ``+ gamma V(s'_t)`` of the episode's final observation; ``bootstrap_value`` is V(s'_{T-1}) (the rollout's
        ``last_obs``, or the final observation where an episode ended at T - 1; with an LSTM: from the state after
        step T - 1)."""
        cfg = self.cfg
        rewards = rollout.rewards.float()
        terminated = rollout.terminated.to(rewards.dtype)
        truncated_only = rollout.truncated.to(rewards.dtype) * (1.0 - terminated)
        done = torch.clamp(terminated + rollout.truncated.to(rewards.dtype), max=1.0)
        T = rollout.num_steps

        with torch.no_grad():
            last = rollout.next_obs(rollout.step_rows(T - 1))
            _, v_last, _ = self.network.unroll(add_time(last), final_state)
            bootstrap = v_last[0]
            next_values = torch.zeros_like(rewards)
            next_values[T - 1] = bootstrap
            mid = truncated_only[:T - 1].bool()
            if mid.any():
                if cfg.recurrent == "none":  # all truncated rows at once, as one batch of observations
                    next_obs = rollout.next_obs(rollout.rows(mid))  # steps < T - 1: mid's flat rows are the rollout's
                    next_values[:T - 1][mid] = self.network.unroll(add_time(next_obs))[1][0]
                else:  # rare: the state after step t of copy b, by unrolling that copy up to t
                    for t, b in torch.nonzero(mid).tolist():
                        next_obs = rollout.next_obs(rollout.step_rows(t)[b:b + 1])
                        next_values[t, b] = value_after_step(self.network, rollout.obs, next_obs, state0, first, t, b)
        rewards = rewards + cfg.gamma * truncated_only * next_values
        return rewards, cfg.gamma * (1.0 - done), bootstrap

    def _actions(self, rollout: Rollout) -> torch.Tensor:
        return rollout.extras["raw_action"] if self.continuous else rollout.actions

    def _forward_terms(self, rollout: Rollout, state0: State, first: torch.Tensor) -> tuple:
        """What a learner loss needs from one pass over the unrolls: (the current policy's distribution, values,
        and :meth:`targets_inputs`' rewards, discounts and bootstrap). IMPALA's and APPO's losses."""
        params, values, final_state = self.network.unroll(rollout.obs, state0, first)
        rewards, discounts, bootstrap = self.targets_inputs(
            rollout, None if final_state is None else tuple(s.detach() for s in final_state), state0, first)
        return make_distribution(self.action_space, params), values, rewards, discounts, bootstrap

    @api
    def update(self, batch: Rollout) -> dict[str, Any]:
        """One gradient step on a time-major batch of unrolls ``[T, B, ...]`` with the extras ``get_actions``
        recorded. Returns the loss terms (``loss`` before the step) and V-trace statistics."""
        rollout, cfg = batch, self.cfg
        lr = self.set_learning_rate()
        first, state0 = self._first_and_state(rollout)
        actions = self._actions(rollout)
        with self.autocast():
            dist, values, rewards, discounts, bootstrap = self._forward_terms(rollout, state0, first)
            log_probs = dist.log_prob(actions)
            behaviour = rollout.extras["log_prob"]
            t = impala_loss(log_probs, behaviour, rewards, discounts, values, bootstrap, dist.entropy(),
                            vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef, clip_rho_threshold=cfg.clip_rho_threshold,
                            clip_pg_rho_threshold=cfg.clip_pg_rho_threshold, reduction=cfg.loss_reduction)
            rhos = torch.exp(log_probs.detach() - behaviour)
        info = {LOSS_POLICY: t.policy.detach(), LOSS_VALUE: t.value.detach(), ENTROPY: t.entropy.detach(),
                VS_MEAN: t.vs.mean(), RHO_MEAN: rhos.mean(),
                RHO_CLIPPED_FRACTION: (rhos > (cfg.clip_rho_threshold or math.inf)).float().mean()}
        info.update(optimizer_step(self.optimizer, t.total.float(), cfg.max_grad_norm))
        self.env_steps += int(rollout.rewards.numel())
        self.updates += 1
        info[LR] = lr
        info[EXPLAINED_VARIANCE] = explained_variance(values.detach().flatten(), t.vs.flatten())
        return info

    # ------------------------------------------------------------------ weights

    @api
    def get_weights(self) -> dict[str, Any]:
        """The acting policy's weights (the network, detached copies) and their version (learner updates)."""
        return {"network": {k: v.detach().clone() for k, v in self.network.state_dict().items()},
                "weights_version": self.updates.detach().clone()}

    @api
    def set_weights(self, weights: dict[str, Any]) -> None:
        self.network.load_state_dict(weights["network"])
        self.updates.copy_(weights["weights_version"])


# ---------------------------------------------------------------------------------------------------- plan


class IMPALA(ThreadedLearner, ActorCriticPlan):
    """The plan: unrolls as they arrive (``sample_async``); every ``batch_size`` env-copy unrolls, one learner
    update on them and a weight sync to the workers that produced them."""

    agent_class: type[Component] = IMPALAAgent

    def __init__(self, cfg: IMPALAConfig, spec: EnvSpec, executor: Any, device: torch.device, seed: int) -> None:
        super().__init__(cfg, spec, executor, device, seed)
        self.agent = self.make_agent(cfg, spec, seed).to(device)
        self.policy_factory = policy_factory(type(self), cfg, spec)
        thread = cfg.learner == "thread"
        # thread mode: every worker acts with a copy (the learner's network changes under it on its thread)
        self.workers = executor.worker_set(self.agent, device, policy_factory=self.policy_factory,
                                           own_policies=thread)
        self.workers.sync_weights()  # workers with policies of their own start from the learner's weights
        self.learner: LearnerThread | None = None
        if thread:
            self.published = self.agent.get_weights()  # what workers copy: the weights after the last update
            self.learner = LearnerThread(self._learn_on, max_queue=cfg.learner_queue, publish=self._publish)
        self.timer = executor.timer
        # Worker batches (of num_envs_per_worker env-copy unrolls each) per learner update, rounded up.
        # (``rlrun eval``/``export`` restore the plan with an executor that has no workers: 1 there.)
        per_worker = int(getattr(executor, "num_envs_per_worker", 1))
        self.batches_per_update = max(1, math.ceil(cfg.batch_size / per_worker))
        self.env_steps = 0
        self.gradient_steps = 0

    @property
    def updates(self) -> int:
        return int(self.agent.updates)

    def training_step(self) -> IterationResult:
        """One learner update (thread mode: :meth:`_training_step_thread`): take unrolls as they arrive until
        ``batches_per_update`` worker samples are held, learn on them, send the new weights to the workers that
        produced them (while the arrivals are still open, so the last one's next request carries them), and stop
        taking unrolls (those that arrive meanwhile wait for the next step: one update per step however fast the
        workers are)."""
        if self.learner is not None:
            return self._training_step_thread()
        result = IterationResult()
        for batches, workers in self._take_unrolls(result):
            with self.timer("learn"):
                info = self._update(Rollout.from_samples(batches, self.spec.observation_space, self.device))
            self.workers.sync_weights(worker_ids=sorted(set(workers)))
        self.env_steps += result.env_steps
        self.gradient_steps += int(info.pop("gradient_steps", 1))
        lag_mean, lag_max = info.pop("lags")
        result.metrics.update(learner_metrics(info))
        result.metrics[POLICY_LAG_MEAN] = lag_mean
        result.metrics[POLICY_LAG_MAX] = lag_max
        result.metrics[UPDATES] = self.updates
        result.metrics[GRADIENT_STEPS] = self.gradient_steps
        return result

    def _training_step_thread(self) -> IterationResult:
        """Thread mode: take ``batches_per_update`` worker samples as they arrive, queue them as one learner batch
        (waiting only while the queue is full: IMPALA's bounded queue), send the producing workers the weights the
        learner last published, and report the updates the learner finished since."""
        result = IterationResult()
        for batches, workers in self._take_unrolls(result):
            rollout = Rollout.from_samples(batches, self.spec.observation_space, self.device)
            with self.timer("learner_queue_wait"):
                while not self.learner.put(rollout, timeout=1.0):
                    if self.stop_due():
                        break
            self.workers.sync_weights(self.published, worker_ids=sorted(set(workers)))
        self.env_steps += result.env_steps
        infos = [info for _, info in self.learner.drain()]
        finished = None
        if infos:
            info = infos[-1]
            self.gradient_steps += sum(int(i.pop("gradient_steps", 1)) for i in infos)
            lag_mean, lag_max = info.pop("lags")
            finished = learner_metrics({k: v for k, v in info.items() if k != "gradient_steps"})
            finished[POLICY_LAG_MEAN] = lag_mean
            finished[POLICY_LAG_MAX] = lag_max
        self._report_latest_update(result, finished)
        result.metrics.update(self.learner.metrics())
        result.metrics[UPDATES] = self.updates
        result.metrics[GRADIENT_STEPS] = self.gradient_steps
        return result

    def _learn_on(self, rollout: Rollout) -> dict[str, Any]:
        """The learner thread's update of one queued batch."""
        with self.timer("learn"):
            info = self._update(rollout)
        return {k: (float(v) if isinstance(v, torch.Tensor) and v.numel() == 1 else v) for k, v in info.items()}

    def _update(self, rollout: Rollout) -> dict[str, Any]:
        """The agent's update on one learner batch; its info with ``lags``: the mean and max policy lag of the rows
        (learner updates before this one minus the weights version acted with)."""
        lag = (self.updates - rollout.extras.pop("weights_version")).float()
        info = self.agent.update(rollout)
        info["lags"] = (float(lag.mean()), float(lag.max()))
        return info

    def _take_unrolls(self, result: IterationResult) -> Iterator[tuple[list[Any], list[int]]]:
        """Take worker samples as they arrive (counted into ``result``) until ``batches_per_update`` are held, then
        yield them with their workers' ids once, while the arrivals are still open (so weights synced meanwhile
        ride on the workers' next requests). Unrolls arriving after that wait for the next step."""
        batches: list[Any] = []
        workers: list[int] = []
        need = self.batches_per_update
        with contextlib.closing(self.workers.sample_async(self.cfg.unroll_length, min_batches=need)) as arriving:
            for batch, worker in arriving:
                result.add_batch(batch)
                batches.append(batch)
                workers.append(worker)
                if len(batches) == need:
                    yield batches, workers
                    return
        raise RuntimeError(f"the worker set's sample_async ended after {len(batches)} of {need} samples")

    def _state(self) -> dict[str, Any]:
        return {"agent": self.agent.state_dict(), "env_steps": self.env_steps,
                "gradient_steps": self.gradient_steps, "acting_state": self.agent.acting_state()}

    def _load(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.env_steps = int(state["env_steps"])
        self.gradient_steps = int(state["gradient_steps"])
        self.agent.set_acting_state(state.get("acting_state"))
