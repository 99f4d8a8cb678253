"""benchmarks/masked_tictactoe.py: a tiny run writes a record with its learning curve and game figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_a_tiny_run_writes_its_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import masked_tictactoe
    from benchmarks.common import OUT_ENV

    out = tmp_path / "record.json"
    monkeypatch.setenv(OUT_ENV, str(out))
    assert masked_tictactoe.main(["--env-steps", "1024", "--games", "20"]) == 0
    record = json.loads(out.read_text())
    figures = record["figures"]
    assert record["benchmark"] == "masked_tictactoe" and "--env-steps 1024" in record["command"]
    assert figures["env_steps"] >= 1024 and figures["illegal_actions"] == 0 and figures["greedy_games"] == 20
    assert figures["learning_curve"] and all(-1 <= r <= 1 for _, r in figures["learning_curve"])
    rates = figures["trained/win_rate"] + figures["trained/draw_rate"] + figures["trained/loss_rate"]
    assert rates == pytest.approx(1.0) and -1 <= figures["random/return_mean"] <= 1
