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


# What a reader would see broken, measured in the rendered page: the page wider than the screen, a table, code block
# or image cut off (wider than the screen or its box with no scroll bar to reach the rest), a key name in a table
# broken mid-word, a Sphinx role shown raw.
LAYOUT_JS = r"""
() => {
  const vw = window.innerWidth;
  const out = {page_overflow: document.documentElement.scrollWidth - vw, cut: [], broken: [], raw_roles: []};
  const scrolls = el => {
    for (let e = el; e; e = e.parentElement) {
      const s = getComputedStyle(e);
      if ((s.overflowX === 'auto' || s.overflowX === 'scroll') && e.scrollWidth > e.clientWidth) return true;
    }
    return false;
  };
  for (const el of document.querySelectorAll('.md-content table, .md-content pre, .md-content img')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0) continue;
    const hidden = el.scrollWidth > el.clientWidth + 1 && !scrolls(el) && getComputedStyle(el).overflowX !== 'visible';
    if ((r.right > vw + 1 && !scrolls(el)) || hidden) out.cut.push(el.tagName + ': ' + el.innerText.slice(0, 60));
  }
  for (const el of document.querySelectorAll('.md-content td code, .md-content th code')) {
    if (getComputedStyle(el).wordBreak === 'break-all') out.broken.push(el.innerText.slice(0, 40));
  }
  const text = document.querySelector('.md-content').innerText;
  for (const m of text.matchAll(/:(class|meth|func|attr|mod|data|obj):`/g)) out.raw_roles.push(m[0]);
  return out;
}"""
CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium (apt-get install chromium; .ci/run does)")
def test_every_page_fits_a_laptop_and_a_phone(site: Path):
    """Every page in headless Chromium at a laptop width and a phone width: nothing a reader cannot reach. The check
    itself must see a broken layout: the configuration reference with its tables' scroll boxes turned off."""
    import functools
    import http.server
    import threading

    playwright = pytest.importorskip("playwright.sync_api")  # the dev extra installs it
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pages = sorted(str(p.relative_to(site).parent) for p in site.rglob("index.html"))
    found = {}
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            for width, height in ((1366, 768), (390, 844)):
                page = browser.new_page(viewport={"width": width, "height": height})
                for path in pages:
                    page.goto(f"http://127.0.0.1:{server.server_port}/{'' if path == '.' else path + '/'}")
                    seen = page.evaluate(LAYOUT_JS)
                    if seen["page_overflow"] > 0 or seen["cut"] or seen["broken"] or seen["raw_roles"]:
                        found[f"{path} at {width} px"] = seen
                if width == 390:  # the control
                    page.goto(f"http://127.0.0.1:{server.server_port}/reference/configuration/")
                    page.add_style_tag(content=".md-typeset__scrollwrap, .md-typeset__table "
                                               "{overflow: visible !important}")
                    control = page.evaluate(LAYOUT_JS)
                    assert control["page_overflow"] > 0 and control["cut"], control
                page.close()
            browser.close()
    finally:
        server.shutdown()
    assert len(pages) >= 25 and not found, found
