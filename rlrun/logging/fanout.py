"""The one place metrics go through: params once, metrics per report, a summary at the end, to every sink."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Sink(Protocol):
    def log_params(self, params: dict[str, Any]) -> None: ...
    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...
    def close(self, summary: dict[str, Any], status: str) -> None: ...


class MetricsLogger:
    def __init__(self, sinks: list[Sink]) -> None:
        self.sinks = sinks

    @classmethod
    def from_config(cls, cfg: Any, run_dir: Path, run_name: str, total_env_steps: int | None) -> "MetricsLogger":
        sinks: list[Sink] = []
        if cfg.console.enabled:
            from rlrun.logging.console import ConsoleSink

            sinks.append(ConsoleSink(cfg.console, total_env_steps))
        if cfg.tensorboard.enabled:
            from rlrun.logging.tensorboard import TensorBoardSink

            sinks.append(TensorBoardSink(cfg.tensorboard, run_dir))
        if cfg.mlflow.enabled:
            from rlrun.logging.mlflow_sink import MLflowSink

            sinks.append(MLflowSink(cfg.mlflow, run_dir, run_name))
        return cls(sinks)

    def sink(self, kind: type) -> Any:
        return next((s for s in self.sinks if isinstance(s, kind)), None)

    def log_params(self, params: dict[str, Any]) -> None:
        for s in self.sinks:
            s.log_params(params)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for s in self.sinks:
            s.log_metrics(metrics, step)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Store a file with the run (e.g. an exported model) in every sink that keeps artifacts (MLflow)."""
        for s in self.sinks:
            if hasattr(s, "log_artifact"):
                s.log_artifact(path, artifact_path)

    def close(self, summary: dict[str, Any], status: str = "FINISHED") -> None:
        for s in self.sinks:
            try:
                s.close(summary, status)
            except Exception as e:  # noqa: BLE001 - one sink's failure must not lose the others' data
                log.warning("closing %s failed: %s", type(s).__name__, e)
