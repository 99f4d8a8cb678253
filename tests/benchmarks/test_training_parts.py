"""benchmarks/training_parts.py: rlrun's PPO training step on Pong beside the same parts by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from suite_records import record, suite_data

from benchmarks.runner import ROOT


def test_training_parts_set_rlrun_beside_the_ceiling_on_pong(tmp_path: Path) -> None:
    """``benchmarks.training_parts --rounds 1 --rollout-steps 32`` (the Pong task's path at a quarter of its rollout):
    rlrun's Pong PPO step (its update timed apart) beside the hand-written update, the raw env copies and the bare
    forward for the same work; the ceiling is their sum. Away from the task's settings no Sample Factory ratio is
    written (a peers record is there to be found)."""
    pytest.importorskip("ale_py")
    (tmp_path / "2026-01-02-bbbbbbb-peers.json").write_text(json.dumps(
        record("peers", {"pong_training/sample_factory/frames_per_cpu_s": 1000.0})))
    out = tmp_path / "record.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.training_parts", "--rounds", "1",
                           "--rollout-steps", "32"], cwd=ROOT,
                          env={**os.environ, "RLRUN_BENCH_OUT": str(out), "RLRUN_BENCH_RESULTS": str(tmp_path),
                               "RLRUN_BENCH_LOG": "0"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    f = json.loads(out.read_text())["figures"]
    assert f["frames_per_step"] == 32 * 8 * 4 and f["rollout_steps"] == 32
    step, update, acting = f["rlrun/step_s"], f["rlrun/update_s"], f["rlrun/acting_s"]
    assert 0 < update < step and acting == pytest.approx(step - update, abs=2e-4)
    parts = [f[f"parts/{p}_s"] for p in ("bare_update", "raw_env", "bare_forward")]
    assert all(p > 0 for p in parts) and f["ceiling/step_s"] == pytest.approx(sum(parts), abs=3e-4)
    assert f["ceiling/frames_per_s"] == pytest.approx(1024 / sum(parts), rel=2e-3)
    assert f["fraction_of_ceiling"] == pytest.approx(sum(parts) / step, rel=2e-3)
    assert f["rlrun/frames_per_s"] == pytest.approx(1024 / step, rel=2e-3)
    hand = f["parts/bare_update_s"] + f["parts/hand_written_acting_s"]
    assert f["parts/hand_written_acting_s"] > 0 and f["hand_written/step_s"] == pytest.approx(hand, abs=2e-4)
    assert f["fraction_of_hand_written"] == pytest.approx(hand / step, rel=2e-3)
    assert not any(k.startswith(("sample_factory/", "ratio/ceiling_over", "ratio/rlrun_over")) for k in f)


def test_training_parts_read_sample_factory_from_the_newest_peers_record(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Sample Factory's Pong training frames per CPU-second: from the newest peers result file holding it (a
    runner's suite file or a standalone record; a file that is not a result is skipped), or from the one named;
    None without one."""
    from benchmarks.training_parts import sample_factory_per_cpu_s

    monkeypatch.setenv("RLRUN_BENCH_RESULTS", str(tmp_path))
    assert sample_factory_per_cpu_s(None) is None
    key = "pong_training/sample_factory/frames_per_cpu_s"
    (tmp_path / "2026-01-01-aaaaaaa-peers.json").write_text(json.dumps(record("peers", {key: 500.0})))
    (tmp_path / "2026-01-02-bbbbbbb-peers.json").write_text(json.dumps(suite_data([record("peers", {key: 1000.0})])))
    (tmp_path / "2026-01-03-ccccccc-peers.json").write_text(json.dumps(record("peers", {"pong_acting/sb3/x": 1.0})))
    (tmp_path / "2026-01-04-ddddddd-peers.json").write_text(json.dumps({"figures": {key: 1.0}}))  # not a record
    assert sample_factory_per_cpu_s(None) == (1000.0, "2026-01-02-bbbbbbb-peers.json")
    assert sample_factory_per_cpu_s(tmp_path / "2026-01-01-aaaaaaa-peers.json") == (500.0,
                                                                                   "2026-01-01-aaaaaaa-peers.json")
