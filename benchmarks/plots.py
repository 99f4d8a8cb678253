"""``rlrun-bench plot``: per benchmark, a PNG of its throughput figures (frames/s, samples/s; log scale) and its
same-run ratios (fraction of the limit, rlrun vs bare) over the result files in the results folder, oldest first,
one x position per result file holding that benchmark, labelled with its date and commit. Regenerated from the JSON
files every time."""

from __future__ import annotations

from pathlib import Path

from benchmarks.records import is_same_run_ratio, iter_all_records, numeric_figures

THROUGHPUT_MARKERS = ("frames_per_s", "samples_per_s")


def throughput_figures(names: set[str]) -> list[str]:
    """frames/s and samples/s figures; a benchmark with none of those gets its other ``per_s`` figures (ratios of
    speeds go to the ratio panel)."""
    speeds = {n for n in names if not is_same_run_ratio(n)}
    chosen = sorted(n for n in speeds if any(m in n for m in THROUGHPUT_MARKERS))
    return chosen or sorted(n for n in speeds if "per_s" in n)


def collect(folder: Path) -> dict[str, tuple[list[str], dict[str, dict[int, float]]]]:
    """``{benchmark: (x labels, {figure: {x index: value}})}`` from every successful record: per benchmark, one x
    per result file that holds it, oldest first."""
    out: dict[str, tuple[list[str], dict[str, dict[int, float]]]] = {}
    for _, record in iter_all_records(folder):
        if record.get("status", "ok") != "ok":
            continue
        labels, series = out.setdefault(record["benchmark"], ([], {}))
        hw = record["hardware"]
        labels.append(f"{str(hw.get('date', ''))[:10]}\n{hw.get('commit') or '?'}")
        for figure, value in numeric_figures(record["figures"]).items():
            series.setdefault(figure, {})[len(labels) - 1] = value
    return out


def plot_benchmark(name: str, figures: dict[str, dict[int, float]], labels: list[str], out: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    speed = throughput_figures(set(figures))
    ratios = sorted(f for f in figures if is_same_run_ratio(f))
    if not speed and not ratios:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
    for ax, chosen, title in ((axes[0], speed, "throughput (log scale)"),
                              (axes[1], ratios, "same-run ratios (fraction of limit, rlrun vs bare)")):
        for i, figure in enumerate(chosen):  # 10 colours, then the next line style
            xs = sorted(figures[figure])
            ax.plot(xs, [figures[figure][x] for x in xs], marker="o", label=figure,
                    linestyle=("-", "--", ":", "-.")[(i // 10) % 4])
        ax.set_title(title)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.grid(alpha=0.3)
        if chosen:
            ax.legend(fontsize=6, loc="best")
    if speed:
        axes[0].set_yscale("log")
    if ratios:
        axes[1].axhline(1.0, color="grey", linewidth=0.8)
    fig.suptitle(f"{name}: over result files (date, commit)")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_all(folder: Path, out: Path) -> list[Path]:
    written = []
    for name, (labels, figures) in sorted(collect(folder).items()):
        path = plot_benchmark(name, figures, labels, out)
        if path is not None:
            written.append(path)
    return written
