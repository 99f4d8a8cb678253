"""Joint sampling of a multi-agent environment, split per policy into the one batch form every algorithm reads.

A :class:`MultiAgentSampler` steps ``num_envs`` copies of a PettingZoo parallel env. At each step the live agents
of every copy are grouped by the policy the mapping gives them, and each policy acts once for all its rows (one
forward pass per policy per step, whatever the number of copies and agents). The experience is kept per *column*:
one column per (env copy, agent), advancing only when its agent acts, so an agent that is done before the others,
or one that appears later, leaves no hole and needs no padding.

``sample(policy, T)`` returns the policy's :class:`~rlrun.execution.sample_batch.SampleBatch` of ``T`` steps of
each of its columns (``B`` = env copies x agents mapped to it), stepping the copies until every one of its columns
holds ``T`` steps; what the other policies' columns gathered meanwhile waits in their queues for their own
requests. An episode ends per column (the agent terminated or was truncated): its final observation goes to
``final_obs``, exactly as a single-agent copy's does, so on-policy learners bootstrap and replay memories store
``next_obs`` the same way. ``obs[T]`` of a column whose agent is done and whose copy has not restarted yet is that
final observation again (never read: the step at T - 1 ended its episode).

Turn-based (AEC) envs step the same way, one agent per copy at a time: a column's step is complete at the agent's
next turn (or its episode's end), with the reward it gathered in between (``env.last()``).

Policies that are not trained (a random baseline, a fixed opponent) act, and their episodes count, but no steps
are kept for them. Episodes (per agent: its return and length) and agent steps are handed out by
:meth:`take_episodes` and :meth:`take_env_steps`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.envs.pettingzoo_state import pettingzoo_env_state, set_pettingzoo_env_state
from rlrun.errors import CheckpointError, RlrunError, one_line
from rlrun.execution.ray_placement import await_placement, lost_errors, node_may_be_gone, worker_strategy
from rlrun.execution.rollout_worker import acting_seed
from rlrun.execution.sample_batch import SampleBatch, map_nest, stack_nests
from rlrun.execution.worker_set import from_wire, set_policy_weights, to_wire
from rlrun.ops.action_mask import action_mask_of
from rlrun.plain_data import decode, encode

log = logging.getLogger(__name__)

MAX_IDLE_STEPS = 100_000
"""Env steps a requested column may go without a step of its own before sampling gives up (an agent that never
appears again would otherwise stall the run)."""


@dataclass
class _Step:
    obs: Any
    action: Any
    reward: float
    terminated: bool
    truncated: bool
    final_obs: Any = None
    extras: dict[str, np.ndarray] = field(default_factory=dict)


class RandomPolicy:
    """Acts uniformly at random in ``action_space`` (the ``random`` policy of algo=multiagent): a baseline or an
    opponent; its stream is seeded and saved with the sampler."""

    def __init__(self, action_space: sp.Space, seed: int) -> None:
        self.action_space = action_space
        self.rng = np.random.default_rng(seed)

    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        mask = action_mask_of(obs)
        if mask is not None:  # uniform among the legal actions of each row
            legal = mask.cpu().numpy().astype(bool)
            return torch.as_tensor([self.rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in legal])
        leaf = obs
        while isinstance(leaf, (dict, tuple, list)):
            leaf = next(iter(leaf.values())) if isinstance(leaf, dict) else leaf[0]
        return torch.as_tensor(sp.sample(self.action_space, (int(leaf.shape[0]),), seed=self.rng))


def random_policy_factory(action_space: sp.Space, seed: int, worker_index: int = 0) -> RandomPolicy:
    """A picklable ``worker_index -> RandomPolicy`` (through ``functools.partial``) for a sampler in another
    process."""
    return RandomPolicy(action_space, seed)


class MultiAgentSampler:
    """Steps the env copies for the policies (module docstring).

    ``policies``: policy id -> acting object (``get_actions(obs, explore)``, as a rollout worker's policy);
    ``agent_policy``: agent id -> policy id for every possible agent; ``spaces``: policy id -> its observation
    space; ``collect``: the policies whose steps are kept (the trained ones). Env copy i is reset first with
    ``seed + i``; the acting random stream is seeded from ``(seed, 0)`` as worker 0's.
    """

    def __init__(self, env_factory: Any, num_envs: int, seed: int, policies: dict[str, Any],
                 agent_policy: dict[str, str], spaces: dict[str, sp.Space], collect: set[str]) -> None:
        self.policies, self.agent_policy, self.spaces, self.collect = policies, agent_policy, spaces, set(collect)
        self.envs = [env_factory.make() for _ in range(num_envs)]
        self.turn_based = getattr(env_factory, "api", "parallel") == "aec"
        self.open: dict[tuple[int, str], _Step] = {}  # AEC: each agent's last step, until its next turn
        agents = list(env_factory.spec.agents)
        self.columns = {pid: [(c, a) for c in range(num_envs) for a in agents if agent_policy[a] == pid]
                        for pid in policies}
        self.queues: dict[tuple[int, str], deque[_Step]] = {key: deque() for cols in self.columns.values()
                                                           for key in cols}
        self.pending: dict[tuple[int, str], Any] = {}
        self.returns: dict[tuple[int, str], float] = {}
        self.lengths: dict[tuple[int, str], int] = {}
        self.episodes: list[tuple[str, float, int, str]] = []  # (policy, return, length, agent) as episodes end
        self.env_steps = 0  # agent steps taken since the last take_env_steps()
        self.env_seconds = self.inference_seconds = 0.0
        torch_state = torch.get_rng_state()
        torch.manual_seed(acting_seed(seed, 0))
        self.rng_state = torch.get_rng_state()
        torch.set_rng_state(torch_state)
        for c in range(num_envs):
            self._reset(c, seed + c)

    def _reset(self, c: int, seed: int | None = None) -> None:
        if self.turn_based:
            self.envs[c].reset(seed=seed)
            for agent in self.envs[c].agents:
                self.returns[(c, agent)], self.lengths[(c, agent)] = 0.0, 0
            self._to_next_turn(c)
            return
        obs, _ = self.envs[c].reset(seed=seed)
        for agent, o in obs.items():
            self.pending[(c, agent)] = o
            self.returns[(c, agent)], self.lengths[(c, agent)] = 0.0, 0

    def _to_next_turn(self, c: int) -> None:
        """AEC: settle copy ``c`` until an agent must act (its observation in ``pending``): complete each selected
        agent's open step with what ``last()`` says, pass the turns of agents that are done, restart the copy
        when no agent is left."""
        env = self.envs[c]
        while True:
            if not env.agents:
                env.reset()
                for agent in env.agents:
                    self.returns[(c, agent)], self.lengths[(c, agent)] = 0.0, 0
            agent = env.agent_selection
            key = (c, agent)
            obs, reward, terminated, truncated, _ = env.last()
            done = bool(terminated or truncated)
            self.returns[key] += float(reward)
            step = self.open.pop(key, None)
            if step is not None:
                step.reward, step.terminated, step.truncated = float(reward), bool(terminated), bool(truncated)
                step.final_obs = obs if done else None
                self.queues[key].append(step)
            if not done:
                self.pending[key] = obs
                return
            pid = self.agent_policy[agent]
            self.episodes.append((pid, self.returns[key], self.lengths[key], key[1]))
            self.returns[key], self.lengths[key] = 0.0, 0
            self.pending[key] = None
            env.step(None)

    # ------------------------------------------------------------------ sampling

    def sample(self, pid: str, num_steps: int, explore: bool = True) -> SampleBatch:
        """``num_steps`` steps of each of policy ``pid``'s columns as one SampleBatch (module docstring)."""
        keys = self.columns[pid]
        idle = 0
        outer = torch.get_rng_state()
        torch.set_rng_state(self.rng_state)
        env_s, inf_s = self.env_seconds, self.inference_seconds
        try:
            with torch.inference_mode():
                while min(len(self.queues[k]) for k in keys) < num_steps:
                    before = sum(len(self.queues[k]) for k in keys)
                    self._step(explore)
                    idle = 0 if sum(len(self.queues[k]) for k in keys) > before else idle + 1
                    if idle > MAX_IDLE_STEPS:
                        short = [f"{a} of copy {c}" for c, a in keys if len(self.queues[(c, a)]) < num_steps]
                        raise RlrunError(f"multi-agent sampling: policy {pid}'s agents ({', '.join(short[:3])}) took "
                                         f"no step in {MAX_IDLE_STEPS} env steps; an agent that leaves for good "
                                         f"cannot fill its policy's batches. Map it to a policy of its own.")
        finally:
            self.rng_state = torch.get_rng_state()
            torch.set_rng_state(outer)
        batch = self._batch(keys, num_steps)
        batch.env_seconds, batch.inference_seconds = self.env_seconds - env_s, self.inference_seconds - inf_s
        return batch

    def run(self, num_steps: int, explore: bool = True) -> None:
        """Step every env copy ``num_steps`` times (a run whose policies are all untrained: nothing requests)."""
        outer = torch.get_rng_state()
        torch.set_rng_state(self.rng_state)
        try:
            with torch.inference_mode():
                for _ in range(num_steps):
                    self._step(explore)
        finally:
            self.rng_state = torch.get_rng_state()
            torch.set_rng_state(outer)

    def queued(self, pid: str) -> int:
        """Steps every column of ``pid`` holds already (what a request of that many steps takes without stepping)."""
        return min(len(self.queues[k]) for k in self.columns[pid])

    def _acting(self) -> list[tuple[int, str]]:
        """The (copy, agent) rows that act now: every live agent (parallel), the agent whose turn it is (AEC)."""
        if self.turn_based:
            return [(c, env.agent_selection) for c, env in enumerate(self.envs)]
        return [(c, agent) for c, env in enumerate(self.envs) for agent in env.agents]

    def _step(self, explore: bool) -> None:
        """One step of every env copy: each policy acts for its acting agents' rows, then the copies step."""
        rows: dict[str, list[tuple[int, str]]] = {}
        for c, agent in self._acting():
            rows.setdefault(self.agent_policy[agent], []).append((c, agent))
        t0 = time.perf_counter()
        actions: dict[tuple[int, str], Any] = {}
        extras: dict[tuple[int, str], dict[str, np.ndarray]] = {}
        for pid, keys in rows.items():
            policy = self.policies[pid]
            obs = stack_nests([self.pending[k] for k in keys])
            out = policy.get_actions(sp.to_torch(self.spaces[pid], obs, _device_of(policy)), explore=explore)
            acted, recorded = out if isinstance(out, tuple) else (out, {})
            acted = acted.cpu().numpy()
            recorded = {name: v.cpu().numpy() for name, v in recorded.items()}
            for i, k in enumerate(keys):
                actions[k] = acted[i]
                if pid in self.collect:
                    extras[k] = {name: v[i] for name, v in recorded.items()}
        t1 = time.perf_counter()
        if self.turn_based:
            self._step_turns(actions, extras)
        else:
            self._step_parallel(actions, extras)
        self.env_seconds += time.perf_counter() - t1
        self.inference_seconds += t1 - t0

    def _step_turns(self, actions: dict[tuple[int, str], Any], extras: dict[tuple[int, str], dict]) -> None:
        for (c, agent), action in actions.items():
            key = (c, agent)
            if self.agent_policy[agent] in self.collect:
                self.open[key] = _Step(self.pending[key], action, 0.0, False, False, None, extras[key])
            self.lengths[key] += 1
            self.env_steps += 1
            self.envs[c].step(action)
            self._to_next_turn(c)

    def _step_parallel(self, actions: dict[tuple[int, str], Any], extras: dict[tuple[int, str], dict]) -> None:
        for c, env in enumerate(self.envs):
            acting = {agent: actions[(c, agent)] for agent in env.agents}
            if not acting:
                continue
            obs, rewards, terminated, truncated, _ = env.step(acting)
            self.env_steps += len(acting)
            for agent, action in acting.items():
                key = (c, agent)
                pid = self.agent_policy[agent]
                reward = float(rewards.get(agent, 0.0))
                term, trunc = bool(terminated.get(agent, False)), bool(truncated.get(agent, False))
                done = term or trunc
                self.returns[key] += reward
                self.lengths[key] += 1
                if pid in self.collect:
                    self.queues[key].append(_Step(self.pending[key], action, reward, term, trunc,
                                                  obs[agent] if done else None, extras[key]))
                if done:
                    self.episodes.append((pid, self.returns[key], self.lengths[key], key[1]))
                    self.returns[key], self.lengths[key] = 0.0, 0
                    self.pending[key] = None
                else:
                    self.pending[key] = obs[agent]
            for agent, o in obs.items():  # agents that appeared at this step act from the next one
                if agent not in acting:
                    self.pending[(c, agent)] = o
                    self.returns[(c, agent)], self.lengths[(c, agent)] = 0.0, 0
            if not env.agents:
                self._reset(c)

    def _batch(self, keys: list[tuple[int, str]], n: int) -> SampleBatch:
        """The first ``n`` queued steps of each column, time-major (the columns in order along B)."""
        steps = [[self.queues[k].popleft() for _ in range(n)] for k in keys]
        last = []
        for k, col in zip(keys, steps, strict=True):
            if self.queues[k]:
                last.append(self.queues[k][0].obs)
            elif col[-1].final_obs is None:
                last.append(self.pending[k])
            else:  # done, and its copy has not restarted: never read (module docstring)
                last.append(self.pending[k] if self.pending.get(k) is not None else col[-1].final_obs)
        obs = stack_nests([stack_nests([col[t].obs for col in steps]) for t in range(n)] + [stack_nests(last)])
        finals = [steps[b][t].final_obs for t in range(n) for b in range(len(keys))
                  if steps[b][t].final_obs is not None]
        final_obs = (stack_nests(finals) if finals
                     else map_nest(lambda x: np.empty((0, *np.shape(x)[2:]), np.asarray(x).dtype), obs))
        field_of = {"actions": lambda s: s.action, "rewards": lambda s: s.reward,
                    "terminated": lambda s: s.terminated, "truncated": lambda s: s.truncated}
        arrays = {name: np.array([[get(col[t]) for col in steps] for t in range(n)]) for name, get in field_of.items()}
        extras = {name: np.stack([np.stack([col[t].extras[name] for col in steps]) for t in range(n)])
                  for name in steps[0][0].extras}
        return SampleBatch(obs, arrays["actions"], arrays["rewards"].astype(np.float32), arrays["terminated"],
                           arrays["truncated"], final_obs, extras=extras)

    # ------------------------------------------------------------------ counts

    def take_episodes(self) -> list[tuple[str, float, int, str]]:
        """``(policy, return, length, agent)`` of each agent episode that ended since the last call, in the order
        they ended."""
        out, self.episodes = self.episodes, []
        return out

    def take_env_steps(self) -> int:
        """Agent steps taken (all agents, all copies) since the last call."""
        n, self.env_steps = self.env_steps, 0
        return n

    def get_state(self) -> dict[str, Any]:
        """Everything sampling goes on from, as plain data (checkpoint state): the env copies
        (rlrun/envs/pettingzoo_state.py), the queued and open steps, the observations each agent acts on next,
        the running episode returns and lengths, the episodes and steps not yet handed out, the acting random
        stream and the random policies' streams. Restored into a sampler built the same way, sampling goes on
        exactly as if never stopped."""
        def key(k: tuple[int, str]) -> str:
            return f"{k[0]}|{k[1]}"

        return {"envs": [pettingzoo_env_state(env) for env in self.envs],
                "queues": {key(k): [encode(dataclasses.asdict(s)) for s in q] for k, q in self.queues.items()},
                "open": {key(k): encode(dataclasses.asdict(s)) for k, s in self.open.items()},
                "pending": {key(k): encode(v) for k, v in self.pending.items()},
                "returns": {key(k): float(v) for k, v in self.returns.items()},
                "lengths": {key(k): int(v) for k, v in self.lengths.items()},
                "episodes": [list(e) for e in self.episodes], "env_steps": self.env_steps,
                "rng_state": self.rng_state.clone(), "random": encode(self.random_states())}

    def set_state(self, state: dict[str, Any]) -> None:
        def key(k: str) -> tuple[int, str]:
            c, _, agent = k.partition("|")
            return int(c), agent

        if len(state["envs"]) != len(self.envs):
            raise CheckpointError(f"the checkpoint holds {len(state['envs'])} env copies but the run has "
                                  f"{len(self.envs)}")
        for env, env_state in zip(self.envs, state["envs"], strict=True):
            set_pettingzoo_env_state(env, env_state)
        for k in self.queues:
            self.queues[k] = deque(_Step(**decode(s)) for s in state["queues"].get(f"{k[0]}|{k[1]}", []))
        self.open = {key(k): _Step(**decode(s)) for k, s in state["open"].items()}
        self.pending = {key(k): decode(v) for k, v in state["pending"].items()}
        self.returns = {key(k): float(v) for k, v in state["returns"].items()}
        self.lengths = {key(k): int(v) for k, v in state["lengths"].items()}
        self.episodes = [(str(p), float(r), int(n), str(a)) for p, r, n, a in state["episodes"]]
        self.env_steps = int(state["env_steps"])
        self.rng_state = state["rng_state"].clone()
        self.set_random_states(decode(state["random"]))

    def random_states(self) -> dict[str, Any]:
        """The random streams of the ``random`` policies (checkpoint state)."""
        return {pid: p.rng.bit_generator.state for pid, p in self.policies.items() if isinstance(p, RandomPolicy)}

    def set_random_states(self, states: dict[str, Any]) -> None:
        for pid, state in states.items():
            self.policies[pid].rng.bit_generator.state = state

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _device_of(policy: Any) -> torch.device:
    parameters = getattr(policy, "parameters", None)
    p = next(parameters(), None) if callable(parameters) else None
    return p.device if p is not None else torch.device("cpu")


# ---------------------------------------------------------------------------------------------------- executors


class LocalSampler:
    """The sampler in the driver (``executor=local``): the plans' own agents act (nothing to sync)."""

    remote = False

    def __init__(self, env_factory: Any, num_envs: int, seed: int, policies: dict[str, Any],
                 agent_policy: dict[str, str], spaces: dict[str, sp.Space], collect: set[str]) -> None:
        self.sampler = MultiAgentSampler(env_factory, num_envs, seed, policies, agent_policy, spaces, collect)
        self.columns = self.sampler.columns

    def __getattr__(self, name: str) -> Any:  # sample, queued, run, take_episodes, take_env_steps, close
        return getattr(self.sampler, name)

    def set_weights(self, pid: str, weights: Any) -> None:
        set_policy_weights(self.sampler.policies[pid], weights)


class RemoteSampler:
    """The sampler in its own process (``executor=ray``: one Ray actor, ``executor.cpus_per_worker`` CPUs), acting
    with policies built there by the plans' factories; weights arrive with ``set_weights`` (the same numbers as
    :class:`LocalSampler` for the same weights and seed: the acting random stream is the sampler's own). When its
    process or node dies, a call to it starts a replacement as the Ray worker set replaces a worker (counted, away
    from a node that may be gone, with the last weights; the steps it held are lost) and is made again."""

    remote = True

    class Actor:
        def __init__(self, env_factory: Any, num_envs: int, seed: int, factories: dict[str, Any],
                     agent_policy: dict[str, str], spaces: dict[str, sp.Space], collect: set[str]) -> None:
            torch.set_num_threads(1)
            policies = {pid: factory(0) for pid, factory in factories.items()}
            self.sampler = MultiAgentSampler(env_factory, num_envs, seed, policies, agent_policy, spaces, collect)

        def call(self, method: str, *args: Any) -> Any:
            return getattr(self.sampler, method)(*args)

        def set_weights(self, pid: str, weights: Any) -> None:
            set_policy_weights(self.sampler.policies[pid], from_wire(weights))

        def node_id(self) -> str:
            import ray

            return ray.get_runtime_context().get_node_id()

    def __init__(self, executor: Any, num_envs: int, seed: int, factories: dict[str, Any],
                 agent_policy: dict[str, str], spaces: dict[str, sp.Space], collect: set[str]) -> None:
        """``executor``: the run's Ray executor (its settings, env factory and restart counter)."""
        env_factory = executor.env_factory
        self.executor, self.cfg = executor, executor.cfg
        self.columns = {pid: [(c, a) for c in range(num_envs) for a in env_factory.spec.agents
                              if agent_policy[a] == pid] for pid in factories}
        self._args = (env_factory, num_envs, seed, factories, agent_policy, spaces, collect)
        self._weights: dict[str, Any] = {}  # the last weights sent per policy: a replacement gets them
        self._node: str | None = None
        self.actor: Any = None
        try:
            self.actor = self._start(frozenset())
        except lost_errors() as e:
            if getattr(e, "actor_init_failed", False):  # its constructor raised: a bad build, not a loss
                raise
            self._restart(e)  # its process or node went while it started

    def _start(self, avoid: frozenset[str]) -> Any:
        """A sampler actor, on no node in ``avoid``, with the last weights of every policy; a replacement (after
        ``r`` restarts of the run's actors) seeds its env copies past every seed used so far."""
        import ray

        env_factory, num_envs, seed, *rest = self._args
        r = int(self.executor.restarts)
        actor_class = ray.remote(num_cpus=float(self.cfg.cpus_per_worker), max_restarts=0,
                                 scheduling_strategy=worker_strategy(self.cfg, avoid))(RemoteSampler.Actor)
        actor = actor_class.remote(env_factory, num_envs, seed + r * num_envs, *rest)
        self._node = await_placement(actor.node_id.remote(), "the multi-agent sampler",
                                     float(self.cfg.cpus_per_worker), float(self.cfg.restart_timeout_s), again=r > 0)
        ray.get([actor.set_weights.remote(pid, w) for pid, w in self._weights.items()])
        return actor

    def _restart(self, error: BaseException) -> None:
        """Replace the sampler (its process or its node died): new env copies, the last weights, the steps it held
        lost; counted in ``executor/worker_restarts`` within ``executor.max_worker_restarts``. A replacement that
        dies while starting is one more loss."""
        import ray

        avoid: set[str] = set()
        here = ray.get_runtime_context().get_node_id()
        while True:
            ex = self.executor
            ex.restarts += 1
            if ex.restarts > int(self.cfg.max_worker_restarts):
                raise RlrunError(f"the multi-agent sampler died ({one_line(error)}) and the run has restarted its "
                                 f"actors {ex.restarts - 1} times already (executor.max_worker_restarts="
                                 f"{self.cfg.max_worker_restarts}); stopping.") from error
            log.warning("the multi-agent sampler died (%s); starting a new one (restart %d)", one_line(error),
                        ex.restarts)
            if node_may_be_gone(error) and self._node not in (None, here):
                avoid.add(self._node)
            try:
                ray.kill(self.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - it is dead already
                pass
            try:
                self.actor = self._start(frozenset(avoid))
                return
            except lost_errors() as e:
                error = e

    def _call(self, method: str, *args: Any) -> Any:
        import ray

        while True:
            try:
                return ray.get(self.actor.call.remote(method, *args))
            except lost_errors() as e:
                self._restart(e)

    def sample(self, pid: str, num_steps: int, explore: bool = True) -> SampleBatch:
        from rlrun.execution.ray_actor import owned  # lazily: it imports ray, which a local run never needs

        return owned(self._call("sample", pid, num_steps, explore))

    def queued(self, pid: str) -> int:
        return self._call("queued", pid)

    def run(self, num_steps: int, explore: bool = True) -> None:
        self._call("run", num_steps, explore)

    def random_states(self) -> dict[str, Any]:
        return self._call("random_states")

    def get_state(self) -> dict[str, Any]:
        return self._call("get_state")

    def set_state(self, state: dict[str, Any]) -> None:
        self._call("set_state", state)

    def set_random_states(self, states: dict[str, Any]) -> None:
        self._call("set_random_states", states)

    def take_episodes(self) -> list[tuple[str, float, int, str]]:
        return self._call("take_episodes")

    def take_env_steps(self) -> int:
        return self._call("take_env_steps")

    def set_weights(self, pid: str, weights: Any) -> None:
        import ray

        self._weights[pid] = to_wire(weights)
        try:
            ray.get(self.actor.set_weights.remote(pid, self._weights[pid]))
        except lost_errors() as e:
            self._restart(e)  # the replacement gets these weights as it starts

    def close(self) -> None:
        import ray

        try:
            ray.get(self.actor.call.remote("close"), timeout=10)
        except Exception:  # noqa: BLE001 - an actor already gone
            pass
        ray.kill(self.actor)
