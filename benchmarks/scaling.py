"""Scaling: frames/s of whole training runs (acting *and* learning) against the number of Ray rollout workers, for
the distributed plans ``apex`` and ``impala`` on Pong (their Atari presets, DeepMind protocol): RLgraph's Figure 6
shape (sample throughput vs workers, learner included).

For each plan and each worker count n in 1, 2, 4, ... up to the machine's cores (``--workers`` to choose), one run
``rlrun algo=<plan> env=pong executor=ray executor.num_workers=n`` is stepped in this process (the run loop's
``training_step()``, as ``run_experiment`` does, without checkpoints or loggers) on one local Ray cluster of all
cores, started once. After a warm-up (``--warmup-s`` seconds, and at least one learner update: Ape-X's replay must
first hold ``learning_starts`` transitions, set small here) the env steps and learner updates of the next
``--seconds`` are counted. Figures per plan and n: ``frames_per_s/<plan>/<n>w`` (agent steps x frame skip 4),
``updates_per_s/<plan>/<n>w`` (learner gradient steps), ``samples_trained_per_s/<plan>/<n>w`` where the plan reports it,
and ``ratio/<plan>/<n>w_over_1w`` (frames/s over the one-worker run's: the scaling; n would be ideal while
there are free cores).

On a 2-core machine the learner (the driver process) and the workers share the same two cores: the curve shows
where the cores run out, not Ray's overhead alone. The figures go to the result file and README's table; not in
the CI set (minutes of Pong with a CNN learner).

    python -m benchmarks.scaling [--plans apex,impala] [--workers 1,2] [--seconds 30] [--warmup-s 15]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from benchmarks.common import load_average, publish

FRAME_SKIP = 4
# case -> (plan, overrides on top of its Atari preset): the learner at work within the warm-up, memory kept small
# (the presets' replay sizes are for long runs). IMPALA's preset network, the deep IMPALA ResNet, costs ~6x the
# Nature CNN's FLOPs per frame: on a CPU its learner bounds the whole run, so it is also measured with the Nature CNN.
PLANS: dict[str, tuple[str, list[str]]] = {
    # The preset's replay ratio (a batch of 512 per 4 env steps, with the paper's learner running free on a GPU)
    # would make a CPU learner take minutes per rollout: here a batch of 128 per 64 env steps.
    "apex": ("apex", ["algo.learning_starts=2000", "algo.buffer_size=50000", "executor.num_envs_per_worker=4",
                      "algo.batch_size=128", "algo.train_every=64"]),
    "impala": ("impala", ["executor.num_envs_per_worker=4"]),
    "impala_nature_cnn": ("impala", ["algo.network=nature_cnn", "executor.num_envs_per_worker=4"]),
}


def measure(case: str, workers: int, seconds: float, warmup_s: float, seed: int = 0) -> dict[str, float]:
    """Step one run; return env steps/s, frames/s and learner updates/s over ``seconds`` after the warm-up."""
    from omegaconf import OmegaConf

    from rlrun.app.run import seed_everything
    from rlrun.config import compose
    from rlrun.devices import resolve_device
    from rlrun.registry import registry

    plan, overrides = PLANS[case]
    cfg = compose([f"algo={plan}", "env=pong", "executor=ray", f"executor.num_workers={workers}", f"seed={seed}",
                   "logger=none", *overrides])
    seed_everything(seed)
    device = resolve_device(cfg.device)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, seed)
    algo = registry.get("algo", plan)(OmegaConf.to_object(cfg.algo), env_factory.spec, executor, device, seed)
    try:
        start = time.perf_counter()
        updates = 0.0
        while True:  # warm-up: at least warmup_s and one learner update
            result = algo.training_step()
            updates = float(result.metrics.get("learn/gradient_steps", 0.0))
            if time.perf_counter() - start >= warmup_s and updates > 0:
                break
            if time.perf_counter() - start > max(10 * warmup_s, 300.0):
                raise RuntimeError(f"{case} with {workers} workers: no gradient step in the first "
                                   f"{time.perf_counter() - start:.0f} s (learn/gradient_steps stays 0)")
        t0, updates0, steps = time.perf_counter(), updates, 0
        trained0 = float(result.metrics.get("learn/samples_trained", 0.0))
        while time.perf_counter() - t0 < seconds:
            result = algo.training_step()
            steps += result.env_steps
        elapsed = time.perf_counter() - t0
        updates = float(result.metrics.get("learn/gradient_steps", updates0))
        trained = float(result.metrics.get("learn/samples_trained", trained0))
    finally:
        algo.stop()
    out = {"env_steps_per_s": steps / elapsed, "frames_per_s": steps * FRAME_SKIP / elapsed,
           "updates_per_s": (updates - updates0) / elapsed}
    if trained > trained0:
        out["samples_trained_per_s"] = (trained - trained0) / elapsed
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cores = os.cpu_count() or 1
    default_workers = sorted({1, *[2 ** k for k in range(1, 8) if 2 ** k <= cores], cores})
    parser.add_argument("--plans", default=",".join(PLANS), help=f"comma-separated cases, of {', '.join(PLANS)}")
    parser.add_argument("--workers", default=",".join(map(str, default_workers)),
                        help="comma-separated worker counts (default: 1, 2, 4, ... up to the cores)")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds per run after the warm-up")
    parser.add_argument("--warmup-s", type=float, default=15.0, help="seconds of each run before measuring")
    args = parser.parse_args(argv)
    import ray

    from rlrun.registry import registry

    counts = [int(n) for n in args.workers.split(",") if n]
    figures: dict[str, Any] = {"cores": cores, "worker_counts": counts, "seconds": args.seconds,
                               "warmup_s": args.warmup_s, "load_average_before": load_average()}
    ray.init(address="local", num_cpus=max(cores, max(counts)), include_dashboard=False, logging_level="WARNING",
             log_to_driver=False)
    try:
        for plan in [p for p in args.plans.split(",") if p]:
            if plan not in PLANS:
                parser.error(f"unknown case {plan}; cases: {', '.join(PLANS)}")
            if PLANS[plan][0] not in registry.names("algo"):
                figures[f"unavailable/{plan}"] = f"algo={PLANS[plan][0]} does not exist yet"
                continue
            for n in counts:
                got = measure(plan, n, args.seconds, args.warmup_s)
                for key, value in got.items():
                    figures[f"{key}/{plan}/{n}w"] = round(value, 2)
                print(f"{plan} {n} workers: {got['frames_per_s']:.0f} frames/s, "
                      f"{got['updates_per_s']:.2f} updates/s", file=sys.stderr)
            base = figures.get(f"frames_per_s/{plan}/{counts[0]}w")
            for n in counts[1:]:
                if base:
                    figures[f"ratio/{plan}/{n}w_over_{counts[0]}w"] = round(figures[f"frames_per_s/{plan}/{n}w"] / base,
                                                                            4)
    finally:
        ray.shutdown()
    figures["load_average_after"] = load_average()
    command = "python -m benchmarks.scaling " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("scaling", figures, command)
    return figures


if __name__ == "__main__":
    main()
