"""Learner throughput: samples/s through the DQN agent's ``update(batch)`` against a hand-written PyTorch training
step of the same network and loss, timed call by call in alternation (benchmarks.common.alternating_ratios) in
this process; the median over rounds of each round's ratio. Goal (issue 7): ratio >= 0.9. Each call is timed on
the wall clock (``samples_per_s``, what a run sees) and on the thread's CPU clock (``samples_per_cpu_s``: other
work on the shared cores barely moves it, so CI compares this ratio).

The bare step, written out below (:func:`bare_dqn_step`), is what a single-file script does: forward the batch,
the double-DQN target (van Hasselt et al. 2016, Eq. 4: the online network picks the next action, the target
network values it), the Huber loss (Mnih et al. 2015), backward, gradient-norm clip, Adam, then the Polyak target
update; the same settings as the agent (Adam with ``fused=True`` as the agent uses, clip 10, tau 0.02). Both start
from the same weights, and the first two steps' losses are checked to be equal before anything is timed, so the two
sides compute the same thing.

Cases: ``atari_nature_cnn`` (Nature CNN, uint8 4x84x84 frames, 6 actions, batch 32 as in Mnih et al. 2015) and
``cartpole_mlp`` (MLP [64, 64], CartPole observations, batch 256 as conf/algo/dqn.yaml). One torch thread (rlrun's
default, ``device.torch_threads=1``). Batches are fed directly: replay sampling is not timed on either side.

Only DQN has a bare reference so far; other algorithms get one when they land (see ``ALGOS``).

    python -m benchmarks.learner_throughput [--quick] [--rounds N] [--min-time S] [--cases a,b] [--threads T]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

import numpy as np
import torch
from torch.nn import functional as F

from benchmarks.common import alternating_ratios, load_average, publish
from benchmarks.dqn_networks import ATARI_OBS, CARTPOLE_OBS, bare_copy_of, bare_input, dqn_agent
from rlrun import spaces as sp

# case -> (observation space, number of actions, network, batch size)
CASES: dict[str, tuple[sp.Box, int, str, int]] = {
    "atari_nature_cnn": (ATARI_OBS, 6, "nature_cnn", 32),
    "cartpole_mlp": (CARTPOLE_OBS, 2, "mlp", 256),
}
AGENT_SETTINGS = {"huber_delta": 1.0, "double_q": True, "max_grad_norm": 10.0, "tau": 0.02, "lr": 2.5e-4}


def make_batch(obs_space: sp.Box, num_actions: int, batch_size: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """A replay batch as the agent's memory returns it (obs, action, reward, next_obs, discount)."""
    rng = np.random.default_rng(seed)
    obs = sp.to_torch(obs_space, sp.sample(obs_space, (batch_size,), seed=seed))
    next_obs = sp.to_torch(obs_space, sp.sample(obs_space, (batch_size,), seed=seed + 1))
    if obs_space.dtype != np.uint8:  # CartPole's Box is unbounded: keep the samples in a sane range
        obs, next_obs = obs.clamp(-3, 3), next_obs.clamp(-3, 3)
    return {"obs": obs, "next_obs": next_obs,
            "action": torch.as_tensor(rng.integers(0, num_actions, batch_size), dtype=torch.int64),
            "reward": torch.as_tensor(rng.standard_normal(batch_size), dtype=torch.float32),
            "discount": torch.as_tensor(0.99 * (rng.random(batch_size) > 0.05), dtype=torch.float32)}


def bare_dqn_step(online: torch.nn.Module, target: torch.nn.Module, optimizer: torch.optim.Optimizer,
                  batch: dict[str, torch.Tensor], network: str, huber_delta: float, max_grad_norm: float,
                  tau: float) -> torch.Tensor:
    """One double-DQN gradient step in plain PyTorch; returns the loss before the step."""
    obs, next_obs = bare_input(batch["obs"], network), bare_input(batch["next_obs"], network)
    q_taken = online(obs).gather(1, batch["action"].unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        next_action = online(next_obs).argmax(dim=1, keepdim=True)
        next_value = target(next_obs).gather(1, next_action).squeeze(1)
        y = batch["reward"] + batch["discount"] * next_value
    loss = F.huber_loss(q_taken, y, delta=huber_delta)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(online.parameters(), max_grad_norm)
    optimizer.step()
    with torch.no_grad():
        for t, s in zip(target.parameters(), online.parameters(), strict=True):
            t.lerp_(s, tau)
    return loss.detach()


def dqn_case(name: str, rounds: int, min_time_s: float) -> dict[str, Any]:
    obs_space, num_actions, network, batch_size = CASES[name]
    agent = dqn_agent(obs_space, sp.Discrete(num_actions), network, **AGENT_SETTINGS)
    online, target = bare_copy_of(agent, obs_space, num_actions, network)
    optimizer = torch.optim.Adam(online.parameters(), lr=AGENT_SETTINGS["lr"], fused=True)
    batch = make_batch(obs_space, num_actions, batch_size)

    def through_agent() -> Any:
        return agent.update(batch)

    def bare() -> torch.Tensor:
        return bare_dqn_step(online, target, optimizer, batch, network, AGENT_SETTINGS["huber_delta"],
                             AGENT_SETTINGS["max_grad_norm"], AGENT_SETTINGS["tau"])

    for step in range(2):  # same weights, same batch: the same losses, or the comparison means nothing
        agent_loss, bare_loss = float(through_agent()["loss"]), float(bare())
        if not np.isclose(agent_loss, bare_loss, rtol=1e-4, atol=1e-6):
            raise AssertionError(f"{name}: step {step}: the agent's loss {agent_loss} != the bare step's {bare_loss}: "
                                 f"the hand-written reference no longer computes what the agent does")
    figures: dict[str, Any] = {f"batch_size/{name}": batch_size}
    for clock, (t_agent, t_bare, ratio) in alternating_ratios(through_agent, bare, rounds, min_time_s).items():
        unit = "samples_per_s" if clock == "wall" else "samples_per_cpu_s"
        figures[f"{unit}/{name}/rlrun"] = round(batch_size / t_agent, 1)
        figures[f"{unit}/{name}/bare"] = round(batch_size / t_bare, 1)
        figures[f"ratio/{unit}/{name}/rlrun_vs_bare"] = round(1.0 / ratio, 4)
    return figures


ALGOS: dict[str, Callable[[str, int, float], dict[str, Any]]] = {"dqn": dqn_case}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CI settings: 7 rounds of 0.4 s")
    parser.add_argument("--rounds", type=int, help="timed rounds (default 9; --quick 7)")
    parser.add_argument("--min-time", type=float, help="seconds per round, both sides (default 1.0; --quick 0.4)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (rlrun's default: 1)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (7 if args.quick else 9)
    min_time = args.min_time or (0.4 if args.quick else 1.0)
    torch.set_num_threads(args.threads)
    figures: dict[str, Any] = {"torch_threads": args.threads, "rounds": rounds, "load_average_before": load_average()}
    for case in [c for c in args.cases.split(",") if c]:
        if case not in CASES:
            parser.error(f"unknown case {case}; cases: {', '.join(CASES)}")
        figures.update(ALGOS["dqn"](case, rounds, min_time))
    from rlrun.registry import registry

    for algo in registry.names("algo"):
        if algo not in ALGOS:
            figures[f"unavailable/{algo}"] = f"no hand-written reference step for algo={algo} yet"
    command = "python -m benchmarks.learner_throughput " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("learner_throughput", figures, command)
    return figures


if __name__ == "__main__":
    main()
