"""Run the reference Rainbow agent of Obando-Ceron & Castro 2021 (JohanSamir/revisiting_rainbow, ``JaxRainbowAgentNew``)
on a MinAtar game with its own gin config (``Configs/rainbow_<game>.gin``) and Dopamine's ``TrainRunner``, as the
reference's notebook (``test_main.ipynb``) does. Runs in the venv that ``setup.sh`` makes, not rlrun's.

What this runner adds, none of it in the agent, the network or the config:

- ``flax.nn`` is aliased to ``flax.linen`` before the reference is imported: two of its files import the pre-Linen
  ``flax.nn`` (removed in flax 0.4; flax 0.3 has no Python 3.11 jaxlib) and use nothing of it.
- ``--seed``: binds ``JaxDQNAgent.seed`` (``JaxRainbowAgentNew`` does not pass its own ``seed`` on, and Dopamine's
  agent then seeds from the clock), and seeds ``random`` and numpy (Dopamine's replay) and MinAtar (sticky actions).
- ``--frames`` / ``--steps_per_iteration``: ``Runner.num_iterations`` and ``Runner.training_steps``. Dopamine
  checkpoints after each iteration and resumes from the last one when started again on the same ``--base_dir``.
- ``<base_dir>/episodes.jsonl``: one line per finished episode (``return``, ``length``, ``total_steps`` = frames at
  its end, continued across a resume); ``<base_dir>/iterations.jsonl``: Dopamine's per-iteration training return.
  On resume both forget what was logged after Dopamine's last checkpoint, as Dopamine redoes that iteration.
"""

import argparse
import json
import os
import random
import sys
import time


class EpisodeLogger:
    """The MinAtar env, passed through, writing each finished episode to ``path``."""

    def __init__(self, env, path):
        self._env, self._path, self.total_steps = env, path, 0  # the runner sets total_steps on resume
        self._return, self._length = 0.0, 0

    def __getattr__(self, name):  # game_over, action_space, observation_space, ...
        return getattr(self._env, name)

    def reset(self):
        self._return, self._length = 0.0, 0
        return self._env.reset()

    def step(self, action):
        obs, reward, terminal, info = self._env.step(action)
        self._return += reward
        self._length += 1
        self.total_steps += 1
        if terminal:
            with open(self._path, "a") as f:
                f.write(json.dumps({"return": float(self._return), "length": self._length,
                                    "total_steps": self.total_steps, "time": round(time.time(), 3)}) + "\n")
        return obs, reward, terminal, info


def trim_to_checkpoint(base_dir, start_iteration):
    """Forget what a stopped run logged past its last checkpoint, which Dopamine redoes on resume: the iterations
    from ``start_iteration`` on and the episodes that ended after the last kept iteration. Returns that
    iteration's frames (0 for a fresh run)."""
    kept = []
    path = os.path.join(base_dir, "iterations.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            kept = [line for line in f if line.strip() and json.loads(line)["iteration"] < start_iteration]
        with open(path, "w") as f:
            f.writelines(kept)
    done = json.loads(kept[-1])["total_steps"] if kept else 0
    path = os.path.join(base_dir, "episodes.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            episodes = [line for line in f if line.strip() and json.loads(line)["total_steps"] <= done]
        with open(path, "w") as f:
            f.writelines(episodes)
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", required=True, help="the reference's checkout (setup.sh's DIR/reference)")
    parser.add_argument("--base_dir", required=True)
    parser.add_argument("--game", default="asterix", help="asterix, breakout, freeway, invaders or seaquest")
    parser.add_argument("--frames", type=int, default=500_000)
    parser.add_argument("--steps_per_iteration", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gin_bindings", action="append", default=[])
    args = parser.parse_args()

    package = os.path.join(os.path.abspath(args.reference), "revisiting_rainbow")
    # the gin configs import the reference's modules by their bare names, as its notebook has them on the path
    sys.path[:0] = [package, os.path.join(package, "Agents")]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import flax
    import flax.linen
    flax.nn = flax.linen
    sys.modules.setdefault("flax.nn", flax.linen)
    import gin
    import gin.tf  # noqa: F401  (the configs bind tf-side names)
    import minatar_env
    import numpy as np
    import rainbow_agent_new
    from absl import logging
    from dopamine.discrete_domains import run_experiment

    logging.set_verbosity(logging.INFO)
    os.makedirs(args.base_dir, exist_ok=True)
    iterations = -(-args.frames // args.steps_per_iteration)
    bindings = [f"Runner.training_steps = {args.steps_per_iteration}", f"Runner.num_iterations = {iterations}",
                f"JaxDQNAgent.seed = {args.seed}", f"JaxRainbowAgentNew.seed = {args.seed}", *args.gin_bindings]
    random.seed(args.seed)
    np.random.seed(args.seed)
    gin.parse_config_files_and_bindings([os.path.join(package, "Configs", f"rainbow_{args.game}.gin")], bindings)

    def create_environment():
        env = minatar_env.create_minatar_env()  # the config's game, MinAtar's defaults
        env.env.seed(args.seed)
        return EpisodeLogger(env, os.path.join(args.base_dir, "episodes.jsonl"))

    def create_agent(sess, environment, summary_writer=None):
        return rainbow_agent_new.JaxRainbowAgentNew(num_actions=environment.action_space.n)

    runner = run_experiment.TrainRunner(args.base_dir, create_agent, create_environment_fn=create_environment)
    runner._environment.total_steps = trim_to_checkpoint(args.base_dir, runner._start_iteration)
    run_one_iteration = runner._run_one_iteration

    def logged_iteration(iteration):
        stats = run_one_iteration(iteration)
        with open(os.path.join(args.base_dir, "iterations.jsonl"), "a") as f:
            f.write(json.dumps({"iteration": iteration, "total_steps": runner._environment.total_steps,
                                "train_average_return": stats["train_average_return"][-1],
                                "train_episodes": len(stats["train_episode_returns"]),
                                "steps_per_second": stats["train_average_steps_per_second"][-1]}) + "\n")
        return stats

    runner._run_one_iteration = logged_iteration
    runner.run_experiment()


if __name__ == "__main__":
    main()
