"""device.cpu_memory (rlrun/devices/cpu_memory.py): with ``reuse`` glibc serves large blocks from the heap and
keeps freed memory, so a large tensor freed and allocated again is not mapped anew; ``system`` keeps glibc's
defaults. Each case runs in a fresh process (the allocator's settings are process-wide), reading glibc's own
counters (mallinfo2: ``hblks``, blocks served by mmap, before and with the tensor; ``fordblks``, free bytes kept
in the heap)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt/mallinfo2: Linux")

PROBE = textwrap.dedent("""
    import ctypes, json, sys
    from rlrun.config import compose
    from rlrun.devices import resolve_device

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    resolve_device(compose(sys.argv[1:]).device)
    import torch
    before = libc.mallinfo2()
    x = torch.ones(16 << 20)  # 64 MiB
    during = libc.mallinfo2()
    del x
    after = libc.mallinfo2()
    print(json.dumps({"new_hblks": during.hblks - before.hblks, "kept_free_after": after.fordblks}))
""")


def probe(*overrides: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, *overrides], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_reuse_serves_a_large_tensor_from_the_heap_and_keeps_it_when_freed() -> None:
    got = probe()  # the default
    assert got["new_hblks"] == 0  # not a separate mapping
    assert got["kept_free_after"] >= 64 << 20  # its 64 MiB stay in the process for the next minibatch


def test_system_keeps_glibcs_defaults() -> None:
    got = probe("device.cpu_memory=system")
    assert got["new_hblks"] == 1  # mapped on its own by glibc (above the mmap threshold)
    assert got["kept_free_after"] < 64 << 20  # and given back to the kernel when freed


def test_a_wrong_choice_is_a_config_error() -> None:
    done = subprocess.run([sys.executable, "-m", "rlrun.app.cli", "device.cpu_memory=big"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert "device.cpu_memory" in done.stderr and "reuse" in done.stderr and "system" in done.stderr
