"""The run loop: build the objects a config names, call the plan's ``training_step`` until a stop condition,
report metrics, write checkpoints and ``summary.json``.

``summary.json`` (in the run directory) is a contract read by tests and CI benchmark jobs; its keys:
env_steps, frames, episodes, episode_return_mean (last ``return_window`` episodes), frames_per_second,
env_steps_per_second, wall_time_s, stop_reason (env_steps | wall_time_s | episode_return_mean | interrupted |
error), mlflow_run_id, run_name, run_dir, algo, env, seed, checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlrun.devices import resolve_device
from rlrun.logging.fanout import MetricsLogger
from rlrun.registry import registry

log = logging.getLogger(__name__)

REPORT_INTERVAL_S = 1.0  # seconds between metric reports (TensorBoard/MLflow/console); the last one is always sent


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def flatten_config(cfg: DictConfig) -> dict[str, Any]:
    """``{"algo.lr": 0.001, ...}`` for every leaf of the composed config (lists kept as their text)."""
    out: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            out[prefix.rstrip(".")] = node if isinstance(node, (int, float, str, bool)) or node is None else str(node)

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return out


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def save_checkpoint(path: Path, algo: Any, counters: dict[str, Any], cfg: DictConfig) -> None:
    """Write atomically: a crash while writing never leaves a corrupt file at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"algo": algo.state_dict(), "counters": counters, "config": OmegaConf.to_container(cfg, resolve=True),
             "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state()[1].tolist(),
                     "python": repr(random.getstate())}}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


class RunLoop:
    """Counts env steps and episodes, checks stop conditions, reports metrics."""

    def __init__(self, cfg: DictConfig, frame_skip: int) -> None:
        self.stop_cfg = cfg.stop
        self.frame_skip = frame_skip
        self.returns: deque[float] = deque(maxlen=int(cfg.return_window))
        self.lengths: deque[int] = deque(maxlen=int(cfg.return_window))
        self.env_steps = 0
        self.episodes = 0
        self.start = time.perf_counter()
        self._report_steps = 0
        self._report_time = self.start

    @property
    def wall_time_s(self) -> float:
        return time.perf_counter() - self.start

    def return_mean(self) -> float | None:
        return float(np.mean(self.returns)) if self.returns else None

    def add(self, result: Any) -> None:
        self.env_steps += result.env_steps
        self.episodes += len(result.episode_returns)
        self.returns.extend(result.episode_returns)
        self.lengths.extend(result.episode_lengths)

    def stop_reason(self) -> str | None:
        s = self.stop_cfg
        if s.env_steps is not None and self.env_steps >= s.env_steps:
            return "env_steps"
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
        out = {"counters/env_steps": self.env_steps, "counters/frames": self.env_steps * self.frame_skip,
               "episode/count": self.episodes, "perf/env_steps_per_s": steps_per_s,
               "perf/frames_per_s": steps_per_s * self.frame_skip, **metrics}
        if self.returns:
            out["episode/return_mean"] = self.return_mean()
            out["episode/length_mean"] = float(np.mean(self.lengths))
        return out


def run_experiment(cfg: DictConfig, run_dir: str | Path) -> dict[str, Any]:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    seed = int(cfg.seed)
    seed_everything(seed)
    device = resolve_device(cfg.device)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, seed)
    try:
        algo = registry.get("algo", cfg.algo.name)(OmegaConf.to_object(cfg.algo), env_factory.spec, executor,
                                                   device, seed)
    except BaseException:
        executor.stop()
        raise
    loop = RunLoop(cfg, env_factory.spec.frame_skip)
    logger = MetricsLogger.from_config(cfg.logger, run_dir, str(cfg.run_name), cfg.stop.env_steps)
    logger.log_params(flatten_config(cfg))
    checkpoint_path = run_dir / "checkpoints" / "latest.pt"
    next_checkpoint = cfg.checkpoint.interval_env_steps
    stop_reason, status = None, "FINISHED"
    last_report = time.perf_counter()
    try:
        while stop_reason is None:
            result = algo.training_step()
            loop.add(result)
            stop_reason = loop.stop_reason()
            now = time.perf_counter()
            if stop_reason is not None or now - last_report >= REPORT_INTERVAL_S:
                last_report = now
                logger.log_metrics(loop.report({**result.metrics, **executor.timer.report()}), loop.env_steps)
            if next_checkpoint is not None and loop.env_steps >= next_checkpoint:
                save_checkpoint(checkpoint_path, algo, _counters(loop), cfg)
                next_checkpoint += cfg.checkpoint.interval_env_steps
    except KeyboardInterrupt:
        stop_reason, status = "interrupted", "KILLED"
    except BaseException:
        stop_reason, status = "error", "FAILED"
        raise
    finally:
        wall = loop.wall_time_s
        if status != "FAILED" and cfg.checkpoint.at_end:
            save_checkpoint(checkpoint_path, algo, _counters(loop), cfg)
        algo.stop()
        mlflow_sink = next((s for s in logger.sinks if hasattr(s, "run_id")), None)
        summary = {
            "env_steps": loop.env_steps,
            "frames": loop.env_steps * env_factory.spec.frame_skip,
            "episodes": loop.episodes,
            "episode_return_mean": loop.return_mean(),
            "frames_per_second": loop.env_steps * env_factory.spec.frame_skip / max(wall, 1e-9),
            "env_steps_per_second": loop.env_steps / max(wall, 1e-9),
            "wall_time_s": wall,
            "stop_reason": stop_reason,
            "mlflow_run_id": mlflow_sink.run_id if mlflow_sink else None,
            "run_name": str(cfg.run_name),
            "run_dir": str(run_dir.resolve()),
            "algo": str(cfg.algo.name),
            "env": str(cfg.env.id),
            "seed": seed,
            "checkpoint": str(checkpoint_path.resolve()) if checkpoint_path.exists() else None,
        }
        write_json_atomic(run_dir / "summary.json", summary)
        logger.close(summary, status)
    if status == "KILLED":
        raise KeyboardInterrupt
    return summary


def _counters(loop: RunLoop) -> dict[str, Any]:
    return {"env_steps": loop.env_steps, "episodes": loop.episodes, "returns": list(loop.returns),
            "lengths": list(loop.lengths)}
