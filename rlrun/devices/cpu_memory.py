"""How this process's C allocator treats large blocks (``device.cpu_memory``), for CPU learners.

A CPU update allocates and frees the same large tensors every minibatch (a PPO Atari minibatch of 256 frames:
29 MB of float input, 13 MB of first-layer activations, their gradients). glibc's malloc serves blocks above its
mmap threshold with ``mmap`` and returns them with ``munmap`` (and trims the heap's top beyond its trim threshold),
so every minibatch faults its pages in again from the kernel. ``reuse`` tells glibc to serve every block from the
heap (``M_MMAP_MAX`` 0) and to keep freed memory (``M_TRIM_THRESHOLD`` 1 GiB): the pages are faulted in once and
reused: a PPO update on Pong takes about a fifth less time for about a tenth more peak memory (the figures:
benchmarks/results/, docs/devices.md). Setting only the trim threshold is worse than glibc's defaults:
it also switches off glibc's dynamic mmap threshold.

``system`` leaves glibc's defaults. The settings are process-wide and cannot be taken back within the process.
Where the C library is not glibc (macOS, musl) ``reuse`` does nothing and says so once in the log.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

CHOICES = ("reuse", "system")
M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_MAX = -4
KEEP_BYTES = 1 << 30  # freed memory kept in the process before the heap's top is given back (mallopt takes an int)

_applied: str | None = None


def apply_cpu_memory(policy: str) -> bool:
    """Apply ``policy`` (``reuse`` | ``system``) to this process's allocator; True where ``reuse`` is in effect (it
    stays once set: ``system`` after ``reuse`` in one process changes nothing)."""
    global _applied
    if policy == "system" or _applied == policy:
        return _applied == "reuse"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        log.info("device.cpu_memory=reuse: this C library has no mallopt (not glibc); its defaults stay")
        _applied = "system"
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, KEEP_BYTES) == 1
    if not ok:
        log.info("device.cpu_memory=reuse: mallopt refused the settings; glibc's defaults stay")
    _applied = "reuse" if ok else "system"
    return ok
