"""A separate tiny package registers an algorithm through the `rlrun.plugins` entry point and ships its YAML."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import only_summary, run_rlrun

PLUGIN = Path(__file__).parent / "fixtures" / "rlrun_example_plugin"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin installed (a real pip install, built from its pyproject) into a directory of its own."""
    site = tmp_path_factory.mktemp("plugin_site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(PLUGIN)], check=True, capture_output=True)
    return site


def test_plugin_algorithm_runs_from_yaml(plugin_site: Path, workdir: Path) -> None:
    env = {"PYTHONPATH": str(plugin_site)}
    proc = run_rlrun(["--help"], workdir, env=env, check=True)
    assert re.search(r"^algo: .*\brandom\b", proc.stdout, re.M)  # the plugin's algo option is listed
    run_rlrun(["algo=random", "stop.env_steps=320", "logger=none", "algo.rollout_steps=8"], workdir, env=env,
              check=True)
    summary = only_summary(workdir / "outputs")
    assert summary["algo"] == "random" and summary["env_steps"] == 320
    assert 8 < summary["episode_return_mean"] < 60  # a random CartPole policy lasts ~22 steps


def test_plugin_algorithm_has_its_keys_in_rlrun_keys(plugin_site: Path, workdir: Path) -> None:
    """The reference (rlrun keys) finds a plugin's option through Hydra's search path and shows its schema."""
    proc = run_rlrun(["keys", "algo=random"], workdir, env={"PYTHONPATH": str(plugin_site)}, check=True)
    assert "algo.rollout_steps = " in proc.stdout


def test_plugin_schema_is_enforced(plugin_site: Path, workdir: Path) -> None:
    proc = run_rlrun(["algo=random", "algo.rollout_steps=many"], workdir, env={"PYTHONPATH": str(plugin_site)})
    assert proc.returncode == 2 and "algo.rollout_steps" in proc.stderr


def test_without_the_plugin_the_option_is_unknown(workdir: Path) -> None:
    proc = run_rlrun(["algo=random"], workdir)
    assert proc.returncode == 2 and "Could not find 'algo/random'" in proc.stderr
