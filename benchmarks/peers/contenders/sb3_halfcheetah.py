"""Stable-Baselines3 training PPO on HalfCheetah-v5 with CleanRL's ``ppo_continuous_action.py`` settings, the ones
rlrun's MuJoCo preset and CleanRL run (benchmarks/peers/mujoco_task.py ``SETTINGS``; not rl-baselines3-zoo's tuned
HalfCheetah settings: the task compares wall time for the same work): one env copy (``make_vec_env``: a
``DummyVecEnv`` with SB3's ``Monitor``, whose episode returns are the raw ones), ``VecNormalize`` for the observation
and reward normalisation (clipped to ±10, reward scaled by the discounted return's std at gamma), rollouts of 2,048,
10 epochs of minibatches of 64, lr 3e-4 annealed linearly to 0, gamma 0.99, lambda 0.95, clip 0.2 (value clip 0.2),
64x64 tanh actor and critic without shared layers, orthogonal initialisation, state-independent log std from 0,
Adam eps 1e-5 (SB3's default for PPO). SB3 clips actions to the action space itself (CleanRL's ``ClipAction``).

Differences that remain, each SB3's own design: its value clipping keeps the clipped loss only (CleanRL: the max of
clipped and unclipped), its value loss is not halved, and it bootstraps time-limit truncations from the value
(as rlrun does; CleanRL treats them as terminations).

Prints one JSON line per rollout, the protocol of benchmarks/peers/contenders/__init__.py:
``{"episodes": [raw training returns that ended in it], "env_steps": N}``, and a last one after the final update.
Runs in the sb3 venv (mujoco installed there)."""

from __future__ import annotations

import argparse
import json

# CleanRL ppo_continuous_action.py's defaults in SB3's names (learning_rate: annealed linearly from this to 0).
SETTINGS = {"n_envs": 1, "n_steps": 2048, "batch_size": 64, "n_epochs": 10, "learning_rate": 3e-4, "gamma": 0.99,
            "gae_lambda": 0.95, "clip_range": 0.2, "clip_range_vf": 0.2, "ent_coef": 0.0, "vf_coef": 0.5,
            "max_grad_norm": 0.5, "normalize_advantage": True, "net_arch": [64, 64], "activation": "tanh",
            "log_std_init": 0.0, "ortho_init": True, "norm_obs": True, "norm_reward": True, "clip_obs": 10.0,
            "clip_reward": 10.0}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-env-steps", type=int, default=1_000_000)
    p.add_argument("--env-id", default="HalfCheetah-v5")
    args = p.parse_args()
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    s = SETTINGS
    start_lr = s["learning_rate"]

    class Report(BaseCallback):
        """Collects the returns of the episodes that end during a rollout; one line per rollout."""

        def __init__(self) -> None:
            super().__init__()
            self.returns: list[float] = []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(float(info["episode"]["r"]))
            return True

        def _on_rollout_end(self) -> None:
            print(json.dumps({"episodes": self.returns, "env_steps": int(self.num_timesteps)}), flush=True)
            self.returns = []

    env = VecNormalize(make_vec_env(args.env_id, n_envs=s["n_envs"], seed=args.seed), norm_obs=s["norm_obs"],
                       norm_reward=s["norm_reward"], clip_obs=s["clip_obs"], clip_reward=s["clip_reward"],
                       gamma=s["gamma"])
    model = PPO("MlpPolicy", env, learning_rate=lambda remaining: remaining * start_lr, n_steps=s["n_steps"],
                batch_size=s["batch_size"], n_epochs=s["n_epochs"], gamma=s["gamma"], gae_lambda=s["gae_lambda"],
                clip_range=s["clip_range"], clip_range_vf=s["clip_range_vf"], ent_coef=s["ent_coef"],
                vf_coef=s["vf_coef"], max_grad_norm=s["max_grad_norm"], normalize_advantage=s["normalize_advantage"],
                policy_kwargs={"net_arch": {"pi": s["net_arch"], "vf": s["net_arch"]},
                               "activation_fn": torch.nn.Tanh, "log_std_init": s["log_std_init"],
                               "ortho_init": s["ortho_init"]},
                seed=args.seed, device="cpu", verbose=0)
    report = Report()
    model.learn(total_timesteps=args.budget_env_steps, callback=report)
    # The last rollout's line came before its update: one more line once learning is done.
    print(json.dumps({"episodes": report.returns, "env_steps": int(model.num_timesteps)}), flush=True)
    env.close()


if __name__ == "__main__":
    main()
