"""A fork server for the tests' ``rlrun`` commands (``run_rlrun`` in conftest.py, the docs commands): imports rlrun's
command-line stack once (and runs Hydra's plugin discovery, which imports the launchers' and sweepers' modules),
then runs each command in a child forked from it, as its console script would run it.

Most of these commands are tiny runs or bad-input checks, so a fresh interpreter spends most of each in imports
(torch, MLflow's SQL store, Hydra, the run loop) and in its final garbage collections. A child here starts with those
modules imported and runs the rest as the console script does: ``sys.argv`` is the script's path and the command's
words, stdin is /dev/null, stdout and stderr go to the files the request names, the working directory is the
request's. It ends as a script's interpreter does, up to its last step: non-daemon threads joined, atexit
handlers run, streams flushed, the script's exit status; then ``os._exit`` instead of the interpreter's own
finalization, whose garbage collections walk every object of the preloaded stack several times (seconds per
command, for nothing a test reads). Ray is not imported here: a command that uses it imports it in its child, as in
a fresh process.

Protocol (one JSON object per line): the server prints ``{"ready": true}`` once its imports are done; each request
``{"script", "entry", "argv", "cwd", "stdout", "stderr", "timeout", "env"}`` (``env``: the child's environment)
gets ``{"code": exit status}`` when its child has ended (``-9`` when the server killed it at ``timeout`` seconds).
One command at a time; end of stdin ends it.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import signal
import sys
import threading
import time

# torch._dynamo: every torch.optim optimizer imports it when built (its add_param_group is wrapped by
# torch._disable_dynamo), with sympy: seconds of a tiny run.
# torch.utils.tensorboard: the default logger's sink, imported by every run that logs.
PRELOAD = ("torch", "torch._dynamo", "torch.utils.tensorboard", "numpy", "gymnasium", "hydra", "omegaconf", "mlflow",
           "mlflow.store.tracking.sqlalchemy_store", "rlrun.app.cli", "rlrun.app.run", "rlrun.app.plot")
ENTRIES = {"rlrun": "rlrun.app.cli", "rlrun-plot": "rlrun.app.plot"}


def _child(request: dict) -> None:
    """In the forked child: become the command's process and run it; never returns."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = [request["script"], *request["argv"]]
    main = importlib.import_module(ENTRIES[request["entry"]]).main
    try:
        code = main()
    except SystemExit as stop:
        code = stop.code
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    if code is not None and not isinstance(code, int):  # as the interpreter treats SystemExit("message")
        print(code, file=sys.stderr)
        code = 1
    _exit(code or 0)


def _exit(code: int) -> None:
    """The interpreter's shutdown without its finalization: threading's own shutdown (its exit hooks, which tell
    thread pools' workers to stop, then the join of the non-daemon threads), the atexit handlers, the streams
    flushed, exit. Both private calls are the ones ``Py_FinalizeEx`` makes."""
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -9
        time.sleep(0.02)


def serve() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    from hydra.core.plugins import Plugins

    # Hydra's plugin discovery, which every command's first composition runs: it imports every module of the
    # hydra_plugins packages (the launchers and sweepers; not Ray itself) and registers their classes and configs.
    Plugins.instance()
    if threading.active_count() != 1:  # a child forked from a process with threads could inherit a held lock
        raise RuntimeError(f"threads running after the imports: {[t.name for t in threading.enumerate()]}")
    reply = sys.stdout
    print(json.dumps({"ready": True}), file=reply, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"code": _wait(pid, float(request["timeout"]))}), file=reply, flush=True)


if __name__ == "__main__":
    serve()
