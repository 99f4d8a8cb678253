"""Device strategies: on what a run computes (``device=cpu|cuda|auto|replicas``), independent of the algorithm.

- ``resolve_device(cfg)``: the learner's torch device, checked before anything is built (``device=cuda`` without
  CUDA, a bad precision or replica count, a device map naming CUDA without CUDA: a ConfigError).
- ``apply_device_strategy(cfg, algo)``: after the algorithm has built its agent: the per-component device map
  (``device.map``, rlrun.components.device_map), the update strategy (``device=replicas``: a synchronous
  data-parallel update, rlrun.execution.replicas; ``device.precision=bf16``: autocast), and ``device.compile``.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Callable

import torch

from rlrun.errors import ConfigError

log = logging.getLogger(__name__)

NAMES = ("cpu", "cuda", "auto", "replicas")
PRECISIONS = ("fp32", "bf16")


def _no_cuda(what: str) -> ConfigError:
    build = torch.version.cuda or "none (a CPU-only build)"
    return ConfigError(f"{what}: CUDA is not available here (torch {torch.__version__}, CUDA build: {build}). "
                       f"Use device=cpu, or device=auto to take a GPU only when one is present.")


def num_replicas(cfg: Any) -> int:
    """Replicas of ``device=replicas``: ``device.num_replicas``, or (0) one per visible CUDA device."""
    n = int(cfg.get("num_replicas", 0) or 0)  # declared >= 0 on DeviceConfig
    if n == 0:
        n = torch.cuda.device_count()
        if n == 0:
            raise ConfigError("device=replicas with device.num_replicas=0 means one replica per CUDA device, and "
                              "there is none here. Set device.num_replicas (e.g. 2: replicas run one after "
                              "another on the CPU).")
    return n


def resolve_device(cfg: Any) -> torch.device:
    """The torch device for a device config node; sets this process's torch thread count."""
    torch.set_num_threads(max(int(cfg.torch_threads), 1))
    name = str(cfg.name)
    precision = str(cfg.get("precision", "fp32"))  # declared fp32 | bf16 on DeviceConfig
    if name == "cpu":
        device = torch.device("cpu")
    elif name == "cuda":
        if not torch.cuda.is_available():
            raise _no_cuda("device=cuda")
        device = torch.device("cuda")
    elif name == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        log.info("device=auto chose %s", device)
    elif name == "replicas":
        n = num_replicas(cfg)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        log.info("device=replicas: %d replicas, run one after another on %s", n, device)
    else:
        raise ConfigError(f"device.name={name}: not one of {', '.join(NAMES)}.")
    if precision == "bf16" and device.type != "cuda":
        raise ConfigError(f"device.precision=bf16 is supported on CUDA only (bf16 autocast on this {device.type} "
                          f"is not checked for correctness or measured). Use device.precision=fp32 here.")
    for key, dev in (cfg.get("map") or {}).items():
        try:
            target = torch.device(str(dev))
        except RuntimeError as e:
            raise ConfigError(f"device.map.{key}={dev}: not a torch device ({e}).") from None
        if target.type == "cuda" and not torch.cuda.is_available():
            raise _no_cuda(f"device.map.{key}={dev}")
    return device


def apply_device_strategy(cfg: Any, algo: Any) -> None:
    """Apply the device map, the update strategy and compilation to ``algo.agent`` (built, on its device)."""
    agent = getattr(algo, "agent", None)
    name = str(cfg.name)
    precision = str(cfg.get("precision", "fp32"))
    mapping = dict(cfg.get("map") or {})
    device = torch.device(algo.device)
    if agent is None:
        if mapping or name == "replicas" or precision != "fp32" or cfg.get("compile"):
            raise ConfigError(f"{type(algo).__name__} has no agent component, so device.map, device=replicas, "
                              f"device.precision and device.compile do not apply to it.")
        return
    if mapping:
        from rlrun.components.device_map import apply_device_map

        placement = apply_device_map(agent, mapping, default=device)
        log.info("device map: %s", ", ".join(f"{k} on {v}" for k, v in placement.items()))
    if name == "replicas" or precision != "fp32":
        if not hasattr(agent, "update_strategy"):
            raise ConfigError(f"{type(agent).__name__} does not route its update through the device strategy, so "
                              f"device=replicas and device.precision=bf16 are not available for it (they are for "
                              f"algo=dqn, ppo, a2c). Use device=cpu|cuda|auto with device.precision=fp32.")
        from rlrun.execution.replicas import ReplicatedUpdate

        agent.update_strategy = ReplicatedUpdate(num_replicas(cfg) if name == "replicas" else 1,
                                                 torch.bfloat16 if precision == "bf16" else None, device.type)
    if cfg.get("compile"):
        compiled = compile_networks(agent)
        log.info("device.compile: torch.compile on %s", ", ".join(compiled) or "nothing (no networks)")


class CompiledOrEager:
    """A ``torch.compile``d function that falls back to the eager one, with a warning, the first time compiling
    or running it fails (e.g. no C++ compiler for the CPU backend, an unsupported op or platform)."""

    def __init__(self, fn: Callable[..., Any], name: str, **compile_kwargs: Any) -> None:
        self.eager, self.name = fn, name
        try:
            self.compiled: Callable[..., Any] | None = torch.compile(fn, **compile_kwargs)
        except Exception as e:  # noqa: BLE001 - any failure means: run eagerly
            self._fall_back(e)

    def _fall_back(self, error: BaseException) -> None:
        self.compiled = None
        warnings.warn(f"device.compile: torch.compile of {self.name} is not supported here "
                      f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}); "
                      f"running it eagerly", RuntimeWarning, stacklevel=3)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.compiled is not None:
            try:
                return self.compiled(*args, **kwargs)
            except Exception as e:  # noqa: BLE001
                self._fall_back(e)
        return self.eager(*args, **kwargs)


def compile_networks(agent: Any, **compile_kwargs: Any) -> list[str]:
    """``torch.compile`` the ``forward`` of each direct sub-component of ``agent`` that has parameters (its networks,
    target networks included: used by acting and by the update, forward and backward); return their names.
    ``compile_kwargs`` go to ``torch.compile`` (e.g. ``backend="eager"`` to check the tracing alone)."""
    names = []
    for child in agent._sub_components():
        if any(True for _ in child.parameters()):
            child.__dict__["forward"] = CompiledOrEager(child.forward, f"{child.name}.forward", **compile_kwargs)
            names.append(child.name)
    return names
