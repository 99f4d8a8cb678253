"""Stable-Baselines3 on CartPole-v1 with rl-baselines3-zoo's tuned settings (hyperparams/ppo.yml and dqn.yml,
CartPole-v1; ``lin_X``: X times the remaining progress), trained for the zoo's ``n_timesteps`` so its linear
schedules are the zoo's. Runs in the sb3 venv."""

from __future__ import annotations

import argparse
import json

SETTINGS = {
    "ppo": {"n_envs": 8, "n_timesteps": 100_000, "n_steps": 32, "batch_size": 256, "gae_lambda": 0.8,
            "gamma": 0.98, "n_epochs": 20, "ent_coef": 0.0, "learning_rate": ("lin", 1e-3),
            "clip_range": ("lin", 0.2)},
    "dqn": {"n_envs": 1, "n_timesteps": 50_000, "learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
            "learning_starts": 1000, "gamma": 0.99, "target_update_interval": 10, "train_freq": 256,
            "gradient_steps": 128, "exploration_fraction": 0.16, "exploration_final_eps": 0.04,
            "policy_kwargs": {"net_arch": [256, 256]}},
}


def zoo_settings(algo: str) -> tuple[int, int, dict]:
    """``(n_envs, n_timesteps, the model's keyword arguments)`` of ``SETTINGS[algo]``, a zoo ``lin_X`` made the
    schedule SB3 calls with the remaining progress (1 at the start, 0 at the end)."""
    settings = dict(SETTINGS[algo])
    n_envs, total = settings.pop("n_envs"), settings.pop("n_timesteps")
    for key, value in list(settings.items()):
        if isinstance(value, tuple) and value[0] == "lin":
            settings[key] = (lambda start: (lambda remaining: remaining * start))(value[1])
    return n_envs, total, settings


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--algo", default="ppo")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-env-steps", type=int, default=0, help="ignored: the zoo's n_timesteps is the budget")
    args = p.parse_args()
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    n_envs, total, settings = zoo_settings(args.algo)

    class Report(BaseCallback):
        def _on_step(self) -> bool:
            returns = [float(i["episode"]["r"]) for i in self.locals["infos"] if "episode" in i]
            if returns:
                print(json.dumps({"episodes": returns, "env_steps": int(self.num_timesteps)}), flush=True)
            return True

    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=args.seed)
    model = getattr(sb3, args.algo.upper())("MlpPolicy", env, seed=args.seed, device="cpu", verbose=0, **settings)
    model.learn(total_timesteps=total, callback=Report())
    env.close()


if __name__ == "__main__":
    main()
