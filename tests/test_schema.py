"""Declared validation (rlrun/schema.py): every number of every shipped schema declares its range, and every
declared bound is enforced on both roads a config takes (the CLI's validate(), a schema object made in Python)."""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
from typing import Any

import pytest
from omegaconf import OmegaConf

from rlrun import config as C
from rlrun.algos.a2c_config import A2CConfig
from rlrun.algos.apex_config import ApexConfig
from rlrun.algos.appo_config import APPOConfig
from rlrun.algos.bc_config import BCConfig
from rlrun.algos.c51_config import C51Config
from rlrun.algos.cql_config import CQLConfig
from rlrun.algos.ddpg_config import DDPGConfig
from rlrun.algos.dqn_config import DQNConfig
from rlrun.algos.impala_config import IMPALAConfig
from rlrun.algos.iql_config import IQLConfig
from rlrun.algos.multiagent_config import MultiAgentConfig
from rlrun.algos.ppo_config import PPOConfig
from rlrun.algos.pqn_config import PQNConfig
from rlrun.algos.qrdqn_config import QRDQNConfig
from rlrun.algos.rainbow_config import RainbowConfig
from rlrun.algos.sac_config import SACConfig
from rlrun.algos.td3_config import TD3Config
from rlrun.algos.trpo_config import TRPOConfig
from rlrun.config import compose
from rlrun.errors import ConfigError
from rlrun.schema import Interval, declaration, describe, field_docs, is_number_field, is_number_list_field

OFFLINE = ["data=minari", "data.id=a-v0", "stop.gradient_steps=1"]  # an offline algorithm's run needs its data

# every shipped schema, with the overrides that compose a config using it and where its node sits
SCHEMAS: list[tuple[type, list[str], str]] = [
    (DQNConfig, ["algo=dqn"], "algo"), (PPOConfig, ["algo=ppo"], "algo"), (A2CConfig, ["algo=a2c"], "algo"),
    (TRPOConfig, ["algo=trpo"], "algo"), (SACConfig, ["algo=sac", "env=pendulum"], "algo"),
    (TD3Config, ["algo=td3", "env=pendulum"], "algo"), (DDPGConfig, ["algo=ddpg", "env=pendulum"], "algo"),
    (IMPALAConfig, ["algo=impala"], "algo"), (APPOConfig, ["algo=appo"], "algo"),
    (ApexConfig, ["algo=apex"], "algo"), (C51Config, ["algo=c51"], "algo"), (QRDQNConfig, ["algo=qrdqn"], "algo"),
    (RainbowConfig, ["algo=rainbow"], "algo"), (C.GymEnvConfig, [], "env"),
    (C.AtariEnvConfig, ["env=atari", "env.game=Pong"], "env"), (C.DeviceConfig, [], "device"),
    (C.LocalExecutorConfig, [], "executor"), (C.RayExecutorConfig, ["executor=ray"], "executor"),
    (C.TensorBoardConfig, [], "logger.tensorboard"), (C.MLflowConfig, [], "logger.mlflow"),
    (C.ConsoleConfig, [], "logger.console"), (C.LoggerConfig, [], "logger"), (C.StopConfig, [], "stop"),
    (C.CheckpointConfig, [], "checkpoint"), (C.EvalConfig, [], "eval"), (C.ExportConfig, [], "export"),
    (C.SweepConfig, [], "sweep"), (C.RunConfig, [], ""),
    (MultiAgentConfig, ["env=pettingzoo"], "algo"), (C.PettingZooEnvConfig, ["env=pettingzoo"], "env"),
    (PQNConfig, ["algo=pqn"], "algo"), (C.MinAtarEnvConfig, ["env=minatar"], "env"),
    (BCConfig, ["algo=bc", *OFFLINE], "algo"), (IQLConfig, ["algo=iql", "env=pendulum", *OFFLINE], "algo"),
    (CQLConfig, ["algo=cql", "env=pendulum", *OFFLINE], "algo"), (C.MinariDataConfig, ["algo=bc", *OFFLINE], "data"),
]


def test_every_shipped_schema_is_listed_here() -> None:
    from rlrun.registry import registry

    listed = {s for s, _, _ in SCHEMAS}
    assert set(C._BUILTIN_SCHEMAS.values()) <= listed
    assert {registry.schema("algo", n) for n in registry.names("algo")} <= listed
    nested = {f.type for s in listed for f in dataclasses.fields(s) if dataclasses.is_dataclass(f.type)}
    assert nested <= listed


@pytest.mark.parametrize("schema", [s for s, _, _ in SCHEMAS], ids=lambda s: s.__name__)
def test_every_number_declares_its_range(schema: type) -> None:
    """An int or float key without a declared range is a defect: its bad values would run silently."""
    undeclared = [f.name for f in dataclasses.fields(schema)
                  if (is_number_field(schema, f) and "range" not in declaration(f))
                  or (is_number_list_field(schema, f) and "items" not in declaration(f))]
    assert not undeclared, f"{schema.__name__}: declare a range (rlrun.schema.key) for {undeclared}"


def _bad_values(schema: type, f: dataclasses.Field) -> list[Any]:
    decl = declaration(f)
    is_int = "int" in str(f.type) and "float" not in str(f.type)
    if "range" in decl:
        return [int(v) if is_int else v for v in decl["range"].outside()]
    if "items" in decl:
        return [[1, int(v) if is_int else v] for v in decl["items"].outside()]
    if "choices" in decl:
        return [["no-such-choice"]] if "list" in str(f.type) else ["no-such-choice"]
    return []


CASES = [(schema, overrides, prefix, f.name, bad)
         for schema, overrides, prefix in SCHEMAS for f in dataclasses.fields(schema)
         for bad in _bad_values(schema, f)]


def test_the_declared_cases_cover_the_schemas() -> None:
    assert len(CASES) > 200
    assert {c[0] for c in CASES} >= {s for s, _, _ in SCHEMAS} - {C.SweepConfig, C.MinariDataConfig}  # text keys only


@pytest.fixture(scope="module")
def composed() -> dict[str, Any]:
    return {" ".join(o): compose(o) for _, o, _ in SCHEMAS}


@pytest.mark.parametrize("schema,overrides,prefix,name,bad", CASES,
                         ids=[f"{c[0].__name__}.{c[3]}={c[4]}" for c in CASES])
def test_each_declared_bound_is_refused_by_validate(composed: dict, schema: type, overrides: list[str], prefix: str,
                                                    name: str, bad: Any) -> None:
    cfg = composed[" ".join(overrides)].copy()
    where = f"{prefix}.{name}" if prefix else name
    OmegaConf.update(cfg, where, bad, merge=False)
    with pytest.raises(ConfigError, match="^" + re.escape(f"{where}=")):
        C.validate(cfg)


@pytest.mark.parametrize("schema,overrides,prefix,name,bad",
                         [c for c in CASES if c[0] not in (C.RunConfig, C.LoggerConfig)],
                         ids=[f"{c[0].__name__}.{c[3]}={c[4]}" for c in CASES
                              if c[0] not in (C.RunConfig, C.LoggerConfig)])
def test_each_declared_bound_is_refused_by_the_schema_object(schema: type, overrides: list[str], prefix: str,
                                                             name: str, bad: Any) -> None:
    """``PPOConfig(gamma=1.5)`` in Python (rlrun.make_agent, tests, plugins) is refused as the CLI refuses it."""
    required = {f.name: "x" for f in dataclasses.fields(schema) if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}  # type: ignore[misc]
    with pytest.raises(ConfigError, match="^" + re.escape(f"{prefix}.{name}=")):
        schema(**{**required, name: bad})


def test_defaults_and_null_pass() -> None:
    for schema, _, _ in SCHEMAS:
        required = {f.name: "x" for f in dataclasses.fields(schema) if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING}  # type: ignore[misc]
        schema(**required)
    assert C.StopConfig(env_steps=None, wall_time_s=None).env_steps is None  # Optional: null disables
    assert PPOConfig(gamma=1.0, gae_lambda=0.0).gamma == 1.0  # closed bounds are allowed


def test_intervals_against_hand_computed_membership() -> None:
    half_open = Interval.parse("(0, 1]")
    assert [x in half_open for x in (0.0, 1e-12, 0.5, 1.0, 1.0000001, -1.0)] == [False, True, True, True, False, False]
    at_least_one = Interval.parse("[1, inf)")
    assert [x in at_least_one for x in (0, 1, 10**12, math.inf, math.nan)] == [False, True, True, False, False]
    assert [x in Interval.parse("any") for x in (-1e300, 0.0, math.inf)] == [True, True, False]
    assert Interval.parse("[-20, 19]").outside() == [-21.0, 20.0]
    assert Interval.parse("(0, inf)").outside() == [0.0]
    assert (half_open.describe(), at_least_one.describe(), Interval.parse("(0, inf)").describe()) == \
        ("in (0, 1]", ">= 1", "> 0")
    for text in ("0, 1", "[1, 0]", "[a, 1]", "{0, 1}"):
        with pytest.raises(ValueError):
            Interval.parse(text)


def test_the_reference_rows_carry_docs_and_declarations() -> None:
    rows = {r["key"]: r for r in describe(PPOConfig)}
    assert rows["gamma"]["allowed"] == "(0, 1]" and rows["gamma"]["default"] == 0.98
    assert rows["hidden_sizes"]["allowed"] == "each [1, inf)" and rows["hidden_sizes"]["default"] == [64, 64]
    assert rows["gamma"]["doc"].startswith("Discount factor")
    assert field_docs(APPOConfig)["lr"] == field_docs(IMPALAConfig)["lr"]  # inherited docs


@pytest.mark.parametrize("overrides,line", [
    (["algo.gamma=1.5"], "rlrun: error: algo.gamma=1.5: must be in (0, 1]."),
    (["algo.batch_size=0"], "rlrun: error: algo.batch_size=0: must be >= 1."),
    (["stop.env_steps=-5"], "rlrun: error: stop.env_steps=-5: must be >= 1 (or null)."),
    (["algo=ppo", "algo.rollout_steps=0"], "rlrun: error: algo.rollout_steps=0: must be >= 1."),
])
def test_the_issue_bad_inputs_exit_2_with_one_line(tmp_path: Any, overrides: list[str], line: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "rlrun.app.cli", *overrides, f"hydra.run.dir={tmp_path}/run"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(errors) == 1 and errors[0].startswith(line), errors
    assert not (tmp_path / "run" / "summary.json").exists()
