"""One writer per run directory: ``<run dir>/run.lock``, held with an exclusive ``flock`` for as long as a run writes.

Two processes writing one run directory (a ``rlrun resume=`` started while the original run still runs, its parent
killed) overwrite each other's checkpoints. A run takes the lock before it writes anything; a second one meets it
and ends with one line naming the holder (pid, host, since when; exit 2). The kernel drops a ``flock`` when its
holder's last descriptor closes, a killed process's included, so a dead holder's leftover file blocks nobody; the
file stays, recording the last holder. Processes forked by the run inherit the lock with its descriptor (the run
is alive while they are). A filesystem without ``flock`` (some network mounts) takes the run without the check,
with a warning.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import logging
import os
import socket
from pathlib import Path
from typing import Iterator

from rlrun.errors import RunDirectoryBusy

log = logging.getLogger(__name__)
LOCK_FILE = "run.lock"


@contextlib.contextmanager
def run_directory_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the ``with`` block; RunDirectoryBusy when another live process holds it."""
    path = run_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                raise RunDirectoryBusy(_busy_message(run_dir, path)) from None
            log.warning("%s: this filesystem has no file locks (%s): two runs writing it at once are not detected",
                        run_dir, e.strerror)
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _busy_message(run_dir: Path, path: Path) -> str:
    try:
        holder = json.loads(path.read_text())
        who = f"process {holder['pid']} on {holder['host']} (since {holder['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        who = "another process"
    return (f"{run_dir} is being written by {who}: one run writes a run directory at a time. Wait for it to end, "
            f"or stop it, then resume.")
