"""``rlrun ui``: the MLflow UI over the runs' store; without the full mlflow package, one line saying what to install.

The serving test needs the ``mlflow-ui`` extra (the full mlflow package, not in the development install: see
rlrun/app/ui.py for its cost); it starts the real server on a free port, reads its page and its API, and stops it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import RLRUN, run_rlrun

from rlrun.app import ui
from rlrun.errors import ConfigError


def test_without_the_full_mlflow_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "flask", None)  # import flask now fails, as with mlflow-skinny alone
    with pytest.raises(ConfigError) as e:
        ui.check(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert str(e.value) == ("rlrun ui: the MLflow UI needs the full mlflow package (the default install records runs "
                            "with mlflow-skinny, which has no UI): pip install 'rlrun[mlflow-ui]' (or make ui in a "
                            "checkout).")


def test_without_a_store_it_says_where_it_looked(tmp_path: Path) -> None:
    if not ui.has_web_app():
        pytest.skip("the full mlflow package is not installed (the check before this one fails first)")
    with pytest.raises(ConfigError, match=f"rlrun ui: no MLflow store at {tmp_path / 'mlflow.db'}: run rlrun"):
        ui.check(f"sqlite:///{tmp_path / 'mlflow.db'}")


def test_the_command_without_a_store_exits_2_with_one_line(workdir: Path) -> None:
    proc = run_rlrun(["ui"], workdir)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("rlrun: error: rlrun ui: ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not ui.has_web_app(), reason="needs the mlflow-ui extra (make ui)")
def test_it_serves_the_runs_of_this_directory(workdir: Path) -> None:
    """A run recorded in ./mlflow.db, then rlrun ui: the page answers, and its API lists the run's experiment."""
    run_rlrun(["stop.env_steps=200", "algo.learning_starts=100"], workdir, check=True)
    port = free_port()
    server = subprocess.Popen([RLRUN, "ui", "--port", str(port)], cwd=workdir, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:  # until the server answers (its start-up imports take seconds)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
                    assert page.status == 200 and b"MLflow" in page.read()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, "the UI did not answer within 2 minutes"
                time.sleep(0.5)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search",
                                         data=json.dumps({"max_results": 10}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            names = [e["name"] for e in json.loads(answer.read())["experiments"]]
        assert "rlrun" in names
    finally:
        import os
        import signal

        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
