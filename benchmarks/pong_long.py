"""Long learning runs: Pong to a mean game score of +18 with ``apex``, ``impala`` and ``ppo`` (their Atari presets,
the DeepMind protocol), with the frames and the wall time it took: the papers' headline figure, for a machine with
a GPU (``device=cuda``). Not in the CI set: hours per run.

Each run is ``rlrun algo=<algo> env=pong device=cuda executor=<executor> stop.episode_return_mean=<target>``
stepped by ``rlrun.app.run.run_experiment`` (so checkpoints, TensorBoard and MLflow work as in any run; the run
directory is ``benchmarks/results/pong_long/<algo>-seed<seed>``); Pong has no lives, so a training episode is a
whole game and its return is the game score (rewards are clipped to their sign, and Pong's are +-1 already).
Figures per algorithm: ``frames/<algo>`` and ``wall_s/<algo>`` to the target (null when the budget ran out first),
``frames_per_s/<algo>``, ``final_score/<algo>`` (the 20-game mean at the stop) and ``reached/<algo>`` (1 or 0).

``--smoke`` runs each preset for a few hundred frames on the CPU with a tiny budget: it checks the benchmark's path
(not a learning result; what ``tests/benchmarks/test_pong_long.py`` runs).

    python -m benchmarks.pong_long [--algos apex,impala,ppo] [--target 18] [--frames 40000000] [--seed 0] [--smoke]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import load_average, publish, results_dir

FRAME_SKIP = 4
# algo -> the executor settings of its long run on one GPU machine (the learner on the GPU, actors on the CPUs)
RUNS: dict[str, list[str]] = {
    "apex": ["executor=ray"],
    "impala": ["executor=ray", "executor.num_envs_per_worker=8"],
    "ppo": ["executor=local"],
}
SMOKE = {"apex": ["algo.learning_starts=64", "algo.buffer_size=2000", "algo.batch_size=16"],
         "impala": ["algo.batch_size=2", "algo.unroll_length=8"],
         "ppo": ["algo.rollout_steps=16", "algo.num_epochs=1", "algo.minibatch_size=32", "executor.num_envs=2"]}


def run(algo: str, seed: int, target: float, frames: int, smoke: bool, out: Path) -> dict[str, Any]:
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    overrides = [f"algo={algo}", "env=pong", f"seed={seed}", f"stop.episode_return_mean={target}",
                 f"stop.env_steps={frames // FRAME_SKIP}", "export.formats=[]"]
    if smoke:
        overrides += ["device=cpu", "executor=local", "logger=none", *SMOKE[algo]]
    else:
        overrides += ["device=cuda", *RUNS[algo], "checkpoint.interval_minutes=30"]
    summary = run_experiment(compose(overrides), out / f"{algo}-seed{seed}")
    reached = summary["stop_reason"] == "episode_return_mean"
    return {f"reached/{algo}": int(reached),
            f"frames/{algo}": summary["frames"] if reached else None,
            f"wall_s/{algo}": round(summary["wall_time_s"], 1) if reached else None,
            f"frames_per_s/{algo}": round(summary["frames_per_second"], 1),
            f"final_score/{algo}": summary["episode_return_mean"],
            f"stop_reason/{algo}": summary["stop_reason"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", default=",".join(RUNS), help=f"comma-separated, of {', '.join(RUNS)}")
    parser.add_argument("--target", type=float, default=18.0, help="20-game mean score to reach")
    parser.add_argument("--frames", type=int, default=40_000_000, help="frame budget per run (4 per agent step)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="a few hundred frames on the CPU: checks the path only")
    args = parser.parse_args(argv)
    if args.smoke:
        args.frames = min(args.frames, 256 * FRAME_SKIP)
    figures: dict[str, Any] = {"target": args.target, "frame_budget": args.frames, "seed": args.seed,
                               "smoke": args.smoke, "load_average_before": load_average()}
    with tempfile.TemporaryDirectory(prefix="pong-long-") as tmp:
        out = Path(tmp) if args.smoke else results_dir() / "pong_long"
        for algo in [a for a in args.algos.split(",") if a]:
            if algo not in RUNS:
                parser.error(f"unknown algo {algo}; of {', '.join(RUNS)}")
            figures.update(run(algo, args.seed, args.target, args.frames, args.smoke, out))
    figures["load_average_after"] = load_average()
    if args.smoke:
        return figures  # not a measurement: nothing is written
    command = "python -m benchmarks.pong_long " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("pong_long", figures, command)
    return figures


if __name__ == "__main__":
    main()
