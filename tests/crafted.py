"""What an attacker hands rlrun, for the security tests: a run directory with a crafted checkpoint, and a local
HTTP listener on 127.0.0.1 that records every request (method, path, headers) and answers 404, the stand-in for a
server a crafted file names, to show that nothing reaches it."""

from __future__ import annotations

import contextlib
import copy
import http.server
import threading
from pathlib import Path
from typing import Iterator

from rlrun import checkpoint as ckpt


@contextlib.contextmanager
def recording_server() -> Iterator[tuple[str, list[dict]]]:
    """``(url, requests)``: the listener's ``http://127.0.0.1:<port>`` and the list its requests are appended to."""
    requests: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _record(self) -> None:
            requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers)})
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _record

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()


def _merge(into: dict, values: dict) -> None:
    for k, v in values.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def crafted_copy(run_dir: Path, target: Path, mlflow: dict | None = None, **config: object) -> Path:
    """A copy of ``run_dir``'s checkpoint in ``target``/checkpoints whose saved MLflow state is ``mlflow`` (if
    given) and whose saved config has ``config`` merged in (nested dicts key by key): what an attacker's file could
    say."""
    state = copy.deepcopy(ckpt.load_checkpoint(ckpt.checkpoint_path(run_dir)))
    if mlflow is not None:
        state["mlflow"] = mlflow
    _merge(state["config"], config)
    state = {k: v for k, v in state.items() if k not in ("format", "version")}
    ckpt.save_checkpoint(ckpt.checkpoint_path(target), state)
    return target

