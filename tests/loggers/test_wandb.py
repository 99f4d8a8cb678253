"""W&B logging (``logger=wandb``), in W&B's offline mode (no server is reachable from the tests): a short run's
offline run files hold its config, its metrics at their env steps, its summary and its name; a W&B failure never
stops a run; without the wandb package, choosing it is one line and exit 2 before anything starts."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from conftest import QUICK, only_summary, run_rlrun
from omegaconf import OmegaConf

from rlrun.config import WandbConfig
from rlrun.logging.wandb_sink import WandbSink

pytest.importorskip("wandb")  # the dev extra installs it (make install); a bare install skips these


def offline_records(wandb_dir: Path, run_file: Path | None = None) -> dict[str, list]:
    """The records of the one offline run under ``wandb_dir``, by kind (run, config, history, summary, exit), read
    with W&B's own protobuf from its run file ``wandb/offline-run-*/run-<id>.wandb``. That file is a LevelDB-style
    log: a 7-byte header, then 32 KiB blocks of chunks, each ``crc32 (4) | length (2, LE) | type (1)`` and its bytes
    (type 1: a whole record, 2/3/4: its first/middle/last piece); a block's last < 7 bytes are zero padding."""
    from wandb.proto import wandb_internal_pb2

    if run_file is None:
        found = list(wandb_dir.glob("wandb/offline-run-*/run-*.wandb"))
        assert len(found) == 1, found
        run_file = found[0]
    data, block, pos, pieces = run_file.read_bytes(), 32768, 7, b""
    records: dict[str, list] = {}
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pieces += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            pieces = b""
            name = record.WhichOneof("record_type")
            records.setdefault(name, []).append(getattr(record, name))
    return records


def history(records: dict[str, list]) -> list[dict]:
    return [{"/".join(item.nested_key) or item.key: json.loads(item.value_json) for item in h.item}
            for h in records.get("history", [])]


def test_an_offline_run_holds_the_config_metrics_and_summary(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wandb_dir = workdir.parent / "wandb-files"
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_rlrun([*QUICK, "logger=wandb", "logger.wandb.mode=offline", "logger.console.enabled=false",
               "algo.lr=0.003"], workdir, check=True)
    summary = only_summary(workdir / "outputs")
    assert summary["mlflow_run_id"] is None and not (workdir / "mlflow.db").exists()  # logger=wandb: no MLflow
    assert list((Path(summary["run_dir"]) / "tensorboard").glob("events.out.tfevents.*"))  # TensorBoard beside W&B
    records = offline_records(wandb_dir)

    run = records["run"][0]
    assert run.project == "rlrun" and run.display_name == ("dqn-CartPole-v1-seed0 stop.env_steps=300 "
                                                            "algo.learning_starts=100 algo.lr=0.003")  # as MLflow's
    config = {u.key: json.loads(u.value_json) for c in [run.config, *(r for r in records.get("config", []))]
              for u in c.update}
    assert config["env.id"] == "CartPole-v1" and config["algo.lr"] == 0.003 and config["seed"] == 0
    assert config["rlrun.run_dir"] == summary["run_dir"] and summary["run_dir"] in run.notes

    rows = history(records)
    steps = [r["env_step"] for r in rows if "counters/env_steps" in r]
    assert steps and steps == sorted(steps) and steps[-1] == summary["env_steps"]  # every report at its env step
    assert all(r["counters/env_steps"] == r["env_step"] for r in rows if "counters/env_steps" in r)

    final = {"/".join(u.nested_key) or u.key: json.loads(u.value_json) for s in records["summary"] for u in s.update}
    assert final["rlrun/status"] == "FINISHED" and final["env_steps"] == summary["env_steps"]
    assert final["stop_reason"] == "env_steps"
    assert records["exit"][0].exit_code == 0


def test_a_resumed_run_continues_its_wandb_run(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rlrun resume=<dir>`` logs into the W&B run the run started (its id from the checkpoint), from the env step
    where it stopped; a user's explicit ``logger.wandb.run_id`` wins over the checkpoint's."""
    wandb_dir = workdir.parent / "wandb-files"
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_rlrun([*QUICK, "logger=wandb", "logger.wandb.mode=offline", "logger.console.enabled=false"], workdir,
              check=True)
    first = only_summary(workdir / "outputs")
    run_rlrun([f"resume={first['run_dir']}", "stop.env_steps=600", "logger.console.enabled=false"], workdir,
              check=True)
    files = sorted(wandb_dir.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 2, files
    before, after = (offline_records(wandb_dir, f) for f in files)
    assert before["run"][0].run_id == after["run"][0].run_id  # the same W&B run, continued
    steps = [r["env_step"] for r in history(after) if "counters/env_steps" in r]
    assert steps and min(steps) > first["env_steps"] and max(steps) == only_summary(workdir / "outputs")["env_steps"]

    run_rlrun([f"resume={first['run_dir']}", "stop.env_steps=900", "logger.console.enabled=false",
               "logger.wandb.run_id=chosen1"], workdir, check=True)
    third = sorted(set(wandb_dir.glob("wandb/offline-run-*/run-*.wandb")) - set(files))
    assert len(third) == 1 and offline_records(wandb_dir, third[0])["run"][0].run_id == "chosen1"


def test_a_failing_wandb_warns_once_and_turns_itself_off(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cfg = OmegaConf.merge(OmegaConf.structured(WandbConfig), {"enabled": True, "mode": "offline",
                                                              "dir": str(tmp_path)})
    sink = WandbSink(cfg, tmp_path, "a-run")
    assert sink.run is not None

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("No space left on device")

    sink.run.log = broken
    sink.log_metrics({"loss/td": 1.0}, 10)
    sink.log_metrics({"loss/td": 2.0}, 20)  # off now: no second warning, no error
    sink.close({"env_steps": 20}, "FINISHED")
    err = capsys.readouterr().err
    assert err.count("rlrun: warning: W&B: log failed: No space left on device; W&B logging is off") == 1
    assert sink.run is None


def test_without_wandb_choosing_it_is_one_line_and_exit_2(workdir: Path, tmp_path: Path) -> None:
    """A fresh interpreter where ``import wandb`` fails, as without the extra (sitecustomize blocks it)."""
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text("import sys\nsys.modules['wandb'] = None\n")
    proc = run_rlrun(["logger=wandb", "stop.env_steps=1"], workdir, env={"PYTHONPATH": str(block)})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.strip() == ("rlrun: error: logger.wandb.enabled=true (logger=wandb): the wandb package is not "
                                   "installed; pip install 'rlrun[wandb]'.")
    assert not (workdir / "outputs").exists() or not list((workdir / "outputs").rglob("summary.json"))
