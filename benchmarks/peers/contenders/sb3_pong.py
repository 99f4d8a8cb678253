"""Stable-Baselines3 on Pong: rl-baselines3-zoo's Atari PPO setup (hyperparams/ppo.yml ``atari``:
``make_atari_env`` with SB3's ``AtariWrapper`` on ``PongNoFrameskip-v4``, 8 copies in a ``DummyVecEnv``,
``VecFrameStack`` of 4, ``CnnPolicy``, ``n_steps`` 128, 4 epochs of minibatches of 256, lr and clip range
``lin_2.5e-4`` / ``lin_0.1``).

``--mode acting``: SB3's own acting path without learning, ``collect_rollouts``, the call ``learn()`` makes before
each update (policy forward, value and log-probability, the rollout buffer), with the untrained network.
``--mode training``: ``model.learn()`` itself, learning included; a callback reports at the start of each rollout
(after the previous update) and stops it after ``--seconds``. Prints one JSON line per rollout / update,
``benchmarks/peers/pong_tasks.py``'s protocol. Runs in the sb3 venv (ale-py and OpenCV installed there)."""

from __future__ import annotations

import argparse
import json
import time

# The zoo's PPO Atari settings (rl-baselines3-zoo hyperparams/ppo.yml, ``atari``).
SETTINGS = {"n_envs": 8, "frame_stack": 4, "n_steps": 128, "n_epochs": 4, "batch_size": 256, "vf_coef": 0.5,
            "ent_coef": 0.01, "learning_rate": 2.5e-4, "clip_range": 0.1}


def report(steps: int, start: float) -> float:
    """Print a protocol line; return the seconds it reports (the run ends on the line that reports >= --seconds)."""
    seconds = time.perf_counter() - start
    print(json.dumps({"agent_steps": steps, "seconds": seconds, "frame_skip": 4}), flush=True)
    return seconds


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("acting", "training"), default="acting")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=float, default=20.0, help="acting / training time after the first rollout")
    p.add_argument("--num-envs", type=int, default=SETTINGS["n_envs"])
    p.add_argument("--rollout-steps", type=int, default=SETTINGS["n_steps"])
    args = p.parse_args()
    import ale_py
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)  # the NoFrameskip-v4 ids
    torch.set_num_threads(1)
    env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=args.num_envs, seed=args.seed),
                        n_stack=SETTINGS["frame_stack"])
    lr, clip = SETTINGS["learning_rate"], SETTINGS["clip_range"]
    model = PPO("CnnPolicy", env, n_steps=args.rollout_steps, n_epochs=SETTINGS["n_epochs"],
                batch_size=SETTINGS["batch_size"], vf_coef=SETTINGS["vf_coef"], ent_coef=SETTINGS["ent_coef"],
                learning_rate=lambda left: lr * left, clip_range=lambda left: clip * left,  # the zoo's lin_ schedules
                seed=args.seed, device="cpu", verbose=0)
    per_round = args.rollout_steps * args.num_envs
    if args.mode == "training":
        class Report(BaseCallback):
            """At each rollout's start after the first (i.e. after an update): a protocol line; then stop once
            ``--seconds`` have passed."""

            def __init__(self) -> None:
                super().__init__()
                self.rounds, self.start, self.done = 0, 0.0, False

            def _on_rollout_start(self) -> None:
                if self.num_timesteps == 0:
                    return
                if self.rounds == 0:
                    self.start = time.perf_counter()
                self.done = report(self.rounds * per_round, self.start) >= args.seconds
                self.rounds += 1

            def _on_step(self) -> bool:
                return not self.done

        model.learn(total_timesteps=10_000_000, callback=Report())
        env.close()
        return
    _, callback = model._setup_learn(total_timesteps=2**62)  # what learn() does before its first rollout
    callback.on_training_start(locals(), globals())
    steps, start, seconds = 0, None, 0.0
    while start is None or seconds < args.seconds:
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=args.rollout_steps)
        steps += per_round
        if start is None:  # the first rollout is start-up (its time is the harness's start-up figure)
            start, steps = time.perf_counter(), 0
        seconds = report(steps, start)
    env.close()


if __name__ == "__main__":
    main()
