"""ComponentTest: build any component alone from input spaces and call its API with samples drawn from them.

    test = ComponentTest(MLP([32]), {"obs": Box(-1, 1, (4,))}, batch_shape=(8,))
    out = test.call("forward")                      # obs sampled from its space, [8, 4]
    test.call("forward", obs=my_obs, expected=ref)  # given values, compared with a reference

Every call runs under ``trace()``: an API call that reaches past a direct sub-component fails the test, and the
output is checked against the API's declared output space (with the batch ranks).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, trace


class ComponentTest:
    def __init__(self, component: Component, input_spaces: dict[str, sp.Space] | None = None,
                 batch_shape: tuple[int, ...] = (4,), seed: int = 0, device: str | torch.device = "cpu",
                 sample_spaces: dict[str, sp.Space] | None = None) -> None:
        """``input_spaces`` build the component; ``sample_spaces`` only describe further API arguments to sample
        (e.g. episode-start flags), without being passed to ``build``."""
        self.component = component
        self.input_spaces = {**dict(sample_spaces or {}), **dict(input_spaces or {})}
        build_spaces = dict(input_spaces or {})
        self.batch_shape = tuple(batch_shape)
        self.rng = np.random.default_rng(seed)
        self.device = torch.device(device)
        torch.manual_seed(seed)
        if not component.built:
            component.build(**build_spaces)
        component.to(self.device)
        self.calls: list[Any] = []

    def sample(self, name: str, batch_shape: tuple[int, ...] | None = None) -> Any:
        """A torch value of input ``name``'s space with the test's (or the given) batch ranks."""
        space = self.input_spaces[name]
        shape = self.batch_shape if batch_shape is None else batch_shape
        return sp.to_torch(space, sp.sample(space, shape, self.rng), self.device)

    def call(self, api_name: str, *args: Any, expected: Any = None, check_output: bool = True,
             output_batch_ranks: int | None = None, rtol: float | None = None, atol: float | None = None,
             **kwargs: Any) -> Any:
        """Call an API method (arguments not given are sampled from their spaces) and check its output against
        the declared output space with the test's batch ranks, or ``output_batch_ranks`` where the API returns
        another number of leading ranks (e.g. a whole ``[T, B]`` rollout from a test with ``batch_shape=(B,)``)."""
        method = getattr(self.component, api_name)
        if not getattr(method, "_rlrun_api", False):
            raise AssertionError(f"{self.component.name}.{api_name} is not a declared API method; declared: "
                                 f"{', '.join(self.component.api_methods())}")
        params = list(inspect.signature(method).parameters.values())
        for p in params[len(args):]:
            if p.name not in kwargs and p.name in self.input_spaces and p.default is inspect.Parameter.empty:
                kwargs[p.name] = self.sample(p.name)
        with trace() as t:  # the method looked up again: tracing installs its recorder for the block
            out = getattr(self.component, api_name)(*args, **kwargs)
        self.calls = t.calls
        if t.violations:
            raise AssertionError("component boundary violated: " + "; ".join(t.violations))
        space = self.component.output_spaces.get(api_name)
        if check_output and space is not None:
            ranks = len(self.batch_shape) if output_batch_ranks is None else output_batch_ranks
            self._check_output(space, out, f"{self.component.name}.{api_name}()", ranks)
        if expected is not None:
            torch.testing.assert_close(out, expected, rtol=rtol, atol=atol)
        return out

    def _check_output(self, space: sp.Space, out: Any, where: str, ranks: int) -> None:
        """Every leaf of ``out`` fits its leaf of ``space`` with the test's batch ranks; a scalar leaf space may
        also hold a value reduced over the batch (a loss). Leaves that are not tensors are not checked."""
        if isinstance(out, torch.Tensor) and not sp.is_nested(space):
            sp.check(space, out, batch_ranks=ranks, where=where)
            return
        if not sp.is_nested(space):
            return
        leaves = sp.flatten_space(space)
        for key, value in sp.flatten(space, out).items():
            if not isinstance(value, torch.Tensor):
                continue
            leaf, name = leaves[key], f"{where}[{key}]"
            reduced = sp.shape(leaf) == () and value.dim() == 0
            sp.check(leaf, value, batch_ranks=0 if reduced else ranks, where=name)
