"""Sweeps (``rlrun -m key=a,b seed=0,1,2``): one MLflow parent run per sweep with a child run per job, a
manifest with a status file per job (so an interrupted sweep resumes, skipping its completed jobs), failures
reported as they happen, and a summary table at the end.

Two ideas are kept apart: the *launcher* (``hydra/launcher=basic|joblib``) fans the jobs of a sweep out, one after
another in this process or in parallel worker processes; the *executor* (``executor=local|...``) runs one job.

The sweep directory (``hydra.sweep.dir``, printed at the start) holds, beside Hydra's job directories:

- ``sweep.json``: the manifest: the MLflow parent run (id, tracking URI, experiment), how many times the sweep
  was started (``invocation``), and each start's overrides, launcher and sweeper;
- ``jobs/<key>.json``: one status file per job, keyed by a hash of the job's overrides (``sweep.*`` excluded):
  ``status`` (pending | running | completed | failed | interrupted; ``previous_status``: how the last attempt
  ended, for a pending job run before), ``num``, ``overrides``, ``group`` (the
  overrides less the seed), ``run_dir``, ``mlflow_run_id``, the final figures (``episode_return_mean``,
  ``frames_per_second``, ``env_steps``, ``wall_time_s``, ``stop_reason``) and ``error`` for a failed job;
- ``sweep_summary.md`` / ``sweep_summary.json``: the tables printed at the end: one row per job, then one per
  configuration (``configurations``: the IQM and mean of the final return over its seeds, with 95%
  stratified-bootstrap intervals).

How the parent run id reaches the jobs, in this process or a joblib worker: the callback creates the parent run
before any job starts and writes its id into ``sweep.json``; each job reads it there and sets
``logger.mlflow.parent_run_id`` (and tags) in its own config, so the MLflow sink links the child explicitly
(tag ``mlflow.parentRunId``). Nothing goes through environment variables or MLflow's fluent API.

Resume: ``rlrun -m <the same overrides> sweep.resume=<sweep dir>`` runs the same sweep in the same directory;
completed jobs are skipped (their results stay); a job stopped from outside after a checkpoint (interrupted, or
``running`` when the process was killed) continues from it, as ``rlrun resume=<its run dir>`` would; the others
(pending, failed, stopped before a checkpoint) run again from the start, the previous attempt's ``tensorboard/``,
``summary.json`` and ``checkpoints/`` renamed ``*.attempt-N``. A sweep directory that already has a manifest is
refused without ``sweep.resume``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from rlrun.errors import ConfigError, RlrunError
from rlrun.metric_names import SWEEP_BEST_RETURN_MEAN, SWEEP_JOBS, SWEEP_JOBS_BY_STATUS
from rlrun.redact import redact_file, redact_strings, redact_text, redact_uri
from rlrun.reporting import describe_error, report_and_exit, tracebacks_requested

# Imports inside functions: MLflow (seconds to import) only where a sweep talks to its tracking store.

MANIFEST = "sweep.json"
JOBS_DIR = "jobs"
SUMMARY_MD = "sweep_summary.md"
SUMMARY_JSON = "sweep_summary.json"
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
FIGURES = ("episode_return_mean", "frames_per_second", "env_steps", "wall_time_s", "stop_reason", "mlflow_run_id")

# ---------------------------------------------------------------- the sweep directory


def register_resolvers() -> None:
    """``${rlrun.sweep_dir:${sweep.resume},default}``: the sweep directory to resume, else the default one."""
    if not OmegaConf.has_resolver("rlrun.sweep_dir"):
        OmegaConf.register_new_resolver("rlrun.sweep_dir",
                                        lambda resume, default: default if resume in (None, "") else str(resume))


register_resolvers()  # at import too: a joblib worker resolves hydra.sweep.dir after unpickling this module


def identity(overrides: list[str]) -> list[str]:
    """The overrides that make a job what it is: all but ``sweep.*`` (how the sweep is run, not what it runs)."""
    return [o for o in overrides if not _key(o).startswith("sweep.")]


def group_of(overrides: list[str]) -> str:
    """The job's overrides less the seed: runs that differ only by seed share it (MLflow tag ``rlrun.group``)."""
    rest = [o for o in identity(overrides) if _key(o) != "seed"]
    return " ".join(sorted(rest)) or "(defaults)"


def job_key(overrides: list[str]) -> str:
    return hashlib.sha1("\n".join(sorted(identity(overrides))).encode()).hexdigest()[:12]


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomic (temp file + rename): a reader never sees half a file, a crash never leaves one. URIs in it are
    written without credentials (overrides may hold logger.mlflow.tracking_uri=...)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(redact_strings(data), indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def read_jobs(sweep_dir: Path) -> list[dict[str, Any]]:
    """Every job status file of a sweep directory, by job number."""
    jobs = [j for p in sorted((Path(sweep_dir) / JOBS_DIR).glob("*.json")) if (j := read_json(p)) is not None]
    return sorted(jobs, key=lambda j: (j.get("num") is None, j.get("num") or 0))


# ---------------------------------------------------------------- the Hydra callback (the launching process)


class SweepCallback(Callback):
    """Hydra callback (conf/config.yaml, ``hydra.callbacks.sweep``): opens the sweep (manifest, MLflow parent run,
    pending jobs) before any job starts and closes it (summary table, parent run status) after the last."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        resume = OmegaConf.select(config, "sweep.resume", default=None)
        if resume:
            _report(_config_error(f"sweep.resume={resume}: resuming a sweep needs -m (multirun) and the sweep's "
                                  f"overrides: rlrun -m <same overrides> sweep.resume={resume}"))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        import logging

        from rlrun.app.startup_gc import resume_collection

        resume_collection()  # a sweep's driver collects as usual (rlrun/app/startup_gc.py)

        logging.getLogger("alembic").setLevel(logging.WARNING)  # Optuna's import logs alembic's plugin set-up
        try:
            pin_sweep_dir(config)
            start_sweep(config)
        except RlrunError as e:
            _report(e)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        # Failed jobs were each reported when they failed and in the summary table; the command's exit code says
        # so. SystemExit (not an Exception, which Hydra would turn into a warning) ends `rlrun -m` with it.
        code = end_sweep(config)
        if code:
            raise SystemExit(code)


def _config_error(message: str) -> Exception:
    return ConfigError(message)


def _report(e: BaseException) -> None:
    """Hydra turns an Exception raised by a callback into a warning: end here with rlrun's one-line message."""
    if tracebacks_requested():
        raise SystemExit(getattr(e, "exit_code", 1)) from e
    report_and_exit(e)


def pin_sweep_dir(config: DictConfig) -> Path:
    """Make ``hydra.sweep.dir`` absolute, here in the process that starts the sweep, for every job.

    A launcher composes each job's config from ``hydra.overrides.hydra`` plus the job's own overrides, and a job
    resolves its output directory where it runs: a Ray-launched job on a node whose worker processes started
    elsewhere (``ray start`` run from another directory) would write a relative ``multirun/...`` under *that*
    directory, out of the sweep manifest's sight. An absolute override in ``hydra.overrides.hydra`` reaches every
    launcher's jobs (the default's ``${now:...}`` is resolved once, here).
    """
    from omegaconf import read_write

    sweep_dir = Path(str(config.hydra.sweep.dir)).expanduser().absolute()
    quoted = "'" + str(sweep_dir).replace("'", "\\'") + "'"  # Hydra's quoted string: any path character
    with read_write(config.hydra):
        config.hydra.sweep.dir = str(sweep_dir)
        kept = [o for o in config.hydra.overrides.hydra if not str(o).startswith("hydra.sweep.dir=")]
        config.hydra.overrides.hydra = [*kept, f"hydra.sweep.dir={quoted}"]
    return sweep_dir


def start_sweep(config: DictConfig) -> dict[str, Any]:
    """Check the sweep directory, write the manifest (with the MLflow parent run) and the pending jobs."""
    sweep_dir = Path(str(config.hydra.sweep.dir))
    resume = OmegaConf.select(config, "sweep.resume", default=None)
    path = sweep_dir / MANIFEST
    if resume:
        if Path(str(resume)).resolve() != sweep_dir.resolve():
            raise _config_error(f"sweep.resume={resume} but hydra.sweep.dir={sweep_dir}: give only sweep.resume "
                                f"(it sets the sweep directory).")
        manifest = read_json(path)
        if manifest is None:
            raise _config_error(f"sweep.resume={resume}: no sweep to resume there (no {MANIFEST}). Give the sweep "
                                f"directory that rlrun -m printed when the sweep started.")
    elif path.exists():
        raise _config_error(f"hydra.sweep.dir={sweep_dir} already holds a sweep ({MANIFEST}). To resume it, "
                            f"skipping its completed jobs: rlrun -m <same overrides> sweep.resume={sweep_dir}; "
                            f"to start a new sweep, choose another hydra.sweep.dir.")
    else:
        manifest = {"sweep_dir": str(sweep_dir.resolve()), "created": _now(), "invocation": 0, "invocations": [],
                    "mlflow": None}
    task_overrides = [str(o) for o in config.hydra.overrides.task]
    manifest["invocation"] += 1
    manifest["invocations"].append({
        "started": _now(), "overrides": identity(task_overrides),
        "launcher": OmegaConf.select(config, "hydra.launcher._target_", default=None),
        "sweeper": OmegaConf.select(config, "hydra.sweeper._target_", default=None)})
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if OmegaConf.select(config, "logger.mlflow.enabled", default=False):
        manifest["mlflow"] = _open_parent_run(config, sweep_dir, task_overrides, (manifest.get("mlflow") or {}))
    write_json(path, manifest)
    planned = _planned_jobs(config)
    done = 0
    for num, overrides in enumerate(planned or []):
        job_path = sweep_dir / JOBS_DIR / f"{job_key(overrides)}.json"
        job = read_json(job_path) or {"key": job_key(overrides), "attempts": 0}
        if job.get("status") == "completed":
            done += 1
        else:
            if job.get("status") not in (None, "pending"):  # how its last attempt ended: run_job reads it
                job["previous_status"] = job["status"]
            job["status"] = "pending"
        job.update(num=num, overrides=identity(overrides), group=group_of(overrides),
                   invocation=manifest["invocation"])
        write_json(job_path, job)
    count = f"{len(planned)} jobs" if planned is not None else "jobs chosen by the sweeper"
    skipped = f", {done} completed before and skipped" if resume else ""
    parent = (manifest.get("mlflow") or {}).get("parent_run_id")
    linked = f"; MLflow parent run {parent}" if parent else ""
    print(f"rlrun: sweep {sweep_dir}: {count}{skipped}{linked}", flush=True)
    return manifest


def with_swept_values(config: DictConfig) -> DictConfig:
    """The sweep's config with each swept key that is mandatory there (``???``) set to the sweep's first value.

    Hydra composes a multirun's own config without its sweep overrides, so a mandatory key given only as a sweep
    (``env=atari env.game=Pong,Breakout``) is missing there; the check before any job starts sees it as every job
    will. Interval sweeps (Optuna) give their lower end. Returns a copy; config groups swept (``algo=ppo,dqn``) are
    left as composed, each job checks its own.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep

    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    arguments = [f"{k}={v}" for k, v in params.items()] + [str(o) for o in config.hydra.overrides.task]
    try:
        overrides = OverridesParser.create().parse_overrides(arguments)
    except Exception:  # noqa: BLE001 - Hydra reports a bad override itself
        return config
    filled = config.copy()
    for override in overrides:
        if not override.is_sweep_override():
            continue
        key = override.key_or_group
        parent_key, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(filled, parent_key, throw_on_missing=False) if parent_key else filled
        # (``leaf in parent`` is False for a missing value: OmegaConf counts only set keys)
        if not isinstance(parent, DictConfig) or leaf not in parent.keys() or not OmegaConf.is_missing(parent, leaf):
            continue
        value = override.value()
        first = value.start if isinstance(value, IntervalSweep) else next(iter(override.sweep_iterator()), None)
        if first is not None:
            OmegaConf.update(filled, key, first, force_add=True)
    return filled


def _planned_jobs(config: DictConfig) -> list[list[str]] | None:
    """The overrides of every job, in launch order, as Hydra's basic sweeper will make them; None for another
    sweeper (Optuna chooses its trials as it goes)."""
    if OmegaConf.select(config, "hydra.sweeper._target_", default=None) != BASIC_SWEEPER:
        return None
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    arguments = [f"{k}={v}" for k, v in params.items()] + [str(o) for o in config.hydra.overrides.task]
    try:
        batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(arguments), None)
    except Exception:  # noqa: BLE001 - e.g. a glob over a config group: jobs appear as they start instead
        return None
    return [job for batch in batches for job in batch]


def _open_parent_run(config: DictConfig, sweep_dir: Path, overrides: list[str], previous: dict[str, Any]
                     ) -> dict[str, Any]:
    """Create the sweep's MLflow parent run (or reopen it on resume); on failure warn and go on without one."""
    from rlrun.fingerprint import fingerprint_tags
    from rlrun.logging.fanout import warn
    from rlrun.logging.mlflow_sink import connect, default_tracking_uri

    mcfg = config.logger.mlflow
    uri = mcfg.tracking_uri or default_tracking_uri()
    # sweep.json is recorded (without credentials) and may come from elsewhere: its parent run id is reopened only
    # in the store it was made in, never in another that happens to hold a run of that id.
    same_store = redact_uri(previous.get("tracking_uri")) == redact_uri(uri)
    info = {"tracking_uri": redact_uri(uri), "experiment": str(mcfg.experiment),
            "parent_run_id": previous.get("parent_run_id") if same_store else None, "error": None}
    try:
        client, experiment_id = connect(uri, str(mcfg.experiment), float(mcfg.probe_timeout_s))
        if info["parent_run_id"]:
            client.update_run(info["parent_run_id"], status="RUNNING")
            # Child runs of killed jobs were never closed: mark them so (their jobs run again as new children).
            stale = client.search_runs([experiment_id], filter_string=f"tags.mlflow.parentRunId = "
                                       f"'{info['parent_run_id']}' and attributes.status = 'RUNNING'")
            for run in stale:
                client.set_terminated(run.info.run_id, status="KILLED")
        else:
            tags = {"rlrun.kind": "sweep", "rlrun.sweep_dir": str(sweep_dir.resolve()),
                    "rlrun.sweep_overrides": redact_text(" ".join(identity(overrides)))[:5000], **fingerprint_tags()}
            name = f"sweep {sweep_dir.parent.name}/{sweep_dir.name}"
            info["parent_run_id"] = client.create_run(experiment_id, run_name=name, tags=tags).info.run_id
    except Exception as e:  # noqa: BLE001 - MLflow never stops a sweep
        info.update(parent_run_id=None, error=redact_text(str(e)))
        warn(f"MLflow: {e}. The sweep goes on without a parent run; each job logs to MLflow on its own (or to its "
             f"run directory's fallback store).")
    return info


def end_sweep(config: DictConfig) -> int:
    """Print and write the summary table, close the parent run; return the sweep's exit code."""
    sweep_dir = Path(str(config.hydra.sweep.dir))
    manifest = read_json(sweep_dir / MANIFEST) or {}
    invocation = manifest.get("invocation")
    jobs = [j for j in read_jobs(sweep_dir) if j.get("invocation") == invocation]
    configs = configurations(jobs)
    table = summary_table(jobs) + "\n\n" + configuration_table(configs)
    counts = {s: sum(j.get("status") == s for j in jobs)
              for s in ("completed", "failed", "interrupted", "running", "pending")}
    write_json(sweep_dir / SUMMARY_JSON, {"sweep_dir": str(sweep_dir.resolve()), "invocation": invocation,
                                          "counts": counts, "jobs": jobs, "configurations": configs})
    table = redact_text(table)
    (sweep_dir / SUMMARY_MD).write_text(f"# Sweep {sweep_dir}\n\n{table}\n")
    redact_file(sweep_dir / "multirun.yaml")  # Hydra's copy of the command line
    print(f"\nrlrun: sweep {sweep_dir}: {counts['completed']} of {len(jobs)} jobs completed\n{table}", flush=True)
    unfinished = [j for j in jobs if j.get("status") != "completed"]
    if unfinished:
        names = ", ".join(f"job {j.get('num')} ({j.get('status')})" for j in unfinished)
        print(f"rlrun: {len(unfinished)} of {len(jobs)} jobs did not complete: {names}. Run them again with: "
              f"rlrun -m <same overrides> sweep.resume={sweep_dir}", file=sys.stderr, flush=True)
    _close_parent_run(manifest, sweep_dir, counts, jobs, config)
    if not unfinished:
        return 0
    return max((int(j.get("exit_code") or 1) for j in unfinished), default=1)


def _close_parent_run(manifest: dict[str, Any], sweep_dir: Path, counts: dict[str, int],
                      jobs: list[dict[str, Any]], config: DictConfig) -> None:
    info = manifest.get("mlflow") or {}
    if not info.get("parent_run_id"):
        return
    from mlflow.entities import Metric

    from rlrun.logging.fanout import warn
    from rlrun.logging.mlflow_sink import connect, default_tracking_uri

    # The store this sweep opened the parent run in: the config's (sweep.json holds it without credentials).
    uri = OmegaConf.select(config, "logger.mlflow.tracking_uri", default=None) or default_tracking_uri()
    try:
        client, _ = connect(uri, info["experiment"])
        run_id = info["parent_run_id"]
        now_ms = int(dt.datetime.now().timestamp() * 1000)
        returns = [j["episode_return_mean"] for j in jobs if j.get("episode_return_mean") is not None]
        metrics = {SWEEP_JOBS: len(jobs), **{SWEEP_JOBS_BY_STATUS[k]: v for k, v in counts.items()}}
        if returns:
            metrics[SWEEP_BEST_RETURN_MEAN] = max(returns)
        client.log_batch(run_id, metrics=[Metric(k, float(v), now_ms, int(manifest.get("invocation") or 0))
                                          for k, v in metrics.items()])
        for name in (MANIFEST, SUMMARY_MD, SUMMARY_JSON):
            client.log_artifact(run_id, str(sweep_dir / name))
        client.set_terminated(run_id, status="FINISHED" if counts["completed"] == len(jobs) else "FAILED")
    except Exception as e:  # noqa: BLE001
        warn(f"MLflow: could not close the sweep's parent run: {e}")


def configurations(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration (the jobs' ``group``: overrides less the seed), over its completed seeds: the IQM and mean
    of the final ``episode_return_mean`` with 95% stratified-bootstrap intervals (``rlrun/evaluation_stats.py``,
    seeded: the same sweep gives the same intervals), and the seed count."""
    from rlrun import evaluation_stats as es

    groups: dict[str, list[float]] = {}
    for j in jobs:
        groups.setdefault(j.get("group") or "(defaults)", [])
        if j.get("status") == "completed" and j.get("episode_return_mean") is not None:
            groups[j.get("group") or "(defaults)"].append(float(j["episode_return_mean"]))
    out = []
    for group, returns in groups.items():
        row: dict[str, Any] = {"group": group, "seeds": len(returns), "iqm": None, "mean": None}
        if returns:
            row["iqm"] = es.bootstrap_ci([returns], es.iqm).as_dict()  # one task: the configuration's env
            row["mean"] = es.bootstrap_ci([returns], es.mean).as_dict()
        out.append(row)
    return out


def configuration_table(rows: list[dict[str, Any]]) -> str:
    """A markdown table of :func:`configurations`, each named by the overrides that set it apart from the others
    (those all share are said once under it), and a line where a configuration has under ``FEW_SEEDS`` seeds: its
    interval is wide, and one seed has none."""
    from rlrun.evaluation_stats import FEW_SEEDS

    def interval(row: dict[str, Any], key: str) -> str:
        d = row[key]
        if d is None:
            return "-"
        if row["seeds"] == 1:
            return f"{d['value']:.2f} (one seed)"
        return f"{d['value']:.2f} [{d['low']:.2f}, {d['high']:.2f}]"

    words = [r["group"].split(" ") for r in rows]
    shared = set.intersection(*(set(w) for w in words)) if len(rows) > 1 else set()
    lines = ["| configuration | seeds | return IQM [95% CI] | return mean [95% CI] |",
             "| --- | ---: | ---: | ---: |"]
    for r, w in zip(rows, words, strict=True):
        name = " ".join(x for x in w if x not in shared) or r["group"]
        lines.append(f"| {name} | {r['seeds']} | {interval(r, 'iqm')} | {interval(r, 'mean')} |")
    if shared:
        lines.append(f"\nEvery configuration: {' '.join(sorted(shared))}.")
    few = [r for r in rows if 0 < r["seeds"] < FEW_SEEDS]
    if few:
        lines.append(f"\nUnder {FEW_SEEDS} seeds ({', '.join(str(r['seeds']) for r in few)} here) an interval is wide "
                     f"and one seed gives none: add seeds (seed=0,1,2,3,4) before reading a difference into it.")
    return "\n".join(lines)


def summary_table(jobs: list[dict[str, Any]]) -> str:
    """A markdown table: job, overrides, status, final return, frames/s, wall time."""

    def fmt(value: Any, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    lines = ["| job | overrides | status | return (mean) | frames/s | wall s |",
             "| ---: | --- | --- | ---: | ---: | ---: |"]
    for j in jobs:
        status = j.get("status", "?")
        if status == "failed" and j.get("error"):
            status += ": " + j["error"].splitlines()[0][:80]
        lines.append(f"| {j.get('num', '?')} | {' '.join(j.get('overrides') or []) or '(defaults)'} | {status} | "
                     f"{fmt(j.get('episode_return_mean'), '.2f')} | {fmt(j.get('frames_per_second'), '.0f')} | "
                     f"{fmt(j.get('wall_time_s'), '.1f')} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- one job (in the launching process or a worker)


def run_job(cfg: DictConfig, run: Callable[[DictConfig], dict[str, Any]]) -> float | None:
    """Run one job of a sweep with ``run(cfg) -> summary`` and keep its status file; return the objective
    (``episode_return_mean``) for sweepers that optimise (Optuna); None when the job failed or ended before any
    episode did. Not NaN: hydra-optuna-sweeper 1.3.0 tells Optuna a NaN as a completed value, Optuna refuses it, and
    the sweeper's own recovery then fails ("Values cannot be specified when state is TrialState.FAIL"), ending the
    whole search; a None is not float-castable, which the sweeper records as a failed trial and goes on.

    A completed job is skipped; a failing job is reported at once on stderr and the sweep goes on.
    """
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    sweep_dir = Path(str(hc.sweep.dir))
    redact_file(sweep_dir / "multirun.yaml")  # Hydra's copy of the command line, written before the jobs start
    overrides = [str(o) for o in hc.overrides.task]
    num = int(hc.job.num)
    run_dir = Path(str(hc.runtime.output_dir))
    manifest = read_json(sweep_dir / MANIFEST) or {}  # absent when hydra.callbacks.sweep was removed
    path = sweep_dir / JOBS_DIR / f"{job_key(overrides)}.json"
    job = read_json(path) or {"key": job_key(overrides), "attempts": 0}
    label = f"job {num} ({' '.join(identity(overrides)) or 'defaults'})"
    if job.get("status") == "completed":
        job.update(invocation=manifest.get("invocation"), num=num)
        write_json(path, job)
        print(f"rlrun: {label}: completed in an earlier attempt ({job.get('run_dir')}), skipped", flush=True)
        return _objective(job)
    attempt = int(job.get("attempts") or 0) + 1
    # Stopped from outside (Ctrl-C, a killed process) after a checkpoint: continue from it, as rlrun resume=<run
    # dir> does. A failed job starts again: its own state may be what failed.
    ended = job.get("previous_status") if job.get("status") == "pending" else job.get("status")  # the last attempt
    resumed = ended in ("interrupted", "running") and _has_checkpoint(run_dir)
    if resumed:
        cfg.resume = str(run_dir.resolve())
    elif attempt > 1:
        _set_aside(run_dir, attempt - 1)
    job.update(num=num, overrides=identity(overrides), group=group_of(overrides), status="running",
               run_dir=str(run_dir.resolve()), pid=os.getpid(), started=_now(), ended=None, error=None,
               exit_code=None, invocation=manifest.get("invocation"), attempts=attempt,
               **{k: None for k in FIGURES})
    write_json(path, job)
    if resumed:
        print(f"rlrun: {label}: continuing attempt {attempt - 1} from its checkpoint ({run_dir})", flush=True)
    _link_to_parent(cfg, manifest, overrides, num, sweep_dir)
    try:
        summary = run(cfg)
    except KeyboardInterrupt:
        job.update(status="interrupted", ended=_now())
        write_json(path, job)
        print(f"rlrun: {label} interrupted. Resume the sweep with: rlrun -m <same overrides> "
              f"sweep.resume={sweep_dir}", file=sys.stderr, flush=True)
        raise
    except Exception as e:  # noqa: BLE001 - one failing job never stops the others
        if tracebacks_requested():
            import traceback

            traceback.print_exc()
        message, code = describe_error(e)
        if code == 1 and message.startswith("Traceback"):  # unexpected: the traceback on stderr, its gist kept
            short = f"{type(e).__name__}: {' '.join(str(e).split())}"
        else:
            short = message
        job.update(status="failed", ended=_now(), error=short, exit_code=code)
        write_json(path, job)
        print(f"rlrun: {label} failed: {message}", file=sys.stderr, flush=True)
        return None
    job.update(status="completed", ended=_now(), **{k: summary.get(k) for k in FIGURES})
    write_json(path, job)
    return _objective(job)


def _objective(job: dict[str, Any]) -> float | None:
    value = job.get("episode_return_mean")
    return None if value is None else float(value)


def _has_checkpoint(run_dir: Path) -> bool:
    from rlrun.checkpoint import checkpoint_path

    return checkpoint_path(run_dir).is_file()


def _set_aside(run_dir: Path, attempt: int) -> None:
    """Keep a previous attempt's TensorBoard log, summary and checkpoints out of the new attempt's way (out of plots,
    and out of a later resume of the new attempt)."""
    for name, new in (("tensorboard", f"tensorboard.attempt-{attempt}"),
                      ("summary.json", f"summary.attempt-{attempt}.json"),
                      ("checkpoints", f"checkpoints.attempt-{attempt}")):
        if (run_dir / name).exists():
            os.replace(run_dir / name, run_dir / new)


def _link_to_parent(cfg: DictConfig, manifest: dict[str, Any], overrides: list[str], num: int,
                    sweep_dir: Path) -> None:
    """Put the parent run id and the sweep's tags into this job's own config (``logger.mlflow.*``)."""
    mcfg = OmegaConf.select(cfg, "logger.mlflow", default=None)
    if mcfg is None:
        return
    info = manifest.get("mlflow") or {}
    if info.get("parent_run_id") and mcfg.parent_run_id is None:
        mcfg.parent_run_id = info["parent_run_id"]
        if mcfg.tracking_uri is None:
            mcfg.tracking_uri = info["tracking_uri"]
    tags = {"rlrun.sweep_dir": str(sweep_dir.resolve()), "rlrun.job_num": str(num),
            "rlrun.group": group_of(overrides), "rlrun.overrides": " ".join(identity(overrides))[:5000]}
    mcfg.tags = {**tags, **OmegaConf.to_container(mcfg.tags)}
