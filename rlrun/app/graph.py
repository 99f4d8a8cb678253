"""``rlrun graph [overrides] [--dot FILE] [--tensorboard DIR]``: build the configured algorithm's agent (no
environment workers, no training) and print its component graph with spaces and devices."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from rlrun import spaces as sp
from rlrun.components.graph import graph_dot, graph_text, trace_calls
from rlrun.config import compose
from rlrun.devices import resolve_device
from rlrun.errors import ConfigError
from rlrun.registry import registry


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="rlrun graph", description=__doc__)
    parser.add_argument("overrides", nargs="*", help="config overrides, as for rlrun")
    parser.add_argument("--dot", type=Path, help="also write the graph as Graphviz dot to this file")
    parser.add_argument("--tensorboard", type=Path, help="also write the acting graph to TensorBoard in this dir")
    args = parser.parse_args(argv)

    import torch
    from omegaconf import OmegaConf


    cfg = compose(args.overrides)
    device = resolve_device(cfg.device)
    spec = registry.build("env", cfg.env.name, cfg.env).spec
    algo_cls = registry.get("algo", cfg.algo.name)
    agent = algo_cls.make_agent(OmegaConf.to_object(cfg.algo), spec, int(cfg.seed))
    if agent is None:
        raise ConfigError(f"algo={cfg.algo.name} is not built from components, so it has no component graph.")
    agent = agent.to(device)
    obs = sp.to_torch(spec.observation_space, sp.sample(spec.observation_space, (1,), seed=int(cfg.seed)), device)
    with torch.inference_mode():
        _, calls, violations = trace_calls(lambda: agent.get_actions(obs, explore=False))
    sys.stdout.write(f"# {cfg.algo.name} on {spec.id}: observation {sp.describe(spec.observation_space)}, "
                     f"action {sp.describe(spec.action_space)}\n")
    sys.stdout.write(graph_text(agent, calls))
    if violations:
        sys.stdout.write("boundary violations:\n" + "".join(f"  {v}\n" for v in violations))
    if args.dot:
        args.dot.write_text(graph_dot(agent))
        sys.stdout.write(f"wrote {args.dot}\n")
    if args.tensorboard:
        from torch.utils.tensorboard import SummaryWriter

        class Acting(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.agent = agent

            def forward(self, o):  # type: ignore[no-untyped-def]
                return self.agent.get_actions(o, explore=False)

        with SummaryWriter(str(args.tensorboard)) as writer:
            writer.add_graph(Acting(), obs)
        sys.stdout.write(f"wrote the acting graph to {args.tensorboard}\n")
