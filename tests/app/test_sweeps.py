"""Sweeps (``rlrun -m``), run as a subprocess as a user runs them: one MLflow parent run with a child per job,
seeds tagged for grouping, a status file per job, a failing job reported when it fails, a summary table, resume
after kill -9, the joblib launcher, and the Optuna sweeper (when its extra is installed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import QUICK, RLRUN, run_rlrun

JOB = [*QUICK, "logger.console.enabled=false"]


def run_merged(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """rlrun with stderr merged into stdout, so the order of lines shows when a failure was reported."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    full_env.pop("HYDRA_FULL_ERROR", None)
    full_env.pop("MLFLOW_RUN_ID", None)
    full_env.update(env or {})
    return subprocess.run([RLRUN, *args], cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=240, stdin=subprocess.DEVNULL)


def client(workdir: Path):  # type: ignore[no-untyped-def]
    from mlflow.tracking import MlflowClient

    return MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")


def runs_of(workdir: Path) -> list:
    c = client(workdir)
    return c.search_runs([c.get_experiment_by_name("rlrun").experiment_id])


def statuses(sweep_dir: Path) -> dict[str, str]:
    jobs = [json.loads(p.read_text()) for p in (sweep_dir / "jobs").glob("*.json")]
    return {" ".join(j["overrides"]): j["status"] for j in jobs}


def test_failing_job_is_reported_at_once_and_the_sweep_ends_with_a_summary_table(workdir: Path) -> None:
    """Basic launcher, 4 jobs (seed x env.id), 2 of which fail at run time (unknown env id): the others run, each
    failure is reported before the next job starts, the table lists all 4, the exit code is the failed jobs' (2)."""
    proc = run_merged(["-m", "seed=0,1", "env.id=CartPole-v1,NoSuchEnv-v0", *JOB, "logger.mlflow.enabled=false",
                       "hydra.sweep.dir=sw"], workdir)
    out = proc.stdout
    assert proc.returncode == 2, out
    sweep_dir = workdir / "sw"

    failure = out.index("rlrun: job 1 (seed=0 env.id=NoSuchEnv-v0")
    assert "failed: env.id=NoSuchEnv-v0: not a registered gymnasium environment" in out[failure:].splitlines()[0]
    assert failure < out.index("#2 : seed=1 env.id=CartPole-v1")  # reported when it failed, before job 2 started
    assert "2 of 4 jobs did not complete: job 1 (failed), job 3 (failed)" in out
    assert f"sweep.resume={workdir / 'sw'}" in out  # the sweep directory made absolute where the sweep started

    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    jobs = summary["jobs"]
    assert [j["num"] for j in jobs] == [0, 1, 2, 3]
    assert [j["status"] for j in jobs] == ["completed", "failed", "completed", "failed"]
    assert summary["counts"]["completed"] == 2 and summary["counts"]["failed"] == 2
    assert statuses(sweep_dir) == {" ".join(j["overrides"]): j["status"] for j in jobs}  # one status file per job
    for j in jobs[0::2]:  # the completed jobs carry their run's final figures
        run_summary = json.loads((Path(j["run_dir"]) / "summary.json").read_text())
        assert j["episode_return_mean"] == run_summary["episode_return_mean"] > 0
        assert j["frames_per_second"] == run_summary["frames_per_second"] > 0
    assert jobs[0]["group"] == jobs[2]["group"] and "seed=" not in jobs[0]["group"]  # they differ only by seed
    assert "not a registered gymnasium environment" in jobs[1]["error"] and jobs[1]["exit_code"] == 2
    table = (sweep_dir / "sweep_summary.md").read_text()
    assert "| job | overrides | status | return (mean) | frames/s | wall s |" in table
    assert "| 2 | seed=1 env.id=CartPole-v1" in table and "| completed |" in table and "| failed: env.id" in table
    assert table.split("\n", 2)[2].strip() in out  # the same table was printed


def test_a_mandatory_key_given_only_as_a_sweep_is_checked_per_value(workdir: Path) -> None:
    """env.game is mandatory (???) in env=atari: swept, it is set by each job, so the check before the jobs start
    must not refuse the sweep as if it were missing (it did: "env.env.id: MissingMandatoryValue ... env.game");
    a bad value still fails its own job with the game's message."""
    proc = run_merged(["-m", "algo=ppo", "env=atari", "env.game=Pong,NoSuchGame", "stop.env_steps=1",
                       "logger.console.enabled=false", "logger.mlflow.enabled=false",
                       "hydra.sweep.dir=sw"], workdir)
    out = proc.stdout
    assert "MissingMandatoryValue" not in out
    assert proc.returncode == 2, out
    assert sorted((o.split()[2], st) for o, st in statuses(workdir / "sw").items()) == [
        ("env.game=NoSuchGame", "failed"), ("env.game=Pong", "completed")]
    assert "env.game=NoSuchGame: not an ALE game" in out


def test_killed_sweep_resumes_skipping_completed_jobs(workdir: Path) -> None:
    args = ["-m", "seed=0,1", *JOB, "hydra.sweep.dir=sw"]
    env = {k: v for k, v in os.environ.items() if k not in ("HYDRA_FULL_ERROR", "MLFLOW_RUN_ID")}
    proc = subprocess.Popen([RLRUN, *args], cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    sweep_dir = workdir / "sw"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:  # kill -9 while a job runs, after one has completed
            if (sweep_dir / "jobs").exists():
                seen = statuses(sweep_dir)  # status files are replaced atomically: never half-written
                if "completed" in seen.values() and "running" in seen.values():
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = statuses(sweep_dir)
    done = {o for o, s in before.items() if s == "completed"}
    assert len(done) == 1 and "running" in before.values(), before
    done_jobs = [json.loads(p.read_text()) for p in (sweep_dir / "jobs").glob("*.json")]
    mtimes = {j["run_dir"]: (Path(j["run_dir"]) / "summary.json").stat().st_mtime_ns
              for j in done_jobs if j["status"] == "completed"}

    again = run_rlrun(args, workdir)  # the same command again: refused, the directory holds a sweep
    assert again.returncode == 2 and "already holds a sweep" in again.stderr and "sweep.resume=" in again.stderr

    resumed = run_rlrun(["-m", "seed=0,1", *JOB, "sweep.resume=sw"], workdir, check=True)
    assert "2 jobs, 1 completed before and skipped" in resumed.stdout
    assert resumed.stdout.count("completed in an earlier attempt") == 1
    assert set(statuses(sweep_dir).values()) == {"completed"}
    for run_dir, mtime in mtimes.items():  # completed jobs were not run again
        assert (Path(run_dir) / "summary.json").stat().st_mtime_ns == mtime
    jobs = [json.loads(p.read_text()) for p in (sweep_dir / "jobs").glob("*.json")]
    rerun = [j for j in jobs if before[" ".join(j["overrides"])] == "running"]
    assert [j["attempts"] for j in rerun] == [2]
    assert (Path(rerun[0]["run_dir"]) / "tensorboard").is_dir()  # the new attempt's log, the old one set aside

    parent_id = json.loads((sweep_dir / "sweep.json").read_text())["mlflow"]["parent_run_id"]
    children = [r for r in runs_of(workdir) if r.data.tags.get("mlflow.parentRunId") == parent_id]
    finished = sorted(r.data.tags["rlrun.seed"] for r in children if r.info.status == "FINISHED")
    assert finished == ["0", "1"]  # each job once
    assert {r.info.status for r in children} <= {"FINISHED", "KILLED"}  # the killed job's run is closed as KILLED
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["counts"]["completed"] == 2 and len(summary["jobs"]) == 2


def test_an_interrupted_job_continues_from_its_checkpoint_on_resume(workdir: Path) -> None:
    """Ctrl-C during a sweep's job after its first checkpoint, then sweep.resume: the job continues from the
    checkpoint its interrupt wrote (as rlrun resume=<run dir>), in the same run directory with the same TensorBoard
    log, to its budget; nothing is set aside as an earlier attempt."""
    args = ["-m", "seed=0", "stop.env_steps=30000", "checkpoint.interval_env_steps=1000",
            "logger.console.enabled=false"]
    env = {k: v for k, v in os.environ.items() if k not in ("HYDRA_FULL_ERROR", "MLFLOW_RUN_ID")}
    proc = subprocess.Popen([RLRUN, *args, "hydra.sweep.dir=sw"], cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and not list((workdir / "sw").glob("0-*/checkpoints/latest.pt")):
            assert proc.poll() is None, "the sweep ended before its job's first checkpoint"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert set(statuses(workdir / "sw").values()) == {"interrupted"}
    from rlrun import checkpoint as ckpt

    (latest,) = (workdir / "sw").glob("0-*/checkpoints/latest.pt")
    stopped_at = int(ckpt.load_checkpoint(latest)["loop"]["env_steps"])
    assert 0 < stopped_at < 30000

    resumed = run_rlrun([*args, "sweep.resume=sw"], workdir, check=True)
    assert "continuing attempt 1 from its checkpoint" in resumed.stdout
    (job,) = [json.loads(p.read_text()) for p in (workdir / "sw" / "jobs").glob("*.json")]
    assert job["status"] == "completed" and job["attempts"] == 2 and job["env_steps"] >= 30000
    run_dir = Path(job["run_dir"])
    assert not list(run_dir.glob("*attempt-*"))  # continued, not started again
    assert int(ckpt.load_checkpoint(ckpt.checkpoint_path(run_dir))["loop"]["env_steps"]) >= 30000


def test_joblib_sweep_is_one_parent_run_with_tagged_children_linked_by_explicit_id(workdir: Path) -> None:
    """Jobs in joblib worker processes, 2 of 4 failing: the children link to the sweep's parent run, and an
    inherited MLFLOW_RUN_ID (a decoy run) captures nothing. Children carry seed, group, fingerprint and commit
    tags and the summary, config and protocol card as artifacts."""
    c = client(workdir)
    decoy = c.create_run(c.create_experiment("rlrun")).info.run_id
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env.update(MLFLOW_RUN_ID=decoy, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([RLRUN, "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "seed=0,1",
                             "env.id=CartPole-v1,NoSuchEnv-v0", *JOB, "hydra.sweep.dir=sw"], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 2, out + err
    assert "Joblib.Parallel(n_jobs=2" in out and "2 of 4 jobs completed" in out
    assert "rlrun: job 1 (seed=0 env.id=NoSuchEnv-v0" in err and "rlrun: job 3 (seed=1 env.id=NoSuchEnv-v0" in err
    jobs = json.loads((workdir / "sw" / "sweep_summary.json").read_text())["jobs"]
    assert [j["status"] for j in jobs] == ["completed", "failed", "completed", "failed"]
    assert all(j["pid"] != proc.pid for j in jobs)  # the jobs ran in worker processes

    parent_id = json.loads((workdir / "sw" / "sweep.json").read_text())["mlflow"]["parent_run_id"]
    runs = {r.info.run_id: r for r in runs_of(workdir)}
    assert not [r for r in runs.values() if r.data.tags.get("mlflow.parentRunId") == decoy]
    runs.pop(decoy)
    parent = runs.pop(parent_id)
    assert parent.data.tags["rlrun.kind"] == "sweep" and parent.info.status == "FAILED"
    assert parent.data.metrics["sweep/jobs_completed"] == 2 and parent.data.metrics["sweep/jobs_failed"] == 2
    children = list(runs.values())  # nothing else was created; the failing jobs failed before their logger started
    assert {r.data.tags.get("mlflow.parentRunId") for r in children} == {parent_id}
    assert {r.info.run_id for r in children} == {jobs[0]["mlflow_run_id"], jobs[2]["mlflow_run_id"]}
    assert sorted(r.data.tags["rlrun.seed"] for r in children) == ["0", "1"]
    assert len({r.data.tags["rlrun.group"] for r in children}) == 1  # they differ only by seed
    assert "seed=" not in children[0].data.tags["rlrun.group"]

    child = children[0]
    tags = child.data.tags
    assert tags["rlrun.hw.cores"] == str(os.cpu_count()) and tags["rlrun.hw.cpu"]
    assert tags["rlrun.version.torch"].startswith("2.13") and tags["rlrun.version.gymnasium"]
    from rlrun.fingerprint import git_commit

    if git_commit(None, short=False):
        assert tags["mlflow.source.git.commit"] == git_commit(None, short=False)
    assert {"summary.json", "protocol.json", "config.yaml"} <= {a.path for a in c.list_artifacts(child.info.run_id)}
    card = json.loads(Path(c.download_artifacts(child.info.run_id, "protocol.json", str(workdir))).read_text())
    assert card["env_id"] == "CartPole-v1" and card["frame_skip"] == 1
    assert card["max_episode_steps"] == 500 and card["registered"]["reward_threshold"] == 475.0
    assert card["versions"]["gymnasium"]
    assert {"sweep_summary.md", "sweep.json"} <= {a.path for a in c.list_artifacts(parent_id)}


@pytest.mark.parametrize("args, needle", [
    (["sweep.resume=sw"], "resuming a sweep needs -m"),
    (["-m", "seed=0,1", "sweep.resume=nowhere"], "sweep.resume=nowhere: no sweep to resume there"),
])
def test_bad_sweep_resume_exits_2_with_one_message(workdir: Path, args: list[str], needle: str) -> None:
    proc = run_rlrun([*args, *JOB, "logger=none"], workdir)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert not (workdir / "outputs").exists() and not (workdir / "nowhere" / "jobs").exists()


def test_optuna_sweeper_maximises_the_final_return(workdir: Path) -> None:
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the optuna extra is not installed")
    proc = run_rlrun(["-m", "hparams_search=dqn_cartpole_optuna", "hydra.sweeper.n_trials=2", *JOB,
                      "logger.mlflow.enabled=false", "hydra.sweep.dir=sw"], workdir, check=True)
    assert "2 of 2 jobs completed" in proc.stdout
    from omegaconf import OmegaConf

    best = OmegaConf.load(workdir / "sw" / "optimization_results.yaml")
    jobs = json.loads((workdir / "sw" / "sweep_summary.json").read_text())["jobs"]
    assert best.best_value == max(j["episode_return_mean"] for j in jobs)  # the objective is summary.json's
    assert all("algo.lr=" in " ".join(j["overrides"]) for j in jobs)
    assert len({" ".join(j["overrides"]) for j in jobs}) == 2  # two different trials


def test_optuna_search_goes_on_past_failed_trials(workdir: Path) -> None:
    """A trial whose job fails (here algo.gamma=1.5, out of its range) is a failed trial, not the end of the search:
    its job returns no objective (None; a NaN made hydra-optuna-sweeper 1.3.0's recovery raise "Values cannot be
    specified when state is TrialState.FAIL" and end the search as an unexpected error). Seeded sampler: trials 0
    and 1 draw gamma 1.5, trial 2 draws 0.99; the best value is trial 2's return."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the optuna extra is not installed")
    proc = run_rlrun(["-m", "hparams_search=dqn_cartpole_optuna", "hydra.sweeper.n_trials=3",
                      "algo.gamma=choice(0.99,1.5)", "stop.env_steps=300", "logger.mlflow.enabled=false",
                      "logger.console.enabled=false", "hydra.sweep.dir=sw"], workdir)
    assert "unexpected error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "1 of 3 jobs completed" in proc.stdout, proc.stdout
    from omegaconf import OmegaConf

    best = OmegaConf.load(workdir / "sw" / "optimization_results.yaml")
    jobs = json.loads((workdir / "sw" / "sweep_summary.json").read_text())["jobs"]
    completed = [j for j in jobs if j["status"] == "completed"]
    assert len(completed) == 1 and best.best_value == completed[0]["episode_return_mean"]
    assert best.best_params["algo.gamma"] == 0.99


def test_a_sweep_json_neither_chooses_runs_to_reopen_nor_records_credentials(tmp_path: Path) -> None:
    """sweep.resume reads sweep.json, which may come from elsewhere: a parent run id recorded with another store is
    not reopened in the user's (where it would mark that run's running children KILLED), and the URI it records
    has no credentials."""
    from mlflow.tracking import MlflowClient

    from rlrun.app.sweep import _open_parent_run
    from rlrun.config import compose

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=store)
    experiment = client.create_experiment("rlrun")
    victim = client.create_run(experiment).info.run_id
    child = client.create_run(experiment, tags={"mlflow.parentRunId": victim}).info.run_id
    config = compose([f"logger.mlflow.tracking_uri={store}"])
    info = _open_parent_run(config, tmp_path / "sweep", [], {"tracking_uri": "http://127.0.0.1:9/", "parent_run_id":
                                                              victim})
    assert info["parent_run_id"] not in (None, victim)
    assert client.get_run(child).info.status == "RUNNING"

    config = compose(["logger.mlflow.tracking_uri=http://alice:s3cret@127.0.0.1:9", "logger.mlflow.probe_timeout_s=1"])
    info = _open_parent_run(config, tmp_path / "sweep", [], {})
    assert info["parent_run_id"] is None and "s3cret" not in json.dumps(info)
    assert info["tracking_uri"] == "http://127.0.0.1:9"


def test_a_sweep_records_no_credentials_of_its_tracking_uri(workdir: Path) -> None:
    """Two jobs with user:password@ in logger.mlflow.tracking_uri (unreachable: each job and the parent run fail
    over or go without): the password is in no file under the working directory (sweep.json, jobs/*.json, the
    summaries, multirun.yaml, each run directory) and in no output."""
    uri = "postgresql://alice:s3cret@127.0.0.1:1/mlflow"
    proc = run_rlrun(["-m", "seed=0,1", *JOB, f"logger.mlflow.tracking_uri={uri}", "hydra.sweep.dir=sw"], workdir,
                     timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "s3cret" not in proc.stdout + proc.stderr
    assert (workdir / "sw" / "multirun.yaml").is_file() and (workdir / "sw" / "sweep.json").is_file()
    leaked = [str(p) for p in workdir.rglob("*") if p.is_file() and b"s3cret" in p.read_bytes()]
    assert leaked == []
