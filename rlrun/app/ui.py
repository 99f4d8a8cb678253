"""``rlrun ui``: the MLflow UI over the runs' store (by default ``./mlflow.db``, where ``rlrun`` records its runs).

The default install carries ``mlflow-skinny``, which records runs but has no UI (its web app and the server's
packages are left out): the full ``mlflow`` package adds about 450 MiB (pyarrow, scipy, scikit-learn, pandas,
Flask, ...), too much for everyone who never opens it. ``make ui`` (or ``pip install 'rlrun[mlflow-ui]'``) installs
it; without it, ``rlrun ui`` says so in one line (exit 2). The server binds to 127.0.0.1 unless told otherwise: a
tracking server has no authentication.

    rlrun ui [--store URI] [--port 5000] [--host 127.0.0.1]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import Sequence

from rlrun.errors import ConfigError
from rlrun.logging.mlflow_sink import sqlite_file

INSTALL = "pip install 'rlrun[mlflow-ui]' (or make ui in a checkout)"


def server_command(store: str, host: str, port: int) -> list[str]:
    """MLflow's tracking server with its web UI on ``store``; one worker process (a UI for one person)."""
    return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store, "--host", host, "--port",
            str(port), "--workers", "1"]


def has_web_app() -> bool:
    """Whether the full mlflow package is installed: the server's Flask and the UI's built web app (mlflow-skinny
    ships the server's Python code without either)."""
    try:
        if importlib.util.find_spec("flask") is None:
            return False
        server = importlib.util.find_spec("mlflow.server")
    except (ImportError, ValueError):
        return False
    return bool(server and server.origin and (Path(server.origin).parent / "js" / "build" / "index.html").is_file())


def check(store: str) -> None:
    """The UI's packages are installed and a local store exists: else a ConfigError saying what to do."""
    if not has_web_app():
        raise ConfigError(f"rlrun ui: the MLflow UI needs the full mlflow package (the default install records "
                          f"runs with mlflow-skinny, which has no UI): {INSTALL}.")
    database = sqlite_file(store)
    if database is not None and not database.is_file():
        raise ConfigError(f"rlrun ui: no MLflow store at {database}: run rlrun from this directory "
                          f"first, or name a store with --store URI.")


def main(argv: Sequence[str]) -> None:
    # here, not at the top: the command line imports this module for rlrun ui alone (its start-up cost)
    from rlrun.logging.mlflow_sink import default_tracking_uri

    p = argparse.ArgumentParser(prog="rlrun ui", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", default=None, help="the tracking store (default: sqlite:///<this directory>/mlflow.db, "
                                                 "where rlrun records runs)")
    p.add_argument("--host", default="127.0.0.1", help="the interface to listen on (default: this machine only)")
    p.add_argument("--port", type=int, default=5000)
    a = p.parse_args(list(argv))
    store = a.store or default_tracking_uri()
    check(store)
    print(f"rlrun ui: MLflow UI on http://{a.host}:{a.port} for {store} (Ctrl-C stops it)", flush=True)
    command = server_command(store, a.host, a.port)
    os.execv(command[0], command)  # the server in this process: Ctrl-C and the exit status are its own
