"""The schemas as Hydra sees them (``rlrun.config.SchemaSource``): the options of each ``schema/<group>``, a typed
node per load, and a composition that makes only the schemas it names."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError
from omegaconf import OmegaConf

from rlrun import hydra_search_path
from rlrun.algos.multiagent_config import MultiAgentConfig
from rlrun.algos.ppo_config import PPOConfig
from rlrun.app.config_reference import options
from rlrun.config import SCHEMA_GROUPS, DeviceConfig, GymEnvConfig, RunConfig, SchemaSource
from rlrun.registry import registry


@pytest.fixture
def source() -> SchemaSource:
    return SchemaSource(provider="rlrun", path=hydra_search_path.SCHEMA_SOURCE)


def test_the_schema_groups_hold_every_option_with_a_schema():
    """Hydra lists, per group, the built-in schemas and every registry entry that names one."""
    assert options("schema/device") == ["device"]
    assert options("schema/logger") == ["logger"]
    assert options("schema/executor") == ["local", "ray"]
    assert "gym" in options("schema/env") and "mujoco" in options("schema/env")
    with_schema = sorted(n for n in registry.names("algo") if registry.entry("algo", n).schema is not None)
    assert options("schema/algo") == with_schema and "ppo" in with_schema


def test_paths_groups_and_listing(source: SchemaSource):
    assert source.is_group("") and source.is_group("schema") and source.is_group("schema/algo")
    assert not source.is_group("algo") and not source.is_group("schema/nope")
    assert source.is_config("base_config") and source.is_config("schema/algo/ppo.yaml")
    assert not source.is_config("schema/algo/nope") and not source.is_config("schema/ppo") and not source.is_config("x")
    assert source.list("", ObjectType.GROUP) == ["schema"]
    assert source.list("", ObjectType.CONFIG) == ["base_config"]
    assert source.list("schema", None) == sorted(SCHEMA_GROUPS)
    assert source.list("schema/data", ObjectType.CONFIG) == ["minari"]
    assert source.list("schema/device", ObjectType.CONFIG) == ["device"]
    assert source.list("schema/device", ObjectType.GROUP) == []


@pytest.mark.parametrize("path, schema", [("base_config", RunConfig), ("schema/algo/ppo.yaml", PPOConfig),
                                          ("schema/env/gym", GymEnvConfig), ("schema/device/device", DeviceConfig)])
def test_each_load_is_a_new_typed_node(source: SchemaSource, path: str, schema: type):
    first, second = source.load_config(path).config, source.load_config(path).config
    assert OmegaConf.get_type(first) is schema and OmegaConf.get_type(second) is schema
    assert first is not second and first == second == OmegaConf.structured(schema)


def test_a_load_does_not_share_state_with_the_next(source: SchemaSource):
    """Composition merges into the node it loads: a change to one load is not seen by the next."""
    first = source.load_config("schema/algo/ppo").config
    first.lr = 0.5
    assert source.load_config("schema/algo/ppo").config.lr == PPOConfig().lr != 0.5


def test_open_maps_take_new_keys(source: SchemaSource):
    node = source.load_config("schema/algo/multiagent").config
    assert OmegaConf.get_type(node) is MultiAgentConfig
    node.policies.mine = {"algo": "dqn"}  # no "+" needed: struct mode is off for user-named entries
    node.mapping["agent_*"] = "mine"
    assert node.policies.mine.algo == "dqn" and node.mapping["agent_*"] == "mine"


def test_an_unknown_path_is_not_found(source: SchemaSource):
    with pytest.raises(ConfigLoadError):
        source.load_config("schema/algo/nope")


def test_a_composition_makes_only_the_schemas_it_names():
    """``algo=ppo`` imports PPO's schema module and not the other algorithms' (each import is start-up time)."""
    code = ("import sys; from rlrun.config import compose; compose(['algo=ppo']); "
            "print(sorted(m for m in sys.modules if m.startswith('rlrun.algos.') and m.endswith('_config')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "rlrun.algos.ppo_config" in out
    assert "rlrun.algos.dqn_config" not in out and "rlrun.algos.sac_config" not in out, out
