"""``rlrun-bench reproduce <suite>``: rlrun against published results, as ordinary rlrun runs.

Each suite is a list of *groups*: one algorithm on one or more envs over seeds, at the reference's budget, with the
reference's settings (a preset of ``conf/algo_env/`` or the overrides below, each with its source). A group runs as
one Hydra sweep (``rlrun -m``): resumable (``sweep.resume``: completed jobs are skipped), in MLflow as one parent
run with a child per job, up to ``--jobs`` jobs at a time (joblib launcher; default: one per core). Then the table:

    benchmarks/results/reproduce/<suite>.json   per row: seeds' finals, mean ± std, the IQM with its 95% stratified-
                                                bootstrap interval, the reference (source, budget,
                                                env version, measure), ratio, in band, wall time, hardware
    benchmarks/results/reproduce/<suite>.md     the same as Markdown
    benchmarks/results/reproduce/<suite>-<env>.png   learning curves: mean ± std over seeds per algorithm, the
                                                reference value as a dashed line
    benchmarks/results/reproduce/<suite>-profile.png   the performance profile of the reference-normalised returns
                                                of the rows judged against a band (with the suite's aggregate,
                                                their IQM with its interval, under the table)

The measure is the references': training episodic return, mean of each seed's last 100 episodes (``return_window
=100``; the run's ``summary.json`` ``episode_return_mean``), then mean ± std (population) over seeds. A group whose
reference measures otherwise says so and measures the same way: the final model's greedy return (``eval_episodes``)
or the mean over the episodes of a span of env steps (``span``). Published
references live in ``benchmarks/reproduce_data/references.yaml`` with their sources; never tuned to fit.

    python -m benchmarks.reproduce mujoco [--groups ppo] [--jobs 2] [--runs-dir DIR]   run what is missing + table
    python -m benchmarks.reproduce mujoco --table-only                                  only the table
    python -m benchmarks.reproduce mujoco --dry-run                                     print the sweep commands
    python -m benchmarks.reproduce mujoco --envs Hopper-v5 --seeds 0                    run only these pairs
    python -m benchmarks.reproduce mujoco --smoke                                       tiny budgets: checks the path

Rows of a suite that needs hardware this machine lacks (``atari``: a GPU) are written as "not run: needs a GPU",
never guessed. The run directories (checkpoints, TensorBoard) stay under ``--runs-dir`` (default
``reproduce_runs/``, not committed); the table and the curves are committed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlrun import evaluation_stats as es

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = Path(__file__).resolve().parent / "reproduce_data" / "references.yaml"
DEFAULT_RUNS = ROOT / "reproduce_runs"
RETURN_WINDOW = 100  # the references' measure: each seed's last 100 training episodes
SMOKE_STEPS = 4096  # env steps of a --smoke run
KIND_LABELS = {"band": "", "goal": " (goal, other measure)", "curve": " (their curve at this step)"}


@dataclass(frozen=True)
class Group:
    """One algorithm on ``envs`` over ``seeds`` at ``env_steps``: one sweep."""

    name: str
    algo: str
    env_option: str
    envs: tuple[str, ...]
    seeds: tuple[int, ...]
    env_steps: int
    overrides: tuple[str, ...] = ()
    needs: str | None = None  # "gpu": not run without one; "envpool": not without the envpool extra
    note: str = ""
    smoke: tuple[str, ...] = field(default=())  # extra overrides of --smoke (tiny budgets)
    env_key: str = "id"  # the env key the envs are given by (Atari: game)
    wall_time_s: float | None = None  # a wall-time budget per run (CPU-sized Atari): stop.wall_time_s
    eval_episodes: int | None = None
    """Where the reference measures the final model greedily (RL Zoo's benchmark): each finished run is evaluated
    with ``rlrun eval <run dir> episodes=N`` and the row's finals are those greedy returns, not training returns."""
    span: tuple[int, int] | None = None
    """Where the reference averages the training episodes of a span of frames (Dopamine's iterations): the row's
    finals are each run's mean return over the episodes that ended in ``(start, end]``, not its last 100."""

    def sweep_overrides(self, smoke: bool = False, envs: tuple[str, ...] | None = None,
                        seeds: tuple[int, ...] | None = None) -> list[str]:
        steps = SMOKE_STEPS if smoke else self.env_steps
        out = [f"algo={self.algo}", f"env={self.env_option}", f"env.{self.env_key}={','.join(envs or self.envs)}",
               f"seed={','.join(map(str, seeds or self.seeds))}", f"stop.env_steps={steps}",
               "stop.episode_return_mean=null",
               *([f"stop.wall_time_s={self.wall_time_s}"] if self.wall_time_s and not smoke else []),
               f"return_window={RETURN_WINDOW}", "export.formats=[]", "logger.console.interval_s=60",
               *self.overrides]
        if not smoke:
            out.append("checkpoint.interval_minutes=5")
        return out + list(self.smoke if smoke else ())


# CleanRL's classic-control settings (dqn.py / ppo.py defaults), as overrides: rlrun's own CartPole defaults are
# tuned for speed to 475, not these references.
# dqn.py: target_network_frequency 500 env steps with train_frequency 10 = a hard sync every 50 gradient steps; MSE
# loss, no gradient clipping, no double Q; epsilon 1 -> 0.05 over exploration_fraction 0.5 of 500k steps.
CLEANRL_DQN_CLASSIC = ("algo.lr=2.5e-4", "algo.buffer_size=10000", "algo.gamma=0.99", "algo.batch_size=128",
                       "algo.learning_starts=10000", "algo.train_every=10", "algo.tau=1.0",
                       "algo.target_update_every=50", "algo.huber_delta=null", "algo.max_grad_norm=null",
                       "algo.epsilon_start=1.0", "algo.epsilon_end=0.05", "algo.epsilon_decay_steps=250000",
                       "algo.hidden_sizes=[120,84]", "algo.double_q=false", "algo.dueling=false")
CLEANRL_PPO_CLASSIC = ("algo.lr=2.5e-4", "algo.anneal_lr=true", "algo.gamma=0.99", "algo.gae_lambda=0.95",
                       "algo.rollout_steps=128", "algo.num_epochs=4", "algo.minibatch_size=128",
                       "algo.clip_eps=0.2", "algo.anneal_clip=false", "algo.vf_clip_eps=0.2", "algo.ent_coef=0.01",
                       "algo.vf_coef=0.5", "algo.max_grad_norm=0.5", "executor.num_envs=4",
                       "env.vectorization=copies")  # CleanRL's SyncVectorEnv of env copies
# pqn.py: its Args are the schema's defaults and conf/algo_env/pqn_cartpole.yaml's 4 env copies; CleanRL counts a
# truncation as a termination (done = terminated or truncated).
CLEANRL_PQN_CLASSIC = ("algo.bootstrap_truncated=false", "executor.num_envs=4", "env.vectorization=copies")

# CleanRL sac_continuous_action.py beside the preset (the SAC paper's Table 1): its q_lr 1e-3 drives both the critics'
# and the temperature's Adam (policy_lr 3e-4 as the paper). Its policy_frequency 2 takes two actor steps every second
# env step, the same number of actor steps as rlrun's one per step.
CLEANRL_SAC = ("algo.critic_lr=1e-3", "algo.alpha_lr=1e-3")

SUITES: dict[str, list[Group]] = {
    "mujoco": [
        Group("ppo", "ppo", "mujoco", ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5"), (0, 1, 2), 1_000_000,
              note="conf/algo_env/ppo_mujoco.yaml: CleanRL ppo_continuous_action.py settings",
              smoke=("algo.rollout_steps=512", "algo.num_epochs=1")),
        # Ablation of the ppo row that is above CleanRL's band: the same settings with CleanRL's convention at time
        # limits (a truncation counts as a termination: no bootstrap), the first difference between the two.
        Group("ppo-trunc-as-term", "ppo", "mujoco", ("HalfCheetah-v5",), (0, 1, 2), 1_000_000,
              overrides=("algo.bootstrap_truncated=false",),
              note="ablation of the ppo row: algo.bootstrap_truncated=false (CleanRL's done = terminated or "
                   "truncated)", smoke=("algo.rollout_steps=512", "algo.num_epochs=1")),
        Group("sac", "sac", "mujoco", ("HalfCheetah-v5", "Hopper-v5"), (0, 1), 300_000, overrides=CLEANRL_SAC,
              note="conf/algo_env/sac_mujoco.yaml with CleanRL sac_continuous_action.py's learning rates; 300k env "
                   "steps, compared with CleanRL's curve at 300k (its 1M table row shown for scale)",
              smoke=("algo.learning_starts=512",)),
        # TD3 and DDPG at SAC's budget, for SAC's reason: a gradient step per env step of 256x256 critics is
        # compute-bound on a CPU core, so 1M steps would take hours a run; compared with CleanRL's curves at 300k
        # (their 1M table rows shown for scale). Checkpoints every 5 minutes: running the suite again continues an
        # interrupted run from its checkpoint (sweep.resume), as rlrun resume=<its run dir> does by hand.
        Group("td3", "td3", "mujoco", ("HalfCheetah-v5", "Hopper-v5"), (0, 1, 2), 300_000,
              note="conf/algo_env/td3_mujoco.yaml: CleanRL td3_continuous_action.py settings; 300k env steps, "
                   "compared with CleanRL's curve at 300k (its 1M table row shown for scale)",
              smoke=("algo.learning_starts=512",)),
        Group("ddpg", "ddpg", "mujoco", ("HalfCheetah-v5", "Hopper-v5"), (0, 1, 2), 300_000,
              note="conf/algo_env/ddpg_mujoco.yaml: CleanRL ddpg_continuous_action.py settings; 300k env steps, "
                   "compared with CleanRL's curve at 300k (its 1M table row shown for scale)",
              smoke=("algo.learning_starts=512",)),
    ],
    "classic": [
        Group("dqn", "dqn", "cartpole", ("CartPole-v1", "Acrobot-v1", "MountainCar-v0"), (0, 1, 2), 500_000,
              overrides=CLEANRL_DQN_CLASSIC, note="CleanRL dqn.py defaults"),
        Group("ppo", "ppo", "cartpole", ("CartPole-v1", "Acrobot-v1"), (0, 1, 2), 500_000,
              overrides=CLEANRL_PPO_CLASSIC, note="CleanRL ppo.py defaults"),
        Group("c51", "c51", "cartpole", ("CartPole-v1", "Acrobot-v1"), (0, 1, 2), 500_000,
              note="conf/algo_env/c51_classic.yaml (CleanRL c51.py defaults)"),
        Group("qrdqn-cartpole", "qrdqn", "cartpole", ("CartPole-v1",), (0, 1, 2), 50_000, eval_episodes=100,
              note="conf/algo_env/qrdqn_cartpole.yaml (rl-baselines3-zoo qrdqn.yml CartPole-v1); final model's "
                   "greedy return over 100 episodes, as RL Zoo measures"),
        Group("qrdqn-acrobot", "qrdqn", "acrobot", ("Acrobot-v1",), (0, 1, 2), 100_000, eval_episodes=100,
              note="conf/algo_env/qrdqn_acrobot.yaml (rl-baselines3-zoo qrdqn.yml Acrobot-v1); final model's "
                   "greedy return over 100 episodes, as RL Zoo measures"),
        Group("pqn", "pqn", "cartpole", ("CartPole-v1",), (0, 1, 2), 500_000, overrides=CLEANRL_PQN_CLASSIC,
              note="CleanRL pqn.py defaults (conf/algo_env/pqn_cartpole.yaml)"),
    ],
    # MinAtar: DQN (Young & Tian 2019) and Rainbow (Obando-Ceron & Castro 2021) with the papers' settings at 2M
    # frames, against the papers' curves at 2M (their runs go on to 5M and 10M). One frame is one agent step.
    "minatar": [
        Group("dqn", "dqn", "minatar", ("Breakout", "Asterix", "Freeway"), (0, 1, 2), 2_000_000,
              note="conf/algo_env/dqn_minatar.yaml (Young & Tian 2019 settings, Adam at their step size); 2M "
                   "frames, compared with their learning curves at 2M", smoke=("algo.learning_starts=512",)),
        Group("rainbow", "rainbow", "minatar", ("Breakout", "Asterix", "Freeway"), (0, 1, 2), 2_000_000,
              span=(1_000_000, 2_000_000),
              note="conf/algo_env/rainbow_minatar.yaml (Obando-Ceron & Castro 2021's settings): the first 2M frames "
                   "of its 10M schedule, compared with their curve at 2M; measured as they measure, the mean return "
                   "of the training episodes that ended in frames 1M-2M (Dopamine's second iteration)",
              smoke=("algo.learning_starts=512",)),
    ],
    # Memory on a partially observable task: sb3-contrib's RecurrentPPO settings (RL Zoo ppo_lstm.yml) on
    # CartPoleNoVel-v1, and beside it the same PPO without its core, matched with the same reference: a comparison
    # row that shows what the memory is worth, not a reproduction.
    "pomdp": [
        Group("ppo-lstm", "ppo", "cartpole_novel", ("CartPoleNoVel-v1",), (0, 1, 2), 100_000, eval_episodes=100,
              note="conf/algo_env/ppo_cartpole_novel.yaml (rl-baselines3-zoo ppo_lstm.yml CartPoleNoVel-v1); final "
                   "model's greedy return over 100 episodes, as RL Zoo measures"),
        Group("ppo-no-memory", "ppo", "cartpole_novel", ("CartPoleNoVel-v1",), (0, 1, 2), 100_000, eval_episodes=100,
              overrides=("algo.recurrent=none",),
              note="the ppo-lstm settings without the core (algo.recurrent=none): a comparison row"),
    ],
    "atari": [
        Group("ppo", "ppo", "atari", ("Pong", "Breakout"), (0, 1, 2), 10_000_000, needs="gpu", env_key="game",
              overrides=("device=cuda",), note="conf/algo_env/ppo_atari.yaml (CleanRL ppo_atari.py)"),
        Group("dqn", "dqn", "atari", ("Pong",), (0, 1, 2), 10_000_000, needs="gpu", env_key="game",
              overrides=("device=cuda",), note="conf/algo_env/dqn_atari.yaml (CleanRL dqn_atari.py)"),
    ],
    # Atari on this 2-core CPU: as many frames as fit in ~22 minutes per run (4 runs: one ~90-minute background
    # job), one run at a time (each uses both cores through Ray), compared with the references' curves at the
    # same env steps. envpool steps the env copies (pip install 'rlrun[envpool]').
    "atari-cpu": [
        Group("ppo", "ppo", "atari", ("Pong", "Breakout"), (0,), 10_000_000, needs="envpool", env_key="game",
              wall_time_s=1350, overrides=("executor=ray", "env.backend=envpool"),
              note="conf/algo_env/ppo_atari.yaml (CleanRL ppo_atari.py) on executor=ray, envpool, 22.5 min a run"),
        Group("impala", "impala", "atari", ("Pong", "Breakout"), (0,), 10_000_000, needs="envpool", env_key="game",
              wall_time_s=1350, overrides=("executor=ray", "env.backend=envpool"),
              note="conf/algo_env/impala_atari.yaml (Espeholt et al. 2018), learner thread, envpool, 22.5 min a run"),
    ],
}


# ---------------------------------------------------------------------------------------------------- references


def load_references(path: Path = REFERENCES) -> list[dict[str, Any]]:
    from omegaconf import OmegaConf

    refs = OmegaConf.to_container(OmegaConf.load(path), resolve=True)["references"]  # type: ignore[index]
    for r in refs:
        missing = [k for k in ("id", "algo", "env", "budget_env_steps", "mean", "measure", "source", "kind")
                   if r.get(k) is None]
        if missing:
            raise ValueError(f"{path}: reference {r.get('id')} lacks {', '.join(missing)}")
    return refs


def band_position(value: float, ref: dict[str, Any]) -> str:
    """``in`` the reference's band, or ``above`` / ``below`` it."""
    if in_band(value, ref):
        return "in"
    return "above" if value > ref["mean"] else "below"


def in_band(value: float, ref: dict[str, Any]) -> bool:
    """Inside the reference's spread: mean ± 2 std, or (no std published) at least 0.9 of the mean (for a negative
    mean: at most 10% of |mean| below it)."""
    if ref.get("std") is not None:
        return abs(value - ref["mean"]) <= 2 * ref["std"]
    return value >= ref["mean"] - 0.1 * abs(ref["mean"])


# ---------------------------------------------------------------------------------------------------- records
#
# A finished run leaves a *record*: ``<out>/records/<suite>/<group>/<env>-seed<k>.json`` with its summary figures
# and its learning curve (episode/return_mean against env steps, at most CURVE_POINTS points). Records are committed:
# the table and the curves are built from them alone, so a fresh clone regenerates the committed table, and a run
# only starts for an (env, seed) that has no record yet.

CURVE_POINTS = 300
SUMMARY_KEYS = ("env_steps", "episode_return_mean", "episodes", "wall_time_s", "env_steps_per_second",
                "stop_reason", "eval_return_mean", "eval_env_steps", "algo", "env", "seed", "run_name")


def record_path(out: Path, suite: str, group: Group, env: str, seed: int) -> Path:
    return out / "records" / suite / group.name / f"{env}-seed{seed}.json"


def load_records(out: Path, suite: str, group: Group) -> dict[tuple[str, int], dict[str, Any]]:
    found = {}
    for path in sorted((out / "records" / suite / group.name).glob("*.json")):
        rec = json.loads(path.read_text())
        found[(rec["env"], int(rec["seed"]))] = rec
    return found


def _curve(run_dir: Path) -> list[list[float]]:
    from rlrun.app.plot import RETURN_TAG, read_run

    if not (run_dir / "tensorboard").is_dir():
        return []
    points = read_run(run_dir).curves.get(RETURN_TAG)
    if points is None:
        return []
    x, y = points
    keep = sorted(set(int(round(i)) for i in np.linspace(0, len(x) - 1, min(len(x), CURVE_POINTS))))
    return [[float(x[i]), round(float(y[i]), 3)] for i in keep]


def harvest(runs: Path, out: Path, suite: str, group: Group, smoke: bool = False) -> list[Path]:
    """Write a record for every finished run under ``<runs>/<suite>/<group>/`` (a ``summary.json`` that stopped
    at its env-step budget, whether its sweep job finished it or ``rlrun resume=<run dir>`` did) that has none
    yet; returns the records written."""
    from benchmarks.common import fingerprint

    budget = SMOKE_STEPS if smoke else group.env_steps
    written = []
    for summary_path in sorted((runs / suite / group.name).rglob("summary.json")):
        run_dir = summary_path.parent
        summary = json.loads(summary_path.read_text())
        finished = summary.get("stop_reason") == "env_steps" and int(summary.get("env_steps") or 0) >= budget
        timed = bool(group.wall_time_s) and summary.get("stop_reason") == "wall_time_s"
        if not (finished or timed):
            continue
        path = record_path(out, suite, group, str(summary["env"]), int(summary["seed"]))
        if path.exists():
            continue
        record = {k: summary.get(k) for k in SUMMARY_KEYS}
        if group.eval_episodes:
            record["final_eval"] = greedy_eval(run_dir, 2 if smoke else group.eval_episodes)
        if group.span:
            start, end = (0, SMOKE_STEPS) if smoke else group.span
            record["span"] = span_return(run_dir, start, end)
        record.update(suite=suite, group=group.name, smoke=smoke, overrides=_overrides(run_dir),
                      hardware=fingerprint(), curve=_curve(run_dir), curve_x="env steps",
                      curve_y=f"episode/return_mean (last {RETURN_WINDOW} training episodes)")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n")
        written.append(path)
    return written


def greedy_eval(run_dir: Path, episodes: int) -> dict[str, Any]:
    """``rlrun eval <run dir> episodes=N`` (its eval.json, kept when it exists for that many episodes): the final
    model's greedy return, the measure of RL Zoo's benchmark."""
    path = run_dir / "eval.json"
    done = json.loads(path.read_text()) if path.exists() else {}
    if done.get("episodes") != episodes:
        rlrun = Path(sys.executable).parent / "rlrun"
        subprocess.run([str(rlrun), "eval", str(run_dir), f"episodes={episodes}"], check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)
        done = json.loads(path.read_text())
    return {k: done[k] for k in ("episodes", "return_mean", "return_std", "seed")}


def span_return(run_dir: Path, start: int, end: int) -> dict[str, Any] | None:
    """The mean return of a run's training episodes that ended in ``(start, end]``, exactly: the difference of
    ``episode/return_total`` over that of ``episode/count`` between the last report at or before ``start`` and the
    first at or after ``end``. Steps are those of the run's curves (frames: env steps where the env skips none, as
    MinAtar). None where the run's reports do not cover the span (a run by an rlrun that did not report the
    total)."""
    from rlrun.app.plot import read_scalars
    from rlrun.metric_names import EPISODES, RETURN_TOTAL

    series = [read_scalars(run_dir, tag) for tag in (EPISODES, RETURN_TOTAL)]
    if None in series:
        return None
    counts, totals = (dict(zip(x.tolist(), y.tolist(), strict=True)) for x, y in series)
    steps = sorted(set(counts) & set(totals))
    before, after = [s for s in steps if s <= start], [s for s in steps if s >= end]
    if not before or not after:
        return None
    a, b = before[-1], after[0]
    episodes = int(round(counts[b] - counts[a]))
    mean = (totals[b] - totals[a]) / episodes if episodes else None
    return {"env_steps": [int(a), int(b)], "episodes": episodes, "return_mean": mean}


def final_return(record: dict[str, Any], group: Group) -> float | None:
    """A run's final: its greedy evaluation or its span's mean where the group measures that way, else its training
    return."""
    if group.eval_episodes:
        return float(record["final_eval"]["return_mean"]) if record.get("final_eval") else None
    if group.span:
        span = record.get("span") or {}
        return None if span.get("return_mean") is None else float(span["return_mean"])
    value = record.get("episode_return_mean")
    return None if value is None else float(value)


def _overrides(run_dir: Path) -> list[str]:
    from rlrun.app.plot import run_overrides as read

    return read(run_dir)


# ---------------------------------------------------------------------------------------------------- running


def missing_sweeps(out: Path, suite: str, group: Group, envs: tuple[str, ...] | None = None,
                   seeds: tuple[int, ...] | None = None) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
    """The (envs, seeds) products still to run (within ``envs``/``seeds`` when given): one for the whole group
    when every env lacks the same seeds, else one per env (its missing seeds)."""
    have = load_records(out, suite, group)
    missing = {env: tuple(s for s in group.seeds if (env, s) not in have and (seeds is None or s in seeds))
               for env in group.envs if envs is None or env in envs}
    missing = {env: seeds for env, seeds in missing.items() if seeds}
    if not missing:
        return []
    if len(set(missing.values())) == 1:
        return [(tuple(missing), next(iter(missing.values())))]
    return [((env,), seeds) for env, seeds in missing.items()]


def sweep_dir(runs: Path, suite: str, group: Group, envs: tuple[str, ...], seeds: tuple[int, ...]) -> Path:
    """One directory per (envs, seeds) set, so running the same missing set again resumes its sweep."""
    if envs == group.envs and seeds == group.seeds:
        return runs / suite / group.name
    name = hashlib.sha1(f"{','.join(envs)}|{','.join(map(str, seeds))}".encode()).hexdigest()[:8]
    return runs / suite / group.name / f"part-{name}"


def sweep_command(folder: Path, group: Group, envs: tuple[str, ...], seeds: tuple[int, ...], jobs: int,
                  smoke: bool) -> list[str]:
    rlrun = str(Path(sys.executable).with_name("rlrun"))
    cmd = [rlrun, "-m", *group.sweep_overrides(smoke, envs, seeds)]
    if jobs > 1:
        cmd += ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}"]
    if smoke:  # a report per training step: the curve's points do not depend on how fast this machine is
        cmd += ["logger.mlflow.enabled=false", "logger.report_interval_s=0"]
    if (folder / "sweep.json").exists():
        cmd.append(f"sweep.resume={folder}")
    else:
        cmd.append(f"hydra.sweep.dir={folder}")
    return cmd


def code_snapshot(runs: Path) -> Path | None:
    """A checkout of this commit (a git worktree at ``<runs>/.code``, detached at HEAD) for the sweeps to run
    from: a sweep's jobs compose their configs from the code when each job starts, so editing the working tree
    during a suite of hours would change (or break: a new YAML key with the old schema loaded) the jobs still to
    come. None when this is not a git checkout. Uncommitted changes are not in it (a warning says so)."""
    def git(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return None
    if git("status", "--porcelain", "--untracked-files=no").stdout.strip():
        print("rlrun-bench reproduce: warning: uncommitted changes are not in the code the runs use (HEAD "
              f"{head.stdout.strip()[:8]}); commit them first to include them", file=sys.stderr, flush=True)
    snapshot = (runs / ".code").resolve()
    if (snapshot / ".git").exists():
        git("checkout", "-q", "--detach", head.stdout.strip(), cwd=snapshot)
    else:
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        made = git("worktree", "add", "-f", "--detach", str(snapshot), head.stdout.strip())
        if made.returncode != 0:
            print(f"rlrun-bench reproduce: warning: no code snapshot ({made.stderr.strip()}); the runs use this "
                  f"checkout", file=sys.stderr, flush=True)
            return None
    link = snapshot / "rlrun" / "conf"  # the package's configs, as the installed package maps them
    if not link.exists():
        link.symlink_to(Path("..") / "conf")
    return snapshot


def run_group(runs: Path, out: Path, suite: str, group: Group, jobs: int, smoke: bool, dry_run: bool,
              only_envs: tuple[str, ...] | None = None, only_seeds: tuple[int, ...] | None = None,
              code: Path | None = None) -> int:
    """Run the group's (env, seed) pairs that have no record yet and harvest their records. One sweep gets all
    ``jobs`` (joblib); several sweeps (envs missing different seeds) run side by side, one job each, at most
    ``jobs`` at a time, longest first. Returns the number of sweeps that failed."""
    harvest(runs, out, suite, group, smoke)  # runs finished by an earlier, interrupted invocation
    sweeps = sorted(missing_sweeps(out, suite, group, only_envs, only_seeds), key=lambda es: -len(es[0]) * len(es[1]))
    per_sweep = jobs if len(sweeps) == 1 else 1
    commands = [sweep_command(sweep_dir(runs, suite, group, envs, seeds), group, envs, seeds, per_sweep, smoke)
                for envs, seeds in sweeps]
    for cmd in commands:
        print(" ".join(cmd), flush=True)
    if dry_run:
        return 0
    env = {**os.environ}
    env.pop("MLFLOW_RUN_ID", None)
    if code is not None:  # the jobs import rlrun from the snapshot (PYTHONPATH wins over the editable install)
        env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    failed, running = 0, []
    pending = list(commands)
    while pending or running:
        while pending and len(running) < max(1, jobs // per_sweep):
            running.append(subprocess.Popen(pending.pop(0), cwd=code or ROOT, env=env, stdin=subprocess.DEVNULL))
            time.sleep(10.0)  # two sweeps creating a fresh sqlite MLflow store at once race on its tables
        time.sleep(2.0)
        for proc in [p for p in running if p.poll() is not None]:
            running.remove(proc)
            failed += proc.returncode != 0
            for path in harvest(runs, out, suite, group, smoke):
                print(f"record {path.relative_to(out)}", flush=True)
    return failed


# ---------------------------------------------------------------------------------------------------- table


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    m = sum(values) / len(values)
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def build_rows(suite: str, out: Path, refs: list[dict[str, Any]], gpu: bool) -> list[dict[str, Any]]:
    rows = []
    for group in SUITES[suite]:
        records = load_records(out, suite, group)
        for env in group.envs:
            mine = [records[(env, s)] for s in group.seeds if (env, s) in records]
            finals = [f for f in (final_return(r, group) for r in mine) if f is not None]
            mean, std = _mean_std(finals)
            iqm = es.bootstrap_ci([finals], es.iqm).as_dict() if finals else None
            row: dict[str, Any] = {
                "algo": group.algo, "env": env, "group": group.name, "settings": group.note,
                "budget_env_steps": group.env_steps, "seeds_planned": list(group.seeds),
                "wall_time_budget_s": group.wall_time_s,
                "seeds": [int(r["seed"]) for r in mine], "finals": finals,
                "env_steps": [int(r["env_steps"]) for r in mine], "mean": mean, "std": std, "iqm": iqm,
                "wall_time_s_mean": _mean_std([float(r["wall_time_s"]) for r in mine])[0],
                "env_steps_per_s_mean": _mean_std([float(r["env_steps_per_second"]) for r in mine])[0],
                "smoke": any(r.get("smoke") for r in mine), "references": [],
                "hardware": sorted({describe_hardware(r.get("hardware") or {}) for r in mine}),
                "dates": sorted({str((r.get("hardware") or {}).get("date") or "")[:10] for r in mine} - {""})}
            if group.needs == "gpu" and not gpu and not mine:
                row["status"] = "not run: needs a GPU"
            elif group.needs == "envpool" and not mine and not has_envpool():
                row["status"] = "not run: needs envpool (pip install 'rlrun[envpool]')"
            elif group.wall_time_s and len(mine) == len(group.seeds):
                row["status"] = f"done: {group.wall_time_s / 60:g} min a run"
            elif len(mine) < len(group.seeds):
                row["status"] = f"incomplete: {len(mine)} of {len(group.seeds)} seeds"
            else:
                row["status"] = "done"
            for ref in refs:
                if ref["algo"] != group.algo or ref["env"] != env or ref.get("env_group", group.env_option) != \
                        group.env_option:
                    continue
                if ref["kind"] == "curve":  # a point of the reference's learning curve: shown at the steps reached
                    reached = min(row["env_steps"]) if row["env_steps"] else 0
                    if not reached or int(ref["budget_env_steps"]) > reached:
                        continue
                entry = {k: ref.get(k) for k in ("id", "mean", "std", "seeds", "budget_env_steps", "env_version",
                                                 "measure", "source", "url", "kind")}
                entry["same_budget"] = int(ref["budget_env_steps"]) == group.env_steps
                reached = min(row["env_steps"]) if row["env_steps"] else 0
                # A run stopped by its wall time short of the reference's budget: the reference is shown for
                # scale, not compared (a ratio between different budgets would not be like with like).
                entry["for_scale"] = bool(group.wall_time_s and reached and int(ref["budget_env_steps"]) > reached)
                if mean is not None and ref["mean"] and not entry["for_scale"]:
                    entry["ratio"] = mean / ref["mean"] if ref["mean"] > 0 else ref["mean"] / mean
                    judged = entry["same_budget"] and ref["kind"] == "band" and row["status"] == "done"
                    entry["in_band"] = in_band(mean, ref) if judged else None
                    entry["band"] = band_position(mean, ref) if judged else None
                row["references"].append(entry)
            row["curves"] = [r["curve"] for r in mine if r.get("curve")]
            rows.append(row)
    return rows


def budget_cell(row: dict[str, Any]) -> str:
    """The budget column: the env steps of the group's budget, or for a run stopped by its wall time the steps it
    reached (the least over seeds) in that time."""
    if row.get("wall_time_budget_s") and row["env_steps"]:
        return f"{min(row['env_steps']):,} reached in {row['wall_time_budget_s'] / 60:g} min"
    return f"{row['budget_env_steps']:,}"


def stopped_short(row: dict[str, Any], below: float = 0.5) -> float | None:
    """The fraction of its budget a row's runs reached, where a wall-time budget stopped them before ``below`` of
    it (None otherwise): a CPU-sized Atari run that ends at 2% of CleanRL's 10M steps scores what a random policy
    scores, which a results table must not show as rlrun's result."""
    if not row.get("wall_time_budget_s") or not row["env_steps"]:
        return None
    fraction = min(row["env_steps"]) / row["budget_env_steps"]
    return fraction if fraction < below else None


def runs_line(rows: list[dict[str, Any]], dated: bool = True) -> str:
    """Where a table's runs ran, from their records: their hardware, and with ``dated`` the span of their dates."""
    hardware = sorted({h for r in rows for h in r.get("hardware", [])})
    dates = sorted({d for r in rows for d in r.get("dates", [])}) if dated else []
    if not hardware:
        return "no run yet"
    span = "" if not dates else f", {dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else "")
    return "; ".join(hardware) + span


def _fmt(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


def describe_hardware(hardware: dict[str, Any]) -> str:
    """A fingerprint (benchmarks.common.fingerprint) as the table names it: CPU, cores, torch."""
    return (f"{hardware.get('cpu', '?')}, {hardware.get('cores', '?')} cores, "
            f"torch {hardware.get('versions', {}).get('torch', '?')}")


def runs_hardware(rows: list[dict[str, Any]], here: dict[str, Any]) -> str:
    """The hardware the table's runs ran on (each record keeps its own), or this machine's where none has run."""
    seen = sorted({h for r in rows for h in r.get("hardware", [])})
    return "; ".join(seen) if seen else f"{describe_hardware(here)} (no run yet: this machine)"


def markdown(suite: str, rows: list[dict[str, Any]], hardware: dict[str, Any]) -> str:
    lines = [f"# Reproduction table: {suite}", "",
             "rlrun's training episodic return (mean of each seed's last 100 episodes unless the row's settings "
             "say otherwise; mean ± std over seeds) "
             "beside published references at the same budget. Band: reference mean ± 2 std (a row above or below it "
             "is investigated in the closing notes and README). Generated by "
             f"`rlrun-bench reproduce {suite}`; never hand-edited.", "",
             f"Hardware of the runs: {runs_hardware(rows, hardware)}.", "",
             "| algo (group) | env | budget | rlrun (mean ± std) | rlrun IQM [95% CI] | seeds | reference | ratio "
             "| in band | wall / run | steps/s | status |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        refs = r["references"] or [None]
        for i, ref in enumerate(refs):
            ours = f"{_fmt(r['mean'])} ± {_fmt(r['std'])}" if r["mean"] is not None else "—"
            if ref is None:
                ref_s, ratio, band = "—", "—", "—"
            else:
                spread = f" ± {_fmt(ref['std'])}" if ref.get("std") is not None else ""
                kind = KIND_LABELS[ref["kind"]]
                budget = "" if ref["same_budget"] else f" at {ref['budget_env_steps']:,} steps"
                scale = " (for scale: a budget this run did not reach)" if ref.get("for_scale") else ""
                ref_s = (f"[{_fmt(ref['mean'])}{spread}]({ref['url']}) {ref['env_version']}{budget}{kind}{scale}")
                ratio = _fmt(ref.get("ratio"), 2)
                band = {"in": "yes", "above": "**above**", "below": "**below**", None: "—"}[ref.get("band")]
            wall = "—" if r["wall_time_s_mean"] is None else f"{r['wall_time_s_mean'] / 60:.1f} min"
            lines.append(f"| {r['group'] if i == 0 else ''} | {r['env'] if i == 0 else ''} | "
                         f"{budget_cell(r)} | {ours if i == 0 else ''} | {iqm_cell(r) if i == 0 else ''} "
                         f"| {len(r['seeds']) if i == 0 else ''} "
                         f"| {ref_s} | {ratio} | {band} | {wall if i == 0 else ''} | "
                         f"{_fmt(r['env_steps_per_s_mean'], 0) if i == 0 else ''} | {r['status'] if i == 0 else ''} |")
    agg = aggregate_line(suite, rows, "")
    if agg:
        lines += ["", agg]
    lines += ["", "Sources: `benchmarks/reproduce_data/references.yaml`. Settings per row: "
              + "; ".join(sorted({f"{r['group']}: {r['settings']}" for r in rows})) + "."]
    return "\n".join(lines) + "\n"


def iqm_cell(row: dict[str, Any]) -> str:
    """The row's IQM over seeds with its 95% bootstrap interval; a single seed has no interval."""
    iqm = row.get("iqm")
    if iqm is None:
        return "—"
    if len(row["finals"]) < 2:
        return f"{_fmt(iqm['value'])} (one seed: no interval)"
    return f"{_fmt(iqm['value'])} [{_fmt(iqm['low'])}, {_fmt(iqm['high'])}]"


def normalised(score: float, reference: float) -> float:
    """A return on the reference's scale: 1 at the reference, 0 at a return of 0 for a positive reference, and for
    a negative one (Acrobot, MountainCar) above 1 when the return is higher: ``1 + (score - ref) / |ref|``."""
    return 1.0 + (score - reference) / abs(reference)


def normalised_scores(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per judged row (a band reference at the row's budget, every seed done), its seeds' finals normalised by the
    reference's mean: the tasks of the suite's aggregate."""
    out = {}
    for r in rows:
        ref = next((x for x in r["references"] if x.get("in_band") is not None), None)
        if ref is not None and r["finals"] and ref["mean"]:
            out[f"{r['group']} {r['env']}"] = np.array([normalised(f, float(ref["mean"])) for f in r["finals"]])
    return out


def aggregate_line(suite: str, rows: list[dict[str, Any]], curves: str) -> str | None:
    """The suite's aggregate: the IQM over every judged row's seeds of the reference-normalised return, with its
    stratified-bootstrap interval (rows are the strata), and the link to its performance profile."""
    tasks = normalised_scores(rows)
    if len(tasks) < 2:
        return None
    iqm = es.bootstrap_ci(list(tasks.values()), es.iqm)
    runs = sum(t.size for t in tasks.values())
    return (f"Aggregate over {len(tasks)} rows ({runs} runs): IQM of the reference-normalised return (1 = the "
            f"reference's mean) {iqm.value:.2f} [{iqm.low:.2f}, {iqm.high:.2f}] (95% stratified-bootstrap interval); "
            f"[performance profile]({curves}{suite}-profile.png).")


def plot_profile(suite: str, rows: list[dict[str, Any]], out_dir: Path) -> Path | None:
    """The performance profile of the suite's judged rows: the fraction of runs whose reference-normalised return
    exceeds tau, averaged over rows, with its 95% stratified-bootstrap band."""
    tasks = normalised_scores(rows)
    if len(tasks) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = list(tasks.values())
    everything = np.concatenate(scores)
    taus = np.linspace(min(0.8, everything.min() - 0.05), max(1.2, everything.max() + 0.05), 200)
    profile = es.performance_profile(scores, taus)
    low, high = es.performance_profile_band(scores, taus)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    line = ax.plot(taus, profile, label=f"rlrun, {len(tasks)} rows, {everything.size} runs")[0]
    ax.fill_between(taus, low, high, alpha=0.2, color=line.get_color())
    ax.axvline(1.0, ls="--", lw=1, color="gray", label="the references' mean")
    ax.set_xlabel("reference-normalised return tau")
    ax.set_ylabel("fraction of runs with score > tau")
    ax.set_title(f"{suite}: performance profile")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    path = out_dir / f"{suite}-profile.png"
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_curves(suite: str, rows: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per env: each algorithm's training return (window 100) against env steps from its records, mean ±
    std band over seeds, and each band reference as a dashed line at its budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlrun.app.plot import aggregate

    written = []
    for env in sorted({r["env"] for r in rows}):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        drawn = False
        for r in (r for r in rows if r["env"] == env):
            curves = [(np.array([p[0] for p in c]), np.array([p[1] for p in c])) for c in r["curves"]]
            if not curves:
                continue
            x, m, s = aggregate(curves)
            line = ax.plot(x, m, label=f"rlrun {r['group']} ({len(curves)} seeds)")[0]
            ax.fill_between(x, m - s, m + s, alpha=0.2, color=line.get_color())
            drawn = True
            for ref in r["references"]:
                if ref["kind"] == "band":
                    ax.axhline(ref["mean"], ls="--", lw=1, color=line.get_color(),
                               label=f"{ref['id']} at {ref['budget_env_steps']:,} steps")
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xlabel("env steps")
        ax.set_ylabel("training return (last 100 episodes)")
        ax.set_title(f"{env}: rlrun vs published")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        path = out_dir / f"{suite}-{env}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


CURVES = "benchmarks/results/reproduce/"
"""Where the curve PNGs are, as README links them (from the repository root)."""
PAGES = (("README.md", CURVES, False), ("docs/results/reproduction.md", "../assets/reproduce/", True))
"""The pages that show the compact tables (where they have a suite's markers), each with the path its links reach
the PNGs by (the docs site publishes benchmarks/results/reproduce/*.png as assets/reproduce/, docs/hooks.py) and
whether its table is dated: the docs page says when the runs ran; README, which carries no dated figures, does not."""


def readme_block(suite: str, rows: list[dict[str, Any]], curves: str = CURVES, dated: bool = True) -> str:
    """The compact table README (and the docs' results page) show between ``<!-- reproduce:<suite>:start/end -->``:
    per row one reference, the like-for-like one (a published band at the row's budget, else a point of a published
    curve at the steps the row reached, else a band at another budget, marked with its budget); ``curves``: the
    link prefix of the PNGs on that page; ``dated``: the line above the table gives the runs' dates too."""
    lines = [f"<!-- generated by `rlrun-bench reproduce {suite}` from benchmarks/results/reproduce/{suite}.json; "
             f"do not edit by hand -->", f"`rlrun-bench reproduce {suite}`: {runs_line(rows, dated)}.", "",
             "| algo (group) | env | budget (env steps) | rlrun: mean ± std (seeds) | rlrun: IQM [95% CI] "
             "| reference: mean ± std | ratio | band | wall / run |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        refs = r["references"]
        ref = (next((x for x in refs if x["kind"] == "band" and x["same_budget"]), None)
               or next((x for x in refs if x["kind"] == "curve" and x.get("ratio") is not None), None)
               or next((x for x in refs if x["kind"] == "band"), None))
        if r["mean"] is None:
            ours = r["status"]
        elif len(r["seeds"]) == 1:  # one seed has no spread to show
            ours = f"{_fmt(r['mean'])} (1)"
        else:
            ours = f"{_fmt(r['mean'])} ± {_fmt(r['std'])} ({len(r['seeds'])})"
        short = stopped_short(r)
        if short is not None:  # a run cut at a few % of its budget scores what an untrained agent does: no result
            cap = f"{r['wall_time_budget_s'] / 60:g}-min"
            ours = f"not measured: its {cap} wall time stopped it at {short:.0%} of the budget"
        if ref is None:
            ref_s, ratio, band = "—", "—", "—"
        else:
            budget = "" if ref["same_budget"] else f" at {ref['budget_env_steps']:,}"
            if ref["kind"] == "curve":
                ref_s = f"[{_fmt(ref['mean'])}]({ref['url']}) ({ref['env_version']}, their curve at this step)"
            else:
                scale = f", {ref['budget_env_steps']:,} steps: for scale" if ref.get("for_scale") else ""
                ref_s = (f"[{_fmt(ref['mean'])} ± {_fmt(ref['std'])}]({ref['url']}) "
                         f"({ref['env_version']}{budget}{scale})")
            ratio = _fmt(ref.get("ratio"), 2)
            band = {"in": "in", "above": "above", "below": "**below**", None: "—"}[ref.get("band")]
        wall = "—" if r["wall_time_s_mean"] is None else f"{r['wall_time_s_mean'] / 60:.0f} min"
        iqm = iqm_cell(r) if short is None else "—"
        lines.append(f"| {r['group']} | {r['env']} | {budget_cell(r)} | {ours} | {iqm} | {ref_s} | {ratio} | {band} "
                     f"| {wall} |")
    pngs = sorted({f"[{r['env']}]({curves}{suite}-{r['env']}.png)" for r in rows if r["curves"]})
    if pngs:
        lines += ["", "Curves: " + ", ".join(pngs) + "."]
    agg = aggregate_line(suite, rows, curves)
    if agg:
        lines += ["", agg]
    return "\n".join(lines)


def update_readme(readme: Path, suite: str, rows: list[dict[str, Any]], curves: str = CURVES,
                  dated: bool = True) -> bool:
    """Replace a page's block between the suite's markers, when it has them; returns whether it changed."""
    from benchmarks.report import replace_between_markers

    start, end = f"<!-- reproduce:{suite}:start -->", f"<!-- reproduce:{suite}:end -->"
    text = readme.read_text()
    if start not in text or end not in text:
        return False
    new = replace_between_markers(text, readme_block(suite, rows, curves, dated), start, end)
    if new != text:
        readme.write_text(new)
    return new != text


def write_table(suite: str, out_dir: Path, gpu: bool, pages: tuple[tuple[Path, str, bool], ...] = ()) -> Path:
    """The suite's table files and PNGs in ``out_dir``, and the compact table in each of ``pages`` (page, link
    prefix of the PNGs there, whether dated) that has the suite's markers."""
    from benchmarks.common import fingerprint

    rows = build_rows(suite, out_dir, load_references(), gpu)
    hardware = fingerprint()
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"suite": suite, "hardware": hardware, "return_window": RETURN_WINDOW,
              "references_file": str(REFERENCES.relative_to(ROOT)),
              "rows": [{k: v for k, v in r.items() if k != "curves"} for r in rows]}
    path = out_dir / f"{suite}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    (out_dir / f"{suite}.md").write_text(markdown(suite, rows, hardware))
    profile = plot_profile(suite, rows, out_dir)
    for png in [*plot_curves(suite, rows, out_dir), *([profile] if profile else [])]:
        print(f"wrote {png}")
    print(f"wrote {path} and {path.with_suffix('.md')}")
    for page, curves, dated in pages:
        if page.exists() and update_readme(page, suite, rows, curves, dated):
            print(f"updated {page}")
    return path


def has_envpool() -> bool:
    import importlib.util

    return importlib.util.find_spec("envpool") is not None


def has_gpu() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rlrun-bench reproduce", description=__doc__.split("\n\n")[0])
    p.add_argument("suite", choices=sorted(SUITES))
    p.add_argument("--groups", help="comma-separated groups of the suite (default: all)")
    p.add_argument("--envs", help="comma-separated env ids: run only these (the table keeps every row)")
    p.add_argument("--seeds", help="comma-separated seeds: run only these")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="jobs at a time (default: cores)")
    p.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS, help="where the sweeps' run directories go")
    default_out = ROOT / "benchmarks" / "results" / "reproduce"
    p.add_argument("--out", type=Path, default=default_out, help="where the table and curves go")
    p.add_argument("--table-only", action="store_true", help="do not run; write the table from what has run")
    p.add_argument("--dry-run", action="store_true", help="print the sweep commands only")
    p.add_argument("--smoke", action="store_true", help="tiny budgets (checks the path; not a result)")
    p.add_argument("--no-snapshot", action="store_true",
                   help="run from this checkout, not a snapshot of HEAD at <runs-dir>/.code (do not edit it meanwhile)")
    a = p.parse_args(argv)
    # Absolute: the sweeps run with the code snapshot as their working directory, where a relative path would land.
    a.runs_dir, a.out = a.runs_dir.resolve(), a.out.resolve()
    groups = SUITES[a.suite]
    if a.groups:
        wanted = a.groups.split(",")
        unknown = sorted(set(wanted) - {g.name for g in groups})
        if unknown:
            p.error(f"suite {a.suite} has no group {', '.join(unknown)}; groups: {', '.join(g.name for g in groups)}")
        groups = [g for g in groups if g.name in wanted]
    gpu = has_gpu()
    failed = 0
    code = None if (a.no_snapshot or a.table_only or a.dry_run) else code_snapshot(a.runs_dir)
    for g in groups:
        if a.table_only:
            harvest(a.runs_dir, a.out, a.suite, g, a.smoke)
        elif g.needs == "gpu" and not gpu:
            print(f"[{a.suite}/{g.name}] not run: needs a GPU (none here)", flush=True)
        elif g.needs == "envpool" and not has_envpool():
            print(f"[{a.suite}/{g.name}] not run: needs envpool (pip install 'rlrun[envpool]')", flush=True)
        else:
            failed += run_group(a.runs_dir, a.out, a.suite, g, max(1, a.jobs), a.smoke, a.dry_run,
                                tuple(a.envs.split(",")) if a.envs else None,
                                tuple(int(x) for x in a.seeds.split(",")) if a.seeds else None, code)
    if not a.dry_run:  # the pages' tables follow the committed results only (not a --out elsewhere)
        pages = tuple((ROOT / page, curves, dated) for page, curves, dated in PAGES)
        write_table(a.suite, a.out, gpu, pages if a.out.resolve() == default_out.resolve() else ())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
