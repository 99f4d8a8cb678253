"""The same-run ratios every peers task reports: a peer's figure over rlrun's, for figures where more is worse
(time, start-up, memory), so that > 1 reads "rlrun is better" in every task's table."""

from __future__ import annotations

from typing import Any


def peer_over_rlrun(task: str, table: dict[str, dict[str, Any]], figures: dict[str, str]) -> dict[str, float]:
    """``ratio/<task>/<figure>/<peer>_over_rlrun`` = peer's ``table[peer][key]`` / rlrun's, for each ``figure: key``
    of ``figures`` where both are known and non-zero (no rlrun row: no ratios)."""
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
