"""Stable-Baselines3 acting on Pong without learning: rl-baselines3-zoo's Atari PPO setup (hyperparams/ppo.yml
``atari``: ``make_atari_env`` with SB3's ``AtariWrapper`` on ``PongNoFrameskip-v4``, 8 copies in a
``DummyVecEnv``, ``VecFrameStack`` of 4, ``CnnPolicy``, ``n_steps`` 128) and SB3's own acting path:
``collect_rollouts``, the call ``learn()`` makes before each update (policy forward, value and log-probability,
the rollout buffer), with the untrained network. Prints one JSON line per rollout, ``benchmarks/peers/acting.py``'s
protocol. Runs in the sb3 venv (ale-py and OpenCV installed there)."""

from __future__ import annotations

import argparse
import json
import time

# The zoo's PPO Atari settings (rl-baselines3-zoo hyperparams/ppo.yml, ``atari``); only n_envs, n_steps and the
# frame stack shape acting, the rest is given for completeness.
SETTINGS = {"n_envs": 8, "frame_stack": 4, "n_steps": 128, "n_epochs": 4, "batch_size": 256, "vf_coef": 0.5,
            "ent_coef": 0.01}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=float, default=20.0, help="acting time after the first rollout")
    p.add_argument("--num-envs", type=int, default=SETTINGS["n_envs"])
    p.add_argument("--rollout-steps", type=int, default=SETTINGS["n_steps"])
    args = p.parse_args()
    import ale_py
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)  # the NoFrameskip-v4 ids
    torch.set_num_threads(1)
    env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=args.num_envs, seed=args.seed),
                        n_stack=SETTINGS["frame_stack"])
    model = PPO("CnnPolicy", env, n_steps=args.rollout_steps, n_epochs=SETTINGS["n_epochs"],
                batch_size=SETTINGS["batch_size"], vf_coef=SETTINGS["vf_coef"], ent_coef=SETTINGS["ent_coef"],
                seed=args.seed, device="cpu", verbose=0)
    _, callback = model._setup_learn(total_timesteps=2**62)  # what learn() does before its first rollout
    callback.on_training_start(locals(), globals())
    steps, start = 0, None
    while start is None or time.perf_counter() - start < args.seconds:
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=args.rollout_steps)
        steps += args.rollout_steps * args.num_envs
        if start is None:  # the first rollout is start-up (its time is the harness's start-up figure)
            start, steps = time.perf_counter(), 0
        print(json.dumps({"agent_steps": steps, "seconds": time.perf_counter() - start, "frame_skip": 4}),
              flush=True)
    env.close()


if __name__ == "__main__":
    main()
