"""Sweeps through Hydra's cluster launchers, run as a user runs them: ``hydra/launcher=ray`` (hydra-ray-launcher,
each job a Ray task on a cluster of the sweep's own, a job with ``executor=ray`` among them, an Optuna search
through it) and ``hydra/launcher=submitit_local`` (hydra-submitit-launcher: the Slurm launcher's local twin, each
job a process submitit starts). The sweep's MLflow parent/child runs, manifest and ``sweep.resume`` hold as with
joblib. Joining an existing cluster (``hydra.launcher.ray.init.address``) is tested beside the ``ray start`` head of
tests/execution/test_ray_cli.py. Skipped with the reason when the extra is not installed (the dev extra has both)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import QUICK, run_rlrun

JOB = [*QUICK, "logger.console.enabled=false"]
RAY_ENV = {"RAY_AUTH_MODE": "disabled"}


def mlflow_runs(workdir: Path) -> tuple[str, list]:
    """The sweep's parent run id and the children that name it as their parent."""
    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    parent = json.loads((workdir / "sw" / "sweep.json").read_text())["mlflow"]["parent_run_id"]
    runs = c.search_runs([c.get_experiment_by_name("rlrun").experiment_id])
    return parent, [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent]


def test_ray_launcher_runs_each_job_as_a_ray_task_and_a_job_may_use_executor_ray(workdir: Path) -> None:
    """Two jobs on a 4-CPU cluster of the sweep's own, one with executor=ray (its worker an actor on the sweep's
    cluster, beside the job's own task); then sweep.resume runs nothing again."""
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="the ray-launcher extra is not installed")
    args = ["-m", "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=4", "executor=local,ray",
            "executor.num_workers=1", *JOB, "hydra.sweep.dir=sw"]
    proc = run_rlrun(args, workdir, env=RAY_ENV, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Ray Launcher is launching 2 jobs" in proc.stdout + proc.stderr
    assert "2 of 2 jobs completed" in proc.stdout and "is validated against ConfigStore" not in proc.stderr
    jobs = json.loads((workdir / "sw" / "sweep_summary.json").read_text())["jobs"]
    assert [j["status"] for j in jobs] == ["completed", "completed"]
    assert all(j["pid"] != os.getpid() for j in jobs) and len({j["pid"] for j in jobs}) >= 1
    summaries = [json.loads((Path(j["run_dir"]) / "summary.json").read_text()) for j in jobs]
    assert [s["stop_reason"] for s in summaries] == ["env_steps", "env_steps"]
    parent, children = mlflow_runs(workdir)
    assert {r.info.run_id for r in children} == {j["mlflow_run_id"] for j in jobs}

    again = run_rlrun([*args, "sweep.resume=sw"], workdir, env=RAY_ENV, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads((workdir / "sw" / "sweep.json").read_text())["invocation"] == 2
    assert [j["attempts"] for j in (json.loads(p.read_text()) for p in sorted((workdir / "sw" / "jobs").glob("*")))] \
        == [1, 1]  # completed jobs are skipped: no second attempt
    assert {r.info.run_id for r in mlflow_runs(workdir)[1]} == {j["mlflow_run_id"] for j in jobs}


def test_optuna_search_runs_its_trials_through_the_ray_launcher(workdir: Path) -> None:
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="the ray-launcher extra is not installed")
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the optuna extra is not installed")
    proc = run_rlrun(["-m", "hparams_search=dqn_cartpole_optuna", "hydra.sweeper.n_trials=2",
                      "hydra.sweeper.n_jobs=2", "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2", *JOB,
                      "logger.mlflow.enabled=false", "hydra.sweep.dir=sw"], workdir, env=RAY_ENV, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Ray Launcher is launching 2 jobs" in proc.stdout + proc.stderr and "2 of 2 jobs completed" in proc.stdout
    from omegaconf import OmegaConf

    best = OmegaConf.load(workdir / "sw" / "optimization_results.yaml")
    jobs = json.loads((workdir / "sw" / "sweep_summary.json").read_text())["jobs"]
    assert best.best_value == max(j["episode_return_mean"] for j in jobs)


def test_submitit_local_launcher_runs_each_job_in_a_process_of_its_own(workdir: Path) -> None:
    """hydra/launcher=submitit_local: what hydra/launcher=submitit_slurm does on a Slurm cluster, on this machine."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the submitit extra is not installed")
    proc = run_rlrun(["-m", "hydra/launcher=submitit_local", "seed=0,1", *JOB, "hydra.sweep.dir=sw"], workdir,
                     timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 of 2 jobs completed" in proc.stdout
    jobs = json.loads((workdir / "sw" / "sweep_summary.json").read_text())["jobs"]
    assert len({j["pid"] for j in jobs}) == 2  # one process per job
    assert (workdir / "sw" / ".submitit").is_dir()  # submitit's own job records
    parent, children = mlflow_runs(workdir)
    assert sorted(r.data.tags["rlrun.seed"] for r in children) == ["0", "1"]
