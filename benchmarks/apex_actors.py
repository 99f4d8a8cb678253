"""The headline command as the paper designed it: do Ape-X's actors keep acting while the learner learns?

Runs ``rlrun algo=apex env=pong executor=ray`` (the Atari preset: Nature CNN, batches of 512, 8 actors on 2 Ray
workers) for ``--seconds``, with ``algo.learning_starts`` lowered so that most of the run is spent learning, once
per learner mode: ``thread`` (the default: the learner on its own thread, actors never wait) and ``sync`` (the
gradient steps owed at ``train_every`` run inside the plan's training step, as before). From each run's
TensorBoard: frames/s before learning starts (acting only) and after (acting while learning), learner updates/s,
the observed replay ratio, and the driver's RSS at the start and end of the learning phase (memory flat), and the
wall time the run took against the ``stop.wall_time_s`` it was given (stop overshoot).

Figures per mode: ``frames_per_s/{acting_only,while_learning}/<mode>``,
``ratio/acting_while_learning_vs_acting_only/<mode>`` (the issue's goal: >= 0.5 in thread mode),
``learner_updates_per_s/<mode>``, ``replay_ratio/<mode>``, ``stop_overshoot_s/<mode>``, ``rss_mb/<mode>/{start,end}``.

    python -m benchmarks.apex_actors [--seconds 300] [--learning-starts 5000] [--modes thread,sync] [--device cuda]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.common import load_average, publish

FRAME_SKIP = 4


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class RssSampler:
    """This process's resident memory every ``every_s`` seconds while the ``with`` block runs (memory flat?)."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s, self.samples = every_s, []  # (monotonic time, MB)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(self.every_s):
            self.samples.append((time.monotonic(), _rss_mb()))

    def __enter__(self) -> RssSampler:
        self.start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()

    def after(self, seconds: float) -> list[float]:
        """The samples taken ``seconds`` or more after the block started."""
        return [mb for t, mb in self.samples if t - self.start >= seconds]


def tensorboard_series(directory: Path) -> Callable[[str], list[tuple[int, float]]]:
    """``series(tag)``: the (step, value) pairs of a scalar tag in a run's TensorBoard files ([] if absent)."""
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    acc = EventAccumulator(str(directory), size_guidance={SCALARS: 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    return lambda tag: [(e.step, e.value) for e in acc.Scalars(tag)] if tag in tags else []


def run(mode: str, seconds: float, learning_starts: int, out: Path, smoke: bool,
        device: str = "cpu") -> dict[str, Any]:
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    overrides = ["algo=apex", "env=pong", "executor=ray", f"device={device}", f"algo.learner={mode}",
                 f"algo.learning_starts={learning_starts}", f"stop.wall_time_s={seconds}", "stop.env_steps=null",
                 "stop.episode_return_mean=null", "export.formats=[]", "logger.mlflow.enabled=false",
                 "logger.console.interval_s=30", "checkpoint.at_end=false"]
    if smoke:
        overrides += ["algo.buffer_size=2048", "algo.batch_size=16", "executor.num_cpus=2"]
    run_dir = out / f"apex-{mode}"
    start = time.monotonic()
    with RssSampler() as rss:
        summary = run_experiment(compose(overrides), run_dir)
    wall = time.monotonic() - start
    series = tensorboard_series(run_dir / "tensorboard")

    fps = series("perf/frames_per_s")
    steps = dict(series("learn/gradient_steps"))
    acting = [v for s, v in fps if s < learning_starts]
    learning = [v for s, v in fps if s >= learning_starts and steps.get(s, 0) > 0]
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    updates = series("learner/updates_per_s") or []
    learn_rss = rss.after(0.5 * wall)
    fig: dict[str, Any] = {
        f"frames_per_s/acting_only/{mode}": mean(acting[1:] or acting),  # the first report includes start-up
        f"frames_per_s/while_learning/{mode}": mean(learning),
        f"learner_updates_per_s/{mode}": mean([v for _, v in updates if v > 0]),
        f"gradient_steps/{mode}": max(steps.values()) if steps else 0,
        f"replay_ratio/{mode}": (series("replay/ratio") or [(0, None)])[-1][1],
        f"stop_overshoot_s/{mode}": round(summary["wall_time_s"] - seconds, 1),  # the run's own clock
        f"process_wall_s/{mode}": round(wall, 1),  # with Ray's start-up and shutdown
        f"frames/{mode}": summary["frames"],
        f"rss_mb/{mode}/start_of_second_half": learn_rss[0] if learn_rss else None,
        f"rss_mb/{mode}/end": learn_rss[-1] if learn_rss else None,
    }
    a, w = fig[f"frames_per_s/acting_only/{mode}"], fig[f"frames_per_s/while_learning/{mode}"]
    fig[f"ratio/acting_while_learning_vs_acting_only/{mode}"] = (w / a) if a and w else None
    return fig


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.apex_actors", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=300.0, help="stop.wall_time_s of each run")
    p.add_argument("--learning-starts", type=int, default=5000, help="transitions before learning (preset: 50k)")
    p.add_argument("--modes", default="thread,sync")
    p.add_argument("--smoke", action="store_true", help="seconds, tiny batches: checks the path only")
    p.add_argument("--device", default="cpu", help="the learner's device option (cuda on a GPU machine)")
    a = p.parse_args(argv)
    if a.smoke:
        a.seconds, a.learning_starts = min(a.seconds, 25.0), min(a.learning_starts, 200)
    figures: dict[str, Any] = {"seconds": a.seconds, "learning_starts": a.learning_starts, "device": a.device,
                               "load_average_before": load_average()}
    with tempfile.TemporaryDirectory(prefix="apex-actors-") as tmp:
        for mode in a.modes.split(","):
            figures.update(run(mode, a.seconds, a.learning_starts, Path(tmp), a.smoke, a.device))
    figures["load_average_after"] = load_average()
    if a.smoke:
        return figures
    publish("apex_actors", figures, "python -m benchmarks.apex_actors " + " ".join(sys.argv[1:] if argv is None
                                                                                   else argv))
    return figures


if __name__ == "__main__":
    main()
