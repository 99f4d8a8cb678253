"""rlrun on CartPole-v1 (``rlrun algo=<algo> env=cartpole``: PPO with its CartPole preset, 8 env copies), built
by the registry and stepped iteration by iteration as ``run_experiment`` does, without checkpoints or loggers. Its
budget is rlrun's default ``stop.env_steps`` (what a user's run gets), unless ``--budget-env-steps`` is given."""

from __future__ import annotations

import argparse

from benchmarks.peers.contenders.rlrun_plan import train_to_budget


def overrides(algo: str, seed: int, budget_env_steps: int | None = None, no_preset: bool = False) -> list[str]:
    """What ``rlrun algo=<algo> env=cartpole`` gets here; ``no_preset``: without conf/algo_env/<algo>_cartpole.yaml
    (PPO then runs the schema's defaults, the zoo's CartPole settings, on the zoo's 8 copies: what SB3 runs)."""
    extra = [f"stop.env_steps={budget_env_steps}"] if budget_env_steps else []
    if no_preset:
        extra += ["~algo_env", "executor.num_envs=8"] if algo == "ppo" else ["~algo_env"]
    return [f"algo={algo}", "env=cartpole", f"seed={seed}", *extra, "stop.episode_return_mean=null", "logger=none"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--algo", default="ppo")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-env-steps", type=int, default=None,
                   help="default: rlrun's own stop.env_steps (100k, as the zoo's n_timesteps); PPO's learning-rate and "
                        "clip schedules anneal over it")
    p.add_argument("--no-preset", action="store_true",
                   help="without conf/algo_env/<algo>_cartpole.yaml (PPO: the zoo's CartPole settings, as SB3 runs)")
    args = p.parse_args()
    train_to_budget(overrides(args.algo, args.seed, args.budget_env_steps, args.no_preset), args.algo, args.seed)


if __name__ == "__main__":
    main()
