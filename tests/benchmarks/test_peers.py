"""The peers benchmark (benchmarks/peers): how a contender's process is watched and stopped, how each peer's output
is read, how seeds are summarized into medians and ratios. Real child processes throughout; the peers' own venvs
are made only by the benchmark itself (minutes), not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.peers.__main__ import markdown
from benchmarks.peers.pong_tasks import HERE
from benchmarks.peers.processes import process_tree, watch
from benchmarks.peers.venvs import PEERS, PeerUnavailable, script

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def child(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "contender.py"
    path.write_text("import json, sys, time\n" + textwrap.dedent(body))
    return [sys.executable, str(path)]


def test_a_watched_contender_is_stopped_with_what_it_started_when_a_line_says_so(tmp_path: Path) -> None:
    command = child(tmp_path, """
        import subprocess
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        print(json.dumps({"pid": grandchild.pid}), flush=True)
        time.sleep(0.5)
        print("stop here", flush=True)
        time.sleep(120)
    """)
    seen: list[tuple[float, str]] = []

    def on_line(at: float, line: str) -> bool:
        seen.append((at, line))
        return line.startswith("stop")

    watched = watch(command, on_line, budget_s=60, cwd=tmp_path, env=ENV)
    assert [line.strip() for _, line in seen][1:] == ["stop here"] and 0.4 < seen[1][0] < 10
    assert watched.wall_s < 30 and not watched.budget_reached  # stopped at the line, not after its sleep
    assert watched.peak_rss_mib > 5  # two Python processes were alive
    assert len(watched.line_cpu_s) == 2
    # The contender and what it started are gone.
    import time

    time.sleep(0.5)
    leftovers = subprocess.run(["pgrep", "-f", "time.sleep\\(120\\)"], capture_output=True, text=True).stdout
    assert str(os.getpid()) not in leftovers and not leftovers.strip(), leftovers


def test_the_tables_say_which_peers_are_not_contenders_and_which_did_not_run() -> None:
    from benchmarks.peers.__main__ import CONTENDERS, QUICK_TASKS, TASKS, task_contenders

    assert set(TASKS) == {"pong_acting", "pong_training", "mujoco_ppo", "mujoco_td3"}
    assert QUICK_TASKS == ("pong_acting",)
    assert all(n in CONTENDERS for t in TASKS for n in task_contenders(t) if n != "rlrun_bf16")
    table = markdown({"mujoco_ppo/rlrun/wall_s": 400.0, "mujoco_ppo/rlrun/version": "0.1.0"}, ["mujoco_ppo"],
                     {"torchrl": "pip install torchrl==0.14.1 failed: ..."})
    assert "mujoco_ppo: sample_factory is not a contender of this task" in table
    assert "- **torchrl** did not run: pip install" in table
    assert "pong_acting: cleanrl, torchrl, sample_factory are not contenders" in markdown({}, ["pong_acting"], {})
    assert "mujoco_td3: sb3, torchrl, sample_factory are not contenders" in markdown({}, ["mujoco_td3"], {})


def test_a_published_script_that_differs_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLRUN_PEERS_DIR", str(tmp_path))
    peer = PEERS["cleanrl"]
    from benchmarks.peers.venvs import scripts_dir

    path = scripts_dir(peer) / "cleanrl" / "ppo_continuous_action.py"
    path.parent.mkdir(parents=True)
    path.write_text("print('not cleanrl')\n")
    with pytest.raises(PeerUnavailable, match="is not the published file"):
        script(peer, "cleanrl/ppo_continuous_action.py")


def test_seeds_interleave_with_the_contenders_order_rotated() -> None:
    from benchmarks.peers.processes import interleaved

    assert list(interleaved(["a", "b", "c"], [0, 1, 2, 3])) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"), (2, "c"), (2, "a"), (2, "b"),
        (3, "a"), (3, "b"), (3, "c")]


def test_process_tree_finds_descendants(tmp_path: Path) -> None:
    proc = subprocess.Popen(child(tmp_path, """
        import subprocess
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        print("ready", flush=True)
        time.sleep(30)
    """), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert len(process_tree(proc.pid)) == 2
    finally:
        for pid in reversed(process_tree(proc.pid)):
            os.kill(pid, 9)
        proc.wait()


def test_the_ci_runs_the_quick_form() -> None:
    from benchmarks.suite import by_name

    peers = by_name()["peers"]
    assert peers.ci_args == ("--quick",)
    from benchmarks.peers.__main__ import QUICK_TASKS

    assert QUICK_TASKS == ("pong_acting",)
    assert json.dumps(peers.is_compared("ratio/pong_acting/frames_per_s/rlrun_over_sb3")) == "true"
    assert not peers.is_compared("pong_acting/rlrun/frames_per_s")  # absolute speeds are never compared


def test_the_table_and_charts_stay_in_the_results_folder_under_the_suite_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.common import OUT_ENV, RESULTS_ENV
    from benchmarks.peers.__main__ import output_stem, table_path

    record = tmp_path / "results" / "2026-01-01-abc-peers.json"
    monkeypatch.delenv(OUT_ENV, raising=False)
    assert output_stem(record) == record.with_suffix("")
    assert table_path(output_stem(record)) == record.with_suffix(".md")
    monkeypatch.setenv(OUT_ENV, str(tmp_path / "results" / "tmp" / "peers-1.json"))  # the runner's scratch file
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path / "results"))
    stem = output_stem(tmp_path / "results" / "tmp" / "peers-1.json", "abc1234")
    assert stem.parent == tmp_path / "results" and stem.name.endswith("-abc1234-peers")  # the commit it started at
    # The runner writes <stem>.json and <stem>.md (the suite's figures) afterwards: the table has a name of its own.
    assert table_path(stem) == stem.with_name(stem.name + "-table.md")
    table_path(stem).write_text("an earlier run's table")  # a second run on the same commit and day keeps it
    again = output_stem(tmp_path / "results" / "tmp" / "peers-2.json", "abc1234")
    assert again.name == stem.name + "-2" and not table_path(again).exists()


# ------------------------------------------------------------------------------------- pong_acting, pong_training


def test_acting_frames_per_s_come_from_the_last_line_and_start_up_from_the_first(tmp_path: Path) -> None:
    from benchmarks.peers.pong_tasks import measure_acting

    command = child(tmp_path, """
        time.sleep(0.4)  # start-up: imports, envs, the first rollout
        print(json.dumps({"agent_steps": 0, "seconds": 0.0, "frame_skip": 4}), flush=True)
        print("a log line", flush=True)
        print(json.dumps({"agent_steps": 1024, "seconds": 0.5, "frame_skip": 4}), flush=True)
        print(json.dumps({"agent_steps": 3072, "seconds": 1.5, "frame_skip": 4}), flush=True)
    """)
    run = measure_acting(command, budget_s=60, cwd=tmp_path, env=ENV)
    assert run.error is None and run.agent_steps == 3072 and run.seconds == 1.5
    assert run.frames_per_s == pytest.approx(3072 * 4 / 1.5)
    assert 0.4 <= run.startup_s < 10 and run.peak_rss_mib > 5


def test_an_acting_window_counts_the_cpu_time_of_every_process_in_the_tree(tmp_path: Path) -> None:
    """Between its two protocol lines the contender burns 0.5 CPU-seconds itself and starts a grandchild that
    burns 0.5 more (and stays alive): the window's CPU time is theirs, read from /proc, whatever the wall time."""
    from benchmarks.peers.pong_tasks import measure_acting

    command = child(tmp_path, """
        import subprocess
        def burn(s):
            end = time.process_time() + s
            while time.process_time() < end:
                pass
        burn(0.3)  # start-up: not in the window
        print(json.dumps({"agent_steps": 0, "seconds": 0.0, "frame_skip": 4}), flush=True)
        time.sleep(0.5)  # the watch reads the tree's CPU time at the line
        start = time.perf_counter()
        grandchild = subprocess.Popen([sys.executable, "-c", "import time\\nend = time.process_time() + 0.5\\n"
                                       "while time.process_time() < end: pass\\nprint(flush=True)\\ntime.sleep(60)"],
                                      stdout=subprocess.PIPE, text=True)
        burn(0.5)
        grandchild.stdout.readline()  # its burn is done
        print(json.dumps({"agent_steps": 1000, "seconds": time.perf_counter() - start, "frame_skip": 4}), flush=True)
        time.sleep(1)
    """)
    run = measure_acting(command, budget_s=30, cwd=tmp_path, env=ENV)
    assert run.error is None, run.error
    assert 0.95 <= run.cpu_s <= 1.3, run.cpu_s  # 2 x 0.5 s, the grandchild's interpreter start-up, clock ticks
    assert run.frames_per_cpu_s == pytest.approx(4000 / run.cpu_s)
    assert run.cores_busy == pytest.approx(run.cpu_s / run.seconds)
    assert run.machine_cpu_s >= 0.95 * run.cpu_s  # the machine was at least as busy as the tree


@pytest.mark.parametrize("body, wanted", [
    ('print("ale_py missing", file=sys.stderr); raise SystemExit(3)\n', "exit 3: ale_py missing"),
    ('print(json.dumps({"agent_steps": 0, "seconds": 0.0}))\n', "no rollout after the first was reported"),
    ("time.sleep(60)\n", "budget of 1 s reached"),
])
def test_an_acting_run_without_a_figure_says_why(tmp_path: Path, body: str, wanted: str) -> None:
    from benchmarks.peers.pong_tasks import measure_acting

    run = measure_acting(child(tmp_path, body), budget_s=1.0, cwd=tmp_path, env=ENV)
    assert run.frames_per_s is None and run.error.startswith(wanted), run.error


def test_acting_medians_ratios_and_table() -> None:
    from benchmarks.peers.pong_tasks import ActingRun, markdown_rows, ratios
    from benchmarks.peers.pong_tasks import summarize as summarize_acting

    ours = summarize_acting([ActingRun(6000.0, 1, 1.0, 5.0, 400.0), ActingRun(6400.0, 1, 1.0, 6.0, 420.0),
                             ActingRun(None, error="exit 1: boom")])
    assert ours["frames_per_s"] == 6200.0 and ours["startup_s"] == 5.5 and ours["fraction_ran"] == pytest.approx(2 / 3)
    assert ours["per_seed"]["errors"] == [None, None, "exit 1: boom"]
    theirs = summarize_acting([ActingRun(4000.0, 1, 1.0, 11.0, 600.0)])
    got = ratios("pong_acting", {"rlrun": ours, "sb3": theirs})
    assert got == {"ratio/pong_acting/frames_per_s/rlrun_over_sb3": 1.55,
                   "ratio/pong_acting/startup/sb3_over_rlrun": 2.0, "ratio/pong_acting/peak_rss/sb3_over_rlrun": 1.463}
    figures = {"ratio/pong_acting/frames_per_s/rlrun_over_sb3": 1.55}
    rows = markdown_rows("pong_acting", {"rlrun": {**ours, "version": "0.1.0"}, "sb3": {**theirs, "version": "2.9.2"}},
                         figures)
    assert "| pong_acting | sb3 | 2.9.2 | 4000 | - | - | 1.00 | 11.00 | 600 | 1.55 | - |" in rows
    table = markdown({"pong_acting/sb3/frames_per_s": 4000.0, "pong_acting/sb3/version": "2.9.2"}, ["pong_acting"], {})
    assert table.startswith("| task | contender | version | frames/s")
    assert "| pong_acting | sb3 | 2.9.2 | 4000 |" in table


def test_the_bf16_variant_runs_rlrun_with_its_precision_and_has_ratios_of_its_own() -> None:
    """rlrun_bf16 (pong_training, when named) is rlrun's Pong script with device.precision=bf16; it is compared
    with each peer and with rlrun, and no peer ratio treats it as a peer of rlrun."""
    from benchmarks.peers.__main__ import EXTRA_CONTENDERS, task_contenders
    from benchmarks.peers.pong_tasks import TASKS, ActingRun, command, markdown_rows, ratios
    from benchmarks.peers.pong_tasks import summarize as summarize_acting

    assert "rlrun_bf16" in EXTRA_CONTENDERS and "rlrun_bf16" in task_contenders("pong_training")
    assert "rlrun_bf16" not in task_contenders("pong_acting")
    argv = command(TASKS["pong_training"], "rlrun_bf16", "py", 1, 5.0)
    assert argv[1].endswith("contenders/rlrun_pong.py") and argv[-2:] == ["--precision", "bf16"]
    assert "--precision" not in command(TASKS["pong_training"], "rlrun", "py", 1, 5.0)
    table = {name: summarize_acting([ActingRun(fps, 1, 1.0, 5.0, 500.0)])
             for name, fps in (("rlrun", 1200.0), ("rlrun_bf16", 1800.0), ("sample_factory", 900.0))}
    got = ratios("pong_training", table)
    assert got["ratio/pong_training/frames_per_s/rlrun_over_sample_factory"] == 1.333
    assert got["ratio/pong_training/frames_per_s/rlrun_bf16_over_sample_factory"] == 2.0
    assert got["ratio/pong_training/frames_per_s/rlrun_bf16_over_rlrun"] == 1.5
    assert "ratio/pong_training/frames_per_s/rlrun_over_rlrun_bf16" not in got
    rows = "\n".join(markdown_rows("pong_training", {n: {**row, "version": "v"} for n, row in table.items()}, got))
    assert "rlrun_bf16 / peer frames/s (--precision bf16): rlrun 1.50, sample_factory 2.00." in rows


@pytest.mark.parametrize("task", ["pong_acting", "pong_training"])
def test_the_rlrun_pong_contender_reports_by_the_protocol(tmp_path: Path, task: str) -> None:
    from benchmarks.peers.pong_tasks import TASKS, acting_line, command

    argv = command(TASKS[task], "rlrun", sys.executable, 0, 1.0) + ["--num-envs", "2", "--rollout-steps", "16"]
    out = subprocess.run(argv, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300, check=True).stdout
    lines = [acting_line(line) for line in out.splitlines()]
    assert len(lines) >= 2 and all(line is not None for line in lines)
    assert lines[0]["agent_steps"] == 0 and all(line["frame_skip"] == 4 for line in lines)
    assert lines[-1]["seconds"] >= 1.0 and lines[-1]["agent_steps"] == 32 * (len(lines) - 1)  # 2 copies x 16 steps


def test_sample_factory_reports_are_read_as_frames_with_the_frame_skip() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("sf_pong", HERE / "contenders" / "sample_factory_pong.py")
    sf_pong = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sf_pong)  # its top-level import is ale_py, which rlrun's venv has too
    line = ("\x1b[36m[2026-11-27 12:48:07,635][03993] Fps is (10 sec: 443.4, 60 sec: 443.4, 300 sec: 443.4). "
            "Total num frames: 4096. Throughput: 0: 221.7. Samples: 2048. Policy #0 lag: (min: 15.0, avg: 15.0)")
    assert int(sf_pong.FRAMES.search(line).group(1)) == 4096 and sf_pong.FRAME_SKIP == 4
    assert sf_pong.FRAMES.search("Fps is (10 sec: nan). Samples: 0.") is None
    assert "--num_workers=2" in sf_pong.SETTINGS and "--num_envs_per_worker=4" in sf_pong.SETTINGS  # 8 copies
