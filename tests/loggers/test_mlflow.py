"""MLflow logging: an unreachable or failing tracking store never stops a run and loses nothing (local fallback
store), a run can be continued (``logger.mlflow.run_id``), artifacts can be added (``log_artifact``), and the env
protocol card describes the environment."""

from __future__ import annotations

import http.server
import json
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from conftest import QUICK, only_summary, run_rlrun
from omegaconf import OmegaConf

from rlrun.config import MLflowConfig


def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sink_cfg(uri: str, **kw):  # type: ignore[no-untyped-def]
    return OmegaConf.merge(OmegaConf.structured(MLflowConfig),
                           {"tracking_uri": uri, "flush_interval_s": 0.0, "experiment": "test", **kw})


def client(uri: str):  # type: ignore[no-untyped-def]
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def metric_steps(uri: str, run_id: str, key: str) -> list[int]:
    return sorted(m.step for m in client(uri).get_metric_history(run_id, key))


def test_unreachable_server_warns_and_the_run_goes_on_into_the_fallback_store(workdir: Path) -> None:
    uri = f"http://127.0.0.1:{closed_port()}"
    start = time.monotonic()
    proc = run_rlrun([*QUICK, "logger.console.enabled=false", f"logger.mlflow.tracking_uri={uri}"], workdir,
                     check=True)
    assert time.monotonic() - start < 90  # no minutes of HTTP retries (the run itself takes a few seconds)
    assert proc.stderr.count(f"rlrun: warning: MLflow: tracking server {uri} is unreachable") == 1
    summary = only_summary(workdir / "outputs")
    run_dir = Path(summary["run_dir"])
    assert summary["stop_reason"] == "env_steps"
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))  # TensorBoard unaffected

    fallback = f"sqlite:///{run_dir / 'mlflow_fallback' / 'mlflow.db'}"
    assert fallback in proc.stderr
    info = json.loads((run_dir / "mlflow_fallback" / "fallback.json").read_text())
    assert info["intended_tracking_uri"] == uri and info["fallback_tracking_uri"] == fallback
    run = client(fallback).get_run(summary["mlflow_run_id"])  # summary.json names the run where it really is
    assert run.info.status == "FINISHED"
    assert run.data.tags["rlrun.intended_tracking_uri"] == uri and run.data.tags["rlrun.seed"] == "0"
    assert run.data.params["env.id"] == "CartPole-v1"
    assert run.data.metrics["counters/env_steps"] == summary["env_steps"]
    assert client(fallback).list_artifacts(run.info.run_id) == []  # the run directory's files are not copied
    assert "run directory" in run.data.tags["rlrun.artifacts"]
    assert json.loads((run_dir / "protocol.json").read_text())["env_id"] == "CartPole-v1"


def test_store_failing_mid_run_fails_over_and_keeps_every_metric(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Steps 1-2 reach the primary store; then its metrics table is gone (a broken store); steps 3-4 go to the
    fallback store, with the params, tags and artifacts again: together the two stores hold all."""
    from rlrun.logging.mlflow_sink import MLflowSink

    db = tmp_path / "primary.db"
    primary = f"sqlite:///{db}"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    sink = MLflowSink(sink_cfg(primary), run_dir, "r")
    first_id = sink.run_id
    sink.log_params({"seed": 7, "env.id": "CartPole-v1", "algo.lr": 0.001})
    outside = tmp_path / "notes.txt"
    outside.write_text("kept\n")
    sink.log_artifact(outside)
    for step in (1, 2):
        sink.log_metrics({"loss/td": 0.5 * step}, step)
    assert sink.fallback_uri is None and metric_steps(primary, first_id, "loss/td") == [1, 2]

    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE metrics")
    for step in (3, 4):
        sink.log_metrics({"loss/td": 0.5 * step}, step)
    (run_dir / "summary.json").write_text("{}\n")
    sink.close({}, "FINISHED")

    assert sink.fallback_uri == f"sqlite:///{run_dir.resolve() / 'mlflow_fallback' / 'mlflow.db'}"
    assert sink.run_id != first_id
    assert "rlrun: warning: MLflow: log_metrics on" in capsys.readouterr().err
    moved = client(sink.fallback_uri).get_run(sink.run_id)
    assert metric_steps(sink.fallback_uri, sink.run_id, "loss/td") == [3, 4]
    assert moved.data.params["algo.lr"] == "0.001" and moved.data.tags["rlrun.seed"] == "7"
    assert moved.data.tags["rlrun.intended_run_id"] == first_id and moved.info.status == "FINISHED"
    assert [a.path for a in client(sink.fallback_uri).list_artifacts(sink.run_id)] == ["notes.txt"]
    assert {a.path for a in client(primary).list_artifacts(first_id)} == {"notes.txt"}


class _Unavailable(http.server.BaseHTTPRequestHandler):
    """A real HTTP server that answers every request 503 (a tracking server behind a proxy that is down)."""

    def _answer(self) -> None:
        self.send_response(503)
        self.end_headers()

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


# Each process connects at the same instant (a shared start time), as a user's two runs or a sweep's parallel jobs
# on a new store do.
CONNECT_AT = """
import sys, time
from rlrun.logging.mlflow_sink import connect
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
print(connect(sys.argv[1], "race")[1])
"""


def test_processes_creating_one_new_sqlite_store_at_once_all_connect(tmp_path: Path) -> None:
    """Four processes open the same new SQLite store together: every one gets the store and the same experiment.
    Without the creation lock all but one fail in the store's table creation or migrations ("table experiments
    already exists")."""
    import subprocess
    import sys

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    start = f"{time.time() + 8.0:.3f}"  # after the four interpreters have imported mlflow
    procs = [subprocess.Popen([sys.executable, "-c", CONNECT_AT, uri, start], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-500:] for _, err in results]
    assert {out.strip() for out, _ in results} == {"1"}
    assert len(client(uri).search_experiments(filter_string="name = 'race'")) == 1


def test_server_answering_503_fails_over_quickly(tmp_path: Path) -> None:
    from rlrun.logging.mlflow_sink import MLflowSink

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        uri = f"http://127.0.0.1:{server.server_address[1]}"
        start = time.monotonic()
        sink = MLflowSink(sink_cfg(uri), tmp_path, "r")
        assert time.monotonic() - start < 30  # MLflow's default retries would take minutes
    finally:
        server.shutdown()
        server.server_close()
    assert sink.fallback_uri is not None and sink.run_id is not None
    sink.log_metrics({"perf/frames_per_s": 100.0}, 10)
    sink.close({}, "FINISHED")
    assert metric_steps(sink.fallback_uri, sink.run_id, "perf/frames_per_s") == [10]
    assert json.loads((tmp_path / "mlflow_fallback" / "fallback.json").read_text())["reason"].startswith(
        f"tracking store {uri} failed")


def test_continued_run_and_log_artifact(tmp_path: Path) -> None:
    """``logger.mlflow.run_id`` continues an existing run (a resumed run); params already there are not resent
    (MLflow refuses to change one); ``log_artifact`` stores any file (an exported model)."""
    from rlrun.logging.mlflow_sink import MLflowSink

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = MLflowSink(sink_cfg(uri), tmp_path, "r")
    first.log_params({"seed": 1, "algo.lr": 0.001})
    first.log_metrics({"counters/env_steps": 100}, 100)
    first.close({}, "KILLED")

    second = MLflowSink(sink_cfg(uri, run_id=first.run_id), tmp_path, "r")
    assert client(uri).get_run(first.run_id).info.status == "RUNNING"
    second.log_params({"seed": 1, "algo.lr": 0.001, "resume": str(tmp_path)})
    second.log_metrics({"counters/env_steps": 200}, 200)
    model = tmp_path / "policy.pt"
    model.write_bytes(b"\x00model")
    second.log_artifact(model, "export")
    second.close({}, "FINISHED")

    assert second.run_id == first.run_id and second.fallback_uri is None
    run = client(uri).get_run(first.run_id)
    assert run.info.status == "FINISHED" and run.data.params["resume"] == str(tmp_path)
    assert metric_steps(uri, first.run_id, "counters/env_steps") == [100, 200]
    assert [a.path for a in client(uri).list_artifacts(first.run_id, "export")] == ["export/policy.pt"]


@pytest.mark.parametrize("max_steps, expected", [(None, 500), (100, 100)])
def test_protocol_card_from_config_and_gymnasium_registry(max_steps: int | None, expected: int) -> None:
    """CartPole-v1 is registered with max_episode_steps=500 and reward_threshold=475; an override wins."""
    from rlrun.logging.mlflow_sink import protocol_card

    params = {"env.name": "gym", "env.id": "CartPole-v1", "env.frame_skip": 1, "env.max_episode_steps": max_steps,
              "env.kwargs.sutton_barto_reward": True, "seed": 3, "return_window": 20}
    card = protocol_card(params)
    assert card["env_id"] == "CartPole-v1" and card["frame_skip"] == 1 and card["seed"] == 3
    assert card["max_episode_steps"] == expected
    assert card["env_kwargs"] == {"sutton_barto_reward": True}
    assert card["registered"]["max_episode_steps"] == 500 and card["registered"]["reward_threshold"] == 475.0
    import gymnasium

    assert card["versions"]["gymnasium"] == gymnasium.__version__


def test_credentials_in_the_tracking_uri_are_recorded_nowhere(workdir: Path) -> None:
    """A tracking URI with user:password@ (unreachable here: the run fails over): the password is in no file the
    run writes (params and tags in the fallback store, fallback.json, TensorBoard hparams, the checkpoint, the
    .hydra/ copies of the config and command line, the log) and not in its output; the URIs it records keep the
    host (user-info dropped)."""
    uri = "postgresql://alice:s3cret@127.0.0.1:1/mlflow"
    proc = run_rlrun([*QUICK, "logger.console.enabled=false", f"logger.mlflow.tracking_uri={uri}",
                      "export.formats=[]"], workdir, check=True)
    assert "rlrun: warning: MLflow" in proc.stderr  # it failed over: the fallback records exist
    assert "s3cret" not in proc.stdout + proc.stderr
    leaked = [str(p) for p in workdir.rglob("*") if p.is_file() and b"s3cret" in p.read_bytes()]
    assert leaked == []
    summary = only_summary(workdir / "outputs")
    run_dir = Path(summary["run_dir"])
    redacted = "postgresql://127.0.0.1:1/mlflow"
    assert json.loads((run_dir / "mlflow_fallback" / "fallback.json").read_text())["intended_tracking_uri"] == redacted
    run = client(f"sqlite:///{run_dir / 'mlflow_fallback' / 'mlflow.db'}").get_run(summary["mlflow_run_id"])
    assert run.data.params["logger.mlflow.tracking_uri"] == redacted
    assert run.data.tags["rlrun.intended_tracking_uri"] == redacted
    assert (run_dir / "checkpoints" / "latest.pt").is_file() and (run_dir / ".hydra" / "overrides.yaml").is_file()
