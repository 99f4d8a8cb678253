"""Device strategies: on what a run computes (``device=cpu|cuda|auto|replicas``), independent of the algorithm.

- :mod:`rlrun.devices.strategy`: ``resolve_device`` (the learner's torch device, checked before anything is built)
  and ``apply_device_strategy`` (after the agent is built: device map, update strategy, compile);
- :mod:`rlrun.devices.device_map`: per-component placement (``device.map``);
- :mod:`rlrun.devices.replicas`: the synchronous data-parallel update (``device=replicas``) and bf16 autocast;
- :mod:`rlrun.devices.compile`: ``device.compile`` with an eager fallback.
"""

from rlrun.devices.compile import CompiledOrEager, compile_networks
from rlrun.devices.strategy import apply_device_strategy, num_replicas, resolve_device

__all__ = ["CompiledOrEager", "apply_device_strategy", "compile_networks", "num_replicas", "resolve_device"]
