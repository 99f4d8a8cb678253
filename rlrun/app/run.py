"""The run loop: build the objects a config names, call the plan's ``training_step`` until a stop condition,
report metrics, write checkpoints, export the policy and write ``summary.json``.

``summary.json`` (in the run directory) is a contract read by tests and CI benchmark jobs; its keys:
env_steps, gradient_steps (as the plan reports them; 0 where it does not), frames, episodes, episode_return_mean
(last ``return_window`` episodes), games, game_score_mean (raw score of the last ``return_window`` whole games,
Atari; null for envs without games), frames_per_second, env_steps_per_second, wall_time_s, stop_reason (env_steps |
gradient_steps | wall_time_s | episode_return_mean | interrupted | error), error (the message when stop_reason is
error, else null), mlflow_run_id, run_name, run_dir, algo, env, seed, checkpoint, export (the exported policy
files); multi-agent runs add policy_return_mean (policy id -> the mean return of its agents' last episodes), and
their episode_return_mean is per agent (every agent's episodes); offline runs add data (the dataset's id and
provenance).

``protocol.json`` (in the run directory, whatever the loggers) is the env protocol card
(``env_factory.protocol_card()``, ``rlrun/envs/protocol.py``) plus the run's ``seed`` and ``return_window``;
MLflow stores it as an artifact.

Metrics per report: the plan's (``IterationResult.metrics``), the executor's (``executor.metrics()``: per-stage
seconds ``time/<stage>_s``, ``executor/worker_restarts``), the counters, ``episode/return_mean`` and, for envs that
report whole games (Atari), ``episode/game_score_mean``, ``episode/game_length_mean`` and ``counters/games``.

Checkpoints (``rlrun/checkpoint.py``) are written every ``checkpoint.interval_env_steps`` env steps and/or
``checkpoint.interval_minutes`` minutes and at the end; never with non-finite parameters, so after a divergence
the last good one is kept. ``resume=<run dir>`` continues a run from its checkpoint: the same config (with
compatible overrides), the same run directory, TensorBoard log and MLflow run, and, on the CPU with the local
executor, the same numbers as a run that was never stopped.

Interrupts: the first SIGINT/SIGTERM stops the run after the current iteration (so its final checkpoint is
consistent); a second one stops it at once, keeping the last checkpoint written before.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import math
import os
import random
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlrun import checkpoint as ckpt
from rlrun import plain_data
from rlrun import spaces as sp
from rlrun.algos.base import build_plan
from rlrun.app.evaluate import make_env
from rlrun.app.periodic_eval import PeriodicEvaluator
from rlrun.app.run_lock import run_directory_lock
from rlrun.app.startup_gc import resume_collection
from rlrun.config import validate
from rlrun.devices import apply_device_strategy, resolve_device
from rlrun.errors import PlacementError, RlrunError, one_line
from rlrun.execution.dataset import check_new_id, dataset_params, datasets_root, load_minari, write_minari
from rlrun.execution.dataset_recorder import EpisodeRecorder
from rlrun.export import export_policy, policy_dir
from rlrun.logging.fanout import MetricsLogger
from rlrun.logging.mlflow_sink import default_tracking_uri, mlflow_run_in
from rlrun.metric_names import (
    ENV_STEPS,
    ENV_STEPS_PER_S,
    EPISODES,
    FRAMES,
    FRAMES_PER_S,
    GAME_LENGTH_MEAN,
    GAME_SCORE_MEAN,
    GAMES,
    GRADIENT_STEPS,
    LENGTH_MEAN,
    RETURN_MEAN,
    RETURN_TOTAL,
)
from rlrun.redact import redact_file, redact_strings, redact_uri
from rlrun.registry import registry

log = logging.getLogger(__name__)



class StorageError(RlrunError):
    """The run directory's disk refused a write (full, over quota, read-only): the run stops with its last good
    checkpoint whole, to be resumed once there is room."""

    exit_code = 2


class NonFiniteError(RlrunError):
    """A loss or the parameters became NaN or infinite: the run stops and keeps its last good checkpoint."""

    exit_code = 1


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def flatten_config(cfg: DictConfig) -> dict[str, Any]:
    """``{"algo.lr": 0.001, ...}`` for every leaf of the composed config (lists kept as their text), URIs without
    their credentials (:func:`~rlrun.redact.redact_strings`): these are recorded as params and hparams."""
    out: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            out[prefix.rstrip(".")] = node if isinstance(node, (int, float, str, bool)) or node is None else str(node)

    walk(redact_strings(OmegaConf.to_container(cfg, resolve=True)), "")
    return out


def redact_hydra_files(run_dir: Path) -> None:
    """Hydra writes the command line and the composed config into ``<run dir>/.hydra/`` before the run starts;
    rewrite those copies without the credentials of any URI in them (:func:`~rlrun.redact.redact_text`), as
    every other record of the run is. The run itself keeps the config it was given."""
    for path in sorted((run_dir / ".hydra").glob("*.yaml")):
        redact_file(path)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # the errors of a write that room on the disk would let through


def _free_space(folder: Path) -> str:
    """``N MiB free on <folder>``, as the disk says."""
    import shutil

    try:
        return f"{shutil.disk_usage(folder).free / 2**20:.1f} MiB free on {folder}"
    except OSError:
        return f"free space on {folder} unknown"


@dataclass(frozen=True)
class StopConditions:
    """``stop.*``, resolved once: the loop checks them after every ``training_step()``, which for a replay plan is
    every env step, and reading an OmegaConf node parses its interpolation again on each access, which costs more
    than a MuJoCo env step."""

    env_steps: int | None = None
    gradient_steps: int | None = None
    wall_time_s: float | None = None
    episode_return_mean: float | None = None

    @classmethod
    def from_config(cls, stop: DictConfig) -> StopConditions:
        values = OmegaConf.to_container(stop, resolve=True)
        return cls(**{f.name: values.get(f.name) for f in fields(cls)})


class RunLoop:
    """Counts env steps, gradient steps, episodes and iterations, checks stop conditions, reports metrics. An
    offline run (``data=...``) takes no env steps: its progress (:attr:`step`, the x-axis of its metrics and
    checkpoints) is gradient steps."""

    def __init__(self, cfg: DictConfig, frame_skip: int) -> None:
        self.stop = StopConditions.from_config(cfg.stop)
        self.offline = cfg.get("data") is not None
        self.gradient_steps = 0  # as the plan reports them (learn/gradient_steps, a running count)
        self.frame_skip = frame_skip
        self.returns: deque[float] = deque(maxlen=int(cfg.return_window))
        self.lengths: deque[int] = deque(maxlen=int(cfg.return_window))
        self.game_scores: deque[float] = deque(maxlen=int(cfg.return_window))
        self.game_lengths: deque[int] = deque(maxlen=int(cfg.return_window))
        self.env_steps = 0
        self.episodes = 0
        self.return_total = 0.0  # every finished episode's return, summed: span means (Dopamine's iterations)
        self.games = 0
        self.iterations = 0  # training_step() calls
        self.start = time.perf_counter()
        self._report_steps = 0
        self._report_time = self.start

    @property
    def step(self) -> int:
        """The run's progress: env steps, or gradient steps for an offline run."""
        return self.gradient_steps if self.offline else self.env_steps

    @property
    def wall_time_s(self) -> float:
        return time.perf_counter() - self.start

    def return_mean(self) -> float | None:
        return float(np.mean(self.returns)) if self.returns else None

    def game_score_mean(self) -> float | None:
        return float(np.mean(self.game_scores)) if self.game_scores else None

    def add(self, result: Any) -> None:
        self.iterations += 1
        self.env_steps += result.env_steps
        self.gradient_steps = int(result.metrics.get(GRADIENT_STEPS, self.gradient_steps))
        self.episodes += len(result.episode_returns)
        self.return_total += float(sum(result.episode_returns))
        self.returns.extend(result.episode_returns)
        self.lengths.extend(result.episode_lengths)
        scores = getattr(result, "game_scores", None) or []  # optional: a plugin's result may have none
        self.games += len(scores)
        self.game_scores.extend(scores)
        self.game_lengths.extend(getattr(result, "game_lengths", None) or [])

    def stop_reason(self) -> str | None:
        s = self.stop
        if s.env_steps is not None and self.env_steps >= s.env_steps:
            return "env_steps"
        if s.gradient_steps is not None and self.gradient_steps >= s.gradient_steps:
            return "gradient_steps"
        if s.wall_time_s is not None and self.wall_time_s >= s.wall_time_s:
            return "wall_time_s"
        if (s.episode_return_mean is not None and len(self.returns) == self.returns.maxlen
                and self.return_mean() >= s.episode_return_mean):
            return "episode_return_mean"
        return None

    def report(self, metrics: dict[str, float]) -> dict[str, float]:
        now = time.perf_counter()
        dt = max(now - self._report_time, 1e-9)
        steps_per_s = (self.env_steps - self._report_steps) / dt
        self._report_time, self._report_steps = now, self.env_steps
        out = {ENV_STEPS: self.env_steps, FRAMES: self.env_steps * self.frame_skip, EPISODES: self.episodes,
               RETURN_TOTAL: self.return_total, ENV_STEPS_PER_S: steps_per_s,
               FRAMES_PER_S: steps_per_s * self.frame_skip, **metrics}
        if self.returns:
            out[RETURN_MEAN] = self.return_mean()
            out[LENGTH_MEAN] = float(np.mean(self.lengths))
        if self.games:
            out[GAMES] = self.games
            out[GAME_SCORE_MEAN] = self.game_score_mean()
            if self.game_lengths:
                out[GAME_LENGTH_MEAN] = float(np.mean(self.game_lengths))
        return out

    def state_dict(self) -> dict[str, Any]:
        """Counters and the return window; ``wall_time_s`` is the time trained so far (a resume continues it)."""
        return {"env_steps": self.env_steps, "gradient_steps": self.gradient_steps, "episodes": self.episodes,
                "return_total": self.return_total, "iterations": self.iterations,
                "returns": [float(r) for r in self.returns], "lengths": [int(n) for n in self.lengths],
                "games": self.games, "game_scores": [float(r) for r in self.game_scores],
                "game_lengths": [int(n) for n in self.game_lengths], "wall_time_s": self.wall_time_s}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env_steps = int(state["env_steps"])
        self.gradient_steps = int(state.get("gradient_steps", 0))  # absent from checkpoints of older rlrun
        self.episodes = int(state["episodes"])
        self.return_total = float(state.get("return_total", 0.0))  # absent from checkpoints of older rlrun
        self.iterations = int(state["iterations"])
        self.returns.clear()
        self.returns.extend(state["returns"])
        self.lengths.clear()
        self.lengths.extend(state["lengths"])
        self.games = int(state.get("games", 0))  # absent from checkpoints written before game scores were kept
        self.game_scores.clear()
        self.game_scores.extend(state.get("game_scores", []))
        self.game_lengths.clear()
        self.game_lengths.extend(state.get("game_lengths", []))
        self.start = time.perf_counter() - float(state["wall_time_s"])
        self._report_steps, self._report_time = self.env_steps, time.perf_counter()


class CheckpointSchedule:
    """When the next periodic checkpoint is due: every ``interval_env_steps`` env steps (at multiples of it, so a
    resumed run keeps the same schedule) and/or every ``interval_minutes`` of wall-clock time."""

    def __init__(self, cfg: Any, env_steps: int) -> None:
        self.steps = cfg.interval_env_steps
        self.seconds = None if cfg.interval_minutes is None else float(cfg.interval_minutes) * 60.0
        self._next_steps = None if self.steps is None else (env_steps // self.steps + 1) * self.steps
        self._last_time = time.monotonic()

    def due(self, env_steps: int) -> bool:
        if self._next_steps is not None and env_steps >= self._next_steps:
            return True
        return self.seconds is not None and time.monotonic() - self._last_time >= self.seconds

    def written(self, env_steps: int) -> None:
        if self.steps is not None:
            self._next_steps = (env_steps // self.steps + 1) * self.steps
        self._last_time = time.monotonic()


class _StopRequest:
    """SIGINT/SIGTERM while training: the first asks the loop to stop after the current iteration, a second one
    raises KeyboardInterrupt at once. Installed only in the main thread (signal handlers can live nowhere else)."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "_StopRequest":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name
        log.warning("%s: stopping after this iteration (again to stop at once)", self.requested)

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _task_overrides() -> list[str]:
    """The command line's config overrides when running under Hydra (empty otherwise)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


# Overrides the default run name shows already (algo, env id, seed), and those that say where a run's outputs go
# and which it keeps rather than how it learns.
_NOT_IN_NAME = {"algo", "env", "env.id", "seed", "run_name", "resume", "logger", "checkpoint", "export"}
_NOT_IN_NAME_PREFIXES = ("hydra.", "logger.", "checkpoint.", "export.")


def tracking_name(run_name: str, overrides: Sequence[str]) -> str:
    """The name the trackers show for a run: ``run_name``, followed by the command line's other overrides unless the
    command set ``run_name`` itself (``dqn-CartPole-v1-seed0 algo.lr=0.003``), so that runs which differ in a key are
    told apart in MLflow's run list (their run directories already differ by time). Not in it: what the default name
    shows, and the ``logger``, ``checkpoint``, ``export`` and ``hydra`` keys."""
    keys = [o.lstrip("+~").partition("=")[0] for o in overrides]
    if "run_name" in keys:
        return run_name
    shown = [o.lstrip("+") for o, k in zip(overrides, keys, strict=True)
             if not (k in _NOT_IN_NAME or k.startswith(_NOT_IN_NAME_PREFIXES))]
    name = " ".join([run_name, *shown])
    return name if len(name) <= 250 else name[:249] + "…"  # MLflow's limit on a run name's length


def _resumed_config(cfg: DictConfig, overrides: Sequence[str] | None) -> tuple[DictConfig, Path, dict[str, Any]]:
    """The config, run directory and checkpoint state of ``resume=<run dir or checkpoint>``."""
    path = ckpt.find_checkpoint(str(cfg.resume))
    state = ckpt.load_checkpoint(path)
    resumed = ckpt.resume_config(state["config"], cfg, _task_overrides() if overrides is None else overrides)
    # The tracking store is the one the user configures now (command line and defaults), never the one the
    # checkpoint names: a checkpoint may come from anyone, and MLflow sends the user's credentials to the store.
    # The saved run id only continues the MLflow run when the saved store is that same store.
    mlflow_cfg, user_cfg = resumed.logger.mlflow, cfg.logger.mlflow
    mlflow_cfg.tracking_uri, mlflow_cfg.run_id = user_cfg.tracking_uri, user_cfg.run_id
    saved = state.get("mlflow") or {}
    if mlflow_cfg.enabled and mlflow_cfg.run_id is None and saved.get("run_id"):
        uri = mlflow_cfg.tracking_uri or default_tracking_uri()
        mlflow_cfg.run_id = mlflow_run_in(state, uri)
        if mlflow_cfg.run_id is None:
            log.warning("resume: the run's MLflow run is in the tracking store %s, not in this run's %s: a new "
                        "MLflow run starts there. To continue that run, give logger.mlflow.tracking_uri=<that "
                        "store's URI>.", redact_uri(saved.get("tracking_uri")), redact_uri(uri))
    # W&B likewise: the run's W&B run continues when the project (and team) is the one configured now.
    wandb_cfg, wandb_saved = resumed.logger.wandb, state.get("wandb") or {}
    wandb_cfg.run_id = cfg.logger.wandb.run_id
    if (wandb_cfg.enabled and wandb_cfg.run_id is None and wandb_saved.get("run_id")
            and (wandb_saved.get("project"), wandb_saved.get("entity")) == (wandb_cfg.project, wandb_cfg.entity)):
        wandb_cfg.run_id = wandb_saved["run_id"]
    return validate(resumed), ckpt.run_dir_of(path), state


def _lift(stop_reason: str, loop: Any) -> str:
    """How to lift the stop condition ``stop_reason`` that a resumed run has already reached."""
    if stop_reason == "episode_return_mean":
        return (f"set stop.episode_return_mean=null (or a higher target) and a budget, e.g. "
                f"stop.env_steps={2 * loop.env_steps}")
    if stop_reason == "gradient_steps":
        return f"raise it, e.g. stop.gradient_steps={2 * loop.gradient_steps}"
    if stop_reason == "wall_time_s":
        return f"raise it, e.g. stop.wall_time_s={2 * round(loop.wall_time_s)} (the time so far counts)"
    return f"raise it, e.g. stop.env_steps={2 * loop.env_steps}"


def _non_finite_metric(metrics: dict[str, Any]) -> tuple[str, float] | None:
    """The first loss metric (a key with ``loss`` in its name) that is NaN or infinite."""
    for key, value in metrics.items():
        if "loss" in key:
            v = float(value)
            if not math.isfinite(v):
                return key, v
    return None


def _tensorboard_restart(logger: MetricsLogger, step: int) -> None:
    """Mark a restart at ``step`` in the TensorBoard log (a SessionLog START event, as SummaryWriter's
    ``purge_step`` writes): TensorBoard then hides the events at or past it that a killed run logged after its
    last checkpoint, so the resumed curves continue without a doubled stretch."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    for sink in logger.sinks:
        writer = getattr(sink, "writer", None)
        if writer is not None and hasattr(writer, "_get_file_writer"):
            writer._get_file_writer().add_event(Event(step=step, session_log=SessionLog(status=SessionLog.START)))


def run_experiment(cfg: DictConfig, run_dir: str | Path, overrides: Sequence[str] | None = None) -> dict[str, Any]:
    """Run one experiment into ``run_dir`` and return its summary; with ``cfg.resume`` set, continue that run instead
    (in its own run directory; ``overrides``: the command line's overrides, default Hydra's, checked for
    compatibility). ``cfg`` is validated already (:func:`rlrun.config.compose`, the CLI's callback, a sweep job)."""
    resume_state = None
    if cfg.get("resume"):
        cfg, run_dir, resume_state = _resumed_config(cfg, overrides)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with run_directory_lock(run_dir):  # one writer per run directory
        redact_hydra_files(run_dir)
        run = Run(cfg, run_dir, resume_state)
        return run.finish(*run.train())


class Run:
    """One experiment in its run directory, in the order it happens: ``Run(...)`` builds what the config names and
    restores a checkpoint into it, :meth:`train` calls the plan's ``training_step`` until a stop condition (writing
    checkpoints and evaluations on their schedules), :meth:`finish` exports the policy and writes summary.json."""

    def __init__(self, cfg: DictConfig, run_dir: Path, resume_state: dict[str, Any] | None) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.seed = int(cfg.seed)
        seed_everything(self.seed)
        device = resolve_device(cfg.device)
        self.env_factory = registry.build("env", cfg.env.name, cfg.env)
        self.executor = registry.build("executor", cfg.executor.name, cfg.executor, self.env_factory, self.seed)
        self.recorder = _recorder(cfg, self.env_factory.spec, run_dir)
        if self.recorder is not None:  # before the plan builds its workers: they hand it every rollout
            self.executor.recorder = self.recorder
        try:
            # an offline run's dataset, checked against the env's spaces before anything is built
            self.data = load_minari(cfg.data, self.env_factory.spec) if cfg.get("data") is not None else None
            self.algo = build_plan(OmegaConf.to_object(cfg.algo), self.env_factory, self.executor, device, self.seed,
                                   data=self.data)
            ckpt.load_frozen_policies(self.algo)  # multi-agent: policies frozen from earlier runs
            apply_device_strategy(cfg.device, self.algo)  # device map, replicas/precision update, compile
        except BaseException:
            self.executor.stop()
            raise
        resume_collection()  # the rlrun command's start-up is over (rlrun/app/startup_gc.py)
        self.loop = RunLoop(cfg, self.env_factory.spec.frame_skip)
        try:
            write_protocol_card(run_dir, self.env_factory, cfg)
            if resume_state is not None:  # before the loggers start: a checkpoint that does not fit changes nothing
                _restore(resume_state, self.algo, self.executor, self.loop)
            self.evaluator = _make_evaluator(cfg, self.env_factory, self.algo, self.loop.env_steps, resume_state,
                                             run_dir)
            self.logger = MetricsLogger.from_config(cfg.logger, run_dir, tracking_name(str(cfg.run_name),
                                                    _task_overrides()),
                                                    cfg.stop.gradient_steps if self.data is not None
                                                    else cfg.stop.env_steps)
            self.logger.log_params(flatten_config(cfg))
            if self.data is not None:  # where the dataset came from (rlrun collect's provenance)
                self.logger.log_params(self._data_params())
        except BaseException:
            self.algo.stop()
            raise
        self.resumed = resume_state is not None
        if self.resumed:
            # Last, after everything that may draw from them while being built (the loggers included).
            plain_data.set_rng_state(resume_state["rng"])
            _tensorboard_restart(self.logger, self.loop.env_steps + 1)
        self.checkpoint_path = ckpt.checkpoint_path(run_dir)
        self.last_good = self.loop.step if self.resumed else None  # the step of its checkpoint
        self.schedule = CheckpointSchedule(cfg.checkpoint, self.loop.step)

    # ------------------------------------------------------------------ training

    def _data_params(self) -> dict[str, Any]:
        """An offline run's dataset as params: its provenance and size, and the factor its rewards are learnt at."""
        return {**dataset_params(self.data), "data.reward_scale": getattr(self.algo, "reward_scale", 1.0)}

    def train(self) -> tuple[str | None, str, BaseException | None]:
        """Call the plan until a stop condition, an interrupt or an error: ``(stop_reason, status, error)``, with
        status the MLflow run's (FINISHED, KILLED, FAILED). A second interrupt leaves the last checkpoint as it is."""
        cfg, loop = self.cfg, self.loop
        stop_reason, status, error = None, "FINISHED", None
        if self.resumed:
            stop_reason = loop.stop_reason()  # a resumed run may have reached its stop condition already
            if stop_reason is not None:
                log.warning("resume: the run already reached its stop condition stop.%s at env step %d; to train "
                            "on, %s", stop_reason, loop.env_steps, _lift(stop_reason, loop))
        last_report = time.perf_counter()
        with _StopRequest() as stop_request:
            wall_limit, report_interval = loop.stop.wall_time_s, float(cfg.logger.report_interval_s)
            # a plan that owes many gradient steps checks this between them (Ape-X's sync learner): stops hold
            self.algo.stop_check = lambda: stop_request.requested or (wall_limit is not None
                                                                      and loop.wall_time_s >= wall_limit)
            try:
                while stop_reason is None:
                    result = self.algo.training_step()
                    loop.add(result)
                    self._check_losses(result.metrics)
                    stop_reason = loop.stop_reason()
                    if stop_reason is None and stop_request.requested:
                        stop_reason, status = "interrupted", "KILLED"
                    now = time.perf_counter()
                    if stop_reason is not None or now - last_report >= report_interval:
                        last_report = now
                        metrics = loop.report({**result.metrics, **executor_metrics(self.executor)})
                        self.logger.log_metrics(metrics, loop.step)
                    if self.evaluator is not None:
                        self._evaluate_if_due()
                    if self.schedule.due(loop.step):
                        self.write_checkpoint()
                if self.evaluator is not None:
                    outcome = self.evaluator.collect(wait=True)  # a background evaluation still playing
                    if outcome is not None:
                        self._evaluated(outcome)
                if cfg.checkpoint.at_end and self.last_good != loop.step:
                    self.write_checkpoint()
            except KeyboardInterrupt:
                # A second signal: the state may be mid-iteration, so the last checkpoint written stays as it is.
                stop_reason, status = "interrupted", "KILLED"
            except PlacementError as e:  # the cluster lost a node and has no room left: keep what the learner has
                stop_reason, status = "error", "FAILED"
                error = PlacementError(f"{e} {self._checkpoint_after_loss()}")
            except OSError as e:
                stop_reason, status = "error", "FAILED"
                error = e
                if e.errno in DISK_FULL:  # a log or event file, not the checkpoint (write_checkpoint says that)
                    error = StorageError(f"cannot write to the run directory {self.run_dir}: {e.strerror} "
                                         f"({_free_space(self.run_dir)}). The run stopped; {self._kept()}: free "
                                         f"some space, then rlrun resume={self.run_dir}")
            except BaseException as e:  # noqa: BLE001 - recorded in summary.json and the loggers, then raised
                stop_reason, status, error = "error", "FAILED", e
        return stop_reason, status, error

    def _write_recorded_dataset(self) -> dict[str, Any]:
        """Write the recorded episodes as the dataset ``record_dataset.id`` and log its provenance; what it holds,
        or why it could not be written (a warning: the run's results stand)."""
        record, recorder = self.cfg.record_dataset, self.recorder
        assert recorder is not None
        recorder.state_dict()  # the episodes still in memory join the parts
        returns = [float(np.sum(ep["rewards"])) for ep in recorder.episodes()]
        provenance = {"run_dir": str(self.run_dir.resolve()), "algo": str(self.cfg.algo.name),
                      "env": str(self.cfg.env.id), "episodes": len(returns),
                      "return_mean": float(np.mean(returns)) if returns else None,
                      "recorded_env_steps": min(int(record.env_steps or recorder.seen), recorder.seen)}
        env = self.env_factory.make()
        try:
            check_new_id(str(record.id), record.root, "record_dataset.id")  # a resumed run: a new id for it
            dataset = write_minari(str(record.id), record.root, recorder.episodes(), env.spec,
                                   f"rlrun {self.cfg.algo.name}", "rlrun record_dataset",
                                   f"every whole episode of the {self.cfg.algo.name} training run "
                                   f"{provenance['run_dir']}" + (f" that began within its first {record.env_steps} "
                                                                 f"env steps" if record.env_steps else ""),
                                   provenance)
        except Exception as e:  # the run's results stand, and its episodes stay in the run directory
            log.warning("record_dataset: the dataset %s was not written: %s (the recorded episodes stay in %s)",
                        record.id, one_line(e), recorder.folder)
            return {"id": str(record.id), "error": one_line(e)}
        finally:
            env.close()
        self.logger.log_params({f"record_dataset.{k}": v for k, v in provenance.items() if v is not None})
        log.info("record_dataset: wrote %s (%d episodes, %d transitions)", record.id, len(returns),
                 int(dataset.total_steps))
        return {"id": str(record.id), "root": str(datasets_root(record.root)),
                "transitions": int(dataset.total_steps), **provenance}

    def _check_losses(self, metrics: dict[str, Any]) -> None:
        bad_metric = _non_finite_metric(metrics)
        if bad_metric is not None:
            key, value = bad_metric
            raise NonFiniteError(f"non-finite loss: {key} = {value} at iteration {self.loop.iterations} (env step "
                                 f"{self.loop.env_steps}). The run stopped; {self._kept()}. Try a smaller algo.lr "
                                 f"or check the rewards and observations.")

    # ------------------------------------------------------------------ checkpoints and evaluations

    def state(self, include_replay: bool | None = None, workers_lost: bool = False) -> dict[str, Any]:
        """The checkpoint of the run as it is now; ``workers_lost``: after the cluster lost workers, without the
        workers' state or the replay memory (a shard may be gone)."""
        if workers_lost:
            state = _checkpoint_state(self.cfg, self.algo, None, self.loop, self.logger, include_replay=False)
            state["workers_lost"] = True
        else:
            state = _checkpoint_state(self.cfg, self.algo, self.executor, self.loop, self.logger, include_replay)
        state["eval"] = self.evaluator.state_dict() if self.evaluator is not None else None
        return state

    def write_checkpoint(self, state: dict[str, Any] | None = None) -> None:
        """Write ``state`` (default: :meth:`state`) as the latest checkpoint; never with non-finite parameters, and
        a refused write (a full disk) is a StorageError that keeps the last good checkpoint."""
        bad = ckpt.non_finite_parameters(self.algo)
        if bad:
            raise NonFiniteError(f"non-finite parameters ({', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}) "
                                 f"after iteration {self.loop.iterations} (env step {self.loop.env_steps}); "
                                 f"{self._kept()}")
        try:
            ckpt.save_checkpoint(self.checkpoint_path, self.state() if state is None else state)
        except OSError as e:
            raise StorageError(f"cannot write the checkpoint {self.checkpoint_path}: {e.strerror or e} "
                               f"({_free_space(self.run_dir)}). The run stopped; {self._kept()}: free some space, "
                               f"then rlrun resume={self.run_dir}") from None
        ckpt.keep_history(self.checkpoint_path, self.loop.step, int(self.cfg.checkpoint.keep_last))
        self.last_good = self.loop.step
        self.schedule.written(self.loop.step)

    def _kept(self) -> str:
        if self.last_good is None:
            return "no checkpoint had been written yet"
        unit = "gradient step" if self.loop.offline else "env step"
        return f"the last good checkpoint ({unit} {self.last_good}) is kept at {self.checkpoint_path}"

    def _checkpoint_after_loss(self) -> str:
        """After the cluster lost workers it has no room to replace: a final checkpoint of the learner, and the
        sentence that says so."""
        try:
            self.write_checkpoint(self.state(workers_lost=True))
        except Exception as e:  # noqa: BLE001 - the error that stopped the run is the one to report
            return f"A final checkpoint could not be written ({one_line(e)})."
        return (f"The learner's state at env step {self.loop.env_steps} is saved (without the workers' env copies "
                f"or the replay memory): continue with rlrun resume=<this run's directory> once the cluster has "
                f"room.")

    def _evaluate_if_due(self) -> None:
        if self.evaluator.due(self.loop.env_steps):
            candidate = (lambda: self.state(include_replay=False)) if self.cfg.checkpoint.keep_best else None
            outcome = self.evaluator.start(self.loop.env_steps, candidate)
            if outcome is not None:
                self._evaluated(outcome)
        outcome = self.evaluator.collect()
        if outcome is not None:
            self._evaluated(outcome)

    def _evaluated(self, outcome: Any) -> None:
        """Log a finished evaluation; with keep_best, keep its checkpoint when it is the best so far."""
        self.logger.log_metrics(outcome.metrics(), outcome.env_steps)
        if outcome.videos:
            self.logger.log_videos(outcome.videos, outcome.env_steps)
        if self.evaluator.improved(outcome) and self.cfg.checkpoint.keep_best:
            state = outcome.candidate if outcome.candidate is not None else self.state()
            state["eval"] = self.evaluator.state_dict()
            ckpt.save_checkpoint(ckpt.best_checkpoint_path(self.run_dir), state)

    # ------------------------------------------------------------------ the end

    def finish(self, stop_reason: str | None, status: str, error: BaseException | None) -> dict[str, Any]:
        """Export the policy (unless the run failed), stop the plan, write summary.json, close the loggers with
        ``status``; then raise the run's error (or KeyboardInterrupt for an interrupt), else return the summary."""
        cfg, loop, spec = self.cfg, self.loop, self.env_factory.spec
        wall = loop.wall_time_s
        exported: list[str] = []
        try:
            if status != "FAILED" and cfg.export.formats:
                exported = _export_at_end(self.algo, spec, self.run_dir, list(cfg.export.formats), self.logger)
        finally:
            if self.evaluator is not None:
                self.evaluator.close()
            self.algo.stop()
            recorded = self._write_recorded_dataset() if self.recorder is not None and status == "FINISHED" else {}
            mlflow_sink = next((s for s in self.logger.sinks if hasattr(s, "run_id")), None)
            summary = {
                "env_steps": loop.env_steps,
                "gradient_steps": loop.gradient_steps,
                "frames": loop.env_steps * spec.frame_skip,
                "episodes": loop.episodes,
                "episode_return_mean": loop.return_mean(),
                "games": loop.games,
                "game_score_mean": loop.game_score_mean(),
                "frames_per_second": loop.env_steps * spec.frame_skip / max(wall, 1e-9),
                "env_steps_per_second": loop.env_steps / max(wall, 1e-9),
                "wall_time_s": wall,
                "stop_reason": stop_reason,
                "error": str(error) if isinstance(error, RlrunError) else (repr(error) if error is not None else None),
                "mlflow_run_id": mlflow_sink.run_id if mlflow_sink else None,
                "run_name": str(cfg.run_name),
                "run_dir": str(self.run_dir.resolve()),
                "algo": str(cfg.algo.name),
                "env": str(cfg.env.id),
                "seed": self.seed,
                "checkpoint": str(self.checkpoint_path.resolve()) if self.checkpoint_path.exists() else None,
                "export": exported,
                **_eval_summary(self.evaluator, self.run_dir),
                **(self.algo.summary() if hasattr(self.algo, "summary") else {}),  # multi-agent: policy_return_mean
                **({"data": {"id": str(cfg.data.id), **{k.removeprefix("data."): v
                                                           for k, v in self._data_params().items()}}}
                   if self.data is not None else {}),
                **({"record_dataset": recorded} if recorded else {}),
            }
            try:
                write_json_atomic(self.run_dir / "summary.json", summary)
            except OSError as e:  # the run's own error (a full disk, say) is the one to report
                log.warning("summary.json not written: %s", one_line(e))
            self.logger.close(summary, status)
        if error is not None:
            raise error
        if status == "KILLED":
            raise KeyboardInterrupt
        return summary


def _recorder(cfg: DictConfig, spec: Any, run_dir: Path) -> EpisodeRecorder | None:
    """The recorder of ``record_dataset.id`` (None without), its parts in ``<run dir>/recorded_episodes``; Box
    actions are kept in the space's bounds."""
    record = cfg.get("record_dataset")
    if record is None or record.id is None:
        return None
    space = spec.action_space
    low, high = (space.low, space.high) if isinstance(space, sp.Box) else (None, None)
    return EpisodeRecorder(run_dir / "recorded_episodes", record.env_steps, low, high)


def write_protocol_card(run_dir: Path, env_factory: Any, cfg: DictConfig) -> dict[str, Any]:
    """``<run dir>/protocol.json``: the env factory's protocol card with the run's seed and return window."""
    card = dict(env_factory.protocol_card()) if hasattr(env_factory, "protocol_card") else {"env_id": str(cfg.env.id)}
    vectorization_for = getattr(env_factory, "vectorization_for", None)
    if vectorization_for is not None and "vectorization" in card:  # env.vectorization=auto, in this run's vector mode
        card["vectorization"] = vectorization_for(str(cfg.executor.get("vector_mode") or "sync"))
    card.update(seed=int(cfg.seed), return_window_episodes=int(cfg.return_window))
    tmp = run_dir / "protocol.json.tmp"
    tmp.write_text(json.dumps(card, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, run_dir / "protocol.json")
    return card


def executor_metrics(executor: Any) -> dict[str, float]:
    """The executor's metrics since the last report (``metrics()``; an executor without it: its stage timer's)."""
    metrics = getattr(executor, "metrics", None)
    return metrics() if callable(metrics) else executor.timer.report()


def _make_evaluator(cfg: DictConfig, env_factory: Any, algo: Any, env_steps: int,
                    resume_state: dict[str, Any] | None, run_dir: Path) -> Any:
    """The periodic evaluator of ``eval.*`` (None without ``eval.interval_env_steps``), restored on resume."""
    if cfg.eval.interval_env_steps is None:
        return None

    background = cfg.eval.background if cfg.eval.background is not None else cfg.executor.name == "ray"
    video_dir, recording_env = None, None
    if cfg.eval.get("video"):  # rlrun eval --video's recording env, one per evaluation (its own folder)
        video_dir = run_dir / "videos"
        recording_env = functools.partial(make_env, cfg.env, what="eval.video=true")
    evaluator = PeriodicEvaluator(cfg.eval, env_factory, algo, int(cfg.seed), env_steps, background, video_dir,
                                  recording_env)
    if resume_state is not None and resume_state.get("eval"):
        evaluator.load_state_dict(resume_state["eval"])
    return evaluator


def _eval_summary(evaluator: Any, run_dir: Path) -> dict[str, Any]:
    """summary.json's evaluation keys: the last evaluation's mean/std and step, the best mean and best.pt."""
    if evaluator is None or evaluator.last is None:
        return {"eval_return_mean": None, "eval_return_std": None, "eval_env_steps": None,
                "eval_return_best": None, "best_checkpoint": None}
    best = ckpt.best_checkpoint_path(run_dir)
    last = evaluator.last
    return {"eval_return_mean": last.return_mean, "eval_return_std": float(np.std(last.returns)),
            "eval_env_steps": last.env_steps, "eval_return_best": evaluator.best,
            "best_checkpoint": str(best.resolve()) if best.exists() else None}


def _checkpoint_state(cfg: DictConfig, algo: Any, executor: Any, loop: RunLoop, logger: MetricsLogger,
                      include_replay: bool | None = None) -> dict:
    include_replay = bool(cfg.checkpoint.replay) if include_replay is None else include_replay
    sink = next((s for s in logger.sinks if hasattr(s, "run_id")), None)
    wandb_sink = next((s for s in logger.sinks if hasattr(s, "wandb_id")), None)
    return {
        "algo": ckpt.algo_state(algo, include_replay),
        "replay_included": include_replay,
        "executor": executor.state_dict() if hasattr(executor, "state_dict") else None,  # None: not saved
        "loop": loop.state_dict(),
        "rng": plain_data.rng_state(),
        "config": redact_strings(OmegaConf.to_container(cfg, resolve=True)),
        "mlflow": {"run_id": getattr(sink, "run_id", None),
                   "tracking_uri": redact_uri(getattr(sink, "tracking_uri", None))},
        "wandb": {"run_id": getattr(wandb_sink, "wandb_id", None), "project": cfg.logger.wandb.project,
                  "entity": cfg.logger.wandb.entity},
    }


def _restore(state: dict[str, Any], algo: Any, executor: Any, loop: RunLoop) -> None:
    """Put a checkpoint's state into freshly built objects (the global RNGs are set by the caller, last)."""
    ckpt.load_algo_state(algo, state["algo"], bool(state.get("replay_included", True)))
    exact = not state.get("workers_lost", False)
    if state.get("executor") is not None and hasattr(executor, "load_state_dict"):
        exact = executor.load_state_dict(state["executor"]) is not False
    loop.load_state_dict(state["loop"])
    if not exact:
        log.warning("resume: the checkpoint does not hold the full state of the rollout workers (env copies in "
                    "subprocesses or threads with executor.vector_mode=async|pipelined, a checkpoint written after the "
                    "cluster lost workers, or one from an older rlrun); they start from fresh resets, so this resume "
                    "is not exact.")
    if not state.get("replay_included", True):
        log.warning("resume: the checkpoint has no replay memory (checkpoint.replay=false); it starts empty.")
    log.info("resumed at env step %d (iteration %d)", loop.env_steps, loop.iterations)


def _export_at_end(algo: Any, spec: Any, run_dir: Path, formats: list[str], logger: MetricsLogger) -> list[str]:
    """Export the acting policy; a failure is a warning (the run's results stand without it)."""
    try:
        per_policy = getattr(algo, "exported_policies", None)  # multi-agent: one directory per policy
        if per_policy is not None:
            paths = [p for pid, (policy, pspec) in per_policy().items()
                     for p in export_policy(policy, pspec, policy_dir(run_dir / "export", pid), formats)]
        else:
            paths = export_policy(algo.acting_policy(), spec, run_dir / "export", formats)
    except Exception as e:  # noqa: BLE001
        log.warning("export at the end of the run failed: %s", " ".join(str(e).split()) or type(e).__name__)
        return []
    if hasattr(logger, "log_artifact"):
        for p in paths:
            logger.log_artifact(p, "export")
    return [str(p.resolve()) for p in paths]
