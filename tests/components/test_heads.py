"""Tests for rlrun.components.heads: QHead, DuelingQHead (+ the pure dueling_q), PolicyValueHead.

Each head is built alone from the spaces ``x`` (torso features) and ``actions`` with ComponentTest.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_all_grads, n_params
from torch import nn
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.base import ComponentBuildError
from rlrun.components.distributions import Categorical, DiagGaussian, make_distribution
from rlrun.components.heads import DuelingQHead, PolicyValueHead, QHead, dueling_q
from rlrun.components.testing import ComponentTest

X = sp.Box(-np.inf, np.inf, (16,), np.float32)



# --------------------------------------------------------------------------------------------------- Q heads


@pytest.mark.parametrize("batch_shape", [(4,), (2, 3)])
def test_q_head_shapes(batch_shape):
    """16 features, 5 actions: 16*5 + 5 = 85 parameters."""
    head = QHead()
    q = ComponentTest(head, {"x": X, "actions": sp.Discrete(5)}, batch_shape=batch_shape).call("get_q")
    assert q.shape == (*batch_shape, 5) and n_params(head) == 85


@pytest.mark.parametrize("aggregation,expected", [("mean", [0.0, 1.0, 2.0]), ("max", [-1.0, 0.0, 1.0])])
def test_dueling_q_hand_example(aggregation, expected):
    """V = 1, A = [1, 2, 3]. Eq. 9: mean A = 2 -> Q = 1 + [1, 2, 3] - 2 = [0, 1, 2].
    Eq. 8: max A = 3 -> Q = 1 + [1, 2, 3] - 3 = [-1, 0, 1]."""
    q = dueling_q(torch.tensor([1.0]), torch.tensor([[1.0, 2.0, 3.0]]), aggregation)
    assert_close(q, torch.tensor([expected]))


@pytest.mark.parametrize("aggregation", ["mean", "max"])
def test_dueling_q_identity_and_value(aggregation):
    """Shifting each item's advantages by a constant leaves Q unchanged; V is the mean (Eq. 9) or max (Eq. 8)
    of Q over the actions."""
    g = torch.Generator().manual_seed(0)
    value, adv = torch.randn(2, 3, generator=g), torch.randn(2, 3, 4, generator=g)
    shift = torch.randn(2, 3, 1, generator=g) * 10
    q = dueling_q(value, adv, aggregation)
    assert_close(dueling_q(value, adv + shift, aggregation), q)
    reduce = q.mean(-1) if aggregation == "mean" else q.amax(-1)
    assert_close(reduce, value)
    with pytest.raises(ValueError, match="one of mean, max"):
        dueling_q(value, adv, "sum")


@pytest.mark.parametrize("hidden", [0, 8])
@pytest.mark.parametrize("aggregation", ["mean", "max"])
@pytest.mark.parametrize("batch_shape", [(4,), (2, 3)])
def test_dueling_head(hidden, aggregation, batch_shape):
    """Parameters with 16 features, 5 actions: linear streams V 16 + 1 = 17, A 16*5 + 5 = 85 -> 102; with 8-wide
    hidden layers: V (16*8 + 8) + (8 + 1) = 145, A 136 + (8*5 + 5) = 181 -> 326.
    Adding a constant to the advantage stream's output bias shifts every advantage equally: Q is unchanged."""
    head = DuelingQHead(hidden, aggregation)
    test = ComponentTest(head, {"x": X, "actions": sp.Discrete(5)}, batch_shape=batch_shape)
    assert n_params(head) == (326 if hidden else 102)
    x = test.sample("x")
    q = test.call("get_q", x=x)
    assert q.shape == (*batch_shape, 5) and q.dtype == torch.float32
    out_layer = head.advantage if not hidden else head.advantage[-1]
    with torch.no_grad():
        out_layer.bias += 3.0
    test.call("get_q", x=x, expected=q, rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # while a change to one action's advantage does change Q (the test can fail)
        out_layer.bias[0] += 3.0
    assert not torch.allclose(test.call("get_q", x=x), q)
    actions = torch.randint(0, 5, batch_shape)
    q = test.call("get_q", x=x)
    q.gather(-1, actions.unsqueeze(-1)).pow(2).sum().backward()
    assert_all_grads(head)


# --------------------------------------------------------------------------------------------------- policy-value


ACTION_SPACES = [sp.Discrete(6), sp.Discrete(3, start=-1), sp.Box(-1, 1, (3,), np.float32),
                 sp.Box(-2, 2, (2, 2), np.float32), sp.Box(-1, 1, (), np.float32)]


@pytest.mark.parametrize("actions", ACTION_SPACES, ids=sp.describe)
@pytest.mark.parametrize("batch_shape", [(4,), (2, 3)])
@pytest.mark.parametrize("orthogonal_init", [False, True])
def test_policy_value_head(actions, batch_shape, orthogonal_init):
    """Outputs fit the declared spaces; the distribution from the params has the batch shape; gradients of a
    PPO-like loss (log-prob, entropy, value) reach every parameter, the Gaussian's log-std included."""
    head = PolicyValueHead(init_log_std=-0.5, orthogonal_init=orthogonal_init)
    test = ComponentTest(head, {"x": X, "actions": actions}, batch_shape=batch_shape)
    x = test.sample("x")
    params, value = test.call("forward", x=x)
    sp.check(head.output_spaces["forward"], (params, value), batch_ranks=len(batch_shape))
    assert value.shape == batch_shape
    dist = make_distribution(actions, test.call("get_policy", x=x))
    if isinstance(actions, sp.Discrete):
        assert isinstance(dist, Categorical) and params.shape == (*batch_shape, actions.n)
    else:
        assert isinstance(dist, DiagGaussian) and params[0].shape == (*batch_shape, *actions.shape)
        assert_close(params[1], torch.full_like(params[1], -0.5))  # state-independent, initialised as asked
    a = test.sample("actions")
    sp.check(actions, dist.sample(), batch_ranks=len(batch_shape))
    logp = dist.log_prob(a)
    assert logp.shape == batch_shape
    (-(logp * torch.randn(batch_shape)).mean() - 0.01 * dist.entropy().mean()
     + (test.call("get_value", x=x) - 1.0).pow(2).mean()).backward()
    assert_all_grads(head)


def test_policy_value_head_parameter_counts():
    """16 features. Discrete(6): logits 16*6 + 6 = 102, value 16 + 1 = 17 -> 119.
    Box(2, 2): mean 16*4 + 4 = 68, log-std 4, value 17 -> 89."""
    assert n_params(PolicyValueHead().build(x=X, actions=sp.Discrete(6))) == 119
    assert n_params(PolicyValueHead().build(x=X, actions=sp.Box(-1, 1, (2, 2), np.float32))) == 89


@pytest.mark.parametrize("actions", [sp.Discrete(6), sp.Box(-1, 1, (3,), np.float32)], ids=sp.describe)
def test_policy_value_head_orthogonal_init(actions):
    """Orthogonal rows scaled by the gain: W W^T = gain^2 I (policy gain 0.01, value gain 1), zero biases."""
    head = PolicyValueHead(orthogonal_init=True).build(x=X, actions=actions)
    w = head.policy.weight
    assert_close(w @ w.T, 1e-4 * torch.eye(w.shape[0]), atol=1e-7, rtol=0)
    assert_close(head.value.weight.norm(), torch.tensor(1.0))
    assert not head.policy.bias.any() and not head.value.bias.any()
    default = PolicyValueHead().build(x=X, actions=actions)
    assert not torch.allclose(default.policy.weight @ default.policy.weight.T, 1e-4 * torch.eye(w.shape[0]))


def test_policy_head_log_std_is_state_independent():
    head = PolicyValueHead(init_log_std=0.3)
    test = ComponentTest(head, {"x": X, "actions": sp.Box(-1, 1, (2,), np.float32)}, batch_shape=(5,))
    with torch.no_grad():
        head.log_std.copy_(torch.tensor([0.1, -0.2]))
    mean, log_std = test.call("get_policy")
    assert_close(log_std, torch.tensor([[0.1, -0.2]]).expand(5, 2))
    assert mean.std(dim=0).min() > 0  # the mean does depend on x


@pytest.mark.parametrize("cls,name", [(DuelingQHead, "dueling_q_head"), (PolicyValueHead, "policy_value_head"),
                                      (QHead, "q_head")])
@pytest.mark.parametrize("key,x,actions", [
    ("x", sp.Box(-1, 1, (2, 8), np.float32), sp.Discrete(4)),
    ("x", sp.Box(0, 9, (8,), np.int64), sp.Discrete(4)),
    ("actions", X, sp.MultiBinary(3)),
    ("actions", X, sp.Dict({"a": sp.Discrete(2)})),
])
def test_head_build_errors_name_component_and_input(cls, name, key, x, actions):
    with pytest.raises(ComponentBuildError) as e:
        cls().build(x=x, actions=actions)
    assert f"{name}.{key}" in str(e.value)
    assert sp.describe(x if key == "x" else actions) in str(e.value)


def test_heads_reject_continuous_or_integer_actions_where_unsupported():
    box = sp.Box(-1, 1, (2,), np.float32)
    with pytest.raises(ComponentBuildError, match=r"dueling_q_head\.actions expects Discrete"):
        DuelingQHead().build(x=X, actions=box)
    with pytest.raises(ComponentBuildError, match=r"policy_value_head\.actions expects a floating-point"):
        PolicyValueHead().build(x=X, actions=sp.Box(0, 3, (2,), np.int64))


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
