"""The GPU kit's last stage: APPO learning Pong for the rest of the kit's budget, the learner on the GPU.

``rlrun algo=appo env=pong device=cuda executor=local executor.num_envs=32 executor.vector_mode=async``
(APPO's Atari preset: the IMPALA ResNet, the learner on its own thread; one subprocess per env copy across the
cores, stepped together, the policy acting on all of them at once; no MLflow, which the GPU machine lacks), stopped
by ``stop.wall_time_s``. Writes one JSON: the run's summary, its settings, and the curves from its TensorBoard files
(``episode/return_mean`` and ``perf/frames_per_s`` against env steps and wall time), so the figure says how far Pong
got in that time (the moonshot: +18 within 10 minutes) and at what speed.

    python -m benchmarks.gpu.pong --out pong.json --work DIR --seconds 300 [--device cuda] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

SETTINGS = ["algo=appo", "env=pong", "executor=local", "executor.num_envs=32", "executor.vector_mode=async",
            "stop.env_steps=null", "stop.episode_return_mean=18", "logger.mlflow.enabled=false",
            "logger.console.interval_s=30", "export.formats=[]", "checkpoint.at_end=false"]
# The same path on the CPU in seconds: a small network, tiny batches, two env copies.
SMOKE = ["algo.network=nature_cnn", "algo.batch_size=2", "algo.unroll_length=8", "executor.num_envs=2"]
CURVES = ("episode/return_mean", "perf/frames_per_s")


def curves(tensorboard: Path) -> dict[str, list[list[float]]]:
    """Each curve as ``[[env_steps, wall_s, value], ...]`` from the run's TensorBoard event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[list[float]]] = {}
    for events in sorted(tensorboard.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in CURVES:
            if tag in acc.Tags().get("scalars", []):
                points = acc.Scalars(tag)
                start = points[0].wall_time if points else 0.0
                out[tag] = [[e.step, round(e.wall_time - start, 2), round(e.value, 4)] for e in points]
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu.pong", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    p.add_argument("--work", type=Path, required=True, help="the run directory")
    p.add_argument("--seconds", type=float, required=True, help="stop.wall_time_s")
    p.add_argument("--device", default="cuda")
    p.add_argument("--smoke", action="store_true", help="the same path on the CPU, tiny settings")
    a = p.parse_args(argv)
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    overrides = [*SETTINGS, f"device={a.device}", f"stop.wall_time_s={a.seconds}", *(SMOKE if a.smoke else [])]
    start = time.monotonic()
    summary = run_experiment(compose(overrides), a.work)
    record = {"command": "rlrun " + " ".join(overrides), "wall_s": round(time.monotonic() - start, 1),
              "summary": summary, "curves": curves(a.work / "tensorboard")}
    a.out.write_text(json.dumps(record, indent=1, default=str) + "\n")
    return record


if __name__ == "__main__":
    main()
