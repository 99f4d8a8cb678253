"""benchmarks/replay_memory.py: bytes per Atari transition on a real Pong stream."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_replay_memory_meets_the_bytes_goal_on_a_real_pong_stream(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks.replay_memory --quick``: 1,600 Pong transitions into a memory that stores each frame once and
    one that stores whole stacks (it checks they sample the same records): under 8 KB per transition against
    56 KB, for DQN's, Ape-X's and per-step inserts. Sizes, not timings."""
    from benchmarks import replay_memory

    monkeypatch.setenv("RLRUN_BENCH_RESULTS", str(tmp_path))
    monkeypatch.setenv("RLRUN_BENCH_LOG", "0")
    figures = replay_memory.main(["--quick"])
    for label in ("dqn_rollout4", "apex_batch50", "per_step"):
        assert figures[f"bytes_per_transition/whole/{label}"] > 56_000
        assert figures[f"bytes_per_transition/dedup/{label}"] < 8_192
        assert 0.9 < figures[f"frames_per_transition/dedup/{label}"] < 1.1
    assert len(list(tmp_path.glob("*-replay_memory.json"))) == 1
