"""``rlrun resume=<run dir>``: "train 2N env steps" equals "train N, stop, resume, train N" -- and equals "train,
get killed with SIGKILL after a checkpoint, resume" -- bitwise, on the CPU with executor=local: every tensor of
the algorithm state (Q-network, target network, Adam moments and step counts, replay storage and its generator,
epsilon schedule, target-sync counter), the run loop's counters and return window, the global RNGs and the env
copies' state. Also: the resumed run appends to the same TensorBoard log and MLflow run; an incompatible override
and a truncated checkpoint are refused with one clear line, leaving the run directory untouched; SIGINT stops a
run after its current iteration with a consistent final checkpoint.

N = 400 env steps of CartPole (100 iterations of 4 agent steps), a 32-unit network, learning from env step 100:
about 1,200 gradient steps in all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import RLRUN, assert_same, run_rlrun
from crafted import crafted_copy, recording_server

from rlrun import checkpoint as ckpt

N = 400
COMMON = ["algo.learning_starts=100", "algo.hidden_sizes=[32]", "algo.batch_size=32", "algo.buffer_size=5000",
          "algo.target_update_every=50", "algo.tau=1.0", "algo.epsilon_decay_steps=600", "export.formats=[]",
          "algo.rollout_steps=4", "algo.train_every=1",
          "logger.console.interval_s=0.2"]


def final_state(run_dir: Path) -> dict:
    return ckpt.load_checkpoint(ckpt.checkpoint_path(run_dir))




def without_unseeded_spaces(executor_state: dict) -> dict:
    """The executor state less the generators of the gymnasium spaces that nobody seeds (each env's own action and
    observation spaces: gymnasium seeds them from OS entropy on first use, so they differ between any two runs; no
    rlrun code draws from them). The vector env's action space, which the worker seeds, stays."""
    def strip(layer: dict, keep: tuple[str, ...] = ()) -> dict:
        return {**layer, "spaces": {k: v for k, v in layer["spaces"].items() if k in keep}}

    out = []
    for ws in executor_state["worker_sets"]:
        workers = []
        for w in ws:
            envs = w["envs"]
            workers.append({**w, "envs": {"vector": strip(envs["vector"], ("action_space",)),
                                          "envs": [[strip(layer) for layer in e] for e in envs["envs"]]}})
        out.append(workers)
    return {"worker_sets": out}


def assert_same_training_state(a: dict, b: dict) -> None:
    assert_same(a["algo"], b["algo"], "algo")
    assert a["algo"]["gradient_steps"] > 500  # the comparison covers real learning
    loop_a = {k: v for k, v in a["loop"].items() if k != "wall_time_s"}
    loop_b = {k: v for k, v in b["loop"].items() if k != "wall_time_s"}
    assert_same(loop_a, loop_b, "loop")
    assert_same(a["rng"], b["rng"], "rng")
    assert_same(without_unseeded_spaces(a["executor"]), without_unseeded_spaces(b["executor"]), "executor")


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:
    """The uninterrupted run: 2N env steps (in this process, to save a process start; the CLI runs the same
    run_experiment, and the comparisons below show that both give the same numbers)."""
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    run_dir = tmp_path_factory.mktemp("reference") / "run"
    run_experiment(compose([*COMMON, "logger=none", f"stop.env_steps={2 * N}"]), run_dir)
    return run_dir


@pytest.fixture(scope="module")
def reference(reference_run: Path) -> dict:
    return final_state(reference_run)


def test_stop_then_resume_equals_an_uninterrupted_run(reference: dict, tmp_path: Path) -> None:
    """Train N (TensorBoard + MLflow on), stop; resume=<run dir> stop.env_steps=2N. Same numbers as the reference;
    same run directory, TensorBoard log directory and MLflow run, with steps continuing past N. (In this process,
    through run_experiment with the command line's overrides; the SIGKILL test below goes through the CLI.)"""
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    run_dir = tmp_path / "run"
    logger = [f"logger.mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}", "logger.console.enabled=false"]
    first = run_experiment(compose([*COMMON, *logger, f"stop.env_steps={N}"]), run_dir)
    assert first["env_steps"] == N
    overrides = [f"resume={run_dir}", f"stop.env_steps={2 * N}", logger[0]]  # the same store: the same MLflow run
    summary = run_experiment(compose(overrides), tmp_path / "unused", overrides=overrides)
    assert not (tmp_path / "unused").exists()  # a resumed run writes into its own run directory
    assert_same_training_state(final_state(run_dir), reference)

    assert summary["env_steps"] == 2 * N and summary["run_dir"] == str(run_dir.resolve())
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 2 * N
    assert summary["mlflow_run_id"] == first["mlflow_run_id"] is not None
    assert summary["wall_time_s"] > first["wall_time_s"]  # the training time continues

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    steps = [e.step for e in acc.Scalars("counters/env_steps")]
    assert steps == sorted(steps) and steps[-1] == 2 * N and any(s <= N for s in steps)
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) >= 2  # one log dir, two writers

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    history = [m.step for m in client.get_metric_history(summary["mlflow_run_id"], "counters/env_steps")]
    assert min(history) <= N and max(history) == 2 * N
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.params["stop.env_steps"] == str(N)  # params are not rewritten
    assert len(client.search_runs([run.info.experiment_id])) == 1


def test_a_checkpoint_does_not_choose_where_a_resumed_run_sends_mlflow_data(
        reference_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint whose saved config and MLflow state name another tracking server (a listener on 127.0.0.1),
    with the user's token in the environment: the resumed run sends nothing there; its MLflow data goes to the
    store the user's command line configures (here the default, the working directory's mlflow.db), as a new
    MLflow run (the saved run id belongs to the other store)."""
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "secret-token-123")
    with recording_server() as (url, requests):
        crafted = crafted_copy(reference_run, tmp_path / "crafted", {"tracking_uri": url, "run_id": "0" * 32},
                               logger={"mlflow": {"enabled": True, "tracking_uri": url, "run_id": "1" * 32}})
        overrides = [f"resume={crafted}", f"stop.env_steps={2 * N + 4}", "logger.console.enabled=false"]
        summary = run_experiment(compose(overrides), tmp_path / "unused", overrides=overrides)
    assert requests == []
    assert summary["env_steps"] == 2 * N + 4 and summary["mlflow_run_id"] not in (None, "0" * 32, "1" * 32)

    from mlflow.tracking import MlflowClient

    run = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"


def test_sigkill_after_a_checkpoint_then_resume_equals_an_uninterrupted_run(reference: dict, workdir: Path) -> None:
    """Checkpoints every 40 env steps; the process is killed with SIGKILL (no cleanup at all) once a checkpoint
    past the start of learning exists; resume=<run dir> continues from it to 2N: same numbers as the reference."""
    run_dir = workdir / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.Popen([RLRUN, *COMMON, "logger=none", f"stop.env_steps={2 * N}",
                             "checkpoint.interval_env_steps=40", f"hydra.run.dir={run_dir}"],
                            cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    path = ckpt.checkpoint_path(run_dir)
    killed_at = None
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if path.exists():
                steps = ckpt.load_checkpoint(path)["loop"]["env_steps"]
                if steps >= 200:
                    proc.send_signal(signal.SIGKILL)
                    killed_at = steps
                    break
            time.sleep(0.01)
    finally:
        if proc.poll() is None and killed_at is None:
            proc.kill()
        proc.wait(timeout=30)
    assert killed_at is not None and proc.returncode == -signal.SIGKILL, (
        f"the run ended before it could be killed (exit {proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
    assert not (run_dir / "summary.json").exists()  # it really died without cleaning up
    saved = ckpt.load_checkpoint(path)["loop"]["env_steps"]
    assert killed_at <= saved < 2 * N

    out = run_rlrun([f"resume={run_dir}"], workdir, check=True)
    assert f"resumed at env step {saved}" in out.stdout
    assert_same_training_state(final_state(run_dir), reference)
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 2 * N


def test_sigint_stops_after_the_iteration_with_a_consistent_checkpoint(tmp_path: Path) -> None:
    """The first SIGINT ends the run after the current iteration (KeyboardInterrupt out of run_experiment, which
    the CLI turns into exit 130), with stop_reason interrupted and a final checkpoint whose counters agree with
    each other (the algorithm's env steps = the run loop's). The signal is sent to this process once the run has
    written its first checkpoint, so the run's handler is in place."""
    import threading

    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    run_dir = tmp_path / "run"
    path = ckpt.checkpoint_path(run_dir)

    def interrupt() -> None:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=interrupt)
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_experiment(compose([*COMMON, "logger=none", "stop.env_steps=1000000",
                                    "checkpoint.interval_env_steps=40"]), run_dir)
    finally:
        thread.join()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted" and 40 <= summary["env_steps"] < 1000000
    state = final_state(run_dir)
    assert state["loop"]["env_steps"] == state["algo"]["env_steps"] == summary["env_steps"]


def snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(directory)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture
def finished_run(reference_run: Path, tmp_path: Path) -> Path:
    """A copy of a finished run, to resume with bad input."""
    shutil.copytree(reference_run, tmp_path / "copy")
    return tmp_path / "copy"


def test_an_incompatible_override_is_refused(finished_run: Path, tmp_path: Path) -> None:
    """(Each kind of incompatible key is tested on resume_config in tests/test_checkpoint.py.)"""
    before = snapshot(finished_run)
    proc = run_rlrun([f"resume={finished_run}", "algo.lr=0.5", "stop.env_steps=2000"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlrun: error: resume: "), proc.stderr
    assert "algo.lr=0.5 (the run has algo.lr=0.001)" in lines[0] and "start a new run" in lines[0]
    assert snapshot(finished_run) == before


def test_a_truncated_checkpoint_is_refused_and_the_run_dir_left_untouched(finished_run: Path,
                                                                          tmp_path: Path) -> None:
    """(Tampered and other damaged files: tests/test_checkpoint.py; the CLI reads them through the same loader.)"""
    path = ckpt.checkpoint_path(finished_run)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    before = snapshot(finished_run)
    proc = run_rlrun([f"resume={finished_run}", "stop.env_steps=2000"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "truncated or corrupt checkpoint" in lines[0] and str(path) in lines[0], proc.stderr
    assert snapshot(finished_run) == before


def test_resuming_a_run_that_reached_its_stop_condition_trains_no_further(finished_run: Path) -> None:
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    path = ckpt.checkpoint_path(finished_run)
    before = path.read_bytes()
    overrides = [f"resume={finished_run}", "logger=none"]
    summary = run_experiment(compose(overrides), finished_run, overrides=overrides)
    assert summary["env_steps"] == 2 * N and summary["stop_reason"] == "env_steps"
    assert path.read_bytes() == before  # no extra iteration, no new checkpoint


def test_a_run_stopped_by_its_return_target_names_the_key_and_trains_on_once_lifted(tmp_path: Path,
                                                                                     caplog: pytest.LogCaptureFixture
                                                                                     ) -> None:
    """A CartPole run stopped by stop.episode_return_mean (a target any 2-episode window reaches): resumed with a
    larger stop.env_steps alone it trains no further, and the warning names the key that fired and how to lift it;
    resumed as Getting started shows (the target lifted, a budget given) it trains on to that budget."""
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    run_dir = tmp_path / "run"
    first = ["logger=none", "stop.env_steps=20000", "stop.episode_return_mean=5", "return_window=2",
             "export.formats=[]"]
    done = run_experiment(compose(first), run_dir)
    assert done["stop_reason"] == "episode_return_mean"
    steps = done["env_steps"]
    more = [f"resume={run_dir}", "logger=none", f"stop.env_steps={steps + 300}"]
    with caplog.at_level(logging.WARNING, logger="rlrun"):
        again = run_experiment(compose(more), run_dir, overrides=more)
    assert again["env_steps"] == steps
    assert (f"already reached its stop condition stop.episode_return_mean at env step {steps}; to train on, set "
            f"stop.episode_return_mean=null (or a higher target) and a budget, e.g. stop.env_steps={2 * steps}"
            in caplog.text)
    lifted = [*more, "stop.episode_return_mean=null"]
    on = run_experiment(compose(lifted), run_dir, overrides=lifted)
    assert on["stop_reason"] == "env_steps" and on["env_steps"] >= steps + 300


LOCK_HOLDER = """
import sys
from pathlib import Path
from rlrun.app.run_lock import run_directory_lock
with run_directory_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.readline()  # holds the lock until the test writes a line or kills it
"""


def hold_lock(run_dir: Path) -> subprocess.Popen:
    """A live process holding ``run_dir``'s lock; returns once it has it (it says so on stdout)."""
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_second_writer_of_a_run_directory_gets_one_line_and_exit_2(finished_run: Path, tmp_path: Path) -> None:
    """While a live process holds the run directory (a run still writing it), resume= and a new run into it are
    refused with one line naming the holder, and nothing in the directory changes; once it ends, resume runs."""
    import socket

    before = snapshot(finished_run)
    holder = hold_lock(finished_run)
    try:
        for args in ([f"resume={finished_run}", "stop.env_steps=2000"],
                     [f"hydra.run.dir={finished_run}", "logger=none", "stop.env_steps=100"]):
            proc = run_rlrun(args, tmp_path)
            assert proc.returncode == 2, proc.stderr
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"rlrun: error: {finished_run} is being written by "
                                                           f"process {holder.pid} on {socket.gethostname()}")
            assert "one run writes a run directory at a time" in lines[0]
        # the run's files (the lock file is the holder's, Hydra's .hydra/ and cli.log the refused command's)
        ours = (".hydra", "cli.log", "run.lock")
        assert {k: v for k, v in snapshot(finished_run).items() if not k.startswith(ours)} == \
            {k: v for k, v in before.items() if not k.startswith(ours)}
    finally:
        holder.communicate("\n", timeout=30)
    proc = run_rlrun([f"resume={finished_run}", f"stop.env_steps={2 * N + 40}", "logger=none"], tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_a_killed_holders_lock_file_blocks_nobody(tmp_path: Path) -> None:
    """The holder SIGKILLed: its lock file stays (naming it), and the next run takes the directory."""
    from rlrun.app.run_lock import LOCK_FILE, run_directory_lock

    holder = hold_lock(tmp_path)
    holder.kill()
    holder.wait(timeout=30)
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == holder.pid
    with run_directory_lock(tmp_path):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()


@pytest.fixture
def small_disk(tmp_path: Path) -> Path:
    """A 400 KiB tmpfs (a real filesystem that fills up), unmounted afterwards; skipped where mounting is not
    allowed (not root, or no tmpfs)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_stops_the_run_with_one_line_and_the_last_checkpoint_resumes(small_disk: Path,
                                                                                 tmp_path: Path) -> None:
    """DQN on CartPole into a 400 KiB disk, a checkpoint every 1,000 env steps while its replay grows: the disk
    fills at a checkpoint; the run ends with one line naming the checkpoint, the disk and how to resume (exit 2),
    the previous checkpoint whole and no .tmp left; with room again, resume trains on from it."""
    run_dir = small_disk / "run"
    args = [f"hydra.run.dir={run_dir}", "logger=none", "stop.env_steps=20000", "checkpoint.interval_env_steps=1000",
            "algo.buffer_size=20000", "export.formats=[]"]
    proc = run_rlrun(args, tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rlrun: error: cannot write the checkpoint {run_dir}/checkpoints/"
                                                   f"latest.pt: No space left on device"), proc.stderr
    assert lines[0].endswith(f"free some space, then rlrun resume={run_dir}")
    kept = ckpt.load_checkpoint(ckpt.checkpoint_path(run_dir))  # whole and loadable
    steps = kept["loop"]["env_steps"]
    assert steps >= 1000 and f"(env step {steps})" in lines[0]
    assert not list(run_dir.rglob("*.tmp"))
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)
    proc = run_rlrun([f"resume={run_dir}", f"stop.env_steps={steps + 1000}"], tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] >= steps + 1000


def test_a_disk_filled_by_the_trackers_stops_the_run_with_a_line_not_a_traceback(small_disk: Path,
                                                                                 tmp_path: Path) -> None:
    """The MLflow store and the run directory on one small disk that MLflow's metrics and TensorBoard's events fill
    before any checkpoint is due: MLflow fails over to its fallback store and then turns off (a warning line each),
    and the run stops at TensorBoard's failed write with one error line naming the disk, exit 2, no traceback
    (neither the run's nor TensorBoard's writer thread's)."""
    run_dir = small_disk / "run"
    args = [f"hydra.run.dir={run_dir}", f"logger.mlflow.tracking_uri=sqlite:///{small_disk / 'mlflow.db'}",
            "stop.env_steps=20000", "checkpoint.interval_env_steps=20000", "logger.report_interval_s=0",
            "logger.mlflow.flush_interval_s=0", "export.formats=[]"]
    subprocess.run(["mount", "-o", "remount,size=1200k", str(small_disk)], check=True)  # room for MLflow's tables
    proc = run_rlrun(args, tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception in thread" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert all(line.startswith("rlrun: warning: MLflow: ") for line in lines[:-1]), proc.stderr
    assert lines[-1].startswith(f"rlrun: error: cannot write to the run directory {run_dir}: No space left on "
                                f"device"), proc.stderr
    assert lines[-1].endswith(f"free some space, then rlrun resume={run_dir}")


def test_the_saved_config_is_data_no_interpolation_resolves(reference_run: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint whose saved config holds ${oc.env:...} (a saved config is resolved when written, so someone
    put it there): the resumed config keeps it as text, and the params a resumed run logs hold no secret."""
    from rlrun.app.run import flatten_config
    from rlrun.config import compose

    monkeypatch.setenv("RLRUN_TEST_SECRET", "hunter2")
    crafted = crafted_copy(reference_run, tmp_path / "crafted",
                           logger={"mlflow": {"tags": {"note": "${oc.env:RLRUN_TEST_SECRET}"}}})
    state = ckpt.load_checkpoint(ckpt.checkpoint_path(crafted))
    overrides = [f"resume={crafted}", f"stop.env_steps={2 * N + 4}"]
    params = flatten_config(ckpt.resume_config(state["config"], compose(overrides), overrides))
    assert params["logger.mlflow.tags.note"] == "${oc.env:RLRUN_TEST_SECRET}"
    assert not any("hunter2" in str(v) for v in params.values())


def test_a_module_import_the_saved_config_names_needs_the_user(reference_run: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint whose saved config names env.id=<module>:CartPole-v1 (importing the module runs its code): resume
    refuses it with one line naming the module and the setting, and nothing is imported; naming the same env.id on
    the command line is the user's choice, and is accepted."""
    from rlrun.config import compose
    from rlrun.errors import ConfigError

    marker = tmp_path / "imported"
    (tmp_path / "evil_env.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    crafted = crafted_copy(reference_run, tmp_path / "crafted", env={"id": "evil_env:CartPole-v1"})
    state = ckpt.load_checkpoint(ckpt.checkpoint_path(crafted))
    overrides = [f"resume={crafted}", f"stop.env_steps={2 * N + 4}"]
    with pytest.raises(ConfigError, match=r"asks to import evil_env \(env\.id=evil_env:CartPole-v1\).*"
                                          r"'env\.id=evil_env:CartPole-v1'"):
        ckpt.resume_config(state["config"], compose(overrides), overrides)
    named = [*overrides, "env.id=evil_env:CartPole-v1"]
    assert ckpt.resume_config(state["config"], compose(named), named).env.id == "evil_env:CartPole-v1"
    assert not marker.exists()
