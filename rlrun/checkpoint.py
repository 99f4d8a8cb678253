"""Checkpoints: everything a run needs to continue exactly, written atomically and read without running code.

A checkpoint (``<run dir>/checkpoints/latest.pt``) is one ``torch.save`` file holding only plain data (tensors,
numbers, strings, bytes, lists, tuples, dicts), so it loads with ``torch.load(weights_only=True)``: a tampered file
cannot execute code, it is refused. Its keys:

- ``format``, ``version``: ``"rlrun-checkpoint"``, :data:`VERSION`;
- ``algo``: the algorithm's ``state_dict()`` (agent weights, optimizer, target networks, schedules, counters,
  the replay memory unless ``checkpoint.replay=false``); ``replay_included`` says which;
- ``executor``: the executor's ``state_dict()``: per rollout worker its current observations, episode
  accumulators and the full state of every env copy (each wrapper's attributes, the env's and the action space's
  numpy generators, an Atari emulator's state);
- ``loop``: the run loop's counters (env steps, episodes, iterations, wall time) and its return window;
- ``rng``: the global torch (and CUDA), numpy and python generators;
- ``config``: the composed config (resolved), which ``rlrun resume=<run dir>`` continues with;
- ``mlflow``: the MLflow run id and tracking URI, so a resumed run appends to the same MLflow run.

Numpy arrays, numpy generators, deques and numpy scalars are stored through :func:`encode` as tagged plain
containers (``{"__ndarray__": bytes, "dtype": ..., "shape": ...}`` etc.) and rebuilt by :func:`decode`.

Resume (``rlrun resume=<run dir> [compatible overrides]``) is prepared in :func:`prepare_resume_argv` before
Hydra starts (the checkpoint is read and checked first, so a corrupt one ends the command before anything is
written) and merged in :func:`resume_config`: the saved config wins, except for the keys in
:data:`RESUMABLE_KEYS`; overriding anything else with a different value is refused.
"""

from __future__ import annotations

import math
import os
import pickle
import random
import zipfile
from collections import deque
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlrun.errors import CheckpointError, ConfigError

FORMAT = "rlrun-checkpoint"
VERSION = 1
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_NAME = "latest.pt"

# Keys a resumed run may change (prefixes of dotted keys): when to stop, how to checkpoint, where metrics go,
# which device computes, what is exported. Everything else (algo, env, executor, seed, run_name, ...) is what
# the run *is*, and is refused with a different value.
RESUMABLE_KEYS = ("stop", "checkpoint", "logger", "device", "return_window", "export", "eval", "resume")


# ---------------------------------------------------------------------------------------------------- encoding


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


# ---------------------------------------------------------------------------------------------------- env state

# Attributes that are structure or configuration, not state: never snapshot (the env is rebuilt from config).
_SKIP_ATTRS = frozenset({"env", "envs", "env_fns", "spec", "_saved_kwargs", "metadata", "_metadata", "render_mode",
                         "_cached_spec", "_ezpickle_args", "_ezpickle_kwargs", "autoreset_mode"})


def _space_rng(space: Any) -> Any:
    """The numpy generator state of a gymnasium space (and of its sub-spaces, for Dict/Tuple)."""
    import gymnasium as gym

    rng = space._np_random
    out: dict[str, Any] = {"rng": encode(rng) if rng is not None else None}
    if isinstance(space, gym.spaces.Dict):
        out["children"] = {k: _space_rng(s) for k, s in space.spaces.items()}
    elif isinstance(space, gym.spaces.Tuple):
        out["children"] = [_space_rng(s) for s in space.spaces]
    return out


def _set_space_rng(space: Any, state: Any) -> None:
    if state["rng"] is not None:
        _set_generator(space, "_np_random", state["rng"])
    children = state.get("children")
    if isinstance(children, dict):
        for k, s in children.items():
            _set_space_rng(space.spaces[k], s)
    elif isinstance(children, list):
        for sub, s in zip(space.spaces, children, strict=True):
            _set_space_rng(sub, s)


def _set_generator(obj: Any, name: str, encoded: Any) -> None:
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
            spaces[key] = _space_rng(value)
            continue
        try:
            attrs[key] = encode(value)
        except NotPlain:
            continue
    return {"class": f"{type(obj).__module__}.{type(obj).__qualname__}", "attrs": attrs, "spaces": spaces}


def set_object_state(obj: Any, state: dict[str, Any]) -> None:
    for key, encoded in state["attrs"].items():
        if isinstance(encoded, dict) and "__generator__" in encoded:
            _set_generator(obj, key, encoded)
        else:
            setattr(obj, key, decode(encoded))
    for key, space_state in state["spaces"].items():
        space = getattr(obj, key, None)
        if space is not None:
            _set_space_rng(space, space_state)


def env_state(env: Any) -> list[dict[str, Any]]:
    """The state of one gymnasium env, outermost wrapper first, down to the unwrapped env.

    An env that can clone its full internal state (ale-py's ``clone_state(include_rng=True)``) also stores that
    (the emulator's RAM, frame counters and RNG), which its Python attributes do not show; so does a MuJoCo env
    (gymnasium's ``MujocoEnv``: its ``MjData`` integration state, see :func:`mujoco_state`).
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
        set_object_state(obj, layer)
    if "emulator" in layers[-1]:
        unwrapped = chain[-1]
        cls = type(unwrapped.clone_state())
        state = cls.__new__(cls)
        state.__setstate__(tensor_to_bytes(layers[-1]["emulator"]))
        unwrapped.restore_state(state)
    if "mujoco" in layers[-1]:
        set_mujoco_state(chain[-1], layers[-1]["mujoco"])


def vector_env_state(envs: Any) -> dict[str, Any] | None:
    """The state of a gymnasium vector env and of every env copy in it; None when the copies live in other
    processes (AsyncVectorEnv), whose state cannot be read from here."""
    inner = getattr(envs, "envs", None)
    if not isinstance(inner, list):
        return None
    return {"vector": object_state(envs), "envs": [env_state(e) for e in inner]}


def set_vector_env_state(envs: Any, state: dict[str, Any]) -> None:
    inner = envs.envs
    if len(inner) != len(state["envs"]):
        raise CheckpointError(f"the checkpoint holds {len(state['envs'])} env copies but the run has {len(inner)}")
    set_object_state(envs, state["vector"])
    for env, layers in zip(inner, state["envs"], strict=True):
        set_env_state(env, layers)


def worker_state(worker: Any) -> dict[str, Any]:
    """A rollout worker's state: current observations, episode accumulators, and its env copies' state.

    Uses ``worker.get_state()`` and ``worker.envs`` (``rlrun.execution.rollout_worker.RolloutWorker``).
    """
    own = worker.get_state()
    return {"obs": encode(own["obs"]), "returns": encode(own["returns"]), "lengths": encode(own["lengths"]),
            "envs": vector_env_state(worker.envs)}


def set_worker_state(worker: Any, state: dict[str, Any]) -> bool:
    """Restore a rollout worker; returns False (and leaves its freshly reset env copies as they are) when the
    checkpoint could not hold the env state (async env copies)."""
    if state["envs"] is None or vector_env_state(worker.envs) is None:
        return False
    set_vector_env_state(worker.envs, state["envs"])
    worker.set_state({"obs": decode(state["obs"]), "returns": decode(state["returns"]),
                      "lengths": decode(state["lengths"])})
    return True


# ---------------------------------------------------------------------------------------------------- algorithm


def _memory_types() -> tuple[type, ...]:
    from rlrun.components.memories import ReplayMemory
    from rlrun.components.prioritized_replay import PrioritizedReplayMemory

    return (ReplayMemory, PrioritizedReplayMemory)


def replay_prefixes(algo: Any) -> dict[str, tuple[str, ...]]:
    """For each module attribute of ``algo`` (e.g. ``agent``), the state-dict prefixes of its replay memories.

    Relies on the convention that ``algo.state_dict()[name]`` is ``getattr(algo, name).state_dict()``.
    """
    out: dict[str, tuple[str, ...]] = {}
    types = _memory_types()
    for name, value in vars(algo).items():
        if isinstance(value, torch.nn.Module):
            prefixes = tuple(f"{sub}." for sub, m in value.named_modules() if sub and isinstance(m, types))
            if prefixes:
                out[name] = prefixes
    return out


def strip_replay(algo: Any, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` (an ``algo.state_dict()``) without the entries of the replay memories."""
    state = dict(state)
    for name, prefixes in replay_prefixes(algo).items():
        sub = state.get(name)
        if isinstance(sub, dict):
            state[name] = {k: v for k, v in sub.items() if not k.startswith(prefixes)}
    return state


def algo_state(algo: Any, include_replay: bool = True) -> dict[str, Any]:
    """``algo.state_dict()``, without the replay memories' storage when ``include_replay`` is False."""
    state = algo.state_dict()
    return state if include_replay else strip_replay(algo, state)


def load_algo_state(algo: Any, state: dict[str, Any], replay_included: bool = True) -> None:
    """Load ``state`` into ``algo``; without replay, its memories stay as built (empty)."""
    if not replay_included:
        current = algo.state_dict()
        state = dict(state)
        for name in replay_prefixes(algo):
            if isinstance(state.get(name), dict) and isinstance(current.get(name), dict):
                state[name] = {**current[name], **state[name]}
    try:
        algo.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError, TypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"the checkpoint does not fit the algorithm built from its config: {first}") from None


def non_finite_parameters(algo: Any) -> list[str]:
    """Names of the floating-point parameters of ``algo``'s modules that hold NaN or infinity."""
    bad = []
    for name, value in vars(algo).items():
        if isinstance(value, torch.nn.Module):
            for pname, p in value.named_parameters():
                if p.is_floating_point() and not bool(torch.isfinite(p).all()):
                    bad.append(f"{name}.{pname}")
    return bad


# ---------------------------------------------------------------------------------------------------- files


def checkpoint_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / CHECKPOINT_NAME


def best_checkpoint_path(run_dir: str | Path) -> Path:
    """``<run dir>/checkpoints/best.pt``: the checkpoint of the best periodic evaluation (checkpoint.keep_best)."""
    return Path(run_dir) / CHECKPOINT_DIR / "best.pt"


def keep_history(latest: Path, env_steps: int, keep_last: int) -> list[Path]:
    """With ``keep_last`` N > 1, keep the checkpoint just written (``latest``) also as ``step-<env steps>.pt``
    beside it (a hard link where the file system allows: no copy) and delete all but the newest N - 1 of those;
    returns the kept history files, oldest first."""
    folder = Path(latest).parent
    if keep_last <= 1:
        return []
    target = folder / f"step-{env_steps:012d}.pt"
    tmp = target.with_name(target.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(latest, tmp)
    except OSError:
        import shutil

        shutil.copyfile(latest, tmp)
    os.replace(tmp, target)
    history = sorted(folder.glob("step-*.pt"))
    for old in history[:-(keep_last - 1)]:
        old.unlink(missing_ok=True)
    return history[-(keep_last - 1):]


def find_checkpoint(path: str | Path) -> Path:
    """The checkpoint file for a run directory or a checkpoint file path (relative to the working directory)."""
    p = Path(path).expanduser()
    if p.is_dir():
        candidate = checkpoint_path(p)
        if not candidate.is_file():
            raise CheckpointError(f"{p}: no checkpoint in this directory (looked for {CHECKPOINT_DIR}/"
                                  f"{CHECKPOINT_NAME}). Give a run directory written by rlrun, or a checkpoint file.")
        return candidate.resolve()
    if p.is_file():
        return p.resolve()
    raise CheckpointError(f"{path}: no such run directory or checkpoint file.")


def run_dir_of(checkpoint: Path) -> Path:
    """The run directory a checkpoint belongs to (``<run dir>/checkpoints/latest.pt``)."""
    checkpoint = Path(checkpoint).resolve()
    return checkpoint.parent.parent if checkpoint.parent.name == CHECKPOINT_DIR else checkpoint.parent


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically: into ``<path>.tmp``, flushed to disk, then renamed over ``path``; a crash while
    writing leaves the previous checkpoint whole (and perhaps a stray ``.tmp``, which is ignored)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save({"format": FORMAT, "version": VERSION, **state}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


# What torch's weights-only unpickler says when a file asks for an object it will not build (code could run);
# other unpickling errors are damage.
_UNSAFE_MARKERS = ("GLOBAL", "unrecognized function", "Can only create new object", "Can only build")
_LOADED: dict[tuple[str, int, int], dict[str, Any]] = {}  # one read per file version and process


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint with ``torch.load(weights_only=True)`` onto the CPU; raise :class:`CheckpointError` with a
    readable message for a missing, truncated, corrupt, foreign or unsafe file."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as e:
        raise CheckpointError(f"{path}: cannot be read ({e.strerror}).") from None
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key in _LOADED:
        return _LOADED[key]
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        text = " ".join(str(e).split())
        if any(m in text for m in _UNSAFE_MARKERS):
            raise CheckpointError(
                f"{path}: refused: the file holds Python objects other than plain data (tensors, numbers, "
                f"strings, lists, dicts), and loading those could run code. rlrun never writes such a file, so it "
                f"was not written by rlrun or has been tampered with.") from None
        detail = text.split("WeightsUnpickler error:")[-1].split("Check the documentation")[0].strip()
        raise CheckpointError(f"{path}: truncated or corrupt checkpoint (unreadable pickle data: {detail[:200]}). "
                              f"Use another copy or start a new run.") from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, KeyError, IndexError) as e:
        text = " ".join(str(e).split()) or type(e).__name__
        raise CheckpointError(f"{path}: truncated or corrupt checkpoint ({text[:200]}). Use another copy or "
                              f"start a new run.") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an rlrun checkpoint (no '{FORMAT}' marker).")
    if int(state.get("version", 0)) > VERSION:
        raise CheckpointError(f"{path}: written by a newer rlrun (checkpoint version {state['version']}; this "
                              f"rlrun reads up to {VERSION}). Upgrade rlrun.")
    for needed in ("algo", "config", "loop", "rng"):
        if needed not in state:
            raise CheckpointError(f"{path}: incomplete checkpoint (no '{needed}' entry).")
    _LOADED.clear()
    _LOADED[key] = state
    return state


# ---------------------------------------------------------------------------------------------------- resume


def _key_allowed(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in RESUMABLE_KEYS)


def typed_config(saved: dict[str, Any]) -> DictConfig:
    """A saved (plain) config typed again by its schemas, so that the algorithm gets its config dataclass."""
    from rlrun.config import GROUPS, RunConfig, schema_for

    plain = {k: v for k, v in saved.items() if k not in GROUPS}
    cfg = OmegaConf.merge(OmegaConf.structured(RunConfig), plain)
    for group in GROUPS:
        node = OmegaConf.create(saved.get(group) or {})
        cfg[group] = OmegaConf.merge(OmegaConf.structured(schema_for(group, node)), node)
    return cfg


def resume_config(saved: dict[str, Any], composed: DictConfig, overrides: Sequence[str]) -> DictConfig:
    """The config of a resumed run: the saved one, with the user's compatible overrides applied.

    ``composed`` is the config Hydra composed from the command line (defaults + ``overrides``); the value of each
    overridden key is taken from it. An override of a key outside :data:`RESUMABLE_KEYS` is refused with a
    :class:`ConfigError` unless it equals the saved value.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = typed_config(saved)
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    refused = []
    for o in parsed:
        key = o.key_or_group
        if key.startswith("hydra") or key == "resume":
            continue
        if o.is_delete():
            raise ConfigError(f"resume: ~{key} deletes a key, which a resumed run cannot do. Start a new run.")
        new = OmegaConf.select(composed, key, default=None)
        if _key_allowed(key):
            value = OmegaConf.to_container(new, resolve=True) if isinstance(new, DictConfig) else new
            OmegaConf.update(cfg, key, value, merge=False, force_add=True)
            continue
        old = OmegaConf.select(cfg, key, default=None)
        plain_old = OmegaConf.to_container(old, resolve=True) if isinstance(old, DictConfig) else old
        plain_new = OmegaConf.to_container(new, resolve=True) if isinstance(new, DictConfig) else new
        if o.is_add() or not _same_value(plain_old, plain_new):
            refused.append(f"{o.input_line} (the run has {key}={_show(plain_old)})")
    if refused:
        raise ConfigError(
            f"resume: {'; '.join(refused)}: a resumed run keeps its algorithm, environment, executor, seed and run "
            f"name, so it can continue exactly. Overrides a resume accepts: "
            f"{', '.join(k + ('' if k in ('return_window', 'resume') else '.*') for k in RESUMABLE_KEYS)}. "
            f"To change anything else, start a new run.")
    cfg.resume = composed.get("resume")
    return cfg


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return a == b or (math.isnan(a) and math.isnan(float(b)))
    return a == b


def _show(value: Any) -> str:
    if isinstance(value, dict):
        name = value.get("name")
        return f"<{name} ...>" if name is not None else "{...}"
    return str(value)


def _resume_arg(argv: Sequence[str]) -> tuple[int, str] | None:
    for i, a in enumerate(argv):
        if a.startswith("resume=") or a.startswith("+resume=") or a.startswith("++resume="):
            return i, a.split("=", 1)[1]
    return None


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def prepare_resume_argv(argv: list[str]) -> list[str]:
    """Before Hydra starts: for ``resume=<run dir or checkpoint>``, read and check the checkpoint (a bad one ends
    here, before anything is written), and point Hydra's run directory at the saved run without rewriting its
    ``.hydra/`` files. Returns argv unchanged when there is no ``resume=``."""
    found = _resume_arg(argv)
    if found is None:
        return argv
    index, value = found
    if value.strip("'\"") in ("", "null", "None"):
        return argv
    if any(a in ("-m", "--multirun") for a in argv):
        raise ConfigError("resume=... continues one run; it cannot be combined with -m/--multirun.")
    path = find_checkpoint(value.strip("'\""))
    state = load_checkpoint(path)
    _check_overrides_early(state["config"], argv)
    run_dir = run_dir_of(path)
    out = list(argv)
    out[index] = f"resume={_quote(str(path))}"
    out += [f"hydra.run.dir={_quote(str(run_dir))}", "hydra.output_subdir=null"]
    return out


def _check_overrides_early(saved: dict[str, Any], argv: Sequence[str]) -> None:
    """Refuse an incompatible override before Hydra starts (and so before it writes its log into the run
    directory). Overrides that need Hydra's command-line options to compose (``--config-dir``) are left to the
    same check in the run itself."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from rlrun.graph_command import compose

    if any(a.startswith("-") for a in argv):
        return
    overrides = [a for a in argv if not a.lstrip("+~").startswith("hydra")]
    try:
        composed = compose(overrides)
    except (HydraException, OmegaConfBaseException, ConfigError):
        return
    resume_config(saved, composed, overrides)
