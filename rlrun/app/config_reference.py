"""The configuration reference, generated from the schemas: every group, option and key with its type, default,
allowed values and the docstring written where the key is declared (:mod:`rlrun.schema`). One source for the docs
site's ``reference/configuration.md`` (built by ``docs/hooks.py``) and for ``rlrun keys`` (the keys of one group
option in the terminal); never kept by hand.

A group option's defaults are its *composed* values (the schema's default where the option's YAML says nothing,
the YAML's value where it differs), so the reference shows what ``rlrun <group>=<option>`` runs with. Presets
(``conf/algo_env/``) are listed with the keys they set.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from rlrun import hydra_search_path
from rlrun.config import GROUPS, RunConfig, compose, register_schemas, schema_for
from rlrun.errors import ConfigError
from rlrun.registry import registry
from rlrun.schema import describe, field_docs

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
"""The shipped config tree (installed as the package ``rlrun.conf``)."""

GROUP_TITLES = {
    "algo": "Algorithms (`algo=`)",
    "env": "Environments (`env=`)",
    "device": "Device strategies (`device=`)",
    "executor": "Executors (`executor=`)",
    "logger": "Loggers (`logger=`)",
}

RUN_SECTIONS = ("stop", "checkpoint", "eval", "export", "sweep")


@dataclass
class KeyRow:
    """One key of a schema as the reference shows it."""

    key: str  # dotted path from the config root, e.g. algo.lr
    type: str
    default: Any  # the composed value (interpolations unresolved, as written)
    allowed: str
    doc: str


def conf_dir() -> Path:
    """Where the group YAMLs live: the source tree's conf/, else the installed ``rlrun.conf`` package."""
    if CONF_DIR.is_dir():
        return CONF_DIR
    import rlrun.conf  # Imports inside functions: only an installed package without the source tree needs it

    return Path(rlrun.conf.__file__).parent


def options(group: str) -> list[str]:
    """The options of a config group as Hydra sees them: the shipped YAMLs and those of plugins' config paths."""
    register_schemas()
    hydra_search_path.register()
    with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))


def type_text(t: Any) -> str:
    """A field's type as a reader writes it: ``int``, ``float or null``, ``list[int]``, ``str``."""
    args = typing.get_args(t)
    if typing.get_origin(t) is typing.Union and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return " or ".join(type_text(a) for a in rest) + " or null"
    if typing.get_origin(t) is list:
        return f"list[{', '.join(type_text(a) for a in args)}]" if args else "list"
    if t is Any:
        return "any"
    return getattr(t, "__name__", str(t))


def rows(schema: type, node: Any, prefix: str) -> Iterator[KeyRow]:
    """One row per key of ``schema`` (nested schemas flattened to dotted keys), defaults read from ``node``."""
    docs = field_docs(schema)
    described = {r["key"]: r for r in describe(schema)}
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        if (f.name == "name" and prefix in GROUPS) or (not prefix and f.name in GROUPS):
            continue  # the option's identity (shown in the heading), or a group (a section of its own)
        path = f"{prefix}.{f.name}" if prefix else f.name
        value = node.get(f.name) if isinstance(node, dict) else None
        nested = f.default_factory if f.default_factory is not dataclasses.MISSING else None  # type: ignore[misc]
        if nested is not None and dataclasses.is_dataclass(nested):
            yield from rows(nested, value, path)  # type: ignore[arg-type]
            continue
        d = described[f.name]
        yield KeyRow(path, type_text(hints.get(f.name, f.type)), value, d["allowed"], docs.get(f.name, ""))


def option_rows(group: str, option: str) -> tuple[type, list[KeyRow]]:
    """The schema and key rows of ``<group>=<option>`` as composed, without the (algo, env) preset that the default
    env would add (``~algo_env``: ``keys algo=ppo`` shows PPO's own defaults, not conf/algo_env/ppo_cartpole.yaml's)."""
    cfg = compose([f"{group}={option}", "~algo_env"], check=False)  # env=atari leaves env.game to the user
    schema = schema_for(group, cfg[group])
    node = OmegaConf.to_container(cfg[group], resolve=False)
    return schema, list(rows(schema, node, group))


def run_rows() -> list[KeyRow]:
    """The run-level keys (seed, stop.*, checkpoint.*, ...), with their composed defaults."""
    return list(rows(RunConfig, OmegaConf.to_container(compose([], check=False), resolve=False), ""))


def _cell(value: Any) -> str:
    if value is None:
        text = "null"
    elif value == "???":
        text = "(required)"
    else:
        text = str(value).lower() if isinstance(value, bool) else str(value)
    return "`" + text.replace("|", "\\|") + "`" if text != "" else ""


# Docstrings are written for Sphinx-style readers: :class:`~pkg.Name` and ``literal``. Neither a Markdown table
# nor a terminal renders those, so the reference shows `Name` / `literal` and rlrun keys the bare words.
_ROLE = re.compile(r":(?:class|meth|func|mod|attr|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``")


def _markdown(text: str) -> str:
    return _LITERAL.sub(r"`\1`", _ROLE.sub(lambda m: f"``{m.group(1).rsplit('.', 1)[-1]}``", text))


def _terminal(text: str) -> str:
    return _LITERAL.sub(r"\1", _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text))


def _doc(text: str) -> str:
    return _markdown(text).replace("|", "\\|").replace("\n", " ")


def _table(key_rows: Sequence[KeyRow]) -> list[str]:
    out = ["| key | type | default | allowed | what it is |", "| --- | --- | --- | --- | --- |"]
    for r in key_rows:
        allowed = _doc(r.allowed) if r.allowed else ""
        out.append(f"| `{r.key}` | {r.type} | {_cell(r.default)} | {allowed} | {_doc(r.doc)} |")
    return out


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def preset_lines() -> list[str]:
    """The presets of conf/algo_env/: which pair each applies to and the keys it sets."""
    out = ["## Presets (`conf/algo_env/`) { #presets }", "",
           "Applied automatically for a matching algorithm and environment (`rlrun algo=ppo env=pong` loads "
           "`ppo_pong`), after the group options; each sets only what differs from the schemas.", ""]
    root = conf_dir() / "algo_env"
    for path in sorted(root.rglob("*.yaml")):
        comment = [line[1:].strip() for line in path.read_text().splitlines()
                   if line.startswith("#") and "@package" not in line]
        body = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
        out += [f"### `{path.relative_to(root).with_suffix('').as_posix()}`", ""]
        if comment:
            out += [" ".join(comment), ""]
        out += ["```yaml", *body, "```", ""]
    return out


def reference_markdown() -> str:
    """The whole configuration reference as Markdown (the docs site's reference/configuration.md)."""
    out = ["# Configuration reference", "",
           "Generated from the config schemas at build time (`rlrun/app/config_reference.py`): every group, "
           "option and key with its type, default, allowed values and the docstring written where the key is "
           "declared. The defaults are what `rlrun <group>=<option>` composes. In the terminal, "
           "`rlrun keys <group>=<option>` prints the same rows for one option.", "",
           "Set any key on the command line (`rlrun algo=ppo algo.lr=3e-4`); a value outside its allowed range "
           "stops the run before it starts, with one line naming the key (exit code 2).", ""]
    out += ["## Run keys { #run }", "", "Keys of every run, whatever the groups.", "", *_table(run_rows()), ""]
    for group in GROUPS:
        out += [f"## {GROUP_TITLES[group]} {{ #{group} }}", ""]
        for option in options(group):
            schema, key_rows = option_rows(group, option)
            title = f"### `{group}={option}` {{ #{group}-{option} }}"
            doc = _first_line(schema.__doc__ or "") if not (schema.__doc__ or "").startswith(schema.__name__) else ""
            entry = _registry_doc(group, option)
            out += [title, ""]
            if entry or doc:
                out += [entry or doc, ""]
            out += [f"Schema: `{schema.__module__}.{schema.__qualname__}`.", "", *_table(key_rows), ""]
    out += preset_lines()
    return "\n".join(out).rstrip() + "\n"


def _registry_doc(group: str, option: str) -> str:
    try:
        return registry.entry(group, option).doc
    except LookupError:
        return ""


def composed_as_run(overrides: Sequence[str]) -> tuple[Any, dict[str, str]]:
    """``(config, group choices)`` as ``rlrun <overrides>`` composes them, the (algo, env) preset included (the
    choices name it: ``algo_env``, None where none applies)."""
    from hydra import compose as hydra_compose

    register_schemas()
    hydra_search_path.register()
    with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    return cfg, dict(cfg.hydra.runtime.choices)


def effective_rows(spec: str, overrides: Sequence[str]) -> tuple[list[KeyRow], dict[str, Any], str]:
    """The keys of ``<group>=<option>`` (or ``run``) with the values ``rlrun <spec> <overrides>`` runs with, the
    option's own defaults where a preset changed them (``{key: default}``), and a header saying what was composed."""
    group, _, option = spec.partition("=")
    cfg, choices = composed_as_run(list(overrides) if spec == "run" else [spec, *overrides])
    preset = choices.get("algo_env")
    if preset not in options("algo_env"):  # the optional default names a preset whether or not one exists
        preset = None
    node = OmegaConf.to_container(cfg, resolve=False)
    node.pop("hydra", None)
    if spec == "run":
        base, effective = run_rows(), list(rows(RunConfig, node, ""))
    else:
        schema, base = option_rows(group, option)
        effective = list(rows(schema, node[group], group))
    changed = {b.key: b.default for b, e in zip(base, effective, strict=True) if b.default != e.default}
    command = " ".join(["rlrun", *([] if spec == "run" else [spec]), *overrides])
    header = f"# the values `{command}` runs with (env={choices.get('env')}, " \
             f"{f'preset algo_env/{preset}' if preset else 'no preset'})"
    if changed:
        header += "; <- marks what the preset set, with the option's own default"
    return effective, changed, header + "\n"


def keys_text(spec: str, overrides: Sequence[str] = ()) -> str:
    """``rlrun keys <group>=<option> [overrides]`` (or ``rlrun keys run``): the option's keys for a terminal, with
    the values a run with these choices gets (the (algo, env) preset applied, as ``rlrun`` applies it)."""
    if spec == "run":
        key_rows, changed, header = effective_rows(spec, overrides)
    else:
        group, sep, option = spec.partition("=")
        if not sep or group not in GROUPS:
            raise ConfigError(f"rlrun keys {spec}: name a group option, e.g. rlrun keys algo=ppo (groups: "
                              f"{', '.join(GROUPS)}), or rlrun keys run for the run-level keys.")
        if option not in options(group):
            raise ConfigError(f"rlrun keys {spec}: {group} has no option '{option}'; options: "
                              f"{', '.join(options(group))}.")
        key_rows, changed, header = effective_rows(spec, overrides)
    lines = [header.rstrip("\n")]
    for r in key_rows:
        allowed = f"  [{r.allowed}]" if r.allowed else ""
        mark = f"  <- preset ({_cell(changed[r.key]).strip('`') or 'null'} without)" if r.key in changed else ""
        lines.append(f"{r.key} = {_cell(r.default).strip('`') or 'null'}  ({r.type}){allowed}{mark}")
        if r.doc:
            lines.append(textwrap.fill(_terminal(r.doc), width=110, initial_indent="    ", subsequent_indent="    "))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> None:
    """``rlrun keys <group>=<option> [overrides] | run [overrides]``."""
    if not argv or argv[0] in ("-h", "--help"):
        raise ConfigError("usage: rlrun keys <group>=<option> [env=<option> ...] (e.g. rlrun keys algo=ppo "
                          "env=pong) or rlrun keys run.")
    print(keys_text(argv[0], argv[1:]), end="")
