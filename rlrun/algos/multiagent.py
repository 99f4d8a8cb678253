"""Multi-agent training: several policies in one environment, each trained by its own algorithm's plan (RLlib Flow
§5.3: one training loop composed of the policies' own dataflows).

The multi-agent plan builds, for every trained policy, that algorithm's ordinary plan (``PPO``, ``DQN``, ``SAC``,
...) from the policy's config and the single-agent spec of the agents mapped to it, on a :class:`PolicyExecutor`:
an executor whose worker set (:class:`PolicyWorkerSet`) keeps the worker-set contract
(rlrun/execution/worker_set.py) on the policy's share of one joint sampler
(rlrun/execution/multiagent_sampler.py). So a plan does not know it is in a multi-agent run: it asks its worker
set for ``rollout_steps`` steps and gets a SampleBatch of its agents' columns.

One ``training_step`` of the multi-agent plan calls each trained policy's ``training_step`` in turn, then again
for each policy as long as its queue holds a whole request (what it asked for last time): the policy that asks for
the most steps drives the sampling, and a policy that asks for fewer (DQN's 1-step requests beside PPO's 128)
learns on everything sampled in between, at its own replay ratio. Policies that are not trained (``random``,
``train: false``) only act.

On ``executor=ray`` the sampler runs in a Ray actor with the plans' acting copies (``RemoteSampler``); before it
steps, every policy whose learner's tensors changed sends its weights, so the numbers are those of ``executor=local``.

Metrics: each policy's own under ``policy/<id>/...`` (its losses, its agents' ``episode/return_mean``), and for the
run as a whole ``episode/return_mean`` over every agent's episodes (a per-agent return). Env steps count agent
steps: one action of one agent in one env copy.
"""

from __future__ import annotations

import functools
import os
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from omegaconf import OmegaConf

from rlrun.algos.base import Algorithm, IterationResult
from rlrun.algos.multiagent_config import MultiAgentConfig, check_policy_id, map_agents, policy_entry
from rlrun.errors import ConfigError, RlrunError
from rlrun.execution.multiagent_sampler import (
    LocalSampler,
    MultiAgentSampler,
    RandomPolicy,
    RemoteSampler,
    random_policy_factory,
)
from rlrun.execution.sample_batch import SampleBatch
from rlrun.execution.timing import StageTimer
from rlrun.execution.worker_set import PolicyCopy, get_policy_weights, set_policy_weights, tensor_versions
from rlrun.metric_names import RETURN_MEAN, per_policy
from rlrun.registry import registry

POLICY_SEED_STRIDE = 1000
"""Policy ``k`` (in the order of ``algo.policies``) is built and seeded with ``seed + k * POLICY_SEED_STRIDE``."""
RETURN_WINDOW = 100
"""Episodes in each policy's ``policy/<id>/episode/return_mean``."""
UNTRAINED_STEPS = 32
"""Steps of every env copy per ``training_step`` when no policy is trained (a baseline run)."""
UNSUPPORTED = {"apex": "its actors and replay shards are a distributed plan of their own"}


@dataclass
class FrozenPolicy:
    """A policy to load, frozen, from an earlier run (``checkpoint``, ``checkpoint_policy`` in its entry): the
    plan records it, ``rlrun.checkpoint.load_frozen_policies`` reads the file (file I/O stays above the plans)."""

    pid: str
    path: str
    source: str
    where: str
    agent: Any


class PolicyWorkerSet:
    """The worker-set contract for one policy's plan, served by the shared sampler (module docstring): one
    "worker" whose env copies are the policy's columns. In the driver (``executor=local``) the plan's agent acts
    itself (nothing to sync) unless the plan asks for ``own_policies`` (then a ``policy_factory(0)`` copy gets its
    weights by ``sync_weights``); on ``executor=ray`` the sampler's process acts with a ``policy_factory(0)`` copy,
    and a synchronous sample first sends the learner's weights when the plan has not synced since the last one
    (as the Ray worker set does)."""

    num_workers = 1

    def __init__(self, hub: "MultiAgent", pid: str, policy: Any, acting: Any, timer: StageTimer) -> None:
        self.hub, self.pid, self.learner, self.policy, self.timer = hub, pid, policy, acting, timer
        self.last_request = 0
        self._sent_version: tuple | None = None  # executor=ray: the learner's tensor versions when last sent

    @property
    def num_envs(self) -> int:
        return len(self.hub.columns[self.pid])

    def _count(self, batch: SampleBatch) -> SampleBatch:
        self.timer.add("env_step", batch.env_seconds)
        self.timer.add("inference", batch.inference_seconds)
        return batch

    def _sample(self, num_steps: int, explore: bool) -> SampleBatch:
        self.last_request = int(num_steps)
        if self.hub.sampler.remote:  # every policy acts in the joint sampler: none may act with stale weights
            self.hub.sync_changed_weights()
        return self._count(self.hub.sampler.sample(self.pid, num_steps, explore))

    def sample(self, num_steps: int, explore: bool = True) -> list[SampleBatch]:
        return [self._sample(num_steps, explore)]

    def sample_async(self, num_steps: int, explore: bool = True,
                     min_batches: int = 1) -> Iterator[tuple[SampleBatch, int]]:
        for _ in range(max(int(min_batches), 1)):
            yield self._sample(num_steps, explore), 0

    def drain(self) -> list[tuple[SampleBatch, int]]:
        return []

    def sync_weights(self, weights: Any = None, worker_ids: Sequence[int] | None = None) -> None:
        if self.hub.sampler is not None and self.hub.sampler.remote:
            self.hub.sampler.set_weights(self.pid, get_policy_weights(self.learner) if weights is None else weights)
            self._sent_version = tensor_versions(self.learner) if weights is None else None
        elif self.policy is not self.learner:
            set_policy_weights(self.policy, get_policy_weights(self.learner) if weights is None else weights)

    def sync_if_changed(self) -> None:
        """Send the learner's weights unless its tensors are as they were when last sent (their versions tell)."""
        version = tensor_versions(self.learner)
        if version is None or version != self._sent_version:
            self.sync_weights()

    def worker_pids(self) -> list[int]:
        return [os.getpid()]

    def stop(self) -> None:
        """Nothing of its own to stop: the sampler it draws from is the multi-agent plan's, closed by its stop()."""


class PolicyExecutor:
    """What one policy's plan sees as its executor: worker sets on the shared sampler, the run's stage timer."""

    num_workers = 1

    def __init__(self, hub: "MultiAgent", pid: str, timer: StageTimer) -> None:
        self.hub, self.pid, self.timer = hub, pid, timer
        self.cfg = getattr(hub.executor, "cfg", None)
        self.worker_sets: list[PolicyWorkerSet] = []

    @property
    def num_envs_per_worker(self) -> int:
        return len(self.hub.columns[self.pid])

    def worker_set(self, policy: Any, device: Any = "cpu", policy_factory: Any = None, own_policies: bool = False,
                   info_by_reference: Sequence[str] = ()) -> PolicyWorkerSet:
        if self.worker_sets:
            raise ConfigError(f"algo.policies.{self.pid}: its algorithm builds several worker sets; a multi-agent "
                              f"policy has one share of the env's steps.")
        remote = self.hub.remote
        acting = policy_factory(0) if own_policies and policy_factory is not None and not remote else policy
        self.factory = policy_factory if policy_factory is not None else PolicyCopy(policy)  # for executor=ray
        ws = PolicyWorkerSet(self.hub, self.pid, policy, acting, self.timer)
        if acting is not policy:
            ws.sync_weights()
        self.worker_sets.append(ws)
        return ws

    def replay_shards(self, *args: Any, **kwargs: Any) -> Any:
        raise ConfigError(f"algo.policies.{self.pid}: replay shards are not available to a multi-agent policy.")

    def metrics(self) -> dict[str, float]:
        return {}

    def stop(self) -> None:
        pass


class MultiAgent(Algorithm):
    """The multi-agent plan (module docstring). ``cfg``: :class:`MultiAgentConfig`; ``spec``: the env factory's
    :class:`~rlrun.envs.pettingzoo_env.MultiAgentSpec`; ``executor``: the run's (``executor=local``)."""

    def __init__(self, cfg: MultiAgentConfig, spec: Any, executor: Any, device: torch.device, seed: int) -> None:
        super().__init__(cfg, spec, executor, device, seed)
        if not hasattr(spec, "agents"):
            raise ConfigError(f"algo=multiagent needs a multi-agent env (env=pettingzoo), but env {spec.id} is "
                              f"single-agent. Choose a single-agent algorithm, e.g. algo=ppo.")
        self.remote = type(executor).__name__ == "RayExecutor"
        self.sampler: Any = None  # built once every policy's plan has asked for its worker set
        policies = {str(k): v for k, v in dict(cfg.policies).items()}
        self.agent_policy = map_agents(list(spec.agents), dict(cfg.mapping), policies)
        self.columns = {pid: [(c, a) for c in range(executor.num_envs_per_worker) for a in spec.agents
                              if self.agent_policy[a] == pid] for pid in policies}
        self.timer = executor.timer
        self.plans: dict[str, Algorithm] = {}
        self.executors: dict[str, PolicyExecutor] = {}
        self.policy_specs = {}
        self.frozen: list[FrozenPolicy] = []  # policies to load from earlier runs' checkpoints
        acting: dict[str, Any] = {}
        factories: dict[str, Any] = {}
        total_steps = cfg.total_env_steps
        for k, (pid, entry) in enumerate(policies.items()):
            check_policy_id(str(pid))  # also for a config that was not validated (a checkpoint's)
            agents = [a for a in spec.agents if self.agent_policy[a] == pid]
            if not agents:
                continue  # defined but unmapped: nothing acts with it
            algo, trained, keys = policy_entry(pid, entry)
            where = f"algo.policies.{pid} (agents {', '.join(agents)})"
            pspec = spec.policy_spec(agents, where)
            self.policy_specs[pid] = pspec
            pseed = seed + k * POLICY_SEED_STRIDE
            if algo == "random":
                acting[pid] = RandomPolicy(pspec.action_space, pseed)
                factories[pid] = functools.partial(random_policy_factory, pspec.action_space, pseed)
                continue
            if algo in UNSUPPORTED:
                raise ConfigError(f"{where}: algo={algo} cannot be a multi-agent policy ({UNSUPPORTED[algo]}).")
            share = len(agents) / len(spec.agents)
            pcfg = policy_config(algo, keys, None if total_steps is None else max(1, int(total_steps * share)))
            self.executors[pid] = PolicyExecutor(self, pid, self.timer)
            try:
                plan = registry.get("algo", algo)(pcfg, pspec, self.executors[pid], device, pseed)
            except ConfigError as e:
                raise ConfigError(f"{where}: {e}") from None
            if isinstance(entry, dict) and entry.get("checkpoint") is not None:  # loaded by the caller of the plan
                self.frozen.append(FrozenPolicy(pid, str(entry["checkpoint"]),
                                                str(entry.get("checkpoint_policy") or pid), where, plan.agent))
            acting[pid] = self.executors[pid].worker_sets[0].policy
            factories[pid] = self.executors[pid].factory
            if trained:
                self.plans[pid] = plan
        self.agents = torch.nn.ModuleDict({pid: p.agent for pid, p in self.plans.items()
                                           if isinstance(getattr(p, "agent", None), torch.nn.Module)})
        self.acting = acting
        self.spaces = spaces = {pid: s.observation_space for pid, s in self.policy_specs.items()}
        num_envs = executor.num_envs_per_worker
        # No env factory: restored for eval / export (rlrun.export.restore), so no env copies and no sampler
        # (evaluate() builds its own); otherwise the sampler where the executor runs its workers.
        if getattr(executor, "env_factory", None) is not None:
            if self.remote:
                self.sampler = RemoteSampler(executor, num_envs, seed, factories, self.agent_policy, spaces,
                                             set(self.plans))
            else:
                self.sampler = LocalSampler(executor.env_factory, num_envs, seed, acting, self.agent_policy, spaces,
                                            set(self.plans))
        self.returns = {pid: deque(maxlen=RETURN_WINDOW) for pid in self.policy_specs}

    def sync_changed_weights(self) -> None:
        """executor=ray: before the sampler steps, every policy's acting copy gets its learner's weights where they
        changed (in the driver the learners act themselves, always up to date: the same numbers either way)."""
        for ex in self.executors.values():
            for ws in ex.worker_sets:
                ws.sync_if_changed()

    def training_step(self) -> IterationResult:
        result = IterationResult()
        for pid, plan in self.plans.items():
            workers = self.executors[pid].worker_sets[0]
            metrics: dict[str, float] = {}
            while True:
                r = plan.training_step()
                metrics.update(r.metrics)
                if self.sampler.queued(pid) < max(workers.last_request, 1):
                    break
            result.metrics.update({per_policy(pid, k): v for k, v in metrics.items()})
        if not self.plans:  # only untrained policies (a baseline run): step the copies for a while
            self.sampler.run(UNTRAINED_STEPS)
        result.env_steps = self.sampler.take_env_steps()
        for pid, ret, length, _ in self.sampler.take_episodes():
            result.episode_returns.append(ret)
            result.episode_lengths.append(length)
            self.returns[pid].append(ret)
        for pid, returns in self.returns.items():
            if returns:
                result.metrics[per_policy(pid, RETURN_MEAN)] = float(np.mean(returns))
        return result

    def summary(self) -> dict[str, Any]:
        """What summary.json adds for a multi-agent run: each policy's mean return over its agents' last
        episodes (``RETURN_WINDOW``), null before any ended."""
        return {"policy_return_mean": {pid: float(np.mean(r)) if r else None for pid, r in self.returns.items()}}

    # ------------------------------------------------------------------ acting, checkpoints

    def acting_policy(self) -> Any:
        raise RlrunError("algo=multiagent has one acting policy per policy: see exported_policies().")

    def exported_policies(self) -> dict[str, tuple[Any, Any]]:
        """``policy id -> (acting policy, its spec)`` for every trained policy: what ``export`` writes, one
        directory per policy."""
        return {pid: (plan.acting_policy(), self.policy_specs[pid]) for pid, plan in self.plans.items()}

    def state_dict(self) -> dict[str, Any]:
        return {"policies": {pid: plan.state_dict() for pid, plan in self.plans.items()},
                "sampler": self.sampler.get_state() if self.sampler is not None else None,
                "last_request": {pid: ex.worker_sets[0].last_request for pid, ex in self.executors.items()
                                 if ex.worker_sets},
                "returns": {pid: list(r) for pid, r in self.returns.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for pid, plan in self.plans.items():
            plan.load_state_dict(state["policies"][pid])
        if self.sampler is not None and state.get("sampler") is not None:
            self.sampler.set_state(state["sampler"])  # the env copies and the steps in flight: an exact resume
        for pid, n in state.get("last_request", {}).items():
            if pid in self.executors and self.executors[pid].worker_sets:
                self.executors[pid].worker_sets[0].last_request = int(n)
        for pid, values in state.get("returns", {}).items():
            self.returns[pid].clear()
            self.returns[pid].extend(values)

    def evaluate(self, env_factory: Any, episodes: int, seed: int) -> dict[str, Any]:
        """Greedy play (``explore=False``; ``random`` policies stay random) on one fresh env copy, reset first with
        ``seed``, until every agent has finished ``episodes`` episodes: per-agent returns, and per policy and agent
        their means (``rlrun eval``)."""
        acting = {pid: self.plans[pid].acting_policy() if pid in self.plans
                  # a random policy's own stream, so evaluating leaves training's untouched
                  else RandomPolicy(policy.action_space, seed + k) if isinstance(policy, RandomPolicy) else policy
                  for k, (pid, policy) in enumerate(self.acting.items())}
        sampler = MultiAgentSampler(env_factory, 1, seed, acting, self.agent_policy, self.spaces, collect=set())
        done: list[tuple[str, float, int, str]] = []
        try:
            while min(sum(1 for e in done if e[3] == a) for a in self.spec.agents) < episodes:
                sampler.run(1, explore=False)
                done += sampler.take_episodes()
        finally:
            sampler.close()
        by_agent = {a: [e for e in done if e[3] == a][:episodes] for a in self.spec.agents}
        chosen = [e for a in self.spec.agents for e in by_agent[a]]
        return {"returns": [e[1] for e in chosen], "lengths": [e[2] for e in chosen],
                "agent_return_mean": {a: float(np.mean([e[1] for e in es])) for a, es in by_agent.items()},
                "policy_return_mean": {pid: float(np.mean([e[1] for e in chosen if e[0] == pid]))
                                       for pid in {e[0] for e in chosen}}}

    def stop(self) -> None:
        for plan in self.plans.values():
            plan.stop()
        if self.sampler is not None:
            self.sampler.close()
        super().stop()


def policy_config(algo: str, keys: dict[str, Any], total_env_steps: int | None) -> Any:
    """The config object of a policy trained by ``algo``: its schema's defaults with ``keys`` over them, and the
    learning-rate horizon (``total_env_steps``, where the algorithm has one and ``keys`` leave it unset) at the
    policy's share of the run's budget."""
    schema = registry.schema("algo", algo)
    values = dict(keys)
    if "total_env_steps" in schema.__dataclass_fields__ and "total_env_steps" not in values:
        values["total_env_steps"] = total_env_steps
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), values))
