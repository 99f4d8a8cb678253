"""Per-component device placement (``device.map``) and the one place where data crosses devices: API calls.

``apply_device_map(agent, {"memory": "cpu", "q": "cuda"})`` moves each named component (its parameters and
buffers, with its sub-components) to its device; a component that is not named stays on its parent's device.
Every API method of every component of the tree then moves the tensors it is given to its component's device
before running (``move``): so data crosses devices only at API calls between components placed apart (the
declared edges), and a component computes where its parameters live. A CPU -> CUDA move goes through pinned
memory with ``non_blocking=True`` (the copy overlaps with the work already queued on the GPU).

Nothing changes for a tree without a device map: the API wrappers are set on the instances of a mapped tree only
(instance attributes shadowing the class's API methods), so unmapped components keep the direct call path.
Components know their placement (``component.placement``), which the component graph prints (``on <device>``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import torch

from rlrun.components.base import Component
from rlrun.errors import ConfigError


def move(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor in it (nested in dicts, lists, tuples and the fields of dataclasses, such as a
    learner's rollout) on ``device``; other leaves unchanged.

    A tensor already there is returned as it is (no copy); a dataclass holding tensors is copied with its fields
    moved. CPU -> CUDA copies are pinned and non-blocking.
    """
    if isinstance(value, torch.Tensor):
        if value.device == device:
            return value
        if device.type == "cuda" and value.device.type == "cpu":
            return value.pin_memory().to(device, non_blocking=True)
        return value.to(device)
    if isinstance(value, dict):
        return {k: move(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(move(v, device) for v in value)
    if _holds_tensors(value):  # a dataclass
        return dataclasses.replace(value, **{k: move(v, device) for k, v in _fields(value).items()})
    return value


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}


def _holds_tensors(value: Any) -> bool:
    """Whether a tensor is in ``value`` (nested as :func:`move` walks it): a dataclass without one (a config) is
    passed on as it is, not copied."""
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):
        return any(_holds_tensors(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_tensors(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(_holds_tensors(v) for v in _fields(value).values())
    return False


class _Placed:
    """An API method of a placed component: moves its tensor arguments to the component's device, then calls."""

    def __init__(self, component: Component, name: str, device: torch.device) -> None:
        self.component, self.name, self.device = component, name, device
        # name, docstring, signature (__wrapped__) and the API mark
        functools.update_wrapper(self, getattr(type(component), name))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # the class's method looked up at each call, so that an API trace's recorder (installed on the class for
        # the trace's block) sees the call
        method = getattr(type(self.component), self.name)
        return method(self.component, *move(args, self.device), **move(kwargs, self.device))


def component_paths(root: Component) -> dict[str, Component]:
    """Every component under ``root`` by dotted path of names (``q``, ``q.torso``, ``target_q.q_head``, ...)."""
    out: dict[str, Component] = {}

    def walk(c: Component, prefix: str) -> None:
        for child in c._sub_components():
            path = f"{prefix}.{child.name}" if prefix else child.name
            out[path] = child
            walk(child, path)

    walk(root, "")
    return out


def _lookup(root: Component, key: str) -> list[Component]:
    """The components ``key`` names: a dotted path, or a bare name (every component of that name)."""
    paths = component_paths(root)
    if key in paths:
        return [paths[key]]
    if key == root.name:
        return [root]
    named = [c for p, c in paths.items() if c.name == key]
    if not named:
        valid = sorted(set(paths) | {c.name for c in paths.values()} | {root.name})
        raise ConfigError(f"device.map: no component named '{key}' in {root.name}. Valid names: "
                          f"{', '.join(valid)}.")
    return named


def apply_device_map(root: Component, mapping: Mapping[str, Any],
                     default: torch.device | str | None = None) -> dict[str, torch.device]:
    """Place the components of a built ``root`` as ``mapping`` says (name or dotted path -> device); return the
    placement of every component by path (the root under its own name).

    ``default``: the device of ``root`` and of every component not under a mapped one (default: where ``root``
    is now). Raises ConfigError for a name that is no component (listing the valid ones) or a bad device string.
    """
    targets: dict[int, torch.device] = {}
    for key, dev in mapping.items():
        try:
            device = torch.device(str(dev))
        except RuntimeError as e:
            raise ConfigError(f"device.map.{key}={dev}: not a torch device ({e}).") from None
        for c in _lookup(root, str(key)):
            targets[id(c)] = device
    root_device = torch.device(default) if default is not None else root.device
    placement: dict[str, torch.device] = {}

    def place(c: Component, path: str, inherited: torch.device) -> None:
        device = targets.get(id(c), inherited)
        if id(c) in targets or c is root:
            c.to(device)  # its sub-components too; mapped ones below are moved again on their turn
        c.__dict__["placement"] = device
        for name in type(c).api_methods():
            c.__dict__[name] = _Placed(c, name, device)
        placement[path] = device
        for child in c._sub_components():
            place(child, f"{path}.{child.name}" if c is not root else child.name, device)

    place(root, root.name, root_device)
    return placement
