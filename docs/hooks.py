"""MkDocs hooks of the docs site (mkdocs.yml ``hooks:``): the pages generated at build time, never kept by hand.

- ``reference/configuration.md``: the configuration reference, from the config schemas
  (:func:`rlrun.app.config_reference.reference_markdown`);
- ``assets/reproduce/*.png``, ``*.json``: the reproduction curves and each suite's record of every run that
  ``rlrun-bench reproduce`` writes to ``benchmarks/results/reproduce/``, and the references with their sources
  (``references.yaml``), published so the results page can link them;
- ``assets/results/*.png``: the charts beside the benchmark records in ``benchmarks/results/`` (``rlrun-bench
  peers`` writes one per task), which the performance page links;
- ``assets/results/*.json``: the benchmark records themselves; a results page that names one (```<date>-<commit>-
  <benchmark>.json```, with or without ``benchmarks/results/``) gets a link to it, so a site reader can open the
  record a figure comes from, not only a repository reader.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

from rlrun.app.config_reference import reference_markdown

ROOT = Path(__file__).resolve().parents[1]
CURVES = ROOT / "benchmarks" / "results" / "reproduce"
REFERENCES = ROOT / "benchmarks" / "reproduce_data" / "references.yaml"
CHARTS = ROOT / "benchmarks" / "results"
RECORD = re.compile(r"`(?:benchmarks/results/)?(\d{4}-\d{2}-\d{2}-[\w.-]+\.json)`")


def on_files(files: Files, config) -> Files:  # noqa: ANN001 - MkDocs' config object
    files.append(File.generated(config, "reference/configuration.md", content=reference_markdown()))
    for path in sorted([*CURVES.glob("*.png"), *CURVES.glob("*.json"), REFERENCES]):
        files.append(File.generated(config, f"assets/reproduce/{path.name}", abs_src_path=str(path)))
    for path in sorted([*CHARTS.glob("*.png"), *CHARTS.glob("*.json")]):
        files.append(File.generated(config, f"assets/results/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 - MkDocs' objects
    """On the results pages, each named benchmark record becomes a link to its published copy."""
    if not page.file.src_uri.startswith("results/"):
        return markdown

    def link(m: re.Match) -> str:
        name = m.group(1)
        return f"[`{name}`](../assets/results/{name})" if (CHARTS / name).exists() else m.group(0)

    return RECORD.sub(link, markdown)
