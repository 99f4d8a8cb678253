"""IMPALA and APPO as their papers designed them: do the actors keep acting while the learner learns?

Runs ``rlrun algo=<impala|appo> env=pong executor=ray`` (the Atari presets: the deep IMPALA ResNet, batches of 32
unrolls of 20 steps, the learner on its own thread fed by a bounded queue) for ``--seconds`` per mode:

- ``idle``: the same run with the learner's update replaced by a no-op in the driver (this process): the plan, the
  queue and the weight syncs as in ``thread``, no learning. The actors' acting-only rate, measured in the same
  invocation (a harness choice of this benchmark, not a config key);
- ``thread``: the preset (``algo.learner=thread``): the actors never wait for the learner;
- ``sync``: ``algo.learner=sync``: one update inside each training step, the actors' samples wait meanwhile.

Figures per algo and mode, from each run's TensorBoard: ``frames_per_s/<algo>/<mode>`` (mean over the run, the
first report with start-up left out), ``ratio/thread_vs_idle/<algo>`` (the issue's goal: >= 0.5),
``ratio/sync_vs_idle/<algo>``, ``learner_updates_per_s/<algo>/<mode>``, ``policy_lag_mean/<algo>/<mode>`` (updates
between the weights an unroll was acted with and the update that learns on it), ``rss_mb/<algo>/<mode>/
{start_of_second_half,end}`` (memory flat) and ``stop_overshoot_s/<algo>/<mode>``.

With ``--executor local`` the actors are one in-process worker whose env copies (``--envs``) step in subprocesses
across the cores (the GPU kit's setting: its machine has no Ray).

    python -m benchmarks.impala_actors [--algos impala,appo] [--modes idle,thread,sync] [--seconds 180] [--device cuda]
                                       [--executor local --envs 32]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from benchmarks.apex_actors import RssSampler, tensorboard_series
from benchmarks.common import load_average, publish

FRAME_SKIP = 4


@contextlib.contextmanager
def idle_learner() -> Iterator[None]:
    """The IMPALA family's learner update as a no-op (APPO inherits IMPALA's): batches are taken off the queue and
    dropped, so the run acts exactly as in thread mode without the learner's compute."""
    from rlrun.algos.impala import IMPALA

    original = IMPALA._learn_on
    IMPALA._learn_on = lambda self, rollout: {"lags": (0.0, 0.0)}  # type: ignore[method-assign]
    try:
        yield
    finally:
        IMPALA._learn_on = original  # type: ignore[method-assign]


def executor_settings(executor: str, envs: int | None, smoke: bool) -> list[str]:
    """``ray``: the worker actors of the executor's defaults (2 workers, ``--envs`` copies each); ``local``: one
    in-process worker whose ``--envs`` copies step in subprocesses across the cores, together (the IMPALA family
    acts on all copies at once: its policy keeps per-copy state), as on the GPU machine, which has no Ray."""
    if executor == "ray":
        return ["executor=ray", *([f"executor.num_envs_per_worker={envs}"] if envs else []),
                *(["executor.num_cpus=2"] if smoke else [])]
    return ["executor=local", f"executor.num_envs={envs or 16}", "executor.vector_mode=async"]


def run(algo: str, mode: str, seconds: float, out: Path, smoke: bool, device: str = "cpu", executor: str = "ray",
        envs: int | None = None) -> dict[str, Any]:
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    overrides = [f"algo={algo}", "env=pong", *executor_settings(executor, envs, smoke), f"device={device}",
                 f"algo.learner={'sync' if mode == 'sync' else 'thread'}",
                 f"stop.wall_time_s={seconds}", "stop.env_steps=null", "stop.episode_return_mean=null",
                 "export.formats=[]", "logger.mlflow.enabled=false", "logger.console.interval_s=30",
                 "checkpoint.at_end=false"]
    if smoke:
        overrides += ["algo.batch_size=2", "algo.unroll_length=8", "algo.network=nature_cnn"]
    run_dir = out / f"{algo}-{mode}"
    start = time.monotonic()
    with RssSampler() as rss, (idle_learner() if mode == "idle" else contextlib.nullcontext()):
        summary = run_experiment(compose(overrides), run_dir)
    wall = time.monotonic() - start
    series = tensorboard_series(run_dir / "tensorboard")
    fps = [v for _, v in series("perf/frames_per_s")]
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    second_half = rss.after(0.5 * wall)
    key = f"{algo}/{mode}"
    return {
        f"frames_per_s/{key}": mean(fps[1:] or fps),
        f"learner_updates_per_s/{key}": mean([v for _, v in series("learner/updates_per_s") if v > 0]),
        f"policy_lag_mean/{key}": mean([v for _, v in series("learn/policy_lag_mean")]),
        f"updates/{key}": max([v for _, v in series("learn/updates")], default=0),
        f"stop_overshoot_s/{key}": round(summary["wall_time_s"] - seconds, 1),
        f"frames/{key}": summary["frames"],
        f"rss_mb/{key}/start_of_second_half": second_half[0] if second_half else None,
        f"rss_mb/{key}/end": second_half[-1] if second_half else None,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.impala_actors", description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", default="impala,appo")
    p.add_argument("--modes", default="idle,thread,sync")
    p.add_argument("--seconds", type=float, default=180.0, help="stop.wall_time_s of each run")
    p.add_argument("--smoke", action="store_true", help="seconds, tiny batches: checks the path only")
    p.add_argument("--device", default="cpu", help="the learner's device option (cuda on a GPU machine)")
    p.add_argument("--executor", default="ray", choices=("ray", "local"), help="where the actors run (local: env "
                                                                               "copies in subprocesses)")
    p.add_argument("--envs", type=int, help="env copies per worker (default: ray's 1; local: 16)")
    p.add_argument("--record", action="store_true", help="write the result file with --smoke too")
    a = p.parse_args(argv)
    if a.smoke:
        a.seconds = min(a.seconds, 20.0)
    figures: dict[str, Any] = {"seconds": a.seconds, "device": a.device, "executor": a.executor, "envs": a.envs,
                               "load_average_before": load_average()}
    with tempfile.TemporaryDirectory(prefix="impala-actors-") as tmp:
        for algo in a.algos.split(","):
            for mode in a.modes.split(","):
                figures.update(run(algo, mode, a.seconds, Path(tmp), a.smoke, a.device, a.executor, a.envs))
            idle = figures.get(f"frames_per_s/{algo}/idle")
            for mode in ("thread", "sync"):
                got = figures.get(f"frames_per_s/{algo}/{mode}")
                figures[f"ratio/{mode}_vs_idle/{algo}"] = got / idle if idle and got else None
    figures["load_average_after"] = load_average()
    if a.smoke and not a.record:
        return figures
    publish("impala_actors", figures, "python -m benchmarks.impala_actors " + " ".join(sys.argv[1:] if argv is None
                                                                                       else argv))
    return figures


if __name__ == "__main__":
    main()
