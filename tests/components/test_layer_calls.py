"""rlrun.components.layer_calls.apply against the modules' own calls: the same values and gradients for every layer
it shortcuts, and the module's call path wherever a hook or a tracer would see the difference."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.components import layer_calls
from rlrun.components.heads import PolicyValueHead, QHead
from rlrun.components.networks import MLP


def _stack(activation: type[nn.Module], **kw: object) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), activation(**kw), nn.Linear(7, 3), activation(**kw))


@pytest.mark.parametrize("activation, kw", [(nn.ReLU, {}), (nn.Tanh, {}), (nn.ELU, {"alpha": 0.3})])
def test_a_sequence_gives_the_values_and_gradients_of_its_own_call(activation: type[nn.Module],
                                                                   kw: dict) -> None:
    seq = _stack(activation, **kw)
    x = torch.randn(4, 5)
    expected = seq(x)
    expected.square().sum().backward()
    grads = [p.grad.clone() for p in seq.parameters()]
    seq.zero_grad()
    got = layer_calls.apply(seq, x)
    got.square().sum().backward()
    assert torch.equal(got, expected)
    assert all(torch.equal(p.grad, g) for p, g in zip(seq.parameters(), grads, strict=True))


def test_a_single_layer_and_an_unknown_module_in_a_sequence() -> None:
    torch.manual_seed(1)
    lin = nn.Linear(3, 2)
    x = torch.randn(6, 3)
    assert torch.equal(layer_calls.apply(lin, x), lin(x))
    seq = nn.Sequential(nn.Linear(3, 4), nn.Sigmoid(), nn.Dropout(0.0), nn.Linear(4, 2))  # not in the table
    assert torch.equal(layer_calls.apply(seq, x), seq(x))


def test_hooks_on_an_inner_layer_on_the_sequence_and_global_ones_are_called() -> None:
    seq = _stack(nn.ReLU)
    x = torch.randn(2, 5)
    seen: list[str] = []
    handle = seq[2].register_forward_hook(lambda m, i, o: seen.append("inner"))
    out = layer_calls.apply(seq, x)
    handle.remove()
    assert seen == ["inner"] and torch.equal(out, seq(x))
    handle = seq.register_forward_pre_hook(lambda m, i: seen.append("sequence"))
    layer_calls.apply(seq, x)
    handle.remove()
    assert seen == ["inner", "sequence"]
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: seen.append(type(m).__name__))
    try:
        layer_calls.apply(seq, x)
    finally:
        handle.remove()
    assert seen[2:] == ["Linear", "ReLU", "Linear", "ReLU", "Sequential"]
    layer_calls.apply(seq, x)
    assert len(seen) == 7  # no hook left: the shortcut again


def test_a_component_using_it_traces_with_every_layer() -> None:
    mlp = MLP([8, 8]).build(obs=sp.Box(-1.0, 1.0, (3,), "float32"))
    x = torch.randn(2, 3)
    traced = torch.jit.trace(mlp, x)
    assert torch.allclose(traced(x), mlp(x))
    assert sum(1 for n in traced.graph.nodes() if n.kind() == "prim::CallMethod") >= 2  # the layers' calls recorded


def test_heads_give_their_layers_values() -> None:
    x = torch.randn(4, 6)
    q = QHead().build(x=sp.Box(-1.0, 1.0, (6,), "float32"), actions=sp.Discrete(3))
    assert torch.equal(q.get_q(x), q.linear(x))
    pv = PolicyValueHead().build(x=sp.Box(-1.0, 1.0, (6,), "float32"), actions=sp.Discrete(3))
    assert torch.equal(pv.get_policy(x), pv.policy(x))
    assert torch.equal(pv.get_value(x), pv.value(x).squeeze(-1))


def test_parameters_given_by_functional_call_and_parametrized_layers_are_used() -> None:
    """The shortcut reads a layer's parameters where torch.func.functional_call puts them, and leaves a
    parametrized layer (its weight computed on access) to its own call."""
    seq = _stack(nn.ReLU)
    x = torch.randn(3, 5)
    zeros = {name: torch.zeros_like(p) for name, p in seq.named_parameters()}
    assert torch.equal(torch.func.functional_call(seq, zeros, (x,)), torch.zeros(3, 3))
    got = torch.func.functional_call(MLP([4]).build(obs=sp.Box(-1.0, 1.0, (5,), "float32")),
                                     {"layers.0.weight": torch.ones(4, 5), "layers.0.bias": torch.zeros(4)}, (x,))
    assert torch.allclose(got, x.sum(-1, keepdim=True).clamp(min=0).expand(3, 4))
    torch.nn.utils.parametrize.register_parametrization(seq[0], "weight", _Doubled())
    assert torch.equal(layer_calls.apply(seq, x), seq(x))
    plain = _stack(nn.ReLU)
    assert not torch.equal(layer_calls.apply(plain, x), seq(x))  # the doubled weight made a difference


class _Doubled(nn.Module):
    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return 2 * w


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_heads_run_in_float32_on_features_from_an_autocast_torso(dtype: torch.dtype) -> None:
    """Under autocast (device.precision=bf16) a torso's features come out in the lower precision; the heads run
    their layers in float32 on them upcast, so action values and logits are not rounded (on the CPU autocast keeps
    log_softmax in bfloat16); features in float32 go through unchanged."""
    q = QHead()
    q.build(x=sp.Box(-1.0, 1.0, (8,), "float32"), actions=sp.Discrete(3))
    pv = PolicyValueHead()
    pv.build(x=sp.Box(-1.0, 1.0, (8,), "float32"), actions=sp.Discrete(3))
    x = torch.randn(5, 8)
    low = x.to(dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q_out, logits, value = q.get_q(low), pv.get_policy(low), pv.get_value(low)
        rounded = nn.functional.linear(low, q.linear.weight, q.linear.bias)  # what the layer gives under autocast
        plain = q.get_q(x)
    assert rounded.dtype == torch.bfloat16 and plain.dtype == torch.bfloat16  # fp32 features: autocast as before
    assert q_out.dtype == logits.dtype == value.dtype == torch.float32
    exact = low.float()
    assert torch.equal(q_out, nn.functional.linear(exact, q.linear.weight, q.linear.bias))
    assert torch.equal(logits, nn.functional.linear(exact, pv.policy.weight, pv.policy.bias))
    assert torch.equal(value, nn.functional.linear(exact, pv.value.weight, pv.value.bias).squeeze(-1))
    assert not torch.equal(rounded.float(), q_out)  # bf16 rounding would have been visible
