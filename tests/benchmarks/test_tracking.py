"""benchmarks/tracking.py: figures to TensorBoard and MLflow."""

from __future__ import annotations

from pathlib import Path

from suite_records import record


def test_figures_go_to_mlflow_as_a_parent_run_with_a_child_per_benchmark(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from benchmarks.tracking import EXPERIMENT, log_records

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    where = log_records([record("a", {"ratio/x": 0.9, "nested": {"frames_per_s": 10.0}, "note": "text"}),
                         record("b", {}, status="failed")], tmp_path, "ci", "rlrun-bench ci", uri=uri)
    assert where["mlflow_uri"] == uri and where["mlflow_run_id"]
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    children = {r.data.tags["rlrun.bench.benchmark"]: r for r in runs if r.info.run_id != where["mlflow_run_id"]}
    assert children["a"].data.metrics == {"ratio/x": 0.9, "nested/frames_per_s": 10.0}
    assert children["a"].data.tags["mlflow.parentRunId"] == where["mlflow_run_id"]
    assert children["b"].info.status == "FAILED" and "rlrun.hw.cpu" in children["a"].data.tags
    assert list((tmp_path / "tb" / "a").glob("events.out.tfevents.*"))
