"""The Pong tasks of ``rlrun-bench peers``: frames/s at equal settings, each contender with its own code in its own
venv. ``pong_acting``: acting only (no learning); ``pong_training``: PPO training, learning included.

Equal settings: Pong under the DeepMind protocol (frame skip 4 with max-pool, 84x84 grayscale, a stack of 4, up to
30 no-ops at reset, a lost life ends the training episode, rewards clipped, no sticky actions, the minimal action
set), 8 env copies, rollouts of 128 agent steps per copy, the Nature-CNN actor-critic, one torch thread per process;
for training PPO's Atari settings of CleanRL's ``ppo_atari.py`` (Schulman et al. 2017 Table 5): 4 epochs of 4
minibatches of 256 per 1,024 agent steps, lr 2.5e-4, clip 0.1, entropy 0.01 (rlrun's ``ppo_atari`` preset, the
zoo's ``atari`` PPO settings for SB3, Sample Factory's Atari defaults: ``sf_examples/atari/atari_params.py``).

- ``pong_acting``: rlrun (``algo=ppo env=pong``, the plan's ``workers.sample``, 8 copies in one local worker's sync
  vector env) and Stable-Baselines3 (``collect_rollouts``, ``DummyVecEnv``), each through the call its training loop
  makes, so the peer's acting path with its bookkeeping (values, log-probabilities, rollout buffers) is measured.
  ale-py 0.12.1 in both venvs. CleanRL is not a contender: its ``ppo_atari.py`` acts inside its training loop and
  has no acting-only entry (running it changed is not running it as published); Sample Factory neither (its
  sampler is its training run); RLlib and TorchRL (whose ``sota-implementations/ppo/ppo_atari.py`` would be the
  one to run) are not wired for these tasks yet.
- ``pong_training``: the same rlrun and SB3 setups training (``plan.training_step``, ``model.learn``), and Sample
  Factory 2.1.1 (``sf_examples.atari.train_atari`` unchanged, APPO with its Atari defaults, 2 rollout workers x 4
  copies, ``--device=cpu``; ale-py 0.9.0 under its gymnasium 0.29 pin), whose asynchronous design (rollout workers
  and the learner in separate processes) is the point of comparing with it. All contenders share the same cores.
  ``rlrun_bf16`` (run when named in ``--contenders``) is rlrun's setup with ``device.precision=bf16``, its update
  under bfloat16 autocast: not the peers' settings, so it has a row and ratios of its own.

Protocol of a contender script (``contenders/<name>_pong.py --mode acting|training``): after its first rollout (or
its first report, for Sample Factory) it prints ``{"agent_steps": 0, "seconds": 0.0, "frame_skip": 4}``, then one
such line per rollout / update / report with the agent steps and seconds since then, and exits after
``--seconds``. Figures per seed (``machine_cores_busy``, the whole machine's over the same window, checks the tree's
count: it can only be higher, by the harness and the system): ``frames_per_s`` = last line's agent steps x frame
skip / its seconds (the first rollout, with its warm-up, is not in it); ``cores_busy``: the process tree's CPU
seconds (user + system, every process and thread, read from ``/proc`` at the first and the last line) per second of
that window; ``frames_per_cpu_s`` = the window's frames / its CPU seconds, the speed per core (the issue's "per
core": Sample Factory runs four processes, rlrun and SB3 one); ``startup_s``: from starting the
process to the first line (imports, env and network construction, the first rollout); ``peak_rss_mib`` of the
process tree.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.peers.processes import interleaved, watch
from benchmarks.peers.tables import cell, flat_figures, json_object, peer_over_rlrun

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class PongTask:
    name: str
    mode: str  # the contender scripts' --mode
    contenders: tuple[str, ...]
    seconds: float  # acting or training time after the first rollout, per run
    quick_seconds: float  # under --quick
    extra: tuple[str, ...] = ()  # contenders run only when named in --contenders


# rlrun's variants (run when named): rlrun_bf16 is rlrun_pong.py with device.precision=bf16 (its update under
# bfloat16 autocast; refused on a CPU without bfloat16 instructions): other settings than the peers', its own row.
VARIANTS = {"rlrun_bf16": ("rlrun", ["--precision", "bf16"])}

SPEEDS = ("frames_per_s", "frames_per_cpu_s")  # per second of wall time; per CPU-second of the contender's tree

TASKS = {t.name: t for t in (
    PongTask("pong_acting", "acting", ("rlrun", "sb3"), 30.0, 15.0),
    PongTask("pong_training", "training", ("rlrun", "sb3", "sample_factory"), 120.0, 60.0, ("rlrun_bf16",)),
)}


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
    cpu_s: float | None = None  # the process tree's CPU seconds over the same window as ``seconds``
    machine_cpu_s: float | None = None  # the whole machine's busy CPU seconds over that window (a cross-check)

    @property
    def frames_per_cpu_s(self) -> float | None:
        """Frames per CPU-second of the whole tree: throughput per core busy, whatever the number of processes."""
        if self.frames_per_s is None or not self.cpu_s:
            return None
        return self.frames_per_s * self.seconds / self.cpu_s

    @property
    def cores_busy(self) -> float | None:
        """CPU seconds per second over the window: how many cores the contender kept busy."""
        return self.cpu_s / self.seconds if self.cpu_s and self.seconds else None

    @property
    def machine_cores_busy(self) -> float | None:
        """The whole machine's busy cores over the window: at least :attr:`cores_busy`, more by what else ran
        (this harness, the system) or by processes the tree missed."""
        return self.machine_cpu_s / self.seconds if self.machine_cpu_s and self.seconds else None


def acting_line(line: str) -> dict[str, Any] | None:
    """A protocol line as a dict, None for anything else the contender prints."""
    d = json_object(line)
    return d if d is not None and "agent_steps" in d and "seconds" in d else None


def command(task: PongTask, name: str, python: str, seed: int, seconds: float) -> list[str]:
    """The argv of contender ``name``'s Pong script for ``task`` (``python``: its venv's interpreter)."""
    script, extra = VARIANTS.get(name, (name, []))
    return [python, str(HERE / "contenders" / f"{script}_pong.py"), "--mode", task.mode, "--seed", str(seed),
            "--seconds", str(seconds), *extra]


def measure_acting(argv: list[str], budget_s: float, cwd: Path, env: dict[str, str]) -> ActingRun:
    """Run one contender's acting script to its end (or ``budget_s``) and read its figures."""
    run = ActingRun()
    last: dict[str, Any] = {}
    index = {"line": -1}  # of the line being read, and of the first and last protocol lines

    def on_line(at: float, line: str) -> bool:
        index["line"] += 1
        parsed = acting_line(line)
        if parsed is not None:
            if run.startup_s is None:
                run.startup_s = at
                index["first"] = index["line"]
            index["last"] = index["line"]
            last.update(parsed)
        return False

    watched = watch(argv, on_line, budget_s, cwd, env)
    run.wall_s, run.peak_rss_mib = watched.wall_s, watched.peak_rss_mib
    if last and float(last["seconds"]) > 0:
        run.agent_steps, run.seconds = int(last["agent_steps"]), float(last["seconds"])
        run.frames_per_s = run.agent_steps * int(last.get("frame_skip", 1)) / run.seconds
        run.cpu_s = watched.line_cpu_s[index["last"]] - watched.line_cpu_s[index["first"]]
        run.machine_cpu_s = watched.line_machine_cpu_s[index["last"]] - watched.line_machine_cpu_s[index["first"]]
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
        "frames_per_cpu_s": med([r.frames_per_cpu_s for r in good if r.frames_per_cpu_s is not None]),
        "cores_busy": med([r.cores_busy for r in good if r.cores_busy is not None]),
        "machine_cores_busy": med([r.machine_cores_busy for r in good if r.machine_cores_busy is not None]),
        "startup_s": med([r.startup_s for r in good if r.startup_s is not None]),
        "peak_rss_mib": med([r.peak_rss_mib for r in good]),
        "fraction_ran": len(good) / len(runs) if runs else None,
        "per_seed": {"frames_per_s": [None if r.frames_per_s is None else round(r.frames_per_s, 1) for r in runs],
                     "frames_per_cpu_s": [None if r.frames_per_cpu_s is None else round(r.frames_per_cpu_s, 1)
                                          for r in runs],
                     "cores_busy": [None if r.cores_busy is None else round(r.cores_busy, 2) for r in runs],
                     "machine_cores_busy": [None if r.machine_cores_busy is None else round(r.machine_cores_busy, 2)
                                            for r in runs],
                     "startup_s": [None if r.startup_s is None else round(r.startup_s, 2) for r in runs],
                     "peak_rss_mib": [round(r.peak_rss_mib, 1) for r in runs],
                     "errors": [r.error for r in runs]},
    }


def ratios(task: str, table: dict[str, dict[str, Any]]) -> dict[str, float]:
    """``ratio/<task>/<speed>/rlrun_over_<peer>`` (> 1: rlrun is faster) for both speeds, ``frames_per_s`` (wall
    time, the machine's cores shared as each contender uses them) and ``frames_per_cpu_s`` (per core busy), and the
    start-up and memory ratios peer / rlrun (> 1: rlrun starts sooner, holds less)."""
    out = peer_over_rlrun(task, table, {"startup": "startup_s", "peak_rss": "peak_rss_mib"})
    for speed in SPEEDS:
        for mine in ("rlrun", *VARIANTS):  # rlrun and each of its variants over every peer (not over each other)
            ours = table.get(mine) or {}
            for peer, row in table.items():
                if peer != "rlrun" and peer not in VARIANTS and row.get(speed) and ours.get(speed):
                    out[f"ratio/{task}/{speed}/{mine}_over_{peer}"] = round(ours[speed] / row[speed], 3)
        if table.get("rlrun", {}).get(speed):  # a variant's own speed-up
            for variant in (v for v in VARIANTS if (table.get(v) or {}).get(speed)):
                out[f"ratio/{task}/{speed}/{variant}_over_rlrun"] = round(table[variant][speed]
                                                                         / table["rlrun"][speed], 3)
    return out


def markdown_rows(task: str, rows: dict[str, dict[str, Any]], figures: dict[str, Any]) -> list[str]:
    """A Pong task's table (its own columns: a throughput, not a time to a threshold)."""

    lines = ["| task | contender | version | frames/s (median) | cores busy | frames per CPU-s | ran "
             "| start-up to first rollout (s) | peak RSS (MiB) | rlrun / peer frames/s | rlrun / peer per CPU-s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        wall, cpu = (figures.get(f"ratio/{task}/{speed}/rlrun_over_{name}") for speed in SPEEDS)
        lines.append(f"| {task} | {name} | {row.get('version', '?')} | {cell(row.get('frames_per_s'), 0)} | "
                     f"{cell(row.get('cores_busy'), 2)} | {cell(row.get('frames_per_cpu_s'), 0)} | "
                     f"{cell(row.get('fraction_ran'), 2)} | {cell(row.get('startup_s'), 2)} | "
                     f"{cell(row.get('peak_rss_mib'), 0)} | {cell(wall, 2) if name != 'rlrun' else '1'} | "
                     f"{cell(cpu, 2) if name != 'rlrun' else '1'} |")
    for variant in (v for v in VARIANTS if v in rows):
        for speed, what in zip(SPEEDS, ("frames/s", "frames per CPU-s"), strict=True):
            against = ", ".join(f"{peer} {figures[key]:.2f}" for peer in rows
                                if (key := f"ratio/{task}/{speed}/{variant}_over_{peer}") in figures)
            lines.append(f"\n{variant} / peer {what} ({' '.join(VARIANTS[variant][1])}): {against or 'none'}.")
    return lines


def run_task(task: PongTask, contenders: dict[str, str], versions: dict[str, str], seeds: list[int],
             seconds: float, budget_s: float, env: dict[str, str], log: Any = print) -> dict[str, Any]:
    """Every contender of ``task`` (``{name: its python}``) on every seed, seeds interleaved with the order rotated
    after one untimed warm-up start each; the flat figures ``<task>/<contender>/<figure>`` and the ratios."""
    import tempfile

    warm_up(task, contenders, budget_s, env)
    names = list(contenders)
    runs: dict[str, list[ActingRun]] = {n: [] for n in names}
    for seed, name in interleaved(names, seeds):
        with tempfile.TemporaryDirectory(prefix=f"peers-{task.name}-{name}-") as cwd:
            run = measure_acting(command(task, name, contenders[name], seed, seconds), budget_s, Path(cwd), env)
        runs[name].append(run)
        log(f"peers: {task.name} {name} seed {seed}: "
            + (f"{run.frames_per_s:.0f} frames/s over {run.seconds:.1f} s, {run.cores_busy or 0:.2f} cores busy"
               if run.frames_per_s else "no figure")
            + (f" ({run.error})" if run.error else "")
            + f"; start-up {run.startup_s or float('nan'):.2f} s; peak {run.peak_rss_mib:.0f} MiB", flush=True)
    table = {n: {**summarize(runs[n]), "version": versions[n]} for n in names}
    figures: dict[str, Any] = {f"{task.name}/seconds_per_run": seconds}
    figures.update(ratios(task.name, table))
    figures.update(flat_figures(task.name, table))
    return figures


def warm_up(task: PongTask, contenders: dict[str, str], budget_s: float, env: dict[str, str]) -> None:
    """One untimed start of each contender's script that stops after its first rollout (``--seconds 0``): its
    imports' bytecode written, as on a user's machine, before start-up is timed."""
    import tempfile

    for name, python in contenders.items():
        with tempfile.TemporaryDirectory(prefix=f"peers-warmup-{task.name}-{name}-") as cwd:
            measure_acting(command(task, name, python, 0, 0.0), budget_s, Path(cwd), env)
