"""Device strategies: which torch device a run computes on (``device=cpu|cuda|auto``)."""

from __future__ import annotations

import logging
from typing import Any

import torch

from rlrun.errors import ConfigError

log = logging.getLogger(__name__)


def resolve_device(cfg: Any) -> torch.device:
    """The torch device for a device config node; sets this process's torch thread count."""
    torch.set_num_threads(max(int(cfg.torch_threads), 1))
    name = str(cfg.name)
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            build = torch.version.cuda or "none (a CPU-only build)"
            raise ConfigError(f"device=cuda: CUDA is not available here (torch {torch.__version__}, CUDA build: "
                              f"{build}). Use device=cpu, or device=auto to take a GPU only when one is present.")
        return torch.device("cuda")
    if name == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        log.info("device=auto chose %s", device)
        return device
    raise ConfigError(f"device.name={name}: not one of cpu, cuda, auto.")
