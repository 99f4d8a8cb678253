"""What every task of ``rlrun-bench peers`` reads and writes the same way: a contender's JSON and CleanRL lines, the
peer/rlrun ratios (> 1 reads "rlrun is better" in every task's table), the flat figures of a task's table, and the
cells of its Markdown rows."""

from __future__ import annotations

import json
import re
from typing import Any

CLEANRL_LINE = re.compile(r"global_step=(\d+), episodic_return=\[?([-0-9.e+]+)")
"""An episode in CleanRL's stdout: its global step and its return."""


def json_object(line: str) -> dict[str, Any] | None:
    """A contender's ``{...}`` line as a dict; None for anything else it prints."""
    if not line.startswith("{"):
        return None
    try:
        d = json.loads(line)
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


def peer_over_rlrun(task: str, table: dict[str, dict[str, Any]], figures: dict[str, str]) -> dict[str, float]:
    """``ratio/<task>/<figure>/<peer>_over_rlrun`` = peer's ``table[peer][key]`` / rlrun's, for each ``figure: key``
    of ``figures`` where both are known and non-zero (no rlrun row: no ratios). For figures where more is worse
    (time, start-up, memory)."""
    out: dict[str, float] = {}
    ours = table.get("rlrun")
    if not ours:
        return out
    for peer, row in table.items():
        if peer == "rlrun":
            continue
        for figure, key in figures.items():
            if row.get(key) and ours.get(key):
                out[f"ratio/{task}/{figure}/{peer}_over_rlrun"] = round(row[key] / ours[key], 3)
    return out


def flat_figures(task: str, table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A task's ``{contender: {figure: value, "per_seed": {figure: [...]}}}`` as the result file's flat keys,
    ``<task>/<contender>/<figure>`` and ``<task>/<contender>/per_seed/<figure>``."""
    figures: dict[str, Any] = {}
    for name, row in table.items():
        for key, value in row.items():
            if key == "per_seed":
                figures.update({f"{task}/{name}/per_seed/{k}": v for k, v in value.items()})
            else:
                figures[f"{task}/{name}/{key}"] = value
    return figures


def cell(value: Any, digits: int = 1, thousands: bool = False) -> str:
    """A Markdown table cell: ``-`` for None, floats with ``digits`` decimals (and thousands separators)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"
    return str(value)
