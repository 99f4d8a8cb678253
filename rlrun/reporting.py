"""How rlrun reports an error that ends a command: one readable line on stderr and an exit code (2 for bad input),
or the traceback when the user asked for it. Used by the command line (rlrun/app/cli.py) and by sweep jobs
(rlrun/app/sweep.py), which may run in other processes (joblib workers), so the wish for tracebacks travels in the
environment (``RLRUN_TRACEBACK=1``, set by ``rlrun`` from ``hydra.verbose=true`` or ``HYDRA_FULL_ERROR=1``), not in
a module global.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from rlrun.errors import RlrunError, did_you_mean
from rlrun.registry import RegistryError

EXIT_CONFIG = 2
TRACEBACK_ENV = "RLRUN_TRACEBACK"


def wants_traceback(args: Sequence[str]) -> bool:
    """True when the user asked for tracebacks: ``hydra.verbose=<anything but false>`` or ``HYDRA_FULL_ERROR=1``."""
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        return True
    for a in args:
        if a.startswith("hydra.verbose=") and a.split("=", 1)[1].lower() not in ("false", "null", "[]", ""):
            return True
    return False


def request_tracebacks(on: bool) -> None:
    """Record the user's wish for this process and the processes it starts."""
    if on:
        os.environ[TRACEBACK_ENV] = "1"
    else:
        os.environ.pop(TRACEBACK_ENV, None)


def tracebacks_requested() -> bool:
    return os.environ.get(TRACEBACK_ENV) == "1"


def report_and_exit(e: BaseException) -> None:
    message, code = describe_error(e)
    print(f"rlrun: error: {message}", file=sys.stderr)
    sys.exit(code)


def describe_error(e: BaseException) -> tuple[str, int]:
    """One readable paragraph and an exit code for an exception that ended the run."""
    from hydra.errors import HydraException, MissingConfigException, OverrideParseException
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(e, RlrunError):
        return str(e), e.exit_code
    if isinstance(e, RegistryError):
        return str(e), EXIT_CONFIG
    if isinstance(e, MissingConfigException):
        text = " ".join(str(e).split("Config search path")[0].split())
        if "Could not find 'hydra/sweeper/optuna'" in text:  # conf/hparams_search/ needs the optional extra
            return f"{text}. The Optuna sweeper is optional: pip install 'rlrun[optuna]'.", EXIT_CONFIG
        return f"{text}. Fix the option name (rlrun --help lists every group's options).", EXIT_CONFIG
    if isinstance(e, OverrideParseException):
        return f"cannot parse the override: {' '.join(str(e).split())}", EXIT_CONFIG
    if isinstance(e, (HydraException, OmegaConfBaseException)):
        unknown = _unknown_override(e)
        if unknown:
            return unknown, EXIT_CONFIG
        parts = [" ".join(str(e).split())]
        cause = e.__cause__
        if cause is not None:
            parts.append(_omegaconf_detail(cause))
        return " — ".join(p for p in parts if p), EXIT_CONFIG
    import traceback

    return "".join(traceback.format_exception(e)).rstrip() + "\n(unexpected error: please report it)", 1


def _unknown_override(e: BaseException) -> str | None:
    """An override of a key the config does not have (``algo.learning_rate=...``, ``evn=pong``): rlrun's message
    with the close matches, instead of Hydra's advice to add the key with ``+`` (which the schema then refuses)."""
    import re

    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    m = re.match(r"Could not override '([^']+)'", str(e))
    cause = e.__cause__
    object_type = getattr(cause, "object_type", None)
    unknown_key = isinstance(cause, (ConfigKeyError, ConfigAttributeError))
    if not (m and unknown_key and hasattr(object_type, "__dataclass_fields__")):
        return None
    key = m.group(1)
    refusal = no_recurrent_core(key, object_type.__name__)
    if refusal:
        return refusal
    valid = _field_names(object_type)
    what = "the run's config (rlrun --help lists the groups)" if object_type.__name__ == "RunConfig" else \
        object_type.__name__
    return (f"{key}: unknown key for {what}.{did_you_mean(key.rpartition('.')[2], valid)} "
            f"Valid keys: {', '.join(valid)}.")


def no_recurrent_core(key: str, schema_name: str) -> str | None:
    """The message for ``algo.recurrent`` / ``algo.recurrent_size`` given to an algorithm whose schema lacks them
    (DQN family, SAC/TD3/DDPG, TRPO, PQN: their updates do not unroll sequences from a recorded state), else None."""
    if key not in ("algo.recurrent", "algo.recurrent_size"):
        return None
    return (f"{key}: {schema_name} cannot carry a recurrent core (its update does not unroll sequences from a "
            f"recorded state); recurrent policies are algo=ppo, a2c, impala or appo, or drop {key}.")


def _omegaconf_detail(cause: BaseException) -> str:
    lines = [ln.strip() for ln in str(cause).strip().splitlines() if ln.strip()]
    msg = lines[0] if lines else type(cause).__name__
    key = getattr(cause, "full_key", None)
    if key:
        msg += f" (key: {key})"
    from omegaconf.errors import ConfigKeyError

    object_type = getattr(cause, "object_type", None)
    if isinstance(cause, ConfigKeyError) and object_type is not None and hasattr(object_type, "__dataclass_fields__"):
        msg += f". Valid keys: {', '.join(_field_names(object_type))}"
    return msg


def _field_names(schema: type) -> list[str]:
    """A dataclass schema's config keys (its fields; class variables such as ``key_prefix`` are not keys)."""
    import dataclasses

    return [f.name for f in dataclasses.fields(schema)]
