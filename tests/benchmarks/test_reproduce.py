"""``rlrun-bench reproduce`` (benchmarks/reproduce.py): the references file is complete data with sources, the band
rule, which (env, seed) pairs still need a run, and the whole path end to end on a tiny budget (one real MuJoCo
run as a sweep -> a committed-style record -> table JSON/Markdown with the reference -> a curve PNG), and that the
committed table is what its committed records give."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_rlrun

from benchmarks import reproduce as rp

ROOT = Path(__file__).resolve().parents[2]


def test_references_are_complete_with_sources() -> None:
    refs = rp.load_references()
    ids = [r["id"] for r in refs]
    assert len(ids) == len(set(ids))
    keys = {"id", "algo", "env", "env_version", "env_group", "budget_env_steps", "mean", "std", "seeds", "kind",
            "measure", "source", "url", "notes"}
    for r in refs:
        # an unquoted comma inside a YAML flow mapping splits a value into a stray key: caught here
        assert set(r) <= keys, (r["id"], set(r) - keys)
        assert r["url"].startswith("https://") and r["env_version"] and r["seeds"] >= 1
        assert r["kind"] in ("band", "goal", "curve")
    cleanrl_hopper = next(r for r in refs if r["id"] == "cleanrl-ppo-hopper")
    assert (cleanrl_hopper["mean"], cleanrl_hopper["std"], cleanrl_hopper["budget_env_steps"]) == (2382.86, 271.74,
                                                                                                  1_000_000)
    for suite, groups in rp.SUITES.items():  # every planned row has a published reference to compare with
        for g in groups:
            if suite == "atari-cpu" and g.algo != "ppo":
                continue  # no published IMPALA curve at CPU-sized budgets: its rows show frames/s and the curve
            for env in g.envs:
                assert any(r["algo"] == g.algo and r["env"] == env for r in refs), (suite, g.name, env)


@pytest.mark.parametrize("value, ok, position", [(2382.86, True, "in"), (2382.86 - 2 * 271.74, True, "in"),
                                                 (1838.0, False, "below"), (3000.0, False, "above")])
def test_band_is_mean_plus_minus_two_std(value: float, ok: bool, position: str) -> None:
    ref = {"mean": 2382.86, "std": 271.74}
    assert rp.in_band(value, ref) is ok and rp.band_position(value, ref) == position


def test_band_without_std_is_ninety_percent() -> None:
    assert rp.in_band(90.0, {"mean": 100.0, "std": None}) and not rp.in_band(89.0, {"mean": 100.0, "std": None})
    assert rp.in_band(-105.0, {"mean": -100.0, "std": None}) and not rp.in_band(-111.0, {"mean": -100.0, "std": None})


def test_atari_groups_name_the_game_and_cpu_runs_have_a_wall_budget() -> None:
    ppo_gpu = next(g for g in rp.SUITES["atari"] if g.name == "ppo")
    assert "env.game=Pong,Breakout" in ppo_gpu.sweep_overrides()
    ppo_cpu = next(g for g in rp.SUITES["atari-cpu"] if g.name == "ppo")
    overrides = ppo_cpu.sweep_overrides()
    assert "stop.wall_time_s=1350" in overrides and "executor=ray" in overrides
    assert "stop.wall_time_s=1350" not in ppo_cpu.sweep_overrides(smoke=True)


def test_a_run_its_wall_time_stopped_early_is_not_shown_as_a_result() -> None:
    """The compact table: an Atari run that 22.5 minutes on a CPU stopped at 2% of CleanRL's 10M steps scores what
    an untrained agent scores; its row stays, saying how far it got instead of the score, while a run that reached
    its budget shows its return; the line above the table names the runs' hardware and dates."""
    committed = ROOT / "benchmarks" / "results" / "reproduce"
    rows = rp.build_rows("atari-cpu", committed, rp.load_references(), gpu=False)
    pong = next(r for r in rows if r["group"] == "ppo" and r["env"] == "Pong")
    assert rp.stopped_short(pong) == pytest.approx(214_016 / 10_000_000)
    block = rp.readme_block("atari-cpu", rows)
    assert "| ppo | Pong | 214,016 reached in 22.5 min | not measured: its 22.5-min wall time stopped it at 2% of " \
           "the budget |" in block
    assert "-20.6" not in block and len([r for r in rows if rp.stopped_short(r)]) == 4
    assert "`rlrun-bench reproduce atari-cpu`: AMD EPYC, 2 cores, torch 2.13.0+cpu, 2026-" in block
    finished = {**pong, "env_steps": [10_000_000]}  # the same row had it reached the budget
    assert rp.stopped_short(finished) is None and "| -20.6 (1) |" in rp.readme_block("atari-cpu", [finished])
    assert "`rlrun-bench reproduce atari-cpu`: no run yet." in rp.readme_block("atari-cpu", [])


def test_missing_pairs_become_sweeps(tmp_path: Path) -> None:
    group = rp.Group("g", "ppo", "mujoco", ("A-v5", "B-v5"), (0, 1, 2), 1000)
    assert rp.missing_sweeps(tmp_path, "s", group) == [(("A-v5", "B-v5"), (0, 1, 2))]
    for env, seed in (("A-v5", 0), ("B-v5", 0)):
        path = rp.record_path(tmp_path, "s", group, env, seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"env": env, "seed": seed}))
    assert rp.missing_sweeps(tmp_path, "s", group) == [(("A-v5", "B-v5"), (1, 2))]
    rp.record_path(tmp_path, "s", group, "A-v5", 1).write_text(json.dumps({"env": "A-v5", "seed": 1}))
    assert rp.missing_sweeps(tmp_path, "s", group) == [(("A-v5",), (2,)), (("B-v5",), (1, 2))]
    assert rp.missing_sweeps(tmp_path, "s", group, envs=("B-v5",), seeds=(2,)) == [(("B-v5",), (2,))]
    assert rp.sweep_dir(tmp_path, "s", group, ("A-v5",), (2,)) != rp.sweep_dir(tmp_path, "s", group, ("B-v5",), (2,))


def test_one_smoke_run_end_to_end(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    cmd = [sys.executable, "-m", "benchmarks.reproduce", "mujoco", "--groups", "ppo", "--envs", "Hopper-v5",
           "--seeds", "0", "--jobs", "1", "--smoke", "--no-snapshot", "--runs-dir", str(runs), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((out / "records" / "mujoco" / "ppo" / "Hopper-v5-seed0.json").read_text())
    assert record["env_steps"] == 4096 and record["smoke"] and len(record["curve"]) >= 2
    table = json.loads((out / "mujoco.json").read_text())
    row = next(r for r in table["rows"] if r["env"] == "Hopper-v5")
    assert row["seeds"] == [0] and row["status"] == "incomplete: 1 of 3 seeds"
    assert row["mean"] == pytest.approx(record["episode_return_mean"])
    cleanrl = next(r for r in row["references"] if r["id"] == "cleanrl-ppo-hopper")
    assert cleanrl["in_band"] is None  # an incomplete row is never judged
    assert cleanrl["ratio"] == pytest.approx(row["mean"] / 2382.86)
    md = (out / "mujoco.md").read_text()
    assert "| ppo | Hopper-v5 |" in md and "2,382.9 ± 271.7" in md
    assert (out / "mujoco-Hopper-v5.png").stat().st_size > 5000
    again = subprocess.run([*cmd, "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "rlrun -m" not in again.stdout  # the pair has a record: nothing left to run for it


def test_the_committed_table_is_what_its_records_give(tmp_path: Path) -> None:
    committed = ROOT / "benchmarks" / "results" / "reproduce"
    rows = rp.build_rows("mujoco", committed, rp.load_references(), gpu=False)
    table = json.loads((committed / "mujoco.json").read_text())
    assert [(r["env"], r["algo"], r["seeds"], r["mean"]) for r in table["rows"]] == \
        [(r["env"], r["algo"], r["seeds"], r["mean"]) for r in rows]
    readme = (ROOT / "README.md").read_text()
    assert rp.readme_block("mujoco", rows, dated=False) in readme  # README's table is the generated one (undated)


def test_the_table_names_the_hardware_its_runs_ran_on_not_the_machine_writing_it(tmp_path: Path) -> None:
    """Each record keeps its run's fingerprint: a table regenerated elsewhere (another machine class, a later
    torch) still names where its figures were measured; a table without runs says it names this machine."""
    committed = ROOT / "benchmarks" / "results" / "reproduce"
    rows = rp.build_rows("atari-cpu", committed, rp.load_references(), gpu=False)
    records = [json.loads(p.read_text()) for p in sorted((committed / "records" / "atari-cpu").rglob("*.json"))]
    ran_on = {rp.describe_hardware(r["hardware"]) for r in records}
    here = {"cpu": "Some Other CPU", "cores": 64, "versions": {"torch": "9.9"}}
    md = rp.markdown("atari-cpu", rows, here)
    assert records and f"Hardware of the runs: {'; '.join(sorted(ran_on))}." in md and "Some Other CPU" not in md
    empty = [{**r, "hardware": []} for r in rows]
    assert "Hardware of the runs: Some Other CPU, 64 cores, torch 9.9 (no run yet: this machine)." in \
        rp.markdown("atari-cpu", empty, here)


def test_runs_use_a_snapshot_of_the_commit_not_the_working_tree(tmp_path: Path) -> None:
    """The code the sweeps run: a worktree of HEAD at <runs>/.code whose rlrun (configs included) is what a job
    imports with the PYTHONPATH reproduce gives it; edits to this checkout after the start cannot reach the jobs."""
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    snapshot = rp.code_snapshot(tmp_path)
    try:
        assert snapshot == (tmp_path / ".code").resolve() and (snapshot / "rlrun" / "conf" / "config.yaml").exists()
        probe = subprocess.run([sys.executable, "-c", "import rlrun, rlrun.conf; print(rlrun.__file__)"],
                               cwd=snapshot, env={"PYTHONPATH": str(snapshot), "PATH": "/usr/bin:/bin"},
                               capture_output=True, text=True)
        assert probe.returncode == 0 and probe.stdout.strip().startswith(str(snapshot)), probe.stderr
        assert rp.code_snapshot(tmp_path) == snapshot  # a second call reuses it
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(snapshot)], cwd=ROOT, capture_output=True)


def test_normalised_return_is_one_at_the_reference_and_rises_with_the_return() -> None:
    assert rp.normalised(488.7, 488.7) == pytest.approx(1.0)
    assert rp.normalised(0.0, 488.7) == pytest.approx(0.0)
    # a negative reference (Acrobot): a higher return is above 1, a lower one below
    assert rp.normalised(-80.0, -100.0) == pytest.approx(1.2)
    assert rp.normalised(-120.0, -100.0) == pytest.approx(0.8)


def test_the_suite_aggregate_is_the_iqm_of_judged_rows_normalised() -> None:
    """Two judged rows (reference 100: finals 90, 100, 110; reference -100: finals -100, -100, -100) normalise to
    0.9, 1, 1.1 and 1, 1, 1: IQM of the six pooled (drop one each end: 1, 1, 1, 1) = 1. A row without a judged band
    reference is left out."""
    def row(finals: list[float], ref_mean: float, judged: bool) -> dict:
        return {"group": "g", "env": f"E{ref_mean}", "finals": finals,
                "references": [{"mean": ref_mean, "in_band": True if judged else None}]}

    rows = [row([90.0, 100.0, 110.0], 100.0, True), row([-100.0] * 3, -100.0, True), row([5.0], 10.0, False)]
    tasks = rp.normalised_scores(rows)
    assert sorted(tasks) == ["g E-100.0", "g E100.0"]
    np.testing.assert_allclose(tasks["g E100.0"], [0.9, 1.0, 1.1])
    line = rp.aggregate_line("s", rows, "x/")
    assert line.startswith("Aggregate over 2 rows (6 runs): IQM of the reference-normalised return")
    assert " 1.00 [" in line and "[performance profile](x/s-profile.png)" in line
    assert rp.aggregate_line("s", rows[:1], "x/") is None  # one row: no aggregate
    assert rp.iqm_cell({"iqm": {"value": 5.0, "low": 4.0, "high": 6.0}, "finals": [4.0, 6.0]}) == "5.0 [4.0, 6.0]"
    assert rp.iqm_cell({"iqm": {"value": 5.0, "low": 5.0, "high": 5.0}, "finals": [5.0]}).endswith("no interval)")


def test_the_performance_profile_png_is_written(tmp_path: Path) -> None:
    rows = [{"group": "g", "env": e, "finals": f, "references": [{"mean": 100.0, "in_band": True}]}
            for e, f in (("A", [90.0, 100.0]), ("B", [110.0, 120.0]))]
    path = rp.plot_profile("s", rows, tmp_path)
    assert path == tmp_path / "s-profile.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_group_measured_greedily_records_each_runs_evaluation(tmp_path: Path) -> None:
    """RL Zoo measures the final model greedily: a group that measures as it does evaluates each finished run
    (``rlrun eval <run dir> episodes=N``) and its finals are those returns; other groups keep the training return."""
    group = rp.Group("g", "qrdqn", "cartpole", ("CartPole-v1",), (0,), 64, eval_episodes=3)
    run_dir = tmp_path / "runs" / "classic" / "g" / "0"
    run_rlrun(["algo=qrdqn", "stop.env_steps=64", "executor.num_envs=1", "logger=none", "export.formats=[]",
               f"hydra.run.dir={run_dir}"], tmp_path, check=True)
    [path] = rp.harvest(tmp_path / "runs", tmp_path / "out", "classic", group)
    record = json.loads(path.read_text())
    evaluated = json.loads((run_dir / "eval.json").read_text())
    assert record["final_eval"]["episodes"] == evaluated["episodes"] == 3
    assert rp.final_return(record, group) == evaluated["return_mean"]
    assert rp.final_return(record, dataclasses.replace(group, eval_episodes=None)) == record["episode_return_mean"]


def test_a_reference_with_an_env_group_is_matched_only_for_that_env_option(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """MinAtar's Breakout is not Atari's: a dqn row on env=atari Breakout gets none of the MinAtar references."""
    groups = [rp.Group("dqn-minatar", "dqn", "minatar", ("Breakout",), (0,), 2_000_000),
              rp.Group("dqn-atari", "dqn", "atari", ("Breakout",), (0,), 2_000_000, env_key="game")]
    monkeypatch.setitem(rp.SUITES, "both", groups)
    for group in groups:
        path = rp.record_path(tmp_path, "both", group, "Breakout", 0)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"env": "Breakout", "seed": 0, "env_steps": 2_000_000, "episode_return_mean": 9.0,
                                    "wall_time_s": 1.0, "env_steps_per_second": 1.0}))
    minatar, atari = rp.build_rows("both", tmp_path, rp.load_references(), gpu=False)
    assert [r["id"] for r in minatar["references"]] == ["minatar-dqn-breakout-curve-2m"]
    assert minatar["references"][0]["ratio"] == pytest.approx(9.0 / 9.6)
    assert atari["references"] == []


def test_a_group_measured_over_a_span_averages_the_episodes_that_ended_in_it(tmp_path: Path) -> None:
    """Dopamine's curves average the training episodes of an iteration: a group with a ``span`` records each run's
    mean return over the episodes that ended in it. Checked against the run's own window means: with a window
    longer than the run, ``episode/return_mean`` is the mean of every episode so far, so the span's mean is
    ``(M_b C_b - M_a C_a) / (C_b - C_a)`` at the span's two reports."""
    from rlrun.app.plot import read_scalars
    from rlrun.metric_names import EPISODES, RETURN_MEAN

    group = rp.Group("g", "dqn", "cartpole", ("CartPole-v1",), (0,), 3000, span=(1000, 3000))
    run_dir = tmp_path / "runs" / "classic" / "g" / "0"
    run_rlrun(["algo=dqn", "stop.env_steps=3000", "stop.episode_return_mean=null", "return_window=100000",
               "logger.report_interval_s=0", "export.formats=[]", f"hydra.run.dir={run_dir}"], tmp_path, check=True)
    [path] = rp.harvest(tmp_path / "runs", tmp_path / "out", "classic", group)
    span = json.loads(path.read_text())["span"]
    a, b = span["env_steps"]
    assert a <= 1000 < 3000 <= b
    count, mean = (dict(zip(*read_scalars(run_dir, tag), strict=True)) for tag in (EPISODES, RETURN_MEAN))
    assert not [s for s in count if a < s <= 1000 or 3000 <= s < b]  # the span's own reports, no wider
    assert span["episodes"] == count[b] - count[a] > 10
    expected = (mean[b] * count[b] - mean[a] * count[a]) / (count[b] - count[a])
    assert rp.final_return({"span": span}, group) == pytest.approx(expected, rel=1e-4)
    assert expected != pytest.approx(mean[b], rel=1e-3)  # not the mean of the whole run: the span's own
