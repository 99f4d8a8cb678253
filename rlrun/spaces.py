"""Gymnasium spaces as rlrun's type system: batch/time ranks, sampling, nests, and conversion to torch.

A *space* describes one record (one observation, one action). Values that flow between components carry extra
leading ranks: a batch rank ``[B, ...]`` and, for sequences, a time rank first (``[T, B, ...]``, time-major).
``sample(space, batch_shape=(B,))`` draws such a value; ``check(space, value, batch_ranks)`` verifies one.

Nested spaces (``Dict``, ``Tuple``) map to nested Python containers (dict, tuple) of arrays or tensors;
``flatten_space``/``flatten``/``unflatten`` turn them into flat ``{"path/to/leaf": leaf}`` dicts and back, so that
networks and memories handle nests without hand-written splitting.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np
from gymnasium import spaces as gs

if TYPE_CHECKING:
    import torch

# torch is imported where a function needs it: the env factories import this module, and an env copy in a
# subprocess of its own (executor.vector_mode=async or pipelined: spawned) would otherwise import torch only to step
# a gymnasium env.

Space = gs.Space
MASK_KEY = "action_mask"
"""The leaf of a Dict observation that carries the legal actions (1 = legal, as PettingZoo's classic games give it):
rlrun/ops/action_mask.py masks the actions with it, rlrun/envs/action_masks.py moves an ``info`` mask into it."""
Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple = (
    gs.Box, gs.Discrete, gs.MultiDiscrete, gs.MultiBinary, gs.Dict, gs.Tuple,
)


@functools.cache
def _torch_dtypes() -> dict[np.dtype, torch.dtype]:
    import torch

    return {
        np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64, np.dtype(np.float16): torch.float16,
        np.dtype(np.uint8): torch.uint8, np.dtype(np.int8): torch.int8, np.dtype(np.int16): torch.int16,
        np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64, np.dtype(np.bool_): torch.bool,
    }


class SpaceError(ValueError):
    """A value or space that does not fit where it is used."""


def is_nested(space: Space) -> bool:
    return isinstance(space, (gs.Dict, gs.Tuple))


def shape(space: Space) -> tuple[int, ...]:
    """The record shape of a leaf space (without batch/time ranks)."""
    if isinstance(space, gs.Discrete):
        return ()
    if space.shape is None:
        raise SpaceError(f"{space} has no fixed shape")
    return tuple(space.shape)


def dtype(space: Space) -> torch.dtype:
    """The torch dtype values of a leaf space have (Discrete: int64)."""
    if isinstance(space, gs.Discrete):
        return _torch_dtypes()[np.dtype(np.int64)]
    return _torch_dtypes()[np.dtype(space.dtype)]


def flat_dim(space: Space) -> int:
    """Number of scalars in one record of a leaf space (a Discrete counts as one index)."""
    return int(np.prod(shape(space), dtype=np.int64)) if shape(space) else 1


def flatten_space(space: Space, prefix: str = "") -> "OrderedDict[str, Space]":
    """``{"a/b": leaf_space}`` for every leaf of a nested space (a leaf space maps to ``{"": space}``)."""
    out: "OrderedDict[str, Space]" = OrderedDict()
    if isinstance(space, gs.Dict):
        for key, sub in space.spaces.items():
            out.update(flatten_space(sub, f"{prefix}{key}/"))
    elif isinstance(space, gs.Tuple):
        for i, sub in enumerate(space.spaces):
            out.update(flatten_space(sub, f"{prefix}{i}/"))
    else:
        out[prefix.rstrip("/")] = space
    return out


def flatten(space: Space, value: Any) -> "OrderedDict[str, Any]":
    """Flatten a nested value that matches ``space`` into ``{"a/b": leaf_value}``."""
    out: "OrderedDict[str, Any]" = OrderedDict()
    _flatten_into(out, space, value, "")
    return out


# Module-level recursion, not nested closures: a closure that calls itself is a reference cycle (function -> cell
# -> function) holding what it captured, so the values (rollout arrays) would live on until the cyclic collector ran.
def _flatten_into(out: "OrderedDict[str, Any]", sp: Space, v: Any, prefix: str) -> None:
    if isinstance(sp, gs.Dict):
        for key, sub in sp.spaces.items():
            if key not in v:
                raise SpaceError(f"value has no key '{key}' required by {sp}")
            _flatten_into(out, sub, v[key], f"{prefix}{key}/")
    elif isinstance(sp, gs.Tuple):
        if len(v) != len(sp.spaces):
            raise SpaceError(f"value has {len(v)} items, {sp} needs {len(sp.spaces)}")
        for i, sub in enumerate(sp.spaces):
            _flatten_into(out, sub, v[i], f"{prefix}{i}/")
    else:
        out[prefix.rstrip("/")] = v


def unflatten(space: Space, flat: Mapping[str, Any]) -> Any:
    """Inverse of ``flatten``."""
    return _unflatten(space, flat, "")


def _unflatten(sp: Space, flat: Mapping[str, Any], prefix: str) -> Any:
    if isinstance(sp, gs.Dict):
        return {key: _unflatten(sub, flat, f"{prefix}{key}/") for key, sub in sp.spaces.items()}
    if isinstance(sp, gs.Tuple):
        return tuple(_unflatten(sub, flat, f"{prefix}{i}/") for i, sub in enumerate(sp.spaces))
    return flat[prefix.rstrip("/")]


def as_numpy(value: Any) -> np.ndarray:
    """One leaf (an array, a number, or a tensor on any device: detached and copied to the CPU) as a numpy array.
    Tensors are told by their ``detach`` method, so this module still imports no torch (see above)."""
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def cat(space: Space, values: Iterable[Any]) -> Any:
    """Values of ``space`` with a leading batch rank (tensors), joined along it leaf by leaf (``torch.cat``)."""
    import torch

    flats = [flatten(space, v) for v in values]
    return unflatten(space, {key: torch.cat([flat[key] for flat in flats]) for key in flats[0]})


def map_structure(fn: Any, space: Space, value: Any) -> Any:
    """Apply ``fn(leaf_space, leaf_value)`` to every leaf of a nested value."""
    flat = flatten(space, value)
    leaves = flatten_space(space)
    return unflatten(space, {k: fn(leaves[k], v) for k, v in flat.items()})


def sample(space: Space, batch_shape: Iterable[int] = (), seed: int | np.random.Generator | None = None) -> Any:
    """A value of ``space`` with leading ranks ``batch_shape`` (e.g. ``(B,)`` or ``(T, B)``), as numpy arrays."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    batch_shape = tuple(batch_shape)

    def leaf(sp: Space) -> np.ndarray:
        if isinstance(sp, gs.Discrete):
            return (sp.start + rng.integers(0, sp.n, size=batch_shape)).astype(np.int64)
        if isinstance(sp, gs.MultiDiscrete):
            return (rng.random(batch_shape + sp.shape) * sp.nvec).astype(sp.dtype)
        if isinstance(sp, gs.MultiBinary):
            return rng.integers(0, 2, size=batch_shape + tuple(sp.shape)).astype(sp.dtype)
        if isinstance(sp, gs.Box):
            low = np.where(np.isfinite(sp.low), sp.low, -1.0)
            high = np.where(np.isfinite(sp.high), sp.high, 1.0)
            if np.issubdtype(sp.dtype, np.integer):
                return rng.integers(low, high, size=batch_shape + sp.shape, endpoint=True).astype(sp.dtype)
            return rng.uniform(low, high, size=batch_shape + sp.shape).astype(sp.dtype)
        raise SpaceError(f"cannot sample {sp}")

    return unflatten(space, {k: leaf(sp) for k, sp in flatten_space(space).items()})


def to_torch(space: Space, value: Any, device: torch.device | str | None = None) -> Any:
    """Convert a (nested) numpy value to torch tensors of the space's dtypes, on ``device``."""
    import torch

    def conv(sp: Space, v: Any) -> torch.Tensor:
        t = v if isinstance(v, torch.Tensor) else torch.from_numpy(np.asarray(v))
        return t.to(device=device, dtype=dtype(sp), non_blocking=True)

    return map_structure(conv, space, value)


def check(space: Space, value: Any, batch_ranks: int = 1, where: str = "value") -> None:
    """Raise SpaceError naming ``where`` unless ``value`` fits ``space`` with ``batch_ranks`` leading ranks."""
    import torch

    leaves = flatten_space(space)
    for key, v in flatten(space, value).items():
        sp = leaves[key]
        name = f"{where}[{key}]" if key else where
        got_shape = tuple(v.shape)
        want = shape(sp)
        if len(got_shape) != batch_ranks + len(want) or got_shape[batch_ranks:] != want:
            raise SpaceError(f"{name} has shape {got_shape}, expected {batch_ranks} batch rank(s) + {want} "
                             f"for {sp}")
        got_dtype = v.dtype if isinstance(v, torch.Tensor) else _torch_dtypes().get(np.dtype(v.dtype))
        if got_dtype != dtype(sp):
            raise SpaceError(f"{name} has dtype {got_dtype}, expected {dtype(sp)} for {sp}")


def describe(space: Space) -> str:
    """A short text for a space, used in the component graph and error messages: ``Box(4,) float32``."""
    if isinstance(space, gs.Dict):
        return "Dict(" + ", ".join(f"{k}: {describe(s)}" for k, s in space.spaces.items()) + ")"
    if isinstance(space, gs.Tuple):
        return "Tuple(" + ", ".join(describe(s) for s in space.spaces) + ")"
    if isinstance(space, gs.Discrete):
        return f"Discrete({space.n})"
    return f"{type(space).__name__}{tuple(space.shape)} {np.dtype(space.dtype).name}"


def same(a: Space, b: Space) -> bool:
    """Spaces agree in structure, shapes and dtypes (bounds are not compared)."""
    fa, fb = flatten_space(a), flatten_space(b)
    if list(fa) != list(fb):
        return False
    for k in fa:
        sa, sb = fa[k], fb[k]
        if type(sa) is not type(sb) or shape(sa) != shape(sb) or dtype(sa) != dtype(sb):
            return False
        if isinstance(sa, gs.Discrete) and sa.n != sb.n:
            return False
    return True
