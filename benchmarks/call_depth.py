"""Call depth: the Python frames from a plan's ``training_step()`` to its loss function, for PPO, DQN, SAC and
IMPALA (issue 38's measure of how far a reader walks from the plan to the loss).

Each algorithm is built as ``run_experiment`` builds it, on a tiny config (CartPole, or Pendulum for SAC; the local
executor; small networks and batches, learning from the first step), and ``training_step()`` is called until the
loss function runs, under ``sys.setprofile``. At the first call of the loss function the Python frames between the
two are read off the stack and printed, ``training_step`` and the loss function included; C functions (``torch``'s
kernels, ``functools.partial``) are not frames. The depth is that count: CleanRL's road is 4 (the plan, the
agent's update, a minibatch loop, the loss function).

The loss functions: PPO ``ppo_loss``, DQN the loss component's ``DQNLoss.loss``, SAC ``sac_critic_loss`` (the
first of its three), IMPALA ``impala_loss``.

    python -m benchmarks.call_depth [--algos ppo,dqn,sac,impala]
"""

from __future__ import annotations

import argparse
import inspect
import sys
import types
from typing import Any, Callable

import torch
from omegaconf import OmegaConf

CASES: dict[str, list[str]] = {
    "ppo": ["algo=ppo", "env=cartpole", "algo.hidden_sizes=[8]", "executor.num_envs=2", "algo.rollout_steps=8",
            "algo.num_epochs=1", "algo.minibatch_size=8"],
    "dqn": ["algo=dqn", "env=cartpole", "algo.hidden_sizes=[8]", "algo.learning_starts=1", "algo.batch_size=8",
            "algo.rollout_steps=8"],
    "sac": ["algo=sac", "env=pendulum", "algo.hidden_sizes=[8]", "algo.learning_starts=1", "algo.batch_size=8",
            "algo.rollout_steps=8"],
    "impala": ["algo=impala", "env=cartpole", "algo.hidden_sizes=[8]", "executor.num_envs=2", "algo.batch_size=2",
               "algo.unroll_length=4"],
}


def loss_function(algo: str) -> Callable:
    if algo == "ppo":
        from rlrun.components.policy_losses import ppo_loss
        return ppo_loss
    if algo == "dqn":
        from rlrun.components.losses import DQNLoss
        return DQNLoss.loss
    if algo == "sac":
        from rlrun.algos.sac import sac_critic_loss
        return sac_critic_loss
    from rlrun.components.policy_losses import impala_loss
    return impala_loss


def build(overrides: list[str], seed: int = 0) -> Any:
    """The algorithm built the way ``run_experiment`` builds it (seeded globals, env factory, local executor)."""
    from rlrun.app.run import seed_everything
    from rlrun.config import compose
    from rlrun.registry import registry

    cfg = compose(["logger=none", f"seed={seed}", *overrides])
    torch.set_num_threads(1)
    seed_everything(seed)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, seed)
    return registry.get("algo", cfg.algo.name)(OmegaConf.to_object(cfg.algo), env_factory.spec, executor,
                                               torch.device("cpu"), seed)


def _name(frame: types.FrameType) -> str:
    code = frame.f_code
    owner = frame.f_locals.get("self")
    qualname = getattr(code, "co_qualname", code.co_name)
    if owner is not None and "." not in qualname:
        qualname = f"{type(owner).__name__}.{qualname}"
    return f"{qualname} ({code.co_filename.rsplit('/', 2)[-2]}/{code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno})"


def road(algo: str, max_steps: int = 50) -> list[str]:
    """The frames from ``training_step`` to the first call of ``algo``'s loss function, outermost first."""
    plan = build(CASES[algo])
    target = inspect.unwrap(loss_function(algo)).__code__
    found: list[str] = []

    def profile(frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code is not target or found:
            return
        chain, f = [], frame
        while f is not None:
            chain.append(f)
            if f.f_code.co_name == "training_step":
                found.extend(_name(x) for x in reversed(chain))
                return
            f = f.f_back

    try:
        for _ in range(max_steps):
            sys.setprofile(profile)
            try:
                plan.training_step()
            finally:
                sys.setprofile(None)
            if found:
                break
    finally:
        plan.stop()
    if not found:
        raise RuntimeError(f"{algo}: the loss function did not run within {max_steps} training steps")
    return found


def main(argv: list[str] | None = None) -> dict[str, int]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    args = parser.parse_args(argv)
    depths = {}
    for algo in args.algos.split(","):
        frames = road(algo)
        depths[algo] = len(frames)
        print(f"{algo}: {len(frames)} frames from training_step() to the loss function")
        for i, name in enumerate(frames):
            print(f"  {'  ' * i}{name}")
    return depths


if __name__ == "__main__":
    main()
