"""The CLI, run as a subprocess exactly as a user runs it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import QUICK, only_summary, run_rlrun


def test_short_run_writes_summary_tensorboard_and_mlflow(workdir: Path) -> None:
    proc = run_rlrun([*QUICK, "seed=3", "executor=local", "device=cpu", "algo=dqn", "env=cartpole", "algo.lr=0.00123"],
                     workdir, check=True)
    summary = only_summary(workdir / "outputs")
    run_dir = Path(summary["run_dir"])
    assert summary["env_steps"] >= 300 and summary["stop_reason"] == "env_steps"
    assert summary["frames"] == summary["env_steps"]  # CartPole: frame skip 1
    # CartPole pays 1 per step, so a return is its episode's length; while fewer than return_window (100) episodes
    # have ended, the mean is over all of them, and their steps are some of the env steps taken.
    assert 0 < summary["episodes"] < 100
    assert summary["episodes"] * summary["episode_return_mean"] <= summary["env_steps"]
    assert summary["frames_per_second"] > 0 and summary["wall_time_s"] > 0
    assert summary["seed"] == 3 and summary["algo"] == "dqn" and summary["env"] == "CartPole-v1"
    assert (run_dir / ".hydra" / "config.yaml").exists()
    assert Path(summary["checkpoint"]).exists()
    assert "done (env_steps)" in proc.stdout

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"counters/env_steps", "perf/frames_per_s", "episode/return_mean", "loss/td",
            "time/env_step_s", "time/inference_s", "time/learn_s"} <= tags
    steps = [e.step for e in acc.Scalars("counters/env_steps")]
    assert steps[-1] == summary["env_steps"]
    returns = {e.step: e.value for e in acc.Scalars("episode/return_mean")}
    lengths = {e.step: e.value for e in acc.Scalars("episode/length_mean")}
    assert returns and returns == pytest.approx(lengths)

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{workdir / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["rlrun"], output_format="list")
    assert [r.info.run_id for r in runs] == [summary["mlflow_run_id"]]
    run = runs[0]
    assert run.info.status == "FINISHED"
    # named by its overrides too; the default name shows the algo, env and seed already
    assert run.info.run_name == ("dqn-CartPole-v1-seed3 stop.env_steps=300 algo.learning_starts=100 executor=local "
                                 "device=cpu algo.lr=0.00123")
    assert run.data.params["algo.lr"] == "0.00123"  # the command line's, not the default 0.001
    assert run.data.params["seed"] == "3" and run.data.params["env.id"] == "CartPole-v1"
    assert run.data.metrics["counters/env_steps"] == summary["env_steps"]
    assert "episode/return_mean" in run.data.metrics and "loss/td" in run.data.metrics


def test_logger_none_writes_only_summary(workdir: Path) -> None:
    run_rlrun([*QUICK, "logger=none"], workdir, check=True)
    summary = only_summary(workdir / "outputs")
    assert summary["mlflow_run_id"] is None
    assert not (Path(summary["run_dir"]) / "tensorboard").exists()
    assert not (workdir / "mlflow.db").exists()


def test_non_tty_progress_is_periodic_not_flooding(workdir: Path) -> None:
    proc = run_rlrun(["stop.env_steps=1500", "logger=none", "logger.console.interval_s=3600"], workdir, check=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("env_steps ")]
    assert len(lines) == 1  # the first report only; the next is an hour away
    assert "\r" not in proc.stdout and "\x1b[" not in proc.stdout


@pytest.mark.parametrize(
    "override, needle",
    [
        ("algo.lr=abc", "algo.lr"),
        ("+algo.nope=1", "algo.nope: unknown key"),
        ("env=nonexistent", "Available options in 'env'"),
        ("executor=nonexistent", "Available options in 'executor'"),
        ("stop.env_steps=-5", "stop.env_steps=-5: must be >= 1"),
        ("env.id=CartPol-v1", "Close matches: CartPole-v1"),
        ("env.id=Pendulum-v1", "needs a Discrete action space"),
        ("device=cuda", "CUDA is not available"),
        ("seed=[1", "cannot parse the override"),
        # a misspelt key: rlrun's message with the close matches at once, not Hydra's advice to add it with "+"
        ("algo.learning_rate=1e-3", "algo.learning_rate: unknown key for DQNConfig. Did you mean lr or"),
        ("evn=pong", "evn: unknown key for the run's config (rlrun --help lists the groups). Did you mean env?"),
        ("stop.env_step=9", "stop.env_step: unknown key for StopConfig. Did you mean env_steps or gradient_steps? "
                            "Valid keys: env_steps, wall_time_s, episode_return_mean, gradient_steps."),
        # an output folder that cannot be made (/proc takes no new folders, even for root)
        ("hydra.run.dir=/proc/rlrun-x", "hydra.run.dir=/proc/rlrun-x: cannot write the output there"),
    ],
)
def test_bad_input_exits_2_with_one_message(workdir: Path, override: str, needle: str) -> None:
    proc = run_rlrun([override, "logger=none"], workdir)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr and "Error executing job" not in proc.stderr
    assert "To append to your config" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not list(workdir.rglob("summary.json"))


@pytest.mark.parametrize("overrides, needle", [
    (["run_name=/../../../escaped"], "run_name='/../../../escaped': it would place the run directory outside"),
    (["run_name=../escaped"], "run_name='../escaped'"),
    (["algo=multiagent", "env=pettingzoo", "algo.policies={{{target}:{{algo:ppo}}}}",
      "algo.mapping={{agent_*:{target}}}"], "may hold only letters"),
    (["algo=multiagent", "env=pettingzoo", "algo.policies={{../escaped:{{algo:ppo}}}}",
      "algo.mapping={{agent_*:../escaped}}"], "'../escaped' may hold only"),
])
def test_names_that_become_paths_are_refused_before_anything_is_written(workdir: Path, overrides: list[str],
                                                                        needle: str) -> None:
    """run_name and policy ids become paths (outputs/<date>/<time>-<run_name>, export/<policy id>/): one that
    would leave the run directory is refused with one line, exit 2, and nothing is written anywhere."""
    target = workdir.parent / "outside"
    proc = run_rlrun([o.format(target=target) for o in overrides] + ["stop.env_steps=64", "logger=none"], workdir)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not target.exists() and not (workdir.parent / "escaped").exists() and not (workdir / "escaped").exists()
    assert not (workdir / "outputs").exists()


def test_stop_conditions_all_null_is_refused_before_anything_starts(workdir: Path) -> None:
    proc = run_rlrun(["stop.env_steps=null", "stop.episode_return_mean=null"], workdir)
    assert proc.returncode == 2 and "every stop condition is null" in proc.stderr
    assert not (workdir / "outputs").exists()


def test_hydra_verbose_shows_the_traceback(workdir: Path) -> None:
    proc = run_rlrun(["env.id=Pendulum-v1", "logger=none", "hydra.verbose=true"], workdir)
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "ConfigError" in proc.stderr


def test_help_and_cfg_job(workdir: Path) -> None:
    proc = run_rlrun(["--help"], workdir, check=True)
    assert re.search(r"^algo: .*\bdqn\b", proc.stdout, re.M) and re.search(r"^env: .*\bcartpole\b", proc.stdout, re.M)
    assert not re.search(r"^(schema/|algo_env/)", proc.stdout, re.M)  # composition internals are not choices
    sections = {part.split(" ==")[0]: part for part in proc.stdout.split("\n== ")[1:]}  # by heading
    groups = next(text for heading, text in sections.items() if heading.startswith("Groups: choose one option"))
    presets = next(text for heading, text in sections.items() if heading.startswith("Presets: applied for"))
    assert "\nalgo: " in groups and "algo_env:" not in groups and "hparams_search:" not in groups
    assert "\nalgo_env: " in presets and "ppo_cartpole" in presets
    proc = run_rlrun(["--cfg", "job", "algo.lr=0.01", "seed=7"], workdir, check=True)
    assert "lr: 0.01" in proc.stdout and "seed: 7" in proc.stdout
    assert not (workdir / "outputs").exists()


def test_multirun_two_jobs(workdir: Path) -> None:
    run_rlrun(["-m", "seed=0,1", *QUICK, "logger=none"], workdir, check=True)
    summaries = [json.loads(p.read_text()) for p in sorted((workdir / "multirun").rglob("summary.json"))]
    assert sorted(s["seed"] for s in summaries) == [0, 1]
    assert all(s["stop_reason"] == "env_steps" for s in summaries)


def test_user_config_dir_adds_options(workdir: Path, tmp_path: Path) -> None:
    conf = tmp_path / "myconf" / "algo"
    conf.mkdir(parents=True)
    (conf / "dqn_wide.yaml").write_text("defaults:\n  - dqn\n  - _self_\nhidden_sizes: [32]\nlearning_starts: 100\n")
    proc = run_rlrun(["--config-dir", str(tmp_path / "myconf"), "algo=dqn_wide", "--cfg", "job"], workdir, check=True)
    assert "hidden_sizes:\n  - 32" in proc.stdout and "name: dqn" in proc.stdout
    run_rlrun(["--config-dir", str(tmp_path / "myconf"), "algo=dqn_wide", "stop.env_steps=200", "logger=none"],
              workdir, check=True)
    assert only_summary(workdir / "outputs")["env_steps"] >= 200


def test_a_sweep_into_a_folder_that_cannot_be_made_exits_2(workdir: Path) -> None:
    proc = run_rlrun(["-m", "hydra.sweep.dir=/proc/rlrun-y", "seed=0,1", "logger=none"], workdir)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("rlrun: error: hydra.sweep.dir=/proc/rlrun-y: cannot write the output there (No "
                                   "such file or directory). Give a writable folder (hydra.sweep.dir=<path>) or run "
                                   "from a writable working directory.")



def test_the_run_log_holds_the_progress_and_mlflow_says_nothing_on_stderr(workdir: Path) -> None:
    """A first run (a new MLflow store): <run dir>/cli.log holds the progress lines the console showed, the
    console shows each once, and stderr is empty (MLflow's table-creation notes silenced)."""
    proc = run_rlrun(["stop.env_steps=300", "algo.learning_starts=100", "logger.console.interval_s=0.01"], workdir,
                     check=True)
    assert proc.stderr == ""
    shown = [ln for ln in proc.stdout.splitlines() if ln.startswith(("env_steps ", "done ("))]
    assert len(shown) >= 2 and sum(ln.startswith("done (") for ln in shown) == 1
    (log,) = workdir.rglob("cli.log")
    logged = [ln.split("[rlrun.progress][INFO] - ", 1)[1] for ln in log.read_text().splitlines()
              if "[rlrun.progress][INFO] - " in ln]
    assert logged == shown


@pytest.mark.parametrize("overrides, name", [
    ([], "ppo-CartPole-v1-seed0"),
    (["algo=ppo", "env=cartpole", "seed=0", "+algo.clip=0.1", "hydra.run.dir=x"],
     "ppo-CartPole-v1-seed0 algo.clip=0.1"),
    (["env.id=Acrobot-v1", "executor=ray", "~algo.clip", "logger.mlflow.tracking_uri=x", "checkpoint.keep_last=2"],
     "ppo-CartPole-v1-seed0 executor=ray ~algo.clip"),
    (["run_name=mine", "algo.lr=1"], "ppo-CartPole-v1-seed0"),  # the user's own name, as given
    ([f"algo.hidden_sizes=[{','.join(['64'] * 80)}]"], None),  # cut to MLflow's 250 characters
])
def test_the_tracking_name_adds_the_overrides_the_run_name_does_not_show(overrides: list[str], name: str | None):
    from rlrun.app.run import tracking_name

    got = tracking_name("ppo-CartPole-v1-seed0", overrides)
    assert got == name if name is not None else (len(got) == 250 and got.endswith("…"))
