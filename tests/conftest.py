"""Shared test helpers: run the installed ``rlrun`` console script as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RLRUN = str(Path(sys.executable).parent / "rlrun")
# A run that finishes in a few seconds: a few hundred env steps with learning starting early.
QUICK = ["stop.env_steps=300", "algo.learning_starts=100"]


def run_rlrun(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 180,
              check: bool = False) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("HYDRA_FULL_ERROR", None)
    full_env.pop("MLFLOW_RUN_ID", None)
    proc = subprocess.run([RLRUN, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(f"rlrun {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def only_summary(root: Path) -> dict:
    found = sorted(root.rglob("summary.json"))
    assert len(found) == 1, f"expected one summary.json under {root}, found {found}"
    return json.loads(found[0].read_text())


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty working directory (rlrun writes outputs/ and mlflow.db into the working directory)."""
    d = tmp_path / "work"
    d.mkdir()
    return d
