"""A ``ray start --head`` cluster of the benchmark's own on this machine, for benchmarks that watch a run from outside
(soak, chaos): the run joins it with ``executor.address``; the cluster ends with the ``with`` block (its processes
are one process group: ``--block``). :func:`start_node` adds a node as a user adds one (``ray start
--address=<head>``, its own raylet and object store), which :func:`kill_node` takes down as a lost machine goes.
Token authentication is off (``RAY_AUTH_MODE=disabled``, as Ray 2.60's docs say for a private cluster) in the
environment the run and the ``ray`` CLI get, and so is the node's drain on SIGTERM
(``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0``): Ray 2.60's ``ray start --block`` answers SIGTERM by asking the GCS to
drain the node for up to 30 s, and the process group's SIGTERM has stopped the GCS already, so every cluster's end
waited out the whole 30 s ("Failed to mark the local node as draining on SIGTERM")."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

RAY_CLI = str(Path(sys.executable).parent / "ray")
RLRUN = str(Path(sys.executable).parent / "rlrun")
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_is_up(address: str, cpus: int | None = None) -> bool:
    """Whether ``ray status`` at ``address`` lists a node's CPUs (the GCS answers and a node has registered), or
    with ``cpus``, that many CPUs in all (every node registered)."""
    status = subprocess.run([RAY_CLI, "status", f"--address={address}"], env=ENV, capture_output=True, text=True)
    if status.returncode != 0:
        return False
    return " CPU" in status.stdout if cpus is None else f"/{float(cpus)} CPU" in status.stdout


def wait_for_cpus(address: str, cpus: int, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not cluster_is_up(address, cpus):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cluster at {address} did not reach {cpus} CPUs in {timeout_s:.0f} s")
        time.sleep(0.5)


def start_node(address: str, cpus: int) -> subprocess.Popen:
    """Another node of the cluster at ``address`` (``ray start --address --block``, a process group of its own)."""
    return subprocess.Popen([RAY_CLI, "start", f"--address={address}", f"--num-cpus={cpus}", "--block"], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill_node(node: subprocess.Popen) -> None:
    """SIGKILL to the node's whole process group (raylet, object store, its actors): a machine that is lost, not
    one that is shut down (no drain, no goodbye to the GCS, which notices only when heartbeats stop)."""
    try:
        os.killpg(node.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    node.wait(timeout=60)


@contextmanager
def ray_head(cpus: int, object_store_bytes: int | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """(its GCS address, the head's process); up within 90 s or a RuntimeError. Up means ``ray status`` lists the
    node's CPUs: it exits 0 as soon as the GCS answers, printing "No cluster status" for the seconds before the node
    registers, and a run joining then waits for it (a join measured 6.6 s instead of 0.04 s in a loaded CI run)."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    cmd = [RAY_CLI, "start", "--head", f"--port={port}", f"--num-cpus={cpus}", "--include-dashboard=false", "--block"]
    if object_store_bytes:
        cmd.append(f"--object-store-memory={object_store_bytes}")
    head = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not cluster_is_up(address):
            if time.monotonic() > deadline:
                raise RuntimeError("ray start --head did not come up in 90 s")
            time.sleep(0.5)
        yield address, head
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=120)


def stop_run(proc: subprocess.Popen, timeout: float = 120) -> None:
    """End an ``rlrun`` started with ``start_new_session=True``: SIGINT (a clean stop), SIGKILL after ``timeout``."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
