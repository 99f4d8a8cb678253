"""Ape-X DQN (Horgan, Quan, Budden, Barth-Maron, Hessel, van Hasselt & Silver, "Distributed Prioritized
Experience Replay", ICLR 2018): many actors, each with its own fixed epsilon, compute the n-step transitions of
their env copies and those transitions' initial priorities (|TD error| under the actor's copy of the network), and
send both to a prioritised replay split over shards; one learner samples the shards, takes double-Q dueling
gradient steps, sends the new priorities back, and the actors copy the learner's weights now and then.
``algo.distribution`` puts C51's or QR-DQN's distributional network and loss in the learner and the actors (the
distributional part of Rainbow on Ape-X's replay; :func:`make_q_network`).

The dataflow is RLlib Flow's Ape-X plan (Liang et al. 2021, Fig. 5):

    store_op  = rollouts (async, per worker)  -> replay shards (add)          ; weight sync when a worker is stale
    replay_op = replay shards (async, bounded prefetch) -> learner update -> update priorities

Read top to bottom: the per-actor epsilons, the network and loss the actor and the learner share, the actor
(acting policy, built in each rollout worker), the learner
(root component: DQN's learner, ``rlrun.algos.dqn.DQNLearner``, so the networks, loss and gradient step are DQN's),
then the plan. Its config schema is ``rlrun.algos.apex_config.ApexConfig`` (each key documented there and in
conf/algo/apex.yaml).

Choices (where the paper's setting does not carry over as is):

- **Epsilons over env copies.** The paper has one env per actor; here actor i is an env copy, over all workers:
  ``N = executor.num_workers x executor.num_envs_per_worker``, copy j of worker w is ``i = w * per_worker + j``.
- **Actor priorities** use the actor's copy of the online network for the bootstrap as well (the actors hold no
  target network: the paper's actors copy only the learner's parameters); the learner's own update overwrites
  them with target-network TD errors the first time an item is replayed. With a distribution they are the
  per-item loss (cross-entropy or quantile Huber), as the learner's.
- **No noisy nets.** Ape-X explores by its ladder of actor epsilons; noisy nets replace epsilon-greedy, so
  Rainbow's noisy part is left to ``algo=rainbow`` on DQN's plan.
- **Learner.** ``algo.learner=thread`` (the default): as in the paper, the learner runs as fast as it can on its
  own thread (``rlrun/execution/learner_thread.py``), fed by a bounded queue of prefetched replay batches
  (``algo.learner_queue``); the plan only stores rollouts, feeds the queue, applies the priorities the learner
  returns and sends actors the weights the learner last published, so actors never wait for a gradient step. The
  replay ratio (samples replayed per env step stored) is then a measured figure (``replay/ratio``), capped by
  ``algo.max_replay_ratio`` when set. ``algo.learner=sync`` takes one gradient step per ``train_every`` env steps
  inside ``training_step`` instead: reproducible bit for bit on the local executor (tests, the executor
  agreement benchmark), but actors wait while the owed steps run.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.algos.apex_config import ApexConfig
from rlrun.algos.base import DISCRETE, Algorithm, IterationResult, ThreadedLearner
from rlrun.algos.dqn import DQNLearner
from rlrun.components.base import Component, api
from rlrun.components.distributional_q import DistributionalLoss, DistributionalQNetwork, distributional_q_loss
from rlrun.components.losses import DQNLoss, dqn_td_error
from rlrun.components.nstep import NStepAggregator
from rlrun.components.prioritized_replay import PrioritizedReplayMemory
from rlrun.components.q_network import QNetwork, q_loss
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError
from rlrun.execution.learner_thread import LearnerThread
from rlrun.execution.replay_shards import seed_of_shard, shard_capacity
from rlrun.metric_names import GRADIENT_STEPS, LOSS_TD, REPLAY_RATIO, REPLAY_SIZE
from rlrun.ops.action_mask import MASK_KEY
from rlrun.ops.epsilon_greedy import epsilon_greedy

TRANSITIONS = "transitions"
"""The ``SampleBatch.info`` entry in which an actor sends its n-step transitions and their priorities."""


def actor_epsilons(num_actors: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """``eps_i = base^(1 + alpha * i / (N - 1))`` for ``i = 0 .. N-1`` (Horgan et al. 2018, Sec. 4.1: base 0.4,
    alpha 7); a single actor gets ``base``. float64 ``[N]``."""
    n = int(num_actors)
    if n < 1:
        raise ValueError(f"num_actors must be at least 1, got {num_actors}")
    if n == 1:
        return np.array([float(base)])
    i = np.arange(n, dtype=np.float64)
    return float(base) ** (1.0 + float(alpha) * i / (n - 1))


def records_space(obs: sp.Space, actions: sp.Space) -> sp.Dict:
    """The space of one stored n-step transition (the output record of ``NStepAggregator``)."""
    scalar = sp.Box(-np.inf, np.inf, (), np.float32)
    return sp.Dict({"obs": obs, "action": actions, "reward": scalar, "next_obs": obs, "discount": scalar})


# ---------------------------------------------------------------------------------------------------- network


def make_q_network(cfg: ApexConfig, name: str) -> Component:
    """The learner's networks and each actor's: DQN's Q-network, or with ``algo.distribution`` C51's or QR-DQN's
    (whose ``forward`` is Q, the distribution's mean: acting and epsilon-greedy are the same)."""
    if cfg.distribution == "none":
        return QNetwork(cfg.network, cfg.hidden_sizes, cfg.activation, cfg.dueling, name=name)
    size = cfg.num_atoms if cfg.distribution == "categorical" else cfg.num_quantiles
    return DistributionalQNetwork(cfg.distribution, size, cfg.v_min, cfg.v_max, cfg.network, cfg.hidden_sizes,
                                  cfg.activation, cfg.dueling, name=name)


def make_loss(cfg: ApexConfig) -> Component:
    """DQN's loss, or the distribution's (QR-DQN's kappa is ``huber_delta``; null: 0, plain quantile regression)."""
    if cfg.distribution == "none":
        return DQNLoss(cfg.double_q, cfg.huber_delta)
    return DistributionalLoss(cfg.distribution, cfg.double_q, kappa=cfg.huber_delta or 0.0)


def loss_function(cfg: ApexConfig) -> Any:
    """``(q, target_q, loss, (batch, weights)) -> (loss, {"td_error": per item})`` for the networks above."""
    return q_loss if cfg.distribution == "none" else distributional_q_loss


# ---------------------------------------------------------------------------------------------------- actor


class ApexActor(Component):
    """What a rollout worker acts with: the Q-network, a fixed epsilon per env copy, and (worker-side hook) the
    n-step aggregation and initial priorities of its transitions.

    ``epsilons``: one per env copy of this worker (``actor_epsilons`` sliced for the worker)."""

    def __init__(self, cfg: ApexConfig, epsilons: Sequence[float], name: str = "apex_actor") -> None:
        super().__init__(name)
        self.cfg = cfg
        self.q = make_q_network(cfg, "q")
        self.loss = make_loss(cfg)
        self.loss_of = loss_function(cfg)
        self.n_step = NStepAggregator(cfg.n_step, cfg.gamma)
        self.register_buffer("epsilons", torch.as_tensor(np.asarray(epsilons, dtype=np.float32)))

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        if isinstance(obs, sp.Dict) and MASK_KEY in obs.spaces:  # its per-copy epsilon draws know no mask
            raise ConfigError(f"algo=apex: the env gives an {MASK_KEY}, which Ape-X's exploring actors do not "
                              f"honour; use algo=dqn (or another algorithm that takes masks, docs/action-masks.md).")
        self.build_child(self.q, obs=obs, actions=actions)
        self.build_child(self.loss, q=self.q.output("forward"), actions=actions)
        self.build_child(self.n_step, obs=obs, actions=actions)
        self.num_actions = int(actions.n)
        self.output_spaces["get_actions"] = actions

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        """Epsilon-greedy in Q with env copy b's own epsilon; greedy with ``explore=False``."""
        q = self.q(obs)
        if not explore:
            return q.argmax(dim=-1)
        epsilons = self.epsilons
        if q.shape[0] != epsilons.shape[0]:
            raise ValueError(f"{self.name}: {q.shape[0]} observations for {epsilons.shape[0]} env copies "
                             f"(one epsilon each); executor.vector_mode=serial is not supported by algo=apex")
        return epsilon_greedy(q, self.num_actions, epsilons)

    @api
    def priorities(self, records: dict[str, Any]) -> torch.Tensor:
        """Initial priorities |TD| of n-step transitions under this actor's network (online for selection and
        evaluation: the actor has no target network), or with a distribution the per-item loss the learner's
        priorities are; ``[K]`` float32."""
        with torch.no_grad():
            if self.cfg.distribution != "none":
                return self.loss_of(self.q, self.q, self.loss, (records, None))[1]["td_error"]
            q = self.q(records["obs"])
            q_next = self.q(records["next_obs"])
            td = dqn_td_error(q, records["action"], records["reward"], records["discount"], q_next,
                              q_next if self.cfg.double_q else None)
        return td.abs()

    def postprocess_batch(self, batch: Any) -> Any:
        """The worker-side hook (rollout_worker.py): the rollout's n-step transitions (windows carried across
        rollouts per env copy) with their priorities into ``batch.info["transitions"]``; the rollout's own
        observations are dropped (the learner needs only the transitions, and on Ray they need not travel)."""
        obs_space, act_space = self.input_spaces["obs"], self.input_spaces["actions"]
        chunks = []
        for t in range(batch.num_steps):
            out = self.n_step.add(*batch.step(t))
            if len(out["reward"]):
                chunks.append(out)
        space = records_space(obs_space, act_space)
        if chunks:
            records = sp.cat(space, chunks)
            priorities = self.priorities(records).numpy()
        else:
            records = sp.unflatten(space, {k: torch.zeros((0, *sp.shape(s)), dtype=sp.dtype(s))
                                           for k, s in sp.flatten_space(space).items()})
            priorities = np.zeros(0, np.float32)
        numpy = sp.unflatten(space, {k: v.numpy() for k, v in sp.flatten(space, records).items()})
        info = {**batch.info, TRANSITIONS: {"records": numpy, "priorities": priorities}}
        return replace(batch, obs=None, final_obs=None, info=info)

    @api
    def get_weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.q.state_dict().items()}

    @api
    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.q.load_state_dict(weights)


def make_actor(cfg: ApexConfig, spec: EnvSpec, epsilons: Sequence[float], envs_per_worker: int,
               worker_index: int) -> ApexActor:
    """The policy factory (picklable through ``functools.partial``): worker ``worker_index``'s actor, acting with
    the epsilons of its env copies; its weights arrive by ``sync_weights``."""
    w, per = int(worker_index), int(envs_per_worker)
    mine = list(epsilons[w * per:(w + 1) * per])
    if len(mine) != per:  # a worker past the ones counted (cannot happen with the executors' indices)
        raise ValueError(f"worker {w} has no epsilons: {len(epsilons)} for {per} env copies per worker")
    return ApexActor(cfg, mine).build(obs=spec.observation_space, actions=spec.action_space)


# ---------------------------------------------------------------------------------------------------- learner


class ApexLearner(DQNLearner):
    """The root component: DQN's learner (:class:`rlrun.algos.dqn.DQNLearner`: the online and target Q-networks,
    the DQN loss, the optimizer and its gradient step) on the batches the plan draws from the replay shards, with
    their importance weights; its ``td_error`` are the new priorities. With ``algo.distribution`` its networks and
    loss are C51's or QR-DQN's (:func:`make_q_network`), as ``C51Agent``'s and ``QRDQNAgent``'s are. No replay or
    exploration of its own (the shards and the actors have them): it acts greedily (evaluation and export), and its
    weights are the online Q-network (each actor's epsilon is its own and fixed)."""

    def __init__(self, cfg: ApexConfig) -> None:
        super().__init__(cfg, "apex_learner", adam_eps=cfg.adam_eps)
        self.loss_of = loss_function(cfg)

    def make_q_network(self, name: str) -> Component:
        return make_q_network(self.cfg, name)

    def make_loss(self) -> Component:
        return make_loss(self.cfg)


def make_shard_memory(capacity: int, cfg: ApexConfig, spec: EnvSpec, seed: int,
                      shard_index: int) -> PrioritizedReplayMemory:
    """The shard factory (picklable through ``functools.partial``): shard ``shard_index``'s prioritised memory of
    n-step transitions, built, seeded from ``(seed, shard_index)``."""
    memory = PrioritizedReplayMemory(capacity, alpha=cfg.per_alpha, beta_start=cfg.per_beta_start,
                                     beta_end=cfg.per_beta_end, beta_steps=cfg.per_beta_steps, eps=cfg.per_eps,
                                     seed=seed_of_shard(seed, shard_index), name=f"replay_shard_{shard_index}",
                                     frames_per_record=cfg.frames_per_record)
    return memory.build(records=records_space(spec.observation_space, spec.action_space))


# ---------------------------------------------------------------------------------------------------- plan


class ApeX(ThreadedLearner, Algorithm):
    """The plan: rollouts as they arrive -> replay shards (weight sync for stale workers); then the owed gradient
    steps on batches from the shards, each followed by its priority update."""

    agent_class = ApexLearner
    takes_actions = DISCRETE

    @classmethod
    def make_agent(cls, cfg: ApexConfig, spec: EnvSpec, seed: int) -> ApexLearner:
        cls.check_env_actions(cfg, spec)
        return ApexLearner(cfg).build(obs=spec.observation_space, actions=spec.action_space)

    def __init__(self, cfg: ApexConfig, spec: EnvSpec, executor: Any, device: torch.device, seed: int) -> None:
        super().__init__(cfg, spec, executor, device, seed)
        _check(cfg, executor)
        self.agent = self.make_agent(cfg, spec, seed).to(device)
        per = int(executor.num_envs_per_worker)
        self.epsilons = actor_epsilons(int(executor.num_workers) * per, cfg.epsilon_base, cfg.epsilon_alpha)
        factory = functools.partial(make_actor, cfg, spec, tuple(float(e) for e in self.epsilons), per)
        self.workers = executor.worker_set(self.agent, device, policy_factory=factory, own_policies=True,
                                           info_by_reference=(TRANSITIONS,))
        try:
            capacity = shard_capacity(cfg.buffer_size, cfg.num_replay_shards)
            self.replay = executor.replay_shards(functools.partial(make_shard_memory, capacity, cfg, spec, seed),
                                                 cfg.num_replay_shards)
        except BaseException:
            self.workers.stop()
            raise
        self.workers.sync_weights()  # the actors start from the learner's initial weights
        self.timer = executor.timer
        self.env_steps = 0
        self.gradient_steps = 0
        self.update_budget = 0.0  # gradient steps owed at the replay ratio (fractional carry-over)
        self.since_sync = [0] * self.workers.num_workers  # env steps each worker sampled since its last sync
        self.learner: LearnerThread | None = None
        self.batches_issued = 0  # replay batches handed to the learner thread (thread mode)
        if cfg.learner == "thread":
            self.published = self.agent.get_weights()  # what actors copy: the learner's last published weights
            self.learner = LearnerThread(self._learn, max_queue=cfg.learner_queue, publish=self._publish)

    # ------------------------------------------------------------------ the learner thread's side

    def _learn(self, item: tuple[Any, int]) -> tuple[torch.Tensor, torch.Tensor]:
        (records, indices, weights), shard = item
        with self.timer("learn"):
            info = self.agent.update(records, weights)
        return info["loss"].detach(), info["td_error"].detach()

    # ------------------------------------------------------------------ the plan

    def training_step(self) -> IterationResult:
        if self.learner is not None:
            return self._training_step_thread()
        result = self._store(weights=None)
        if self.env_steps < self.cfg.learning_starts:
            return result
        # replay_op: the gradient steps owed at the replay ratio, each on a batch from one shard.
        self.update_budget += result.env_steps / self.cfg.train_every
        owed = int(self.update_budget)
        self.update_budget -= owed
        losses = []
        for i, ((records, indices, weights), shard) in enumerate(self.replay.sample_async(self.cfg.batch_size, owed)):
            if self.stop_due():  # the run stops now: the steps still owed are kept for a resumed run
                self.update_budget += owed - i
                break
            with self.timer("learn"):
                info = self.agent.update(records, weights)
            self.replay.update_priorities(shard, indices, info["td_error"])
            losses.append(info["loss"])
        self.gradient_steps += len(losses)
        if losses:
            result.metrics[LOSS_TD] = float(torch.stack(losses).mean())
        result.metrics[GRADIENT_STEPS] = self.gradient_steps
        result.metrics[REPLAY_SIZE] = self.replay.size()
        return result

    def _store(self, weights: Any) -> IterationResult:
        """store_op: each rollout (as it arrives) goes to the next replay shard; a worker that sampled
        ``max_weight_sync_delay`` env steps since its last sync gets ``weights`` (None: the learner's own)."""
        result = IterationResult()
        for batch, worker in self.workers.sample_async(self.cfg.rollout_steps):
            with self.timer("replay"):
                self.replay.add(batch.info.pop(TRANSITIONS))
            result.add_batch(batch)
            self.since_sync[worker] += batch.env_steps
            if self.since_sync[worker] >= self.cfg.max_weight_sync_delay:
                self.workers.sync_weights(weights, worker_ids=[worker])
                self.since_sync[worker] = 0
        self.env_steps += result.env_steps
        return result

    def _training_step_thread(self) -> IterationResult:
        """Thread mode: store rollouts as they arrive (stale actors get the last published weights), keep the
        learner's queue full (within ``max_replay_ratio``), apply the priorities it returned. Never learns here."""
        result = self._store(weights=self.published)
        if self.env_steps >= self.cfg.learning_starts:
            room = self.learner.free_slots()
            if self.cfg.max_replay_ratio is not None:
                allowed = int(self.cfg.max_replay_ratio * self.env_steps / self.cfg.batch_size) - self.batches_issued
                room = min(room, max(0, allowed))
            for item in self.replay.sample_async(self.cfg.batch_size, room):
                self.learner.put(item, timeout=60.0)
                self.batches_issued += 1
        losses = []
        for ((_, indices, _), shard), (loss, td_error) in self.learner.drain():
            self.replay.update_priorities(shard, indices, td_error)
            losses.append(loss)
        self.gradient_steps += len(losses)
        self._report_latest_update(result, {LOSS_TD: float(torch.stack(losses).mean())} if losses else None)
        result.metrics.update(self.learner.metrics())
        result.metrics[GRADIENT_STEPS] = self.gradient_steps
        result.metrics[REPLAY_RATIO] = self.gradient_steps * self.cfg.batch_size / max(self.env_steps, 1)
        result.metrics[REPLAY_SIZE] = self.replay.size()
        return result

    def _state(self) -> dict[str, Any]:
        return {"agent": self.agent.state_dict(), "replay": self.replay.state_dict(), "env_steps": self.env_steps,
                "gradient_steps": self.gradient_steps, "update_budget": self.update_budget,
                "since_sync": list(self.since_sync), "batches_issued": self.batches_issued}

    def _load(self, state: dict[str, Any]) -> None:
        self.batches_issued = int(state.get("batches_issued", 0))
        self.agent.load_state_dict(state["agent"])
        self.replay.load_state_dict(state["replay"])
        self.env_steps = int(state["env_steps"])
        self.gradient_steps = int(state["gradient_steps"])
        self.update_budget = float(state["update_budget"])
        self.since_sync = [int(s) for s in state["since_sync"]]


def _check(cfg: ApexConfig, executor: Any) -> None:
    """What involves several keys (each key's own range is declared on ApexConfig and checked there)."""
    if cfg.buffer_size < cfg.num_replay_shards:
        raise ConfigError(f"algo.buffer_size={cfg.buffer_size} is smaller than algo.num_replay_shards="
                          f"{cfg.num_replay_shards}: every shard needs room for at least one transition.")
    # An executor without a config (rlrun eval's, which builds no workers) acts in no vector mode at all.
    mode = str(getattr(getattr(executor, "cfg", None), "vector_mode", "sync"))
    if mode in ("serial", "pipelined"):
        raise ConfigError(f"algo=apex with executor.vector_mode={mode}: each env copy has its own epsilon, so the "
                          f"actor acts on all of a worker's copies at once. Use vector_mode=sync or async.")
