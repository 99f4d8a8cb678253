"""Masked PPO on tic-tac-toe against a random player (issue 42's proof of single-agent action masks): the run takes
no illegal action, and it learns to beat the random player.

The env is ``rlrun/TicTacToe-v0`` with ``illegal=raise``: a move onto a taken square raises inside the env, so a
run that reaches its budget has taken zero illegal actions in all its env steps (``figures["illegal_actions"]``
is that count; a run that took one fails here instead). The learning curve is the run's own
``episode/return_mean`` (last 100 games, while training and exploring) read back from its TensorBoard log; after
training, the greedy policy plays ``--games`` games (its win, draw and loss rates) beside a uniformly random
legal player over the same games (its mean return: the baseline, about +0.3).

    python -m benchmarks.masked_tictactoe [--env-steps 100000] [--seed 0] [--games 1000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import publish

OVERRIDES = ["algo=ppo", "env=tictactoe", "+env.kwargs.illegal=raise", "executor.num_envs=8",
             "algo.ent_coef=0.01", "return_window=100", "logger.mlflow.enabled=false", "export.formats=[]"]


def learning_curve(run_dir: Path) -> list[list[float]]:
    """``[[env step, episode/return_mean], ...]`` from the run's TensorBoard event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlrun.metric_names import RETURN_MEAN

    curve: list[list[float]] = []
    for events in sorted(run_dir.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events.parent))
        acc.Reload()
        if RETURN_MEAN in acc.Tags().get("scalars", []):
            curve += [[float(e.step), float(e.value)] for e in acc.Scalars(RETURN_MEAN)]
    return sorted(curve)


def play(run_dir: Path, games: int) -> dict[str, float]:
    """The trained greedy policy and a uniformly random legal player, ``games`` games each (seeds 0..games-1)."""
    import torch

    from rlrun import spaces as sp
    from rlrun.envs.tictactoe import TicTacToeVsRandom
    from rlrun.export import restore

    restored = restore(run_dir)
    env, rng = TicTacToeVsRandom(illegal="raise"), np.random.default_rng(0)
    space = env.observation_space
    results: dict[str, list[float]] = {"trained": [], "random": []}
    try:
        policy = restored.policy()
        for player in results:
            for game in range(games):
                obs, _ = env.reset(seed=game)
                done, reward = False, 0.0
                while not done:
                    if player == "trained":
                        with torch.no_grad():
                            batch = sp.to_torch(space, {k: v[None] for k, v in obs.items()})
                            action = int(policy.get_actions(batch, explore=False)[0])
                    else:
                        action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
                    obs, reward, done, _, _ = env.step(action)
                results[player].append(reward)
    finally:
        restored.close()
    trained, random = np.array(results["trained"]), np.array(results["random"])
    return {"trained/return_mean": float(trained.mean()), "trained/win_rate": float((trained == 1).mean()),
            "trained/draw_rate": float((trained == 0).mean()), "trained/loss_rate": float((trained == -1).mean()),
            "random/return_mean": float(random.mean()), "random/win_rate": float((random == 1).mean())}


def measure(env_steps: int, seed: int, games: int, work: Path) -> dict[str, Any]:
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    run_dir = work / "run"
    summary = run_experiment(compose([*OVERRIDES, f"seed={seed}", f"stop.env_steps={env_steps}",
                                      "stop.episode_return_mean=null"]), run_dir)
    return {"env_steps": summary["env_steps"], "episodes": summary["episodes"], "illegal_actions": 0,
            "wall_time_s": summary["wall_time_s"], "final_return_mean": summary["episode_return_mean"],
            "learning_curve": learning_curve(run_dir), "greedy_games": games, **play(run_dir, games)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-steps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--games", type=int, default=1000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        figures = measure(args.env_steps, args.seed, args.games, Path(tmp))
    command = (f"python -m benchmarks.masked_tictactoe --env-steps {args.env_steps} --seed {args.seed} "
               f"--games {args.games}")
    publish("masked_tictactoe", figures, command, show=lambda key: key != "wall_time_s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
