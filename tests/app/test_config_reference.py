"""The configuration reference generated from the schemas (rlrun/app/config_reference.py), ``rlrun keys`` and the
short ``rlrun --help``: complete (every key of every option, each with its docstring), right (defaults as composed),
and the bad input of ``rlrun keys`` answered in one line."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from conftest import run_rlrun

from rlrun.app import config_reference as ref
from rlrun.config import GROUPS, compose, schema_for
from rlrun.schema import field_docs


@pytest.fixture(scope="module")
def markdown() -> str:
    return ref.reference_markdown()


def _leaf_keys(schema: type, prefix: str) -> list[tuple[str, type, str]]:
    out = []
    for f in dataclasses.fields(schema):
        if (f.name == "name" and prefix in GROUPS) or (not prefix and f.name in GROUPS):
            continue
        factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None  # type: ignore[misc]
        path = f"{prefix}.{f.name}" if prefix else f.name
        if factory is not None and dataclasses.is_dataclass(factory):
            out += _leaf_keys(factory, path)  # type: ignore[arg-type]
        else:
            out.append((path, schema, f.name))
    return out


@pytest.mark.parametrize("group", GROUPS)
def test_every_key_of_every_option_is_in_the_reference_with_its_docstring(group: str, markdown: str):
    """Walks every option of the group (its YAML files), composes it, and finds a row for each schema key in the
    option's section; a key declared without a docstring fails here, naming it."""
    for option in ref.options(group):
        section = markdown.split(f"{{ #{group}-{option} }}", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        schema = schema_for(group, compose([f"{group}={option}"], check=False)[group])
        for path, owner, name in _leaf_keys(schema, group):
            assert field_docs(owner).get(name), f"{owner.__name__}.{name} ({path}) has no docstring"
            assert f"| `{path}` |" in section, f"{path} missing from {group}={option}"


def test_docstring_markup_is_rendered_for_the_page_and_the_terminal(markdown: str):
    """Docstrings use Sphinx's :class:`~a.B` and ``literal``; the page shows `B` and `literal`, rlrun keys plain
    words: neither shows the raw markup (some docstrings of every algo option have it)."""
    assert not re.search(r":(class|meth|func|mod|attr|obj):`", markdown)
    assert ref._markdown("see :class:`~rlrun.x.Foo` and ``a or b``") == "see `Foo` and `a or b`"
    for algo in ref.options("algo"):
        text = ref.keys_text(f"algo={algo}")
        assert "``" not in text and not re.search(r":(class|meth|func|mod|attr|obj):`", text), algo


def test_run_keys_are_in_the_reference(markdown: str):
    run = markdown.split("{ #run }", 1)[1].split("\n## ", 1)[0]
    for key in ("seed", "stop.env_steps", "checkpoint.keep_last", "eval.episodes", "export.formats",
                "sweep.resume", "resume", "return_window"):
        assert f"| `{key}` |" in run, key


def test_defaults_are_the_composed_values(markdown: str):
    """An option's YAML value wins over its schema's default (env=cartpole's id), a mandatory key says so
    (env=atari's game), a schema default shows where the YAML is silent (PPO's lr)."""
    def row(option: str, key: str) -> str:
        section = markdown.split(f"{{ #{option} }}", 1)[1].split("\n### ", 1)[0]
        return next(line for line in section.splitlines() if line.startswith(f"| `{key}` |"))

    assert "`CartPole-v1`" in row("env-cartpole", "env.id")
    assert "(required)" in row("env-atari", "env.game")
    assert "`0.001`" in row("algo-ppo", "algo.lr") and "(0, inf)" in row("algo-ppo", "algo.lr")
    assert "trpo \\| natural_gradient" in row("algo-trpo", "algo.policy_update")
    assert "### `ppo_executor/ray`" in markdown and "num_envs_per_worker: 4" in markdown


def test_rlrun_keys_prints_one_option(workdir: Path):
    """The values a run with these choices gets: `rlrun algo=ppo` runs CartPole (the default env) with the
    ppo_cartpole preset, so its lr is the preset's 0.003, marked with PPO's own 0.001; an env without a preset for
    the algorithm shows the option's defaults, unmarked."""
    proc = run_rlrun(["keys", "algo=ppo"], workdir, check=True)
    assert proc.stdout.startswith("# the values `rlrun algo=ppo` runs with (env=cartpole, preset "
                                  "algo_env/ppo_cartpole)")
    assert "algo.lr = 0.003  (float)  [(0, inf)]  <- preset (0.001 without)" in proc.stdout
    assert "algo.policy_update" not in proc.stdout  # TRPO's, not PPO's
    pendulum = run_rlrun(["keys", "algo=ppo", "env=pendulum"], workdir, check=True)
    assert pendulum.stdout.startswith("# the values `rlrun algo=ppo env=pendulum` runs with (env=pendulum, no preset)")
    assert "algo.lr = 0.001  (float)  [(0, inf)]\n" in pendulum.stdout and "<-" not in pendulum.stdout
    run = run_rlrun(["keys", "run"], workdir, check=True)
    assert "stop.env_steps = 100000  (int or null)  [[1, inf)]" in run.stdout


@pytest.mark.parametrize("args, says", [(["keys", "algo=nope"], "algo has no option 'nope'; options: a2c"),
                                        (["keys", "colour=red"], "name a group option, e.g. rlrun keys algo=ppo"),
                                        (["keys"], "usage: rlrun keys <group>=<option>")])
def test_rlrun_keys_bad_input_exits_2_with_one_line(workdir: Path, args: list[str], says: str):
    proc = run_rlrun(args, workdir)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and says in proc.stderr, proc.stderr


def test_help_fits_one_screen_and_points_to_the_rest(workdir: Path):
    proc = run_rlrun(["--help"], workdir, check=True)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) <= 40, len(lines)
    assert not any(line.startswith("schema/") for line in lines)
    algos = ("a2c, apex, appo, bc, c51, cql, ddpg, dqn, impala, iql, multiagent, multiagent_mixed, ppo, pqn, qrdqn, "
             "rainbow, sac, td3, trpo")
    assert f"algo: {algos}" in proc.stdout
    assert "rlrun keys algo=ppo" in proc.stdout and "Configuration reference" in proc.stdout
