"""``rlrun-plot <run dir | sweep dir> [--out FILE.png]``: learning curves and throughput, read from TensorBoard
event files, written as a PNG.

Left panel: ``episode/return_mean`` against frames (``counters/frames``: agent steps x frame skip); middle panel:
``perf/frames_per_s`` against frames; right panel: each group's performance profile (the fraction of its runs whose
final return exceeds tau, with its 95% bootstrap band, ``profiles``). Runs are grouped by their overrides less the
seed (the MLflow tag ``rlrun.group`` of a sweep job), so a group is one setting over several seeds, each seed's
curve linearly interpolated onto a common grid spanning the frames that every seed reached (``on_common_grid``).
The return's line is the interquartile mean over seeds and its band the 95% bootstrap interval of that IQM (whole
curves resampled, ``rlrun/evaluation_stats.py``); throughput's is the mean ± standard deviation (population,
ddof=0). A group of one run is drawn as it is, with no band.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from rlrun.errors import ConfigError, RlrunError, one_line
from rlrun.evaluation_stats import curve_band, iqm, performance_profile, performance_profile_band
from rlrun.metric_names import FRAMES, FRAMES_PER_S, RETURN_MEAN

# The curves drawn, by their TensorBoard tags: the metric names the run loop reports them under.
RETURN_TAG = RETURN_MEAN
FPS_TAG = FRAMES_PER_S
FRAMES_TAG = FRAMES
DEFAULT_OUT = "learning_curves.png"
GRID_POINTS = 200  # points of the common grid a group's seeds are interpolated onto
ENV_KEYS = ("env=", "env.id=", "env.game=")  # the overrides that choose the env (dropped when groups span envs)


@dataclass
class RunCurves:
    """One run's curves: x in frames (or env steps when the run logged no ``counters/frames``)."""

    run_dir: Path
    overrides: list[str]
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    x_is_frames: bool = True
    env: str = "?"
    """``<env name>:<env id>`` from the run's saved config (what a normaliser's entries are looked up by)."""


def find_runs(root: Path) -> list[Path]:
    """``root`` itself if it is a run directory, else every run directory below it (a ``tensorboard/`` folder
    with event files; a previous attempt's ``tensorboard.attempt-N`` is not one)."""
    root = Path(root)
    if (root / "tensorboard").is_dir():
        return [root]
    return sorted(p.parent for p in root.rglob("tensorboard")
                  if p.is_dir() and any(p.glob("events.out.tfevents.*")))


def read_run(run_dir: Path) -> RunCurves:
    """The return and frames/s curves of a run, from its TensorBoard event files."""
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    acc = EventAccumulator(str(Path(run_dir) / "tensorboard"), size_guidance={SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags().get("scalars", []))

    def series(tag: str) -> dict[int, float]:
        return {e.step: e.value for e in acc.Scalars(tag)} if tag in tags else {}

    frames = series(FRAMES_TAG)
    run = RunCurves(Path(run_dir), run_overrides(Path(run_dir)), x_is_frames=bool(frames), env=run_env(Path(run_dir)))
    for tag in (RETURN_TAG, FPS_TAG):
        points = sorted(series(tag).items())
        if points:
            x = np.array([frames.get(step, step) if frames else step for step, _ in points], dtype=float)
            run.curves[tag] = (x, np.array([v for _, v in points], dtype=float))
    return run


def read_scalars(run_dir: Path, tag: str) -> tuple[np.ndarray, np.ndarray] | None:
    """One scalar's curve ``(x, y)`` from a run's TensorBoard event files, x in frames where the run logged
    ``counters/frames`` (else its logged step); None where the run never logged the tag."""
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    acc = EventAccumulator(str(Path(run_dir) / "tensorboard"), size_guidance={SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags().get("scalars", []))
    if tag not in tags:
        return None
    frames = {e.step: e.value for e in acc.Scalars(FRAMES_TAG)} if FRAMES_TAG in tags else {}
    points = sorted((e.step, e.value) for e in acc.Scalars(tag))
    x = np.array([frames.get(step, step) for step, _ in points], dtype=float)
    return x, np.array([v for _, v in points], dtype=float)


def run_env(run_dir: Path) -> str:
    """``<env name>:<env id>`` of a run, from its saved config (``?`` for a part it does not say)."""
    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return "?:?"
    import yaml

    env = (yaml.safe_load(path.read_text()) or {}).get("env") or {}
    return f"{env.get('name', '?')}:{env.get('id', '?')}"


def read_normaliser(path: str) -> dict[str, tuple[float, float]]:
    """``{env: (low, high)}`` from a YAML or JSON file of ``<env id>: {low: L, high: H}`` (e.g. random and human
    scores of Atari games): a score becomes ``(score - low) / (high - low)``, 0 at low and 1 at high."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
        table = {str(env): (float(v["low"]), float(v["high"])) for env, v in data.items()}
    except (OSError, yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"--normaliser {path}: not a file of '<env id>: {{low: L, high: H}}' entries "
                          f"({one_line(e)}).") from None
    flat = [env for env, (low, high) in table.items() if high == low]
    if flat:
        raise ConfigError(f"--normaliser {path}: {flat[0]} has low == high: give two different scores.")
    return table


def scale_of(env: str, table: dict[str, tuple[float, float]], who: str) -> tuple[float, float]:
    """The normaliser's ``(low, high)`` of ``env`` (``<env name>:<env id>``: its entry by the id, or in full);
    ``who`` names the run in the error when there is none."""
    key = env if env in table else env.partition(":")[2]
    if key not in table:
        raise ConfigError(f"--normaliser has no entry for {env} ({who}): add '{key}: {{low: L, high: H}}' to it.")
    return table[key]


def normalised(run: RunCurves, table: dict[str, tuple[float, float]]) -> RunCurves:
    """The run with its return curve on its env's scale ``(r - low) / (high - low)`` (:func:`scale_of`)."""
    if RETURN_TAG not in run.curves:
        return run
    low, high = scale_of(run.env, table, str(run.run_dir))
    x, y = run.curves[RETURN_TAG]
    return replace(run, curves={**run.curves, RETURN_TAG: (x, (y - low) / (high - low))})


def run_overrides(run_dir: Path) -> list[str]:
    """The command-line overrides a run was started with (Hydra's .hydra/overrides.yaml; [] where there is none)."""
    path = run_dir / ".hydra" / "overrides.yaml"
    if not path.exists():
        return []
    import yaml

    # Plain YAML, not OmegaConf: the overrides are text to show, and resolving an interpolation in them
    # (${oc.env:SECRET}) would put this machine's values into the plot.
    loaded = yaml.safe_load(path.read_text())
    return [str(o) for o in loaded] if isinstance(loaded, list) else []


def on_common_grid(curves: list[tuple[np.ndarray, np.ndarray]], points: int = GRID_POINTS
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(x, ys)``: each curve ``(x_i, y_i)`` (x increasing) interpolated linearly onto a common grid spanning the
    largest first x to the smallest last x (where every curve has data): the union of the curves' x values there,
    or ``points`` evenly spaced values if that union is larger. ``ys`` is ``(curves, grid points)``."""
    if len(curves) == 1:
        x, y = curves[0]
        return x, y[None, :]
    lo = max(float(x[0]) for x, _ in curves)
    hi = min(float(x[-1]) for x, _ in curves)
    union = np.unique(np.concatenate([x for x, _ in curves]))
    grid = union[(union >= lo) & (union <= hi)]
    if hi < lo or len(grid) == 0:  # the curves do not overlap: compare their ends
        grid = np.array([hi])
    elif len(grid) > points:
        grid = np.linspace(lo, hi, points)
    return grid, np.stack([np.interp(grid, x, y) for x, y in curves])


def aggregate(curves: list[tuple[np.ndarray, np.ndarray]], points: int = GRID_POINTS
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, mean, std)`` over curves on their common grid (:func:`on_common_grid`). std is the population
    standard deviation (ddof=0). One curve is returned as it is, with std 0."""
    grid, ys = on_common_grid(curves, points)
    return grid, ys.mean(axis=0), ys.std(axis=0)


def profiles(finals: dict[str, np.ndarray], points: int = GRID_POINTS
             ) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Performance profiles of each group's final returns: ``(taus, {group: (fraction above tau, low, high)})``
    with the 95% bootstrap band of each, over thresholds spanning every group's returns."""
    everything = np.concatenate(list(finals.values()))
    pad = 0.05 * float(np.ptp(everything)) or 1.0  # a little either side, so the profile shows its 1 and its 0
    taus = np.linspace(everything.min() - pad, everything.max() + pad, points)
    out = {}
    for label, scores in finals.items():
        low, high = performance_profile_band([scores], taus)
        out[label] = (performance_profile([scores], taus), low, high)
    return taus, out


def group_runs(runs: list[RunCurves], across_envs: bool = False) -> tuple[dict[str, list[RunCurves]], list[str]]:
    """Runs grouped by their overrides less the seed (``across_envs``: less the env's too, so that a group is one
    setting over several envs and seeds); the labels keep only the overrides that differ between groups. Returns
    ``({label: runs}, the overrides every run shares)``."""
    from rlrun.app.sweep import group_of  # lazily: the sweep module loads Hydra, which plotting rarely needs

    def key(r: RunCurves) -> list[str]:
        words = group_of(r.overrides).split(" ") if r.overrides else [r.run_dir.name]
        return [w for w in words if not (across_envs and w.startswith(ENV_KEYS))] or ["(defaults)"]

    keys = {id(r): key(r) for r in runs}
    common = set.intersection(*(set(k) for k in keys.values())) if runs else set()
    groups: dict[str, list[RunCurves]] = {}
    for r in runs:
        label = " ".join(o for o in keys[id(r)] if o not in common) or "all runs"
        groups.setdefault(label, []).append(r)
    return groups, sorted(o for o in common if o != "(defaults)")


def plot(path: Path, out: Path | None = None,
         normaliser: dict[str, tuple[float, float]] | None = None) -> tuple[Path, int, int]:
    """Write the PNG; return ``(file, runs, groups)``. Raises RlrunError when there is nothing to plot.
    ``normaliser`` (:func:`read_normaliser`): every return on its env's ``(score - low) / (high - low)`` scale, and
    groups span envs (a setting's runs on every env and seed), so each line aggregates across envs."""
    path = Path(path)
    if not path.is_dir():
        raise RlrunError(f"{path}: not a directory. Give a run directory (outputs/...) or a sweep directory "
                         f"(multirun/...).")
    run_dirs = find_runs(path)
    if not run_dirs:
        raise RlrunError(f"{path}: no TensorBoard event files below it (runs write them to <run dir>/tensorboard "
                         f"unless logger.tensorboard.enabled=false).")
    runs = [read_run(d) for d in run_dirs]
    runs = [r for r in runs if r.curves]
    if not runs:
        raise RlrunError(f"{path}: the event files hold no {RETURN_TAG} or {FPS_TAG} scalars.")
    if normaliser is not None:
        runs = [normalised(r, normaliser) for r in runs]
    groups, common = group_runs(runs, across_envs=normaliser is not None)
    returns = "normalised return" if normaliser is not None else RETURN_TAG
    over = "runs of every env" if normaliser is not None else "seeds"

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(19, 4.8))
    x_label = "frames" if all(r.x_is_frames for r in runs) else "env steps"
    for (label, members), color in zip(groups.items(), _colors(len(groups)), strict=True):
        for ax, tag in zip(axes[:2], (RETURN_TAG, FPS_TAG), strict=True):
            curves = [r.curves[tag] for r in members if tag in r.curves]
            if not curves:
                continue
            x, ys = on_common_grid(curves)
            if tag == RETURN_TAG:  # the IQM over seeds and its bootstrap band (rlrun/evaluation_stats.py)
                value, low, high = curve_band(ys, iqm)
            else:  # throughput: mean ± std, a spread of the machine rather than an estimate
                value, std = ys.mean(axis=0), ys.std(axis=0)
                low, high = value - std, value + std
            ax.plot(x, value, color=color, marker="o" if len(x) <= 30 else None, markersize=3,
                    label=f"{label} ({len(curves)} {'run' if normaliser is not None else 'seed'}"
                          f"{'s' if len(curves) > 1 else ''})")
            if len(curves) > 1:
                ax.fill_between(x, low, high, color=color, alpha=0.2, linewidth=0)
    finals = {label: np.array([r.curves[RETURN_TAG][1][-1] for r in members if RETURN_TAG in r.curves])
              for label, members in groups.items()}
    finals = {label: f for label, f in finals.items() if f.size}
    if finals:
        taus, by_group = profiles(finals)
        colors = dict(zip(groups, _colors(len(groups)), strict=True))
        for label, (value, low, high) in by_group.items():
            color = colors[label]
            axes[2].plot(taus, value, color=color)
            if finals[label].size > 1:
                axes[2].fill_between(taus, low, high, color=color, alpha=0.2, linewidth=0)
    axes[2].set_xlabel(f"final {returns} tau")
    axes[2].set_ylabel("fraction of runs with final return > tau")
    axes[2].set_title("performance profile (95% bootstrap band)")
    axes[2].grid(alpha=0.3)
    for ax, tag in zip(axes[:2], (RETURN_TAG, FPS_TAG), strict=True):
        ax.set_xlabel(x_label)
        ax.set_ylabel(returns if tag == RETURN_TAG else tag)
        ax.grid(alpha=0.3)
    axes[0].set_title(f"{returns} (IQM over {over}, 95% bootstrap band)")
    axes[1].set_title("throughput (mean ± std over seeds)")
    handles, labels = axes[0].get_legend_handles_labels()
    if not handles:
        handles, labels = axes[1].get_legend_handles_labels()
    one_row = len(labels) <= 3
    fig.legend(handles, labels, loc="lower center", ncol=max(len(labels), 1) if one_row else 1, fontsize=8,
               frameon=False)
    shared = " ".join(common)
    fig.suptitle(f"{path}" + (f"\n{shared[:160]}" if shared else ""), fontsize=9)
    fig.tight_layout(rect=(0, 0.1 if one_row else min(0.05 + 0.04 * len(labels), 0.5), 1, 1))
    out = Path(out) if out is not None else path / DEFAULT_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out, len(runs), len(groups)


def _colors(n: int) -> list:
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="rlrun-plot",
        description="Learning curves (episode/return_mean vs frames, IQM over seeds with a 95% bootstrap band) "
                    "and frames/s of a run or a sweep, from its TensorBoard event files, as a PNG.")
    parser.add_argument("path", help="a run directory (outputs/...) or a sweep directory (multirun/...)")
    parser.add_argument("--out", help=f"the PNG to write (default: <path>/{DEFAULT_OUT})")
    parser.add_argument("--normaliser", default=None,
                        help="a YAML file of '<env id>: {low: L, high: H}': returns as (r - L) / (H - L), each "
                             "setting's runs aggregated across envs")
    args = parser.parse_args(argv)
    try:
        table = read_normaliser(args.normaliser) if args.normaliser else None
        out, n_runs, n_groups = plot(Path(args.path), Path(args.out) if args.out else None, table)
    except RlrunError as e:
        print(f"rlrun-plot: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"rlrun-plot: wrote {out} ({n_runs} run{'s' if n_runs != 1 else ''} in {n_groups} "
          f"group{'s' if n_groups != 1 else ''})")


if __name__ == "__main__":
    main()
