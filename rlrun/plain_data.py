"""Plain data: values in the forms ``torch.load(weights_only=True)`` accepts (tensors, numbers, strings, bytes,
lists, tuples, dicts), so that a checkpoint cannot run code when it is read.

Numpy arrays, numpy generators, deques and numpy scalars become tagged plain containers (``{"__ndarray__": bytes,
"dtype": ..., "shape": ...}`` etc.) through :func:`encode` and come back through :func:`decode`; :func:`rng_state`
and :func:`set_rng_state` take and restore the process's global generators (torch, CUDA, numpy, python).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import numpy as np
import torch

from rlrun.errors import CheckpointError


class NotPlain(TypeError):
    """A value with no plain-data form (an object, a file, a function): it is left out of env snapshots."""


_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def encode(value: Any) -> Any:
    """``value`` as plain data that ``torch.load(weights_only=True)`` reads back; raises :class:`NotPlain`."""
    if isinstance(value, np.generic):  # first: np.float64 is also a Python float, but pickles as a numpy global
        if isinstance(value, np.object_):
            raise NotPlain("a numpy object")
        return {"__npscalar__": bytes_to_tensor(np.asarray(value).tobytes()), "dtype": np.asarray(value).dtype.str}
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": bytes_to_tensor(value)}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise NotPlain("an object array")
        return {"__ndarray__": bytes_to_tensor(np.ascontiguousarray(value).tobytes()), "dtype": value.dtype.str,
                "shape": list(value.shape)}
    if isinstance(value, np.random.Generator):
        return {"__generator__": encode(value.bit_generator.state)}
    if isinstance(value, np.random.RandomState):
        return {"__randomstate__": encode(value.get_state())}
    if isinstance(value, deque):
        return {"__deque__": [encode(v) for v in value], "maxlen": value.maxlen}
    if isinstance(value, tuple):
        return tuple(encode(v) for v in value)
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, (str, int)) for k in value):
            raise NotPlain("a dict with keys that are not strings or ints")
        return {k: encode(v) for k, v in value.items()}
    raise NotPlain(type(value).__name__)


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`."""
    if isinstance(value, dict):
        if "__bytes__" in value:
            return tensor_to_bytes(value["__bytes__"])
        if "__ndarray__" in value:
            arr = np.frombuffer(tensor_to_bytes(value["__ndarray__"]), dtype=np.dtype(value["dtype"]))
            return arr.reshape(value["shape"]).copy()
        if "__npscalar__" in value:
            return np.frombuffer(tensor_to_bytes(value["__npscalar__"]), dtype=np.dtype(value["dtype"]))[0]
        if "__generator__" in value:
            return np.random.Generator(_bit_generator(decode(value["__generator__"])))
        if "__randomstate__" in value:
            rs = np.random.RandomState()
            rs.set_state(decode(value["__randomstate__"]))
            return rs
        if "__deque__" in value:
            return deque((decode(v) for v in value["__deque__"]), maxlen=value["maxlen"])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(decode(v) for v in value)
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def bytes_to_tensor(data: bytes | bytearray) -> torch.Tensor:
    """Bytes as a uint8 tensor: torch.save pickles some ``bytes`` (the empty one) through a global that a
    weights-only load refuses, a tensor always loads."""
    return torch.from_numpy(np.frombuffer(bytes(data), dtype=np.uint8).copy())


def tensor_to_bytes(t: torch.Tensor) -> bytes:
    return t.numpy().tobytes()


def _bit_generator(state: dict) -> np.random.BitGenerator:
    name = state.get("bit_generator")
    if name not in _BIT_GENERATORS:
        raise CheckpointError(f"unknown numpy bit generator {name!r} in the checkpoint")
    bg = getattr(np.random, name)()
    bg.state = state
    return bg


# ---------------------------------------------------------------------------------------------------- RNGs


def rng_state() -> dict[str, Any]:
    """The global generators: torch (CPU, and every CUDA device once CUDA is in use), numpy, python."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "numpy": encode(np.random.get_state()),
                             "python": encode(random.getstate())}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(decode(state["numpy"]))
    random.setstate(decode(state["python"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
