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

Numpy values become plain data through :mod:`rlrun.plain_data`; the env copies' state is
:mod:`rlrun.envs.env_state`'s, read by each rollout worker (``RolloutWorker.get_state``). This module holds the
algorithm's part, the files (atomic writes, history, best) and resume.

Resume (``rlrun resume=<run dir> [compatible overrides]``) is prepared in :func:`prepare_resume_argv` before
Hydra starts (the checkpoint is read and checked first, so a corrupt one ends the command before anything is
written) and merged in :func:`resume_config`: the saved config wins, except for the keys in
:data:`RESUMABLE_KEYS`; overriding anything else with a different value is refused.
"""

from __future__ import annotations

import math
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any, Sequence

import torch
from omegaconf import DictConfig, OmegaConf

from rlrun.components.memories import ReplayMemory
from rlrun.components.prioritized_replay import PrioritizedReplayMemory
from rlrun.config import GROUPS, RayExecutorConfig, RunConfig, compose, schema_for
from rlrun.errors import CheckpointError, ConfigError

FORMAT = "rlrun-checkpoint"
VERSION = 2  # 2: the agents hold their torch.optim optimizers, whose state moved from the optimizer modules
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_NAME = "latest.pt"

# Keys a resumed run may change (prefixes of dotted keys): when to stop, how to checkpoint, where metrics go,
# which device computes, what is exported. Everything else (algo, env, executor, seed, run_name, ...) is what
# the run *is*, and is refused with a different value.
# record_dataset.id and .root: a resumed recording run writes its (longer) dataset under a new id, beside the first.
RESUMABLE_KEYS = ("stop", "checkpoint", "logger", "device", "return_window", "export", "eval", "resume",
                  "record_dataset.id", "record_dataset.root")


# ---------------------------------------------------------------------------------------------------- algorithm


def _memory_types() -> tuple[type, ...]:
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


class _KeepsWriteErrors:
    """The file ``torch.save`` writes through, keeping the first OSError a write met: torch's zip writer reports a
    failed write (a full disk) as a RuntimeError about stream positions, which names nothing a user can fix."""

    def __init__(self, f: Any) -> None:
        self.f, self.error = f, None

    def write(self, data: Any) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = self.error or e
            raise

    def flush(self) -> None:
        self.f.flush()


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically: into ``<path>.tmp``, flushed to disk, then renamed over ``path``; a crash while
    writing leaves the previous checkpoint whole (and perhaps a stray ``.tmp``, which is ignored)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    writer = None
    try:
        with open(tmp, "wb") as f:
            writer = _KeepsWriteErrors(f)
            torch.save({"format": FORMAT, "version": VERSION, **state}, writer)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as e:
        tmp.unlink(missing_ok=True)  # a full disk gets its space back; the previous checkpoint is untouched
        if writer is not None and writer.error is not None and not isinstance(e, OSError):
            raise writer.error from None  # the disk's error, not torch's report of the short write
        raise
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


def read_plain_data(path: str | Path, map_location: Any = "cpu") -> Any:
    """``torch.load(path, weights_only=True)``: tensors and plain data only, so reading a file cannot run code.
    A file holding other Python objects is refused, and an unreadable, truncated or corrupt one reported, each as
    one :class:`CheckpointError` line. Every torch file rlrun reads back goes through here (checkpoints,
    :meth:`rlrun.Agent.load`)."""
    path = Path(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
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


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint with :func:`read_plain_data` onto the CPU; raise :class:`CheckpointError` with a
    readable message for a missing, truncated, corrupt, foreign or unsafe file."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as e:
        raise CheckpointError(f"{path}: cannot be read ({e.strerror}).") from None
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key in _LOADED:
        return _LOADED[key]
    state = read_plain_data(path)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an rlrun checkpoint (no '{FORMAT}' marker).")
    if int(state.get("version", 0)) > VERSION:
        raise CheckpointError(f"{path}: written by a newer rlrun (checkpoint version {state['version']}; this "
                              f"rlrun reads up to {VERSION}). Upgrade rlrun.")
    if int(state.get("version", 0)) < VERSION:
        raise CheckpointError(f"{path}: written by an older rlrun (checkpoint version {state.get('version')}; this "
                              f"rlrun reads version {VERSION}, whose agents keep their optimizers' state "
                              f"elsewhere). Continue that run with the rlrun that wrote it, or start a new one.")
    for needed in ("algo", "config", "loop", "rng"):
        if needed not in state:
            raise CheckpointError(f"{path}: incomplete checkpoint (no '{needed}' entry).")
    _LOADED.clear()
    _LOADED[key] = state
    return state


# ---------------------------------------------------------------------------------------------------- resume


def _literal(data: Any) -> Any:
    """Saved config data with every ``${`` escaped, so that OmegaConf keeps it as text: a saved config was resolved
    when it was written, so an interpolation in it was put there by someone else, and resolving it
    (``${oc.env:SECRET}``) would put this machine's values into what the run records."""
    if isinstance(data, str):
        return data.replace("${", "\\${") if "${" in data else data
    if isinstance(data, dict):
        return {k: _literal(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_literal(v) for v in data]
    return data


def config_imports(config: Any) -> dict[str, str]:
    """The Python modules a config makes rlrun import, each with the setting that names it: a gymnasium
    ``env.id=module.path:EnvId-v0``, a PettingZoo ``env.id`` outside the known families, and
    ``executor.preload_modules`` beyond rlrun's own. Importing a module runs its code."""
    from rlrun.envs.pettingzoo_env import FAMILIES  # lazily: it imports gymnasium

    env = config.get("env") or {}
    env_id = str(env.get("id") or "")
    out: dict[str, str] = {}
    if str(env.get("name")) == "pettingzoo":
        if "." in env_id and not any(env_id.startswith(f + ".") for f in FAMILIES):
            out[env_id] = f"env.id={env_id}"
    elif ":" in env_id:
        out[env_id.partition(":")[0]] = f"env.id={env_id}"
    default_preload = RayExecutorConfig().preload_modules
    preload = [str(m) for m in (config.get("executor") or {}).get("preload_modules") or ()]
    for module in preload:
        if module not in default_preload:
            out[module] = f"executor.preload_modules=[{','.join(preload)}]"
    return out


def check_saved_imports(saved: Any, allowed: Any, how: str) -> None:
    """Refuse, with one :class:`ConfigError` line, a saved config that would import a module not in ``allowed``
    (the modules the user named): a checkpoint is data, and may come from anyone. ``how`` says how to name them."""
    asked = {m: where for m, where in config_imports(saved).items() if m not in set(allowed)}
    if asked:
        what = "; ".join(f"{m} ({where})" for m, where in asked.items())
        settings = " ".join(dict.fromkeys(f"'{w}'" for w in asked.values()))
        raise ConfigError(f"the checkpoint's config asks to import {what}, which runs that module's code; nothing "
                          f"was imported. If you trust this run directory, "
                          f"{how.format(modules=' '.join(asked), settings=settings)}.")


def check_saved_cluster(saved: Any) -> None:
    """Refuse a saved ``executor.address`` naming a Ray cluster the user has not named (``RAY_ADDRESS``): joining a
    cluster sends it the run's code and data and runs what it sends back, so a checkpoint must not choose one.
    ``auto`` (the cluster ``ray start`` made on this machine) and ``local`` stay."""
    address = (saved.get("executor") or {}).get("address")
    if address in (None, "", "auto", "local") or str(address) == os.environ.get("RAY_ADDRESS"):
        return
    raise ConfigError(f"the checkpoint's config joins the Ray cluster at executor.address={address}, which would "
                      f"run this run's code there and take what it sends back; nothing was started. If that is "
                      f"your cluster, name it: RAY_ADDRESS={address} rlrun resume=...")


def _key_allowed(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in RESUMABLE_KEYS)


def typed_config(saved: dict[str, Any]) -> DictConfig:
    """A saved (plain) config typed again by its schemas, so that the algorithm gets its config dataclass."""
    saved = _literal(saved)
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

    check_saved_imports(saved, config_imports(composed), "name it on the command line as the run has it: {settings}")
    check_saved_cluster(saved)
    cfg = typed_config(saved)
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    refused = []
    for o in parsed:
        key = o.key_or_group
        if key.startswith("hydra") or key == "resume" or key.split(".")[0] == "sweep":  # not the run's: its driver's
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
            f"{', '.join(k + ('' if k in ('return_window', 'resume') or '.' in k else '.*') for k in RESUMABLE_KEYS)}. "
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

    if any(a.startswith("-") for a in argv):
        return
    overrides = [a for a in argv if not a.lstrip("+~").startswith("hydra")]
    try:
        composed = compose(overrides)
    except (HydraException, OmegaConfBaseException, ConfigError):
        return
    resume_config(saved, composed, overrides)


def load_frozen_policies(algo: Any) -> None:
    """Load each frozen policy a multi-agent plan records (``algo.frozen``: ``checkpoint`` in a policy's entry) from
    its run's checkpoint: that run's policy ``source`` (a multi-agent run) or its agent (a single-agent run of the
    same algorithm and spaces). A no-op for other plans."""
    for frozen in getattr(algo, "frozen", ()):
        state = load_checkpoint(find_checkpoint(frozen.path))["algo"]
        if "policies" in state:
            if frozen.source not in state["policies"]:
                raise ConfigError(f"{frozen.where}: checkpoint {frozen.path} has no trained policy {frozen.source} "
                                  f"(it has {', '.join(state['policies']) or 'none'}); set checkpoint_policy.")
            state = state["policies"][frozen.source]
        try:
            frozen.agent.load_state_dict(state["agent"])
        except (KeyError, RuntimeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise CheckpointError(f"{frozen.where}: the checkpoint {frozen.path} does not fit this policy's algorithm "
                                  f"and spaces: {first}") from None
