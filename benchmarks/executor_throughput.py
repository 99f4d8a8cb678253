"""Acting throughput of executor=local and executor=ray against the machine's serial limit; Ray start-up and memory.

For each setting (an env and a total of N env copies), in one process and interleaved round by round:

(a) **raw env**: N env copies of rlrun's env factory (``env=<env>``, gymnasium backend, sync vector env) stepped
    with random actions drawn up front: agent steps/s;
(b) **bare policy**: the same network written by hand in plain PyTorch (Nature CNN on Atari, an MLP on CartPole),
    uint8 frames -> float -> network -> argmax -> numpy, batch N, inference mode, one thread: observations/s;
(c) **acting**: a greedy Q policy (``rlrun.components.networks.NatureCNN`` or ``MLP`` + ``QHead`` + argmax) acting
    through an executor's worker set, ``sample(16, explore=False)`` over and over, no learning: env steps/s, for
    ``executor=local`` (one worker, N copies), ``executor=ray`` with one worker of N copies (synchronous ``sample``
    and ``sample_async`` with 2 requests in flight), and ``executor=ray`` with two workers of N/2 copies.

The serial limit is ``1 / (1/a + 1/b)`` (DESIGN.md, "Performance model"): env and policy one after the other on
one core. Each acting figure is reported as ``fraction_of_limit/...`` (median over rounds of the per-round ratio;
goal: local >= 0.8) and the Ray ones also as ``ray_vs_local/...`` (goal: >= 0.8 with the same number of workers).
Two workers run on two cores at once, so their fraction can pass 1.

**Ray start-up** (``--startup-runs N``, default 3): in N fresh processes per variant, alternated, seconds from
building a ``RayExecutor`` (it calls ``ray.init``: a new local cluster) to the first rollout of its workers (Pong,
two workers x 4 copies), split into ``ray.init`` and worker start, with the default ``executor.preload_modules``
(``ray_startup/...``) and with ``[]`` (``ray_startup/no_preload/...``), and joining a running cluster
(``ray_startup/existing_cluster/...``: ``executor.address`` of a ``ray start --head`` of the benchmark's own, default
preloading; the issue's goal: <= 3 s); medians. **Memory**: resident (RSS) and
proportional (PSS, shared pages split between processes) memory of the Ray processes at that moment (the
cluster's daemons and the two workers; not the driver).

**Transfer** (``--no-transfer`` skips it): one rollout's frames (16 x 64 x 4 x 84 x 84 uint8, 28.9 MB) from a
worker actor to this process through Ray's object store vs the shared-memory slots of
``executor.observation_transfer=shared_memory``, interleaved: ms per rollout, GB/s, CPU ms of each side.

**envpool settings** (``pong+envpool:N``: ``env=pong env.backend=envpool``, the same DeepMind protocol stepped
in envpool's C++ threads): (a) is envpool's pool of N copies (its threads on every core), and the acting sides are
``local`` (sync), ``local_pipelined`` (``executor.vector_mode=pipelined``: two groups of N/2 copies, one stepping
in envpool's threads while the policy acts on the other; one envpool thread per group), and Ray with the pipelined
workers (one worker of N copies; two workers of N/2). Figure keys write ``pong+envpool`` as
``pong_envpool``. The serial limit stays ``1/(1/a + 1/b)`` with (b) at batch N (a pipelined worker's
forward sees N/2 observations, a little slower per observation, so this limit is the stricter one); overlapping
env stepping and inference on two cores is how a pipelined worker can pass it. ``vs_rllib_peer/...`` divides
frames/s by RLlib's 2.6k frames/s (:data:`RLLIB_PEER_FRAMES_PER_S`). ``cpu_ms_per_step/...`` (local sides and
(a), (b)) is this process's CPU time (all its threads, envpool's included) per agent step: what a step costs
whatever else runs on the cores; ``cpu_bound/...`` = cores / that cost is the rate the cost allows with every
core free (a ceiling derived from CPU time, not a wall-clock measurement).

**Dynamic batching** (TorchBeast/IMPALA style; ``--batching``): two env-worker processes of n Pong copies each,
exchanging observations and actions with this process through shared memory; either this process runs one
forward on the 2n observations of both (central, batched inference), or each worker runs its own forward on n
(per-worker inference, what rlrun's workers do). Both built the same way, so the ratio is the gain of batching.

    python -m benchmarks.executor_throughput [--quick] [--seconds S] [--rounds N]
                                             [--settings pong:8,pong+envpool:64,cartpole:8] [--no-batching]
                                             [--no-transfer] [--startup-runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks.common import load_average, write_result
from benchmarks.peers.processes import children_by_parent, cpu_seconds
from rlrun import spaces as sp

ROLLOUT_STEPS = 16  # agent steps per env copy per sample() call (DQN's default algo.rollout_steps)
SETTINGS = (("pong", 8), ("pong+envpool", 64), ("cartpole", 8))
RLLIB_PEER_FRAMES_PER_S = 2600.0
"""RLlib 2.60 PPO sampling Pong with 2 env runners on this machine class (issue 4; MEASURED.md): ~650 agent steps/s
= 2.6k frames/s (its own 64x64 Atari preprocessing), ~17 s from ``ray.init`` to its first sample."""


RLLIB_PEER_STARTUP_S = 17.0  # RLlib's ray.init -> first sample, same source


def python_imports_seconds() -> float:
    """Wall seconds of a fresh ``python -c "import torch, gymnasium, ale_py"``: what every rollout worker process
    pays before it can build its policy and env copies (part of Ray's worker start-up)."""
    import subprocess

    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, gymnasium, ale_py"], check=True, capture_output=True)
    return round(time.perf_counter() - start, 2)


# ---------------------------------------------------------------------------------------------------- policies


class GreedyQPolicy(nn.Module):
    """rlrun's components acting greedily: torso (NatureCNN for image observations, else MLP 64-64) -> QHead ->
    argmax. Built from the spaces, as an agent builds them."""

    def __init__(self, obs_space: sp.Space, action_space: sp.Space, seed: int = 0) -> None:
        from rlrun.components.heads import QHead
        from rlrun.components.networks import MLP, NatureCNN

        super().__init__()
        torch.manual_seed(seed)
        image = len(obs_space.shape) == 3
        self.torso = (NatureCNN(name="torso") if image else MLP([64, 64], "relu", name="torso")).build(obs=obs_space)
        self.head = QHead("q_head").build(x=self.torso.output_spaces["forward"], actions=action_space)

    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        return self.head.get_q(self.torso(obs)).argmax(dim=-1)


class GreedyQFactory:
    """``policy_factory`` for remote workers: builds the same policy inside each worker (weights then synced)."""

    def __init__(self, obs_space: sp.Space, action_space: sp.Space) -> None:
        self.obs_space, self.action_space = obs_space, action_space

    def __call__(self, worker_index: int) -> GreedyQPolicy:
        return GreedyQPolicy(self.obs_space, self.action_space).eval()


def bare_network(obs_space: sp.Space, num_actions: int) -> nn.Sequential:
    """The network written by hand: Nature CNN (Mnih et al. 2015: conv 32x8x8/4, 64x4x4/2, 64x3x3/1, fc 512) or an
    MLP 64-64, then a linear layer to the action values."""
    if len(obs_space.shape) == 3:
        c, h, w = obs_space.shape
        for kernel, stride in ((8, 4), (4, 2), (3, 1)):
            h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
        return nn.Sequential(nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
                             nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(64 * h * w, 512), nn.ReLU(), nn.Linear(512, num_actions))
    width = int(np.prod(obs_space.shape))
    return nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, num_actions))


def bare_act(net: nn.Module, obs: np.ndarray) -> np.ndarray:
    x = torch.from_numpy(obs)
    x = x.to(torch.float32) * (1.0 / 255.0) if x.dtype == torch.uint8 else x.to(torch.float32)
    return net(x).argmax(dim=1).numpy()


# ---------------------------------------------------------------------------------------------------- helpers


def serial_limit(env_rate: float, policy_rate: float) -> float:
    """Steps/s when every step needs an env step and a policy step one after the other on the same core:
    ``1 / (1/env_rate + 1/policy_rate)`` (e.g. 3000 and 1500 steps/s -> 1000 steps/s)."""
    return 1.0 / (1.0 / env_rate + 1.0 / policy_rate)


def timed(step: Any, seconds: float, cpu: list[float] | None = None) -> float:
    """Units per second of ``step() -> units`` called for ``seconds``; appends this process's CPU seconds per unit
    (all threads) to ``cpu`` when given."""
    units, start, cpu0 = 0, time.perf_counter(), time.process_time()
    while True:
        units += step()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            if cpu is not None:
                cpu.append((time.process_time() - cpu0) / units)
            return units / elapsed


def compose_env(env: str, *overrides: str) -> Any:
    """The env factory of ``env``: an option of the env config group, ``+<backend>`` for another backend
    (``pong+envpool``: ``env=pong env.backend=envpool``), then config ``overrides`` (``env.envpool_threads=1``)."""
    from rlrun.config import compose
    from rlrun.registry import registry

    name, _, backend = env.partition("+")
    cfg = compose([f"env={name}", *([f"env.backend={backend}"] if backend else []), *overrides])
    return registry.build("env", cfg.env.name, cfg.env)


def _memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process in KiB, from /proc (0 where unreadable)."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def ray_memory() -> dict[str, Any]:
    """RSS and PSS (MiB) of the Ray processes of the cluster this process started: its daemons (gcs, raylet, ...)
    and their descendants (the workers); this driver excluded. Also ``cpu_s``: the CPU seconds they have used."""
    import ray._private.worker as ray_worker

    node = ray_worker._global_node
    roots = [p.process.pid for infos in node.all_processes.values() for p in infos if p.process is not None]
    tree = children_by_parent()
    pids, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in pids or pid == os.getpid():
            continue
        pids.add(pid)
        todo += tree.get(pid, [])
    mem = [_memory_kib(p) for p in pids]
    cpu = sum(cpu_seconds(p, waited_children=True) for p in pids)
    return {"processes": len(pids), "rss_mib": round(sum(r for r, _ in mem) / 1024, 1),
            "pss_mib": round(sum(p for _, p in mem) / 1024, 1), "cpu_s": round(cpu, 2)}


# ---------------------------------------------------------------------------------------------------- a setting


class Setting:
    """One env x N copies: raw env, bare policy and the executors' worker sets, built once, timed in rounds."""

    def __init__(self, env: str, num_envs: int, seed: int = 0) -> None:
        self.env, self.num_envs, self.seed = env, num_envs, seed
        self.factory = compose_env(env)
        self.spec = self.factory.spec
        n_actions = int(self.spec.action_space.n)
        self.envs = self.factory.make_vector(num_envs, "sync")
        self.obs, _ = self.envs.reset(seed=[seed + i for i in range(num_envs)])
        self.actions = np.random.default_rng(seed).integers(0, n_actions, (4096, num_envs))
        self.k = 0
        self.bare = bare_network(self.spec.observation_space, n_actions).eval()
        self.policy = GreedyQPolicy(self.spec.observation_space, self.spec.action_space, seed).eval()
        self.executors: dict[str, Any] = {}
        self.worker_sets: dict[str, Any] = {}

    def add(self, label: str, name: str, env_overrides: tuple[str, ...] = (), **cfg: Any) -> tuple[float, float]:
        """Build executor ``name`` (config overrides ``cfg``; its env factory with ``env_overrides``) and its worker
        set; (executor build seconds, seconds from then to its first rollout)."""
        from omegaconf import OmegaConf

        from rlrun.config import LocalExecutorConfig, RayExecutorConfig
        from rlrun.registry import registry

        schema = LocalExecutorConfig if name == "local" else RayExecutorConfig
        factory = compose_env(self.env, *env_overrides) if env_overrides else self.factory
        t0 = time.perf_counter()
        executor = registry.build("executor", name, OmegaConf.structured(schema(**cfg)), factory, self.seed)
        t1 = time.perf_counter()
        ws = executor.worker_set(self.policy, "cpu",
                                 policy_factory=GreedyQFactory(self.spec.observation_space, self.spec.action_space))
        ws.sample(1, explore=False)
        t2 = time.perf_counter()
        self.executors[label], self.worker_sets[label] = executor, ws
        return t1 - t0, t2 - t1

    def raw_env(self, seconds: float, cpu: list[float] | None = None) -> float:
        def step() -> int:
            self.envs.step(self.actions[self.k & 4095])
            self.k += 1
            return self.num_envs

        return timed(step, seconds, cpu)

    def bare_policy(self, seconds: float, cpu: list[float] | None = None) -> float:
        obs = np.ascontiguousarray(self.obs)
        with torch.inference_mode():
            return timed(lambda: (bare_act(self.bare, obs), self.num_envs)[1], seconds, cpu)

    def acting(self, label: str, seconds: float, asynchronous: bool = False) -> tuple[float, dict[str, float], float]:
        """(env steps/s, share of the wall time per stage from the executor's timer: env_step and inference summed
        over workers, transfer and wait in this process; this process's CPU seconds per env step)."""
        ws, executor = self.worker_sets[label], self.executors[label]
        executor.metrics()  # reset the stage timer
        steps, start, cpu0 = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - start < seconds:
            if asynchronous:
                steps += sum(b.env_steps for b, _ in ws.sample_async(ROLLOUT_STEPS, explore=False))
            else:
                steps += sum(b.env_steps for b in ws.sample(ROLLOUT_STEPS, explore=False))
        elapsed = time.perf_counter() - start
        cpu = (time.process_time() - cpu0) / steps
        shares = {k[len("time/"):-2]: v / elapsed for k, v in executor.metrics().items() if k.startswith("time/")}
        ws.drain()  # leave the workers idle for the next measurement
        return steps / elapsed, shares, cpu

    def close(self) -> None:
        self.envs.close()
        owners = [e for e in self.executors.values() if getattr(e, "_started_ray", False)]
        for e in [e for e in self.executors.values() if e not in owners] + owners:  # the cluster's owner last
            e.stop()


# ---------------------------------------------------------------------------------------------------- batching


def _batching_worker(conn: Any, env: str, n: int, index: int, shm_obs: str, shm_act: str, shape: tuple,
                     local_inference: bool, seed: int) -> None:
    """An env worker of the dynamic-batching experiment: n env copies; per step it writes its observations into
    shared memory and either waits for actions from the inference process or computes them itself."""
    from multiprocessing import shared_memory

    torch.set_num_threads(1)
    factory = compose_env(env)
    envs = factory.make_vector(n, "sync")
    obs, _ = envs.reset(seed=[seed + index * n + i for i in range(n)])
    obs_mem, act_mem = shared_memory.SharedMemory(shm_obs), shared_memory.SharedMemory(shm_act)
    obs_buf = np.ndarray((n, *shape), np.uint8, obs_mem.buf)
    act_buf = np.ndarray((n,), np.int64, act_mem.buf)
    net = bare_network(factory.spec.observation_space, int(factory.spec.action_space.n)).eval() \
        if local_inference else None
    conn.send("ready")
    steps = 0
    with torch.inference_mode():
        while True:
            if conn.poll() and conn.recv() == "stop":
                break
            if net is not None:
                actions = bare_act(net, obs)
            else:
                obs_buf[:] = obs
                conn.send(index)
                if conn.recv() == "stop":
                    break
                actions = act_buf.copy()
            obs, *_ = envs.step(actions)
            steps += n
    conn.send(("steps", steps))
    del obs_buf, act_buf
    obs_mem.close()
    act_mem.close()
    envs.close()


def dynamic_batching(env: str, workers: int, n: int, seconds: float, central: bool, seed: int = 0) -> float:
    """Agent steps/s of ``workers`` env-worker processes of ``n`` copies each, with central batched inference in
    this process (``central``) or per-worker inference; see the module docstring."""
    import multiprocessing as mp
    from multiprocessing import connection, shared_memory

    factory = compose_env(env)
    shape = tuple(factory.spec.observation_space.shape)
    net = bare_network(factory.spec.observation_space, int(factory.spec.action_space.n)).eval()
    ctx = mp.get_context("spawn")
    mems, procs, conns = [], [], []
    for w in range(workers):
        obs_mem = shared_memory.SharedMemory(create=True, size=int(np.prod(shape)) * n)
        act_mem = shared_memory.SharedMemory(create=True, size=8 * n)
        mems.append((obs_mem, act_mem))
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_batching_worker, args=(child, env, n, w, obs_mem.name, act_mem.name, shape,
                                                       not central, seed), daemon=True)
        p.start()
        procs.append(p)
        conns.append(parent)
    views = [(np.ndarray((n, *shape), np.uint8, o.buf), np.ndarray((n,), np.int64, a.buf)) for o, a in mems]
    try:
        for c in conns:
            assert c.recv() == "ready"
        start = time.perf_counter()
        with torch.inference_mode():
            while time.perf_counter() - start < seconds:
                if not central:
                    time.sleep(0.01)
                    continue
                # Dynamic batching: wait for at least one worker, then take every worker that is ready.
                ready = connection.wait(conns)
                ids = [c.recv() for c in ready]
                obs = np.concatenate([views[i][0] for i in ids]) if len(ids) > 1 else views[ids[0]][0]
                actions = bare_act(net, obs)
                for k, i in enumerate(ids):
                    views[i][1][:] = actions[k * n:(k + 1) * n]
                    conns[i].send("go")
        elapsed = time.perf_counter() - start
        for c in conns:
            c.send("stop")
        total = 0
        for c in conns:
            while True:  # skip a step request the worker sent before it saw "stop"
                msg = c.recv()
                if isinstance(msg, tuple):
                    total += msg[1]
                    break
        return total / elapsed
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
        del views
        for o, a in mems:
            o.close()
            o.unlink()
            a.close()
            a.unlink()


# ---------------------------------------------------------------------------------------------------- transfer

TRANSFER_SHAPE = (16, 64, 4, 84, 84)  # a rollout of 16 steps x 64 Pong copies: 28.9 MB of uint8 frames


class _TransferActor:
    """Returns a rollout-sized frame array as a Ray worker would: a fresh array each time (a worker stacks new
    frames), through the object store or written into a lent shared-memory slot (rlrun's SlotWriter)."""

    def __init__(self) -> None:
        from rlrun.execution.shared_memory_transfer import SlotWriter

        self.frames = np.random.default_rng(0).integers(0, 256, TRANSFER_SHAPE, dtype=np.uint8)
        self.writer = SlotWriter()

    def pid(self) -> int:
        return os.getpid()

    def rollout(self, slot: Any = None) -> Any:
        fresh = self.frames.copy()
        return fresh if slot is None else self.writer.write(slot, {"obs": fresh})


def transfer(rounds: int, per_round: int = 20) -> dict[str, Any]:
    """Moving one rollout's frames from a worker actor to this process: Ray's object store vs the shared-memory
    slots of ``executor.observation_transfer=shared_memory`` (rlrun's SlotPool/SlotWriter), interleaved; each ends
    with a writable copy in this process. Wall ms per rollout, GB/s, and CPU ms per rollout of the worker (its copy
    of the fresh frames included, the same on both paths) and of this process."""
    import ray

    from rlrun.execution.shared_memory_transfer import SlotPool

    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    actor = ray.remote(num_cpus=0)(_TransferActor).remote()
    pool = SlotPool(1)
    try:
        pid = ray.get(actor.pid.remote())
        nbytes = int(np.prod(TRANSFER_SHAPE))
        stats: dict[str, list[tuple[float, float, float]]] = {"object_store": [], "shared_memory": []}
        for _ in range(rounds):
            for path in stats:
                w0, c0, t0 = cpu_seconds(pid, waited_children=True), time.process_time(), time.perf_counter()
                for _ in range(per_round):
                    if path == "object_store":
                        out = np.array(ray.get(actor.rollout.remote()))
                    else:
                        slot = pool.lend(0, nbytes)
                        shared = ray.get(actor.rollout.remote(slot))
                        out = np.array(pool.views(shared)["obs"])
                        pool.give_back(slot)
                    del out
                worker_cpu = cpu_seconds(pid, waited_children=True) - w0
                stats[path].append(((time.perf_counter() - t0) / per_round, worker_cpu / per_round,
                                    (time.process_time() - c0) / per_round))
        med = statistics.median
        figures: dict[str, Any] = {"transfer/rollout_mb": round(nbytes / 1e6, 1)}
        for path, rows in stats.items():
            wall = med(r[0] for r in rows)
            figures[f"transfer/{path}/ms_per_rollout"] = round(wall * 1e3, 2)
            figures[f"transfer/{path}/gb_per_s"] = round(nbytes / wall / 1e9, 2)
            figures[f"transfer/{path}/worker_cpu_ms_per_rollout"] = round(med(r[1] for r in rows) * 1e3, 1)
            figures[f"transfer/{path}/driver_cpu_ms_per_rollout"] = round(med(r[2] for r in rows) * 1e3, 1)
        figures["transfer/shared_memory_vs_object_store"] = round(
            med(o[0] / s[0] for o, s in zip(stats["object_store"], stats["shared_memory"], strict=True)), 2)
        return figures
    finally:
        pool.close()
        ray.kill(actor)
        if started:
            ray.shutdown()


# ---------------------------------------------------------------------------------------------------- start-up

STARTUP_WORKERS, STARTUP_ENVS_PER_WORKER = 2, 4  # RLlib's figure: 2 env runners


def startup_probe(preload: bool, address: str | None = None) -> dict[str, Any]:
    """One Ray start-up in this (fresh) process, as ``rlrun env=pong executor=ray`` does it: the driver has imported
    torch and rlrun and built its env factory and policy; then ``RayExecutor`` (``ray.init`` of a new local cluster
    of every core, or with ``address`` a connection to a running one, ``executor.address=...``) and its worker set
    (2 workers x 4 Pong copies) up to their first rollout. ``preload``: the default ``executor.preload_modules``;
    else ``[]``. Also the Ray processes' memory and CPU seconds then."""
    import ray
    from omegaconf import OmegaConf

    from rlrun.config import RayExecutorConfig
    from rlrun.registry import registry

    torch.set_num_threads(1)
    factory = compose_env("pong")
    spec = factory.spec
    policy = GreedyQPolicy(spec.observation_space, spec.action_space).eval()
    cfg = RayExecutorConfig(num_workers=STARTUP_WORKERS, num_envs_per_worker=STARTUP_ENVS_PER_WORKER)
    if not preload:
        cfg.preload_modules = []
    if address:
        cfg.address = address
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    executor = registry.build("executor", "ray", OmegaConf.structured(cfg), factory, 0)
    t1 = time.perf_counter()
    ws = executor.worker_set(policy, "cpu", policy_factory=GreedyQFactory(spec.observation_space, spec.action_space))
    ws.sample(1, explore=False)
    t2 = time.perf_counter()
    mem = ray_memory()
    out = {"ray_init_s": t1 - t0, "workers_to_first_sample_s": t2 - t1, "init_to_first_sample_s": t2 - t0,
           "cpu_s": mem.pop("cpu_s") + time.process_time() - cpu0, **mem, "ray_version": ray.__version__,
           "gcs_port": int(ray.get_runtime_context().gcs_address.rsplit(":", 1)[1])}
    executor.stop()
    return out


def ray_startup(runs: int) -> dict[str, Any]:
    """Ray start-up (:func:`startup_probe`) in ``runs`` fresh processes per variant, with and without the workers'
    module preloading, alternated; medians. Figures ``ray_startup/...`` and ``ray_memory/...`` (default config)."""
    import subprocess

    from benchmarks.ray_head import ENV, ray_head

    results: dict[str, list[dict[str, Any]]] = {"preload": [], "no_preload": [], "existing": []}
    load = load_average()

    def probe(variant: str, address: str | None = None) -> dict[str, Any]:
        cmd = [sys.executable, "-m", "benchmarks.executor_throughput", "--startup-probe", variant]
        # Joining the benchmark's `ray start` cluster needs its auth mode (ENV); a fresh cluster runs as a user's does.
        proc = subprocess.run([*cmd, "--startup-address", address] if address else cmd, capture_output=True,
                              text=True, check=True, timeout=300, env=ENV if address else None)
        return json.loads(proc.stdout.strip().splitlines()[-1])

    for _ in range(runs):
        for variant in ("preload", "no_preload"):
            results[variant].append(probe(variant))
    with ray_head(cpus=os.cpu_count() or 2) as (address, _):  # a running cluster (ray start --head) to join
        head_port = address.rsplit(":", 1)[1]
        for _ in range(runs):
            results["existing"].append(probe("existing", address))
    med = statistics.median
    out: dict[str, Any] = {"ray_startup/env": "pong", "ray_startup/workers": STARTUP_WORKERS,
                           "ray_startup/envs_per_worker": STARTUP_ENVS_PER_WORKER, "ray_startup/runs": runs,
                           "ray_startup/load_average": load,
                           "ray_startup/ray_version": results["preload"][0]["ray_version"]}
    for key in ("ray_init_s", "workers_to_first_sample_s", "init_to_first_sample_s", "cpu_s"):
        out[f"ray_startup/{key}"] = round(med(r[key] for r in results["preload"]), 2)
        out[f"ray_startup/no_preload/{key}"] = round(med(r[key] for r in results["no_preload"]), 2)
        if key != "cpu_s":  # the cluster's daemons are not this driver's children there: not counted
            out[f"ray_startup/existing_cluster/{key}"] = round(med(r[key] for r in results["existing"]), 2)
    # The probes joined the head's cluster (its GCS port), not a cluster of their own.
    out["ray_startup/existing_cluster/joined"] = all(r["gcs_port"] == int(head_port) for r in results["existing"])
    out["ray_startup/existing_cluster/init_to_first_sample_all_s"] = [round(r["init_to_first_sample_s"], 2)
                                                                      for r in results["existing"]]
    out["ray_startup/init_to_first_sample_all_s"] = [round(r["init_to_first_sample_s"], 2)
                                                      for r in results["preload"]]
    out["ray_startup/no_preload/init_to_first_sample_all_s"] = [round(r["init_to_first_sample_s"], 2)
                                                                 for r in results["no_preload"]]
    for key in ("processes", "rss_mib", "pss_mib"):
        out[f"ray_memory/{key}"] = med(r[key] for r in results["preload"])
    return out


# ---------------------------------------------------------------------------------------------------- main


def worker_sets(env: str, num_envs: int) -> tuple[dict[str, tuple[str, dict[str, Any]]], list[str]]:
    """The worker sets a setting builds (label -> (executor, config)) and its measured sides (a worker set's label,
    ``_async`` appended for ``sample_async``). They live side by side (idle while another is measured): half a CPU
    per Ray worker fits three workers into a cluster of the machine's two cores. Pipelined envpool workers get one
    envpool thread per group (``env.envpool_threads=1``): two env threads and the torch thread on two cores."""
    half = max(num_envs // 2, 1)
    if env.partition("+")[2] == "envpool":
        pipe = {"vector_mode": "pipelined", "env_overrides": ("env.envpool_threads=1",)}
        sets = {"local": ("local", {"num_envs": num_envs}),
                "local_pipelined": ("local", {"num_envs": num_envs, **pipe}),
                "ray_2w_pipelined": ("ray", {"num_workers": 2, "num_envs_per_worker": half, "cpus_per_worker": 0.5,
                                             **pipe}),
                "ray_1w_pipelined": ("ray", {"num_workers": 1, "num_envs_per_worker": num_envs,
                                             "cpus_per_worker": 0.5, **pipe})}
        return sets, ["local", "local_pipelined", "ray_1w_pipelined", "ray_1w_pipelined_async",
                      "ray_2w_pipelined_async"]
    sets = {"local": ("local", {"num_envs": num_envs}),
            "ray_2w": ("ray", {"num_workers": 2, "num_envs_per_worker": half, "cpus_per_worker": 0.5}),
            "ray_1w": ("ray", {"num_workers": 1, "num_envs_per_worker": num_envs, "cpus_per_worker": 0.5})}
    return sets, ["local", "ray_1w", "ray_1w_async", "ray_2w", "ray_2w_async"]


def measure(env: str, num_envs: int, rounds: int, seconds: float) -> dict[str, Any]:
    s = Setting(env, num_envs)
    key = f"{env.replace('+', '_')}/x{num_envs}"  # MLflow metric names take no "+"
    skip = s.spec.frame_skip
    labels, sides = worker_sets(env, num_envs)
    cores = os.cpu_count() or 1
    try:
        for label, (name, cfg) in labels.items():
            s.add(label, name, **cfg)
        raw, policy, limit = [], [], []
        raw_cpu: list[float] = []
        policy_cpu: list[float] = []
        acting: dict[str, list[float]] = {k: [] for k in sides}
        acting_cpu: dict[str, list[float]] = {k: [] for k in sides}
        shares: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
        s.raw_env(0.3)
        s.bare_policy(0.3)
        for _ in range(rounds):
            a, b = s.raw_env(seconds, raw_cpu), s.bare_policy(seconds, policy_cpu)
            raw.append(a)
            policy.append(b)
            limit.append(serial_limit(a, b))
            for side in sides:
                label = side.removesuffix("_async")
                rate, share, cpu = s.acting(label, seconds, asynchronous=side.endswith("_async"))
                acting[side].append(rate)
                acting_cpu[side].append(cpu)
                shares[side].append(share)
    finally:
        s.close()
    med = statistics.median
    figures: dict[str, Any] = {f"{key}/frame_skip": skip}
    for label, values in (("raw_env", raw), ("bare_policy", policy), ("serial_limit", limit),
                          *((side, acting[side]) for side in sides)):
        figures[f"{key}/env_steps_per_s/{label}"] = round(med(values), 1)
        figures[f"{key}/frames_per_s/{label}"] = round(med(values) * skip, 1)
    figures[f"cpu_ms_per_step/{key}/raw_env"] = round(med(raw_cpu) * 1e3, 4)
    figures[f"cpu_ms_per_step/{key}/bare_policy"] = round(med(policy_cpu) * 1e3, 4)
    for side in sides:
        per_round = zip(acting[side], limit, acting["local"], strict=True)
        figures[f"fraction_of_limit/{key}/{side}"] = round(med(x / lim for x, lim, _ in per_round), 3)
        if env.startswith("pong"):  # the peer's figure is Pong's
            figures[f"vs_rllib_peer/{key}/{side}"] = round(med(acting[side]) * skip / RLLIB_PEER_FRAMES_PER_S, 2)
        for stage in sorted({k for sh in shares[side] for k in sh}):
            figures[f"time_share/{key}/{side}/{stage}"] = round(med(sh.get(stage, 0.0) for sh in shares[side]), 3)
        if side.startswith("local"):  # every thread of a local side is in this process: its CPU time is complete
            cpu_ms = med(acting_cpu[side]) * 1e3
            figures[f"cpu_ms_per_step/{key}/{side}"] = round(cpu_ms, 4)
            figures[f"cpu_bound/{key}/{side}/frames_per_s_on_{cores}_free_cores"] = round(
                cores / cpu_ms * 1e3 * skip, 1)
        if side.startswith("local_"):
            per_round = zip(acting[side], acting["local"], strict=True)
            figures[f"vs_local_sync/{key}/{side}"] = round(med(x / y for x, y in per_round), 3)
        elif side != "local":  # against the local side with the same vector mode
            local = "local_pipelined" if "pipelined" in side else "local"
            per_round = zip(acting[side], acting[local], strict=True)
            figures[f"ray_vs_local/{key}/{side}"] = round(med(x / y for x, y in per_round), 3)
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 1 s blocks")
    parser.add_argument("--seconds", type=float, help="seconds per timed block (default 2; --quick 1)")
    parser.add_argument("--rounds", type=int, help="rounds (default 3; --quick 2)")
    parser.add_argument("--settings", default=",".join(f"{e}:{n}" for e, n in SETTINGS),
                        help="comma-separated env:copies (env: an option of the env config group)")
    parser.add_argument("--no-batching", action="store_true", help="skip the dynamic-batching experiment")
    parser.add_argument("--no-transfer", action="store_true", help="skip the object store vs shared memory "
                        "transfer measurement")
    parser.add_argument("--startup-runs", type=int, help="fresh processes per Ray start-up variant (default 3; "
                        "--quick 1; 0: skip)")
    parser.add_argument("--startup-probe", choices=("preload", "no_preload", "existing"), help=argparse.SUPPRESS)
    parser.add_argument("--startup-address", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.startup_probe:  # one start-up in this fresh process (see ray_startup)
        print(json.dumps(startup_probe(args.startup_probe != "no_preload", args.startup_address)))
        return {}
    if args.startup_runs is None:
        args.startup_runs = 1 if args.quick else 3
    seconds = args.seconds or (1.0 if args.quick else 2.0)
    rounds = args.rounds or (2 if args.quick else 3)
    torch.set_num_threads(1)
    figures: dict[str, Any] = {"seconds_per_block": seconds, "rounds": rounds, "rollout_steps": ROLLOUT_STEPS,
                               "torch_threads": 1, "load_average_before": load_average()}
    for item in filter(None, args.settings.split(",")):
        env, n = item.split(":")
        figures.update(measure(env, int(n), rounds, seconds))
        print({k: v for k, v in figures.items() if not isinstance(v, list)}, file=sys.stderr)
    if not args.no_transfer:
        figures.update(transfer(rounds))
    if args.startup_runs:
        figures.update(ray_startup(args.startup_runs))
        figures["ray_startup/python_imports_s"] = python_imports_seconds()
        figures["ray_startup/rllib_peer_init_to_first_sample_s"] = RLLIB_PEER_STARTUP_S
    figures["rllib_peer/frames_per_s"] = RLLIB_PEER_FRAMES_PER_S
    if not args.no_batching:
        n = 4
        central, per_worker = [], []
        for _ in range(rounds):
            central.append(dynamic_batching("pong", 2, n, seconds * 2, central=True))
            per_worker.append(dynamic_batching("pong", 2, n, seconds * 2, central=False))
        figures["dynamic_batching/pong/2x4/central_env_steps_per_s"] = round(statistics.median(central), 1)
        figures["dynamic_batching/pong/2x4/per_worker_env_steps_per_s"] = round(statistics.median(per_worker), 1)
        figures["dynamic_batching/pong/2x4/central_vs_per_worker"] = round(
            statistics.median(c / p for c, p in zip(central, per_worker, strict=True)), 3)
    figures["load_average_after"] = load_average()
    path = write_result("executor_throughput", figures, "python -m benchmarks.executor_throughput "
                        + " ".join(argv if argv is not None else sys.argv[1:]))
    print(f"wrote {path}", file=sys.stderr)
    return figures


if __name__ == "__main__":
    main()
