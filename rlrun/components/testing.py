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
             rtol: float | None = None, atol: float | None = None, **kwargs: Any) -> Any:
        method = getattr(self.component, api_name)
        if not getattr(method, "_rlrun_api", False):
            raise AssertionError(f"{self.component.name}.{api_name} is not a declared API method; declared: "
                                 f"{', '.join(self.component.api_methods())}")
        params = list(inspect.signature(method).parameters.values())
        for p in params[len(args):]:
            if p.name not in kwargs and p.name in self.input_spaces and p.default is inspect.Parameter.empty:
                kwargs[p.name] = self.sample(p.name)
        with trace() as t:
            out = method(*args, **kwargs)
        self.calls = t.calls
        if t.violations:
            raise AssertionError("component boundary violated: " + "; ".join(t.violations))
        space = self.component.output_spaces.get(api_name)
        if check_output and space is not None and isinstance(out, torch.Tensor):
            sp.check(space, out, batch_ranks=len(self.batch_shape), where=f"{self.component.name}.{api_name}()")
        if expected is not None:
            torch.testing.assert_close(out, expected, rtol=rtol, atol=atol)
        return out
