"""A Weights & Biases run per rlrun run (``logger=wandb``, or ``logger.wandb.enabled=true`` beside MLflow): the
flattened config as the run's config, every metric at its env step, the summary and the run's status at the end,
evaluation videos as ``wandb.Video``.

Named like the MLflow run (``tracking_name``: ``run_name`` and the command's other overrides); the rlrun run
directory is in the run's notes and config (``rlrun.run_dir``). W&B's own files go to ``logger.wandb.dir``, else
``$WANDB_DIR``, else the run directory (``<run dir>/wandb/``), so a run's files stay together. ``mode=offline``
writes them only (``wandb sync <that folder>`` uploads them later); ``disabled`` is W&B's no-op run. A resumed
rlrun run (``rlrun resume=<dir>``) logs into the same W&B run: the checkpoint records its id and project.

Metrics are logged against ``env_step`` (``define_metric``), not W&B's own ``step``: W&B drops a value logged at a
step below the last one, and a background evaluation arrives at the env step its snapshot was taken, after later
training reports. ``wandb`` is imported here only (the ``wandb`` extra; ``rlrun.config.check_extras`` refuses
the key before the run starts when it is missing). As with MLflow, a W&B failure never stops a run: one warning
line and the sink turns itself off (TensorBoard and MLflow are unaffected).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, ClassVar

from rlrun.errors import one_line
from rlrun.logging.fanout import RunContext, warn
from rlrun.metric_names import EVAL_VIDEOS

STEP_KEY = "env_step"  # the x-axis of every chart (rlrun's env steps, summed over env copies)


class WandbSink:
    keeps_artifacts: ClassVar[bool] = False

    @classmethod
    def from_config(cls, cfg: Any, context: RunContext) -> WandbSink:
        return cls(cfg, context.run_dir, context.run_name)

    def __init__(self, cfg: Any, run_dir: Path, run_name: str) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.run: Any = None  # None: W&B logging is off (it failed, or never started)
        folder = Path(cfg.dir or os.environ.get("WANDB_DIR") or self.run_dir)

        def start() -> None:
            import wandb

            folder.mkdir(parents=True, exist_ok=True)
            # console="off": W&B would otherwise wrap stdout/stderr to copy them into its output.log (the run
            # directory has cli.log already), which also interferes with the live progress bar.
            settings = wandb.Settings(console="off", init_timeout=float(cfg.init_timeout_s))
            # resume="allow": a resumed rlrun run continues its W&B run (its id from the checkpoint), and a run id
            # the project has not seen starts a run under that id instead of failing.
            self.run = wandb.init(project=cfg.project, entity=cfg.entity, mode=cfg.mode, name=run_name,
                                  id=cfg.run_id or None, resume="allow" if cfg.run_id else None,
                                  dir=str(folder), tags=list(cfg.tags or []), notes=f"rlrun run dir: {self.run_dir}",
                                  config={"rlrun.run_dir": str(self.run_dir)}, settings=settings, reinit="create_new")
            self.run.define_metric(STEP_KEY)
            self.run.define_metric("*", step_metric=STEP_KEY)

        self._call("init", start)
        self.wandb_id = getattr(self.run, "id", None)  # not run_id: that names the MLflow sink (rlrun/app/run.py)

    def log_params(self, params: dict[str, Any]) -> None:
        self._call("config", lambda: self.run.config.update(dict(params), allow_val_change=True))

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self._call("log", lambda: self.run.log({**metrics, STEP_KEY: int(step)}))

    def log_videos(self, paths: list[Path], step: int) -> None:
        """An evaluation's episodes as ``eval/videos`` in the run's media panel, at its env step (W&B reads the mp4
        files as they are: no moviepy needed for a file)."""
        import wandb

        self._call("log videos", lambda: self.run.log({EVAL_VIDEOS: [wandb.Video(str(p), format="mp4")
                                                                       for p in paths], STEP_KEY: int(step)}))

    def close(self, summary: dict[str, Any], status: str) -> None:
        """The summary's values as the run's summary (W&B's run table shows them), then finish: exit code 0 for a
        FINISHED run, 1 otherwise (W&B marks it failed), with rlrun's status in the summary as ``rlrun/status``."""
        scalars = {k: v for k, v in summary.items() if isinstance(v, (int, float, str, bool))}

        def finish() -> None:
            self.run.summary.update({**scalars, "rlrun/status": status})
            self.run.finish(exit_code=0 if status == "FINISHED" else 1)

        self._call("finish", finish)
        self.run = None

    def _call(self, what: str, fn: Callable[[], Any]) -> None:
        if what != "init" and self.run is None:
            return
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - W&B must never stop a run
            warn(f"W&B: {what} failed: {one_line(e, 300)}; W&B logging is off for the rest of this run "
                 f"(TensorBoard and MLflow are unaffected).")
            run, self.run = self.run, None
            if run is not None:
                try:
                    run.finish(exit_code=1)
                except Exception:  # noqa: BLE001, S110 - it failed already; the warning said so
                    pass
