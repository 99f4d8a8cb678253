"""The ``pong_acting`` task of ``rlrun-bench peers``: acting frames/s on Pong at equal settings, each contender with
its own sampling code in its own venv.

Equal settings: Pong under the DeepMind protocol (frame skip 4 with max-pool, 84x84 grayscale, a stack of 4, up to
30 no-ops at reset, a lost life ends the training episode, rewards clipped, no sticky actions, the minimal action
set; ale-py 0.12.1 in every venv), 8 env copies stepped in one process one after the other (rlrun's
``executor=local`` sync vector env, SB3's ``DummyVecEnv``), rollouts of 128 agent steps per copy, the Nature-CNN
actor-critic of the algorithm's Atari settings untrained, one torch thread, no learning. Each contender acts
through the call its training loop makes (rlrun: the PPO plan's ``workers.sample``; SB3: ``collect_rollouts``), so
what is measured is the peer's acting path with its bookkeeping (values, log-probabilities, rollout buffers).

Protocol of a contender script (``contenders/<name>_pong.py``): after its first rollout it prints
``{"agent_steps": 0, "seconds": 0.0, "frame_skip": 4}``, then one such line per rollout with the agent steps and
seconds since the end of the first rollout, and exits after ``--seconds`` of acting. Figures per seed:
``frames_per_s`` = last line's agent steps x frame skip / its seconds (the first rollout, with its warm-up, is not
in it); ``startup_s``: from starting the process to the first line (imports, env and network construction, the
first rollout); ``peak_rss_mib`` of the process tree.

CleanRL is not a contender here: its ``ppo_atari.py`` acts inside its training loop and has no acting-only entry,
and running it changed is not running it as published. RLlib and Sample Factory are not yet wired for this task.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.peers.processes import watch

TASK = "pong_acting"
CONTENDERS = ("rlrun", "sb3")
SECONDS = 30.0  # acting time after the first rollout, per run
QUICK_SECONDS = 15.0
HERE = Path(__file__).resolve().parent


@dataclass
class ActingRun:
    """One contender's acting run on one seed."""

    frames_per_s: float | None = None
    agent_steps: int = 0
    seconds: float = 0.0
    startup_s: float | None = None
    peak_rss_mib: float = 0.0
    wall_s: float = 0.0
    error: str | None = None


def acting_line(line: str) -> dict[str, Any] | None:
    """A protocol line as a dict, None for anything else the contender prints."""
    if not line.startswith("{"):
        return None
    try:
        d = json.loads(line)
    except ValueError:
        return None
    return d if isinstance(d, dict) and "agent_steps" in d and "seconds" in d else None


def command(name: str, python: str, seed: int, seconds: float) -> list[str]:
    """The argv of contender ``name``'s Pong acting script (``python``: its venv's interpreter)."""
    return [python, str(HERE / "contenders" / f"{name}_pong.py"), "--seed", str(seed), "--seconds", str(seconds)]


def measure_acting(argv: list[str], budget_s: float, cwd: Path, env: dict[str, str]) -> ActingRun:
    """Run one contender's acting script to its end (or ``budget_s``) and read its figures."""
    run = ActingRun()
    last: dict[str, Any] = {}

    def on_line(at: float, line: str) -> bool:
        parsed = acting_line(line)
        if parsed is not None:
            if run.startup_s is None:
                run.startup_s = at
            last.update(parsed)
        return False

    watched = watch(argv, on_line, budget_s, cwd, env)
    run.wall_s, run.peak_rss_mib = watched.wall_s, watched.peak_rss_mib
    if last and float(last["seconds"]) > 0:
        run.agent_steps, run.seconds = int(last["agent_steps"]), float(last["seconds"])
        run.frames_per_s = run.agent_steps * int(last.get("frame_skip", 1)) / run.seconds
    if watched.budget_reached:
        run.error = f"budget of {budget_s:.0f} s reached"
    elif watched.returncode:
        run.error = f"exit {watched.returncode}: {watched.stderr_tail}"
    elif run.frames_per_s is None:
        run.error = "no rollout after the first was reported"
    return run


def summarize(runs: list[ActingRun]) -> dict[str, Any]:
    """Medians over seeds (runs that failed are left out of them and listed under per_seed/errors)."""
    good = [r for r in runs if r.frames_per_s is not None and r.error is None]

    def med(values: list[float]) -> float | None:
        return round(statistics.median(values), 2) if values else None

    return {
        "frames_per_s": med([r.frames_per_s for r in good]),  # type: ignore[misc]
        "startup_s": med([r.startup_s for r in good if r.startup_s is not None]),
        "peak_rss_mib": med([r.peak_rss_mib for r in good]),
        "fraction_ran": len(good) / len(runs) if runs else None,
        "per_seed": {"frames_per_s": [None if r.frames_per_s is None else round(r.frames_per_s, 1) for r in runs],
                     "startup_s": [None if r.startup_s is None else round(r.startup_s, 2) for r in runs],
                     "peak_rss_mib": [round(r.peak_rss_mib, 1) for r in runs],
                     "errors": [r.error for r in runs]},
    }


def ratios(table: dict[str, dict[str, Any]]) -> dict[str, float]:
    """``ratio/pong_acting/frames_per_s/rlrun_over_<peer>`` (> 1: rlrun acts faster) and the start-up and memory
    ratios peer / rlrun (> 1: rlrun starts sooner, holds less), as the CartPole tasks' ratios read."""
    out: dict[str, float] = {}
    ours = table.get("rlrun")
    if not ours:
        return out
    for peer, row in table.items():
        if peer == "rlrun":
            continue
        if row.get("frames_per_s") and ours.get("frames_per_s"):
            out[f"ratio/{TASK}/frames_per_s/rlrun_over_{peer}"] = round(ours["frames_per_s"] / row["frames_per_s"], 3)
        for figure, key in (("startup", "startup_s"), ("peak_rss", "peak_rss_mib")):
            if row.get(key) and ours.get(key):
                out[f"ratio/{TASK}/{figure}/{peer}_over_rlrun"] = round(row[key] / ours[key], 3)
    return out


def markdown_rows(rows: dict[str, dict[str, Any]], figures: dict[str, Any]) -> list[str]:
    """The task's table (its own columns: a throughput, not a time to a threshold)."""

    def fmt(v: Any, digits: int = 1) -> str:
        return "-" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else str(v))

    lines = ["| task | contender | version | frames/s (median) | ran | start-up to first rollout (s) | peak RSS (MiB) "
             "| rlrun / peer frames/s |", "|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        ratio = figures.get(f"ratio/{TASK}/frames_per_s/rlrun_over_{name}")
        lines.append(f"| {TASK} | {name} | {row.get('version', '?')} | {fmt(row.get('frames_per_s'), 0)} | "
                     f"{fmt(row.get('fraction_ran'), 2)} | {fmt(row.get('startup_s'), 2)} | "
                     f"{fmt(row.get('peak_rss_mib'), 0)} | {fmt(ratio, 2) if name != 'rlrun' else '1'} |")
    return lines


def run_task(contenders: dict[str, str], versions: dict[str, str], seeds: list[int], seconds: float,
             budget_s: float, env: dict[str, str], log: Any = print) -> dict[str, Any]:
    """Every contender (``{name: its python}``) on every seed, seeds interleaved with the order rotated; the flat
    figures ``pong_acting/<contender>/<figure>`` and the ratios."""
    import tempfile

    warm_up(contenders, budget_s, env)
    names = list(contenders)
    runs: dict[str, list[ActingRun]] = {n: [] for n in names}
    for i, seed in enumerate(seeds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            with tempfile.TemporaryDirectory(prefix=f"peers-{TASK}-{name}-") as cwd:
                run = measure_acting(command(name, contenders[name], seed, seconds), budget_s, Path(cwd), env)
            runs[name].append(run)
            log(f"peers: {TASK} {name} seed {seed}: "
                + (f"{run.frames_per_s:.0f} frames/s over {run.seconds:.1f} s" if run.frames_per_s else "no figure")
                + (f" ({run.error})" if run.error else "")
                + f"; start-up {run.startup_s or float('nan'):.2f} s; peak {run.peak_rss_mib:.0f} MiB", flush=True)
    table = {n: {**summarize(runs[n]), "version": versions[n]} for n in names}
    figures: dict[str, Any] = {f"{TASK}/seconds_per_run": seconds}
    figures.update(ratios(table))
    for n, row in table.items():
        for key, value in row.items():
            if key == "per_seed":
                figures.update({f"{TASK}/{n}/per_seed/{k}": v for k, v in value.items()})
            else:
                figures[f"{TASK}/{n}/{key}"] = value
    return figures


def warm_up(contenders: dict[str, str], budget_s: float, env: dict[str, str]) -> None:
    """One untimed start of each contender's script that stops after its first rollout (``--seconds 0``): its
    imports' bytecode written, as on a user's machine, before start-up is timed."""
    import tempfile

    for name, python in contenders.items():
        with tempfile.TemporaryDirectory(prefix=f"peers-warmup-{TASK}-{name}-") as cwd:
            measure_acting(command(name, python, 0, 0.0), budget_s, Path(cwd), env)
