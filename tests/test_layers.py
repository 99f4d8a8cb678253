"""The import graph of rlrun (every import, at the top of a module or inside a function): floors that match folders,
no import from a lower floor to a higher one, no cycle, algorithms as siblings, no private name across modules."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rlrun"

# Floors, lowest first: a module may import its own floor and the floors below, never one above.
FLOORS: list[tuple[str, ...]] = [
    ("errors", "spaces", "fingerprint", "schema", "registry", "reporting", "hydra_search_path", "conf", "redact",
     "metric_names", "evaluation_stats"),
    ("ops", "algos.config", "config", "plain_data"),
    ("components",),
    ("envs", "devices"),
    ("execution",),
    ("algos",),
    ("checkpoint", "logging", "export", "agent"),
    ("app", "__init__"),
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every absolute rlrun import in the file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("rlrun")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("rlrun"):
            module = node.module or ""
            for a in node.names:  # `from rlrun.app import sweep` imports the module rlrun.app.sweep
                sub = f"{module}.{a.name}"
                out.append((sub, []) if sub in MODULES else (module, [a.name]))
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, path in MODULES.items():
        for target, _ in _imports(path):
            t = _resolve(target)
            if t and t != m:
                graph[m].add(t)
    return graph


def _floor(module: str) -> int:
    rest = module.removeprefix("rlrun").lstrip(".") or "__init__"
    parts = rest.split(".")
    key = "algos.config" if parts[0] == "algos" and len(parts) > 1 and parts[1].endswith("_config") else parts[0]
    for i, names in enumerate(FLOORS):
        if key in names:
            return i
    raise AssertionError(f"{module}: no floor; add its package or module to FLOORS in tests/test_layers.py")


def test_every_module_has_a_floor_and_no_import_goes_up() -> None:
    up = [f"{a} (floor {_floor(a)}) imports {b} (floor {_floor(b)})"
          for a, targets in _graph().items() for b in targets
          if _floor(b) > _floor(a) and not (a == "rlrun" and b == "rlrun.agent")]  # the package's public API
    assert up == []


def test_the_import_graph_has_no_cycle() -> None:
    graph, state, cycles = _graph(), {}, []

    def visit(v: str, path: list[str]) -> None:
        state[v] = "open"
        for w in sorted(graph[v]):
            if state.get(w) == "open":
                cycles.append(" -> ".join([*path[path.index(w):], w]))
            elif w not in state:
                visit(w, [*path, w])
        state[v] = "done"

    for v in sorted(graph):
        if v not in state:
            visit(v, [v])
    assert cycles == []


def test_algorithms_are_siblings() -> None:
    """An algorithm imports shared pieces from components/ops, its own schema and the algorithm bases (base: every
    plan; on_policy: the actor-critic agent and plan PPO, A2C and TRPO share; off_policy_continuous: the agent base and
    plan SAC, TD3 and DDPG share; offline: the plan BC, IQL and CQL share); another algorithm only where it is a true
    subclass (APPO of IMPALA; Ape-X's learner, C51's and QR-DQN's agents of DQN's; Rainbow of C51; CQL's agent of
    SAC's)."""
    bases = {"rlrun.algos.base", "rlrun.algos.on_policy", "rlrun.algos.off_policy_continuous", "rlrun.algos.offline"}
    allowed = {("rlrun.algos.appo", "rlrun.algos.impala"), ("rlrun.algos.apex", "rlrun.algos.dqn"),
               ("rlrun.algos.c51", "rlrun.algos.dqn"), ("rlrun.algos.qrdqn", "rlrun.algos.dqn"),
               ("rlrun.algos.rainbow", "rlrun.algos.c51"), ("rlrun.algos.cql", "rlrun.algos.sac")}
    crossing = []
    for m, targets in _graph().items():
        if not m.startswith("rlrun.algos.") or m.endswith("_config"):
            continue
        for t in targets:
            if (t.startswith("rlrun.algos.") and t not in bases and not t.endswith("_config")
                    and (m, t) not in allowed):
                crossing.append(f"{m} imports {t}")
    assert crossing == []


def test_no_private_name_is_imported_across_modules() -> None:
    private = [f"{m} imports {n} from {t}" for m, path in MODULES.items() for t, names in _imports(path)
               for n in names if n.startswith("_") and not n.startswith("__")]
    assert private == []


def test_capabilities_are_declared_not_probed() -> None:
    """rlrun reads what an agent can do from its class (learns_from, routes_updates), never with hasattr/getattr
    probes for those capabilities."""
    probes = [f"{m}: {needle}" for m, path in MODULES.items() for needle in
              ('hasattr(agent, "update_strategy")', 'getattr(component, "learns_from_rollouts"',
               'getattr(component, "observe"') if needle in path.read_text()]
    assert probes == []


def test_imports_inside_functions_say_why() -> None:
    """An import of an rlrun module inside a function hides an edge of the graph from a reader: it needs a reason,
    in a comment on its line or the line above, or for the whole module in a comment that starts with
    ``# Imports inside functions:`` (the command line's start-up cost)."""
    silent = []
    for m, path in MODULES.items():
        lines = path.read_text().split("\n")
        if any(line.startswith("# Imports inside functions:") for line in lines):
            continue
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in ast.walk(node):
                names = ([a.name for a in n.names] if isinstance(n, ast.Import)
                         else [n.module or ""] if isinstance(n, ast.ImportFrom) and n.level == 0 else [])
                if any(name.startswith("rlrun") for name in names):
                    here, above = lines[n.lineno - 1], lines[n.lineno - 2].strip()
                    if "#" not in here and not above.startswith("#"):
                        silent.append(f"{m}:{n.lineno}: {here.strip()}")
    assert silent == []
