"""rlrun acting on Pong (``rlrun algo=ppo env=pong``: the DeepMind protocol, 8 env copies in one local worker, the
Nature-CNN actor-critic of its Atari preset) without learning: the plan's own worker set samples rollouts of 128
agent steps per copy, as its training step does, with the untrained network. Prints one JSON line per rollout,
``benchmarks/peers/acting.py``'s protocol. Runs in rlrun's venv."""

from __future__ import annotations

import argparse


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=float, default=20.0, help="acting time after the first rollout")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--rollout-steps", type=int, default=128)
    args = p.parse_args()
    import json
    import time

    import torch
    from omegaconf import OmegaConf

    from rlrun.app.run import seed_everything
    from rlrun.config import compose
    from rlrun.devices import resolve_device
    from rlrun.registry import registry

    torch.set_num_threads(1)
    cfg = compose(["algo=ppo", "env=pong", f"seed={args.seed}", "executor=local",
                   f"executor.num_envs={args.num_envs}", f"algo.rollout_steps={args.rollout_steps}", "logger=none"])
    seed_everything(args.seed)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, args.seed)
    plan = registry.get("algo", "ppo")(OmegaConf.to_object(cfg.algo), env_factory.spec, executor,
                                       resolve_device(cfg.device), args.seed)
    try:
        steps, start = 0, None
        while start is None or time.perf_counter() - start < args.seconds:
            for batch in plan.workers.sample(args.rollout_steps):
                steps += batch.env_steps
            if start is None:  # the first rollout is start-up (its time is the harness's start-up figure)
                start, steps = time.perf_counter(), 0
            print(json.dumps({"agent_steps": steps, "seconds": time.perf_counter() - start,
                              "frame_skip": env_factory.spec.frame_skip}), flush=True)
    finally:
        plan.stop()


if __name__ == "__main__":
    main()
