"""Device strategies: on what a run computes (``device=cpu|cuda|auto|replicas``), independent of the algorithm.

- ``resolve_device(cfg)``: the learner's torch device, checked before anything is built (``device=cuda`` without
  CUDA, a bad precision or replica count, a device map naming CUDA without CUDA: a ConfigError).
- ``apply_device_strategy(cfg, algo)``: after the algorithm has built its agent: the per-component device map
  (``device.map``, rlrun.devices.device_map), the update strategy (``device=replicas``: a synchronous
  data-parallel update, rlrun.devices.replicas; ``device.precision=bf16``: autocast, on CUDA or on a CPU with
  bfloat16 instructions, through the update strategy or the agent's ``update_autocast``), and ``device.compile``.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from rlrun.devices.compile import compile_networks
from rlrun.devices.cpu_memory import apply_cpu_memory
from rlrun.devices.device_map import apply_device_map
from rlrun.devices.replicas import ReplicatedUpdate
from rlrun.errors import ConfigError
from rlrun.registry import registry

log = logging.getLogger(__name__)

NAMES = ("cpu", "cuda", "auto", "replicas")
PRECISIONS = ("fp32", "bf16")


def _no_cuda(what: str) -> ConfigError:
    build = torch.version.cuda or "none (a CPU-only build)"
    return ConfigError(f"{what}: CUDA is not available here (torch {torch.__version__}, CUDA build: {build}). "
                       f"Use device=cpu, or device=auto to take a GPU only when one is present.")


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX tiles: oneDNN's bf16 convolutions and
    matrix products run on them); elsewhere torch emulates bf16, slower than fp32."""
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(bool(check()) for check in checks if check is not None)


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
    """The torch device for a device config node; sets this process's torch thread count and its C allocator's
    treatment of large blocks (``device.cpu_memory``, rlrun.devices.cpu_memory)."""
    torch.set_num_threads(max(int(cfg.torch_threads), 1))
    apply_cpu_memory(str(cfg.get("cpu_memory", "reuse")))  # declared reuse | system on DeviceConfig
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
    if precision == "bf16" and device.type == "cpu" and not cpu_has_bf16():
        raise ConfigError("device.precision=bf16 on the CPU needs bfloat16 instructions (AVX512-BF16 or AMX), "
                          "which this CPU lacks: emulated, bf16 is slower than fp32. Use device.precision=fp32 "
                          "here (or bf16 with device=cuda).")
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
        placement = apply_device_map(agent, mapping, default=device)
        log.info("device map: %s", ", ".join(f"{k} on {v}" for k, v in placement.items()))
    if name == "replicas" or precision != "fp32":
        if agent.routes_updates:
            agent.update_strategy = ReplicatedUpdate(num_replicas(cfg) if name == "replicas" else 1,
                                                     torch.bfloat16 if precision == "bf16" else None, device.type)
        elif agent.autocasts_updates and name != "replicas":
            agent.update_autocast = (device.type, torch.bfloat16)
        else:
            able = [n for n in registry.names("algo") if _declares(n, "routes_updates")]
            casting = [n for n in registry.names("algo") if _declares(n, "autocasts_updates")]
            refused, fix = (("device=replicas is", "device=cpu|cuda|auto.") if agent.autocasts_updates else
                            ("device=replicas and device.precision=bf16 are",
                             "device=cpu|cuda|auto with device.precision=fp32."))
            raise ConfigError(f"{type(agent).__name__} does not route its update through the device strategy, so "
                              f"{refused} not available for it (replicas are for algo={', '.join(able)}; bf16 also "
                              f"for algo={', '.join(casting)}). Use {fix}")
    if cfg.get("compile"):
        compiled = compile_networks(agent)
        log.info("device.compile: torch.compile on %s", ", ".join(compiled) or "nothing (no networks)")


def _declares(algo: str, capability: str) -> bool:
    """Whether algorithm ``algo``'s agent declares ``capability`` (for the error message's lists)."""
    agent_class = getattr(registry.get("algo", algo), "agent_class", None)
    return bool(getattr(agent_class, capability, False))
