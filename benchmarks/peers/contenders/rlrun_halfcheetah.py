"""rlrun training PPO on HalfCheetah-v5 (``rlrun algo=ppo env=mujoco env.id=HalfCheetah-v5``: its MuJoCo preset,
conf/algo_env/ppo_mujoco.yaml, CleanRL's ``ppo_continuous_action.py`` settings), built by the registry and stepped
iteration by iteration as ``run_experiment`` does, without checkpoints or loggers. The budget is
``stop.env_steps``, over which the learning rate anneals. Prints one JSON line per iteration (one rollout of 2,048
env steps and its update), the protocol of benchmarks/peers/contenders/__init__.py:
``{"episodes": [raw training returns that ended in it], "env_steps": N}``. Runs in rlrun's venv."""

from __future__ import annotations

import argparse

from benchmarks.peers.contenders.rlrun_plan import train_to_budget


def overrides(seed: int, budget_env_steps: int, env_id: str = "HalfCheetah-v5") -> list[str]:
    """What ``rlrun algo=ppo env=mujoco env.id=<env_id> seed=<seed> stop.env_steps=<budget>`` gets here."""
    return ["algo=ppo", "env=mujoco", f"env.id={env_id}", f"seed={seed}", f"stop.env_steps={budget_env_steps}",
            "stop.episode_return_mean=null", "logger=none"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-env-steps", type=int, default=1_000_000)
    p.add_argument("--env-id", default="HalfCheetah-v5")
    args = p.parse_args()
    train_to_budget(overrides(args.seed, args.budget_env_steps, args.env_id), "ppo", args.seed)


if __name__ == "__main__":
    main()
