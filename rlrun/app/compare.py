"""``rlrun compare A B``: does B beat A, and how sure is that?

A and B are each a sweep directory (one configuration over seeds; ``SWEEP#key=value,...`` chooses one configuration
of a sweep of several), a run directory, a folder of run directories, or an MLflow run id (a sweep's parent run or
one run; ``--tracking-uri``, else the default store). Each run's score is the final value of ``--metric``
(``episode/return_mean`` by default: the run's ``summary.json`` figure). The runs of a side are grouped by env; both
sides must cover the same envs, unless ``--normaliser`` puts every env on one scale (then sides of different envs
are compared as one distribution of normalised scores each).

Printed: each side's IQM with its 95% stratified-bootstrap interval, the IQM difference (per env), the probability
of improvement P(B > A) with its interval, and a verdict that never says more than the interval does: B is
better (or worse) only where the interval of P(B > A) leaves out 0.5; otherwise "no detectable difference", with
``seeds_to_resolve``'s estimate where it can be made. Written: ``<out>`` (default ``compare.png``), the two
learning curves, IQM over seeds with bootstrap bands, on a common step axis.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlrun import evaluation_stats as es
from rlrun.app.plot import read_normaliser, read_scalars, run_env, scale_of
from rlrun.errors import ConfigError, RlrunError, one_line
from rlrun.metric_names import RETURN_MEAN

# Imports inside functions: the sweep module (Hydra), OmegaConf, TensorBoard, MLflow and matplotlib, each only where a
# side needs it, so that a bad argument is answered at once.

DEFAULT_OUT = "compare.png"
MLFLOW_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
# summary.json's name for a metric's final value, where it records one
SUMMARY_KEYS = {RETURN_MEAN: "episode_return_mean"}


@dataclass
class Run:
    """One run: its env, its final score on the metric (None: it never reported it) and its curve."""

    name: str
    env: str
    score: float | None
    curve: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class Side:
    label: str
    runs: list[Run] = field(default_factory=list)

    def scores(self, env: str) -> np.ndarray:
        return np.array([r.score for r in self.runs if r.env == env and r.score is not None])

    def envs(self) -> list[str]:
        return sorted({r.env for r in self.runs if r.score is not None})


# ---------------------------------------------------------------- reading a side


def load_side(arg: str, metric: str, tracking_uri: str | None) -> Side:
    path, select = Path(arg), []
    if not path.is_dir() and "#" in arg:  # SWEEP#key=value,...: one configuration of a sweep of several
        where, _, chosen = arg.rpartition("#")
        path, select = Path(where), [o for o in chosen.split(",") if o]
    if path.is_dir():
        return Side(arg, [read_run_dir(d, metric) for d in run_dirs(path, select)])
    if MLFLOW_RUN_ID.match(arg):
        return Side(arg, read_mlflow(arg, metric, tracking_uri))
    raise ConfigError(f"{arg}: neither a directory nor an MLflow run id. Give a sweep directory (multirun/...), a "
                      f"run directory (outputs/...) or a 32-character MLflow run id.")


def run_dirs(path: Path, select: list[str] | None = None) -> list[Path]:
    """The run itself, the completed jobs of a sweep (of its configuration whose overrides include ``select``), or
    every run directory (with a ``summary.json``) below."""
    from rlrun.app.sweep import MANIFEST, read_jobs

    if (path / "summary.json").is_file():
        return [path]
    if (path / MANIFEST).is_file():
        jobs = [j for j in read_jobs(path) if j.get("status") == "completed" and j.get("run_dir")]
        every = sorted({j.get("group") or "" for j in jobs})
        if select:
            jobs = [j for j in jobs if set(select) <= set((j.get("group") or "").split(" "))]
        groups = sorted({j.get("group") or "" for j in jobs})
        if len(groups) != 1:
            found = f"{len(groups)} of its configurations match {','.join(select)}" if select else \
                f"a sweep of {len(groups)} configurations"
            shared = set.intersection(*(set(g.split(" ")) for g in every)) if every else set()
            apart = [o for o in (every[0].split(" ") if every else []) if o not in shared] or ["<override>"]
            raise ConfigError(f"{path}: {found} ({'; '.join(every)}): compare one configuration against another: "
                              f"{path}#<override>[,<override>] chooses one (e.g. {path}#{apart[0]}).")
        return [Path(j["run_dir"]) for j in jobs]
    found = sorted(p.parent for p in path.rglob("summary.json"))
    if not found:
        raise ConfigError(f"{path}: no finished run there (no summary.json). Give a sweep or run directory.")
    return found


def read_run_dir(run_dir: Path, metric: str) -> Run:
    import json

    summary = json.loads((run_dir / "summary.json").read_text())
    env = run_env(run_dir)
    curve = read_scalars(run_dir, metric) if (run_dir / "tensorboard").is_dir() else None
    if metric in SUMMARY_KEYS:
        score = summary.get(SUMMARY_KEYS[metric])
    else:
        score = float(curve[1][-1]) if curve is not None else None
    return Run(run_dir.name, env, None if score is None else float(score), curve)


def read_mlflow(run_id: str, metric: str, tracking_uri: str | None) -> list[Run]:
    """The run, or a sweep parent run's children: the metric's last value and history, the env from the params."""
    from mlflow.tracking import MlflowClient

    from rlrun.logging.mlflow_sink import default_tracking_uri

    client = MlflowClient(tracking_uri or default_tracking_uri())
    try:
        run = client.get_run(run_id)
    except Exception as e:  # noqa: BLE001 - MLflow's own exception types vary by store
        raise ConfigError(f"{run_id}: no such MLflow run in {tracking_uri or default_tracking_uri()} "
                          f"({one_line(e)}). Give --tracking-uri the store it was logged to.") from None
    runs = [run]
    if run.data.tags.get("rlrun.kind") == "sweep":
        runs = [r for r in client.search_runs([run.info.experiment_id],
                                              filter_string=f"tags.mlflow.parentRunId = '{run_id}'")
                if r.info.status == "FINISHED"]
    out = []
    for r in runs:
        params = r.data.params
        history = sorted(client.get_metric_history(r.info.run_id, metric), key=lambda m: m.step)
        curve = (np.array([m.step for m in history], float), np.array([m.value for m in history], float))
        out.append(Run(r.info.run_name or r.info.run_id, f"{params.get('env.name', '?')}:{params.get('env.id', '?')}",
                       float(history[-1].value) if history else None, curve if history else None))
    return out


def normalised(side: Side, table: dict[str, tuple[float, float]]) -> Side:
    """The side with every score and curve on its env's normalised scale (the env named by its id, the part after
    ``<env name>:``, or in full)."""
    runs = []
    for r in side.runs:
        low, high = scale_of(r.env, table, side.label)
        curve = None if r.curve is None else (r.curve[0], (r.curve[1] - low) / (high - low))
        runs.append(Run(r.name, r.env, None if r.score is None else (r.score - low) / (high - low), curve))
    return Side(side.label, runs)


def pooled(side: Side) -> Side:
    """The side's runs as one task: normalised scores of different envs, compared as one distribution."""
    return Side(side.label, [Run(r.name, "all envs, normalised", r.score, r.curve) for r in side.runs])


# ---------------------------------------------------------------- the comparison


@dataclass
class Comparison:
    """What ``rlrun compare`` found: the seeds of each side (the fewest of any env), the IQMs, the probability of
    improvement (None with one seed a side), the seeds a difference would need, and the verdict in words."""

    envs: list[str]
    seeds_a: int
    seeds_b: int
    iqm_a: es.Interval
    iqm_b: es.Interval
    iqm_difference: dict[str, float]
    improvement: es.Interval | None
    seeds_needed: int | None
    verdict: str


def compare(a: Side, b: Side, metric: str, seed: int = 0) -> Comparison:
    """Raises ConfigError where the sides cannot be compared (no runs with the metric, different envs)."""
    for side in (a, b):
        if not side.envs():
            raise ConfigError(f"{side.label}: none of its {len(side.runs)} runs reports {metric}: compare on a "
                              f"metric both sides report (--metric; {RETURN_MEAN} for a run that finished "
                              f"episodes).")
    if a.envs() != b.envs():
        raise ConfigError(f"A runs on {', '.join(a.envs())} and B on {', '.join(b.envs())}: returns of different "
                          f"envs are not comparable. Compare runs of the same envs, or put them on one scale with "
                          f"--normaliser FILE (each env's low and high score).")
    envs = a.envs()
    xs, ys = [a.scores(e) for e in envs], [b.scores(e) for e in envs]
    n_a, n_b = min(x.size for x in xs), min(y.size for y in ys)
    iqm_a, iqm_b = es.bootstrap_ci(xs, es.iqm, seed=seed), es.bootstrap_ci(ys, es.iqm, seed=seed)
    difference = {e: float(es.iqm(y) - es.iqm(x)) for e, x, y in zip(envs, xs, ys, strict=True)}
    if n_a < 2 or n_b < 2:
        return Comparison(envs, n_a, n_b, iqm_a, iqm_b, difference, None, None,
                          f"one run {'each' if n_a < 2 and n_b < 2 else 'on a side'} cannot support a claim: "
                          f"a single seed says nothing of the spread between seeds. Run at least 5 seeds per side "
                          f"(seed=0,1,2,3,4).")
    improvement = es.probability_of_improvement(ys, xs, seed=seed)
    needed = None
    if len(envs) == 1:
        needed = es.seeds_to_resolve(xs[0], ys[0])
    seeds = f"{n_a} seeds" if n_a == n_b else f"{n_a} and {n_b} seeds"
    separated = improvement.low > 0.5 or improvement.high < 0.5
    if separated and min(n_a, n_b) < es.FEW_SEEDS:
        # A percentile bootstrap of a handful of runs is too narrow (2 seeds a side, all of B above all of A, give
        # [1, 1] though a rank test could not tell them apart): no claim below FEW_SEEDS.
        ahead = "B" if improvement.low > 0.5 else "A"
        verdict = (f"no claim at {seeds}: {ahead} is ahead and the interval of P(B > A), {improvement}, leaves out "
                   f"0.5, but under {es.FEW_SEEDS} seeds a side a bootstrap interval is too narrow to trust. Run at "
                   f"least {es.FEW_SEEDS} seeds per side.")
    elif improvement.low > 0.5:
        verdict = f"B is better than A at {seeds}: P(B > A) = {improvement}, above 0.5."
    elif improvement.high < 0.5:
        verdict = f"B is worse than A at {seeds}: P(B > A) = {improvement}, below 0.5."
    else:
        verdict = f"no detectable difference at {seeds}: the interval of P(B > A) holds 0.5"
        if needed is not None and needed > max(n_a, n_b):
            verdict += f"; about {needed} seeds per side would resolve a difference of this size"
        verdict += "."
    return Comparison(envs, n_a, n_b, iqm_a, iqm_b, difference, improvement, needed, verdict)


def report(c: Comparison, a: Side, b: Side, metric: str) -> str:
    few = min(c.seeds_a, c.seeds_b) < es.FEW_SEEDS

    def side(name: str, label: str, seeds: int, iqm: es.Interval) -> str:
        if seeds < 2:
            return f"{name} {label}: 1 seed, score {iqm.value:.4g} (no interval from one seed)"
        return f"{name} {label}: {seeds} seeds, IQM {iqm} (95% stratified-bootstrap interval)"

    lines = [f"metric: {metric} (final value per run); envs: {', '.join(c.envs)}",
             side("A", a.label, c.seeds_a, c.iqm_a), side("B", b.label, c.seeds_b, c.iqm_b),
             "IQM difference B - A: " + ", ".join(f"{e} {d:+.4g}" for e, d in c.iqm_difference.items())]
    if c.improvement is not None:
        lines.append(f"P(B > A): {c.improvement} (95% stratified-bootstrap interval)")
    if few and c.improvement is not None:
        lines.append(f"under {es.FEW_SEEDS} seeds the intervals are wide")
    lines.append(f"verdict: {c.verdict}")
    return "\n".join(lines)


def plot_curves(a: Side, b: Side, metric: str, out: Path, seed: int = 0) -> bool:
    """The two sides' learning curves, IQM over seeds with bootstrap bands, on one step axis: every run of both
    sides interpolated onto the steps they all reached (``on_common_grid``); False (nothing written) where a side
    logged no curve."""
    from rlrun.app.plot import on_common_grid

    curves = [[r.curve for r in s.runs if r.curve is not None and len(r.curve[0])] for s in (a, b)]
    if not all(curves):
        return False
    grid, ys = on_common_grid(curves[0] + curves[1])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    rows = (ys[:len(curves[0])], ys[len(curves[0]):])
    for side, on_grid, name, color in zip((a, b), rows, "AB", ("tab:blue", "tab:orange"), strict=True):
        value, low, high = es.curve_band(on_grid, es.iqm, seed=seed)
        ax.plot(grid, value, color=color, marker="o" if len(grid) <= 30 else None, markersize=4,
                label=f"{name}: {side.label} ({len(on_grid)} seed{'s' if len(on_grid) > 1 else ''})")
        if len(on_grid) > 1:
            ax.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0)
            if len(grid) == 1:  # one shared step: the band as an error bar
                ax.errorbar(grid, value, yerr=[value - low, high - value], color=color, capsize=6)
    ax.set_xlabel("step (frames where the runs logged them, else env steps)")
    ax.set_ylabel(f"{metric}\n(IQM over seeds, 95% bootstrap band)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="rlrun compare",
        description="Does B beat A? Probability of improvement, IQM difference with 95% stratified-bootstrap "
                    "intervals, a verdict, and a PNG of the two learning curves.")
    parser.add_argument("a", help="sweep directory, run directory or MLflow run id")
    parser.add_argument("b", help="sweep directory, run directory or MLflow run id")
    parser.add_argument("--metric", default=RETURN_MEAN, help=f"the metric compared (default {RETURN_MEAN})")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"the PNG to write (default {DEFAULT_OUT})")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    parser.add_argument("--tracking-uri", default=None, help="the MLflow store of run ids (default: rlrun's)")
    parser.add_argument("--normaliser", default=None,
                        help="a YAML file of '<env id>: {low: L, high: H}': scores as (score - L) / (H - L)")
    args = parser.parse_args(argv)
    try:
        a = load_side(args.a, args.metric, args.tracking_uri)
        b = load_side(args.b, args.metric, args.tracking_uri)
        if args.normaliser:
            table = read_normaliser(args.normaliser)
            a, b = normalised(a, table), normalised(b, table)
            if a.envs() != b.envs():  # different envs: one scale makes their scores one distribution per side
                a, b = pooled(a), pooled(b)
        result = compare(a, b, args.metric, args.seed)
    except RlrunError as e:
        print(f"rlrun compare: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    print(report(result, a, b, args.metric))
    if plot_curves(a, b, args.metric, Path(args.out), args.seed):
        print(f"curves: {args.out}")
