"""device.compile: the speed-up of ``torch.compile`` (inductor) on the DQN agent's update and act paths, on CPU.

Two DQN agents with the same weights, one with its networks compiled as ``device.compile=true`` does
(rlrun.devices.compile_networks: ``torch.compile`` of q and target_q; the loss and the Adam step stay eager).
Per case: the one-off compile time (first update + first act), a check that the first update's losses agree,
then the eager/compiled time ratio timed in alternating rounds (benchmarks.common.alternating_ratio) for
``update(batch)`` and for greedy ``get_actions`` at batch 1. Figures ``speedup/<path>/<case>`` = eager time /
compiled time (> 1: compiling helps). One torch thread (rlrun's default).

Cases as benchmarks/learner_throughput.py: ``atari_nature_cnn`` (Nature CNN, uint8 4x84x84, 6 actions, batch 32)
and ``cartpole_mlp`` (MLP [64, 64], batch 256).

    python -m benchmarks.device_compile [--quick] [--rounds N] [--min-time S] [--cases a,b] [--threads T]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import torch

from benchmarks.common import alternating_ratio, load_average, write_result
from benchmarks.dqn_networks import dqn_agent
from benchmarks.learner_throughput import AGENT_SETTINGS, CASES, make_batch
from rlrun import spaces as sp
from rlrun.devices import CompiledOrEager, compile_networks


def run_case(name: str, rounds: int, min_time_s: float) -> dict[str, Any]:
    obs_space, num_actions, network, batch_size = CASES[name]
    actions = sp.Discrete(num_actions)
    torch.manual_seed(0)
    eager = dqn_agent(obs_space, actions, network, **AGENT_SETTINGS)
    torch.manual_seed(0)
    compiled = dqn_agent(obs_space, actions, network, **AGENT_SETTINGS)
    compile_networks(compiled)
    batch = make_batch(obs_space, num_actions, batch_size)
    obs1 = {k: v[:1] for k, v in batch.items()}["obs"]
    start = time.perf_counter()
    loss_c = compiled.update(batch)["loss"]
    compiled.get_actions(obs1, False)
    compile_s = time.perf_counter() - start
    loss_e = eager.update(batch)["loss"]
    fell_back = [c.name for c in (compiled.q, compiled.target_q)
                 if isinstance(c.__dict__.get("forward"), CompiledOrEager) and c.__dict__["forward"].compiled is None]
    figures: dict[str, Any] = {f"compile_s/{name}": round(compile_s, 2),
                               f"loss_abs_diff/{name}": float((loss_c - loss_e).abs())}
    if fell_back:
        figures[f"fell_back/{name}"] = ", ".join(fell_back)
    t_c, t_e, ratio = alternating_ratio(lambda: compiled.update(batch), lambda: eager.update(batch), rounds,
                                        2 * min_time_s)
    figures[f"update_ms/{name}/compiled"] = round(t_c * 1e3, 3)
    figures[f"update_ms/{name}/eager"] = round(t_e * 1e3, 3)
    figures[f"speedup/update/{name}"] = round(1.0 / ratio, 3)
    with torch.no_grad():
        t_c, t_e, ratio = alternating_ratio(lambda: compiled.get_actions(obs1, False),
                                            lambda: eager.get_actions(obs1, False), rounds, 2 * min_time_s)
    figures[f"act_us/{name}/compiled"] = round(t_c * 1e6, 1)
    figures[f"act_us/{name}/eager"] = round(t_e * 1e6, 1)
    figures[f"speedup/act/{name}"] = round(1.0 / ratio, 3)
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CI settings: 5 rounds of 0.2 s")
    parser.add_argument("--rounds", type=int, help="timed rounds (default 7; --quick 5)")
    parser.add_argument("--min-time", type=float, help="seconds per side per round (default 0.5; --quick 0.2)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (rlrun's default: 1)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (5 if args.quick else 7)
    min_time = args.min_time or (0.2 if args.quick else 0.5)
    torch.set_num_threads(args.threads)
    figures: dict[str, Any] = {"threads": args.threads, "load_average_start": load_average()}
    for name in args.cases.split(","):
        figures.update(run_case(name, rounds, min_time))
    command = "python -m benchmarks.device_compile " + " ".join(argv if argv is not None else sys.argv[1:])
    path = write_result("device_compile", figures, command.strip())
    for k, v in sorted(figures.items()):
        print(f"{k}: {v}")
    print(f"-> {path}")
    return figures


if __name__ == "__main__":
    main()
