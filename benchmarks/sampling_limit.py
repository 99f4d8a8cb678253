"""Sampling against the machine's limit: rlrun's acting throughput as a fraction of the serial limit.

For each setting (an env and a number of env copies), in one process and interleaved round by round:

(a) **raw env**: the env copies of the same backend and vector mode (what ``executor.num_envs=N`` builds),
    stepped with random actions drawn up front: agent steps/s summed over copies;
(b) **bare policy**: the same Q-network written by hand in plain PyTorch (benchmarks/dqn_networks.py), forwarding
    a batch of N real observations to greedy actions (``from_numpy`` -> network -> argmax -> numpy), inference
    mode: observations/s;
(c) **rlrun acting**: the DQN agent (Nature CNN on Atari, MLP on CartPole) acting through the executor's worker set,
    ``worker_set.sample_async(rollout_steps)`` (batches as they arrive, as an Ape-X plan samples) with exploration
    on as in training, no learning and no replay: env steps/s.

(d) **hand-written actor**: what a single-file script's acting loop does with the same parts, as the reference for
    what plain Python reaches when env and policy alternate: the bare network of (b) on its own copy of the env
    copies, epsilon-greedy with numpy's draws, each step's observation, action, reward and done flags kept in
    lists and stacked every ``ROLLOUT_STEPS`` steps, episode returns summed: env steps/s.
(e) **rlrun greedy** (``executor=local`` only): (c) with exploration off (``explore=False``: argmax Q, no random
    draws), reported as ``fraction_of_limit/<env>/x<N>/local_greedy``: (c) against (e) is what epsilon-greedy's
    draws cost rlrun's worker per step.

Both actors explore with the same epsilon, ``EPSILON`` (rlrun's agent is built with it as its schedule's start and
end; DQN acts near its final epsilon for most of a run).

The serial limit is ``1 / (1/a + 1/b)``: env and policy on the same cores, one after the other (DESIGN.md,
"Performance model"); (c) is reported as ``fraction_of_limit/<env>/x<N>/<executor>`` (goal, issue 7: >= 0.8),
the median over rounds of the per-round fraction. ``time_share/...`` splits (c)'s wall time into env stepping,
inference and the rest (building batches, bookkeeping), from the worker's own stage timers. Alternating env and
policy costs more than their sum even in (d) (each evicts the other's code and data from the core's caches), so
(d) is reported as ``fraction_of_limit/<env>/x<N>/hand_written`` beside rlrun's, and rlrun against it as
``fraction_of_hand_written/<env>/x<N>/<executor>`` (>= 1: rlrun's worker acts as fast as the plain loop).

Executors: every one of ``EXECUTORS`` that rlrun's registry has is measured with the same number of env copies
(``executor_overrides``): ``local``, one in-process worker with N copies; ``ray``, min(N, cores) worker actors
sharing the N copies (so its (c) runs in parallel and may pass the *serial* limit); ``ray_batched``, the same with
``executor.rollouts_per_request=8`` (a request costs ~1 ms of Ray's CPU time on each side, as much as a 16-step
CartPole rollout of 4 copies: eight rollouts per request share it). One Ray cluster serves every
setting (started here, so its start-up is not timed: that is the ``ray_startup`` benchmark's). ``time_share`` is
reported for ``local`` only (Ray workers' stage times overlap). An executor that fails (or does not exist yet)
is listed under ``unavailable/`` with the reason; the others are still measured.
Settings: CartPole-v1 with 1 and 8 copies, and 8 copies stepped by gymnasium's batched CartPoleVectorEnv
(``cartpole_vep``: ``env.vectorization=vector_entry_point``; its (a) is that env's speed); Pong (DeepMind protocol,
``env=pong``) with 1 and 4 copies when the Atari env can be built here. One torch thread, as rlrun's default.

    python -m benchmarks.sampling_limit [--quick] [--seconds S] [--rounds N] [--settings cartpole:1,pong:4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch

from benchmarks.common import load_average, publish
from benchmarks.dqn_networks import bare_copy_of, bare_input, dqn_agent

EXECUTORS = ("local", "ray", "ray_batched")
# Executors measured with overrides: (the registered executor, its extra overrides).
EXECUTOR_VARIANTS = {"ray_batched": ("ray", ("executor.rollouts_per_request=8",))}


def executor_overrides(name: str, num_envs: int, cores: int) -> list[str]:
    """Config overrides that give executor ``name`` ``num_envs`` env copies in all (sync vector envs)."""
    if name in EXECUTOR_VARIANTS:
        base, extra = EXECUTOR_VARIANTS[name]
        return [*executor_overrides(base, num_envs, cores), *extra]
    if name == "local":
        return [f"executor.num_envs={num_envs}", "executor.vector_mode=sync"]
    if name == "ray":
        workers = max(w for w in range(1, min(num_envs, cores) + 1) if num_envs % w == 0)
        return ["executor=ray", f"executor.num_workers={workers}",
                f"executor.num_envs_per_worker={num_envs // workers}", "executor.vector_mode=sync"]
    return [f"executor={name}"]
SETTINGS = (("cartpole", 1), ("cartpole", 8), ("cartpole_vep", 8), ("pong", 1), ("pong", 4))
# Settings' env names that are an env config option with overrides: CartPole stepped by gymnasium's own batched
# CartPoleVectorEnv (env.vectorization=vector_entry_point), whose raw speed (a) is then that env's.
ENV_VARIANTS = {"cartpole_vep": ("cartpole", ("env.vectorization=vector_entry_point",))}
ROLLOUT_STEPS = 16  # agent steps per env copy per sample() call: DQN's default algo.rollout_steps
EPSILON = 0.05  # both actors' exploration rate (an agent at its schedule's start, 1.0, would act uniformly at random)


def serial_limit(env_rate: float, policy_rate: float) -> float:
    """Steps/s when every step needs one env step and one policy step, one after the other on the same cores:
    ``1 / (1/env_rate + 1/policy_rate)`` (e.g. 3000 and 1500 steps/s -> 1000 steps/s)."""
    return 1.0 / (1.0 / env_rate + 1.0 / policy_rate)


def _timed_blocks(step: Any, seconds: float) -> tuple[float, float]:
    """Call ``step() -> units`` until ``seconds`` have passed; ``(units, elapsed seconds)``."""
    units, start = 0, time.perf_counter()
    while True:
        units += step()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return units, elapsed


class Setting:
    """One env x copies: the three measured sides, built once and timed in alternation."""

    def __init__(self, env: str, num_envs: int, seed: int = 0) -> None:
        from rlrun.config import compose
        from rlrun.registry import registry

        self.env, self.num_envs, self.seed = env, num_envs, seed
        option, extra = ENV_VARIANTS.get(env, (env, ()))
        self.overrides = [f"env={option}", *extra, f"seed={seed}"]
        cfg = compose([*self.overrides, *executor_overrides("local", num_envs, 1)])
        self.factory = registry.build("env", cfg.env.name, cfg.env)
        self.spec = self.factory.spec
        self.network = "nature_cnn" if len(self.spec.observation_space.shape) == 3 else "mlp"
        self.agent = dqn_agent(self.spec.observation_space, self.spec.action_space, self.network, seed,
                               epsilon_start=EPSILON, epsilon_end=EPSILON)
        self.agent.eval()
        # (a) the raw env copies, random actions drawn up front
        self.envs = self.factory.make_vector(num_envs, str(cfg.executor.vector_mode))
        self.obs, _ = self.envs.reset(seed=[seed + i for i in range(num_envs)])
        rng = np.random.default_rng(seed)
        self.actions = rng.integers(0, int(self.spec.action_space.n), (4096, num_envs))
        self.k = 0
        # (b) the hand-written network with the agent's weights, fed real observations
        self.bare, _ = bare_copy_of(self.agent, self.spec.observation_space, int(self.spec.action_space.n),
                                    self.network)
        self.bare_obs = np.ascontiguousarray(self.obs)
        # (d) the hand-written actor's own env copies (the same backend and vector mode)
        self.hand_envs = self.factory.make_vector(num_envs, str(cfg.executor.vector_mode))
        self.hand_obs, _ = self.hand_envs.reset(seed=[seed + i for i in range(num_envs)])
        self.hand_rng = np.random.default_rng(seed)
        self.executors: dict[str, Any] = {}
        self.worker_sets: dict[str, Any] = {}

    def add_executor(self, name: str) -> None:
        """(c) the executor's worker set acting with the agent."""
        from rlrun.config import compose
        from rlrun.registry import registry

        cfg = compose([*self.overrides, *executor_overrides(name, self.num_envs, os.cpu_count() or 1)])
        executor = registry.build("executor", cfg.executor.name, cfg.executor, self.factory, self.seed)
        self.executors[name] = executor
        self.worker_sets[name] = executor.worker_set(self.agent, torch.device("cpu"))
        if self.worker_sets[name].num_envs != self.num_envs:
            raise RuntimeError(f"executor={name} has {self.worker_sets[name].num_envs} env copies, not {self.num_envs}")

    def raw_env(self, seconds: float) -> float:
        def step() -> int:
            self.envs.step(self.actions[self.k & 4095])
            self.k += 1
            return self.num_envs

        units, elapsed = _timed_blocks(step, seconds)
        return units / elapsed

    def hand_written(self, seconds: float) -> float:
        """(d): a plain acting loop over the bare network and its own env copies (module docstring)."""
        envs, bare, n = self.hand_envs, self.bare, self.num_envs
        rng, epsilon = self.hand_rng, EPSILON
        num_actions = int(self.spec.action_space.n)
        returns = np.zeros(n)
        finished: list[float] = []

        def rollout() -> int:
            obs_l, act_l, rew_l, done_l = [], [], [], []
            obs = self.hand_obs
            for _ in range(ROLLOUT_STEPS):
                q = bare(bare_input(torch.from_numpy(obs), self.network))
                actions = q.argmax(dim=1).numpy()
                explore = rng.random(n) < epsilon
                if explore.any():
                    actions = np.where(explore, rng.integers(0, num_actions, n), actions)
                next_obs, rewards, terminated, truncated, _ = envs.step(actions)
                done = terminated | truncated
                obs_l.append(obs)
                act_l.append(actions)
                rew_l.append(rewards)
                done_l.append(done)
                returns[:] += rewards
                if done.any():
                    finished.extend(returns[done])
                    returns[done] = 0.0
                obs = next_obs
            self.hand_obs = obs
            self.hand_rollout = (np.stack(obs_l), np.stack(act_l), np.stack(rew_l), np.stack(done_l))  # handed on
            return ROLLOUT_STEPS * n

        with torch.inference_mode():
            units, elapsed = _timed_blocks(rollout, seconds)
        return units / elapsed

    def policy_forward(self, seconds: float) -> float:
        def step() -> int:
            obs = bare_input(torch.from_numpy(self.bare_obs), self.network)
            self.bare(obs).argmax(dim=1).numpy()
            return self.num_envs

        with torch.inference_mode():
            step()
            units, elapsed = _timed_blocks(step, seconds)
        return units / elapsed

    def acting(self, name: str, seconds: float, explore: bool = True) -> tuple[float, dict[str, float]]:
        ws = self.worker_sets[name]
        env_s = inf_s = 0.0

        def step() -> int:
            nonlocal env_s, inf_s
            steps = 0
            for batch, _ in ws.sample_async(ROLLOUT_STEPS, explore=explore, min_batches=ws.num_workers):
                env_s += batch.env_seconds
                inf_s += batch.inference_seconds
                steps += batch.env_steps
            return steps

        # Steady state: the pipeline filled before the clock starts (requests in flight at either end cancel out),
        # and drained after it stops, uncounted: a Ray worker set's requests would otherwise run on while the other
        # sides are timed, slowing them and delivering rollouts made off the clock to the next acting block.
        for _ in ws.sample_async(ROLLOUT_STEPS, explore=explore, min_batches=ws.num_workers):
            pass
        units, elapsed = _timed_blocks(step, seconds)
        ws.drain()
        shares = {"env": env_s / elapsed, "inference": inf_s / elapsed,
                  "other": max(elapsed - env_s - inf_s, 0.0) / elapsed}
        return units / elapsed, shares

    def close(self) -> None:
        self.envs.close()
        self.hand_envs.close()
        for executor in self.executors.values():
            executor.stop()


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


def measure(env: str, num_envs: int, rounds: int, seconds: float, executors: list[str]) -> dict[str, Any]:
    setting = Setting(env, num_envs)
    key = f"{env}/x{num_envs}"
    skip = setting.spec.frame_skip
    failed: dict[str, str] = {}

    def isolated(name: str, fn: Any) -> Any:
        """Run ``fn``; a failure of an executor other than local drops that executor, with the reason."""
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            if name == "local":
                raise
            failed[name] = _short(e)
            print(f"sampling_limit: {key}: executor={name} dropped: {failed[name]}", file=sys.stderr)
            return None

    try:
        for name in executors:
            isolated(name, lambda: setting.add_executor(name))  # noqa: B023 - called at once
        executors = [n for n in executors if n not in failed]
        setting.raw_env(min(seconds, 0.3))  # warm-up of every side
        setting.policy_forward(min(seconds, 0.3))
        setting.hand_written(min(seconds, 0.3))
        for name in executors:
            isolated(name, lambda: setting.acting(name, min(seconds, 0.3)))  # noqa: B023 - called at once
        executors = [n for n in executors if n not in failed]
        greedy = "local" in executors
        if greedy:
            setting.acting("local", min(seconds, 0.3), explore=False)
        raw, policy, limit, hand, hand_fractions, greedy_rates, greedy_fractions = [], [], [], [], [], [], []
        acting: dict[str, list[float]] = {n: [] for n in executors}
        fractions: dict[str, list[float]] = {n: [] for n in executors}
        of_hand: dict[str, list[float]] = {n: [] for n in executors}
        shares: dict[str, list[dict[str, float]]] = {n: [] for n in executors}
        for _ in range(rounds):
            a = setting.raw_env(seconds)
            b = setting.policy_forward(seconds)
            serial = serial_limit(a, b)
            raw.append(a)
            policy.append(b)
            limit.append(serial)
            d = setting.hand_written(seconds)
            hand.append(d)
            hand_fractions.append(d / serial)
            if greedy:
                e = setting.acting("local", seconds, explore=False)[0]
                greedy_rates.append(e)
                greedy_fractions.append(e / serial)
            for name in [n for n in executors if n not in failed]:
                measured = isolated(name, lambda: setting.acting(name, seconds))  # noqa: B023 - called at once
                if measured is not None:
                    acting[name].append(measured[0])
                    fractions[name].append(measured[0] / serial)
                    of_hand[name].append(measured[0] / d)
                    shares[name].append(measured[1])
    finally:
        setting.close()
    executors = [n for n in executors if n not in failed]
    med = statistics.median
    figures: dict[str, Any] = {f"{key}/network": setting.network, f"{key}/frame_skip": skip}
    for label, values in (("raw_env", raw), ("policy_forward", policy), ("serial_limit", limit), ("hand_written", hand),
                          *((f"rlrun_{n}", acting[n]) for n in executors),
                          *((("rlrun_local_greedy", greedy_rates),) if greedy_rates else ())):
        figures[f"{key}/env_steps_per_s/{label}"] = round(med(values), 1)
        figures[f"{key}/frames_per_s/{label}"] = round(med(values) * skip, 1)
    figures[f"fraction_of_limit/{key}/hand_written"] = round(med(hand_fractions), 4)
    figures[f"fraction_of_limit/{key}/hand_written/rounds"] = [round(f, 4) for f in hand_fractions]
    if greedy_fractions:
        figures[f"fraction_of_limit/{key}/local_greedy"] = round(med(greedy_fractions), 4)
        figures[f"fraction_of_limit/{key}/local_greedy/rounds"] = [round(f, 4) for f in greedy_fractions]
    for name in executors:
        figures[f"fraction_of_limit/{key}/{name}"] = round(med(fractions[name]), 4)
        figures[f"fraction_of_hand_written/{key}/{name}"] = round(med(of_hand[name]), 4)
        figures[f"fraction_of_limit/{key}/{name}/rounds"] = [round(f, 4) for f in fractions[name]]
        if name == "local":
            for part in ("env", "inference", "other"):
                figures[f"time_share/{key}/{name}/{part}"] = round(med(s[part] for s in shares[name]), 4)
    for name, why in failed.items():
        figures[f"unavailable/executor_{name}/{key}"] = why
    return figures


def start_ray(executors: int = 1) -> bool:
    """One local Ray cluster for every setting (each RayExecutor then leaves it running); True if started here.
    ``executors``: Ray executors alive at once (one per Ray variant measured), each reserving the machine's cores
    for its workers, so the cluster declares that many times the cores (a reservation only: they take turns)."""
    import logging

    import ray

    if ray.is_initialized():
        return False
    ray.init(address="local", include_dashboard=False, num_cpus=(os.cpu_count() or 1) * max(executors, 1),
             logging_level=logging.WARNING)
    return True


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CI settings: 3 rounds of 0.4 s blocks")
    parser.add_argument("--seconds", type=float, help="seconds per timed block (default 1.0; --quick 0.4)")
    parser.add_argument("--rounds", type=int, help="rounds of (a), (b), (d), (c) (default 5; --quick 3)")
    parser.add_argument("--settings", default=",".join(f"{e}:{n}" for e, n in SETTINGS),
                        help="comma-separated env:copies (env: a config option of the env group)")
    parser.add_argument("--executors", help=f"comma-separated (default: those of {', '.join(EXECUTORS)} that exist)")
    args = parser.parse_args(argv)
    seconds = args.seconds or (0.4 if args.quick else 1.0)
    rounds = args.rounds or (3 if args.quick else 5)
    torch.set_num_threads(1)
    from rlrun.registry import registry

    registered = registry.names("executor")
    def exists(name: str) -> bool:
        return EXECUTOR_VARIANTS.get(name, (name,))[0] in registered

    executors = [e for e in (args.executors.split(",") if args.executors else EXECUTORS) if exists(e)]
    figures: dict[str, Any] = {"seconds_per_block": seconds, "rounds": rounds, "rollout_steps": ROLLOUT_STEPS,
                               "load_average_before": load_average()}
    for name in EXECUTORS:
        if not exists(name):
            figures[f"unavailable/executor_{name}"] = (f"executor={name} does not exist yet; its acting throughput "
                                                       f"is measured here once it is registered")
    on_ray = [e for e in executors if EXECUTOR_VARIANTS.get(e, (e,))[0] == "ray"]
    started_ray = bool(on_ray) and start_ray(len(on_ray))
    try:
        for item in [s for s in args.settings.split(",") if s]:
            env, _, copies = item.partition(":")
            try:
                figures.update(measure(env, int(copies or 1), rounds, seconds, executors))
            except Exception as e:  # noqa: BLE001 - e.g. the Atari env cannot be built here: the others still run
                if env == "cartpole":
                    raise
                figures[f"unavailable/{env}_x{copies}"] = _short(e)
                print(f"sampling_limit: {env}:{copies} skipped: {e}", file=sys.stderr)
    finally:
        if started_ray:
            import ray

            ray.shutdown()
    figures["load_average_after"] = load_average()
    command = "python -m benchmarks.sampling_limit " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("sampling_limit", figures, command, show=lambda key: "fraction" in key or "per_s" in key)
    return figures


if __name__ == "__main__":
    main()
