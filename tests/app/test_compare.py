"""``rlrun compare`` on tiny real runs: two sweeps, two single runs, MLflow run ids, and the bad inputs that exit 2;
the sweep summary's per-configuration intervals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_rlrun

from rlrun.app.compare import Run, Side, compare
from rlrun.app.sweep import configuration_table, configurations
from rlrun.evaluation_stats import Interval

TINY = ["stop.env_steps=300", "algo.learning_starts=100", "logger.console.enabled=false",
        "logger.report_interval_s=0"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sweeps of two seeds on CartPole (two learning rates) and one MountainCar run, in one MLflow store."""
    work = tmp_path_factory.mktemp("compare")
    run_rlrun(["-m", "seed=0,1", "algo.lr=1e-3", *TINY, "hydra.sweep.dir=a"], work, check=True)
    run_rlrun(["-m", "seed=0,1", "algo.lr=1e-4", *TINY, "hydra.sweep.dir=b"], work, check=True)
    run_rlrun(["env.id=MountainCar-v0", *TINY, "hydra.run.dir=mountaincar"], work, check=True)  # 200-step episodes
    return work


def test_two_sweeps_give_a_probability_of_improvement_a_verdict_and_curves(work: Path) -> None:
    proc = run_rlrun(["compare", "a", "b", "--out", "ab.png"], work)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "A a: 2 seeds, IQM " in out and "B b: 2 seeds, IQM " in out
    assert "P(B > A): " in out and "under 5 seeds the intervals are wide" in out
    verdict = next(line for line in out.splitlines() if line.startswith("verdict: "))
    assert "at 2 seeds" in verdict  # never a claim without the seed count it rests on
    assert (work / "ab.png").read_bytes()[:8] == PNG_SIGNATURE
    # seeded: the same command gives the same numbers
    assert run_rlrun(["compare", "a", "b", "--out", "ab.png"], work).stdout == out


def test_one_run_each_cannot_support_a_claim(work: Path) -> None:
    run_a = next(p for p in (work / "a").iterdir() if p.name.startswith("0-"))
    run_b = next(p for p in (work / "b").iterdir() if p.name.startswith("0-"))
    proc = run_rlrun(["compare", str(run_a), str(run_b), "--out", "one.png"], work)
    assert proc.returncode == 0, proc.stderr
    assert "verdict: one run each cannot support a claim" in proc.stdout
    assert "P(B > A)" not in proc.stdout and "no interval from one seed" in proc.stdout


def test_mlflow_run_ids_of_the_sweeps_compare_as_their_directories(work: Path) -> None:
    parents = [json.loads((work / side / "sweep.json").read_text())["mlflow"]["parent_run_id"] for side in "ab"]
    proc = run_rlrun(["compare", *parents, "--out", "ids.png", "--tracking-uri", f"sqlite:///{work / 'mlflow.db'}"],
                     work)
    assert proc.returncode == 0, proc.stderr
    assert f"A {parents[0]}: 2 seeds" in proc.stdout and "P(B > A): " in proc.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["a", "mountaincar"], "returns of different envs are not comparable"),
    (["a", "b", "--metric", "loss/no_such"], "none of its 2 runs reports loss/no_such"),
    (["a", "nowhere"], "neither a directory nor an MLflow run id"),
])
def test_bad_input_is_one_line_and_exit_2(work: Path, args: list[str], message: str) -> None:
    proc = run_rlrun(["compare", *args], work)
    assert proc.returncode == 2, proc.stdout
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_the_sweeps_summary_has_an_interval_per_configuration(work: Path) -> None:
    summary = json.loads((work / "a" / "sweep_summary.json").read_text())
    (row,) = summary["configurations"]
    returns = [j["episode_return_mean"] for j in summary["jobs"]]
    assert row["seeds"] == 2 and row["mean"]["value"] == pytest.approx(sum(returns) / 2)
    assert row["mean"]["low"] == pytest.approx(min(returns)) and row["mean"]["high"] == pytest.approx(max(returns))
    assert "| configuration | seeds | return IQM [95% CI] | return mean [95% CI] |" in (
        work / "a" / "sweep_summary.md").read_text()


def test_configurations_group_seeds_and_warn_under_five() -> None:
    """Group x: returns 1, 2, 3, 4, 100 (IQM drops 1 and 100: mean(2, 3, 4) = 3); group y: one seed, no interval
    to speak of; a failed job counts no seed."""
    jobs = [{"group": "x", "status": "completed", "episode_return_mean": v} for v in (1.0, 2.0, 3.0, 4.0, 100.0)]
    jobs += [{"group": "y", "status": "completed", "episode_return_mean": 7.0},
             {"group": "y", "status": "failed", "episode_return_mean": None}]
    rows = configurations(jobs)
    assert [(r["group"], r["seeds"]) for r in rows] == [("x", 5), ("y", 1)]
    assert rows[0]["iqm"]["value"] == pytest.approx(3.0) and rows[0]["mean"]["value"] == pytest.approx(22.0)
    assert rows[0]["iqm"]["low"] <= 3.0 <= rows[0]["iqm"]["high"]
    table = configuration_table(rows)
    assert "| x | 5 | 3.00 [" in table and "| y | 1 | 7.00 (one seed) |" in table
    assert "Under 5 seeds (1 here)" in table
    assert "Under 5 seeds" not in configuration_table(rows[:1])


def _side(label: str, scores: list[float], env: str = "gym:CartPole-v1") -> Side:
    return Side(label, [Run(f"{label}{i}", env, s) for i, s in enumerate(scores)])


def test_the_verdict_never_says_more_than_the_seeds_support() -> None:
    """All of B above all of A: a claim at 5 seeds a side, none at 2 (the bootstrap gives [1, 1] either way); one
    side of one run: no claim; overlapping scores: no detectable difference, with the seeds that would resolve it."""
    metric = "episode/return_mean"
    better = compare(_side("a", [1.0, 2.0, 3.0, 4.0, 5.0]), _side("b", [6.0, 7.0, 8.0, 9.0, 10.0]), metric)
    assert better.improvement == Interval(1.0, 1.0, 1.0) and better.verdict.startswith("B is better than A at 5 seeds")
    worse = compare(_side("a", [6.0, 7.0, 8.0, 9.0, 10.0]), _side("b", [1.0, 2.0, 3.0, 4.0, 5.0]), metric)
    assert worse.verdict.startswith("B is worse than A at 5 seeds")
    two = compare(_side("a", [1.0, 2.0]), _side("b", [6.0, 7.0]), metric)
    assert two.verdict.startswith("no claim at 2 seeds: B is ahead")
    assert compare(_side("a", [1.0]), _side("b", [6.0, 7.0]), metric).verdict.startswith(
        "one run on a side cannot support a claim")
    # A = 0, 2 against B = 1, 3: P(B > A) = 3/4 with an interval that holds 0.5; d = 1, pooled variance 2: 32 seeds
    close = compare(_side("a", [0.0, 2.0]), _side("b", [1.0, 3.0]), metric)
    assert close.improvement.value == pytest.approx(0.75) and close.seeds_needed == 32
    assert close.verdict == ("no detectable difference at 2 seeds: the interval of P(B > A) holds 0.5; about 32 "
                             "seeds per side would resolve a difference of this size.")


def test_a_normaliser_puts_different_envs_on_one_scale(tmp_path: Path) -> None:
    """CartPole low 0 high 500, MountainCar low -200 high -100: 250 -> 0.5, -150 -> 0.5. Sides on different envs are
    pooled into one normalised distribution each."""
    from rlrun.app.compare import normalised, pooled, read_normaliser

    path = tmp_path / "norm.yaml"
    path.write_text("CartPole-v1: {low: 0, high: 500}\nMountainCar-v0: {low: -200, high: -100}\n")
    table = read_normaliser(str(path))
    a = normalised(_side("a", [250.0, 500.0]), table)
    b = normalised(_side("b", [-150.0, -100.0], env="gym:MountainCar-v0"), table)
    assert [r.score for r in a.runs] == [0.5, 1.0] and [r.score for r in b.runs] == [0.5, 1.0]
    same = compare(pooled(a), pooled(b), "episode/return_mean")
    assert same.improvement.value == pytest.approx(0.5) and same.envs == ["all envs, normalised"]
    from rlrun.errors import ConfigError

    with pytest.raises(ConfigError, match="no entry for gym:Acrobot-v1"):
        normalised(_side("c", [1.0], env="gym:Acrobot-v1"), table)
    path.write_text("CartPole-v1: {low: 1, high: 1}\n")
    with pytest.raises(ConfigError, match="low == high"):
        read_normaliser(str(path))


def test_different_envs_compare_with_a_normaliser_file(work: Path) -> None:
    (work / "norm.yaml").write_text("CartPole-v1: {low: 0, high: 500}\nMountainCar-v0: {low: -200, high: -100}\n")
    proc = run_rlrun(["compare", "a", "mountaincar", "--normaliser", "norm.yaml", "--out", "norm.png"], work)
    assert proc.returncode == 0, proc.stderr
    assert "envs: all envs, normalised" in proc.stdout and "B mountaincar: 1 seed" in proc.stdout


def test_one_configuration_of_a_sweep_of_several_is_chosen_with_a_hash(work: Path) -> None:
    """A sweep directory whose jobs are both sweeps' (two configurations): refused as a side, unless
    ``SWEEP#override`` chooses one."""
    import shutil

    both = work / "both"
    (both / "jobs").mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "a" / "sweep.json", both / "sweep.json")
    for side in "ab":
        for job in (work / side / "jobs").glob("*.json"):
            shutil.copy(job, both / "jobs" / job.name)
    proc = run_rlrun(["compare", "both", "b"], work)
    assert proc.returncode == 2 and "a sweep of 2 configurations" in proc.stderr and "both#algo.lr=" in proc.stderr
    chosen = run_rlrun(["compare", "both#algo.lr=0.001", "both#algo.lr=0.0001", "--out", "both.png"], work)
    assert chosen.returncode == 0, chosen.stderr
    direct = run_rlrun(["compare", "a", "b", "--out", "ab.png"], work)
    assert chosen.stdout.splitlines()[3:-1] == direct.stdout.splitlines()[3:-1]  # the same runs, the same numbers
