"""Secrets out of what rlrun records: :func:`redact_uri` is the one place a URI is made safe to write down.

A tracking URI may carry credentials (``postgresql://alice:s3cret@db/mlflow``, ``https://user:token@host``,
``...?password=...``). rlrun uses the URI as given to connect, but every copy it records (MLflow params and tags,
``fallback.json``, warnings, TensorBoard hparams, checkpoints, the run's ``.hydra/`` files) goes through
:func:`redact_uri` first. MLflow reads credentials from the environment instead (``MLFLOW_TRACKING_USERNAME``,
``MLFLOW_TRACKING_PASSWORD``, ``MLFLOW_TRACKING_TOKEN``; a database's own, e.g. ``PGPASSWORD``), which rlrun never
records.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***"
# Query parameters whose values are secrets (password=, token=, api_key=, sig=, ...).
_SECRET_QUERY = re.compile(r"pass|pwd|token|secret|key|auth|credential|sig", re.IGNORECASE)


def redact_uri(uri: Any) -> Any:
    """``uri`` without its user-info (``user:password@``) and with secret-looking query values replaced by
    ``***``; anything that is not a string with a scheme (None, a plain path) comes back unchanged."""
    if not isinstance(uri, str) or "://" not in uri:
        return uri
    try:
        parts = urlsplit(uri)
    except ValueError:  # not parseable as a URI: keep only the scheme, nothing that could be a secret
        return uri.split("://", 1)[0] + "://" + REDACTED
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_QUERY.search(k) for k, _ in pairs):
            query = urlencode([(k, REDACTED if _SECRET_QUERY.search(k) else v) for k, v in pairs], safe="*/:")
    if netloc == parts.netloc and query == parts.query:
        return uri
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# In free text (a command line, a YAML file, an error message): the user-info of any scheme://user:pw@host (also as
# Hydra escapes it, scheme\://user\:pw@host), and the values of secret-looking query parameters.
_USERINFO_IN_TEXT = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*\\?://)[^/@\s'\"]+@")
_QUERY_IN_TEXT = re.compile(r"([?&][^=&\s'\"]*(?:pass|pwd|token|secret|key|auth|credential|sig)[^=&\s'\"]*=)"
                            r"[^&\s'\"]+", re.IGNORECASE)


def redact_text(text: str) -> str:
    """``text`` with every URI in it redacted as :func:`redact_uri` does (user-info dropped, secret-looking query
    values ``***``): for the copies of a command line or config that rlrun writes, and for error messages."""
    return _QUERY_IN_TEXT.sub(lambda m: m.group(1) + REDACTED, _USERINFO_IN_TEXT.sub(r"\1", text))


def has_secret(uri: Any) -> bool:
    """Whether :func:`redact_uri` would change ``uri``."""
    return redact_uri(uri) != uri


def redact_strings(data: Any) -> Any:
    """``data`` (plain data: dicts, lists, tuples, strings, numbers) with :func:`redact_text` applied to every
    string in it: a config as it is recorded (checkpoints, params)."""
    if isinstance(data, str):
        return redact_text(data) if "://" in data else data
    if isinstance(data, dict):
        return {k: redact_strings(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(redact_strings(v) for v in data)
    return data


def redact_file(path: Path) -> None:
    """Rewrite a text file another program wrote (Hydra's ``.hydra/*.yaml``, ``multirun.yaml``) without the
    credentials of any URI in it; atomic, and only when there is something to remove."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return
    clean = redact_text(text)
    if clean != text:
        tmp = Path(path).with_name(Path(path).name + ".tmp")
        tmp.write_text(clean)
        os.replace(tmp, path)


def redact_log_records() -> None:
    """Make every log record of this process carry its message without URI credentials: Hydra's launchers log each
    job's overrides (``logger.mlflow.tracking_uri=...``) to the console and the sweep's log, and libraries may log
    the URI they were given. Installed once, by the ``rlrun`` command."""
    make = logging.getLogRecordFactory()
    if getattr(make, "rlrun_redacts", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format is logging's own error to report, later
            return record
        if "@" in message or "=" in message:
            clean = redact_text(message)
            if clean != message:
                record.msg, record.args = clean, ()
        return record

    factory.rlrun_redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
