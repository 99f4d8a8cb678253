"""Evaluation during training: every ``eval.interval_env_steps`` env steps, ``eval.episodes`` greedy episodes
(``get_actions(obs, explore=False)``) on an env copy of its own (``make(evaluation=True)``: Atari whole games with
raw scores), seeded with ``eval.seed`` (default: the run seed + 1,000,003) at the first episode of every
evaluation, so every evaluation plays the same start states and their figures compare across training.

The policy evaluated is a *snapshot*: a fresh acting copy (the algorithm's ``policy_factory``, as a rollout worker
builds one) given the learner's current weights, so evaluation never touches the learner (a recurrent policy's
state, for one). Everything it draws from the global random generators is put back afterwards, so a run with
evaluation trains exactly as the same run without it (and a resumed run exactly as an uninterrupted one).

Two modes (``eval.background``): ``false`` evaluates in the run loop, between two training steps (deterministic;
the default for ``executor=local``); ``true`` plays the episodes on a thread of the driver while training goes on
(the default for ``executor=ray``, whose driver mostly waits on its workers: evaluation does not stall sampling).
A background result is logged at the env step its snapshot was taken, when it arrives.

Metrics: ``eval/return_mean``, ``eval/return_std``, ``eval/length_mean`` (TensorBoard, MLflow, the progress line).
With ``checkpoint.keep_best`` the checkpoint of the best evaluation so far is kept as ``checkpoints/best.pt``.

With ``eval.video`` every evaluation plays on a recording env copy of its own (``rlrun eval --video``'s:
gymnasium's RecordVideo, every episode, through moviepy), built for that evaluation so that its mp4 files land in
``<run dir>/videos/eval-<env step>/``; the outcome lists them and the run logs them to the trackers that show
videos (``MetricsLogger.log_videos``). The recording env renders (``render_mode=rgb_array``) but steps as the plain
one does, from the same seed: the figures are the same with and without video.
"""

from __future__ import annotations

import concurrent.futures
import copy
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from rlrun import plain_data
from rlrun.app.evaluate import run_episodes
from rlrun.metric_names import EVAL_LENGTH_MEAN, EVAL_RETURN_MEAN, EVAL_RETURN_STD, eval_per_policy

log = logging.getLogger(__name__)

EVAL_SEED_OFFSET = 1_000_003  # the default eval seed is the run seed plus this (rlrun eval uses the same offset)


@dataclass
class EvalOutcome:
    """One finished evaluation: at ``env_steps`` (when its snapshot was taken), its episodes' returns/lengths."""

    env_steps: int
    returns: list[float]
    lengths: list[int]
    candidate: Any = None  # background mode with keep_best: the checkpoint state taken with the snapshot
    extra: dict[str, float] = field(default_factory=dict)  # multi-agent: eval/policy/<id>/return_mean
    videos: list[Path] = field(default_factory=list)  # eval.video: the episodes' mp4 files, in episode order

    @property
    def return_mean(self) -> float:
        return float(np.mean(self.returns))

    def metrics(self) -> dict[str, float]:
        return {EVAL_RETURN_MEAN: self.return_mean, EVAL_RETURN_STD: float(np.std(self.returns)),
                EVAL_LENGTH_MEAN: float(np.mean(self.lengths)), **self.extra}


class PeriodicEvaluator:
    """Decides when an evaluation is due, runs it (inline or on a thread), and keeps the best mean so far."""

    def __init__(self, cfg: Any, env_factory: Any, algo: Any, run_seed: int, env_steps: int,
                 background: bool, video_dir: Path | None = None,
                 recording_env: Callable[[Path], Any] | None = None) -> None:
        """``video_dir`` and ``recording_env`` (eval.video): where the evaluations' folders go, and a maker of a
        recording env copy writing into a given folder (:func:`rlrun.app.evaluate.make_env`)."""
        self.interval = int(cfg.interval_env_steps)
        self.episodes = int(cfg.episodes)
        self.seed = int(run_seed) + EVAL_SEED_OFFSET if cfg.seed is None else int(cfg.seed)
        # A multi-agent plan plays its policies itself (``algo.evaluate``: per-agent returns), in the run loop.
        self.multiagent = callable(getattr(algo, "evaluate", None))
        self.background = bool(background) and not self.multiagent
        self.algo, self.env_factory = algo, env_factory
        self.obs_space = None if self.multiagent else env_factory.spec.observation_space
        self.env = None if self.multiagent else env_factory.make(evaluation=True)
        self.best: float | None = None
        self.best_env_steps: int | None = None
        self.last: EvalOutcome | None = None
        self.evaluations = 0
        self._next = (env_steps // self.interval + 1) * self.interval
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlrun-eval") if background else None
        self._pending: concurrent.futures.Future | None = None
        self._factory = _policy_factory(algo)
        self.video_dir, self.recording_env = video_dir, recording_env

    # ------------------------------------------------------------------ scheduling

    def due(self, env_steps: int) -> bool:
        """An evaluation is due at every multiple of the interval (a resumed run keeps the schedule); in background
        mode not while the previous one still plays (that one's step is skipped, said in the log)."""
        if env_steps < self._next:
            return False
        self._next = (env_steps // self.interval + 1) * self.interval
        if self._pending is not None and not self._pending.done():
            log.info("eval: the evaluation started earlier is still playing at env step %d; skipping this one",
                     env_steps)
            return False
        return True

    def snapshot(self) -> Any:
        """A fresh acting policy with the learner's current weights (global random state left as it was)."""
        if self.multiagent:
            return None  # algo.evaluate acts with the policies as they are now
        state = plain_data.rng_state()
        try:
            policy = self.algo.acting_policy()
            if self._factory is not None:
                copy_ = self._factory(0)
                copy_.set_weights(policy.get_weights())
                copy_.to(getattr(policy, "device", "cpu"))
                return copy_
            return copy.deepcopy(policy)
        finally:
            plain_data.set_rng_state(state)

    def _play(self, policy: Any, env_steps: int, candidate: Any = None) -> EvalOutcome:
        state = plain_data.rng_state() if not self.background else None
        if self.multiagent:
            try:
                found = self.algo.evaluate(self.env_factory, self.episodes, self.seed)
            finally:
                plain_data.set_rng_state(state)
            extra = {eval_per_policy(pid): v for pid, v in found["policy_return_mean"].items()}
            return EvalOutcome(env_steps, found["returns"], found["lengths"], candidate, extra)
        folder = None if self.recording_env is None else self.video_dir / f"eval-{env_steps}"
        env = self.env if folder is None else self.recording_env(folder)
        try:
            policy.eval() if hasattr(policy, "eval") else None
            returns, lengths = run_episodes(policy, env, self.obs_space, self.episodes, self.seed,
                                            getattr(policy, "device", "cpu"))
        finally:
            if env is not self.env:
                env.close()  # RecordVideo writes the last episode's file on close
            if state is not None:
                plain_data.set_rng_state(state)
        videos = [] if folder is None else sorted(folder.glob("*.mp4"), key=_episode_number)
        return EvalOutcome(env_steps, returns, lengths, candidate, videos=videos)

    def start(self, env_steps: int, candidate: Callable[[], Any] | None = None) -> EvalOutcome | None:
        """Evaluate the current policy: inline, the outcome now; background, None (``collect`` gives it later).
        ``candidate``: in background mode, a function giving the checkpoint state to keep if this one wins."""
        policy = self.snapshot()
        self.evaluations += 1
        if not self.background:
            return self._record(self._play(policy, env_steps))
        self._pending = self._pool.submit(self._play, policy, env_steps, candidate() if candidate else None)
        return None

    def collect(self, wait: bool = False) -> EvalOutcome | None:
        """A background evaluation that has finished (``wait``: wait for a running one), else None."""
        if self._pending is None or (not wait and not self._pending.done()):
            return None
        future, self._pending = self._pending, None
        return self._record(future.result())

    def _record(self, outcome: EvalOutcome) -> EvalOutcome:
        self.last = outcome
        return outcome

    def improved(self, outcome: EvalOutcome) -> bool:
        """True (and remember it) when ``outcome`` has the best mean return so far."""
        if self.best is not None and outcome.return_mean <= self.best:
            return False
        self.best, self.best_env_steps = outcome.return_mean, outcome.env_steps
        return True

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_env_steps": self.best_env_steps, "evaluations": self.evaluations,
                "last": None if self.last is None else {"env_steps": self.last.env_steps,
                                                        "returns": list(map(float, self.last.returns)),
                                                        "lengths": list(map(int, self.last.lengths))}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_env_steps = state.get("best"), state.get("best_env_steps")
        self.evaluations = int(state.get("evaluations", 0))
        last = state.get("last")
        self.last = None if last is None else EvalOutcome(int(last["env_steps"]), list(last["returns"]),
                                                          list(last["lengths"]))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self.env is not None:
            self.env.close()


def _episode_number(path: Path) -> int:
    """RecordVideo's ``eval-episode-<i>.mp4``: its episode, so that episode 10 sorts after episode 9."""
    tail = path.stem.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _policy_factory(algo: Any) -> Callable[[int], Any] | None:
    """``worker_index -> acting policy`` of an algorithm (what remote rollout workers build), if it has one."""
    factory = getattr(algo, "policy_factory", None)
    return factory if callable(factory) else None
