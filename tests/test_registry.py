"""The registry alone: registration, lazy import, misses that name the registered choices."""

from __future__ import annotations

import sys

import pytest

from rlrun.registry import Registry, RegistryError, registry


def test_decorator_and_direct_registration() -> None:
    r = Registry()

    @r.register("algo", "mine", schema=dict)
    class Mine:
        pass

    r.register("env", "e", lambda: 3)
    assert r.get("algo", "mine") is Mine and r.schema("algo", "mine") is dict
    assert r.build("env", "e") == 3
    assert r.names("algo") == ["mine"]


def test_string_targets_are_imported_only_when_used() -> None:
    r = Registry()
    sys.modules.pop("colorsys", None)
    r.register("thing", "hls", "colorsys:rgb_to_hls")
    assert "colorsys" not in sys.modules
    assert r.get("thing", "hls")(1.0, 0.0, 0.0) == (0.0, 0.5, 1.0)
    assert "colorsys" in sys.modules


def test_miss_lists_registered_names_and_close_matches() -> None:
    r = Registry()
    r.register("algo", "dqn", object)
    r.register("algo", "ppo", object)
    with pytest.raises(RegistryError, match=r"unknown algo 'dq'. Did you mean 'dqn'\? Registered algo names: dqn, ppo"):
        r.get("algo", "dq")


def test_double_registration_needs_replace() -> None:
    r = Registry()
    r.register("algo", "a", int)
    with pytest.raises(RegistryError, match="registered already"):
        r.register("algo", "a", float)
    r.register("algo", "a", float, replace=True)
    assert r.get("algo", "a") is float


def test_builtin_registry_resolves_every_entry() -> None:
    for kind in registry.kinds():
        for name in registry.names(kind):
            assert registry.get(kind, name) is not None, (kind, name)


def test_importing_rlrun_stays_light() -> None:
    import subprocess

    code = "import sys, rlrun, rlrun.config; print(sorted(m for m in ('torch', 'mlflow', 'ray') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
