"""``rlrun executor=ray`` from the command line: a local Ray cluster of its own (started and shut down by the run),
a DQN run on CartPole to its stop condition, summary.json and protocol.json in the run directory."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import only_summary, run_rlrun


def test_cli_run_with_the_ray_executor_writes_its_summary(workdir: Path) -> None:
    proc = run_rlrun(["executor=ray", "executor.num_workers=1", "executor.num_cpus=1", "stop.env_steps=192",
                      "algo.learning_starts=64", "logger=none", "export.formats=[]"], workdir, check=True)
    summary = only_summary(workdir / "outputs")
    assert summary["stop_reason"] == "env_steps" and summary["env_steps"] == 192 and summary["error"] is None
    assert summary["games"] == 0 and summary["game_score_mean"] is None  # CartPole has no games
    card = json.loads((Path(summary["run_dir"]) / "protocol.json").read_text())
    assert card["env_id"] == "CartPole-v1" and card["seed"] == 0 and card["return_window_episodes"] == 20
    assert "Traceback" not in proc.stderr
