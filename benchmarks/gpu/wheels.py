"""The wheel folder the GPU machine needs: what the kit imports that its Python 3.12 lacks, as cp312 wheels.

``wheels.txt`` pins each one (``name==version``); ``machine_packages.txt`` lists what the machine has (its image's
package list). :func:`build` downloads the pinned wheels for CPython 3.12 on manylinux x86-64 into a folder (a
pure-Python package published only as a source archive is built into a ``py3-none-any`` wheel here), then checks:

- **resolution**: every requirement of every wheel (its ``Requires-Dist``, markers evaluated for Python 3.12 on
  Linux, extras left out) is another wheel of the folder or a package of the machine; and every dependency of rlrun
  (pyproject.toml) is one of the two or in :data:`NOT_CARRIED` with the reason;
- **size**: the wheels plus the working tree fit the 64 MiB a call to the machine may carry, with room to spare.

    python -m benchmarks.gpu.wheels [--dest .whl]

``.whl`` (git-ignored) is what ``device_run.sh`` installs on the machine.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
CARRY_LIMIT = 64 << 20  # bytes a call may carry, working tree included
HEADROOM = 16 << 20  # left for the working tree's growth and the files a session adds
# rlrun's dependencies the kit neither finds on the machine nor carries, and why.
NOT_CARRIED = {
    "torch": "the machine's own build (2.11, CUDA 13) is the one to measure",
    "ray": "79 MB: the kit runs the local executor",
    "mlflow-skinny": "the kit's runs log to TensorBoard only (logger.mlflow.enabled=false)",
    "sqlalchemy": "MLflow's store", "alembic": "MLflow's store",
    "mujoco": "no MuJoCo stage in the kit", "pettingzoo": "no multi-agent stage", "mpe2": "no multi-agent stage",
    "hydra-joblib-launcher": "no sweeps in the kit",
    "minatar": "no MinAtar stage in the kit (it would also pull pandas, seaborn and matplotlib)",
    "minari": "no offline stage in the kit (datasets are written and read by rlrun collect / data=minari)",
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(path: Path = HERE / "wheels.txt") -> dict[str, str]:
    """``{name: version}`` of the wheel list."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonical(name)] = version.strip()
    return out


def machine_packages(path: Path = HERE / "machine_packages.txt") -> set[str]:
    return {canonical(line.split("#", 1)[0].strip()) for line in path.read_text().splitlines()
            if line.split("#", 1)[0].strip()}


def download(name: str, version: str, dest: Path) -> None:
    """The cp312 manylinux wheel of ``name==version``, or a py3 wheel built here from its source archive."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    got = subprocess.run([*pip, "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                          "--implementation", "cp", *platforms, "-d", str(dest), f"{name}=={version}"],
                         capture_output=True, text=True)
    if got.returncode == 0:
        return
    built = subprocess.run([*pip, "wheel", "--no-deps", "-w", str(dest), f"{name}=={version}"], capture_output=True,
                           text=True)
    if built.returncode != 0:
        raise RuntimeError(f"{name}=={version}: no cp312 wheel ({got.stderr.strip().splitlines()[-1:]}) and no "
                           f"wheel built from source ({built.stderr.strip().splitlines()[-1:]})")


def wheel_name(path: Path) -> str:
    return canonical(path.name.split("-")[0])


def requirements(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` names that apply on Python 3.12, Linux, without extras."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
    out = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(env):
                out.append(canonical(req.name))
    return out


def rlrun_dependencies() -> list[str]:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return [canonical(re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0]) for d in deps]


def tree_bytes() -> int:
    """Bytes of the working tree that travels (tracked and untracked-not-ignored files)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.split(b"\0")
    return sum((ROOT / f.decode()).stat().st_size for f in files if f and (ROOT / f.decode()).is_file())


def check(dest: Path) -> list[str]:
    """What is wrong with the folder: unresolved requirements, uncovered rlrun dependencies, size. Empty: fine."""
    wheels = sorted(dest.glob("*.whl"))
    carried = {wheel_name(w) for w in wheels}
    have = carried | machine_packages()
    problems = [f"{name}: pinned in wheels.txt but not in the folder" for name in pinned() if name not in carried]
    for w in wheels:
        problems += [f"{w.name} requires {r}: neither carried nor on the machine" for r in requirements(w)
                     if r not in have]
    problems += [f"rlrun depends on {d}: carry it (wheels.txt), or say why not (NOT_CARRIED)"
                 for d in rlrun_dependencies() if d not in have and d not in NOT_CARRIED]
    size = sum(w.stat().st_size for w in wheels) + tree_bytes()
    if size > CARRY_LIMIT - HEADROOM:
        problems.append(f"the wheels and the working tree are {size / 2**20:.1f} MiB: more than "
                        f"{(CARRY_LIMIT - HEADROOM) / 2**20:.0f} MiB (the call's {CARRY_LIMIT >> 20} MiB less room)")
    return problems


def build(dest: Path) -> list[Path]:
    """Download the pinned wheels into ``dest`` (kept where already there), check them; raise on a problem."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = pinned()
    for w in dest.glob("*.whl"):  # another version of a pinned package: two would stop the install there
        if wheel_name(w) in wanted and w.name.split("-")[1] != wanted[wheel_name(w)]:
            w.unlink()
    have = {wheel_name(w) for w in dest.glob("*.whl")}
    for name, version in wanted.items():
        if name not in have:
            download(name, version, dest)
    problems = check(dest)
    if problems:
        raise RuntimeError("the GPU kit's wheel folder: " + "; ".join(problems))
    return sorted(dest.glob("*.whl"))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu.wheels", description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", type=Path, default=ROOT / ".whl")
    a = p.parse_args(argv)
    try:
        wheels = build(a.dest)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    total = sum(w.stat().st_size for w in wheels)
    for w in wheels:
        print(f"{w.stat().st_size / 2**20:7.2f} MiB  {w.name}")
    print(f"{total / 2**20:7.2f} MiB in {len(wheels)} wheels; working tree {tree_bytes() / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
