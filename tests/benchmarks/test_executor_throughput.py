"""benchmarks/executor_throughput.py: Ray start-up and transfer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.runner import ROOT


def test_ray_startup_and_transfer_are_measured(tmp_path: Path) -> None:
    """``benchmarks.executor_throughput --quick --startup-runs 1`` without throughput settings: one fresh process
    per variant starts a local Ray cluster and 2 Pong workers up to their first rollout, and one more joins a running
    cluster (a ``ray start --head`` of the benchmark's own, ``executor.address``); the record holds every variant's
    phases (which add up; the join's probe reached the head's GCS), the Ray processes' memory, the peer's figure,
    and both transfer paths."""
    pytest.importorskip("ray")
    out = tmp_path / "record.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.executor_throughput", "--quick", "--settings", "",
                           "--no-batching", "--startup-runs", "1"], cwd=ROOT,
                          env={**os.environ, "RLRUN_BENCH_OUT": str(out)}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    for variant in ("ray_startup/", "ray_startup/no_preload/", "ray_startup/existing_cluster/"):
        init, workers, total = (figures[f"{variant}{k}"] for k in
                                ("ray_init_s", "workers_to_first_sample_s", "init_to_first_sample_s"))
        assert 0 <= init < total and 0 < workers < total and abs(init + workers - total) <= 0.02  # joining: ~0.04 s
    assert figures["ray_startup/cpu_s"] > 0 and figures["ray_startup/no_preload/cpu_s"] > 0
    assert figures["ray_startup/existing_cluster/joined"] is True  # the head's cluster, not one of its own
    assert figures["ray_startup/existing_cluster/init_to_first_sample_all_s"] == [
        figures["ray_startup/existing_cluster/init_to_first_sample_s"]]
    assert figures["ray_startup/runs"] == 1 and figures["ray_startup/workers"] == 2
    assert figures["ray_startup/init_to_first_sample_all_s"] == [figures["ray_startup/init_to_first_sample_s"]]
    assert figures["ray_memory/processes"] >= 4 and figures["ray_memory/rss_mib"] > figures["ray_memory/pss_mib"] > 0
    assert figures["ray_startup/rllib_peer_init_to_first_sample_s"] == 17.0
    assert not any(k.startswith(("pong/", "fraction_of_limit/")) for k in figures)  # no throughput settings
    assert figures["transfer/rollout_mb"] == 28.9
    for path in ("object_store", "shared_memory"):
        ms, rate = figures[f"transfer/{path}/ms_per_rollout"], figures[f"transfer/{path}/gb_per_s"]
        assert ms > 0 and abs(rate - 28.9 / ms) <= 0.02 * rate + 0.01
        assert figures[f"transfer/{path}/worker_cpu_ms_per_rollout"] > 0
