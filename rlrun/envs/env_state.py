"""The state of an environment copy as plain data (rlrun.plain_data), so a checkpoint continues its episodes exactly:
every gymnasium wrapper layer's attributes (structure and configuration excluded), the env's and its spaces' numpy
generators, a MuJoCo model's physics (``mj_getState``) and an Atari emulator's state; and of a vector of copies.
Restoring needs the same env built from the same config (the checkpoint holds state, not structure).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlrun.errors import CheckpointError, one_line
from rlrun.plain_data import NotPlain, bytes_to_tensor, decode, encode, tensor_to_bytes

# Attributes that are structure or configuration, not state: never snapshot (the env is rebuilt from config).
_SKIP_ATTRS = frozenset({"env", "envs", "env_fns", "spec", "_saved_kwargs", "metadata", "_metadata", "render_mode",
                         "_cached_spec", "_ezpickle_args", "_ezpickle_kwargs", "autoreset_mode"})


def space_rng(space: Any) -> Any:
    """The numpy generator state of a gymnasium space (and of its sub-spaces, for Dict/Tuple)."""
    import gymnasium as gym

    rng = space._np_random
    out: dict[str, Any] = {"rng": encode(rng) if rng is not None else None}
    if isinstance(space, gym.spaces.Dict):
        out["children"] = {k: space_rng(s) for k, s in space.spaces.items()}
    elif isinstance(space, gym.spaces.Tuple):
        out["children"] = [space_rng(s) for s in space.spaces]
    return out


def restore_space_rng(space: Any, state: Any) -> None:
    if state["rng"] is not None:
        restore_generator(space, "_np_random", state["rng"])
    children = state.get("children")
    if isinstance(children, dict):
        for k, s in children.items():
            restore_space_rng(space.spaces[k], s)
    elif isinstance(children, list):
        for sub, s in zip(space.spaces, children, strict=True):
            restore_space_rng(sub, s)


def restore_generator(obj: Any, name: str, encoded: Any) -> None:
    """Restore a numpy generator attribute in place when there is one (objects that share it keep sharing)."""
    current = getattr(obj, name, None)
    if isinstance(current, np.random.Generator) and "__generator__" in encoded:
        current.bit_generator.state = decode(encoded["__generator__"])
    else:
        setattr(obj, name, decode(encoded))


def object_state(obj: Any) -> dict[str, Any]:
    """The plain-data attributes of one object (an env, a wrapper, a vector env): its mutable state.

    Generators, arrays, numbers, tuples, deques and containers of them are kept; attributes that hold other
    objects (the wrapped env, a renderer, a socket) are skipped; gymnasium spaces keep only their generators.
    """
    import gymnasium as gym

    attrs: dict[str, Any] = {}
    spaces: dict[str, Any] = {}
    for key, value in vars(obj).items():
        if key in _SKIP_ATTRS:
            continue
        if isinstance(value, gym.Space):
            spaces[key] = space_rng(value)
            continue
        try:
            attrs[key] = encode(value)
        except NotPlain:
            continue
    return {"class": f"{type(obj).__module__}.{type(obj).__qualname__}", "attrs": attrs, "spaces": spaces}


def set_object_state(obj: Any, state: dict[str, Any]) -> None:
    """Set the attributes :func:`object_state` saved. Only attributes the object already has and that a save
    keeps: a checkpoint may come from anyone, and must not replace a wrapper's inner env, its spaces or methods."""
    have = vars(obj)
    for key in state["attrs"]:  # all checked before any is set
        if key in _SKIP_ATTRS or key not in have:
            raise CheckpointError(f"the checkpoint sets attribute {key!r} of {type(obj).__qualname__}, which its "
                                  f"env state does not have; the env config or version changed since it was "
                                  f"written, or the file was tampered with.")
    for key, encoded in state["attrs"].items():
        if isinstance(encoded, dict) and "__generator__" in encoded:
            restore_generator(obj, key, encoded)
        else:
            setattr(obj, key, decode(encoded))
    for key, space_state in state["spaces"].items():
        space = getattr(obj, key, None)
        if space is not None:
            restore_space_rng(space, space_state)


def env_state(env: Any) -> list[dict[str, Any]]:
    """The state of one gymnasium env, outermost wrapper first, down to the unwrapped env.

    An env that can clone its full internal state (ale-py's ``clone_state(include_rng=True)``) also stores that
    (the emulator's RAM, frame counters and RNG), which its Python attributes do not show; so does a MuJoCo env
    (gymnasium's ``MujocoEnv``: its ``MjData`` integration state, see :func:`mujoco_state`). An env whose state
    lives in objects it holds (a game engine, a simulator handle) can say it itself: ``checkpoint_state()`` returns
    it as plain data and ``load_checkpoint_state(state)`` puts it back, after the attributes and generators.
    """
    layers = []
    while True:
        layers.append(object_state(env))
        if not hasattr(env, "env"):
            break
        env = env.env
    if callable(getattr(env, "clone_state", None)) and callable(getattr(env, "restore_state", None)):
        layers[-1]["emulator"] = bytes_to_tensor(env.clone_state(include_rng=True).__getstate__())
    physics = mujoco_state(env)
    if physics is not None:
        layers[-1]["mujoco"] = physics
    if callable(getattr(env, "checkpoint_state", None)):
        layers[-1]["own"] = encode(env.checkpoint_state())
    return layers


def _mujoco_of(env: Any) -> tuple[Any, Any, Any] | None:
    """``(mujoco module, model, data)`` of an unwrapped env that simulates with MuJoCo, else None."""
    model, data = getattr(env, "model", None), getattr(env, "data", None)
    if model is None or data is None or type(data).__name__ != "MjData":
        return None
    import mujoco

    return mujoco, model, data


def mujoco_state(env: Any) -> torch.Tensor | None:
    """The full integration state of a MuJoCo env's ``MjData`` (``mjSTATE_INTEGRATION``: time, qpos, qvel, act,
    warm-start accelerations, controls, applied forces, mocap, user data; what ``mj_step`` needs to continue
    bit-exactly) as a float64 tensor; None for other envs. Its Python attributes do not hold the physics."""
    found = _mujoco_of(env)
    if found is None:
        return None
    mujoco, model, data = found
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(model, spec), dtype=np.float64)
    mujoco.mj_getState(model, data, state, spec)
    return torch.from_numpy(state)


def set_mujoco_state(env: Any, state: torch.Tensor) -> None:
    found = _mujoco_of(env)
    if found is None:
        raise CheckpointError("the checkpoint holds MuJoCo physics state but the env copies do not simulate with "
                              "MuJoCo; the env config changed since it was written.")
    mujoco, model, data = found
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    values = np.ascontiguousarray(state.numpy(), dtype=np.float64)
    if values.size != mujoco.mj_stateSize(model, spec):
        raise CheckpointError(f"the checkpoint's MuJoCo state has {values.size} values but this model needs "
                              f"{mujoco.mj_stateSize(model, spec)}; the env or mujoco version changed.")
    mujoco.mj_setState(model, data, values, spec)
    mujoco.mj_forward(model, data)  # positions, contacts and sensors derived from the restored state


def set_env_state(env: Any, layers: list[dict[str, Any]]) -> None:
    chain = []
    e = env
    while True:
        chain.append(e)
        if not hasattr(e, "env"):
            break
        e = e.env
    have = [f"{type(x).__module__}.{type(x).__qualname__}" for x in chain]
    saved = [layer["class"] for layer in layers]
    if have != saved:
        raise CheckpointError(f"the env copies are built as {' > '.join(have)} but the checkpoint holds "
                              f"{' > '.join(saved)}; the env config or gymnasium version changed since it was "
                              f"written.")
    for obj, layer in zip(chain, layers, strict=True):
        try:
            set_object_state(obj, layer)
        except CheckpointError:
            raise
        except Exception as e:  # noqa: BLE001 - values that decode to something the env cannot take
            raise CheckpointError(f"the checkpoint's state of {type(obj).__qualname__} cannot be restored "
                                  f"({one_line(e)}); the file is damaged or was tampered with.") from None
    if "emulator" in layers[-1]:
        unwrapped = chain[-1]
        cls = type(unwrapped.clone_state())
        try:  # the emulator's own deserializer: damaged bytes raise anything from ValueError to SystemError
            state = cls.__new__(cls)
            state.__setstate__(tensor_to_bytes(layers[-1]["emulator"]))
            unwrapped.restore_state(state)
        except Exception as e:  # noqa: BLE001
            raise CheckpointError(f"the checkpoint's emulator state of {type(unwrapped).__qualname__} cannot be "
                                  f"restored ({one_line(e)}); the file is damaged or was tampered with.") from None
    if "mujoco" in layers[-1]:
        set_mujoco_state(chain[-1], layers[-1]["mujoco"])
    if "own" in layers[-1]:
        unwrapped = chain[-1]
        try:
            unwrapped.load_checkpoint_state(decode(layers[-1]["own"]))
        except Exception as e:  # noqa: BLE001 - an env's own state that it cannot take back
            raise CheckpointError(f"the checkpoint's state of {type(unwrapped).__qualname__} cannot be restored "
                                  f"({one_line(e)}); the env changed since it was written, or the file is "
                                  f"damaged.") from None


def vector_env_state(envs: Any) -> dict[str, Any] | None:
    """The state of a gymnasium vector env and of every env copy in it; None when the copies live in other
    processes (AsyncVectorEnv), whose state cannot be read from here.

    A batched vector env that holds every copy's state in its own attributes (``holds_copies_state``: the
    ``env.vectorization=vector_entry_point`` adapters of rlrun/envs/vector_entry_point.py) is saved as one env, its
    wrapper layers down to the batched env: ``{"batched": layers}`` (arrays, step counters, its generator)."""
    if getattr(envs, "holds_copies_state", False):
        return {"batched": env_state(envs)}
    inner = getattr(envs, "envs", None)
    if not isinstance(inner, list):
        return None
    return {"vector": object_state(envs), "envs": [env_state(e) for e in inner]}


def set_vector_env_state(envs: Any, state: dict[str, Any]) -> None:
    batched = getattr(envs, "holds_copies_state", False)
    if batched != ("batched" in state):
        have, saved = ("one batched vector env", "env copies of their own") if batched else \
            ("env copies of their own", "one batched vector env")
        raise CheckpointError(f"the run steps {have} but the checkpoint holds {saved}; env.vectorization changed "
                              f"since it was written.")
    if batched:
        saved_n = decode(state["batched"][-1]["attrs"].get("num_envs"))
        if saved_n != envs.num_envs:
            raise CheckpointError(f"the checkpoint holds {saved_n} env copies but the run has {envs.num_envs}")
        set_env_state(envs, state["batched"])
        return
    inner = envs.envs
    if len(inner) != len(state["envs"]):
        raise CheckpointError(f"the checkpoint holds {len(state['envs'])} env copies but the run has {len(inner)}")
    set_object_state(envs, state["vector"])
    for env, layers in zip(inner, state["envs"], strict=True):
        set_env_state(env, layers)
