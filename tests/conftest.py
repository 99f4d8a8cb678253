"""Shared test helpers: run the installed ``rlrun`` console script as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

# One torch thread in the test process, as every run has (device.torch_threads=1): tests that build agents without
# run_experiment otherwise get a thread per core, which on a busy 2-core machine made small updates ~7x slower.
torch.set_num_threads(1)

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

def assert_same(a, b, path: str = "state") -> None:  # noqa: ANN001
    """Recursive equality; tensors with torch.equal (bitwise, dtype and shape included)."""
    if isinstance(a, dict):
        assert set(a) == set(b), f"{path}: keys differ: {set(a) ^ set(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), f"{path}: tensors differ"
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), f"{path}: arrays differ"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def assert_all_grads(module: torch.nn.Module) -> None:
    """Every parameter got a gradient, and a nonzero one (a detached layer or a dead branch would not)."""
    for name, p in module.named_parameters():
        assert p.grad is not None, f"{name} got no gradient"
        assert p.grad.abs().sum() > 0, f"{name} got an all-zero gradient"


def rollout_form(rollout: dict) -> dict:
    """A hand-made time-major rollout with ``next_obs`` ``[T, B, ...]`` (tensors) in the form the learners take
    (rlrun/execution/sample_batch.py): ``next_obs`` replaced by ``last_obs`` (its last step) and the final
    observations of the steps where an episode ended (``final_obs`` at the flat steps ``final_index``)."""
    out = {k: v for k, v in rollout.items() if k != "next_obs"}
    next_obs = rollout["next_obs"]
    T, B = rollout["rewards"].shape
    done = (rollout["terminated"].bool() | rollout["truncated"].bool()).reshape(-1)
    index = done.nonzero().squeeze(1)
    out["last_obs"] = next_obs[-1]
    out["final_obs"] = next_obs.reshape(T * B, *next_obs.shape[2:])[index]
    out["final_index"] = index
    return out
