"""MkDocs hooks of the docs site (mkdocs.yml ``hooks:``): the pages generated at build time, never kept by hand.

- ``reference/configuration.md``: the configuration reference, from the config schemas
  (:func:`rlrun.app.config_reference.reference_markdown`);
- ``assets/reproduce/*.png``: the reproduction curves ``rlrun-bench reproduce`` writes to
  ``benchmarks/results/reproduce/``, published so the results page can link them;
- ``assets/results/*.png``: the charts beside the benchmark records in ``benchmarks/results/`` (``rlrun-bench
  peers`` writes one per task), which the performance page links.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

from rlrun.app.config_reference import reference_markdown

ROOT = Path(__file__).resolve().parents[1]
CURVES = ROOT / "benchmarks" / "results" / "reproduce"
CHARTS = ROOT / "benchmarks" / "results"


def on_files(files: Files, config) -> Files:  # noqa: ANN001 - MkDocs' config object
    files.append(File.generated(config, "reference/configuration.md", content=reference_markdown()))
    for png in sorted(CURVES.glob("*.png")):
        files.append(File.generated(config, f"assets/reproduce/{png.name}", abs_src_path=str(png)))
    for png in sorted(CHARTS.glob("*.png")):
        files.append(File.generated(config, f"assets/results/{png.name}", abs_src_path=str(png)))
    return files
