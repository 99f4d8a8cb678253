"""An MLflow run per rlrun run: params (the flattened config), buffered metrics, tags (seed, git commit, hardware
fingerprint, sweep group), and artifacts (``protocol.json``, ``summary.json``, the composed config, and whatever
``log_artifact`` is given, e.g. an exported model).

Defaults to a local sqlite store, ``sqlite:///<working directory>/mlflow.db`` (an absolute URI; no server), with
artifacts in ``mlartifacts/`` beside the database; ``logger.mlflow.tracking_uri`` points it anywhere else.
``mlflow`` is imported here only (its import costs ~1.5 s). Metrics are buffered and sent in one ``log_batch``
call at most every ``flush_interval_s`` seconds and at the end, so MLflow stays off the hot path. Runs are
created and linked through ``MlflowClient`` with explicit ids (a sweep job names its parent with
``logger.mlflow.parent_run_id``), never through the fluent API's global state or an inherited ``MLFLOW_RUN_ID``.

An unreachable tracking server never stops a run: an http(s) server is probed once with a short timeout, MLflow's
HTTP retries are capped (they default to minutes), and on any failure, at the start or in the middle of the run,
the sink prints one warning and continues in a local fallback store in the run directory,
``<run dir>/mlflow_fallback/mlflow.db``: a new run there gets the params and tags again and every metric not yet
sent, so the two stores together hold everything (TensorBoard is unaffected either way). Artifacts that are files
of the run directory (summary.json, protocol.json, the config, an export) are not copied into the fallback store:
they are in the run directory already.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator
from urllib.parse import urlparse

from rlrun.errors import one_line
from rlrun.fingerprint import fingerprint_tags, package_versions
from rlrun.logging.fanout import RunContext, warn
from rlrun.redact import redact_text, redact_uri

MAX_PARAMS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000
FALLBACK_DIR = "mlflow_fallback"
PROTOCOL_FILE = "protocol.json"

# MLflow's own defaults retry a failed HTTP request 7 times with exponential backoff and wait 120 s for an answer:
# minutes of a stalled run. These caps apply unless the user has set the variables.
HTTP_ENV_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                     "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


class MLflowUnavailable(Exception):
    """The tracking store cannot be reached or refused a request."""


def default_tracking_uri() -> str:
    return f"sqlite:///{Path.cwd().resolve() / 'mlflow.db'}"


def mlflow_run_in(state: dict[str, Any], uri: str) -> str | None:
    """The checkpoint's MLflow run id if its saved tracking URI is ``uri`` (the store the user configured), else
    None: the saved URI only confirms a store, it never chooses one. Compared without credentials (a checkpoint
    records its URI redacted)."""
    saved = state.get("mlflow") or {}
    run_id, saved_uri = saved.get("run_id"), saved.get("tracking_uri")
    if isinstance(run_id, str) and run_id and isinstance(saved_uri, str) and redact_uri(saved_uri) == redact_uri(uri):
        return run_id
    return None


def is_local_store(uri: str) -> bool:
    return uri.startswith("sqlite:///") or uri.startswith("file:") or os.path.isabs(uri)


def limit_http_retries() -> None:
    for key, value in HTTP_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)


def probe(uri: str, timeout_s: float) -> None:
    """Raise MLflowUnavailable unless an http(s) tracking server answers within ``timeout_s`` (any HTTP status
    counts as an answer); other stores are not probed."""
    if urlparse(uri).scheme not in ("http", "https"):
        return
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise MLflowUnavailable(f"tracking server {redact_uri(uri)} is unreachable ({reason})") from None


def sqlite_file(uri: str) -> Path | None:
    """The database file of a ``sqlite:///<path>`` store; None for other stores."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def artifact_root_for(uri: str) -> str | None:
    """``mlartifacts/`` beside a sqlite database (absolute, so it does not depend on the working directory);
    None (the server's choice) for other stores."""
    database = sqlite_file(uri)
    return None if database is None else (database.parent / "mlartifacts").as_uri()


@contextlib.contextmanager
def creation_lock(uri: str) -> Iterator[None]:
    """Held while a client opens a SQLite store and finds or creates its experiment: an exclusive ``flock`` on the
    database's directory. Two processes opening one new store at once (a user starting two runs, a sweep's
    parallel jobs) otherwise race in its table creation and schema migrations, and all but one fail ("table
    experiments already exists", "duplicate column name"). Other stores (a server) need none, and neither does a
    platform without ``fcntl``; a directory that does not exist yet is left to the store to report."""
    database = sqlite_file(uri)
    folder = None if database is None else database.parent
    try:
        import fcntl
    except ImportError:
        folder = None
    if folder is None or not folder.is_dir():
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def connect(uri: str, experiment: str, probe_timeout_s: float = 3.0) -> tuple[Any, str]:
    """An ``MlflowClient`` for ``uri`` and the id of ``experiment`` (created if missing).

    Raises MLflowUnavailable when the store cannot be reached or refuses the request.
    """
    from mlflow.tracking import MlflowClient

    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)  # a new store's table-creation notes
    # The SQL store's notes, and the traceback it logs for an error it then raises: the caller reports that error
    # itself, in one line (a full disk, say).
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)

    limit_http_retries()
    probe(uri, probe_timeout_s)
    try:
        with creation_lock(uri):
            client = MlflowClient(tracking_uri=uri)
            found = client.get_experiment_by_name(experiment)
            if found is not None:
                return client, found.experiment_id
            return client, client.create_experiment(experiment, artifact_location=artifact_root_for(uri))
    except Exception as e:  # noqa: BLE001 - whatever the store raises, the run goes on elsewhere
        raise MLflowUnavailable(f"tracking store {redact_uri(uri)} failed: {one_line(e, 300)}") from None


def protocol_card(params: dict[str, Any]) -> dict[str, Any]:
    """The env protocol card of a run, from its flattened config and gymnasium's registry: what a reader needs to
    compare a score with another (env id, frame skip, episode limit, kwargs, package versions).

    Atari-specific fields (sticky actions, full action space, preprocessing) join once the env factory has them.
    """
    env = {k[len("env."):]: v for k, v in params.items() if k.startswith("env.")}
    env_id = env.get("id")
    kwargs = {k[len("kwargs."):]: v for k, v in env.items() if k.startswith("kwargs.")}
    card: dict[str, Any] = {
        "env_id": env_id, "env_factory": env.get("name"), "frame_skip": env.get("frame_skip", 1),
        "max_episode_steps": env.get("max_episode_steps"), "env_kwargs": kwargs,
        "seed": params.get("seed"), "return_window_episodes": params.get("return_window"),
        "versions": {k: v for k, v in package_versions(("gymnasium", "ale-py")).items()},
        "units": "max_episode_steps in agent steps; frames = agent steps x frame_skip",
    }
    try:
        import gymnasium

        spec = gymnasium.registry.get(env_id) if env_id else None
    except ImportError:
        spec = None
    if spec is not None:
        card["registered"] = {"entry_point": str(spec.entry_point), "max_episode_steps": spec.max_episode_steps,
                              "reward_threshold": spec.reward_threshold, "nondeterministic": spec.nondeterministic,
                              "kwargs": {k: v if isinstance(v, (int, float, str, bool, type(None))) else str(v)
                                         for k, v in spec.kwargs.items()}}
        if card["max_episode_steps"] is None:
            card["max_episode_steps"] = spec.max_episode_steps
    return card



class MLflowSink:
    keeps_artifacts: ClassVar[bool] = True

    @classmethod
    def from_config(cls, cfg: Any, context: RunContext) -> MLflowSink:
        return cls(cfg, context.run_dir, context.run_name)

    """One MLflow run; see the module docstring. ``run_id`` and ``tracking_uri`` name where the run really is
    (the fallback store's after a failover)."""

    def __init__(self, cfg: Any, run_dir: Path, run_name: str) -> None:
        import mlflow  # noqa: F401 - the heavy import, only when MLflow logging is on


        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.run_name = run_name
        self.primary_uri = cfg.tracking_uri or default_tracking_uri()
        self.tracking_uri = self.primary_uri
        self.fallback_uri: str | None = None  # set once the sink has failed over
        self.client: Any = None  # None: MLflow logging is off for the rest of the run (both stores failed)
        self.run_id: str | None = None
        self.parent_run_id: str | None = getattr(cfg, "parent_run_id", None)
        extra_tags = getattr(cfg, "tags", None) or {}
        self.tags: dict[str, str] = {"rlrun.run_dir": str(self.run_dir.resolve()), **fingerprint_tags(),
                                     **{str(k): redact_text(str(v)) for k, v in extra_tags.items()}}
        if self.parent_run_id:
            self.tags["mlflow.parentRunId"] = str(self.parent_run_id)
        self.params: dict[str, str] = {}
        self._buffer: list[Any] = []
        self._artifacts: list[tuple[str, str | None]] = []  # logged so far, replayed into the fallback store
        self._last_flush = time.monotonic()
        self._continued = False  # logging into an existing run (logger.mlflow.run_id)
        try:
            self.client, experiment_id = connect(self.primary_uri, cfg.experiment, float(cfg.probe_timeout_s))
            self._start_run(experiment_id, getattr(cfg, "run_id", None))
        except Exception as e:  # noqa: BLE001
            self._fail_over(e)

    # ------------------------------------------------------------ the Sink interface

    def log_params(self, params: dict[str, Any]) -> None:
        self.params.update({k: str(v)[:6000] for k, v in params.items()})
        tags = {"rlrun.seed": params.get("seed"), "rlrun.algo": params.get("algo.name"),
                "rlrun.env_id": params.get("env.id")}
        self.tags.update({k: str(v) for k, v in tags.items() if v is not None})
        card_path = self.run_dir / PROTOCOL_FILE
        if not card_path.exists():  # the run loop writes the env factory's card first; this is for bare sinks
            card_path.write_text(json.dumps(protocol_card(params), indent=2, sort_keys=True, default=str) + "\n")
        self._call("log_params", self._send_params)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now_ms = int(time.time() * 1000)
        self._buffer.extend(Metric(k, float(v), now_ms, int(step)) for k, v in metrics.items())
        if time.monotonic() - self._last_flush >= float(self.cfg.flush_interval_s):
            self.flush()

    def flush(self) -> None:
        while self._buffer and self.client is not None:
            chunk = self._buffer[:MAX_METRICS_PER_BATCH]
            if not self._call("log_metrics", lambda c=chunk: self.client.log_batch(self.run_id, metrics=c)):
                break
            del self._buffer[:len(chunk)]
        self._last_flush = time.monotonic()

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Upload a file (or a directory) now, e.g. an exported model; it follows the run into the fallback
        store if the sink fails over later."""
        path = str(path)
        self._artifacts.append((path, artifact_path))
        self._call("log_artifact", lambda: self._store_artifact(path, artifact_path))

    def log_videos(self, paths: list[Path], step: int) -> None:
        """An evaluation's videos as artifacts under ``videos/eval-<env step>/`` (MLflow's UI plays mp4)."""
        for path in paths:
            self.log_artifact(path, f"videos/eval-{step}")

    def close(self, summary: dict[str, Any], status: str) -> None:
        self.flush()
        for name in ("summary.json", PROTOCOL_FILE, ".hydra/config.yaml"):
            path = self.run_dir / name
            if path.exists():
                self.log_artifact(path)
        self._call("set_terminated", lambda: self.client.set_terminated(self.run_id, status=status))
        if self._buffer:
            warn(f"MLflow: {len(self._buffer)} metric values could not be stored; they are in TensorBoard "
                 f"({self.run_dir / 'tensorboard'}).")

    # ------------------------------------------------------------ internals

    def _start_run(self, experiment_id: str, existing_run_id: str | None) -> None:
        self._continued = bool(existing_run_id)
        if existing_run_id:
            self.client.update_run(existing_run_id, status="RUNNING")
            self.run_id = existing_run_id
            self._send_tags()
        else:
            run = self.client.create_run(experiment_id, run_name=self.run_name, tags=self.tags)
            self.run_id = run.info.run_id

    def _store_artifact(self, path: str, artifact_path: str | None) -> None:
        """Upload, except into the fallback store a file that is in the run directory already: copying it to
        <run dir>/mlflow_fallback would only duplicate it (two summary.json files under one run directory)."""
        if self.fallback_uri is not None and Path(path).resolve().is_relative_to(self.run_dir.resolve()):
            return
        self.client.log_artifact(self.run_id, path, artifact_path)

    def _send_tags(self) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, v[:5000]) for k, v in self.tags.items()])

    def _send_params(self) -> None:
        from mlflow.entities import Param

        self._send_tags()
        params = self.params
        if self._continued:  # params of a continued run are already there; MLflow refuses to change a value
            known = self.client.get_run(self.run_id).data.params
            params = {k: v for k, v in params.items() if k not in known}
        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=items[i: i + MAX_PARAMS_PER_BATCH])

    def _call(self, what: str, fn: Callable[[], Any]) -> bool:
        """Run ``fn`` against the current store; on failure fail over once (then retry there) or turn off."""
        if self.client is None:
            return False
        try:
            fn()
            return True
        except Exception as e:  # noqa: BLE001 - MLflow must never stop a run
            if self.fallback_uri is None:
                self._fail_over(MLflowUnavailable(f"{what} on {redact_uri(self.primary_uri)} failed: "
                                                  f"{one_line(e, 300)}"))
                if self.client is not None:
                    return self._call(what, fn)
            else:
                self._turn_off(f"{what} failed on the fallback store too: {one_line(e, 300)}")
            return False

    def _fail_over(self, error: BaseException) -> None:
        """Continue in the local fallback store: a new run there with the params, tags and artifacts so far."""
        folder = (self.run_dir / FALLBACK_DIR).resolve()
        uri = f"sqlite:///{folder / 'mlflow.db'}"
        warn(f"MLflow: {one_line(error, 300)}. The run goes on; its MLflow data goes to the local fallback store {uri} "
             f"(browse it with: rlrun ui --store {uri}); TensorBoard is unaffected.")
        self.tags["rlrun.intended_tracking_uri"] = redact_uri(self.primary_uri)
        self.tags["rlrun.artifacts"] = "the files of the run directory (rlrun.run_dir) are its artifacts"
        if self.run_id:
            self.tags["rlrun.intended_run_id"] = self.run_id
        self.fallback_uri = self.tracking_uri = uri
        try:  # on the run directory's disk, which may be the full one: a failure turns MLflow off, nothing more
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "fallback.json").write_text(json.dumps(
                {"reason": redact_text(one_line(error, 300)), "intended_tracking_uri": redact_uri(self.primary_uri),
                 "intended_run_id": self.run_id, "fallback_tracking_uri": uri}, indent=2) + "\n")
            self.client, experiment_id = connect(uri, self.cfg.experiment)
            self._start_run(experiment_id, None)
            if self.params:
                self._send_params()
            for path, artifact_path in self._artifacts:
                self._store_artifact(path, artifact_path)
        except Exception as e:  # noqa: BLE001
            self._turn_off(f"the fallback store {uri} failed too: {one_line(e, 300)}")

    def _turn_off(self, message: str) -> None:
        warn(f"MLflow: {message}; MLflow logging is off for the rest of this run (TensorBoard is unaffected).")
        self.client = None
