"""Per-stage wall-clock timing (env step, inference, learn, ...), reported as seconds and shares of the total."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

from rlrun.metric_names import stage_seconds


class StageTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - start

    def add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] += seconds

    def report(self) -> dict[str, float]:
        """``time/<stage>_s`` (seconds since the last report) for every stage, then reset."""
        out = {stage_seconds(stage): s for stage, s in self.seconds.items()}
        self.seconds.clear()
        return out
