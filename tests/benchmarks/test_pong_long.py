"""benchmarks/pong_long.py: the GPU benchmark's path on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_pong_long_runs_every_preset_on_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU benchmark's path on the CPU (--smoke: 256 agent steps of each preset): every run stops at its frame
    budget, its figures are filled, and a smoke run writes no result file."""
    from benchmarks import pong_long

    monkeypatch.setenv("RLRUN_BENCH_RESULTS", str(tmp_path))
    figures = pong_long.main(["--smoke"])
    for algo in pong_long.RUNS:
        assert figures[f"stop_reason/{algo}"] == "env_steps" and figures[f"reached/{algo}"] == 0
        assert figures[f"frames_per_s/{algo}"] > 0
    assert list(tmp_path.iterdir()) == []
