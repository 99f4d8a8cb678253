"""TensorBoard event files in ``<run dir>/tensorboard`` (torch's SummaryWriter; no TensorFlow needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rlrun.logging.fanout import RunContext


class TensorBoardSink:
    keeps_artifacts: ClassVar[bool] = False

    @classmethod
    def from_config(cls, cfg: Any, context: RunContext) -> TensorBoardSink:
        return cls(cfg, context.run_dir)

    def __init__(self, cfg: Any, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(run_dir) / "tensorboard"
        self.writer = SummaryWriter(log_dir=str(self.log_dir), flush_secs=int(cfg.flush_secs))
        self.params: dict[str, Any] = {}

    def log_params(self, params: dict[str, Any]) -> None:
        self.params = {k: v for k, v in params.items() if isinstance(v, (int, float, str, bool))}
        text = "\n".join(f"    {k}: {v}" for k, v in params.items())
        self.writer.add_text("config", text, 0)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)

    def close(self, summary: dict[str, Any], status: str) -> None:
        final = {f"hparam/{k}": float(v) for k, v in summary.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None}
        if self.params and final:
            self.writer.add_hparams(self.params, final, run_name="hparams")
        self.writer.close()
