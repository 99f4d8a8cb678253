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


def test_a_cluster_started_with_ray_start_is_joined_only_when_asked(workdir: Path, tmp_path: Path) -> None:
    """With a `ray start --head` cluster on the machine, executor=ray without an address starts a cluster of its
    own (Ray's ray.init() would join that one and refuse num_cpus: "When connecting to an existing cluster,
    num_cpus and num_gpus must not be provided"), executor.address=auto joins it, and so does
    executor.address=ray://127.0.0.1:<client port> through Ray Client (the driver on no node of the cluster: its
    rollouts come through the object store). The cluster is made as a user makes one: `ray start --head`, then a
    second node with `ray start --address=<head>`, each run from its own directory (a Ray-launched sweep's jobs
    must still write under the sweep directory the driver named, relative to the driver's directory)."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    port, client_port = ports
    # Ray 2.60's token authentication, off as its docs say; and no 30 s drain on SIGTERM (benchmarks/ray_head.py)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    ray_cli = str(Path(sys.executable).parent / "ray")
    head_dir, node_dir = tmp_path / "head", tmp_path / "node"
    head_dir.mkdir()
    node_dir.mkdir()
    head = subprocess.Popen([ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                             f"--ray-client-server-port={client_port}", "--block"], env=env, cwd=head_dir,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    node = None

    def wait_for(cpus: str) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            probe = subprocess.run([ray_cli, "status", f"--address=127.0.0.1:{port}"], env=env, capture_output=True,
                                   text=True)
            if probe.returncode == 0 and f"/{cpus} CPU" in probe.stdout:
                return
            time.sleep(1)
        raise AssertionError(f"the ray start cluster did not reach {cpus} CPUs in 90 s")

    try:
        wait_for("2.0")
        node = subprocess.Popen([ray_cli, "start", f"--address=127.0.0.1:{port}", "--num-cpus=1", "--block"],
                                env=env, cwd=node_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        wait_for("3.0")
        common = ["algo=ppo", "executor=ray", "executor.num_workers=1", "stop.env_steps=64", "algo.rollout_steps=16",
                  "logger.mlflow.enabled=false", "export.formats=[]"]
        own = run_rlrun([*common, "executor.num_cpus=1", "hydra.run.dir=own"], workdir, env=env)
        assert own.returncode == 0, own.stderr
        joined = run_rlrun([*common, "executor.address=auto", "hydra.run.dir=joined"], workdir,
                           env={**env, "RAY_ADDRESS": f"127.0.0.1:{port}"})
        assert joined.returncode == 0, joined.stderr
        client = run_rlrun([*common, f"executor.address=ray://127.0.0.1:{client_port}", "hydra.run.dir=client"],
                           workdir, env=env)
        assert client.returncode == 0, client.stderr
        for name in ("own", "joined", "client"):
            assert json.loads((workdir / name / "summary.json").read_text())["stop_reason"] == "env_steps"

        # A sweep whose jobs run on that cluster (hydra-ray-launcher; tests/app/test_launchers.py has the rest).
        import importlib.util

        if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is not None:
            sweep = run_rlrun(["-m", "hydra/launcher=ray", f"hydra.launcher.ray.init.address=127.0.0.1:{port}",
                               "seed=0,1", "stop.env_steps=64", "algo.learning_starts=32", "logger=none",
                               "logger.console.enabled=false", "hydra.sweep.dir=sw"], workdir, env=env, timeout=300)
            assert sweep.returncode == 0 and "2 of 2 jobs completed" in sweep.stdout, sweep.stdout + sweep.stderr
            # Each job wrote under the driver's sw/ (made absolute before the jobs left it), none under a node's
            # working directory.
            assert len(list((workdir / "sw").glob("*/summary.json"))) == 2
            assert not list(head_dir.rglob("summary.json")) and not list(node_dir.rglob("summary.json"))
            assert f"'address': '127.0.0.1:{port}'" in sweep.stdout + sweep.stderr
            assert "Started a local Ray instance" not in sweep.stdout + sweep.stderr

        # Last (it changes the cluster's record): a cluster of other Ray/Python versions than this process's. Its
        # record says Ray 2.9.3 on Python 3.10.13, as a head started from another environment writes it; Ray's
        # own check refuses the driver, and rlrun says so in one line before the run directory exists.
        retag = ("import json, ray; from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_put; "
                 f"ray.init(address='127.0.0.1:{port}', logging_level='ERROR'); "
                 "meta = json.loads(_internal_kv_get(b'CLUSTER_METADATA', namespace=b'cluster')); "
                 "meta.update(ray_version='2.9.3', python_version='3.10.13'); "
                 "_internal_kv_put(b'CLUSTER_METADATA', json.dumps(meta), overwrite=True, namespace=b'cluster')")
        subprocess.run([sys.executable, "-c", retag], env=env, check=True, capture_output=True, timeout=120)
        other = run_rlrun([*common, f"executor.address=127.0.0.1:{port}", "hydra.run.dir=other"], workdir, env=env)
        lines = [ln for ln in other.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
        assert other.returncode == 2 and len(lines) == 1, other.stderr
        assert "the cluster runs Ray 2.9.3 on Python 3.10.13 but this process has Ray " in lines[0], lines
        assert "install ray==2.9.3 in a Python 3.10.13 environment" in lines[0]
        assert not (workdir / "other").exists()
    finally:
        for process in (node, head):  # --block: each node's processes end with it
            if process is not None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=60)


def test_an_address_where_no_cluster_answers_is_bad_input_said_before_the_run_directory(workdir: Path) -> None:
    """Ray's own connect waited minutes ("Failed to connect to GCS ... within 5 seconds", then a timeout) with the
    run directory already written; the probe says it in one line, exit 2, and nothing is written."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for address, needle in ((f"127.0.0.1:{port}", f"no Ray cluster answers at 127.0.0.1:{port}"),
                            ("localhost", "not an address; write host:port")):
        proc = run_rlrun(["algo=ppo", "executor=ray", f"executor.address={address}", "stop.env_steps=10"], workdir,
                         timeout=60)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr
        assert not (workdir / "outputs").exists() and not (workdir / "mlflow.db").exists()


def test_apex_survives_losing_the_node_of_its_replay_shards(workdir: Path) -> None:
    """The fault as a user met it: a `ray start` head (the driver's node) and a second node, each its own raylet;
    Ape-X with executor.placement=spread puts its replay shards on the second node, which is then SIGKILLed
    (no drain: the GCS still lists it as alive for seconds). The shards come back empty on the head (a replacement
    pinned to the dying node was cancelled before it ran, and the run ended with "unexpected error"), the lost
    worker too, and the run ends at its stop condition with exit 0."""
    import subprocess
    import time

    from benchmarks.peers.processes import process_tree
    from benchmarks.ray_head import ENV, RLRUN, kill_node, ray_head, start_node, stop_run, wait_for_cpus

    with ray_head(2) as (address, _):
        node = start_node(address, 2)
        proc = None
        try:
            wait_for_cpus(address, 4)
            proc = subprocess.Popen([RLRUN, "algo=apex", "executor=ray", f"executor.address={address}",
                                     "executor.placement=spread", "executor.num_workers=2", "stop.wall_time_s=30",
                                     "stop.env_steps=100000000", "stop.episode_return_mean=null", "logger=none",
                                     "export.formats=[]", "hydra.run.dir=run"], env=ENV, cwd=workdir,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            deadline = time.monotonic() + 120
            while not any(Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"ray::ReplayShard")
                          for p in process_tree(node.pid) if Path(f"/proc/{p}/cmdline").exists()):
                assert proc.poll() is None and time.monotonic() < deadline, "no replay shard on the second node"
                time.sleep(0.5)
            kill_node(node)
            _, stderr = proc.communicate(timeout=300)
        finally:
            if proc is not None:
                stop_run(proc)
            kill_node(node)
    assert proc.returncode == 0, stderr
    summary = json.loads((workdir / "run" / "summary.json").read_text())
    assert summary["stop_reason"] == "wall_time_s" and summary["error"] is None
    log = (workdir / "run" / "cli.log").read_text()
    assert "; starting an empty one (restart 1)" in log and "Traceback" not in log + stderr
