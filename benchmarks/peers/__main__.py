"""``rlrun-bench peers`` (``python -m benchmarks.peers``): rlrun beside its peers, each in its own virtual
environment with its own code, in one invocation, as ratios.

Tasks (``--tasks``):

- ``pong_acting``, ``pong_training``: frames/s on Pong at equal settings (DeepMind protocol, 8 copies, rollouts of
  128, the Nature-CNN actor-critic; PPO's Atari settings for training), acting only (rlrun, SB3) or training,
  learning included (rlrun, SB3, Sample Factory); start-up to the first rollout; peak memory
  (benchmarks/peers/pong_tasks.py: the settings, the protocol, and why CleanRL, RLlib and TorchRL are not in them).
  Figures ``<task>/<contender>/frames_per_s`` etc. and ``ratio/<task>/frames_per_s/rlrun_over_<peer>`` (> 1: rlrun
  is faster).
- ``mujoco_ppo`` (run when named in ``--tasks``: about three hours on 2 cores): PPO on HalfCheetah for 1M env steps
  (``--mujoco-env-steps``) at CleanRL's ``ppo_continuous_action.py`` settings (rlrun, SB3, CleanRL's script
  unchanged, TorchRL's example): wall time for the same work with each contender's final return beside it
  (benchmarks/peers/mujoco_task.py).
- ``mujoco_td3`` (run when named): TD3 on HalfCheetah at CleanRL's ``td3_continuous_action.py`` settings, rlrun
  against CleanRL's script unchanged: env steps/s while training, 15k env steps (``--td3-env-steps``) of which
  5k are the random warm-up (benchmarks/peers/td3_task.py).

Every contender runs as a child process with ``OMP_NUM_THREADS=1``, after one untimed warm-up start (its imports'
bytecode written, as on a user's machine); seeds interleave with the order rotated each seed so machine noise hits
all alike; medians over seeds. A peer that cannot run here (its venv does not install, a script cannot be fetched)
is listed with the reason. Written as the usual JSON record plus ``.md`` (the table) and one ``.png`` bar chart per
task beside it.

    python -m benchmarks.peers [--quick] [--seeds 0,1,2] [--tasks pong_acting,pong_training,mujoco_ppo,mujoco_td3]
                               [--contenders rlrun,sb3,cleanrl,torchrl,sample_factory] [--budget-s 600]

``--quick`` (CI): seed 0, ``pong_acting`` only (15 s of acting per contender).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

from benchmarks.common import OUT_ENV, fingerprint, results_dir, write_result
from benchmarks.peers import mujoco_task, pong_tasks, td3_task
from benchmarks.peers.venvs import PEERS, PeerUnavailable, ensure, version

TASKS = (*pong_tasks.TASKS, mujoco_task.TASK, td3_task.TASK)
# Without --tasks: the Pong tasks; the MuJoCo tasks (minutes to hours of training per contender and seed) run when
# named.
DEFAULT_TASKS = tuple(pong_tasks.TASKS)
QUICK_TASKS = ("pong_acting",)
CONTENDERS = ("rlrun", "sb3", "cleanrl", "torchrl", "sample_factory")
# rlrun_bf16: rlrun with device.precision=bf16, run when named (pong_training; benchmarks/peers/pong_tasks.py).
EXTRA_CONTENDERS = tuple(pong_tasks.VARIANTS)


def contender(name: str) -> tuple[str, str]:
    """``(python, version)`` of the contender ``name``: rlrun's own interpreter, or its peer's venv, made when
    missing (PeerUnavailable: it cannot run here)."""
    if name == "rlrun":
        return sys.executable, dist_version("rlrun")
    if name in pong_tasks.VARIANTS:
        return sys.executable, f"{dist_version('rlrun')}, {' '.join(pong_tasks.VARIANTS[name][1])}"
    peer = PEERS[name]
    python = str(ensure(peer))
    if name == "cleanrl":
        return python, f"cleanrl@{peer.script_url.split('/')[5][:8]}, gymnasium {version(peer)}"
    return python, version(peer)


def task_contenders(task: str) -> tuple[str, ...]:
    """The contenders that run ``task`` (the rest are told in its table why not)."""
    if task == mujoco_task.TASK:
        return mujoco_task.CONTENDERS
    if task == td3_task.TASK:
        return td3_task.CONTENDERS
    return pong_tasks.TASKS[task].contenders + pong_tasks.TASKS[task].extra


def _rows(figures: dict[str, Any], task: str) -> dict[str, dict[str, Any]]:
    """``{contender: {figure: value}}`` of one task, from the flat ``<task>/<contender>/<figure>`` keys."""
    rows: dict[str, dict[str, Any]] = {}
    for key, value in figures.items():
        parts = key.split("/")
        if len(parts) == 3 and parts[0] == task:
            rows.setdefault(parts[1], {})[parts[2]] = value
    return rows


def markdown(figures: dict[str, Any], tasks: list[str], skipped: dict[str, str]) -> str:
    lines: list[str] = []
    for task in [t for t in tasks if t in pong_tasks.TASKS]:
        lines += ([""] if lines else []) + pong_tasks.markdown_rows(task, _rows(figures, task), figures)
        others = [n for n in CONTENDERS if n not in pong_tasks.TASKS[task].contenders]
        lines.append(f"\n{task}: {', '.join(others)} are not contenders of this task "
                     f"(benchmarks/peers/pong_tasks.py says why).")
    if mujoco_task.TASK in tasks:
        lines += ([""] if lines else []) + mujoco_task.markdown_rows(_rows(figures, mujoco_task.TASK), figures)
        others = [n for n in CONTENDERS if n not in mujoco_task.CONTENDERS]
        lines.append(f"\n{mujoco_task.TASK}: {', '.join(others)} is not a contender of this task "
                     f"(benchmarks/peers/mujoco_task.py says why).")
    if td3_task.TASK in tasks:
        lines += ([""] if lines else []) + td3_task.markdown_rows(_rows(figures, td3_task.TASK), figures)
        others = [n for n in CONTENDERS if n not in td3_task.CONTENDERS]
        lines.append(f"\n{td3_task.TASK}: {', '.join(others)} are not contenders of this task "
                     f"(benchmarks/peers/td3_task.py says why).")
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
        key, label, title = {mujoco_task.TASK: mujoco_task.CHART, td3_task.TASK: td3_task.CHART}.get(
            task, ("frames_per_s", "frames/s (median)", "frames/s, higher is better"))
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
                   help=f"seed 0, {' and '.join(QUICK_TASKS)} only, shorter runs (CI)")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--tasks", default=",".join(DEFAULT_TASKS),
                   help=f"of {', '.join(TASKS)} (default: the Pong tasks; the MuJoCo tasks run when named)")
    p.add_argument("--mujoco-env-steps", type=int, default=None,
                   help=f"{mujoco_task.TASK}'s budget (default {mujoco_task.BUDGET_ENV_STEPS:,}; "
                        f"{mujoco_task.QUICK_BUDGET_ENV_STEPS:,} under --quick)")
    p.add_argument("--td3-env-steps", type=int, default=None,
                   help=f"{td3_task.TASK}'s budget (default {td3_task.BUDGET_ENV_STEPS:,}; "
                        f"{td3_task.QUICK_BUDGET_ENV_STEPS:,} under --quick)")
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
    ready: dict[str, tuple[str, str]] = {}
    skipped: dict[str, str] = {}
    for name in wanted:  # a peer's venv is made only when a task asked for has it as a contender
        try:
            ready[name] = contender(name)
        except PeerUnavailable as e:
            skipped[name] = str(e)
            print(f"peers: {name} skipped: {e}", flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "SB3_LOGDIR": "."}  # SB3 makes its (empty) log folder in the run's scratch cwd, not one per run in /tmp
    # Bytecode as on a user's machine: with PYTHONDONTWRITEBYTECODE a venv without .pyc files compiles every module
    # it imports at each start (and each peer's venv differs). It is unset, and the warm-up start writes them.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    versions = {n: v for n, (_, v) in ready.items()}
    figures: dict[str, Any] = {"seeds": seeds}
    for task in tasks:
        pythons = {n: python for n, (python, _) in ready.items() if n in task_contenders(task)}
        if task == mujoco_task.TASK:
            budget = args.mujoco_env_steps or (mujoco_task.QUICK_BUDGET_ENV_STEPS if args.quick
                                               else mujoco_task.BUDGET_ENV_STEPS)
            figures.update(mujoco_task.run_task(pythons, versions, seeds, budget, env))
            continue
        if task == td3_task.TASK:
            budget = args.td3_env_steps or (td3_task.QUICK_BUDGET_ENV_STEPS if args.quick
                                            else td3_task.BUDGET_ENV_STEPS)
            figures.update(td3_task.run_task(pythons, versions, seeds, budget, env))
            continue
        t = pong_tasks.TASKS[task]
        figures.update(pong_tasks.run_task(t, pythons, versions, seeds, t.quick_seconds if args.quick else t.seconds,
                                           args.budget_s, env))
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
