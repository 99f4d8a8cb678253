"""rlrun training TD3 on HalfCheetah-v5 (``rlrun algo=td3 env=mujoco env.id=HalfCheetah-v5``: its MuJoCo preset,
conf/algo_env/td3_mujoco.yaml, CleanRL's ``td3_continuous_action.py`` settings) with the task's ``learning_starts``,
built by the registry and stepped as ``run_experiment`` does, without checkpoints or loggers. Prints one JSON line
per training step, ``{"episodes": [raw training returns that ended in it], "env_steps": N}``
(benchmarks/peers/td3_task.py). Runs in rlrun's venv."""

from __future__ import annotations

import argparse

from benchmarks.peers.contenders.rlrun_plan import train_to_budget


def overrides(seed: int, budget_env_steps: int, learning_starts: int, env_id: str = "HalfCheetah-v5") -> list[str]:
    return ["algo=td3", "env=mujoco", f"env.id={env_id}", f"seed={seed}", f"stop.env_steps={budget_env_steps}",
            f"algo.learning_starts={learning_starts}", "stop.episode_return_mean=null", "logger=none"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-env-steps", type=int, default=15_000)
    p.add_argument("--learning-starts", type=int, default=5_000)
    p.add_argument("--env-id", default="HalfCheetah-v5")
    args = p.parse_args()
    train_to_budget(overrides(args.seed, args.budget_env_steps, args.learning_starts, args.env_id), "td3", args.seed)


if __name__ == "__main__":
    main()
