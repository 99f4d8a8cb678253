"""Component-graph overheads (issue: component graph), as ratios against bare PyTorch measured in the same run.

1. Build time: a single replay memory, and the dueling double DQN agent with prioritised replay on Atari spaces
   (Nature CNN, 4x84x84 uint8, 6 actions). RLgraph reported ~650 ms for the latter on PyTorch; goal: 10x under.
2. Per-call overhead of acting through the component API (``agent.get_actions(obs, explore=False)``) against the
   same modules called bare (``torso -> head -> argmax``), at batch 1, 16 and 256, for the CartPole MLP agent
   and the Atari Nature-CNN agent. Goal: <= 10% at batch 1 and <= 2% at batch 256 (ratio - 1).

    python -m benchmarks.component_overhead [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from benchmarks.common import interleaved_ratio, write_result
from rlrun import spaces as sp

ATARI_OBS = sp.Box(0, 255, (4, 84, 84), np.uint8)
CARTPOLE_OBS = sp.Box(-np.inf, np.inf, (4,), np.float32)


def _dqn_config(**overrides: Any) -> Any:
    from rlrun.algos.dqn_config import DQNConfig

    return replace(DQNConfig(), **overrides)


def build_times(repeats: int) -> dict[str, float]:
    from rlrun.algos.dqn import DQNAgent
    from rlrun.components.memories import ReplayMemory

    record = sp.Dict({"obs": CARTPOLE_OBS, "action": sp.Discrete(2), "reward": sp.Box(-np.inf, np.inf, (), np.float32),
                      "next_obs": CARTPOLE_OBS, "discount": sp.Box(0, 1, (), np.float32)})
    memory_ms, agent_ms, agent_storage_ms = [], [], []
    # The graph alone (replay capacity 100) and with 10k Atari transitions of zero-filled storage (obs and
    # next_obs: 2 x 10k x 4x84x84 bytes = 565 MB; the zero fill is kept so checkpoints are deterministic).
    graph_cfg = _dqn_config(network="nature_cnn", dueling=True, prioritized_replay=True, buffer_size=100)
    storage_cfg = replace(graph_cfg, buffer_size=10_000)
    for _ in range(repeats):
        t0 = time.perf_counter()
        ReplayMemory(100_000).build(records=record)
        t1 = time.perf_counter()
        DQNAgent(graph_cfg).build(obs=ATARI_OBS, actions=sp.Discrete(6))
        t2 = time.perf_counter()
        DQNAgent(storage_cfg).build(obs=ATARI_OBS, actions=sp.Discrete(6))
        t3 = time.perf_counter()
        memory_ms.append((t1 - t0) * 1e3)
        agent_ms.append((t2 - t1) * 1e3)
        agent_storage_ms.append((t3 - t2) * 1e3)
    return {"build_ms/replay_memory_100k_cartpole": statistics.median(memory_ms),
            "build_ms/dueling_double_dqn_per_atari": statistics.median(agent_ms),
            "build_ms/dueling_double_dqn_per_atari_10k_storage": statistics.median(agent_storage_ms),
            "build_ratio/dueling_double_dqn_per_vs_rlgraph_650ms": statistics.median(agent_ms) / 650.0}


def acting_overhead(name: str, obs_space: sp.Space, cfg: Any, batches: list[int], rounds: int) -> dict[str, float]:
    from rlrun.algos.dqn import DQNAgent

    agent = DQNAgent(cfg).build(obs=obs_space, actions=sp.Discrete(6)).eval()
    torso, head = agent.q.torso, agent.q.head
    figures = {}
    for b in batches:
        obs = sp.to_torch(obs_space, sp.sample(obs_space, (b,), seed=0))

        def through_api(obs: torch.Tensor = obs) -> torch.Tensor:
            return agent.get_actions(obs, explore=False)

        def bare(obs: torch.Tensor = obs) -> torch.Tensor:
            return head.linear(_bare_torso(torso, obs)).argmax(dim=-1)

        with torch.inference_mode():
            assert torch.equal(through_api(), bare())
            t_api, t_bare, ratio = interleaved_ratio(through_api, bare, rounds=rounds)
        figures[f"act_us/{name}/batch{b}/api"] = t_api * 1e6
        figures[f"act_us/{name}/batch{b}/bare"] = t_bare * 1e6
        figures[f"act_overhead/{name}/batch{b}"] = ratio - 1.0
    return figures


def _bare_torso(torso: Any, obs: torch.Tensor) -> torch.Tensor:
    """The torso's own torch layers, called without the component API (what a hand-written script would do)."""
    if hasattr(torso, "layers"):  # MLP: flatten + Sequential
        return torso.layers(obs.reshape(obs.shape[0], -1).float())
    return torso.body(obs.float() / 255.0)  # image torsos: uint8 -> [0, 1], then the conv stack


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (CI smoke)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rounds = 3 if args.quick else 7
    figures = build_times(3 if args.quick else 7)
    figures.update(acting_overhead("cartpole_mlp", CARTPOLE_OBS, _dqn_config(hidden_sizes=[128, 128]),
                                   [1, 16, 256], rounds))
    figures.update(acting_overhead("atari_nature_cnn", ATARI_OBS,
                                   _dqn_config(network="nature_cnn", buffer_size=100), [1, 16, 256], rounds))
    path = write_result("component_overhead", figures, "python -m benchmarks.component_overhead"
                        + (" --quick" if args.quick else ""))
    for k, v in figures.items():
        print(f"{k:60s} {v:10.3f}")
    print(f"wrote {path}", file=sys.stderr)
    return figures


if __name__ == "__main__":
    main()
