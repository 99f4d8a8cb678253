"""The TD3 task of ``rlrun-bench peers``, ``mujoco_td3``: how fast TD3 trains on HalfCheetah, rlrun against CleanRL's
``td3_continuous_action.py`` run unchanged in its own venv, at the same settings.

Equal settings: CleanRL's ``td3_continuous_action.py`` defaults (rlrun's preset conf/algo_env/td3_mujoco.yaml is
these): one env copy, 256x256 ReLU actor and twin critics, Adam at 3e-4, batch 256, one critic step per env step,
the actor and the targets every second one, exploration noise 0.1, target noise 0.2 clipped at 0.5. One change,
given to both: ``learning_starts`` 5,000 (CleanRL's is 25,000), so that most of a short budget trains.

- ``rlrun``: ``rlrun algo=td3 env=mujoco env.id=HalfCheetah-v5 algo.learning_starts=5000``,
  contenders/rlrun_td3_halfcheetah.py.
- ``cleanrl``: ``cleanrl/td3_continuous_action.py`` with ``cleanrl_utils/buffers.py`` at the pinned commit of
  venvs.py (checked by sha256), run with ``--seed``, ``--total-timesteps`` and ``--learning-starts``. Its venv's
  gymnasium 0.29.1 has no v5 tasks: it runs ``HalfCheetah-v4`` (the same model, observation, reward and 1,000-step
  limit; an older engine, whose raw speed the table shows beside: ``env_only_steps_per_s``).
- Not contenders: CleanRL's is the implementation whose published curves the ``td3`` reproduction rows are judged
  against, and the one the issue names; SB3's and TorchRL's TD3 are not wired in yet, and Sample Factory has none.

The figure is ``training_steps_per_s``: env steps per second once training runs, from the arrival times of the
episodes' ends on stdout (every HalfCheetah episode is 1,000 env steps, so both contenders report at the same
steps): the env steps between the first episode that ended at least one episode after ``learning_starts`` and the
last one, over the seconds between them. Each of those env steps is one critic step (and every second one an actor
step). Beside it: ``wall_s`` for the whole budget (start-up and the random warm-up included), peak memory, and the
env's own speed in each venv. Ratio ``ratio/mujoco_td3/training_steps_per_s/rlrun_over_cleanrl`` (> 1: rlrun
trains faster). Medians over seeds, seeds interleaved with the order rotated."""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchmarks.peers.mujoco_task import contender_env, env_only_steps_per_s
from benchmarks.peers.processes import interleaved, watch
from benchmarks.peers.tables import CLEANRL_LINE, cell, flat_figures, json_object, peer_over_rlrun

HERE = Path(__file__).resolve().parent
TASK = "mujoco_td3"
CONTENDERS = ("rlrun", "cleanrl")
ENV_IDS = {"rlrun": "HalfCheetah-v5", "cleanrl": "HalfCheetah-v4"}  # gymnasium 0.29.1 has no v5 tasks
EPISODE_STEPS = 1000  # HalfCheetah never terminates: every episode ends at the time limit
LEARNING_STARTS = 5_000
BUDGET_ENV_STEPS = 15_000
QUICK_BUDGET_ENV_STEPS = LEARNING_STARTS + 3 * EPISODE_STEPS  # the path, not a measure
CHART = ("training_steps_per_s", "env steps/s while training (median)", "TD3 HalfCheetah, higher is better")


@dataclass
class TD3Run:
    """What one contender's process did on one seed: the (seconds, env steps) of each episode's end, in order."""

    wall_s: float = 0.0
    peak_rss_mib: float = 0.0
    episode_ends: list[tuple[float, int]] = field(default_factory=list)
    error: str | None = None

    @property
    def env_steps(self) -> int:
        return self.episode_ends[-1][1] if self.episode_ends else 0

    @property
    def training_steps_per_s(self) -> float | None:
        """Env steps/s between the first episode end at least one episode past ``learning_starts`` and the last."""
        window = [(t, s) for t, s in self.episode_ends if s >= LEARNING_STARTS + EPISODE_STEPS - 1]
        if len(window) < 2 or window[-1][0] <= window[0][0]:
            return None
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


def episode_end(line: str) -> int | None:
    """The env steps at an episode's end, from a contender's stdout line: rlrun's JSON line with ``episodes`` (its
    ``env_steps`` counted after the step), CleanRL's ``global_step=N, episodic_return=...`` (N counted from 0: one
    less); None for any other line."""
    d = json_object(line)
    if d is not None:
        return int(d["env_steps"]) if d.get("episodes") and "env_steps" in d else None
    m = CLEANRL_LINE.match(line)
    return int(m.group(1)) + 1 if m else None


def command(name: str, python: str, seed: int, budget_env_steps: int) -> list[str]:
    if name == "cleanrl":
        from benchmarks.peers.venvs import PEERS, script

        path = script(PEERS["cleanrl"], "cleanrl/td3_continuous_action.py")
        return [python, str(path), "--seed", str(seed), "--env-id", ENV_IDS[name], "--total-timesteps",
                str(budget_env_steps), "--learning-starts", str(LEARNING_STARTS)]
    return [python, str(HERE / "contenders" / "rlrun_td3_halfcheetah.py"), "--seed", str(seed), "--env-id",
            ENV_IDS[name], "--budget-env-steps", str(budget_env_steps), "--learning-starts", str(LEARNING_STARTS)]


def measure(argv: list[str], budget_env_steps: int, cap_s: float, cwd: Path, env: dict[str, str]) -> TD3Run:
    run = TD3Run()

    def on_line(at: float, line: str) -> bool:
        steps = episode_end(line)
        if steps is not None:
            run.episode_ends.append((at, steps))
        return False

    watched = watch(argv, on_line, cap_s, cwd, env)
    run.wall_s, run.peak_rss_mib = watched.wall_s, watched.peak_rss_mib
    if watched.budget_reached:
        run.error = f"wall-time cap of {cap_s:.0f} s reached at {run.env_steps} env steps"
    elif watched.returncode:
        run.error = f"exit {watched.returncode}: {watched.stderr_tail}"
    elif run.env_steps < budget_env_steps:
        run.error = f"ended after {run.env_steps} of {budget_env_steps} env steps"
    return run


def summarize(runs: list[TD3Run]) -> dict[str, Any]:
    good = [r for r in runs if r.error is None]

    def med(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return round(statistics.median(known), 2) if known else None

    return {"training_steps_per_s": med([r.training_steps_per_s for r in good]),
            "wall_s": med([r.wall_s for r in good]), "env_steps": med([r.env_steps for r in good]),
            "peak_rss_mib": med([r.peak_rss_mib for r in good]),
            "fraction_completed": len(good) / len(runs) if runs else None,
            "per_seed": {"training_steps_per_s": [None if r.training_steps_per_s is None
                                                  else round(r.training_steps_per_s, 2) for r in runs],
                         "wall_s": [round(r.wall_s, 2) for r in runs], "errors": [r.error for r in runs]}}


def markdown_rows(rows: dict[str, dict[str, Any]], figures: dict[str, Any]) -> list[str]:
    lines = ["| task | contender | version | env | training env steps/s (median) | wall time (s, median) | "
             "env steps | completed | peak RSS (MiB) | env alone (steps/s) | rlrun / peer, training steps/s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        ratio = figures.get(f"ratio/{TASK}/training_steps_per_s/rlrun_over_{name}")
        lines.append(f"| {TASK} | {name} | {row.get('version', '?')} | {row.get('env_id', '?')} | "
                     f"{cell(row.get('training_steps_per_s'), 1)} | {cell(row.get('wall_s'), 1)} | "
                     f"{cell(row.get('env_steps'), 0, thousands=True)} | {cell(row.get('fraction_completed'), 2)} | "
                     f"{cell(row.get('peak_rss_mib'), 0)} | {cell(row.get('env_only_steps_per_s'), 0)} | "
                     f"{cell(ratio, 2) if name != 'rlrun' else '1'} |")
    return lines


def run_task(contenders: dict[str, str], versions: dict[str, str], seeds: list[int], budget_env_steps: int,
             env: dict[str, str], cap_s: float | None = None, log: Callable[..., Any] = print) -> dict[str, Any]:
    """Every contender (``{name: its python}``) on every seed after one untimed warm-up run of the quick budget
    each (its imports' bytecode written) and a measure of the env's own speed in its venv."""
    cap = cap_s if cap_s is not None else 300.0 + budget_env_steps / 10.0
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **env}
    names = [n for n in contenders if n in CONTENDERS]
    env_speed: dict[str, float | None] = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"peers-warmup-{TASK}-{name}-") as cwd:
            measure(command(name, contenders[name], 0, LEARNING_STARTS), LEARNING_STARTS, cap, Path(cwd),
                    {**env, **contender_env(name)})
        env_speed[name] = env_only_steps_per_s(contenders[name], ENV_IDS[name], env)
    runs: dict[str, list[TD3Run]] = {n: [] for n in names}
    for seed, name in interleaved(names, seeds):
        with tempfile.TemporaryDirectory(prefix=f"peers-{TASK}-{name}-") as cwd:
            run = measure(command(name, contenders[name], seed, budget_env_steps), budget_env_steps, cap,
                          Path(cwd), {**env, **contender_env(name)})
        runs[name].append(run)
        log(f"peers: {TASK} {name} seed {seed}: {run.env_steps} env steps in {run.wall_s:.1f} s, training "
            f"{run.training_steps_per_s or float('nan'):.1f} env steps/s; peak {run.peak_rss_mib:.0f} MiB"
            + (f" ({run.error})" if run.error else ""), flush=True)
    table = {n: {**summarize(runs[n]), "version": versions.get(n, "?"), "env_id": ENV_IDS[n],
                 "env_only_steps_per_s": env_speed[n]} for n in names}
    figures: dict[str, Any] = {f"{TASK}/budget_env_steps": budget_env_steps, f"{TASK}/learning_starts": LEARNING_STARTS}
    figures.update(peer_over_rlrun(TASK, table, {"wall": "wall_s", "peak_rss": "peak_rss_mib"}))
    mine = (table.get("rlrun") or {}).get("training_steps_per_s")
    for peer, row in table.items():
        if peer != "rlrun" and mine and row.get("training_steps_per_s"):
            ratio = mine / row["training_steps_per_s"]
            figures[f"ratio/{TASK}/training_steps_per_s/rlrun_over_{peer}"] = round(ratio, 3)
    figures.update(flat_figures(TASK, table))
    return figures
