"""The documentation site (mkdocs.yml, docs/) builds strictly, README stays one screen, and the generated pages are
there: the configuration reference (from the schemas) and the reproduction curves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).parent / "mkdocs"


def test_readme_is_one_screen():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the manual lives in docs/"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return out


def test_the_site_builds_strictly_with_every_page(site: Path):
    """Every page of the nav is built (a page missing from docs/ or a broken link fails the strict build)."""
    for page in ("index.html", "getting-started/index.html", "algorithms/ppo/index.html", "troubleshooting/index.html",
                 "results/reproduction/index.html", "reference/configuration/index.html", "python-api/index.html"):
        assert (site / page).is_file(), page


def test_the_generated_reference_and_curves_are_published(site: Path):
    """The reference page is the generated one (an anchor per option, the TRPO key added last), and the results
    page's curve links reach published PNGs."""
    html = (site / "reference" / "configuration" / "index.html").read_text()
    for anchor in ("algo-ppo", "algo-trpo", "env-mujoco", "executor-ray", "device-replicas", "logger-default", "run"):
        assert f'id="{anchor}"' in html, anchor
    assert "policy_update" in html
    for png in sorted((ROOT / "benchmarks" / "results" / "reproduce").glob("*.png")):
        assert (site / "assets" / "reproduce" / png.name).is_file(), png.name
    results = (site / "results" / "reproduction" / "index.html").read_text()
    assert "../../assets/reproduce/mujoco-HalfCheetah-v5.png" in results
    # a benchmark record the performance page names is a link to its published copy
    performance = (site / "results" / "performance" / "index.html").read_text()
    linked = re.findall(r'href="../../assets/results/([^"]+\.json)"', performance)
    assert linked and all((site / "assets" / "results" / name).is_file() for name in linked), linked


def test_the_api_page_renders_make_agent_from_its_docstring(site: Path):
    html = (site / "python-api" / "index.html").read_text()
    assert "make_agent" in html and "rlrun.make_agent" in html
