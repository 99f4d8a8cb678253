"""What rlrun's contender scripts share (they run in rlrun's venv): an algorithm's plan built by the registry from
config overrides, as ``run_experiment`` builds it (its device strategy applied; without checkpoints or loggers),
with one torch thread; and its training loop, one ``training_step`` at a time to ``stop.env_steps``, printing the
peers' JSON lines (benchmarks/peers/contenders/__init__.py)."""

from __future__ import annotations

import json
from typing import Any


def build_plan(overrides: list[str], algo: str, seed: int) -> tuple[Any, Any, Any]:
    """``(plan, env_factory, cfg)`` of ``rlrun <overrides>``; the caller stops the plan. The garbage collector is
    paused from before torch's import until the plan is built, as the ``rlrun`` command does
    (rlrun/app/startup_gc.py)."""
    from rlrun.app.startup_gc import pause_collection, resume_collection

    pause_collection()
    import torch
    from omegaconf import OmegaConf

    from rlrun.app.run import seed_everything
    from rlrun.config import compose
    from rlrun.devices import apply_device_strategy, resolve_device
    from rlrun.registry import registry

    torch.set_num_threads(1)
    cfg = compose(overrides)
    seed_everything(seed)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, seed)
    plan = registry.get("algo", algo)(OmegaConf.to_object(cfg.algo), env_factory.spec, executor,
                                      resolve_device(cfg.device), seed)
    apply_device_strategy(cfg.device, plan)  # device.precision and the rest, as run_experiment applies them
    resume_collection()
    return plan, env_factory, cfg


def train_to_budget(overrides: list[str], algo: str, seed: int) -> None:
    """Train to ``stop.env_steps``, printing ``{"episodes": [...], "env_steps": N}`` after every iteration (so a
    reader counts updates too)."""
    plan, env_factory, cfg = build_plan(overrides, algo, seed)  # first: it pauses the collector before torch's import
    from rlrun.app.run import RunLoop

    loop = RunLoop(cfg, env_factory.spec.frame_skip)
    try:
        while loop.env_steps < int(cfg.stop.env_steps):
            result = plan.training_step()
            loop.add(result)
            print(json.dumps({"episodes": [float(r) for r in result.episode_returns],
                              "env_steps": int(loop.env_steps)}), flush=True)
    finally:
        plan.stop()
