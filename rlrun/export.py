"""``rlrun export <run dir or checkpoint> [--format torchscript|onnx ...] [--out DIR]``: the acting policy as a
standalone model: observations in, greedy actions out (the policy's ``get_actions(obs, explore=False)``).

- TorchScript (``policy.pt``): ``torch.jit.trace`` then ``torch.jit.freeze``, so the file holds only what acting
  uses (no replay memory, no target network, no optimizer); load it with ``torch.jit.load`` and call it on a batch
  of observations ``[B, *obs_shape]``. A recurrent policy (``algo.recurrent``) takes and returns its state:
  ``policy(obs, *state) -> (actions, *next_state)``, the state zeros ``[B, H]`` at every episode start.
- ONNX (``policy.onnx``, one self-contained file): ``torch.onnx.export``, input ``obs`` with a dynamic batch
  dimension, output ``actions``; needs the ``export`` extra (``pip install 'rlrun[export]'``: onnx, onnxscript,
  and onnxruntime to run it). Only for a single-array observation space.

A run exports TorchScript by itself when it ends (``export.formats``, default ``[torchscript]``) into
``<run dir>/export/``. This module also restores a checkpoint into a live algorithm without env workers
(:func:`restore`), which ``rlrun eval`` uses too.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
from torch import nn

from rlrun import checkpoint as ckpt
from rlrun import spaces as sp
from rlrun.errors import ConfigError, RlrunError, one_line
from rlrun.execution.timing import StageTimer
from rlrun.registry import registry

FORMATS = {"torchscript": "policy.pt", "onnx": "policy.onnx"}


class GreedyPolicy(nn.Module):
    """Observations -> greedy actions: the acting policy without exploration, as a plain ``nn.Module``."""

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, obs: Any) -> torch.Tensor:
        return self.policy.get_actions(obs, explore=False)


class RecurrentGreedyPolicy(nn.Module):
    """``(obs, state_0, state_1, ...) -> (greedy actions, next state_0, ...)``: a recurrent policy's greedy step
    from the state its caller holds (zeros, the policy's ``initial_state(B)``, at every episode start)."""

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, obs: Any, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.policy.greedy_step(obs, state)


def greedy_module(policy: nn.Module, obs: Any) -> tuple[nn.Module, tuple[Any, ...]]:
    """The module to export and its example inputs: :class:`GreedyPolicy` on ``(obs,)``, or for a policy with a
    recurrent state (an ``initial_state`` that is not None) :class:`RecurrentGreedyPolicy` on ``(obs, *zeros)``."""
    initial = getattr(policy, "initial_state", None)
    state = initial(_batch_of(obs)) if callable(initial) else None
    if state is None:
        return GreedyPolicy(policy).eval(), (obs,)
    return RecurrentGreedyPolicy(policy).eval(), (obs, *state)


def _batch_of(obs: Any) -> int:
    leaf = obs
    while isinstance(leaf, (dict, tuple, list)):
        leaf = next(iter(leaf.values())) if isinstance(leaf, dict) else leaf[0]
    return int(leaf.shape[0])


def example_obs(space: sp.Space, batch: int = 2, seed: int = 0, device: str | torch.device = "cpu") -> Any:
    """A batch of observations sampled from ``space``, as torch tensors of the space's dtypes."""
    return sp.to_torch(space, sp.sample(space, (batch,), seed=seed), device)


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise RlrunError(f"export format {fmt!r}: not one of {', '.join(FORMATS)}.")


def export_torchscript(policy: nn.Module, obs_space: sp.Space, path: Path) -> Path:
    """Trace and freeze ``GreedyPolicy(policy)`` on a sample batch and save it (atomically) to ``path``."""
    module, inputs = greedy_module(policy, example_obs(obs_space, device=_device_of(policy)))
    try:
        # torch 2.13 marks torch.jit deprecated (in favour of torch.export); it still works and is what C++
        # (libtorch) and older deployments load.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            traced = torch.jit.trace(module, inputs, check_trace=False, strict=False)
            frozen = torch.jit.freeze(traced, optimize_numerics=False)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            torch.jit.save(frozen, str(tmp))
    except Exception as e:  # noqa: BLE001 - tracing errors are many and deep; one line for the user
        raise RlrunError(f"TorchScript export failed: {one_line(e, 400)}") from None
    os.replace(tmp, path)
    return path


def export_onnx(policy: nn.Module, obs_space: sp.Space, path: Path) -> Path:
    """Export ``GreedyPolicy(policy)`` with ``torch.onnx.export`` (input ``obs``, dynamic batch; output
    ``actions``) to one self-contained ``.onnx`` file."""
    if sp.is_nested(obs_space):
        raise RlrunError(f"ONNX export needs a single-array observation space, but this env's is "
                         f"{sp.describe(obs_space)}; use --format torchscript.")
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as e:
        raise RlrunError(f"ONNX export needs the export extra ({e.name} is not installed): "
                         f"pip install 'rlrun[export]'") from None
    module, inputs = greedy_module(policy, example_obs(obs_space, device=_device_of(policy)))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    batch = torch.export.Dim("batch")
    states = [f"state_{i}" for i in range(len(inputs) - 1)]  # a recurrent policy's state in and out
    dynamic: dict[str, Any] = {"obs": {0: batch}}
    if states:
        dynamic["state"] = tuple({0: batch} for _ in states)
    try:
        with _quiet_onnx(), torch.no_grad():
            torch.onnx.export(module, inputs, str(tmp), input_names=["obs", *states],
                              output_names=["actions", *(f"next_{n}" for n in states)],
                              dynamic_shapes=dynamic, dynamo=True, external_data=False, verbose=False)
    except Exception as e:  # noqa: BLE001
        tmp.unlink(missing_ok=True)
        raise RlrunError(f"ONNX export failed: {one_line(e, 400)}") from None
    os.replace(tmp, path)
    return path


def policy_dir(out_dir: Path, policy_id: str) -> Path:
    """``out_dir/<policy id>``, a multi-agent policy's export directory, refused unless it is a directory directly
    inside ``out_dir``: a policy id comes from a config, perhaps a checkpoint's, and must not name a path."""
    target = Path(out_dir) / str(policy_id)
    if target.resolve().parent != Path(out_dir).resolve():
        raise ConfigError(f"policy id {policy_id!r}: not a plain name (letters, digits, _ and -), so its export "
                          f"directory would be outside {out_dir}; nothing was written.")
    return target


def export_policy(policy: nn.Module, obs_space_or_spec: Any, out_dir: Path, formats: Sequence[str]) -> list[Path]:
    """Export ``policy`` in each of ``formats`` into ``out_dir`` (``policy.pt``, ``policy.onnx``)."""
    space = getattr(obs_space_or_spec, "observation_space", obs_space_or_spec)
    for fmt in formats:
        _check_format(fmt)
    paths = []
    for fmt in formats:
        target = Path(out_dir) / FORMATS[fmt]
        paths.append(export_torchscript(policy, space, target) if fmt == "torchscript"
                     else export_onnx(policy, space, target))
    return paths


def _device_of(module: nn.Module) -> torch.device:
    p = next(module.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


@contextlib.contextmanager
def _quiet_onnx() -> Iterator[None]:
    """torch.onnx's dynamo exporter logs progress and optional-op warnings (torchvision) to stdout/stderr."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    devnull = open(os.devnull, "w")  # noqa: SIM115
    try:
        with contextlib.redirect_stdout(devnull), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        devnull.close()
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)



# ---------------------------------------------------------------------------------------------------- restore


class _NoWorkers:
    """The worker set of an algorithm restored for inference: no env copies."""

    workers: list = []
    num_envs = 0
    num_workers = 0

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        raise RlrunError("this algorithm was restored for inference (rlrun eval/export) and has no env workers")

    sample_async = sample

    def drain(self) -> list:
        return []

    def sync_weights(self, weights: Any = None, worker_ids: Any = None) -> None:
        pass

    def worker_pids(self) -> list[int]:
        return []

    def stop(self) -> None:
        pass


class _NoReplay:
    """The replay shard set of an algorithm restored for inference (Ape-X): no memory; a checkpoint's replay
    contents are not loaded (acting does not need them)."""

    num_shards = 0

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        raise RlrunError("this algorithm was restored for inference (rlrun eval/export) and has no replay memory")

    add = sample_async = update_priorities = sample

    def size(self) -> int:
        return 0

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Any) -> None:
        pass

    def shard_pids(self) -> list[int]:
        return []

    def stop(self) -> None:
        pass


class _NoEnvExecutor:
    """An executor that builds no env workers: enough to construct an algorithm and load its weights."""

    def __init__(self) -> None:
        self.timer = StageTimer()

    num_workers = 1  # what a plan may read before building its worker set (rlrun/execution/worker_set.py)
    num_envs_per_worker = 1

    def worker_set(self, policy: Any, device: Any = "cpu", policy_factory: Any = None, **_: Any) -> _NoWorkers:
        return _NoWorkers()

    def replay_shards(self, factory: Any, num_shards: int) -> _NoReplay:
        return _NoReplay()

    def metrics(self) -> dict[str, float]:
        return {}

    def stop(self) -> None:
        pass


@dataclass
class Restored:
    """A checkpoint loaded into a live algorithm (no env workers): its config, env factory and acting policy."""

    cfg: Any
    run_dir: Path
    checkpoint: Path
    state: dict[str, Any]
    algo: Any
    env_factory: Any

    @property
    def spec(self) -> Any:
        return self.env_factory.spec

    @property
    def env_steps(self) -> int:
        return int(self.state["loop"]["env_steps"])

    @property
    def progress(self) -> str:
        """Where the checkpoint was taken: ``env step N``, or for an offline run (it takes none) ``gradient step N``."""
        if self.cfg.get("data") is not None:
            return f"gradient step {int(self.state['loop'].get('gradient_steps', 0))}"
        return f"env step {self.env_steps}"

    def policy(self) -> nn.Module:
        return self.algo.acting_policy()

    def close(self) -> None:
        self.algo.stop()


def restore(path: str | Path, device: str = "cpu", allow_imports: Sequence[str] = ()) -> Restored:
    """Load the checkpoint of a run directory (or a checkpoint file) into its algorithm, built on ``device``
    without env workers; the replay memory is not loaded (acting does not need it). A module the saved config
    would import (``env.id=module:Env``, ...) is imported only if it is in ``allow_imports``, else a
    :class:`~rlrun.errors.ConfigError` names it."""
    from omegaconf import OmegaConf

    file = ckpt.find_checkpoint(path)
    state = ckpt.load_checkpoint(file)
    ckpt.check_saved_imports(state["config"], allow_imports, "repeat the command with --allow-import MODULE for each "
                                                             "of: {modules}")
    cfg = ckpt.typed_config(state["config"])
    torch.set_num_threads(max(int(cfg.device.get("torch_threads", 1)), 1))
    from rlrun.algos.base import build_plan  # the algorithms load only when a checkpoint is restored

    env_factory = registry.build("env", cfg.env.name, cfg.env)
    algo = build_plan(OmegaConf.to_object(cfg.algo), env_factory, _NoEnvExecutor(), torch.device(device),
                      int(cfg.seed))
    ckpt.load_frozen_policies(algo)
    ckpt.load_algo_state(algo, ckpt.strip_replay(algo, state["algo"]), replay_included=False)
    return Restored(cfg, ckpt.run_dir_of(file), file, state, algo, env_factory)


# ---------------------------------------------------------------------------------------------------- command


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="rlrun export", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", help="a run directory (its checkpoints/latest.pt) or a checkpoint file")
    parser.add_argument("--format", dest="formats", action="append", choices=sorted(FORMATS),
                        help="torchscript (default) or onnx; repeat for both")
    parser.add_argument("--out", type=Path, help="output directory (default: <run dir>/export)")
    parser.add_argument("--allow-import", dest="allow_imports", action="append", default=[], metavar="MODULE",
                        help="let the checkpoint's config import MODULE (env.id=MODULE:Env, ...): only for a "
                             "run directory you trust; repeat for several")
    args = parser.parse_args(list(argv))
    restored = restore(args.target, allow_imports=args.allow_imports)
    try:
        out = args.out or restored.run_dir / "export"
        formats = args.formats or ["torchscript"]
        per_policy = getattr(restored.algo, "exported_policies", None)  # multi-agent: a directory per policy
        if per_policy is not None:
            paths = [p for pid, (policy, pspec) in per_policy().items()
                     for p in export_policy(policy, pspec, policy_dir(out, pid), formats)]
        else:
            paths = export_policy(restored.policy(), restored.spec, out, formats)
    finally:
        restored.close()
    for p in paths:
        sys.stdout.write(f"wrote {p} (greedy policy of {restored.cfg.algo.name} on {restored.spec.id}, "
                         f"checkpoint at {restored.progress})\n")
