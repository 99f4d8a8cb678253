"""The one place metrics go through: params once, metrics per report, a summary at the end, to every sink."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rlrun.redact import redact_text
from rlrun.registry import registry

log = logging.getLogger(__name__)


def warn(message: str) -> None:
    """A sink's warning: one line on stderr, like rlrun's errors (Hydra's logging sends log records to stdout); any
    URI in it without credentials (a library's error may quote the URI it was given)."""
    print(f"rlrun: warning: {redact_text(message)}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RunContext:
    """What a sink may need besides its own config node: where the run writes, its name, its env-step budget."""

    run_dir: Path
    run_name: str
    total_env_steps: int | None


class Sink(Protocol):
    """A metrics sink, registered as ``registry.register("logger", <name>, <class>)``; its config is
    ``logger.<name>`` (with an ``enabled`` key). ``keeps_artifacts``: it stores files with the run (log_artifact)."""

    keeps_artifacts: ClassVar[bool]

    @classmethod
    def from_config(cls, cfg: Any, context: RunContext) -> Sink: ...
    def log_params(self, params: dict[str, Any]) -> None: ...
    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Only called on sinks that declare ``keeps_artifacts``; others need not define it."""
    def log_videos(self, paths: list[Path], step: int) -> None:
        """Optional: an evaluation's episode videos (mp4) at its env step (eval.video); a sink without it
        shows no videos."""
    def close(self, summary: dict[str, Any], status: str) -> None: ...


class MetricsLogger:
    def __init__(self, sinks: list[Sink]) -> None:
        self.sinks = sinks

    @classmethod
    def from_config(cls, cfg: Any, run_dir: Path, run_name: str, total_env_steps: int | None) -> "MetricsLogger":
        """Every registered logger sink whose node ``logger.<name>`` is enabled, in registration order."""
        context = RunContext(Path(run_dir), run_name, total_env_steps)
        sinks: list[Sink] = []
        for name in registry.names("logger"):
            node = cfg.get(name) if hasattr(cfg, "get") else getattr(cfg, name, None)
            if node is not None and node.enabled:
                sinks.append(registry.get("logger", name).from_config(node, context))
        return cls(sinks)

    def sink(self, kind: type) -> Any:
        return next((s for s in self.sinks if isinstance(s, kind)), None)

    def log_params(self, params: dict[str, Any]) -> None:
        for s in self.sinks:
            s.log_params(params)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for s in self.sinks:
            s.log_metrics(metrics, step)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Store a file with the run (e.g. an exported model) in every sink that keeps artifacts (MLflow)."""
        for s in self.sinks:
            if s.keeps_artifacts:
                s.log_artifact(path, artifact_path)

    def log_videos(self, paths: list[Path], step: int) -> None:
        """An evaluation's mp4 files (``<run dir>/videos/eval-<step>/``) to every sink that shows videos."""
        for s in self.sinks:
            if hasattr(s, "log_videos"):
                s.log_videos(paths, step)

    def close(self, summary: dict[str, Any], status: str = "FINISHED") -> None:
        for s in self.sinks:
            try:
                s.close(summary, status)
            except Exception as e:  # noqa: BLE001 - one sink's failure must not lose the others' data
                log.warning("closing %s failed: %s", type(s).__name__, e)
