"""The ``rlrun`` command: compose the config with Hydra, validate it, run the experiment.

Configuration mistakes (a wrong type, an unknown key or option, an impossible combination) end with one short
message on stderr and exit code 2, before anything starts; ``hydra.verbose=true`` (or HYDRA_FULL_ERROR=1) shows
the traceback instead.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Sequence

from rlrun.redact import redact_log_records
from rlrun.reporting import report_and_exit, request_tracebacks, tracebacks_requested, wants_traceback

# Imports inside functions: start-up cost. `rlrun --help` and a config error must answer without importing torch,
# Ray or MLflow; each subcommand imports what it needs (`rlrun graph` the component library, a run the whole stack).


def main(argv: Sequence[str] | None = None) -> None:
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    redact_log_records()  # no URI credentials in any log line (Hydra logs each job's overrides)
    verbose = wants_traceback(sys.argv[1:])
    request_tracebacks(verbose)  # read by sweep jobs too, in this process or a launcher's worker
    # Hydra prints its own error text and exits 1; with HYDRA_FULL_ERROR it raises, and we report instead.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    # conf/hydra/launcher/ray.yaml replaces hydra-ray-launcher's option of the same name on purpose (a safe default
    # address), and Hydra warns at every job that the file is checked against the plugin's schema of that name.
    warnings.filterwarnings("ignore", message=r"(?s).*'hydra/launcher/ray' is validated against ConfigStore schema")
    try:
        if sys.argv[1:2] == ["graph"]:
            from rlrun.app.graph import main as graph_main

            graph_main(sys.argv[2:])
            return
        if sys.argv[1:2] == ["eval"]:
            from rlrun.app.evaluate import main as eval_main

            eval_main(sys.argv[2:])
            return
        if sys.argv[1:2] == ["collect"]:
            from rlrun.app.collect import main as collect_main

            collect_main(sys.argv[2:])
            return
        if sys.argv[1:2] == ["ui"]:
            from rlrun.app.ui import main as ui_main

            ui_main(sys.argv[2:])
            return
        if sys.argv[1:2] == ["keys"]:
            from rlrun.app.config_reference import main as keys_main

            keys_main(sys.argv[2:])
            return
        if sys.argv[1:2] == ["compare"]:
            from rlrun.app.compare import main as compare_main

            compare_main(sys.argv[2:])
            return
        if sys.argv[1:2] == ["export"]:
            from rlrun.export import main as export_main

            export_main(sys.argv[2:])
            return
        if any(a.split("=", 1)[0].lstrip("+") == "resume" for a in sys.argv[1:]):
            from rlrun.checkpoint import prepare_resume_argv

            # Reads and checks the checkpoint before Hydra starts; points Hydra at the saved run directory.
            sys.argv = [sys.argv[0], *prepare_resume_argv(sys.argv[1:])]
        if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
            _help()
            return
        from rlrun.app.startup_gc import pause_collection, resume_collection

        pause_collection()  # until the run is built (run_experiment) or a sweep starts: rlrun/app/startup_gc.py
        try:
            _hydra_entry()
        finally:
            resume_collection()  # where neither did (--cfg job, a config error, a caller's in-process main())
    except SystemExit:
        raise
    except BrokenPipeError:
        # The reader went away (rlrun --help | head): stop quietly, as the Python docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:
        print("rlrun: interrupted", file=sys.stderr)
        sys.exit(130)
    except BaseException as e:  # noqa: BLE001 - every error is reported once, here
        if verbose:
            raise
        report_and_exit(e)


INTERNAL_GROUPS = ("schema/", "algo_env/")  # groups rlrun composes for the user (typed schemas, presets' parts)
# Groups listed apart from the ones a user chooses an option of: the presets are applied for the chosen algo and env,
# and a search is chosen only for a sweep.
SET_APART = {
    "algo_env": "== Presets: applied for the algo and env you choose (algo_env/<algo>_<env>; ~algo_env: none) ==",
    "hparams_search": "== Optional: a hyperparameter search, for rlrun -m (none by default) ==",
}


def _help() -> None:
    """Hydra's help with only the groups a user chooses: the ``schema/*`` groups (each option's typed schema) and the
    presets' sub-groups are composition internals, applied automatically."""
    import contextlib
    import io

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            _hydra_entry()
    finally:
        lines = [ln for ln in out.getvalue().splitlines() if not ln.startswith(INTERNAL_GROUPS)]
        apart = [(SET_APART[ln.split(":")[0]], ln) for ln in lines if ln.split(":")[0] in SET_APART]
        lines = [ln for ln in lines if ln.split(":")[0] not in SET_APART]
        end = next((i for i, ln in enumerate(lines) if ln.startswith("More:")), len(lines))
        extra = [part for heading, ln in apart for part in (heading, ln, "")]
        print("\n".join(lines[:end] + extra + lines[end:]))


def _hydra_entry() -> None:
    import hydra

    from rlrun import hydra_search_path
    from rlrun.config import register_schemas

    register_schemas()
    hydra_search_path.register()
    from rlrun.app import sweep

    sweep.register_resolvers()  # ${rlrun.sweep_dir:...} in hydra.sweep.dir (sweep.resume)

    @hydra.main(version_base="1.3", config_path="pkg://rlrun.conf", config_name="config")
    def _task(cfg):  # type: ignore[no-untyped-def]
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        from rlrun.app.run import run_experiment
        from rlrun.config import validate
        from rlrun.errors import RlrunError
        from rlrun.registry import RegistryError

        hydra_cfg = HydraConfig.get()
        if hydra_cfg.mode == RunMode.MULTIRUN:
            # One job of a sweep: a failure is reported and recorded, and the sweep goes on (rlrun/app/sweep.py).
            # Its own values are validated here (the sweep's start checked one combination).
            return sweep.run_job(cfg, lambda c: run_experiment(validate(c), hydra_cfg.runtime.output_dir))
        try:  # validated by ValidateConfig, before the run directory was made
            return run_experiment(cfg, hydra_cfg.runtime.output_dir)
        except (RlrunError, RegistryError) as e:
            # Reported here: Hydra would add its own "Error executing job" line to the message.
            if tracebacks_requested():
                raise
            report_and_exit(e)

    _task()  # a sweep with failed jobs ends in its on_multirun_end callback, with the sweep's exit code


def check_writable(key: str, folder: str) -> None:
    """The output folder Hydra is about to make (``hydra.run.dir`` or, for a sweep, ``hydra.sweep.dir``) can be made
    and written: else a ConfigError naming it, before anything runs (instead of a traceback from Hydra's mkdir)."""
    import tempfile
    from pathlib import Path

    from rlrun.errors import ConfigError

    path = Path(folder).absolute()
    made = []  # the folders this check makes, deepest first: removed again (Hydra makes them when the run starts)
    parent = path
    while not parent.exists() and parent != parent.parent:
        made.append(parent)
        parent = parent.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ConfigError(f"{key}={folder}: cannot write the output there ({reason}). Give a writable folder "
                          f"({key}=<path>) or run from a writable working directory.") from None
    finally:
        for folder_made in made:
            try:
                folder_made.rmdir()
            except OSError:
                pass


def check_dataset(cfg: Any) -> None:
    """An offline run's dataset exists and its spaces are the env's: checked here, before the run directory is made
    (a ConfigError otherwise; the run reads the episodes later)."""
    from rlrun.execution.dataset import open_minari
    from rlrun.registry import registry

    open_minari(cfg.data, registry.build("env", cfg.env.name, cfg.env).spec)


def check_record_target(cfg: Any) -> None:
    """``record_dataset.id`` is a new dataset id, and the env's observations are what a dataset holds here (Box or
    Discrete: what the offline algorithms read): checked before the run directory is made."""
    from rlrun import spaces as sp
    from rlrun.errors import ConfigError
    from rlrun.execution.dataset import check_new_id
    from rlrun.registry import registry

    check_new_id(str(cfg.record_dataset.id), cfg.record_dataset.root, "record_dataset.id")
    space = registry.build("env", cfg.env.name, cfg.env).spec.observation_space
    if not isinstance(space, (sp.Box, sp.Discrete)):
        raise ConfigError(f"record_dataset.id={cfg.record_dataset.id}: env {cfg.env.id} observes "
                          f"{sp.describe(space)}; datasets hold Box or Discrete observations in this version.")


class ValidateConfig:
    """Hydra callback: validate the composed config before a run starts, so that a bad one makes no run directory
    (the only validation of a single run; a sweep's jobs are validated each with its own values).

    Hydra turns an Exception raised by a callback into a warning, so a bad config ends here with SystemExit.
    """

    def on_run_start(self, config, connect: bool = True, output: str = "run", **kwargs):  # type: ignore[no-untyped-def]
        from omegaconf import OmegaConf, open_dict

        from rlrun.config import validate
        from rlrun.errors import RlrunError

        cfg = OmegaConf.masked_copy(config, [k for k in config.keys() if k != "hydra"])
        try:
            with open_dict(cfg):
                validate(cfg)
            if cfg.get("data") is not None:
                check_dataset(cfg)
            if cfg.record_dataset.id is not None:
                check_record_target(cfg)
            if cfg.executor.name == "ray":
                # lazily: it imports ray. An unreachable cluster, one of other Ray/Python versions, or one without
                # the CPUs asked for is bad input, said before the run directory exists: a run joining a cluster
                # connects here (the executor keeps the connection); a sweep's jobs connect each on their own.
                from rlrun.execution import ray_executor

                ray_executor.check_reachable(cfg.executor)
                if connect and (cfg.executor.address or os.environ.get("RAY_ADDRESS")):
                    ray_executor.connect(cfg.executor)
                    ray_executor.check_capacity(cfg.executor)
            check_writable(f"hydra.{output}.dir", str(config.hydra[output].dir))
        except RlrunError as e:
            if tracebacks_requested():
                raise SystemExit(e.exit_code) from e
            report_and_exit(e)

    def on_multirun_start(self, config, **kwargs):  # type: ignore[no-untyped-def]
        from rlrun.app.sweep import with_swept_values

        self.on_run_start(with_swept_values(config), connect=False, output="sweep")

    def __getattr__(self, name: str):  # the other Callback hooks: nothing to do
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


if __name__ == "__main__":
    main()
