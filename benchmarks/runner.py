"""``rlrun-bench``: run the benchmark suite, write one result file, compare with the baseline, log, plot, README.

    rlrun-bench list                       the suite: what each benchmark measures, CI set, unavailable + why
    rlrun-bench ci [--update-baseline]     the CI set (what ``make bench`` runs): result file, Markdown table,
                                           TensorBoard + MLflow, baseline comparison (exit 1 if a ratio fell or a
                                           benchmark failed)
    rlrun-bench all                        every available benchmark at full settings
    rlrun-bench <name> [module args]       one benchmark (full settings unless args are given, e.g. --quick)
    rlrun-bench compare FILE               compare an existing result file with the baseline
    rlrun-bench plot                       PNGs over commits from the result files (benchmarks/results/plots/)
    rlrun-bench readme [--result FILE]     regenerate the Performance table (docs/results/performance.md) from the
                                           newest suite file
    rlrun-bench reproduce SUITE [...]      rlrun vs published results (mujoco, classic, minatar, ...): sweeps + table
                                           (benchmarks/reproduce.py)
    rlrun-bench offline --data-root DIR    BC, IQL and CQL on rlrun-made MuJoCo datasets: runs + normalised table
                                           (benchmarks/offline_table.py)
    rlrun-bench gpu --out DIR [--dry-run]  the GPU kit (benchmarks/gpu, docs/gpu.md): CUDA tests, GPU learner, actors,
                                           Pong, in one call; --dry-run: the same on the CPU, tiny budgets

Each benchmark runs as ``python -m <module> <args>`` in its own process from the checkout's root (a crash, a
hang or leftover threads cannot take the others down): a failing or timed-out benchmark is reported and the rest
still run. Output: ``<results>/<date>-<commit>.json`` for ``ci`` (``<date>-<commit>-<suite>.json`` otherwise), the
same table as ``.md``, TensorBoard event files in ``<results>/tb/``, an MLflow parent run with a child per
benchmark (``--mlflow-uri``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<results>/mlflow.db``).
Exit status: 0 ok, 1 a ratio fell below its tolerance or a benchmark failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from benchmarks import baseline as bl
from benchmarks.common import LOG_ENV, OUT_ENV, fingerprint, load_average, results_dir
from benchmarks.records import SCHEMA, SchemaError, check_record, flatten_figures, read_records, suite_files
from benchmarks.report import suite_markdown, update_readme
from benchmarks.suite import DEFAULT_TOLERANCE, SUITE, Benchmark, by_name, ci_set

ROOT = Path(__file__).resolve().parent.parent  # the checkout: benchmarks run from here
DEFAULT_BASELINE = Path(__file__).resolve().parent / "baseline.json"
EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2


def _command(bench: Benchmark, args: Sequence[str]) -> str:
    return " ".join(["python", "-m", bench.module, *map(shlex.quote, args)])


def run_benchmark(bench: Benchmark, args: Sequence[str], results: Path, timeout_s: float | None = None,
                  extra_env: dict[str, str] | None = None, cwd: Path = ROOT, echo: bool = True) -> dict[str, Any]:
    """Run one benchmark in a subprocess and return its record (status ok, failed, timeout or unavailable)."""
    base = {"benchmark": bench.name, "command": _command(bench, args), "hardware": fingerprint(), "figures": {}}
    reasons = bench.unavailable()
    if reasons:
        if echo:
            print(f"[{bench.name}] unavailable: {'; '.join(reasons)}", flush=True)
        return {**base, "status": "unavailable", "notes": reasons, "wall_time_s": 0.0}
    out_file = results / "tmp" / f"{bench.name}-{os.getpid()}.json"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.unlink(missing_ok=True)
    env = {**os.environ, OUT_ENV: str(out_file), LOG_ENV: "0", "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    env.pop("MLFLOW_RUN_ID", None)
    before, start = load_average(), time.perf_counter()
    if echo:
        print(f"[{bench.name}] {base['command']}", flush=True)
    proc = subprocess.Popen([sys.executable, "-m", bench.module, *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    timed_out = threading.Event()

    def stop() -> None:  # the benchmark's own process group (it was started in a new session), nothing else
        timed_out.set()
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    watchdog = threading.Timer(timeout_s or bench.timeout_s, stop)
    watchdog.start()
    tail: collections.deque[str] = collections.deque(maxlen=40)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip("\n"))
            if echo:
                print(f"[{bench.name}] {line}", end="", flush=True)
        rc = proc.wait()
    finally:
        watchdog.cancel()
        if proc.poll() is None:  # interrupted (Ctrl-C reaches only the runner: the benchmark has its own session)
            stop()
    record: dict[str, Any]
    wall = round(time.perf_counter() - start, 3)
    error = None
    if timed_out.is_set():
        status, error = "timeout", f"stopped after {timeout_s or bench.timeout_s:.0f} s"
    elif rc != 0:
        status, error = "failed", f"exit status {rc}:\n" + "\n".join(list(tail)[-15:])
    elif not out_file.exists():
        status, error = "failed", "the benchmark wrote no result (benchmarks.common.write_result was not called)"
    else:
        status = "ok"
    record = dict(base)
    if status == "ok":
        try:
            record = check_record(json.loads(out_file.read_text()))
        except (ValueError, SchemaError) as e:
            status, error, record = "failed", f"its result does not follow the schema: {e}", dict(base)
    out_file.unlink(missing_ok=True)
    if status == "ok" and bench.derive is not None:
        record["figures"].update(bench.derive(flatten_figures(record["figures"])))
    record.update(status=status, wall_time_s=wall, load_average={"before": before, "after": load_average()})
    if error:
        record["error"] = error
        if echo:
            print(f"[{bench.name}] {status.upper()}: {error.splitlines()[-1] if error else ''}", flush=True)
    return record


def _better_of(first: dict[str, Any], second: dict[str, Any], entries: dict[str, Any]) -> dict[str, Any]:
    """``first`` with each baseline figure raised to ``second``'s value where that is higher; ``second`` is kept
    whole under ``"retry"``."""
    if second.get("status") != "ok":
        return {**first, "retry": second}
    merged = {**first, "figures": dict(first["figures"]), "retry": second,
              "notes": [*first.get("notes", []), "a ratio fell: run twice, the better value of each compared ratio "
                                                  "is kept (the second run is under 'retry')"]}
    flat_first, flat_second = flatten_figures(first["figures"]), flatten_figures(second["figures"])
    for figure in entries:
        a, b = flat_first.get(figure), flat_second.get(figure)
        if isinstance(b, (int, float)) and (not isinstance(a, (int, float)) or b > a):
            merged["figures"][figure] = b  # flat key: read back by flatten_figures like a nested one
    return merged


def result_path(results: Path, suite: str, hardware: dict[str, Any]) -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    commit = hardware.get("commit") or "nocommit"
    return results / (f"{stamp}-{commit}.json" if suite == "ci" else f"{stamp}-{commit}-{suite}.json")


def run_suite(jobs: list[tuple[Benchmark, Sequence[str]]], suite: str, command: str, *, results: Path,
              baseline_path: Path = DEFAULT_BASELINE, compare: bool = True, update_baseline: bool = False,
              tensorboard: bool = True, mlflow: bool = True, mlflow_uri: str | None = None,
              timeout_s: float | None = None, extra_env: dict[str, str] | None = None, cwd: Path = ROOT,
              echo: bool = True, suite_registry: tuple[Benchmark, ...] = SUITE, retry: bool = True
              ) -> tuple[int, Path]:
    """Run the jobs one after another; write, compare (a benchmark whose ratio fell is run once more, ``retry``),
    log; returns ``(exit status, result file)``."""
    results.mkdir(parents=True, exist_ok=True)
    hardware = fingerprint()
    date = dt.datetime.now(dt.timezone.utc).isoformat()
    before, start = load_average(), time.perf_counter()
    records = [run_benchmark(b, args, results, timeout_s, extra_env, cwd, echo) for b, args in jobs]
    by = by_name(suite_registry)

    def compared(name: str, figure: str) -> bool:
        return by[name].is_compared(figure) if name in by else True

    baseline = bl.load_baseline(baseline_path)
    comparison = bl.compare(records, baseline, compared) if compare or update_baseline else None
    if comparison is not None and comparison.fell and retry and not update_baseline:
        # A fall on a shared, noisy machine is confirmed by running that benchmark once more; of each compared
        # ratio the better of the two runs is kept, so only a fall seen twice fails the job.
        for name in sorted({f.benchmark for f in comparison.fell}):
            i = next(k for k, r in enumerate(records) if r["benchmark"] == name)
            bench, args = next((b, a) for b, a in jobs if b.name == name)
            if echo:
                print(f"[{name}] a ratio fell below the baseline's tolerance: running it once more to confirm",
                      flush=True)
            records[i] = _better_of(records[i], run_benchmark(bench, args, results, timeout_s, extra_env, cwd, echo),
                                    bl.entries_for(baseline, name, bl.cpu_of(records[i]))[0])
        comparison = bl.compare(records, baseline, compared)
    data: dict[str, Any] = {"schema": SCHEMA, "suite": suite, "command": command, "hardware": hardware, "date": date,
                            "wall_time_s": round(time.perf_counter() - start, 1),
                            "load_average": {"before": before, "after": load_average()}, "results": records}
    if comparison is not None:
        data["comparison"] = {"baseline": str(baseline_path), **comparison.to_json()}
    path = result_path(results, suite, hardware)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    markdown = suite_markdown(data, suite_registry)
    md_path = path.with_suffix(".md")
    md_path.write_text(markdown)
    if echo:
        print("\n" + markdown)
    if tensorboard or mlflow:
        from benchmarks.tracking import log_records

        where = log_records(records, results, suite, command, uri=mlflow_uri, tensorboard=tensorboard,
                            mlflow=mlflow, artifacts=[path, md_path])
        if echo:
            print(f"logged: TensorBoard {results / 'tb'}; MLflow {where['mlflow_uri']} "
                  f"(run {where['mlflow_run_id']})" if mlflow else f"logged: TensorBoard {results / 'tb'}")
    failed = [r for r in records if r["status"] in ("failed", "timeout")]
    if update_baseline:
        new = bl.updated_baseline(baseline, records,
                                  lambda name, fig: by[name].tolerance(fig) if name in by else DEFAULT_TOLERANCE,
                                  source={"command": command, "result": path.name, "hardware": hardware,
                                          "load_average": data["load_average"]}, compared=compared)
        bl.write_baseline(baseline_path, new)
        if echo:
            print(f"rewrote {baseline_path}")
    if echo:
        print(f"wrote {path} and {md_path.name} ({data['wall_time_s']:.0f} s; load average "
              f"{before} -> {data['load_average']['after']})")
    status = EXIT_OK
    if failed:
        print("benchmarks that failed: " + ", ".join(f"{r['benchmark']} ({r['status']})" for r in failed),
              file=sys.stderr)
        status = EXIT_REGRESSION
    if comparison is not None and comparison.fell and not update_baseline:
        fell = "\n".join("  " + f.line() for f in comparison.fell)
        print(f"ratios that fell below the baseline's tolerance:\n{fell}", file=sys.stderr)
        status = EXIT_REGRESSION
    return status, path


# ------------------------------------------------------------------------------------------------ CLI


def _runner_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results-dir", type=Path, help="where result files go (default: benchmarks/results, or "
                                                     "$RLRUN_BENCH_RESULTS)")
    p.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE, help="the baseline file")
    p.add_argument("--no-compare", action="store_true", help="do not compare with the baseline")
    p.add_argument("--update-baseline", action="store_true",
                   help="rewrite the baseline with this run's ratios (keeps each figure's tolerance)")
    p.add_argument("--mlflow-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else "
                                        "sqlite:///<results>/mlflow.db)")
    p.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    p.add_argument("--no-tensorboard", action="store_true", help="do not write TensorBoard event files")
    p.add_argument("--timeout", type=float, help="seconds per benchmark before it is stopped (default: its own)")
    p.add_argument("--no-retry", action="store_true",
                   help="fail at the first fall (default: a benchmark whose ratio fell runs once more to confirm)")


def _list(suite: tuple[Benchmark, ...]) -> int:
    for b in suite:
        reasons = b.unavailable()
        where = "CI: " + " ".join(b.ci_args) if b.ci_args is not None else "not in CI"
        state = "unavailable: " + "; ".join(reasons) if reasons else "available"
        print(f"{b.name:20s} {state}\n{'':20s} {b.summary}\n{'':20s} {where}\n")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> None:
    try:
        _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # rlrun-bench list | head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        print("rlrun-bench: interrupted", file=sys.stderr)
        sys.exit(130)


def _main(argv: list[str]) -> None:
    suite = SUITE
    names = by_name(suite)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(EXIT_OK if argv else EXIT_USAGE)
    command, rest = argv[0], argv[1:]
    invocation = "rlrun-bench " + " ".join(map(shlex.quote, argv))
    if command == "list":
        sys.exit(_list(suite))
    if command == "reproduce":  # hours of ordinary rlrun runs (sweeps), not a timed benchmark: its own CLI
        from benchmarks.reproduce import main as reproduce

        sys.exit(reproduce(rest))
    if command == "offline":  # offline runs on rlrun-made datasets, a D4RL-style table: its own CLI
        from benchmarks.offline_table import main as offline

        sys.exit(offline(rest))
    if command == "gpu":  # the GPU kit (benchmarks/gpu): stages with their own budgets and output folder
        from benchmarks.gpu.kit import main as kit

        sys.exit(kit(rest))
    if command == "compare":
        p = argparse.ArgumentParser(prog="rlrun-bench compare")
        p.add_argument("result", type=Path)
        p.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE)
        a = p.parse_args(rest)
        comparison = bl.compare(read_records(a.result), bl.load_baseline(a.baseline))
        for f in comparison.fell:
            print("FELL   " + f.line())
        for f in comparison.passed:
            print("ok     " + f.line())
        for f in comparison.missing:
            print("missing " + f.line())
        sys.exit(EXIT_OK if comparison.ok else EXIT_REGRESSION)
    if command == "plot":
        p = argparse.ArgumentParser(prog="rlrun-bench plot")
        p.add_argument("--results-dir", type=Path)
        p.add_argument("--out", type=Path, help="default: <results>/plots")
        a = p.parse_args(rest)
        from benchmarks.plots import plot_all

        folder = a.results_dir or results_dir()
        for path in plot_all(folder, a.out or folder / "plots"):
            print(f"wrote {path}")
        sys.exit(EXIT_OK)
    if command == "readme":
        p = argparse.ArgumentParser(prog="rlrun-bench readme")
        p.add_argument("--result", type=Path, help="a suite file (default: the newest in the results folder)")
        p.add_argument("--results-dir", type=Path)
        p.add_argument("--readme", "--page", dest="readme", type=Path,
                       default=ROOT / "docs" / "results" / "performance.md",
                       help="the page with the perf markers (default: the docs site's Performance page)")
        a = p.parse_args(rest)
        result = a.result
        if result is None:
            files = suite_files(a.results_dir or results_dir())
            ci_files = [f for f in files if json.loads(f.read_text()).get("suite") == "ci"]
            if not (ci_files or files):
                print("rlrun-bench: error: no suite result file yet; run rlrun-bench ci first", file=sys.stderr)
                sys.exit(EXIT_USAGE)
            result = (ci_files or files)[-1]
        changed = update_readme(a.readme, result, suite, ROOT)
        print(f"{'updated' if changed else 'unchanged'}: {a.readme} (from {result})")
        sys.exit(EXIT_OK)
    if command in ("ci", "all", "run") or command in names:
        p = argparse.ArgumentParser(prog=f"rlrun-bench {command}")
        _runner_options(p)
        if command == "ci":
            p.add_argument("--only", help="comma-separated subset of the CI set")
        if command == "run":
            p.add_argument("name", choices=sorted(names))
        a, module_args = p.parse_known_args(rest)
        if command == "ci":
            jobs = [(b, list(b.ci_args or ())) for b in ci_set(suite)]
            if a.only:
                wanted = set(a.only.split(","))
                unknown = wanted - {b.name for b, _ in jobs}
                if unknown:
                    p.error(f"not in the CI set: {', '.join(sorted(unknown))}")
                jobs = [(b, args) for b, args in jobs if b.name in wanted]
            if module_args:
                p.error(f"unrecognized arguments: {' '.join(module_args)}")
        elif command == "all":
            jobs = [(b, list(b.full_args)) for b in suite]
        else:
            name = a.name if command == "run" else command
            jobs = [(names[name], module_args or list(names[name].full_args))]
        label = "ci" if command == "ci" else ("all" if command == "all" else jobs[0][0].name)
        code, _ = run_suite(jobs, label, invocation, results=a.results_dir or results_dir(),
                            baseline_path=a.baseline, compare=not a.no_compare, update_baseline=a.update_baseline,
                            tensorboard=not a.no_tensorboard, mlflow=not a.no_mlflow, mlflow_uri=a.mlflow_uri,
                            timeout_s=a.timeout, retry=not a.no_retry)
        sys.exit(code)
    print(f"rlrun-bench: error: unknown command or benchmark '{command}'. Commands: list, ci, all, compare, plot, gpu, "
          f"readme; benchmarks: {', '.join(names)}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


if __name__ == "__main__":
    main()
