"""DQN: double DQN with a target network (Mnih et al. 2015; van Hasselt et al. 2016), and as switches a dueling
head (Wang et al. 2016), proportional prioritised replay (Schaul et al. 2016) and n-step returns.

Read top to bottom: the learner (Q-networks, loss, optimizer, the gradient step: Ape-X's learner is one too), the
agent (root component: the learner with epsilon-greedy acting and its own replay), then the plan. The Q-network and
the loss are components (:mod:`rlrun.components.q_network`).
Its config schema is ``rlrun.algos.dqn_config.DQNConfig`` (each key documented there and in conf/algo/dqn.yaml).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.algos.base import DISCRETE, IterationResult, ReplayPlan
from rlrun.algos.dqn_config import DQNConfig
from rlrun.components.base import Component, api
from rlrun.components.exploration import EpsilonGreedy
from rlrun.components.losses import DQNLoss
from rlrun.components.memories import ReplayMemory
from rlrun.components.noisy import reset_noise, without_noise
from rlrun.components.nstep import NStepAggregator
from rlrun.components.optimizers import Synchronization, optimizer_step
from rlrun.components.optimizers.adam import Adam
from rlrun.components.prioritized_replay import PrioritizedReplayMemory
from rlrun.components.q_network import QNetwork, q_loss
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError
from rlrun.metric_names import EPSILON, LOSS_TD, REPLAY_BETA, REPLAY_MAX_PRIORITY
from rlrun.ops.action_mask import MASK_KEY


class DQNLearner(Component):
    """What learns in DQN, and is Ape-X's learner too (``rlrun.algos.apex.ApexLearner``): the online and target
    Q-networks, the DQN loss, the target sync and the Adam optimizer. ``update`` takes one gradient step; acting
    without exploration is greedy in Q. ``memory``: the agent's own replay (:class:`DQNAgent`), or None where the
    plan hands ``update`` its batches (Ape-X: from its replay shards).

    The distributional siblings (C51, QR-DQN: ``rlrun.algos.c51``, ``rlrun.algos.qrdqn``) change only what
    :meth:`make_q_network`, :meth:`make_loss` and ``loss_of`` give: the replay, the step and the sync are these."""

    routes_updates = True
    loss_of = staticmethod(q_loss)
    """``(q, target_q, loss, (batch, weights)) -> (loss, {"td_error": per item})``: the learner's loss function."""

    def __init__(self, cfg: Any, name: str, adam_eps: float = 1e-8) -> None:
        """``cfg``: a DQN or Ape-X config (the keys of the networks, the loss, the sync and the step)."""
        super().__init__(name)
        self.cfg = cfg
        self.adam_eps = adam_eps
        # noisy nets (algo.noisy; a config without the key, Ape-X's, has none)
        self.noisy = bool(getattr(cfg, "noisy", False))
        self.q = self.make_q_network("q")
        self.target_q = self.make_q_network("target_q")
        self.loss = self.make_loss()
        self.target_sync = Synchronization(every=cfg.target_update_every, tau=cfg.tau)
        self.memory: Component | None = None
        # Set by the device strategy (rlrun.devices.apply_device_strategy) for device=replicas or
        # device.precision=bf16: a ReplicatedUpdate that takes the gradient step; None = the plain step.
        self.update_strategy: Any = None

    def make_q_network(self, name: str) -> Component:
        """The online or target network: obs -> Q-values ``[B, A]`` (``forward``)."""
        cfg = self.cfg
        return QNetwork(cfg.network, cfg.hidden_sizes, cfg.activation, cfg.dueling, name=name, noisy=self.noisy,
                        noisy_std=getattr(cfg, "noisy_std", 0.5),
                        action_mask=getattr(cfg, "action_mask", "auto"))  # Ape-X has no such key

    def make_loss(self) -> Component:
        return DQNLoss(self.cfg.double_q, self.cfg.huber_delta)

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.build_child(self.q, obs=obs, actions=actions)
        self.build_target_copy(self.target_q, self.q, obs=obs, actions=actions)
        self.build_child(self.loss, q=self.q.output("forward"), actions=actions)
        # fused=True: one Adam kernel over all parameters instead of ~10 small ops per parameter tensor (the same
        # update rule)
        self.optimizer = Adam(self.q.parameters(), lr=self.cfg.lr, eps=self.adam_eps, fused=True)
        self.output_spaces["get_actions"] = actions

    def get_extra_state(self) -> Any:
        return {"optimizer": self.optimizer.state_dict()}

    def set_extra_state(self, state: Any) -> None:
        # a deep copy: torch's Optimizer.load_state_dict would share another agent's live moment tensors
        self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        """Greedy actions (``explore`` is accepted for the agent API; a learner without exploration of its own)."""
        return self.q(obs).argmax(dim=-1)

    @api
    def update(self, batch: dict | None = None, weights: torch.Tensor | None = None) -> dict:
        """One gradient step on ``batch`` (importance ``weights`` [B], or None), then the target sync; returns
        ``loss`` and the per-item ``td_error`` (Ape-X's new priorities). Without a batch, one is sampled from the
        agent's own replay, and with prioritised replay the sampled items get their new priorities."""
        indices = None
        if batch is None:
            if isinstance(self.memory, PrioritizedReplayMemory):
                batch, indices, weights = self.memory.sample(self.cfg.batch_size)
            else:
                batch = self.memory.sample(self.cfg.batch_size)
        else:  # handed over, perhaps as numpy (Ape-X's records from its replay shards): tensors where the Q-net is
            device = next(self.q.parameters()).device
            batch = _to(batch, device)
            weights = None if weights is None else torch.as_tensor(weights).to(device)

        if self.noisy:  # a new noise sample for each network at each gradient step (CleanRL's rainbow_atari.py)
            reset_noise(self.q)
            reset_noise(self.target_q)
        if self.update_strategy is None:
            loss, info = self.loss_of(self.q, self.target_q, self.loss, (batch, weights))
            info.update(optimizer_step(self.optimizer, loss, self.cfg.max_grad_norm))
        else:  # device=replicas / device.precision=bf16: the same step, split into shards or under autocast
            loss_fn = functools.partial(self.loss_of, self.q, self.target_q, self.loss)
            info = self.update_strategy.step(self.optimizer, loss_fn, (batch, weights), self.cfg.max_grad_norm)
        if indices is not None:
            self.memory.update_priorities(indices, info["td_error"])
        self.target_sync.step(self.q, self.target_q)
        return info

    @api
    def get_weights(self) -> dict[str, torch.Tensor]:
        """What an acting copy needs: the online Q-network."""
        return {k: v.detach().clone() for k, v in self.q.state_dict().items()}

    @api
    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.q.load_state_dict(weights)


def _to(value: Any, device: torch.device) -> Any:
    """A nest of arrays/tensors as tensors on ``device``."""
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return torch.as_tensor(value).to(device)


class DQNAgent(DQNLearner):
    """The DQN agent API: get_actions (epsilon-greedy), observe (store transitions in its own replay), update (one
    gradient step on a replay sample: :meth:`DQNLearner.update`), weights."""

    learns_from = "observe"

    def __init__(self, cfg: DQNConfig, seed: int = 0) -> None:
        super().__init__(cfg, "dqn_agent", adam_eps=cfg.adam_eps)
        # noisy nets explore by their noise instead of an epsilon schedule (Fortunato et al. 2018)
        self.exploration = (EpsilonGreedy(cfg.noisy_epsilon, cfg.noisy_epsilon, 1) if cfg.noisy
                            else EpsilonGreedy(cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_decay_steps))
        if cfg.prioritized_replay:
            self.memory = PrioritizedReplayMemory(cfg.buffer_size, alpha=cfg.per_alpha, beta_start=cfg.per_beta_start,
                                                  beta_end=cfg.per_beta_end, beta_steps=cfg.per_beta_steps,
                                                  seed=seed, frames_per_record=cfg.frames_per_record)
        else:
            self.memory = ReplayMemory(cfg.buffer_size, seed=seed, frames_per_record=cfg.frames_per_record)
        # n > 1: transitions pass through the aggregator (per env copy of the one local worker) before replay.
        self.n_step = NStepAggregator(cfg.n_step, cfg.gamma) if cfg.n_step > 1 else None

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        super()._build(obs, actions)
        mask = obs.spaces.get(MASK_KEY) if isinstance(obs, sp.Dict) and self.q.masked else None
        if mask is None:
            self.build_child(self.exploration, q=self.q.output("forward"))
        else:  # explore among the legal actions only
            self.build_child(self.exploration, q=self.q.output("forward"), action_mask=mask)
        scalar = sp.Box(-np.inf, np.inf, (), np.float32)
        records = sp.Dict({"obs": obs, "action": actions, "reward": scalar, "next_obs": obs, "discount": scalar})
        if self.n_step is not None:
            self.build_child(self.n_step, obs=obs, actions=actions)
            records = self.n_step.output("add")
        self.build_child(self.memory, records=records)

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        if self.noisy and not explore:  # greedy in the mean weights
            with without_noise(self.q):
                return self.q(obs).argmax(dim=-1)
        return self.exploration.get_actions(self.q(obs), explore)

    @api
    def observe(self, obs: Any, actions: Any, rewards: Any, next_obs: Any, terminated: Any,
                truncated: Any = None) -> None:
        """Store transitions (rows ``[N, ...]``: ``SampleBatch.transitions``). With ``n_step > 1`` the rows must be
        one time step of the ``B`` env copies (``SampleBatch.step``): they go through the n-step aggregator, which
        follows the copies from step to step and stores the transitions whose windows are complete.

        ``terminated`` steps get discount 0; time-limit ``truncated`` ones bootstrap from ``next_obs`` (the real
        final observation).
        """
        self._insert(self._records(obs, actions, rewards, next_obs, terminated, truncated))
        self.exploration.advance(len(rewards))

    def observe_batch(self, batch: Any) -> None:
        """Store a worker's ``SampleBatch`` in one insert: its ``T * B`` transitions, or the n-step transitions
        they complete (the aggregator takes one time step of the env copies at a time). One insert rather than T
        matters with prioritised replay, whose every insert walks its trees once."""
        if self.n_step is None:
            self.observe(*batch.transitions())
            return
        steps = [self._records(*batch.step(t)) for t in range(batch.num_steps)]
        self._insert(sp.cat(self.memory.input_spaces["records"], steps))
        self.exploration.advance(batch.num_steps * batch.num_envs)

    def _records(self, obs: Any, actions: Any, rewards: Any, next_obs: Any, terminated: Any,
                 truncated: Any = None) -> dict[str, Any]:
        """The replay records of these rows: one-step transitions, or the n-step ones they complete."""
        if self.n_step is None:
            discount = self.cfg.gamma * (1.0 - np.asarray(terminated, dtype=np.float32))
            return {"obs": obs, "action": actions, "reward": rewards, "next_obs": next_obs, "discount": discount}
        truncated = np.zeros_like(terminated) if truncated is None else truncated
        return self.n_step.add(obs, actions, rewards, next_obs, terminated, truncated)

    def _insert(self, records: dict[str, Any]) -> None:
        if len(records["reward"]):
            self.memory.insert(records)

    @api
    def get_weights(self) -> dict[str, torch.Tensor]:
        """The online Q-network and the epsilon schedule's step (so a remote worker's exploration decays with the
        learner's env-step count)."""
        return self.exploration.with_step(super().get_weights())

    @api
    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        super().set_weights(self.exploration.take_step(weights))


class DQN(ReplayPlan):
    """The plan (:class:`~rlrun.algos.base.ReplayPlan`): sample from the worker set, store to replay, learn at the
    configured replay ratio. C51, QR-DQN and Rainbow run it with their own ``agent_class``."""

    agent_class = DQNAgent
    takes_actions = DISCRETE

    @classmethod
    def acting_config(cls, cfg: DQNConfig) -> DQNConfig:
        return replace(cfg, buffer_size=1, n_step=1, prioritized_replay=False, frames_per_record=None)

    def __init__(self, cfg: DQNConfig, spec: EnvSpec, executor: Any, device: torch.device, seed: int) -> None:
        super().__init__(cfg, spec, executor, device, seed)
        if cfg.n_step > 1 and getattr(self.workers, "num_workers", 1) > 1:
            self.workers.stop()
            raise ConfigError(f"algo.n_step={cfg.n_step} with {self.workers.num_workers} workers: the n-step "
                              f"aggregator follows one worker's env copies. Use one worker or algo.n_step=1.")

    def store(self, batch: Any) -> None:
        self.agent.observe_batch(batch)

    def report(self, result: IterationResult, infos: list[dict[str, Any]]) -> None:
        if infos:
            result.metrics[LOSS_TD] = float(torch.stack([info["loss"] for info in infos]).mean())
        result.metrics[EPSILON] = self.agent.exploration.epsilon()
        if self.cfg.prioritized_replay:
            result.metrics[REPLAY_BETA] = self.agent.memory.beta()
            result.metrics[REPLAY_MAX_PRIORITY] = self.agent.memory.max_priority
