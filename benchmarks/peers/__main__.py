"""``rlrun-bench peers`` (``python -m benchmarks.peers``): rlrun beside its peers, each in its own virtual
environment, in one invocation, as ratios.

Tasks (``--tasks``):

- ``cartpole_ppo``, ``cartpole_dqn``: wall time from starting the contender's process to the first point at which
  the mean return of its last 20 CartPole-v1 episodes reaches 450 (the figure MEASURED.md's peer figures use),
  per seed; the env steps then; the time to its first finished episode (start-up: imports, env and model
  construction, the first steps); and the peak memory of its whole process tree (RSS summed over the process and
  its descendants, sampled every 0.25 s: Ray's processes included for RLlib).

Contenders (``--contenders``), each with the settings its authors tuned for the task:

- ``rlrun``: ``rlrun algo=<algo> env=cartpole`` (PPO: its CartPole preset, conf/algo_env/ppo_cartpole.yaml), in
  this venv; ``rlrun_zoo`` (asked for by name only): the same without the preset, i.e. PPO with the zoo's settings
  that SB3 runs, to separate rlrun's speed from its tuning;
- ``sb3``: Stable-Baselines3 with rl-baselines3-zoo's CartPole settings (contenders/sb3_cartpole.py);
- ``cleanrl``: CleanRL's ``ppo.py`` / ``dqn.py`` as published (a pinned commit, checked by sha256), run unchanged
  with their defaults and ``--seed``; their printed ``episodic_return`` lines are the episodes;
- ``rllib``: RLlib's new API stack with its tuned example's settings (contenders/rllib_cartpole.py); RLlib reports
  only its smoothed mean, made a 20-episode window.
- ``torchrl`` (``cartpole_dqn`` only: TorchRL publishes no CartPole PPO example): TorchRL 0.14.1 with its DQN
  CartPole example's settings and loop (``sota-implementations/dqn``, contenders/torchrl_cartpole.py: the example
  logs batch means only, so the runner builds its objects and prints each batch's finished episodes).

Every contender runs as a child process, after one untimed warm-up start (its imports' bytecode written, as on a
user's machine; ``PYTHONDONTWRITEBYTECODE`` is unset for them), with ``OMP_NUM_THREADS=1`` (and sets one torch
thread itself where its script allows); seeds interleave (seed 0 of every contender, then seed 1, ... with the
order rotated each seed) so machine noise hits all alike; medians over seeds. A contender stops once it reaches
the threshold, when its budget of env steps (its own: the zoo's ``n_timesteps``, CleanRL's ``--total-timesteps``
default, rlrun's ``stop.env_steps``) or ``--budget-s`` runs out. A peer that cannot run here (its venv does not
install, a script cannot be fetched) is listed with the reason.

Figures (flat keys): ``<task>/<contender>/time_to_450_s`` (median; null when fewer than half the seeds reached it),
``.../env_steps_at_450``, ``.../first_episode_s``, ``.../peak_rss_mib``, ``.../fraction_reached``, per-seed lists
(``<task>/<contender>/per_seed/<figure>``, with each run's error),
``<task>/<contender>/version``, and ``ratio/<task>/time_to_450/<peer>_over_rlrun`` (> 1: rlrun is faster),
``ratio/<task>/first_episode/<peer>_over_rlrun``, ``ratio/<task>/peak_rss/<peer>_over_rlrun``. Written as the
usual JSON record plus ``.md`` (the table) and one ``.png`` bar chart per task beside it.

    python -m benchmarks.peers [--quick] [--seeds 0,1,2] [--tasks cartpole_ppo,cartpole_dqn,...]
                               [--contenders rlrun,sb3,cleanrl,rllib,torchrl] [--budget-s 600]

- ``pong_acting``, ``pong_training``: frames/s on Pong at equal settings (DeepMind protocol, 8 copies, rollouts of
  128, the Nature-CNN actor-critic; PPO's Atari settings for training), acting only (rlrun, SB3) or training,
  learning included (rlrun, SB3, Sample Factory); start-up to the first rollout; peak memory
  (benchmarks/peers/pong_tasks.py: the settings, the protocol, and why CleanRL and RLlib are not in them).
  Figures ``<task>/<contender>/frames_per_s`` etc. and ``ratio/<task>/frames_per_s/rlrun_over_<peer>`` (> 1: rlrun
  is faster).
- ``mujoco_ppo`` (run when named in ``--tasks``: about three hours on 2 cores): PPO on HalfCheetah for 1M env steps
  (``--mujoco-env-steps``) at CleanRL's ``ppo_continuous_action.py`` settings (rlrun, SB3, CleanRL's script
  unchanged): wall time for the same work with each contender's final return beside it
  (benchmarks/peers/mujoco_task.py).

``--quick`` (CI): seed 0, ``cartpole_ppo`` and ``pong_acting`` (15 s of acting per contender).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchmarks.common import OUT_ENV, fingerprint, results_dir, write_result
from benchmarks.peers import mujoco_task, pong_tasks
from benchmarks.peers.processes import watch
from benchmarks.peers.tables import CLEANRL_LINE, cell, flat_figures, json_object, peer_over_rlrun
from benchmarks.peers.venvs import PEERS, PeerUnavailable, ensure, scripts_dir, version

HERE = Path(__file__).resolve().parent
THRESHOLD = 450.0
WINDOW = 20
CARTPOLE_TASKS = ("cartpole_ppo", "cartpole_dqn")
TASKS = (*CARTPOLE_TASKS, *pong_tasks.TASKS, mujoco_task.TASK)
# Without --tasks: every task but mujoco_ppo (3 contenders x 3 seeds x ~20 min on 2 cores), which runs when named.
DEFAULT_TASKS = tuple(t for t in TASKS if t != mujoco_task.TASK)
QUICK_TASKS = ("cartpole_ppo", "pong_acting")
CARTPOLE_CONTENDERS = ("rlrun", "sb3", "cleanrl", "rllib", "torchrl")
# Who runs which CartPole task: TorchRL publishes a DQN CartPole example (sota-implementations/dqn) but no PPO one.
CARTPOLE_TASK_CONTENDERS = {"cartpole_ppo": ("rlrun", "sb3", "cleanrl", "rllib"),
                            "cartpole_dqn": CARTPOLE_CONTENDERS}
CONTENDERS = (*CARTPOLE_CONTENDERS, "sample_factory")
# Asked for by name only: rlrun without its (algo, env) preset, i.e. PPO with the zoo's CartPole settings that
# Stable-Baselines3 runs (20 epochs, lr 1e-3, 8 copies): its row separates rlrun's speed from its tuned settings.
CARTPOLE_EXTRA_CONTENDERS = ("rlrun_zoo",)
# rlrun_bf16: rlrun with device.precision=bf16 (pong_training; benchmarks/peers/pong_tasks.py).
EXTRA_CONTENDERS = (*CARTPOLE_EXTRA_CONTENDERS, *pong_tasks.VARIANTS)


# ------------------------------------------------------------------------------------------- one run, measured


@dataclass
class Run:
    """What one contender's process did on one seed."""

    reached_s: float | None = None
    env_steps: int | None = None
    first_episode_s: float | None = None
    peak_rss_mib: float = 0.0
    wall_s: float = 0.0
    error: str | None = None
    returns: list[float] = field(default_factory=list)


def measure(command: list[str], parse: Callable[[str], tuple[list[float], float | None, int] | None],
            budget_s: float, cwd: Path, env: dict[str, str], until_first_episode: bool = False) -> Run:
    """Start ``command``, time each parsed stdout line on arrival, stop it at the threshold or the budget (or at
    its first episode: a warm-up)."""
    run = Run()
    window: list[float] = []

    def on_line(at: float, line: str) -> bool:
        nonlocal window
        parsed = parse(line)
        if parsed is None:
            return False
        episodes, mean, steps = parsed
        if episodes and run.first_episode_s is None:
            run.first_episode_s = at
        run.returns.extend(episodes)
        window = (window + episodes)[-WINDOW:]
        if mean is None and len(window) == WINDOW:
            mean = sum(window) / WINDOW
        if mean is not None and run.first_episode_s is None:
            run.first_episode_s = at  # a smoothed-mean reporter: its first report
        if until_first_episode and run.first_episode_s is not None:
            run.error = "warm-up"
            return True
        if mean is not None and mean >= THRESHOLD:
            run.reached_s, run.env_steps = at, steps
            return True
        return False

    watched = watch(command, on_line, budget_s, cwd, env)
    run.wall_s, run.peak_rss_mib = watched.wall_s, watched.peak_rss_mib
    if watched.budget_reached:
        run.error = f"budget of {budget_s:.0f} s reached"
    elif run.reached_s is None and run.error is None:
        run.error = (f"exit {watched.returncode} before reaching {THRESHOLD:.0f}" +
                     (f": {watched.stderr_tail}" if watched.returncode else " (its budget of env steps ran out)"))
    return run


# ------------------------------------------------------------------------------------------------ contenders


def json_lines(line: str) -> tuple[list[float], float | None, int] | None:
    d = json_object(line)
    if d is None:
        return None
    return [float(r) for r in d.get("episodes", [])], d.get("mean"), int(d.get("env_steps", 0))


def cleanrl_lines(line: str) -> tuple[list[float], float | None, int] | None:
    m = CLEANRL_LINE.search(line)
    return ([float(m.group(2))], None, int(m.group(1))) if m else None


@dataclass
class Contender:
    name: str
    command: Callable[[str, int], list[str]]  # (algo, seed) -> argv
    parse: Callable[[str], tuple[list[float], float | None, int] | None]
    version: str
    env: dict[str, str] = field(default_factory=dict)
    python: str = sys.executable  # its venv's interpreter (the Pong task's scripts run with it)


def contender(name: str) -> Contender:
    """The contender ``name``, its venv made when missing (PeerUnavailable: it cannot run here)."""
    if name in pong_tasks.VARIANTS:  # Pong only: its argv comes from pong_tasks.command
        from importlib.metadata import version as dist_version

        def no_cartpole_command(algo: str, seed: int) -> list[str]:
            raise ValueError(f"{name} runs the Pong tasks only (benchmarks/peers/pong_tasks.py)")

        return Contender(name, no_cartpole_command, json_lines,
                         f"{dist_version('rlrun')}, {' '.join(pong_tasks.VARIANTS[name][1])}")
    if name in ("rlrun", "rlrun_zoo"):
        from importlib.metadata import version as dist_version

        script = str(HERE / "contenders" / "rlrun_cartpole.py")
        extra = ["--no-preset"] if name == "rlrun_zoo" else []
        return Contender(name, lambda algo, seed: [sys.executable, script, "--algo", algo, "--seed", str(seed),
                                                   *extra],
                         json_lines, dist_version("rlrun") + (" without its preset" if extra else ""))
    peer = PEERS[name]
    python = str(ensure(peer))
    if name == "cleanrl":
        folder = scripts_dir(peer)
        return Contender(name, lambda algo, seed: [python, str(folder / "cleanrl" / f"{algo}.py"), "--seed",
                                                   str(seed)],
                         cleanrl_lines, f"cleanrl@{peer.script_url.split('/')[5][:8]}, gymnasium {version(peer)}",
                         {"PYTHONPATH": str(folder)}, python)
    script = str(HERE / "contenders" / f"{name}_cartpole.py")
    return Contender(name, lambda algo, seed: [python, script, "--algo", algo, "--seed", str(seed),
                                               "--budget-env-steps", "500000"],
                     json_lines, version(peer), python=python)


# ------------------------------------------------------------------------------------------------- the bench


def task_contenders(task: str) -> tuple[str, ...]:
    """The contenders that run ``task`` (the rest are told in its table why not)."""
    if task in pong_tasks.TASKS:
        return pong_tasks.TASKS[task].contenders + pong_tasks.TASKS[task].extra
    if task == mujoco_task.TASK:
        return mujoco_task.CONTENDERS
    return CARTPOLE_TASK_CONTENDERS[task] + CARTPOLE_EXTRA_CONTENDERS


def summarize(runs: list[Run]) -> dict[str, Any]:
    reached = [r for r in runs if r.reached_s is not None]
    half = len(reached) * 2 >= len(runs) and reached

    def med(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    return {
        "time_to_450_s": med([r.reached_s for r in reached]) if half else None,  # type: ignore[misc]
        "env_steps_at_450": med([r.env_steps for r in reached]) if half else None,  # type: ignore[misc]
        "first_episode_s": med([r.first_episode_s for r in runs if r.first_episode_s is not None]),
        "peak_rss_mib": med([r.peak_rss_mib for r in runs]),
        "fraction_reached": len(reached) / len(runs) if runs else None,
        "per_seed": {"time_to_450_s": [r.reached_s for r in runs], "env_steps": [r.env_steps for r in runs],
                     "first_episode_s": [r.first_episode_s for r in runs],
                     "peak_rss_mib": [round(r.peak_rss_mib, 1) for r in runs],
                     "errors": [r.error for r in runs]},
    }


def ratios(task: str, table: dict[str, dict[str, Any]]) -> dict[str, float]:
    return peer_over_rlrun(task, table, {"time_to_450": "time_to_450_s", "first_episode": "first_episode_s",
                                         "peak_rss": "peak_rss_mib"})


def _rows(figures: dict[str, Any], task: str) -> dict[str, dict[str, Any]]:
    """``{contender: {figure: value}}`` of one task, from the flat ``<task>/<contender>/<figure>`` keys."""
    rows: dict[str, dict[str, Any]] = {}
    for key, value in figures.items():
        parts = key.split("/")
        if len(parts) == 3 and parts[0] == task:
            rows.setdefault(parts[1], {})[parts[2]] = value
    return rows


def markdown(figures: dict[str, Any], tasks: list[str], skipped: dict[str, str]) -> str:
    lines = ["| task | contender | version | time to 450 (s, median) | reached | env steps at 450 | first episode (s) "
             "| peak RSS (MiB) | peer / rlrun time |", "|---|---|---|---|---|---|---|---|---|"]

    for task in [t for t in tasks if t in CARTPOLE_TASKS]:
        for name, row in _rows(figures, task).items():
            ratio = figures.get(f"ratio/{task}/time_to_450/{name}_over_rlrun")
            lines.append(f"| {task} | {name} | {row['version']} | {cell(row['time_to_450_s'])} | "
                         f"{cell(row['fraction_reached'], 2)} | {cell(row['env_steps_at_450'], 0)} | "
                         f"{cell(row['first_episode_s'], 2)} | {cell(row['peak_rss_mib'], 0)} | "
                         f"{cell(ratio, 2) if name != 'rlrun' else '1'} |")
    if len(lines) == 2:  # no time-to-threshold task
        lines = []
    for task in [t for t in tasks if t in CARTPOLE_TASKS]:
        others = [n for n in CARTPOLE_CONTENDERS if n not in CARTPOLE_TASK_CONTENDERS[task]]
        if others:
            lines.append(f"\n{task}: {', '.join(others)} {'is' if len(others) == 1 else 'are'} not a contender of "
                         f"this task (no published {task.split('_')[1].upper()} CartPole example of theirs).")
    for task in [t for t in tasks if t in pong_tasks.TASKS]:
        lines += ([""] if lines else []) + pong_tasks.markdown_rows(task, _rows(figures, task), figures)
        others = [n for n in CONTENDERS if n not in pong_tasks.TASKS[task].contenders]
        lines.append(f"\n{task}: {', '.join(others)} are not contenders of this task "
                     f"(benchmarks/peers/pong_tasks.py says why).")
    if mujoco_task.TASK in tasks:
        lines += ([""] if lines else []) + mujoco_task.markdown_rows(_rows(figures, mujoco_task.TASK), figures)
        others = [n for n in CONTENDERS if n not in mujoco_task.CONTENDERS]
        lines.append(f"\n{mujoco_task.TASK}: {', '.join(others)} are not contenders of this task "
                     f"(benchmarks/peers/mujoco_task.py says why).")
    for name, why in skipped.items():
        lines.append(f"\n- **{name}** did not run: {why}")
    return "\n".join(lines) + "\n"


def bar_charts(figures: dict[str, Any], tasks: list[str], stem: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out = []
    for task in tasks:
        key, label, title = (("frames_per_s", "frames/s (median)", "frames/s, higher is better")
                             if task in pong_tasks.TASKS else mujoco_task.CHART if task == mujoco_task.TASK else
                             ("time_to_450_s", "seconds to mean return 450 (median)", "wall time to 450, lower is "
                                                                                      "better"))
        rows = {n: r for n, r in _rows(figures, task).items() if r.get(key)}
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(5, 3))
        names = list(rows)
        ax.bar(names, [rows[n][key] for n in names],
               color=["tab:green" if n == "rlrun" else "tab:gray" for n in names])
        ax.set_ylabel(label)
        ax.set_title(f"{task}: {title}", fontsize=9)
        fig.tight_layout()
        path = stem.with_name(f"{stem.name}-{task}.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        out.append(path)
    return out


def output_stem(record: Path, commit: str | None = None) -> Path:
    """Where the charts (``-<task>.png``) go: beside the record of a standalone run; under ``rlrun-bench`` (which
    collects the record from a scratch file) into the results folder, named as the runner names its record (the
    date and ``commit``, the commit the run started at: a commit made during a long run must not split its files;
    ``-2``, ``-3``, ... where an earlier run of the day on that commit left its table there)."""
    if not os.environ.get(OUT_ENV):
        return record.with_suffix("")
    import datetime as dt

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    name, n = f"{stamp}-{commit or fingerprint()['commit'] or 'nocommit'}-peers", 1
    while table_path(folder / (name if n == 1 else f"{name}-{n}")).exists():  # an earlier run's: keep it
        n += 1
    return folder / (name if n == 1 else f"{name}-{n}")


def table_path(stem: Path) -> Path:
    """The Markdown table: ``<stem>.md`` beside a standalone record; under ``rlrun-bench``, ``<stem>-table.md``, as
    the runner writes its own ``<stem>.md`` (the suite's figures) after the benchmark and would replace it."""
    return stem.with_name(stem.name + "-table.md") if os.environ.get(OUT_ENV) else stem.with_suffix(".md")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="rlrun-bench peers", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"seed 0, {' and '.join(QUICK_TASKS)} only, shorter Pong runs (CI)")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--tasks", default=",".join(DEFAULT_TASKS),
                   help=f"of {', '.join(TASKS)} (default: all but {mujoco_task.TASK}, which runs when named)")
    p.add_argument("--mujoco-env-steps", type=int, default=None,
                   help=f"{mujoco_task.TASK}'s budget (default {mujoco_task.BUDGET_ENV_STEPS:,}; "
                        f"{mujoco_task.QUICK_BUDGET_ENV_STEPS:,} under --quick)")
    p.add_argument("--contenders", default=",".join(CONTENDERS))
    p.add_argument("--budget-s", type=float, default=600.0, help="wall-time cap of one run")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # SIGTERM too ends the running contender (finally)
    seeds = [0] if args.quick else [int(s) for s in args.seeds.split(",")]
    tasks = list(QUICK_TASKS) if args.quick else args.tasks.split(",")
    unknown = [t for t in tasks if t not in TASKS] + [c for c in args.contenders.split(",")
                                                          if c not in CONTENDERS + EXTRA_CONTENDERS]
    if unknown:
        raise SystemExit(f"rlrun-bench peers: unknown {unknown}; tasks: {TASKS}, contenders: "
                         f"{CONTENDERS + EXTRA_CONTENDERS}")
    wanted = [c for c in args.contenders.split(",")
              if any(c in task_contenders(t) for t in tasks)]
    commit = fingerprint()["commit"]  # the results' names: the commit the run started at
    ready: dict[str, Contender] = {}
    skipped: dict[str, str] = {}
    for name in wanted:  # a peer's venv is made only when a task asked for has it as a contender
        try:
            ready[name] = contender(name)
        except PeerUnavailable as e:
            skipped[name] = str(e)
            print(f"peers: {name} skipped: {e}", flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "RAY_AUTH_MODE": "disabled", "RAY_DEDUP_LOGS": "0",
           "SB3_LOGDIR": "."}  # SB3 makes its (empty) log folder in the run's scratch cwd, not one per run in /tmp
    env.pop("RAY_ADDRESS", None)
    # Bytecode as on a user's machine: with PYTHONDONTWRITEBYTECODE (set on this machine class) a venv without .pyc
    # files compiles every module it imports at each start (measured: rlrun's first episode 5.5 s instead of 4.3 s,
    # and each peer's venv differs). It is unset, and one untimed warm-up start per contender writes them.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cartpole_tasks = [t for t in tasks if t in CARTPOLE_TASKS]
    cartpole_names = [n for n in ready if any(n in task_contenders(t) for t in cartpole_tasks)]
    for name, c in ((n, ready[n]) for n in cartpole_names):
        algo = next(t for t in cartpole_tasks if name in task_contenders(t)).split("_", 1)[1]
        with tempfile.TemporaryDirectory(prefix=f"peers-warmup-{name}-") as cwd:
            measure(c.command(algo, 0), c.parse, args.budget_s, Path(cwd), {**env, **c.env},
                    until_first_episode=True)
    figures: dict[str, Any] = {"threshold": THRESHOLD, "window": WINDOW, "seeds": seeds}
    for task in tasks:
        if task in pong_tasks.TASKS:
            t = pong_tasks.TASKS[task]
            figures.update(pong_tasks.run_task(t, {n: ready[n].python for n in ready if n in task_contenders(task)},
                                               {n: ready[n].version for n in ready}, seeds,
                                               t.quick_seconds if args.quick else t.seconds, args.budget_s, env))
            continue
        if task == mujoco_task.TASK:
            budget = args.mujoco_env_steps or (mujoco_task.QUICK_BUDGET_ENV_STEPS if args.quick
                                               else mujoco_task.BUDGET_ENV_STEPS)
            figures.update(mujoco_task.run_task({n: ready[n].python for n in ready if n in mujoco_task.CONTENDERS},
                                                {n: ready[n].version for n in ready}, seeds, budget, env))
            continue
        names = [n for n in cartpole_names if n in task_contenders(task)]
        algo = task.split("_", 1)[1]
        runs: dict[str, list[Run]] = {n: [] for n in names}
        for i, seed in enumerate(seeds):
            order = names[i % len(names):] + names[:i % len(names)]
            for name in order:
                c = ready[name]
                with tempfile.TemporaryDirectory(prefix=f"peers-{name}-") as cwd:
                    run = measure(c.command(algo, seed), c.parse, args.budget_s, Path(cwd), {**env, **c.env})
                runs[name].append(run)
                print(f"peers: {task} {name} seed {seed}: "
                      + (f"450 at {run.reached_s:.1f} s, {run.env_steps} env steps" if run.reached_s is not None
                         else f"not reached ({run.error})")
                      + f"; first episode {run.first_episode_s or float('nan'):.2f} s; peak {run.peak_rss_mib:.0f}"
                        f" MiB", flush=True)
        table = {n: {**summarize(runs[n]), "version": ready[n].version} for n in names}
        figures.update(ratios(task, table))
        figures.update(flat_figures(task, table))
    figures["skipped"] = skipped
    command = "python -m benchmarks.peers " + " ".join(argv if argv is not None else sys.argv[1:])
    path = write_result("peers", figures, command)
    stem = output_stem(path, commit)
    table_path(stem).write_text(markdown(figures, tasks, skipped))
    charts = bar_charts(figures, tasks, stem)
    print(markdown(figures, tasks, skipped))
    print(f"peers: {path}" + "".join(f", {c.name}" for c in charts))


if __name__ == "__main__":
    main()
