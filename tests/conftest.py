"""Shared test helpers: run the installed ``rlrun`` console script as a user would."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

if TYPE_CHECKING:
    from rlrun.execution.rollout import Rollout

# One torch thread in the test process, as every run has (device.torch_threads=1): tests that build agents without
# run_experiment otherwise get a thread per core, which on a busy 2-core machine made small updates ~7x slower.
torch.set_num_threads(1)

RLRUN = str(Path(sys.executable).parent / "rlrun")
# A run that finishes in a few seconds: a few hundred env steps with learning starting early.
QUICK = ["stop.env_steps=300", "algo.learning_starts=100"]


class ForkServer:
    """One ``cli_fork_server.py`` process: runs one console-script command at a time in a child forked from its
    preloaded imports (that file says what the child keeps of a fresh process, and what it skips)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("cli_fork_server.py"))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.proc.stdout.readline()
        if json.loads(ready or "{}").get("ready") is not True:
            raise RuntimeError(f"the rlrun fork server did not start ({self.proc.wait()})")

    def run(self, argv: list[str], cwd: Path, timeout: float, env: dict[str, str]) -> subprocess.CompletedProcess:
        """``argv[0]``: the console script (``rlrun`` or ``rlrun-plot``); ``env``: the child's whole environment."""
        out = Path(tempfile.mkdtemp(prefix="rlrun-fork-"))  # outside cwd: a test may list what the command wrote
        request = {"script": str(Path(sys.executable).parent / argv[0]), "entry": argv[0], "argv": argv[1:],
                   "cwd": str(cwd), "stdout": str(out / "stdout"), "stderr": str(out / "stderr"), "timeout": timeout,
                   "env": env}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        code = json.loads(self.proc.stdout.readline())["code"]
        done = subprocess.CompletedProcess(argv, code, (out / "stdout").read_text(), (out / "stderr").read_text())
        shutil.rmtree(out)
        if code == -9:
            raise subprocess.TimeoutExpired(argv, timeout, done.stdout, done.stderr)
        return done

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


_server: ForkServer | None = None
_server_free = threading.Lock()


def _fork_server() -> ForkServer:
    global _server
    if _server is None:
        _server = ForkServer()
        atexit.register(_server.close)
    return _server


def run_rlrun(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 180,
              check: bool = False) -> subprocess.CompletedProcess:
    """``rlrun ARGS`` in ``cwd``, as the console script runs it. With no ``env`` it runs in a child of this test
    process's fork server (the same ``main``, ``sys.argv``, environment, stdin and exit status; no fresh interpreter's
    imports and teardown: seconds per call); with ``env`` (variables read when modules are imported, a
    ``PYTHONPATH``), or while another thread holds the server, in a fresh interpreter."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("HYDRA_FULL_ERROR", None)
    full_env.pop("MLFLOW_RUN_ID", None)
    if env is None and _server_free.acquire(blocking=False):
        try:
            proc = _fork_server().run(["rlrun", *args], cwd, timeout, full_env)
        finally:
            _server_free.release()
    else:
        proc = subprocess.run([RLRUN, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
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


def rollout_form(rollout: dict) -> Rollout:
    """A hand-made time-major rollout, a dict of tensors with ``next_obs`` ``[T, B, ...]`` (every step's real next
    observation), as the learners take it (rlrun/execution/rollout.py): ``next_obs`` kept as ``last_obs`` (its last
    step) and the final observations of the steps where an episode ended (``final_obs`` at the flat steps
    ``final_index``); the keys other than the named fields are the acting extras."""
    from rlrun.execution.rollout import Rollout

    next_obs = rollout["next_obs"]
    T, B = rollout["rewards"].shape
    done = (rollout["terminated"].bool() | rollout["truncated"].bool()).reshape(-1)
    index = done.nonzero().squeeze(1)
    named = ("obs", "actions", "rewards", "terminated", "truncated")
    return Rollout(**{k: rollout[k] for k in named}, last_obs=next_obs[-1],
                   final_obs=next_obs.reshape(T * B, *next_obs.shape[2:])[index], final_index=index,
                   extras={k: v for k, v in rollout.items() if k not in (*named, "next_obs")})
