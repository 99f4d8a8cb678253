"""The GPU kit's dry run: the packages the GPU machine lacks, unimportable (``RLRUN_KIT_UNIMPORTABLE``: top-level
names, comma-separated), so a kit stage that would need one fails on the CPU first (benchmarks/gpu/kit.py)."""

import os
import sys

_NAMES = frozenset(n for n in os.environ.get("RLRUN_KIT_UNIMPORTABLE", "").split(",") if n)


class _NotOnTheGpuMachine:
    @staticmethod
    def find_spec(name, path=None, target=None):  # noqa: ANN001, ANN205 - the meta path finder protocol
        if name.partition(".")[0] in _NAMES:
            raise ModuleNotFoundError(f"No module named {name!r} (not on the GPU machine: the kit's dry run)",
                                      name=name)
        return None


if _NAMES:
    sys.meta_path.insert(0, _NotOnTheGpuMachine())
