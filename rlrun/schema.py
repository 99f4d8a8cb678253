"""How a config schema declares a key's allowed values, and the one check of a composed node against them.

A schema field declares its range or its choices where it is declared, as dataclass field metadata::

    gamma: float = key(0.99, "(0, 1]")
    \"\"\"Discount factor per agent step.\"\"\"
    batch_size: int = key(256, "[1, inf)")
    hidden_sizes: list[int] = key(factory=lambda: [64, 64], items="[1, inf)")
    learner: str = key("thread", choices=("thread", "sync"))

Ranges are intervals in the usual notation: ``[`` / ``]`` include the bound, ``(`` / ``)`` exclude it, ``inf`` is
unbounded; ``"any"`` says a number may take any finite value (declared, so that an undeclared number is a defect a
test finds). ``null`` passes wherever the field's type is Optional. :func:`check_declared` checks a composed node
against its schema's declarations (``rlrun.config.validate`` calls it for every group before anything starts) and
raises :class:`~rlrun.errors.ConfigError` with one line naming the key, the value and what it may be. The same
metadata feeds the generated config reference (:func:`describe`).

This module imports nothing heavy: ``rlrun --help`` and the schemas load it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from omegaconf import MISSING

from rlrun.errors import ConfigError

_INTERVAL = re.compile(r"^\s*([\[(])\s*([^,\s]+)\s*,\s*([^,\s]+)\s*([\])])\s*$")


@dataclass(frozen=True)
class Interval:
    """A real interval; ``low``/``high`` may be infinite. ``any_value``: every finite number."""

    low: float
    high: float
    low_closed: bool
    high_closed: bool
    text: str

    @classmethod
    def parse(cls, text: str) -> Interval:
        if text.strip() == "any":
            return cls(-math.inf, math.inf, False, False, "any")
        m = _INTERVAL.match(text)
        if m is None:
            raise ValueError(f"range {text!r}: not an interval such as '[0, 1]', '(0, inf)' or 'any'")
        low, high = float(m.group(2)), float(m.group(3))
        if low > high:
            raise ValueError(f"range {text!r}: the low bound is above the high bound")
        return cls(low, high, m.group(1) == "[", m.group(4) == "]", text.strip())

    def __contains__(self, x: float) -> bool:
        if not math.isfinite(x):
            return False
        above = x >= self.low if self.low_closed else x > self.low
        below = x <= self.high if self.high_closed else x < self.high
        return above and below

    def describe(self) -> str:
        """``>= 1``, ``> 0``, ``in (0, 1]``, ``finite``: how an error message says the range."""
        if self.text == "any":
            return "a finite number"
        if math.isinf(self.high):
            return f"{'>=' if self.low_closed else '>'} {_num(self.low)}"
        if math.isinf(self.low):
            return f"{'<=' if self.high_closed else '<'} {_num(self.high)}"
        return f"in {self.text}"

    def outside(self) -> list[float]:
        """Values just outside the interval (for tests that try every declared bound)."""
        out: list[float] = []
        if math.isfinite(self.low):
            out.append(self.low if not self.low_closed else self.low - 1.0)
        if math.isfinite(self.high):
            out.append(self.high if not self.high_closed else self.high + 1.0)
        return out


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def key(default: Any = MISSING, range: str | None = None, *, factory: Callable[[], Any] | None = None,
        items: str | None = None, choices: tuple[Any, ...] | None = None) -> Any:
    """A schema field with its declaration: ``range`` (numbers), ``items`` (the range of every element of a list)
    or ``choices`` (the values a key may take). Use as the field's default: ``gamma: float = key(0.99, "(0, 1]")``."""
    metadata: dict[str, Any] = {}
    if range is not None:
        metadata["range"] = Interval.parse(range)
    if items is not None:
        metadata["items"] = Interval.parse(items)
    if choices is not None:
        metadata["choices"] = tuple(choices)
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def declaration(f: dataclasses.Field) -> dict[str, Any]:
    """The declaration of a schema field: ``{"range": Interval, "items": Interval, "choices": tuple}`` (some)."""
    return {k: f.metadata[k] for k in ("range", "items", "choices") if k in f.metadata}


def is_number_field(schema: type, f: dataclasses.Field) -> bool:
    """True for int and float fields (Optional included, bool excluded): the fields that must declare a range."""
    t = _field_type(schema, f)
    args = [a for a in typing.get_args(t) if a is not type(None)] if typing.get_origin(t) is typing.Union else [t]
    return len(args) == 1 and args[0] in (int, float)


def is_number_list_field(schema: type, f: dataclasses.Field) -> bool:
    """True for list[int] / list[float] fields: they declare ``items``."""
    t = _field_type(schema, f)
    return typing.get_origin(t) is list and typing.get_args(t)[:1] in ((int,), (float,))


def _field_type(schema: type, f: dataclasses.Field) -> Any:
    hints = typing.get_type_hints(schema)
    return hints.get(f.name, f.type)


def check_declared(schema: type, values: dict[str, Any], prefix: str) -> None:
    """Check resolved ``values`` (a plain dict of a node) against ``schema``'s declarations, nested schemas
    included; raise ConfigError naming the first key out of its range or choices."""
    for f in dataclasses.fields(schema):
        if f.name not in values:
            continue
        value = values[f.name]
        where = f"{prefix}.{f.name}" if prefix else f.name
        nested = _field_type(schema, f)
        if dataclasses.is_dataclass(nested) and isinstance(value, dict):
            check_declared(nested, value, where)
            continue
        if value is None:
            continue
        decl = declaration(f)
        if "range" in decl and _is_number(value) and value not in decl["range"]:
            raise ConfigError(f"{where}={value}: must be {decl['range'].describe()}{_null_note(schema, f)}. "
                              f"{_doc_hint(schema, f)}".rstrip())
        if "items" in decl and isinstance(value, (list, tuple)):
            bad = [v for v in value if _is_number(v) and v not in decl["items"]]
            if bad:
                raise ConfigError(f"{where}={list(value)}: every element must be {decl['items'].describe()} "
                                  f"({bad[0]} is not). {_doc_hint(schema, f)}".rstrip())
        if "choices" in decl:
            listed = isinstance(value, (list, tuple))
            bad = [v for v in (value if listed else [value]) if v not in decl["choices"]]
            if bad:
                what = "every element must be one of" if listed else "must be one of"
                raise ConfigError(f"{where}={list(value) if listed else value}: {what} "
                                  f"{', '.join(map(str, decl['choices']))}. {_doc_hint(schema, f)}".rstrip())


class Declared:
    """Base of the schemas: an instance checks its declared ranges and choices when it is made (by the CLI's
    ``OmegaConf.to_object``, by ``dataclasses.replace`` or by a user's ``PPOConfig(lr=...)``), so a component built
    from a schema object never sees a value outside them. ``key_prefix`` names the node in messages (``algo``)."""

    key_prefix: ClassVar[str] = ""

    def __post_init__(self) -> None:
        check_declared(type(self), {f.name: getattr(self, f.name) for f in dataclasses.fields(self)},  # type: ignore[arg-type]
                       self.key_prefix)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _null_note(schema: type, f: dataclasses.Field) -> str:
    t = _field_type(schema, f)
    optional = typing.get_origin(t) is typing.Union and type(None) in typing.get_args(t)
    return " (or null)" if optional else ""


def _doc_hint(schema: type, f: dataclasses.Field) -> str:
    """The first sentence of the field's docstring, where the schema has one (what the key is for)."""
    doc = field_docs(schema).get(f.name, "")
    first = _SENTENCE_END.split(doc, maxsplit=1)[0].strip().rstrip(".")
    if len(first) > 100:
        first = first[:100].rsplit(" ", 1)[0].rstrip(",;:(") + " ..."
    return f"({first}.)" if first else ""


_SENTENCE_END = re.compile(r"(?<!\bal)(?<!e\.g)(?<!i\.e)(?<!\bvs)\.\s")
_DOCS: dict[type, dict[str, str]] = {}


def field_docs(schema: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass schema (the string literal right below a field), by field name,
    inherited ones included."""
    if schema in _DOCS:
        return _DOCS[schema]
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(schema.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for a, b in zip(body, body[1:], strict=False):
            if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr)
                    and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)):
                docs[a.target.id] = " ".join(b.value.value.split())
    _DOCS[schema] = docs
    return docs


def describe(schema: type) -> list[dict[str, Any]]:
    """One row per field: name, type, default, allowed values, doc (for a config reference and ``--help``)."""
    rows = []
    docs = field_docs(schema)
    for f in dataclasses.fields(schema):
        decl = declaration(f)
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            default = None
        allowed = (decl["range"].text if "range" in decl else f"each {decl['items'].text}" if "items" in decl
                   else " | ".join(map(str, decl["choices"])) if "choices" in decl else "")
        rows.append({"key": f.name, "type": getattr(_field_type(schema, f), "__name__", str(f.type)),
                     "default": default, "allowed": allowed, "doc": docs.get(f.name, "")})
    return rows
