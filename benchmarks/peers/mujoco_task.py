"""The MuJoCo task of ``rlrun-bench peers``, ``mujoco_ppo``: wall time of PPO training on HalfCheetah for the same
budget of env steps (1M by default, the MuJoCo group of ``rlrun-bench reproduce mujoco``), at equal settings
(TorchRL at its own example's, which differ in a few named places), with each contender's final return beside it
so that a reader sees both: the time for the same work, and that the work learned as much.

Equal settings: CleanRL's ``ppo_continuous_action.py`` defaults (``SETTINGS``): one env copy, rollouts of 2,048 env
steps, 10 epochs of 32 minibatches (64 transitions each), lr 3e-4 annealed linearly to 0 over the budget, gamma
0.99, GAE lambda 0.95, clip 0.2 (and 0.2 on the value), no entropy bonus, gradient norm 0.5, advantages normalised,
observations normalised and clipped to ±10, rewards scaled by the running std of the discounted return and clipped
to ±10, 64x64 tanh actor and critic, a state-independent log std from 0; one torch thread per process.

- ``rlrun``: ``rlrun algo=ppo env=mujoco env.id=HalfCheetah-v5`` (its preset conf/algo_env/ppo_mujoco.yaml is these
  settings), contenders/rlrun_halfcheetah.py.
- ``sb3``: Stable-Baselines3 PPO given the same settings (``VecNormalize`` for the normalisation), on
  HalfCheetah-v5 (gymnasium 1.x and mujoco 4.0.0 in its venv, as rlrun's), contenders/sb3_halfcheetah.py. Not
  rl-baselines3-zoo's tuned HalfCheetah settings (256x256 ReLU, 20 epochs of 64 on 512-step rollouts, lr 2e-5):
  the task compares the time for the same work.
- ``cleanrl``: CleanRL's ``cleanrl/ppo_continuous_action.py`` as published (the pinned commit of venvs.py, checked
  by sha256), run unchanged with ``--seed`` and ``--total-timesteps``. Its pins (gymnasium 0.29.1, numpy<2, and
  mujoco 2.3.3 from its mujoco extra) have no v5 tasks: it runs ``--env-id HalfCheetah-v4`` (the same model, obs,
  reward and 1,000-step limit as v5: gymnasium's v5 changelog lists no change of HalfCheetah's dynamics; an older
  engine, whose raw speed this task measures beside: ``env_only_steps_per_s``).
- ``torchrl``: TorchRL's own MuJoCo PPO example, ``sota-implementations/ppo/ppo_mujoco.py``, with its own settings
  (config_mujoco.yaml), on HalfCheetah-v5 (mujoco 4.0.0 in its venv, as rlrun's), contenders/torchrl_halfcheetah.py:
  the same rollouts, epochs, minibatches, lr schedule, gamma, lambda, clip and network sizes as the task's, but a
  critic coefficient of 0.25, no value-loss clipping, no reward normalisation, no gradient clipping and a
  tanh-squashed Gaussian: its example's choices, kept (the task runs each peer's own code; the return column shows
  what they bought).
- Sample Factory is not a contender of this task: it trains APPO (asynchronous, another algorithm than PPO with one
  env copy).

Differences of design that remain, each the contender's own: rlrun and SB3 bootstrap time-limit truncations from the
value, CleanRL treats them as terminations (benchmarks/results/reproduce/mujoco.md has rlrun both ways: 1,700.9 ±
50.1 and 1,482.4 ± 77.7 at 1M); SB3's value clipping keeps only the clipped loss and does not halve it.

Every contender trains for the same whole number of rollouts: the budget rounded down to a multiple of 2,048
(1M -> 999,424 env steps, what CleanRL's ``total_timesteps // 2048`` iterations do; rlrun, SB3 and TorchRL get that
number). Protocol: rlrun's, SB3's and TorchRL's scripts print ``{"episodes": [...], "env_steps": N}`` per rollout (the
peers' JSON lines); CleanRL prints ``global_step=N, episodic_return=[R]`` per episode and ``SPS: ...`` after each
update (one update = 2,048 env steps). The returns are the raw training returns (before any normalisation).

Figures per contender and seed (medians over seeds, except the return): ``wall_s`` from starting the process to its
exit after the last update (imports and start-up included), ``env_steps``, ``env_steps_per_s`` = env steps / wall_s,
``final_return`` = mean of the last 100 training episodes (the reproduction suite's measure; mean over seeds, with
``final_return_std``, population std), ``first_episode_s`` (start-up: imports, env and model, the first 1,000 env
steps), ``peak_rss_mib`` of the process tree, ``fraction_completed`` (runs that reached the budget); once per
contender ``env_only_steps_per_s`` (random actions in its venv, the env's own speed there). Ratios:
``ratio/mujoco_ppo/wall/<peer>_over_rlrun`` (> 1: rlrun is faster), ``.../first_episode/...``,
``.../peak_rss/...`` and ``ratio/mujoco_ppo/final_return/<peer>_over_rlrun`` (only where both returns are
positive).

A full run is long on 2 cores: per seed at 1M env steps, quiet, rlrun ~7 min, SB3 ~13 min, CleanRL ~15 min
(benchmarks/results/2026-11-27-*-peers.json), TorchRL 42-49 min (2026-11-27-cde648c, 2026-11-28-251ab51);
``--contenders`` picks a subset.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchmarks.peers.processes import interleaved, watch
from benchmarks.peers.tables import CLEANRL_LINE, cell, flat_figures, json_object, peer_over_rlrun

HERE = Path(__file__).resolve().parent
TASK = "mujoco_ppo"
CONTENDERS = ("rlrun", "sb3", "cleanrl", "torchrl")
ENV_ID = "HalfCheetah-v5"
ENV_IDS = {"rlrun": ENV_ID, "sb3": ENV_ID, "cleanrl": "HalfCheetah-v4",  # gymnasium 0.29.1 has no v5 tasks
           "torchrl": ENV_ID}
BUDGET_ENV_STEPS = 1_000_000
QUICK_BUDGET_ENV_STEPS = 4096  # two rollouts: the path, not the learning
RETURN_WINDOW = 100
# CleanRL ppo_continuous_action.py's defaults (its Args and make_env), which every contender runs.
SETTINGS = {"num_envs": 1, "num_steps": 2048, "update_epochs": 10, "num_minibatches": 32, "learning_rate": 3e-4,
            "anneal_lr": True, "gamma": 0.99, "gae_lambda": 0.95, "clip_coef": 0.2, "clip_vloss": True,
            "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5, "norm_adv": True, "hidden": [64, 64],
            "activation": "tanh", "obs_clip": 10.0, "reward_clip": 10.0}
ROLLOUT_STEPS = SETTINGS["num_steps"] * SETTINGS["num_envs"]
# (figure, axis label, title) of the task's bar chart.
CHART = ("wall_s", "wall time for the budget (s, median)", "PPO HalfCheetah wall time, lower is better")

Parsed = tuple[list[float], int | None, bool]  # (episode returns, env steps so far, one update done)


def whole_rollouts(budget_env_steps: int) -> int:
    """The budget every contender trains for: whole rollouts of 2,048 env steps, at least one."""
    return max(1, int(budget_env_steps) // ROLLOUT_STEPS) * ROLLOUT_STEPS


def wall_cap_s(budget_env_steps: int) -> float:
    """The wall-time cap of one run: start-up plus the budget at 200 env steps/s (a quarter of rlrun's speed)."""
    return 300.0 + budget_env_steps / 200.0


# --------------------------------------------------------------------------------------------- reading a run


def parse_line(line: str) -> Parsed | None:
    """One line of a contender's stdout: ``(returns of the episodes it reports, env steps so far or None, whether it
    marks the end of an update)``; None for a line of no interest. JSON lines (rlrun, SB3) and CleanRL's prints."""
    if line.startswith("{"):
        d = json_object(line)
        if d is None or "env_steps" not in d:
            return None
        return [float(r) for r in d.get("episodes", [])], int(d["env_steps"]), False
    m = CLEANRL_LINE.match(line)
    if m:
        return [float(m.group(2))], int(m.group(1)), False
    if line.startswith("SPS:"):  # CleanRL: printed once after each update
        return [], None, True
    return None


@dataclass
class MujocoRun:
    """What one contender's process did on one seed."""

    wall_s: float = 0.0
    env_steps: int = 0
    updates: int = 0  # CleanRL's ``SPS:`` lines
    first_episode_s: float | None = None
    peak_rss_mib: float = 0.0
    returns: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def final_return(self) -> float | None:
        """Mean of the last 100 training episodes (None before the first)."""
        last = self.returns[-RETURN_WINDOW:]
        return sum(last) / len(last) if last else None

    @property
    def env_steps_per_s(self) -> float | None:
        return self.env_steps / self.wall_s if self.env_steps and self.wall_s > 0 else None


def measure(argv: list[str], budget_env_steps: int, cap_s: float, cwd: Path, env: dict[str, str],
            until_first_episode: bool = False) -> MujocoRun:
    """Run one contender to its exit (or ``cap_s``; or its first episode: a warm-up) and read its figures. A run
    that did not train for ``budget_env_steps`` says why in ``error``."""
    run = MujocoRun()

    def on_line(at: float, line: str) -> bool:
        parsed = parse_line(line)
        if parsed is None:
            return False
        episodes, steps, update = parsed
        if episodes and run.first_episode_s is None:
            run.first_episode_s = at
        run.returns.extend(episodes)
        run.updates += update
        run.env_steps = max(run.env_steps, steps or 0, run.updates * ROLLOUT_STEPS)
        return until_first_episode and run.first_episode_s is not None

    watched = watch(argv, on_line, cap_s, cwd, env)
    run.wall_s, run.peak_rss_mib = watched.wall_s, watched.peak_rss_mib
    if until_first_episode:
        run.error = "warm-up"
    elif watched.budget_reached:
        run.error = f"wall-time cap of {cap_s:.0f} s reached at {run.env_steps} env steps"
    elif watched.returncode:
        run.error = f"exit {watched.returncode}: {watched.stderr_tail}"
    elif run.env_steps < budget_env_steps:
        run.error = f"ended after {run.env_steps} of {budget_env_steps} env steps"
    return run


# ------------------------------------------------------------------------------------------------ contenders


def command(name: str, python: str, seed: int, budget_env_steps: int) -> list[str]:
    """The argv of contender ``name`` (``python``: its venv's interpreter) for one seed and budget."""
    if name == "cleanrl":
        from benchmarks.peers.venvs import PEERS, script

        path = script(PEERS["cleanrl"], "cleanrl/ppo_continuous_action.py")
        return [python, str(path), "--seed", str(seed), "--env-id", ENV_IDS[name], "--total-timesteps",
                str(budget_env_steps)]
    return [python, str(HERE / "contenders" / f"{name}_halfcheetah.py"), "--seed", str(seed), "--env-id",
            ENV_IDS[name], "--budget-env-steps", str(budget_env_steps)]


def contender_env(name: str) -> dict[str, str]:
    """What a contender's process needs beside the harness's environment (CleanRL: its scripts' folder)."""
    if name == "cleanrl":
        from benchmarks.peers.venvs import PEERS, scripts_dir

        return {"PYTHONPATH": str(scripts_dir(PEERS["cleanrl"]))}
    return {}


ENV_SPEED = """
import sys, time
import gymnasium as gym
env = gym.make(sys.argv[1])
env.reset(seed=0)
env.action_space.seed(0)
n, start = int(sys.argv[2]), time.perf_counter()
for _ in range(n):
    _, _, terminated, truncated, _ = env.step(env.action_space.sample())
    if terminated or truncated:
        env.reset()
print(n / (time.perf_counter() - start))
"""


def env_only_steps_per_s(python: str, env_id: str, env: dict[str, str], steps: int = 10_000) -> float | None:
    """The env's own speed in a contender's venv: ``steps`` random actions in one process (None if it fails)."""
    with tempfile.TemporaryDirectory(prefix="peers-mujoco-env-") as cwd:
        try:
            done = subprocess.run([python, "-c", ENV_SPEED, env_id, str(steps)], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return None
    try:
        return round(float(done.stdout.strip().splitlines()[-1]), 1)
    except (ValueError, IndexError):
        return None


# ---------------------------------------------------------------------------------------------- the figures


def summarize(runs: list[MujocoRun]) -> dict[str, Any]:
    """Medians over the seeds whose run completed the budget (the return: mean ± population std over them); failed
    runs are left out and listed under per_seed/errors."""
    good = [r for r in runs if r.error is None]

    def med(values: list[float]) -> float | None:
        return round(statistics.median(values), 2) if values else None

    finals = [r.final_return for r in good if r.final_return is not None]
    return {
        "wall_s": med([r.wall_s for r in good]),
        "env_steps": med([r.env_steps for r in good]),
        "env_steps_per_s": med([r.env_steps_per_s for r in good if r.env_steps_per_s is not None]),
        "final_return": round(statistics.fmean(finals), 1) if finals else None,
        "final_return_std": round(statistics.pstdev(finals), 1) if finals else None,
        "first_episode_s": med([r.first_episode_s for r in good if r.first_episode_s is not None]),
        "peak_rss_mib": med([r.peak_rss_mib for r in good]),
        "fraction_completed": len(good) / len(runs) if runs else None,
        "per_seed": {"wall_s": [round(r.wall_s, 2) for r in runs], "env_steps": [r.env_steps for r in runs],
                     "final_return": [None if r.final_return is None else round(r.final_return, 1) for r in runs],
                     "episodes": [len(r.returns) for r in runs],
                     "first_episode_s": [None if r.first_episode_s is None else round(r.first_episode_s, 2)
                                         for r in runs],
                     "peak_rss_mib": [round(r.peak_rss_mib, 1) for r in runs],
                     "errors": [r.error for r in runs]},
    }


def ratios(table: dict[str, dict[str, Any]]) -> dict[str, float]:
    """``ratio/mujoco_ppo/<figure>/<peer>_over_rlrun``: wall time, start-up and memory (> 1: rlrun is faster, starts
    sooner, holds less), and the final return (< 1: the peer learned less), only where both returns are positive."""
    out = peer_over_rlrun(TASK, table, {"wall": "wall_s", "first_episode": "first_episode_s",
                                        "peak_rss": "peak_rss_mib"})
    mine = (table.get("rlrun") or {}).get("final_return")
    for peer, row in table.items():
        theirs = row.get("final_return")
        if peer != "rlrun" and theirs is not None and mine is not None and theirs > 0 and mine > 0:
            out[f"ratio/{TASK}/final_return/{peer}_over_rlrun"] = round(theirs / mine, 3)
    return out


def markdown_rows(rows: dict[str, dict[str, Any]], figures: dict[str, Any]) -> list[str]:
    """The task's table (its own columns: a wall time for a budget, and the return it bought)."""

    def fmt(v: Any, digits: int = 1) -> str:
        return cell(v, digits, thousands=True)

    lines = ["| task | contender | version | env | wall time (s, median) | env steps | env steps/s | final return "
             "(last 100, mean ± std) | completed | first episode (s) | peak RSS (MiB) | env alone (steps/s) "
             "| peer / rlrun wall |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        ratio = figures.get(f"ratio/{TASK}/wall/{name}_over_rlrun")
        ret = ("-" if row.get("final_return") is None else
               f"{fmt(row['final_return'])} ± {fmt(row.get('final_return_std'))}")
        lines.append(f"| {TASK} | {name} | {row.get('version', '?')} | {row.get('env_id', '?')} | "
                     f"{fmt(row.get('wall_s'))} | {fmt(row.get('env_steps'), 0)} | "
                     f"{fmt(row.get('env_steps_per_s'), 0)} | {ret} | {fmt(row.get('fraction_completed'), 2)} | "
                     f"{fmt(row.get('first_episode_s'), 2)} | {fmt(row.get('peak_rss_mib'), 0)} | "
                     f"{fmt(row.get('env_only_steps_per_s'), 0)} | {fmt(ratio, 2) if name != 'rlrun' else '1'} |")
    return lines


def run_task(contenders: dict[str, str], versions: dict[str, str], seeds: list[int], budget_env_steps: int,
             env: dict[str, str], cap_s: float | None = None, log: Callable[..., Any] = print) -> dict[str, Any]:
    """Every contender (``{name: its python}``) on every seed, seeds interleaved with the order rotated, after one
    untimed warm-up start each (stopped at its first episode: its imports' bytecode written) and a measure of the
    env's own speed in its venv; the flat figures ``mujoco_ppo/<contender>/<figure>`` and the ratios."""
    budget = whole_rollouts(budget_env_steps)
    cap = cap_s if cap_s is not None else wall_cap_s(budget)
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **env}
    names = [n for n in contenders if n in CONTENDERS]
    env_speed: dict[str, float | None] = {}
    for name in names:
        argv = command(name, contenders[name], 0, budget)
        with tempfile.TemporaryDirectory(prefix=f"peers-warmup-{TASK}-{name}-") as cwd:
            measure(argv, budget, cap, Path(cwd), {**env, **contender_env(name)}, until_first_episode=True)
        env_speed[name] = env_only_steps_per_s(contenders[name], ENV_IDS[name], env)
    runs: dict[str, list[MujocoRun]] = {n: [] for n in names}
    for seed, name in interleaved(names, seeds):
        with tempfile.TemporaryDirectory(prefix=f"peers-{TASK}-{name}-") as cwd:
            run = measure(command(name, contenders[name], seed, budget), budget, cap, Path(cwd),
                          {**env, **contender_env(name)})
        runs[name].append(run)
        final = run.final_return
        log(f"peers: {TASK} {name} seed {seed}: {run.env_steps} env steps in {run.wall_s:.1f} s"
            + (f", final return {final:.1f} over {min(len(run.returns), RETURN_WINDOW)} episodes"
               if final is not None else ", no episode")
            + (f" ({run.error})" if run.error else "")
            + f"; first episode {run.first_episode_s or float('nan'):.2f} s; peak {run.peak_rss_mib:.0f} MiB",
            flush=True)
    table = {n: {**summarize(runs[n]), "version": versions.get(n, "?"), "env_id": ENV_IDS[n],
                 "env_only_steps_per_s": env_speed[n]} for n in names}
    figures: dict[str, Any] = {f"{TASK}/budget_env_steps": budget, f"{TASK}/return_window": RETURN_WINDOW}
    figures.update(ratios(table))
    figures.update(flat_figures(TASK, table))
    return figures
