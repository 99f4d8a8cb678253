"""``rlrun-bench offline``: BC, IQL and CQL on datasets rlrun made from its own MuJoCo runs, as a D4RL-style table.

D4RL's datasets cannot be fetched here, so the table is of their counterparts, made by the recipes on
docs/offline.md (``expert``, ``medium``, ``medium-replay`` of Hopper-v5 and HalfCheetah-v5). Each cell is an
ordinary offline run, ``rlrun algo=<bc|iql|cql> env=mujoco env.id=<env> data=minari data.id=<env>/<dataset>-v0
stop.gradient_steps=<budget>``, then its final policy's greedy return over 10 episodes (``rlrun eval <run dir>``),
normalised as D4RL does: ``100 (return - random) / (expert - random)``, with

- ``random``: the mean return of uniform random actions over 100 episodes (resets seeded 0-99);
- ``expert``: the mean return of the expert policy (the expert dataset's checkpoint) played greedily over 100
  episodes, as ``rlrun eval`` plays it: the policy, not its exploring dataset.

Beside each row, CORL's published scores of the same algorithms on D4RL's counterpart dataset: the claim checked is
the ordering (IQL and CQL well above BC on medium-replay; all near the expert on expert data), not the numbers,
which are of other datasets and other budgets.

    rlrun-bench offline --data-root DIR [--envs hopper] [--algos bc,iql] [--seeds 0] [--jobs 2]   run + table
    rlrun-bench offline --data-root DIR --algos cql --seeds 0 --jobs 1 --torch-threads 2         one run, two cores
    rlrun-bench offline --table-only                                                              only the table

A variant (``--algos iql-norm``, :data:`VARIANTS`) is an algorithm's runs with some keys changed, a column of its own.

A cell's record (``benchmarks/results/offline/records/<env>/<dataset>/<algo>-seed<S>.json``) is written when its run
is finished and evaluated, so the table grows across sessions; a run stopped part-way continues from its last
checkpoint (``rlrun resume=``). Run directories stay under ``--runs-dir`` (not committed).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "offline"
PAGE = ROOT / "docs" / "offline.md"
ENVS = {"hopper": "Hopper-v5", "halfcheetah": "HalfCheetah-v5"}
DATASETS = ("expert", "medium", "medium-replay")
ALGOS = ("bc", "iql", "cql")
# A variant is a column of its own: an algorithm's runs with some keys changed (``--algos iql-norm``), shown where it
# has records. Its published score beside it is its algorithm's.
VARIANTS = {
    # CORL's configs standardise observations by the dataset's statistics (``normalize``) for every Gym-MuJoCo
    # dataset; the paper's reference implementation, whose settings are IQL's defaults, does not.
    "iql-norm": ("iql", ("algo.normalize_obs=true",), "IQL, obs. normalised"),
}
GRADIENT_STEPS = 50_000  # CPU-sized: a CQL step evaluates its critics at 31 actions per state (docs/offline.md)
EVAL_EPISODES = 10
RANDOM_EPISODES = 100
EXPERT_EPISODES = 100

# CORL (Tarasov et al. 2022, tinkoff-ai/CORL@6afec90 README, "Last Scores", Gym-MuJoCo): the final policies'
# normalised scores on D4RL's -v2 counterparts, mean over 4 seeds at 1M gradient steps, by the implementations rlrun's
# BC, IQL and CQL follow, with CORL's config for each dataset (where those differ from rlrun's defaults:
# docs/offline.md). D4RL's medium-replay is the replay up to its medium policy, as rlrun's is.
# CORL has no plain expert rows, so rlrun's expert rows stand alone: their claim is "all near 100".
PUBLISHED_SOURCE = "CORL (tinkoff-ai/CORL@6afec90 README, Last Scores, D4RL -v2, 1M gradient steps, 4 seeds)"
PUBLISHED = {
    ("hopper", "medium"): {"bc": 53.51, "iql": 67.53, "cql": 59.08},
    ("hopper", "medium-replay"): {"bc": 29.81, "iql": 97.43, "cql": 95.11},
    ("halfcheetah", "medium"): {"bc": 42.40, "iql": 48.31, "cql": 47.04},
    ("halfcheetah", "medium-replay"): {"bc": 35.66, "iql": 44.46, "cql": 45.04},
}


def dataset_id(env: str, dataset: str) -> str:
    return f"{env}/{dataset}-v0"


def record_path(out: Path, env: str, dataset: str, algo: str, seed: int) -> Path:
    return out / "records" / env / dataset / f"{algo}-seed{seed}.json"


def cell_algo(column: str) -> tuple[str, tuple[str, ...]]:
    """A column's algorithm and the keys its runs change: ``iql-norm`` is ``iql`` with ``algo.normalize_obs=true``;
    an algorithm's own column changes nothing."""
    if column in VARIANTS:
        return VARIANTS[column][0], VARIANTS[column][1]
    if column not in ALGOS:
        raise ValueError(f"unknown algorithm {column!r}: give one of {', '.join((*ALGOS, *VARIANTS))}")
    return column, ()


def table_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The table's columns: every algorithm, then each variant that has a cell in ``rows``."""
    return [*ALGOS, *(v for v in VARIANTS if any(v in row["cells"] for row in rows))]


def column_name(column: str) -> str:
    return VARIANTS[column][2] if column in VARIANTS else column.upper()


def normalised(value: float, random: float, expert: float) -> float:
    """D4RL's normalised score: 0 is uniform random actions, 100 the expert."""
    return 100.0 * (value - random) / (expert - random)


def random_return(env_id: str, episodes: int = RANDOM_EPISODES) -> dict[str, Any]:
    """Mean return of uniform random actions over ``episodes`` episodes, resets seeded 0..episodes-1."""
    import gymnasium as gym

    env = gym.make(env_id)
    env.action_space.seed(0)
    returns = []
    for seed in range(episodes):
        env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return {"return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)), "episodes": episodes}


def dataset_metadata(data_root: Path, dataset: str) -> dict[str, Any] | None:
    """A local Minari dataset's metadata (its rlrun.* provenance and size), or None when it is not there."""
    import minari

    from rlrun.execution.dataset import minari_root

    with minari_root(str(data_root)) as folder:
        if not folder.is_dir() or dataset not in minari.list_local_datasets():
            return None
        meta = dict(minari.load_dataset(dataset).storage.metadata)
    keep = {k: v for k, v in meta.items() if k.startswith("rlrun.") or k in ("total_episodes", "total_steps")}
    return json.loads(json.dumps(keep, default=lambda v: v.item() if hasattr(v, "item") else str(v)))


def expert_return(checkpoint: str, episodes: int = EXPERT_EPISODES) -> dict[str, Any]:
    """The greedy return of ``checkpoint``'s policy over ``episodes`` episodes (``rlrun eval``'s seeds)."""
    from rlrun.app.evaluate import evaluate

    result = evaluate(checkpoint, episodes=episodes, write=False)
    return {"return_mean": float(result.return_mean), "return_std": float(result.return_std), "episodes": episodes}


def write_anchors(out: Path, data_root: Path, env: str) -> dict[str, Any] | None:
    """``<out>/anchors.json``: per env, the random and expert returns of the normalisation (kept once measured)."""
    path = out / "anchors.json"
    anchors = json.loads(path.read_text()) if path.exists() else {}
    if env not in anchors:
        expert = dataset_metadata(data_root, dataset_id(env, "expert"))
        if expert is None:
            return None
        anchors[env] = {"env_id": ENVS[env], "random": random_return(ENVS[env]),
                        "expert": {"dataset": dataset_id(env, "expert"), **expert,
                                   **expert_return(str(expert.get("rlrun.checkpoint") or expert["rlrun.run_dir"]))}}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(anchors, indent=1) + "\n")
    return anchors[env]


def tracking_uri(runs: Path) -> str:
    """The MLflow store of the table's runs, beside their run directories."""
    return f"sqlite:///{runs.absolute()}/mlflow.db"


def _rlrun(*args: str) -> None:
    rlrun = Path(sys.executable).parent / "rlrun"
    subprocess.run([str(rlrun), *args], check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def run_cell(runs: Path, out: Path, data_root: Path, env: str, dataset: str, column: str, seed: int,
             steps: int, torch_threads: int = 1) -> Path:
    """Train (or continue) one cell's run to ``steps`` gradient steps on ``torch_threads`` threads, evaluate it and
    write its record; ``column`` is an algorithm or a variant (:data:`VARIANTS`)."""
    from benchmarks.common import fingerprint
    from benchmarks.reproduce import greedy_eval
    from rlrun.checkpoint import checkpoint_path

    algo, changed = cell_algo(column)
    run_dir = runs / env / dataset / f"{column}-seed{seed}"
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    if int(summary.get("gradient_steps") or 0) < steps:
        tracking = f"logger.mlflow.tracking_uri={tracking_uri(runs)}"
        threads = f"device.torch_threads={torch_threads}"
        if checkpoint_path(run_dir).is_file():
            _rlrun(f"resume={run_dir}", f"stop.gradient_steps={steps}", tracking, threads)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)  # a start that left no checkpoint: begin again
            _rlrun(f"algo={algo}", "env=mujoco", f"env.id={ENVS[env]}", "data=minari",
                   f"data.id={dataset_id(env, dataset)}", f"data.root={data_root}", f"seed={seed}",
                   f"stop.gradient_steps={steps}", "checkpoint.interval_minutes=5", "export.formats=[]",
                   "logger.console.interval_s=60", f"hydra.run.dir={run_dir}", tracking, threads, *changed)
        summary = json.loads(summary_path.read_text())
    record = {"env": env, "env_id": ENVS[env], "dataset": dataset_id(env, dataset), "algo": algo,
              **({"variant": column, "overrides": list(changed)} if changed else {}), "seed": seed,
              "gradient_steps": summary.get("gradient_steps"), "wall_time_s": summary.get("wall_time_s"),
              "torch_threads": torch_threads,
              "data": summary.get("data"), "final_eval": greedy_eval(run_dir, EVAL_EPISODES),
              "hardware": fingerprint()}
    path = record_path(out, env, dataset, column, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def build_rows(out: Path) -> list[dict[str, Any]]:
    """One row per (env, dataset): per algorithm or variant the seeds' normalised finals, their mean ± std, the
    published score of its algorithm beside it."""
    path = out / "anchors.json"
    anchors = json.loads(path.read_text()) if path.exists() else {}
    rows = []
    for env in ENVS:
        if env not in anchors:
            continue
        random, expert = anchors[env]["random"]["return_mean"], anchors[env]["expert"]["return_mean"]
        for dataset in DATASETS:
            row: dict[str, Any] = {"env": env, "dataset": dataset_id(env, dataset), "cells": {}}
            for column in (*ALGOS, *VARIANTS):
                records = [json.loads(p.read_text())
                           for p in sorted((out / "records" / env / dataset).glob(f"{column}-seed*.json"))]
                if not records:
                    continue
                scores = [normalised(r["final_eval"]["return_mean"], random, expert) for r in records]
                row["cells"][column] = {
                    "seeds": [r["seed"] for r in records], "scores": [round(s, 1) for s in scores],
                    "mean": float(np.mean(scores)), "std": float(np.std(scores)),
                    "gradient_steps": sorted({r["gradient_steps"] for r in records}),
                    "final_returns": [r["final_eval"]["return_mean"] for r in records],
                    "published": PUBLISHED.get((env, dataset), {}).get(cell_algo(column)[0])}
                row["transitions"] = (records[0].get("data") or {}).get("transitions")
            if row["cells"]:
                rows.append(row)
    return rows


def ran_line(out: Path) -> str:
    """Where and when the records' runs ran, and at what budget: the line above the table."""
    from benchmarks.reproduce import describe_hardware

    records = [json.loads(p.read_text()) for p in sorted((out / "records").rglob("*.json"))]
    if not records:
        return "`rlrun-bench offline`: no run yet."
    hardware = "; ".join(sorted({describe_hardware(r.get("hardware") or {}) for r in records}))
    dates = sorted({str((r.get("hardware") or {}).get("date") or "")[:10] for r in records} - {""})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates else "undated"
    steps = ", ".join(f"{s:,}" for s in sorted({int(r["gradient_steps"]) for r in records}))
    return (f"`rlrun-bench offline`: {hardware}, {when}. {steps} gradient steps a run; each run's final policy, "
            f"{EVAL_EPISODES} greedy episodes; normalised score, mean ± std over seeds 0, 1, 2.")


def _cell(c: dict[str, Any]) -> str:
    """A cell's score: mean ± std over its seeds, the count when it is not all three; one seed has no spread to
    show."""
    n = len(c["seeds"])
    if n == 1:
        return f"{c['mean']:.1f} (1 seed)"
    return f"{c['mean']:.1f} ± {c['std']:.1f}" + (f" ({n} seeds)" if n != 3 else "")


def markdown(rows: list[dict[str, Any]], anchors: dict[str, Any], ran: str = "") -> str:
    """The table: per dataset each algorithm's (and variant's) normalised score, mean ± std over seeds, and CORL's
    on D4RL's counterpart dataset; ``ran`` above it."""
    shown = table_columns(rows)
    names, theirs_names = [column_name(c) for c in shown], [a.upper() for a in ALGOS]
    lines = [*([ran, ""] if ran else []),
             f"| dataset | transitions | {' | '.join(names)} | CORL on D4RL's counterpart "
             f"({' / '.join(theirs_names)}) |",
             "| --- | --- |" + " --- |" * (len(shown) + 1)]
    for row in rows:
        cells = []
        for column in shown:
            c = row["cells"].get(column)
            cells.append(_cell(c) if c else "not run")
        env, dataset = row["env"], row["dataset"].split("/")[1].rsplit("-v", 1)[0]
        published = PUBLISHED.get((env, dataset))
        theirs = " / ".join(f"{published[a]:.1f}" for a in ALGOS) if published else "(none)"
        transitions = f"{row['transitions']:,}" if row.get("transitions") else ""
        lines.append(f"| {row['dataset']} | {transitions} | " + " | ".join(cells) + f" | {theirs} |")
    lines.append("")
    for a in anchors.values():
        lines.append(f"- {a['env_id']}: random {a['random']['return_mean']:.1f} (uniform actions, "
                     f"{a['random']['episodes']} episodes), expert {a['expert']['return_mean']:.1f} (the policy of "
                     f"{a['expert']['dataset']}, greedy, {a['expert']['episodes']} episodes).")
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- offline-table:begin -->", "<!-- offline-table:end -->"


def write_table(out: Path, page: Path = PAGE) -> Path:
    """``<out>/table.json`` and ``table.md`` from the records, and the table between ``page``'s markers."""
    from benchmarks.common import fingerprint

    rows = build_rows(out)
    anchors_path = out / "anchors.json"
    anchors = json.loads(anchors_path.read_text()) if anchors_path.exists() else {}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "table.json"
    path.write_text(json.dumps({"eval_episodes": EVAL_EPISODES, "published_source": PUBLISHED_SOURCE,
                                "anchors": anchors, "rows": rows, "hardware": fingerprint()}, indent=1) + "\n")
    table = markdown(rows, anchors, ran_line(out))
    (out / "table.md").write_text(table)
    text = page.read_text() if page.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        page.write_text(head + BEGIN + "\n" + table + END + rest.split(END, 1)[1])
    print(f"wrote {path} and {path.with_suffix('.md')}")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rlrun-bench offline", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", type=Path, help="the folder of the datasets (data.root of the runs)")
    p.add_argument("--envs", default=",".join(ENVS))
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--algos", default=",".join(ALGOS),
                   help=f"algorithms or variants, any of {', '.join((*ALGOS, *VARIANTS))}")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--gradient-steps", type=int, default=GRADIENT_STEPS)
    p.add_argument("--jobs", type=int, default=1, help="runs at a time")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch threads of each run (device.torch_threads): one core each by default; a lone CQL "
                        "run, whose steps are large matrix products, takes both cores of this machine class with 2")
    p.add_argument("--runs-dir", type=Path, default=ROOT / "reproduce_runs" / "offline-table")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--page", type=Path, default=PAGE, help="the docs page whose table markers get the table")
    p.add_argument("--table-only", action="store_true")
    a = p.parse_args(argv)
    if not a.table_only:
        if a.data_root is None:
            p.error("--data-root is required to run (the folder the recipes on docs/offline.md wrote to)")
        if a.torch_threads < 1:
            p.error(f"--torch-threads {a.torch_threads}: give 1 or more")
        algos = a.algos.split(",")
        for algo in algos:
            try:
                cell_algo(algo)
            except ValueError as e:
                p.error(f"--algos: {e}")
        cells = []
        for env in a.envs.split(","):
            if write_anchors(a.out, a.data_root, env) is None:
                print(f"skipped {env}: no {dataset_id(env, 'expert')} under {a.data_root} (docs/offline.md, "
                      f"Recipes)", file=sys.stderr)
                continue
            for dataset in a.datasets.split(","):
                if dataset_metadata(a.data_root, dataset_id(env, dataset)) is None:
                    print(f"skipped {dataset_id(env, dataset)}: not under {a.data_root}", file=sys.stderr)
                    continue
                cells += [(env, dataset, algo, int(seed)) for algo in algos
                          for seed in a.seeds.split(",")
                          if not record_path(a.out, env, dataset, algo, int(seed)).exists()]
        a.runs_dir.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=max(a.jobs, 1)) as pool:
            for path in pool.map(lambda c: run_cell(a.runs_dir, a.out, a.data_root, *c, a.gradient_steps,
                                                         a.torch_threads), cells):
                print(f"wrote {path}")
    write_table(a.out, a.page)
    return 0
