"""The Component: an ``nn.Module`` with declared API methods that builds itself from input spaces (RLgraph's idea).

- ``@api`` marks the methods other components (and the user) may call. Only API methods cross a component's
  boundary: a component calls its own API and the API of its direct sub-components, nothing deeper.
- ``build(**input_spaces)`` is given the spaces of the component's inputs (keyed by the API parameter names that
  receive them) and creates parameters and buffers in ``_build``; nobody hands a component tensor shapes.
  A component sets ``self.output_spaces[api_name]`` for what its API methods return.
- A parent builds a child with ``self.build_child(child, x=self.torso.output("forward"))``: the input is either a
  space or another component's output port, and the edge (which output feeds which input, with its space) is
  recorded. A mismatch is reported at build time naming both ends, e.g.
  ``q_head.x expects Box(512,) float32 from torso.forward but got Box(256,) float32``.
- ``trace()`` records, while active, every API call (caller, callee, method, argument shapes); the graph of a
  built component (``rlrun.components.graph``) is printed from the build edges and such a trace, and a call
  that skips a level of the tree is reported as a boundary violation. A function handed to an API method (the
  ``loss_fn`` an optimizer module calls) is its giver's code: the calls it makes are the giver's.
- A component is an ``nn.Module`` called as one: ``component(x)`` goes through ``nn.Module.__call__`` to
  ``forward`` (hooks, ``torch.jit.trace`` and profilers see it), and its layers are plain ``nn`` layers.
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator

import torch
from torch import nn

from rlrun import spaces as sp


class ComponentBuildError(ValueError):
    """A component cannot be built from the spaces it was given (names the component and the input)."""


@dataclass(frozen=True)
class Port:
    """The output of one API method of one component, with its space: what a build edge starts from."""

    component: "Component"
    api: str
    space: sp.Space

    def __str__(self) -> str:
        return f"{self.component.name}.{self.api}"


@dataclass
class Edge:
    source: str  # "torso.forward" or "<input>"
    target: str  # "q_head"
    input: str  # the target's input name
    space: str  # described space


@dataclass
class Call:
    caller: str
    callee: str
    method: str
    args: list[str] = field(default_factory=list)


class _Trace:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.violations: list[str] = []
        self.stack: list[Component | None] = []  # the component whose code runs now (None: the user's)


_TRACE: _Trace | None = None


@contextlib.contextmanager
def trace() -> Iterator[_Trace]:
    """Record every API call made inside the block.

    Tracing is installed on demand: while the outermost trace is active every API method of every component class
    is replaced by a recording wrapper, and the plain methods are put back when it ends, so untraced calls run the
    methods as written, with no wrapper frame."""
    global _TRACE
    previous, _TRACE = _TRACE, _Trace()
    installed = _install_recorders() if previous is None else []
    try:
        yield _TRACE
    finally:
        _TRACE = previous
        for cls, name, method in reversed(installed):
            setattr(cls, name, method)


def _describe_arg(a: Any) -> str:
    if isinstance(a, torch.Tensor):
        return f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k}: {_describe_arg(v)}" for k, v in a.items()) + "}"
    if isinstance(a, (tuple, list)):
        return "(" + ", ".join(_describe_arg(v) for v in a) + ")"
    return type(a).__name__


def api(fn: Callable) -> Callable:
    """Declare ``fn`` an API method of its component (it is recorded while a :func:`trace` is active)."""
    fn._rlrun_api = True  # type: ignore[attr-defined]
    return fn


def _component_classes() -> list[type]:
    out, todo = [], [Component]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


def _install_recorders() -> list[tuple[type, str, Callable]]:
    """Wrap every API method defined by a component class in a recorder; returns what to put back."""
    installed = []
    for cls in _component_classes():
        for name, method in list(vars(cls).items()):
            if callable(method) and getattr(method, "_rlrun_api", False):
                installed.append((cls, name, method))
                setattr(cls, name, _recorded(method))
    return installed


def _recorded(fn: Callable) -> Callable:
    """``fn`` recording each call in the active trace: who called whom (a boundary violation when the callee is
    neither the caller itself nor one of its direct sub-components), with the arguments' shapes."""

    @functools.wraps(fn)
    def recorder(self: "Component", *args: Any, **kwargs: Any) -> Any:
        t = _TRACE
        if t is None:
            return fn(self, *args, **kwargs)
        caller = t.stack[-1] if t.stack else None
        if caller is not None and caller is not self and self not in caller._sub_components():
            t.violations.append(f"{caller.name} called {self.name}.{fn.__name__}, which is not its own "
                                f"sub-component's API")
        t.calls.append(Call(caller.name if caller else "<user>", self.name, fn.__name__,
                            [_describe_arg(a) for a in args] + [f"{k}={_describe_arg(v)}" for k, v in kwargs.items()]))
        args = tuple(_callers_code(a, caller) for a in args)
        kwargs = {k: _callers_code(v, caller) for k, v in kwargs.items()}
        t.stack.append(self)
        try:
            return fn(self, *args, **kwargs)
        finally:
            t.stack.pop()

    return recorder


def _callers_code(value: Any, caller: "Component | None") -> Any:
    """A function handed to an API method (an optimizer module's ``loss_fn``) belongs to whoever handed it over:
    the API calls it makes are recorded as that caller's, not as the callee's."""
    if not callable(value) or isinstance(value, (nn.Module, type)):
        return value

    @functools.wraps(value)
    def as_caller(*args: Any, **kwargs: Any) -> Any:
        t = _TRACE
        if t is None:
            return value(*args, **kwargs)
        t.stack.append(caller)
        try:
            return value(*args, **kwargs)
        finally:
            t.stack.pop()

    return as_caller


def _snake(name: str) -> str:
    """NatureCNN -> nature_cnn, LSTMCore -> lstm_core, QHead -> q_head."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


class Component(nn.Module):
    """Base of every rlrun component. Subclasses implement ``_build(**input_spaces)`` and ``@api`` methods.

    A component is an ``nn.Module`` and is used as one: ``component(x)`` runs ``nn.Module.__call__`` (its hooks,
    then ``forward``), sub-components and layers are attributes, and parameters and buffers are registered as
    usual. ``@api`` only marks a method; :func:`trace` records the marked methods while it is active.

    Capabilities an algorithm's root component (its agent) declares, read by rlrun instead of probed:
    ``learns_from`` (how an application's own loop feeds it, rlrun.make_agent: ``"observe"``: transitions given to
    ``observe()``; ``"rollouts"``: time-major steps given to ``update()``; None: only its plan can train it, e.g.
    Ape-X's distributed parts), ``routes_updates`` (its update runs through ``self.update_strategy``, so the
    device strategies ``device=replicas`` and ``device.precision=bf16`` apply to it) and ``autocasts_updates`` (its
    update's loss runs under the autocast set as ``self.update_autocast``: ``device.precision=bf16`` applies, not
    replicas, e.g. where the loss runs over whole unrolls).
    """

    learns_from: ClassVar[str | None] = None
    routes_updates: ClassVar[bool] = False
    autocasts_updates: ClassVar[bool] = False

    def __init__(self, name: str | None = None) -> None:
        super().__init__()
        self.name = name or _snake(type(self).__name__)
        self.input_spaces: dict[str, sp.Space] = {}
        self.output_spaces: dict[str, sp.Space] = {}
        self.edges: list[Edge] = []
        self.built = False

    # ------------------------------------------------------------------ building

    def build(self, **input_spaces: sp.Space) -> "Component":
        """Create parameters and buffers for these input spaces (once; a second build must agree)."""
        if self.built:
            for key, space in input_spaces.items():
                old = self.input_spaces.get(key)
                if old is not None and not sp.same(old, space):
                    raise ComponentBuildError(f"{self.name}.{key} was built for {sp.describe(old)} but is now given "
                                              f"{sp.describe(space)}")
            return self
        self.input_spaces = dict(input_spaces)
        self._build(**input_spaces)
        self.built = True
        return self

    def _build(self, **input_spaces: sp.Space) -> None:
        """Subclasses: create parameters, build sub-components, set ``self.output_spaces``."""

    def build_child(self, child: "Component", **inputs: "sp.Space | Port") -> "Component":
        """Build a sub-component from spaces or from other components' output ports, recording each edge."""
        spaces: dict[str, sp.Space] = {}
        for key, value in inputs.items():
            space = value.space if isinstance(value, Port) else value
            source = str(value) if isinstance(value, Port) else "<input>"
            if child.built and key in child.input_spaces and not sp.same(child.input_spaces[key], space):
                raise ComponentBuildError(
                    f"{child.name}.{key} expects {sp.describe(child.input_spaces[key])} from "
                    f"{self._source_of(child, key)} but got {sp.describe(space)} from {source}")
            spaces[key] = space
            self.edges.append(Edge(source, child.name, key, sp.describe(space)))
        try:
            child.build(**spaces)
        except (ComponentBuildError, sp.SpaceError) as e:
            sources = ", ".join(f"{k} from {v}" for k, v in inputs.items() if isinstance(v, Port))
            raise ComponentBuildError(f"{e}" + (f" (inputs: {sources})" if sources else "")) from None
        return child

    def build_target_copy(self, target: "Component", online: "Component", **inputs: "sp.Space | Port") -> None:
        """Build ``target`` from the inputs ``online`` was built from, start it equal to ``online`` and take it out
        of the gradient: a target network (DQN's Q, SAC's and IQL's critics, TD3's actor and critic)."""
        self.build_child(target, **inputs)
        target.load_state_dict(online.state_dict())
        target.requires_grad_(False)

    def _source_of(self, child: "Component", key: str) -> str:
        for e in self.edges:
            if e.target == child.name and e.input == key:
                return e.source
        return "its first build"

    def output(self, api_name: str) -> Port:
        """The port of one API method's output, to build another component from."""
        if not self.built:
            raise ComponentBuildError(f"{self.name} is not built yet, so {self.name}.{api_name} has no space")
        if api_name not in self.output_spaces:
            raise ComponentBuildError(f"{self.name}.{api_name} declares no output space; declared: "
                                      f"{', '.join(self.output_spaces) or 'none'}")
        return Port(self, api_name, self.output_spaces[api_name])

    def require(self, key: str, space: sp.Space, *, kinds: tuple[type, ...] = (), rank: int | None = None,
                floating: bool | None = None) -> None:
        """Raise a ComponentBuildError unless input ``key``'s space has the given kind, rank and dtype class."""
        if kinds and not isinstance(space, kinds):
            raise ComponentBuildError(f"{self.name}.{key} expects {' or '.join(k.__name__ for k in kinds)} but got "
                                      f"{sp.describe(space)}")
        if rank is not None and len(sp.shape(space)) != rank:
            raise ComponentBuildError(f"{self.name}.{key} expects a rank-{rank} space but got {sp.describe(space)}")
        if floating is not None and sp.dtype(space).is_floating_point != floating:
            kind = "floating-point" if floating else "integer"
            raise ComponentBuildError(f"{self.name}.{key} expects a {kind} space but got {sp.describe(space)}")

    # ------------------------------------------------------------------ structure

    @classmethod
    def api_methods(cls) -> list[str]:
        return sorted(n for n in dir(cls) if getattr(getattr(cls, n, None), "_rlrun_api", False))

    def _sub_components(self) -> list["Component"]:
        return [m for m in self.children() if isinstance(m, Component)]

    def sub_components(self) -> dict[str, "Component"]:
        return {m.name: m for m in self._sub_components()}

    @property
    def device(self) -> torch.device:
        placed = self.__dict__.get("placement")  # set by a device map (rlrun.devices.device_map)
        if placed is not None:
            return placed
        for t in list(self.parameters()) + list(self.buffers()):
            return t.device
        for child in self._sub_components():
            return child.device
        return torch.device("cpu")

    def extra_repr(self) -> str:
        return f"name={self.name!r}"
