"""``rlrun eval <run dir or checkpoint> [episodes=N] [seed=S] [--video DIR]``: run a checkpoint's policy without
exploration (greedy actions) for N episodes on one fresh env copy and record the mean score. A multi-agent run
plays until every agent has N episodes, and eval.json adds the mean per agent and per policy.

The result is printed, written to ``<run dir>/eval.json`` (atomically) and, when the run's MLflow run is in the
tracking store this command uses (``tracking_uri=URI``, default the working directory's ``mlflow.db``, as
``rlrun`` itself), recorded there as an evaluation run of its own nested under the training run (``eval-<its
name>``: ``eval/return_mean`` and ``eval/return_std`` at the checkpoint's env step, the evaluation's settings,
eval.json as an artifact); the training run stays as it ended, its duration too. The checkpoint's saved tracking
URI never chooses where data goes: a checkpoint is data that may come from anyone, and MLflow sends the user's
credentials (``MLFLOW_TRACKING_TOKEN``) to the store. ``--video DIR`` records every episode with gymnasium's
RecordVideo (``render_mode=rgb_array``; needs the ``video`` extra: moviepy, and pygame for the classic-control
envs).

The first episode's reset is seeded with ``seed`` (default: the run's seed + 1000, so evaluation episodes are
not the training run's first episodes); the following resets continue the env's generator, as gymnasium does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.errors import RlrunError
from rlrun.export import restore
from rlrun.logging.fanout import warn
from rlrun.logging.mlflow_sink import default_tracking_uri, mlflow_run_in
from rlrun.metric_names import EVAL_RETURN_MEAN, EVAL_RETURN_STD
from rlrun.redact import redact_uri
from rlrun.registry import registry

EVAL_SEED_OFFSET = 1000  # default eval seed = run seed + this


@dataclass
class EvalResult:
    """Returns and lengths (agent steps) of the evaluated episodes, and their summary."""

    returns: list[float]
    lengths: list[int]
    seed: int
    video_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def return_mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def return_std(self) -> float:
        return float(np.std(self.returns))

    def to_json(self) -> dict[str, Any]:
        return {"episodes": len(self.returns), "return_mean": self.return_mean, "return_std": self.return_std,
                "return_min": float(np.min(self.returns)), "return_max": float(np.max(self.returns)),
                "length_mean": float(np.mean(self.lengths)), "explore": False,
                **{k: v for k, v in asdict(self).items() if k != "extra"}, **self.extra}


def batch_of_one(space: sp.Space, obs: Any, device: torch.device) -> Any:
    """One observation as a batch of one, as torch tensors on ``device`` (what ``get_actions`` takes)."""
    flat = {k: np.asarray(v)[None] for k, v in sp.flatten(space, obs).items()}
    return sp.to_torch(space, sp.unflatten(space, flat), device)


def run_episodes(policy: Any, env: Any, obs_space: sp.Space, episodes: int, seed: int,
                 device: torch.device | str = "cpu") -> tuple[list[float], list[int]]:
    """Run ``episodes`` episodes of ``env`` choosing ``policy.get_actions(obs, explore=False)``; returns and lengths."""
    device = torch.device(device)
    returns: list[float] = []
    lengths: list[int] = []
    reset = getattr(policy, "reset_episodes", None)  # a recurrent policy's state ends with each episode
    reset = reset if callable(reset) else None
    with torch.inference_mode():
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed if episode == 0 else None)
            if reset is not None:
                reset(np.array([True]))  # whatever state a previous episode (or training) left
            total, steps, done = 0.0, 0, False
            while not done:
                action = policy.get_actions(batch_of_one(obs_space, obs, device), explore=False)
                obs, reward, terminated, truncated, _ = env.step(action.cpu().numpy()[0])
                total += float(reward)
                steps += 1
                done = bool(terminated or truncated)
                if reset is not None:
                    reset(np.array([done]))
            returns.append(total)
            lengths.append(steps)
    return returns, lengths


def make_env(env_cfg: Any, video_dir: Path | None, what: str = "--video") -> Any:
    """One evaluation env copy from the run's env config (``make(evaluation=True)``: Atari without reward clipping
    and life-loss episodes, so an episode's return is a whole game's raw score); wrapped in RecordVideo (every
    episode) when ``video_dir`` is set. ``what``: the setting an error names (``--video``, ``eval.video=true``)."""
    from omegaconf import OmegaConf

    if video_dir is None:
        return registry.build("env", env_cfg.name, env_cfg).make(evaluation=True)
    # A plain copy: a training run's env node is in struct mode (eval.video), where a new kwargs key is refused.
    plain = OmegaConf.to_container(env_cfg, resolve=True)
    plain["kwargs"] = {**(plain.get("kwargs") or {}), "render_mode": "rgb_array"}
    cfg = OmegaConf.create(plain)
    env = registry.build("env", cfg.name, cfg).make(evaluation=True)
    try:
        from gymnasium.wrappers import RecordVideo

        return RecordVideo(env, str(video_dir), episode_trigger=lambda i: True, name_prefix="eval",
                           disable_logger=True)
    except Exception as e:  # noqa: BLE001 - gymnasium's DependencyNotInstalled, or an env that cannot render
        env.close()
        raise RlrunError(f"{what}: cannot record {env_cfg.id}: {' '.join(str(e).split())} (the video extra "
                         f"installs what recording needs: pip install 'rlrun[video]')") from None


def evaluate(target: str | Path, episodes: int = 10, seed: int | None = None, video_dir: Path | None = None,
             write: bool = True, tracking_uri: str | None = None, allow_imports: Sequence[str] = ()) -> EvalResult:
    """Evaluate the checkpoint of a run directory (or a checkpoint file); write eval.json and log to the run's
    MLflow run when that is in ``tracking_uri`` (default: :func:`default_tracking_uri`)."""
    if episodes < 1:
        raise RlrunError(f"episodes={episodes}: must be at least 1.")
    restored = restore(target, allow_imports=allow_imports)
    try:
        seed = int(restored.cfg.seed) + EVAL_SEED_OFFSET if seed is None else int(seed)
        if hasattr(restored.algo, "evaluate"):  # multi-agent: per-agent returns on one env copy
            if video_dir is not None:
                raise RlrunError("--video: recording multi-agent runs is not there yet.")
            found = restored.algo.evaluate(restored.env_factory, episodes, seed)
            multiagent = {k: found[k] for k in ("agent_return_mean", "policy_return_mean")}
            returns, lengths = found["returns"], found["lengths"]
        else:
            multiagent = {}
            returns, lengths = _play(restored, episodes, seed, video_dir)
    finally:
        restored.close()
    uri = tracking_uri or default_tracking_uri()
    run_id = mlflow_run_in(restored.state, uri)
    result = EvalResult(returns, lengths, seed, str(video_dir.resolve()) if video_dir else None,
                        {"checkpoint": str(restored.checkpoint), "checkpoint_env_steps": restored.env_steps,
                         "checkpoint_at": restored.progress,
                         "algo": str(restored.cfg.algo.name), "env": str(restored.cfg.env.id),
                         "mlflow_run_id": run_id, **multiagent})
    if write:
        path = restored.run_dir / "eval.json"
        _write_json(path, result.to_json())
        result.extra["eval_json"] = str(path)
        if run_id is not None:
            result.extra["mlflow_eval_run_id"] = _log_to_mlflow(uri, run_id, result, restored.env_steps, path)
            _write_json(path, result.to_json())  # with the evaluation run's id
        elif (restored.state.get("mlflow") or {}).get("run_id"):
            saved = redact_uri((restored.state.get("mlflow") or {}).get("tracking_uri"))
            warn(f"MLflow: the run's MLflow run is in the tracking store {saved}, not in this command's "
                 f"{redact_uri(uri)}; the evaluation is in eval.json only. To log it to that run: rlrun eval "
                 f"{target} tracking_uri=<that store's URI>.")
    return result


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _play(restored: Any, episodes: int, seed: int, video_dir: Path | None) -> tuple[list[float], list[int]]:
    """Greedy episodes of a single-agent run's policy on one fresh env copy."""
    env = make_env(restored.cfg.env, video_dir)
    try:
        return run_episodes(restored.policy(), env, restored.spec.observation_space, episodes, seed)
    except Exception as e:
        if video_dir is not None and "moviepy" in str(e).lower():
            raise RlrunError(f"--video: {' '.join(str(e).split())}; pip install 'rlrun[video]'") from None
        raise
    finally:
        env.close()


def _log_to_mlflow(uri: str, run_id: str, result: EvalResult, step: int, path: Path) -> str | None:
    """The evaluation as an MLflow run of its own in the training run's experiment, nested under it
    (``mlflow.parentRunId``), so that logging it later leaves the training run's duration and status alone:
    ``eval/return_mean`` and ``eval/return_std`` at the checkpoint's env step, the episodes and seed as params,
    eval.json as an artifact. Its run id, or None after a warning (eval.json has the numbers)."""
    eval_run_id = None
    try:
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        trained = client.get_run(run_id).info
        tags = {"mlflow.parentRunId": run_id, "rlrun.evaluates": run_id}
        eval_run = client.create_run(trained.experiment_id, run_name=f"eval-{trained.run_name}", tags=tags)
        eval_run_id = eval_run.info.run_id
        now = int(time.time() * 1000)
        client.log_batch(eval_run_id, metrics=[Metric(EVAL_RETURN_MEAN, result.return_mean, now, step),
                                               Metric(EVAL_RETURN_STD, result.return_std, now, step)],
                         params=[Param("episodes", str(len(result.returns))), Param("seed", str(result.seed)),
                                 Param("checkpoint_env_steps", str(step))])
        client.log_artifact(eval_run_id, str(path))
        client.set_terminated(eval_run_id, status="FINISHED")
        return eval_run_id
    except Exception as e:  # noqa: BLE001 - MLflow never loses the result: it is in eval.json
        print(f"rlrun: warning: MLflow: could not record the evaluation of run {run_id} at {redact_uri(uri)}: "
              f"{' '.join(str(e).split())[:300]}", file=sys.stderr)
        return None


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="rlrun eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", help="a run directory (its checkpoints/latest.pt) or a checkpoint file")
    parser.add_argument("--episodes", type=int, default=10, help="episodes to run (also: episodes=N)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the first reset (also: seed=S); "
                                                                "default: the run's seed + 1000")
    parser.add_argument("--video", type=Path, default=None, metavar="DIR",
                        help="record every episode as mp4 into DIR (gymnasium RecordVideo)")
    parser.add_argument("--tracking-uri", dest="tracking_uri", default=None, metavar="URI",
                        help="the MLflow tracking store to log to (also: tracking_uri=URI); default: "
                             "sqlite:///<working directory>/mlflow.db, as rlrun's own default")
    parser.add_argument("--allow-import", dest="allow_imports", action="append", default=[], metavar="MODULE",
                        help="let the checkpoint's config import MODULE (env.id=MODULE:Env, ...): only for a "
                             "run directory you trust; repeat for several (also: allow_import=MODULE)")
    args = parser.parse_args(_key_values_as_options(argv))
    result = evaluate(args.target, args.episodes, args.seed, args.video, tracking_uri=args.tracking_uri,
                      allow_imports=args.allow_imports)
    spread = "" if len(result.returns) < 2 else f" ± {result.return_std:.1f}"
    sys.stdout.write(f"eval: {len(result.returns)} episodes without exploration: return mean "
                     f"{result.return_mean:.1f}{spread} (min {min(result.returns):.1f}, max "
                     f"{max(result.returns):.1f}), checkpoint at {result.extra['checkpoint_at']}; "
                     f"wrote {result.extra['eval_json']}"
                     f"{'' if result.video_dir is None else f'; videos in {result.video_dir}'}\n")
    for key, what in (("policy_return_mean", "policy"), ("agent_return_mean", "agent")):  # multi-agent runs
        if key in result.extra:
            means = ", ".join(f"{name} {value:.1f}" for name, value in result.extra[key].items())
            sys.stdout.write(f"eval: return mean per {what}: {means}\n")
    if not all(math.isfinite(r) for r in result.returns):
        raise RlrunError("the evaluation returned a non-finite score")


def _key_values_as_options(argv: Sequence[str]) -> list[str]:
    """``episodes=5 seed=3`` (the key=value style of the rest of rlrun) as ``--episodes 5 --seed 3``."""
    out: list[str] = []
    for a in argv:
        key, eq, value = a.partition("=")
        if eq and not a.startswith("-") and key in ("episodes", "seed", "video", "tracking_uri", "allow_import"):
            out += [f"--{key.replace('_', '-')}", value]
        elif eq and not a.startswith("-") and "/" not in key and not Path(a).exists():
            raise RlrunError(f"rlrun eval: unknown setting {a!r}; the settings are episodes=N, seed=S, video=DIR, "
                             f"tracking_uri=URI, allow_import=MODULE.")
        else:
            out.append(a)
    return out
