"""The component graph of a built component: its tree (spaces, devices), the build edges, and traced API calls.

``graph_text`` is what ``rlrun graph`` prints; ``graph_dot`` writes the same as Graphviz dot (render with
``dot -Tpng``); ``trace_calls`` records which component calls which API of whom for a sample input.
"""

from __future__ import annotations

from typing import Any, Callable

from rlrun import spaces as sp
from rlrun.components.base import Call, Component, trace


def _walk(c: Component, depth: int = 0) -> list[tuple[int, Component]]:
    out = [(depth, c)]
    for child in c._sub_components():
        out += _walk(child, depth + 1)
    return out


def _params(c: Component) -> int:
    return sum(p.numel() for p in c.parameters())


def graph_text(root: Component, calls: list[Call] | None = None) -> str:
    lines = []
    for depth, c in _walk(root):
        pad = "  " * depth
        ins = ", ".join(f"{k}: {sp.describe(s)}" for k, s in c.input_spaces.items()) or "-"
        lines.append(f"{pad}{c.name} [{type(c).__name__}] on {c.device}, {_params(c):,} parameters")
        lines.append(f"{pad}  in:  {ins}")
        for api_name, space in c.output_spaces.items():
            lines.append(f"{pad}  out: {api_name} -> {sp.describe(space)}")
        if c.api_methods():
            lines.append(f"{pad}  api: {', '.join(c.api_methods())}")
    lines.append("")
    lines.append("edges (output -> input: space):")
    for _, c in _walk(root):
        for e in c.edges:
            lines.append(f"  {e.source} -> {e.target}.{e.input}: {e.space}")
    if calls:
        lines.append("")
        lines.append("calls:")
        for call in calls:
            lines.append(f"  {call.caller} -> {call.callee}.{call.method}({', '.join(call.args)})")
    return "\n".join(lines) + "\n"


def graph_dot(root: Component) -> str:
    def node_id(name: str) -> str:
        return '"' + name.replace('"', "'") + '"'

    lines = ["digraph rlrun {", "  rankdir=LR;", "  node [shape=box, fontname=Helvetica];"]
    counter = [0]

    def cluster(c: Component, depth: int) -> None:
        children = c._sub_components()
        label = f"{c.name}\\n[{type(c).__name__}] {c.device}"
        if not children:
            lines.append(f"{'  ' * depth}{node_id(c.name)} [label=\"{label}\"];")
            return
        counter[0] += 1
        lines.append(f"{'  ' * depth}subgraph cluster_{counter[0]} {{ label=\"{label}\";")
        lines.append(f"{'  ' * depth}  {node_id(c.name)} [shape=point, label=\"\"];")
        for child in children:
            cluster(child, depth + 1)
        lines.append(f"{'  ' * depth}}}")

    cluster(root, 1)
    for _, c in _walk(root):
        for e in c.edges:
            src = e.source.split(".")[0] if e.source != "<input>" else c.name
            lines.append(f"  {node_id(src)} -> {node_id(e.target)} [label=\"{e.input}: {e.space}\"];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def trace_calls(fn: Callable[[], Any]) -> tuple[Any, list[Call], list[str]]:
    """Run ``fn`` under tracing; return its result, the API calls and any boundary violations."""
    with trace() as t:
        out = fn()
    return out, t.calls, t.violations
