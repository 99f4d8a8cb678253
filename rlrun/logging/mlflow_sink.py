"""An MLflow run per rlrun run: params (the flattened config), buffered metrics, summary and config artifacts.

Defaults to a local sqlite store, ``sqlite:///<working directory>/mlflow.db`` (an absolute URI; no server), with
artifacts in ``<working directory>/mlartifacts``; ``logger.mlflow.tracking_uri`` points it anywhere else.
``mlflow`` is imported here only (its import costs ~1.5 s). Metrics are buffered and sent in one ``log_batch``
call at most every ``flush_interval_s`` seconds and at the end, so MLflow stays off the hot path. The run is
created through ``MlflowClient`` with explicit ids, never through the fluent API's global state.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_PARAMS_PER_BATCH = 100


def default_tracking_uri() -> str:
    return f"sqlite:///{Path.cwd().resolve() / 'mlflow.db'}"


class MLflowSink:
    def __init__(self, cfg: Any, run_dir: Path, run_name: str) -> None:
        import mlflow  # noqa: F401 - the heavy import, only when MLflow logging is on
        from mlflow.tracking import MlflowClient

        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.tracking_uri = cfg.tracking_uri or default_tracking_uri()
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        experiment = self.client.get_experiment_by_name(cfg.experiment)
        if experiment is None:
            artifact_root = None
            if self.tracking_uri.startswith("sqlite:///") and cfg.tracking_uri is None:
                artifact_root = (Path.cwd().resolve() / "mlartifacts").as_uri()
            experiment_id = self.client.create_experiment(cfg.experiment, artifact_location=artifact_root)
        else:
            experiment_id = experiment.experiment_id
        tags = {"rlrun.run_dir": str(self.run_dir.resolve())}
        self.run = self.client.create_run(experiment_id, run_name=run_name, tags=tags)
        self.run_id = self.run.info.run_id
        self._buffer: list[Any] = []
        self._last_flush = time.monotonic()

    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=items[i: i + MAX_PARAMS_PER_BATCH])

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now_ms = int(time.time() * 1000)
        self._buffer.extend(Metric(k, float(v), now_ms, int(step)) for k, v in metrics.items())
        if time.monotonic() - self._last_flush >= float(self.cfg.flush_interval_s):
            self.flush()

    def flush(self) -> None:
        while self._buffer:
            chunk, self._buffer = self._buffer[:1000], self._buffer[1000:]
            self.client.log_batch(self.run_id, metrics=chunk)
        self._last_flush = time.monotonic()

    def close(self, summary: dict[str, Any], status: str) -> None:
        self.flush()
        for name in ("summary.json", ".hydra/config.yaml"):
            path = self.run_dir / name
            if path.exists():
                self.client.log_artifact(self.run_id, str(path))
        self.client.set_terminated(self.run_id, status=status)


def is_local_store(uri: str) -> bool:
    return uri.startswith("sqlite:///") or uri.startswith("file:") or os.path.isabs(uri)
