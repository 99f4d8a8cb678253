"""Plain torch layers inside components, called as the functions their ``forward`` runs.

nn.Module's call path (``_wrapped_call_impl`` -> ``_call_impl``, its hook checks) costs ~1.3 us per layer, a third of
a small MLP's forward at acting sizes (CartPole's 4-64-64 torso at batch 8, in a tight loop: 16.3 us through
``nn.Sequential``, 10.8 us here). :func:`apply` runs ``nn.Linear``, ``nn.ReLU``, ``nn.Tanh`` and ``nn.ELU`` as
exactly those functions on the layer's own parameters (the same operations, so the same values and gradients; the
parameters read from ``_parameters``, where ``torch.func.functional_call`` puts its own),
and goes through the module's ``__call__`` where anything could observe the difference: hooks on the layer (or, for
an ``nn.Sequential``, on the sequence), global module hooks, or a tracer recording (``torch.jit.trace``,
TensorBoard's ``add_graph``). Any other module (a parametrized layer among them) is called as usual. The components'
own calls take the same shortcut (:meth:`rlrun.components.base.Component.__call__`).

:func:`apply_output` is for a network's output layers (the heads): under mixed precision (``device.precision=bf16``:
the update under ``torch.autocast``) they run in float32 on the features upcast, so the action values, the logits and
the log-probabilities an update compares with its behaviour policy's are not rounded to bfloat16 (~3 significant
digits), which on the CPU autocast would otherwise keep through ``log_softmax``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rlrun.components.base import module_call_path_needed, module_hooked

_LOW_PRECISION = (torch.bfloat16, torch.float16)


def _call(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """One unhooked layer: its function on its own parameters (read from ``_parameters``, as
    ``torch.func.functional_call`` sets them, without nn.Module's attribute lookup: ~0.3 us each), or its own call
    (other modules; a parametrized layer, whose class is not ``nn.Linear``)."""
    t = type(m)
    if t is nn.Linear:
        p = m._parameters
        return F.linear(x, p["weight"], p["bias"]) if "weight" in p else m(x)
    if t is nn.ReLU:
        return F.relu(x, inplace=m.inplace)
    if t is nn.Tanh:
        return torch.tanh(x)
    if t is nn.ELU:
        return F.elu(x, m.alpha, m.inplace)
    return m(x)


def apply(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``module(x)`` for a layer or an ``nn.Sequential`` of layers, without nn.Module's call path where nothing
    hooks or traces it (module docstring)."""
    if module_call_path_needed(module):
        return module(x)
    if type(module) is nn.Sequential:
        for layer in module._modules.values():
            x = layer(x) if module_hooked(layer) else _call(layer, x)
        return x
    return _call(module, x)


def apply_output(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """:func:`apply` for an output layer: in float32 where ``x`` comes from a torso run under autocast in a lower
    precision (module docstring); otherwise exactly :func:`apply`."""
    if x.dtype in _LOW_PRECISION:
        with torch.autocast(x.device.type, enabled=False):
            return apply(module, x.float())
    return apply(module, x)
