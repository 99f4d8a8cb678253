"""Log benchmark figures to TensorBoard and MLflow, next to the JSON result files.

- TensorBoard: event files under ``<results>/tb/<benchmark>/``, one scalar per numeric figure (its name is the
  tag), at step = the run's Unix time in seconds, so successive runs (commits) line up along the step axis.
- MLflow: one parent run per suite invocation (tags: the hardware fingerprint, the command, the load average) with
  one child run per benchmark (metrics: its numeric figures; params: command, status; tags: fingerprint). The store
  is, first match wins: the ``uri`` argument (``rlrun-bench --mlflow-uri``), ``$MLFLOW_TRACKING_URI`` (what the CI
  workflow's secret sets), else a local sqlite store ``<results>/mlflow.db`` (artifacts in
  ``<results>/mlartifacts``). An unreachable server is a warning, never a failed benchmark (rlrun's MLflow code
  probes it with a short timeout).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.records import numeric_figures

EXPERIMENT = "rlrun-bench"


def tracking_uri(results: Path, uri: str | None = None) -> str:
    """Where MLflow records go (see the module docstring)."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(results).resolve() / 'mlflow.db'}"


def log_tensorboard(records: list[dict[str, Any]], tb_dir: Path, step: int) -> list[Path]:
    """One event-file folder per benchmark; returns the folders written."""
    from torch.utils.tensorboard import SummaryWriter

    written = []
    for record in records:
        figures = numeric_figures(record.get("figures", {}))
        if not figures:
            continue
        folder = Path(tb_dir) / record["benchmark"]
        with SummaryWriter(log_dir=str(folder)) as writer:
            for key, value in figures.items():
                writer.add_scalar(key, value, step)
        written.append(folder)
    return written


def log_mlflow(records: list[dict[str, Any]], uri: str, suite: str, command: str,
               artifacts: list[Path] = (), extra_tags: dict[str, str] | None = None) -> str | None:
    """The parent run's id, or None (with a warning) when the store cannot be used."""
    from mlflow.entities import Metric, Param, RunTag

    from rlrun.fingerprint import fingerprint_tags
    from rlrun.logging.mlflow_sink import MLflowUnavailable, connect

    try:
        client, experiment_id = connect(uri, EXPERIMENT)
    except MLflowUnavailable as e:
        print(f"rlrun-bench: warning: MLflow: {e}; the figures are in the JSON files and TensorBoard.", file=sys.stderr)
        return None
    tags = {**fingerprint_tags(), "rlrun.bench.suite": suite, "rlrun.bench.command": command,
            **(extra_tags or {})}
    now_ms = int(time.time() * 1000)
    try:
        parent = client.create_run(experiment_id, run_name=f"bench-{suite}", tags=tags).info.run_id
        for record in records:
            child_tags = {**tags, "mlflow.parentRunId": parent, "rlrun.bench.benchmark": record["benchmark"],
                          "rlrun.bench.status": record.get("status", "ok")}
            run = client.create_run(experiment_id, run_name=record["benchmark"], tags=child_tags).info.run_id
            metrics = [Metric(k, v, now_ms, 0) for k, v in numeric_figures(record.get("figures", {})).items()]
            params = [Param("command", record["command"][:6000]), Param("status", record.get("status", "ok"))]
            for i in range(0, max(len(metrics), 1), 1000):
                client.log_batch(run, metrics=metrics[i:i + 1000], params=params if i == 0 else [],
                                 tags=[RunTag(k, str(v)[:5000]) for k, v in child_tags.items()] if i == 0 else [])
            client.set_terminated(run, status="FINISHED" if record.get("status", "ok") in ("ok", "unavailable")
                                  else "FAILED")
        for path in artifacts:
            client.log_artifact(parent, str(path))
        client.set_terminated(parent)
    except Exception as e:  # noqa: BLE001 - MLflow must never fail a benchmark
        print(f"rlrun-bench: warning: MLflow logging to {uri} failed: {' '.join(str(e).split())[:300]}",
              file=sys.stderr)
        return None
    return parent


def log_records(records: list[dict[str, Any]], results: Path, suite: str, command: str, *, uri: str | None = None,
                tensorboard: bool = True, mlflow: bool = True, artifacts: list[Path] = (),
                extra_tags: dict[str, str] | None = None) -> dict[str, Any]:
    """Log to both; returns where: ``{"tensorboard": [folders], "mlflow_uri", "mlflow_run_id"}``."""
    out: dict[str, Any] = {"tensorboard": [], "mlflow_uri": None, "mlflow_run_id": None}
    if tensorboard:
        out["tensorboard"] = [str(p) for p in log_tensorboard(records, Path(results) / "tb", int(time.time()))]
    if mlflow:
        out["mlflow_uri"] = tracking_uri(Path(results), uri)
        out["mlflow_run_id"] = log_mlflow(records, out["mlflow_uri"], suite, command, artifacts, extra_tags)
    return out
