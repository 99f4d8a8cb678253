"""Sampling against the machine's limit: rlrun's acting throughput as a fraction of the serial limit.

For each setting (an env and a number of env copies), in one process and interleaved round by round:

(a) **raw env**: the env copies of the same backend and vector mode (what ``executor.num_envs=N`` builds),
    stepped with random actions drawn up front: agent steps/s summed over copies;
(b) **bare policy**: the same Q-network written by hand in plain PyTorch (benchmarks/dqn_networks.py), forwarding
    a batch of N real observations to greedy actions (``from_numpy`` -> network -> argmax -> numpy), inference
    mode: observations/s;
(c) **rlrun acting**: the DQN agent (Nature CNN on Atari, MLP on CartPole) acting through the executor's worker set,
    ``worker_set.sample(rollout_steps)`` with exploration on as in training, no learning and no replay: env steps/s.

The serial limit is ``1 / (1/a + 1/b)``: env and policy on the same cores, one after the other (DESIGN.md,
"Performance model"); (c) is reported as ``fraction_of_limit/<env>/x<N>/<executor>`` (goal, issue 7: >= 0.8),
the median over rounds of the per-round fraction. ``time_share/...`` splits (c)'s wall time into env stepping,
inference and the rest (building batches, bookkeeping), from the worker's own stage timers.

Executors: every one of ``EXECUTORS`` that rlrun's registry has is measured; one that does not exist yet
(``executor=ray``) is listed under ``unavailable/`` with the reason, and is measured once it is registered.
Settings: CartPole-v1 with 1 and 8 copies; Pong (DeepMind protocol, ``env=pong``) with 1 and 4 copies when the
Atari env can be built here. One torch thread, as rlrun's default.

    python -m benchmarks.sampling_limit [--quick] [--seconds S] [--rounds N] [--settings cartpole:1,pong:4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch

from benchmarks.common import load_average, write_result
from benchmarks.dqn_networks import bare_copy_of, bare_input, dqn_agent

EXECUTORS = ("local", "ray")
SETTINGS = (("cartpole", 1), ("cartpole", 8), ("pong", 1), ("pong", 4))
ROLLOUT_STEPS = 16  # agent steps per env copy per sample() call: DQN's default algo.rollout_steps


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
        from rlrun.graph_command import compose
        from rlrun.registry import registry

        self.env, self.num_envs, self.seed = env, num_envs, seed
        self.overrides = [f"env={env}", f"executor.num_envs={num_envs}", "executor.vector_mode=sync",
                          f"seed={seed}"]
        cfg = compose(self.overrides)
        self.factory = registry.build("env", cfg.env.name, cfg.env)
        self.spec = self.factory.spec
        self.network = "nature_cnn" if len(self.spec.observation_space.shape) == 3 else "mlp"
        self.agent, self.agent_built_with = dqn_agent(self.spec.observation_space, self.spec.action_space,
                                                      self.network, seed)
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
        self.executors: dict[str, Any] = {}
        self.worker_sets: dict[str, Any] = {}

    def add_executor(self, name: str) -> None:
        """(c) the executor's worker set acting with the agent."""
        from rlrun.graph_command import compose
        from rlrun.registry import registry

        cfg = compose([*self.overrides, f"executor={name}"] if name != "local" else self.overrides)
        executor = registry.build("executor", cfg.executor.name, cfg.executor, self.factory, self.seed)
        self.executors[name] = executor
        self.worker_sets[name] = executor.worker_set(self.agent, torch.device("cpu"))

    def raw_env(self, seconds: float) -> float:
        def step() -> int:
            self.envs.step(self.actions[self.k & 4095])
            self.k += 1
            return self.num_envs

        units, elapsed = _timed_blocks(step, seconds)
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

    def acting(self, name: str, seconds: float) -> tuple[float, dict[str, float]]:
        ws = self.worker_sets[name]
        env_s = inf_s = 0.0

        def step() -> int:
            nonlocal env_s, inf_s
            batches = ws.sample(ROLLOUT_STEPS, explore=True)
            env_s += sum(b.env_seconds for b in batches)
            inf_s += sum(b.inference_seconds for b in batches)
            return sum(b.env_steps for b in batches)

        units, elapsed = _timed_blocks(step, seconds)
        shares = {"env": env_s / elapsed, "inference": inf_s / elapsed,
                  "other": max(elapsed - env_s - inf_s, 0.0) / elapsed}
        return units / elapsed, shares

    def close(self) -> None:
        self.envs.close()
        for executor in self.executors.values():
            executor.stop()


def measure(env: str, num_envs: int, rounds: int, seconds: float, executors: list[str]) -> dict[str, Any]:
    setting = Setting(env, num_envs)
    key = f"{env}/x{num_envs}"
    skip = setting.spec.frame_skip
    try:
        for name in executors:
            setting.add_executor(name)
        setting.raw_env(min(seconds, 0.3))  # warm-up of every side
        setting.policy_forward(min(seconds, 0.3))
        for name in executors:
            setting.acting(name, min(seconds, 0.3))
        raw, policy, limit = [], [], []
        acting: dict[str, list[float]] = {n: [] for n in executors}
        fractions: dict[str, list[float]] = {n: [] for n in executors}
        shares: dict[str, list[dict[str, float]]] = {n: [] for n in executors}
        for _ in range(rounds):
            a = setting.raw_env(seconds)
            b = setting.policy_forward(seconds)
            serial = serial_limit(a, b)
            raw.append(a)
            policy.append(b)
            limit.append(serial)
            for name in executors:
                c, share = setting.acting(name, seconds)
                acting[name].append(c)
                fractions[name].append(c / serial)
                shares[name].append(share)
    finally:
        setting.close()
    med = statistics.median
    figures: dict[str, Any] = {f"{key}/network": setting.network, f"{key}/frame_skip": skip,
                               f"{key}/agent_built_with": setting.agent_built_with}
    for label, values in (("raw_env", raw), ("policy_forward", policy), ("serial_limit", limit),
                          *((f"rlrun_{n}", acting[n]) for n in executors)):
        figures[f"{key}/env_steps_per_s/{label}"] = round(med(values), 1)
        figures[f"{key}/frames_per_s/{label}"] = round(med(values) * skip, 1)
    for name in executors:
        figures[f"fraction_of_limit/{key}/{name}"] = round(med(fractions[name]), 4)
        figures[f"fraction_of_limit/{key}/{name}/rounds"] = [round(f, 4) for f in fractions[name]]
        for part in ("env", "inference", "other"):
            figures[f"time_share/{key}/{name}/{part}"] = round(med(s[part] for s in shares[name]), 4)
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CI settings: 3 rounds of 0.4 s blocks")
    parser.add_argument("--seconds", type=float, help="seconds per timed block (default 1.0; --quick 0.4)")
    parser.add_argument("--rounds", type=int, help="rounds of (a), (b), (c) (default 5; --quick 3)")
    parser.add_argument("--settings", default=",".join(f"{e}:{n}" for e, n in SETTINGS),
                        help="comma-separated env:copies (env: a config option of the env group)")
    args = parser.parse_args(argv)
    seconds = args.seconds or (0.4 if args.quick else 1.0)
    rounds = args.rounds or (3 if args.quick else 5)
    torch.set_num_threads(1)
    from rlrun.registry import registry

    registered = registry.names("executor")
    executors = [e for e in EXECUTORS if e in registered]
    figures: dict[str, Any] = {"seconds_per_block": seconds, "rounds": rounds, "rollout_steps": ROLLOUT_STEPS,
                               "load_average_before": load_average()}
    for name in EXECUTORS:
        if name not in registered:
            figures[f"unavailable/executor_{name}"] = (f"executor={name} does not exist yet; its acting throughput "
                                                       f"is measured here once it is registered")
    for item in [s for s in args.settings.split(",") if s]:
        env, _, copies = item.partition(":")
        try:
            figures.update(measure(env, int(copies or 1), rounds, seconds, executors))
        except Exception as e:  # noqa: BLE001 - e.g. the Atari env cannot be built here: the others still run
            if env == "cartpole":
                raise
            figures[f"unavailable/{env}_x{copies}"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
            print(f"sampling_limit: {env}:{copies} skipped: {e}", file=sys.stderr)
    figures["load_average_after"] = load_average()
    command = "python -m benchmarks.sampling_limit " + " ".join(sys.argv[1:] if argv is None else argv)
    path = write_result("sampling_limit", figures, command.strip())
    for key, value in figures.items():
        if isinstance(value, float) and ("fraction" in key or "per_s" in key):
            print(f"{key:55s} {value:12.4f}")
    print(f"wrote {path}", file=sys.stderr)
    return figures


if __name__ == "__main__":
    main()
