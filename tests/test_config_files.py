"""One source of truth per default: the YAML options and presets of conf/ set only what differs from the schema
the key is declared in (rlrun/algos/<name>_config.py, rlrun/config.py), and only keys that schema has."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from rlrun import config as C
from rlrun.registry import registry

CONF = Path(__file__).resolve().parents[1] / "conf"
RUN_BLOCKS = {"stop": C.StopConfig, "checkpoint": C.CheckpointConfig, "eval": C.EvalConfig,
              "export": C.ExportConfig}


def _defaults(schema: type) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(schema):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
    return out


def _problems(block: dict[str, Any], schema: type, where: str) -> list[str]:
    defaults, valid = _defaults(schema), {f.name for f in dataclasses.fields(schema)}
    out = []
    for k, v in block.items():
        if k not in valid:
            out.append(f"{where}.{k}: not a key of {schema.__name__}")
        elif k in defaults and v == defaults[k] and not (isinstance(v, str) and "${" in v):
            out.append(f"{where}.{k}={v!r}: repeats {schema.__name__}'s default (say it only in the schema)")
    return out


ALGO_FILES = sorted((CONF / "algo").glob("*.yaml"))
PRESETS = sorted((CONF / "algo_env").rglob("*.yaml"))


@pytest.mark.parametrize("path", ALGO_FILES, ids=lambda p: p.name)
def test_an_algo_option_sets_only_what_differs_from_its_schema(path: Path) -> None:
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    defaults = raw.pop("defaults")
    base = path.stem
    if not defaults[0].startswith("/schema/"):  # a preset built on another option (multiagent_mixed on multiagent)
        base = defaults[0]
        assert defaults == [base, "_self_"] and (CONF / "algo" / f"{base}.yaml").exists()
    else:
        assert defaults == [f"/schema/algo/{path.stem}@_here_", "_self_"]
    assert _problems(raw, registry.schema("algo", base), f"{path.name}: algo") == []


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: str(p.relative_to(CONF / "algo_env")))
def test_a_preset_sets_real_keys_each_with_its_source(path: Path) -> None:
    """A preset is a published setting (a paper's table, a reference implementation's defaults): it pins every value
    it takes from its source, even one that equals today's schema default, so that retuning a default for CartPole
    cannot silently change a reproduction. So: only keys the schemas have, and a source comment on every algo key."""
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    raw.pop("defaults", None)
    algo = path.stem.split("_")[0] if path.parent.name == "algo_env" else path.parent.name.split("_")[0]
    problems = [p for p in _problems(raw.get("algo", {}), registry.schema("algo", algo), f"{path.name}: algo")
                if "not a key" in p]
    for block, schema in RUN_BLOCKS.items():
        problems += [p for p in _problems(raw.get(block, {}), schema, f"{path.name}: {block}") if "not a key" in p]
    lines = path.read_text().splitlines()
    in_algo = False
    for line in lines:
        if not line.startswith(" ") and line.strip():
            in_algo = line.startswith("algo:")
        elif in_algo and line.startswith("  ") and not line.strip().startswith("#") and "#" not in line:
            problems.append(f"{path.name}: '{line.strip()}' has no source comment")
    assert problems == []


def test_every_algo_has_its_option_and_its_schema_beside_it() -> None:
    for name in ("dqn", "c51", "qrdqn", "rainbow", "ppo", "a2c", "trpo", "sac", "td3", "ddpg", "impala", "appo",
                 "apex", "pqn"):
        assert (CONF / "algo" / f"{name}.yaml").exists()
        assert registry.schema("algo", name).__module__ == f"rlrun.algos.{name}_config"
    assert not [n for n in vars(C) if n.endswith("Config") and n[:-6].lower() in registry.names("algo")]


@pytest.mark.parametrize("algo", ["dqn", "c51", "qrdqn", "rainbow", "ppo", "a2c", "trpo", "sac", "td3", "ddpg",
                                  "impala", "appo", "apex", "pqn"])
def test_a_composed_algo_node_is_its_schema_defaults(algo: str) -> None:
    """What ``algo=<name>`` composes is the schema's defaults, except the LR horizon, which follows the run's budget
    (``~algo_env``: without the (algo, env) preset, e.g. conf/algo_env/ppo_cartpole.yaml for the default env)."""
    from rlrun.config import compose

    node = OmegaConf.to_container(compose([f"algo={algo}", "~algo_env", "stop.env_steps=12345"]).algo, resolve=True)
    want = _defaults(registry.schema("algo", algo))
    if "total_env_steps" in want:
        want["total_env_steps"] = 12345
    assert node == want


def _schema_of(path: Path) -> type | None:
    """The schema an option file selects (``/schema/<group>/<name>@_here_`` in its defaults), or None."""
    for entry in OmegaConf.to_container(OmegaConf.load(path), resolve=False).get("defaults") or []:
        if isinstance(entry, str) and entry.startswith("/schema/"):
            _, _, group, rest = entry.split("/", 3)
            name = rest.split("@")[0]
            return C._BUILTIN_SCHEMAS.get((group, name)) or registry.schema(group, name)
    return None


OPTION_FILES = sorted(p for group in ("env", "executor", "device", "logger") for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("path", OPTION_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_option_sets_only_what_differs_from_its_schema(path: Path) -> None:
    """env, executor, device and logger options as algo options: their schemas say the defaults (nested blocks, e.g.
    logger.mlflow, compared with their own schema); an option built on another (pong on atari) has no schema line."""
    schema = _schema_of(path)
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    raw.pop("defaults", None)
    if path.read_text().startswith("# @package _global_"):  # an option that also sets another group's default
        raw = raw.get(path.parent.name, {})  # (env=pettingzoo selects algo=multiagent): its own keys are there
    if schema is None:
        return
    problems = []
    for name, value in raw.items():
        nested = next((f for f in dataclasses.fields(schema) if f.name == name), None)
        sub = nested.default_factory() if nested is not None and nested.default_factory is not dataclasses.MISSING \
            else None  # type: ignore[misc]
        if isinstance(value, dict) and dataclasses.is_dataclass(sub):
            problems += _problems(value, type(sub), f"{path.name}: {name}")
        else:
            problems += _problems({name: value}, schema, path.name)
    assert problems == []


def test_the_primary_config_sets_no_run_default() -> None:
    """conf/config.yaml chooses the groups and Hydra's settings; every run-level default is RunConfig's."""
    raw = OmegaConf.to_container(OmegaConf.load(CONF / "config.yaml"), resolve=False)
    assert set(raw) <= {"defaults", "hydra"}


@pytest.mark.parametrize("executor", ["local", "ray"])
@pytest.mark.parametrize("algo", sorted(p.stem for p in ALGO_FILES))
def test_every_algo_env_and_executor_choice_composes(algo: str, executor: str) -> None:
    """Every option of algo x env x executor composes (a preset's keys exist in the executor it meets: a preset that
    set executor.num_envs broke executor=ray); whether the run then accepts the combination is validate's call."""
    from rlrun.config import compose

    for env in sorted(p.stem for p in (CONF / "env").glob("*.yaml")):
        compose([f"algo={algo}", f"env={env}", f"executor={executor}"], check=False)
