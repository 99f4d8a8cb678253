"""rlrun installs as a normal (non-editable) package with its configs inside, and runs from any directory; its wheel
holds rlrun only (the benchmarks are a project of their own, benchmarks/pyproject.toml)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _listed_packages(pyproject: Path) -> set[str]:
    text = pyproject.read_text()
    return set(re.findall(r'^\s+"([\w.]+)",$', text.split("packages = [", 1)[1].split("]", 1)[0], re.M))


def test_every_package_is_listed_in_pyproject() -> None:
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "rlrun").rglob("__init__.py")}
    assert found - _listed_packages(ROOT / "pyproject.toml") == set(), \
        "packages missing from pyproject.toml [tool.setuptools] packages"


def test_the_wheel_is_rlrun_and_the_benchmarks_are_a_project_of_their_own() -> None:
    """rlrun's pyproject lists rlrun's packages only; every package under benchmarks/ is listed by
    benchmarks/pyproject.toml (the rlrun-benchmarks project make install installs editable)."""
    assert all(p == "rlrun" or p.startswith("rlrun.") for p in _listed_packages(ROOT / "pyproject.toml"))
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "benchmarks").rglob("__init__.py")}
    assert found == _listed_packages(ROOT / "benchmarks" / "pyproject.toml")


def test_make_install_upgrades_pip_then_installs_torch_exactly() -> None:
    """The venv's bundled pip is old (known vulnerabilities): make install upgrades it first, then installs
    torch==2.13.0 exactly, then the package, then the benchmarks beside it."""
    recipe = (ROOT / "Makefile").read_text().split("$(STAMP): pyproject.toml", 1)[1].split("\n\n", 1)[0]
    steps = [line.strip() for line in recipe.splitlines()[1:]]
    assert steps[:4] == ["$(BIN)/python -m pip install -q --upgrade pip",
                         "$(BIN)/python -m pip install -q torch==2.13.0",
                         '$(BIN)/python -m pip install -q -e ".[dev]" $(if $(CONSTRAINTS),-c $(CONSTRAINTS))',
                         "$(BIN)/python -m pip install -q -e ./benchmarks $(if $(CONSTRAINTS),-c $(CONSTRAINTS))"]


def _editable(dist) -> bool:
    """Whether pip installed this distribution editable (PEP 660: its direct_url.json says so)."""
    import json

    direct = dist.read_text("direct_url.json")
    return bool(direct) and json.loads(direct).get("dir_info", {}).get("editable", False)


def test_the_constraints_file_pins_every_installed_package() -> None:
    """constraints.txt (what make install installs with) names every distribution of this environment at its
    installed version: a dependency added or moved without `make constraints CONSTRAINTS=` fails here."""
    import importlib.metadata as md
    import sysconfig

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not name==version"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version

    def canonical(d: md.Distribution) -> str:
        return re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower()

    # What the environment installs, in its site-packages: not what this process's sys.path shows, which grows with
    # what tests imported before (`import ray` puts ray/thirdparty_files, with its own psutil, on it).
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    dists = list(md.distributions(path=site))
    installed = {canonical(d): d.version for d in dists}
    # The checkout's own projects (rlrun, rlrun-benchmarks) are installed editable, which make constraints leaves out.
    for name in {canonical(d) for d in dists if _editable(d)} | {"pip"}:
        installed.pop(name, None)
    wrong = {k: (v, pins.get(k)) for k, v in installed.items() if pins.get(k) != v}
    assert not wrong, f"installed vs constraints.txt: {wrong}"


def test_ci_workflows_pin_actions_by_commit_and_only_read() -> None:
    """A tag can be moved to other code: every action a workflow uses is pinned by a full commit sha, and every
    workflow declares read-only permissions for its token."""
    import yaml

    workflows = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
    assert workflows
    for path in workflows:
        doc = yaml.safe_load(path.read_text())
        assert doc.get("permissions") == {"contents": "read"}, f"{path.name}: no read-only permissions block"
        for job in doc["jobs"].values():
            for step in job.get("steps", []):
                if "uses" in step:
                    assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), f"{path.name}: {step['uses']}"


def test_non_editable_install_ships_configs_and_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(ROOT)], check=True, capture_output=True)
    assert (site / "rlrun" / "conf" / "config.yaml").exists()
    assert not (site / "benchmarks").exists(), "the benchmarks are not part of rlrun's wheel"
    assert {p.name.split("-")[0] for p in site.glob("*.dist-info")} == {"rlrun"}
    assert (site / "rlrun" / "conf" / "algo" / "dqn.yaml").exists()
    shipped = {p.relative_to(site / "rlrun" / "conf") for p in (site / "rlrun" / "conf").rglob("*.yaml")}
    ours = {p.relative_to(ROOT / "conf") for p in (ROOT / "conf").rglob("*.yaml")}
    assert ours - shipped == set(), "config files missing from the wheel (pyproject package-data globs)"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = ("import sys, rlrun; print('FROM', rlrun.__file__); sys.argv = ['rlrun', '--cfg', 'job', 'seed=5']; "
            "from rlrun.app.cli import main; main()")
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True,
                          check=True)
    assert f"FROM {site}" in proc.stdout
    assert "seed: 5" in proc.stdout and "id: CartPole-v1" in proc.stdout
