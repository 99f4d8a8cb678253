"""The hardware and software a figure was measured on: CPU model, cores, GPU, Python and package versions, the
git commit of the rlrun source tree. Benchmarks store it with their results; every MLflow run carries it as tags.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

# Distributions whose versions identify a result's software stack.
PACKAGES = ("torch", "numpy", "gymnasium", "ale-py", "ray", "hydra-core", "mlflow-skinny")


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else platform.processor() (may be empty)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution (None when absent); reads metadata only, imports nothing."""
    import importlib.metadata as md

    versions: dict[str, str | None] = {}
    for pkg in packages:
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return versions


def gpu_name() -> str | None:
    """The first CUDA device's name, or None without CUDA (or without torch)."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return None


@functools.lru_cache(maxsize=None)
def git_commit(where: str | None = None, short: bool = True) -> str | None:
    """The commit checked out in the git work tree holding ``where`` (default: the rlrun package), or None when
    that is not a git checkout or git is not installed."""
    where = where or str(Path(__file__).resolve().parent)
    args = ["git", "rev-parse", "--short", "HEAD"] if short else ["git", "rev-parse", "HEAD"]
    try:
        out = subprocess.run(args, capture_output=True, text=True, cwd=where, check=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def fingerprint(where: str | None = None) -> dict[str, Any]:
    """``{"cpu", "cores", "gpu", "python", "versions": {pkg: version}, "commit", "date"}``; ``where`` picks the
    git work tree whose commit is recorded (default: the rlrun package's)."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "gpu": gpu_name(), "python": platform.python_version(),
            "versions": package_versions(), "commit": git_commit(where),
            "date": dt.datetime.now(dt.timezone.utc).isoformat()}


def fingerprint_tags(prefix: str = "rlrun.") -> dict[str, str]:
    """The fingerprint as flat string tags for MLflow: ``rlrun.hw.cpu``, ``rlrun.hw.cores``, ``rlrun.hw.gpu``,
    ``rlrun.version.<pkg>`` and the standard ``mlflow.source.git.commit`` (full hash) when known."""
    fp = fingerprint()
    tags = {f"{prefix}hw.cpu": fp["cpu"] or "unknown", f"{prefix}hw.cores": str(fp["cores"]),
            f"{prefix}hw.gpu": fp["gpu"] or "none", f"{prefix}version.python": fp["python"]}
    for pkg, version in fp["versions"].items():
        tags[f"{prefix}version.{pkg}"] = version or "not installed"
    full = git_commit(None, short=False)
    if full:
        tags["mlflow.source.git.commit"] = full
    return tags
