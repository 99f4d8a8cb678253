"""``device.compile``: torch.compile of an agent's networks, falling back to eager execution where compiling fails."""

from __future__ import annotations

import logging
import warnings
from typing import Any, Callable

import torch

log = logging.getLogger(__name__)


class CompiledOrEager:
    """A ``torch.compile``d function that falls back to the eager one, with a warning, the first time compiling
    or running it fails (e.g. no C++ compiler for the CPU backend, an unsupported op or platform)."""

    def __init__(self, fn: Callable[..., Any], name: str, **compile_kwargs: Any) -> None:
        self.eager, self.name = fn, name
        try:
            self.compiled: Callable[..., Any] | None = torch.compile(fn, **compile_kwargs)
        except Exception as e:  # noqa: BLE001 - any failure means: run eagerly
            self._fall_back(e)

    def _fall_back(self, error: BaseException) -> None:
        self.compiled = None
        warnings.warn(f"device.compile: torch.compile of {self.name} is not supported here "
                      f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}); "
                      f"running it eagerly", RuntimeWarning, stacklevel=3)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.compiled is not None:
            try:
                return self.compiled(*args, **kwargs)
            except Exception as e:  # noqa: BLE001
                self._fall_back(e)
        return self.eager(*args, **kwargs)


def compile_networks(agent: Any, **compile_kwargs: Any) -> list[str]:
    """``torch.compile`` the ``forward`` of each direct sub-component of ``agent`` that has parameters (its networks,
    target networks included: used by acting and by the update, forward and backward); return their names.
    ``compile_kwargs`` go to ``torch.compile`` (e.g. ``backend="eager"`` to check the tracing alone)."""
    names = []
    for child in agent._sub_components():
        if any(True for _ in child.parameters()):
            child.__dict__["forward"] = CompiledOrEager(child.forward, f"{child.name}.forward", **compile_kwargs)
            names.append(child.name)
    return names
