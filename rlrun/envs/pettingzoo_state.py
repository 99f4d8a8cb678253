"""The state of a PettingZoo env copy as plain data (rlrun.plain_data), so a multi-agent checkpoint continues its
episodes exactly, as rlrun/envs/env_state.py does for gymnasium envs.

A PettingZoo env keeps its state in Python objects below its wrappers: MPE's ``world`` with its agents and
landmarks (positions, velocities, communication), the agent selector of an AEC env, the board of a classic game.
:func:`pettingzoo_env_state` walks every wrapper layer (the parallel wrapper's ``aec_env``, then each ``env``)
and, below plain-data attributes, the objects they hold, breadth-first, each object once under the path where it
was first found, and where an object is referred to again, that path (renderers, fonts and the constructor's
pickling arguments skipped); :func:`set_pettingzoo_env_state` makes an env rebuilt from the same config share its
objects the same way and writes the values back (the checkpoint holds state, not structure).
"""

from __future__ import annotations

import types
from typing import Any

from rlrun.envs.env_state import restore_generator, restore_space_rng, space_rng
from rlrun.errors import CheckpointError
from rlrun.plain_data import NotPlain, decode, encode

SKIP = frozenset({"env", "aec_env", "viewer", "screen", "game_font", "renderer", "clock", "window", "metadata",
                  "render_mode", "_ezpickle_args", "_ezpickle_kwargs"})
"""Attributes that are structure, configuration or display, not state."""
MAX_DEPTH = 8


def _layers(env: Any) -> list[Any]:
    """The env and its wrapped layers, outermost first: a parallel wrapper's ``aec_env``, then each ``env``."""
    chain = [env]
    while True:
        inner = getattr(chain[-1], "aec_env", None) or getattr(chain[-1], "env", None)
        if inner is None or any(inner is c for c in chain):
            return chain
        chain.append(inner)


def _is_object(value: Any) -> bool:
    return (hasattr(value, "__dict__") and not callable(value)
            and not isinstance(value, (types.ModuleType, type, types.FunctionType)))


def object_graph_state(roots: list[Any]) -> dict[str, dict[str, Any]]:
    """``path -> state`` of every object reachable from ``roots`` (paths ``L0``, ``L0.world``,
    ``L0.world.landmarks[1]``, in breadth-first order): its plain-data attributes and space generators, and for
    each attribute that holds an object (alone or in a list) the path where that object was first found, so
    that objects referred to from several places (an MPE agent's goal is one of the landmarks) are restored as
    one object, shared as before."""
    import gymnasium as gym

    queue = [(f"L{i}", root) for i, root in enumerate(roots)]
    canonical = {id(root): path for path, root in queue}
    out: dict[str, dict[str, Any]] = {}

    def found(value: Any, child: str, depth: int) -> str | None:
        if id(value) in canonical:
            return canonical[id(value)]
        if depth >= MAX_DEPTH:
            return None
        canonical[id(value)] = child
        queue.append((child, value))
        return child

    while queue:
        path, obj = queue.pop(0)
        depth = path.count(".")
        entry: dict[str, Any] = {"class": f"{type(obj).__module__}.{type(obj).__qualname__}", "attrs": {},
                                 "spaces": {}, "refs": {}, "list_refs": {}}
        for key, value in vars(obj).items():
            if key in SKIP:
                continue
            if isinstance(value, gym.Space):
                entry["spaces"][key] = space_rng(value)
                continue
            try:
                entry["attrs"][key] = encode(value)
                continue
            except NotPlain:
                pass
            if _is_object(value):
                target = found(value, f"{path}.{key}", depth)
                if target is not None:
                    entry["refs"][key] = target
            elif isinstance(value, list) and value and all(_is_object(v) for v in value):
                targets = [found(v, f"{path}.{key}[{i}]", depth) for i, v in enumerate(value)]
                if all(t is not None for t in targets):
                    entry["list_refs"][key] = targets
        out[path] = entry
    return out


def set_object_graph_state(roots: list[Any], state: dict[str, dict[str, Any]]) -> None:
    """Write :func:`object_graph_state`'s values into the objects of an env rebuilt from the same config: each
    attribute first points at the object of its recorded path (shared objects become shared again), then every
    object gets its values."""
    objects = {f"L{i}": root for i, root in enumerate(roots)}
    for path, entry in state.items():  # breadth-first: a path is known before anything refers to it
        obj = objects.get(path)
        if obj is None:
            raise CheckpointError(f"the checkpoint's env holds {path}, which this env does not have; the env config "
                                  f"or PettingZoo version changed since it was written.")
        have = f"{type(obj).__module__}.{type(obj).__qualname__}"
        if have != entry["class"]:
            raise CheckpointError(f"the env holds a {have} at {path} where the checkpoint holds a {entry['class']}; "
                                  f"the env config or PettingZoo version changed since it was written.")
        for key, target in entry["refs"].items():
            if target == f"{path}.{key}":
                objects[target] = getattr(obj, key)
            else:
                setattr(obj, key, objects[target])
        for key, targets in entry["list_refs"].items():
            items = getattr(obj, key)
            if len(items) != len(targets):
                raise CheckpointError(f"the env's {path}.{key} has {len(items)} entries but the checkpoint holds "
                                      f"{len(targets)}; the env config changed since it was written.")
            for i, target in enumerate(targets):
                if target == f"{path}.{key}[{i}]":
                    objects[target] = items[i]
                else:
                    items[i] = objects[target]
    for path, entry in state.items():
        obj = objects[path]
        for key, encoded in entry["attrs"].items():
            if isinstance(encoded, dict) and "__generator__" in encoded:
                restore_generator(obj, key, encoded)  # in place: objects that share the generator keep sharing it
            else:
                setattr(obj, key, decode(encoded))
        for key, space_state in entry["spaces"].items():
            restore_space_rng(getattr(obj, key), space_state)


def pettingzoo_env_state(env: Any) -> dict[str, dict[str, Any]]:
    """The state of one PettingZoo env copy: its layers (outermost first) and the objects below them."""
    return object_graph_state(_layers(env))


def set_pettingzoo_env_state(env: Any, state: dict[str, dict[str, Any]]) -> None:
    chain = _layers(env)
    layers = sum(1 for path in state if "." not in path)
    if len(chain) != layers:
        raise CheckpointError(f"the env copies have {len(chain)} layers but the checkpoint holds {layers}; the "
                              f"env config or PettingZoo version changed since it was written.")
    set_object_graph_state(chain, state)
