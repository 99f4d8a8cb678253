"""Multi-agent sampling against the machine's limit: the joint sampler's acting throughput as a fraction of the
serial limit, as benchmarks/sampling_limit.py measures single-agent sampling.

For each setting (a PettingZoo env and a number of env copies), in one process and interleaved round by round:

(a) **raw env**: the env copies (parallel API) stepped with random actions drawn up front, no policy: agent steps/s
    summed over copies and agents;
(b) **bare policy**: the PPO agent's actor network (the MLP of ``rlrun keys algo=ppo``) written by hand in plain
    PyTorch with the same weights, forwarding a batch of real observations (one row per copy and agent) to sampled
    actions (``from_numpy`` -> network -> Categorical sample -> numpy), inference mode: observations/s;
(c) **rlrun**: :class:`rlrun.execution.multiagent_sampler.MultiAgentSampler` with that PPO agent as one shared
    policy (acting with exploration, recording log-probabilities as in training), ``sample(policy, 32)``, no
    learning: agent steps/s.

The serial limit is ``1 / (1/a + 1/b)``; (c) is reported as ``fraction_of_limit/<env>/x<N>`` (the median over
rounds of the per-round fraction). Settings: mpe2's simple_spread_v3 (3 agents, 25 steps) with 1 and 8 copies. One
torch thread, as rlrun's default.

    python -m benchmarks.multiagent_sampling [--quick] [--seconds S] [--rounds N] [--settings simple_spread_v3:8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch

from benchmarks.common import load_average, publish
from benchmarks.sampling_limit import serial_limit

SETTINGS = (("mpe2.simple_spread_v3", 1), ("mpe2.simple_spread_v3", 8))
ROLLOUT_STEPS = 32  # PPO's default algo.rollout_steps


def _timed(step: Any, seconds: float) -> float:
    """Units per second of ``step() -> units`` called for ``seconds``."""
    units, start = 0, time.perf_counter()
    while True:
        units += step()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return units / elapsed


class Setting:
    """One env x copies: the three measured sides, built once and timed in alternation."""

    def __init__(self, env_id: str, num_envs: int, seed: int = 0) -> None:
        from rlrun.algos.ppo import PPO
        from rlrun.config import compose
        from rlrun.execution.multiagent_sampler import MultiAgentSampler
        from rlrun.registry import registry

        cfg = compose(["env=pettingzoo", f"env.id={env_id}", f"seed={seed}"])
        self.factory = registry.build("env", "pettingzoo", cfg.env)
        spec = self.factory.spec
        agents = list(spec.agents)
        pspec = spec.policy_spec(agents, "benchmark")
        ppo_cfg = registry.schema("algo", "ppo")()
        self.agent = PPO.make_agent(ppo_cfg, pspec, seed)
        self.agent.eval()
        self.num_envs, self.num_agents = num_envs, len(agents)
        # (a) the raw env copies, random actions drawn up front
        self.envs = [self.factory.make() for _ in range(num_envs)]
        for i, env in enumerate(self.envs):
            env.reset(seed=seed + i)
        rng = np.random.default_rng(seed)
        self.actions = rng.integers(0, int(pspec.action_space.n), (4096, num_envs, len(agents)))
        self.k = 0
        # (b) the actor as plain PyTorch, same weights, real observations
        self.bare = bare_actor(self.agent)
        self.bare_obs = np.stack([rng.standard_normal(pspec.observation_space.shape).astype(np.float32)
                                  for _ in range(num_envs * len(agents))])
        obs, _ = self.envs[0].reset(seed=seed)
        self.bare_obs[: len(agents)] = np.stack([obs[a] for a in agents])
        # (c) the joint sampler with the agent as one shared policy
        self.sampler = MultiAgentSampler(self.factory, num_envs, seed, {"shared": self.agent},
                                         dict.fromkeys(agents, "shared"), {"shared": pspec.observation_space},
                                         {"shared"})

    def raw_env(self, seconds: float) -> float:
        def step() -> int:
            n = 0
            acts = self.actions[self.k & 4095]
            self.k += 1
            for c, env in enumerate(self.envs):
                live = env.agents
                env.step({a: int(acts[c, i]) for i, a in enumerate(live)})
                n += len(live)
                if not env.agents:
                    env.reset()
            return n

        return _timed(step, seconds)

    def policy_forward(self, seconds: float) -> float:
        def step() -> int:
            logits = self.bare(torch.from_numpy(self.bare_obs))
            torch.distributions.Categorical(logits=logits).sample().numpy()
            return len(self.bare_obs)

        with torch.inference_mode():
            step()
            return _timed(step, seconds)

    def rlrun(self, seconds: float) -> float:
        def step() -> int:
            self.sampler.sample("shared", ROLLOUT_STEPS)
            return self.sampler.take_env_steps()

        self.sampler.take_env_steps()
        return _timed(step, seconds)

    def close(self) -> None:
        self.sampler.close()
        for env in self.envs:
            env.close()


def bare_actor(agent: Any) -> torch.nn.Module:
    """The PPO agent's actor (torso + policy head) rebuilt as ``nn.Sequential`` of its Linear layers and
    activations, with its weights."""
    linears = [m for m in agent.network.torso.modules() if isinstance(m, torch.nn.Linear)]
    head = [m for m in agent.network.head.modules() if isinstance(m, torch.nn.Linear)][0]
    act = type(next(m for m in agent.network.torso.modules() if isinstance(m, (torch.nn.Tanh, torch.nn.ReLU))))
    layers: list[torch.nn.Module] = []
    for lin in linears:
        copy = torch.nn.Linear(lin.in_features, lin.out_features)
        copy.load_state_dict(lin.state_dict())
        layers += [copy, act()]
    out = torch.nn.Linear(head.in_features, head.out_features)
    out.load_state_dict(head.state_dict())
    return torch.nn.Sequential(*layers, out).eval()


def measure(env_id: str, num_envs: int, rounds: int, seconds: float) -> dict[str, Any]:
    setting = Setting(env_id, num_envs)
    key = f"{env_id.rsplit('.', 1)[-1]}/x{num_envs}"
    raw, policy, ours, fractions = [], [], [], []
    try:
        for _ in range(rounds):
            a, b, c = setting.raw_env(seconds), setting.policy_forward(seconds), setting.rlrun(seconds)
            raw.append(a)
            policy.append(b)
            ours.append(c)
            fractions.append(c / serial_limit(a, b))
    finally:
        setting.close()
    return {f"raw_env_agent_steps_per_s/{key}": statistics.median(raw),
            f"bare_policy_obs_per_s/{key}": statistics.median(policy),
            f"serial_limit_per_s/{key}": statistics.median([serial_limit(a, b) for a, b in zip(raw, policy,
                                                                                              strict=True)]),
            f"rlrun_agent_steps_per_s/{key}": statistics.median(ours),
            f"fraction_of_limit/{key}": statistics.median(fractions),
            f"agents/{key}": setting.num_agents}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CI settings: 3 rounds of 0.4 s blocks")
    parser.add_argument("--seconds", type=float, help="seconds per timed block (default 1.0; --quick 0.4)")
    parser.add_argument("--rounds", type=int, help="rounds of (a), (b), (c) (default 5; --quick 3)")
    parser.add_argument("--settings", default=",".join(f"{e}:{n}" for e, n in SETTINGS),
                        help="comma-separated env module:copies")
    args = parser.parse_args(argv)
    seconds = args.seconds or (0.4 if args.quick else 1.0)
    rounds = args.rounds or (3 if args.quick else 5)
    torch.set_num_threads(1)
    figures: dict[str, Any] = {"seconds_per_block": seconds, "rounds": rounds, "rollout_steps": ROLLOUT_STEPS,
                               "load_average_before": load_average()}
    for item in [s for s in args.settings.split(",") if s]:
        env_id, _, copies = item.partition(":")
        figures.update(measure(env_id, int(copies or 1), rounds, seconds))
    figures["load_average_after"] = load_average()
    command = "python -m benchmarks.multiagent_sampling " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("multiagent_sampling", figures, command, show=lambda key: "fraction" in key or "per_s" in key)
    return figures


if __name__ == "__main__":
    main()
