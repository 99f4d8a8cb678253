"""The component core: build from spaces, edges and build errors naming both ends, API tracing and boundaries."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.components.base import Component, ComponentBuildError, api, trace
from rlrun.components.heads import QHead
from rlrun.components.networks import MLP
from rlrun.components.testing import ComponentTest

OBS = sp.Box(-1.0, 1.0, (4,), np.float32)


class Scale(Component):
    def _build(self, x: sp.Space) -> None:
        self.require("x", x, kinds=(sp.Box,), rank=1, floating=True)
        self.weight = nn.Parameter(torch.full(x.shape, 2.0))
        self.output_spaces["apply"] = x

    @api
    def apply(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


class Chain(Component):
    """torso -> scale; a deliberately bad API reaches into the torso's own sub-component."""

    def __init__(self) -> None:
        super().__init__("chain")
        self.torso = MLP([8], name="torso")
        self.scale = Scale("scale")

    def _build(self, obs: sp.Space) -> None:
        self.build_child(self.torso, obs=obs)
        self.build_child(self.scale, x=self.torso.output("forward"))
        self.output_spaces["forward"] = self.scale.output_spaces["apply"]

    @api
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.scale.apply(self.torso(obs))

    @api
    def reach_past(self, obs: torch.Tensor) -> torch.Tensor:
        return self.torso.flatten(obs)  # the torso's sub-component: not Chain's to call


def test_build_creates_parameters_from_spaces_and_records_edges() -> None:
    chain = Chain().build(obs=OBS)
    assert chain.torso.layers[0].in_features == 4 and chain.scale.weight.shape == (8,)
    edges = {(e.source, e.target, e.input, e.space) for e in chain.edges}
    assert ("<input>", "torso", "obs", "Box(4,) float32") in edges
    assert ("torso.forward", "scale", "x", "Box(8,) float32") in edges
    assert Chain.api_methods() == ["forward", "reach_past"]


def test_mismatch_at_build_names_both_ends() -> None:
    head = QHead("q_head")
    parent = Component("agent")
    wide, narrow = MLP([512], name="wide").build(obs=OBS), MLP([256], name="network").build(obs=OBS)
    parent.build_child(head, x=wide.output("forward"), actions=sp.Discrete(2))
    with pytest.raises(ComponentBuildError,
                       match=r"q_head.x expects Box\(512,\) float32 from wide.forward but got Box\(256,\) float32 "
                             r"from network.forward"):
        parent.build_child(head, x=narrow.output("forward"), actions=sp.Discrete(2))


def test_wrong_rank_or_kind_is_a_build_error_naming_the_input() -> None:
    with pytest.raises(ComponentBuildError, match=r"scale.x expects a rank-1 space but got Box\(2, 2\) float32"):
        Scale("scale").build(x=sp.Box(0, 1, (2, 2), np.float32))
    with pytest.raises(ComponentBuildError, match=r"q_head.actions expects Discrete but got Box"):
        QHead().build(x=sp.Box(-1, 1, (3,), np.float32), actions=sp.Box(-1, 1, (1,), np.float32))
    with pytest.raises(ComponentBuildError, match="not built yet"):
        MLP([3]).output("forward")


def test_trace_records_calls_and_flags_boundary_violations() -> None:
    test = ComponentTest(Chain(), {"obs": OBS}, batch_shape=(5,))
    out = test.call("forward")
    assert out.shape == (5, 8)
    assert [(c.caller, c.callee, c.method) for c in test.calls] == [
        ("<user>", "chain", "forward"), ("chain", "torso", "forward"), ("torso", "flatten", "forward"),
        ("chain", "scale", "apply")]
    assert test.calls[3].args == ["float32[5, 8]"]
    with pytest.raises(AssertionError, match="chain called flatten.forward"):
        test.call("reach_past")


def test_component_test_checks_the_declared_output_space() -> None:
    class Liar(Scale):
        @api
        def apply(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, :2]

    with pytest.raises(sp.SpaceError, match=r"liar.apply\(\) has shape \(3, 2\)"):
        ComponentTest(Liar("liar"), {"x": OBS}, batch_shape=(3,)).call("apply")


def test_rebuilding_with_other_spaces_is_refused() -> None:
    mlp = MLP([4]).build(obs=OBS)
    mlp.build(obs=sp.Box(-5, 5, (4,), np.float32))  # same shape and dtype: fine
    with pytest.raises(ComponentBuildError, match=r"mlp.obs was built for Box\(4,\) float32 but is now given"):
        mlp.build(obs=sp.Box(-1, 1, (5,), np.float32))


def test_tracing_is_off_by_default_and_nests() -> None:
    mlp = MLP([4]).build(obs=OBS)
    with trace() as outer:
        with trace() as inner:
            mlp(torch.zeros(1, 4))
        mlp(torch.zeros(1, 4))
    assert len(inner.calls) == 2 and len(outer.calls) == 2


def test_default_names_are_snake_case_with_acronyms() -> None:
    from rlrun.components.base import _snake

    assert [_snake(n) for n in ("NatureCNN", "LSTMCore", "QHead", "ReplayMemory", "MLP")] == [
        "nature_cnn", "lstm_core", "q_head", "replay_memory", "mlp"]


def test_sample_spaces_are_sampled_but_not_built_from() -> None:
    class Gate(Component):
        def _build(self, x: sp.Space) -> None:
            self.output_spaces["apply"] = x

        @api
        def apply(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return x * mask

    test = ComponentTest(Gate("gate"), {"x": OBS}, sample_spaces={"mask": sp.Box(0, 1, (4,), np.float32)})
    assert set(test.component.input_spaces) == {"x"}
    assert test.call("apply").shape == (4, 4)


def test_components_are_called_through_nn_module_call() -> None:
    """A component and its layers run nn.Module's call path: hooks on either (and global module hooks) see every
    call, and torch.jit.trace records the layers' calls."""
    chain = Chain().build(obs=OBS)
    x = torch.randn(2, 4)
    seen: list[str] = []
    handles = [chain.register_forward_hook(lambda m, i, o: seen.append("chain")),
               chain.torso.layers[0].register_forward_pre_hook(lambda m, i: seen.append("linear"))]
    out = chain(x)
    for h in handles:
        h.remove()
    assert seen == ["linear", "chain"] and torch.equal(out, chain(x))
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: seen.append(type(m).__name__))
    try:
        chain.torso(x)
    finally:
        handle.remove()
    assert seen[2:] == ["FlattenObservation", "Linear", "ReLU", "Sequential", "MLP"]
    traced = torch.jit.trace(chain.torso, x)
    assert torch.allclose(traced(x), chain.torso(x))
    assert sum(1 for n in traced.graph.nodes() if n.kind() == "prim::CallMethod") >= 2


def test_api_methods_are_plain_outside_a_trace() -> None:
    """Tracing is installed for the block only: outside it an API method is the function as written (no recording
    wrapper), inside it records, and afterwards it is the plain function again."""
    plain = Chain.__dict__["forward"]
    chain = Chain().build(obs=OBS)
    with trace() as t:
        assert Chain.__dict__["forward"] is not plain
        chain(torch.zeros(1, 4))
    assert Chain.__dict__["forward"] is plain and Scale.__dict__["apply"].__name__ == "apply"
    assert [c.callee for c in t.calls] == ["chain", "torso", "flatten", "scale"]


class Driver(Component):
    """Calls a function it is handed, and (wrongly) an outside component it keeps a plain reference to."""

    def __init__(self, outside: Component) -> None:
        super().__init__("driver")
        self.__dict__["outside"] = outside  # not a sub-component

    @api
    def run(self, fn) -> torch.Tensor:  # noqa: ANN001
        return fn()

    @api
    def reach_out(self, x: torch.Tensor) -> torch.Tensor:
        return self.outside(x)


def test_a_handed_function_runs_as_its_givers_code_but_a_kept_reference_does_not() -> None:
    """A loss callable handed to an optimizer-like module calls components as the code that made it (here the
    user), so no violation; the same call made by the module's own code is one."""
    mlp = MLP([4], name="mlp").build(obs=OBS)
    driver = Driver(mlp)
    x = torch.zeros(2, 4)
    with trace() as t:
        driver.run(lambda: mlp(x))
    assert not t.violations
    assert [(c.caller, c.callee) for c in t.calls][:2] == [("<user>", "driver"), ("<user>", "mlp")]
    with trace() as t:
        driver.reach_out(x)
    assert t.violations == ["driver called mlp.forward, which is not its own sub-component's API"]
