"""Console progress: a live bar on a terminal, a plain line every ``interval_s`` seconds otherwise."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, ClassVar

from rlrun.logging.fanout import RunContext
from rlrun.metric_names import (
    ENV_STEPS,
    EPISODES,
    EVAL_LENGTH_MEAN,
    EVAL_RETURN_MEAN,
    EVAL_RETURN_STD,
    FRAMES_PER_S,
    GRADIENT_STEPS,
    LEARNER_QUEUE_DEPTH,
    LEARNER_UPDATES_PER_S,
    POLICY_LAG_MEAN,
    REPLAY_RATIO,
    RETURN_MEAN,
    policy_and_metric,
)


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def policies_part(metrics: dict[str, float]) -> str:
    """A multi-agent run's return per policy (``policy/<id>/episode/return_mean``): ``(adv -19.5, good 12.0)``;
    empty for a single-agent run."""
    found = [(split[0], v) for k, v in metrics.items()
             if (split := policy_and_metric(k)) is not None and split[1] == RETURN_MEAN]
    return "(" + ", ".join(f"{pid} {_fmt(v)}" for pid, v in found) + ")" if found else ""


def learner_part(metrics: dict[str, float]) -> str:
    """The learner's figures, where a plan reports them (a learner thread, replay, unrolls acted with older weights):
    ``learner 1.28 upd/s  queue 3  replay ratio 0.56  lag 2.3``; empty for a plan that reports none."""
    parts = []
    if LEARNER_UPDATES_PER_S in metrics:
        parts.append(f"learner {_fmt(metrics[LEARNER_UPDATES_PER_S], '.2f')} upd/s")
    if LEARNER_QUEUE_DEPTH in metrics:
        parts.append(f"queue {int(metrics[LEARNER_QUEUE_DEPTH])}")
    if REPLAY_RATIO in metrics:
        parts.append(f"replay ratio {_fmt(metrics[REPLAY_RATIO], '.2f')}")
    if POLICY_LAG_MEAN in metrics:
        parts.append(f"lag {_fmt(metrics[POLICY_LAG_MEAN])}")
    return "  ".join(parts)


# The progress lines as log records too: the rlrun command writes them into the run's log file (conf/config.yaml,
# hydra.job_logging), so <run dir>/cli.log holds what the console showed.
progress_log = logging.getLogger("rlrun.progress")


class ConsoleSink:
    keeps_artifacts: ClassVar[bool] = False

    @classmethod
    def from_config(cls, cfg: Any, context: RunContext) -> ConsoleSink:
        return cls(cfg, context.total_env_steps)

    def __init__(self, cfg: Any, total_env_steps: int | None, stream: Any = None) -> None:
        self.stream = stream or sys.stdout
        self.interval_s = float(cfg.interval_s)
        self.total = total_env_steps
        self.tty = self.stream.isatty()
        self._last_line: float | None = None
        self._progress = None
        self._eval: tuple[int, float] | None = None  # (env step, mean return) of the last evaluation
        if self.tty:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]rlrun"), BarColumn(), TextColumn("{task.description}"),
                                      TimeElapsedColumn(), transient=False)
            self._task = self._progress.add_task("starting", total=total_env_steps)
            self._progress.start()

    def log_params(self, params: dict[str, Any]) -> None:
        pass

    def _line(self, metrics: dict[str, float], step: int) -> str:
        if metrics.get(ENV_STEPS) == 0 and GRADIENT_STEPS in metrics:  # an offline run: its step is a gradient step
            line = f"gradient_steps {step}"
        else:
            line = (f"env_steps {step}  frames/s {_fmt(metrics.get(FRAMES_PER_S), '.0f')}  "
                    f"return {_fmt(metrics.get(RETURN_MEAN))}  episodes {int(metrics.get(EPISODES, 0))}")
        per_policy = policies_part(metrics)
        if per_policy:
            line = line.replace("  episodes ", f" {per_policy}  episodes ", 1)
        learner = learner_part(metrics)
        if learner:
            line += f"  {learner}"
        if self._eval is not None:
            line += f"  eval {_fmt(self._eval[1])} (at {self._eval[0]})"
        return line

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        if EVAL_RETURN_MEAN in metrics:  # an evaluation (rlrun/app/periodic_eval.py): shown on every later line
            self._eval = (step, metrics[EVAL_RETURN_MEAN])
            if set(metrics) <= {EVAL_RETURN_MEAN, EVAL_RETURN_STD, EVAL_LENGTH_MEAN}:
                line = (f"eval at env_steps {step}: return {_fmt(metrics[EVAL_RETURN_MEAN])} ± "
                        f"{_fmt(metrics.get(EVAL_RETURN_STD))}")
                progress_log.info(line)
                if self._progress is None:
                    print(line, file=self.stream, flush=True)
                return
        now = time.monotonic()
        due = self._last_line is None or now - self._last_line >= self.interval_s
        if due:
            self._last_line = now
            progress_log.info(self._line(metrics, step))
        if self._progress is not None:
            self._progress.update(self._task, completed=step, description=self._line(metrics, step))
        elif due:
            print(self._line(metrics, step), file=self.stream, flush=True)

    def close(self, summary: dict[str, Any], status: str) -> None:
        if self._progress is not None:
            self._progress.stop()
        if summary.get("data") is not None:  # an offline run
            progress = f"gradient_steps {summary.get('gradient_steps')}"
        else:
            progress = (f"env_steps {summary.get('env_steps')}  return {_fmt(summary.get('episode_return_mean'))}  "
                        f"frames/s {_fmt(summary.get('frames_per_second'), '.0f')}")
        line = (f"done ({summary.get('stop_reason')}): {progress}  wall {_fmt(summary.get('wall_time_s'))} s  "
                f"run dir {summary.get('run_dir')}")
        progress_log.info(line)
        print(line, file=self.stream, flush=True)
