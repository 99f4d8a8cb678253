"""Tests of rlrun.components.policy_losses: PPO, A2C and IMPALA losses against hand-worked examples.

Notation in the docstrings: r = probability ratio exp(logp - old_logp), A = advantage, eps = clip_eps,
V = value estimate, R = return (value target), H = entropy (nats). ln 2 = 0.693147, ln 1.5 = 0.405465.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.policy_losses import (
    a2c_loss,
    a2c_policy_loss,
    impala_loss,
    normalize_advantages,
    ppo_clip_loss,
    ppo_loss,
    ppo_value_loss,
)

LN = math.log
T64 = dict(dtype=torch.float64)
SCALAR = sp.Box(-np.inf, np.inf, (), np.float32)


def t(values, **kw):
    return torch.tensor(values, **{**T64, **kw})


# ----------------------------------------------------------------------------------------------- PPO, pure


@pytest.mark.parametrize("reduction, expected", [("mean", -1.1), ("sum", -2.2), ("none", [-1.2, -1.0])])
def test_ppo_clip_loss_hand_worked(reduction, expected):
    """eps = 0.2, batch of 2, both advantages positive.

    item 0: old_logp = ln 0.4, logp = ln 0.6 -> r = 1.5, A = 1:
        r*A = 1.5, clip(r, 0.8, 1.2)*A = 1.2, min = 1.2 (clipped) -> loss -1.2
    item 1: old_logp = ln 0.5, logp = ln 0.25 -> r = 0.5, A = 2:
        r*A = 1.0, clip(r)*A = 0.8*2 = 1.6, min = 1.0 (unclipped: r < 1 - eps but A > 0) -> loss -1.0
    mean = -1.1, sum = -2.2.
    Gradient (sum) wrt logp: item 0 is clipped -> 0; item 1: d(-r*A)/dlogp = -r*A = -1.0.
    """
    logp = t([LN(0.6), LN(0.25)], requires_grad=True)
    loss = ppo_clip_loss(logp, t([LN(0.4), LN(0.5)]), t([1.0, 2.0]), clip_eps=0.2, reduction=reduction)
    assert_close(loss, t(expected))
    if reduction == "sum":
        loss.backward()
        assert_close(logp.grad, t([0.0, -1.0]))


@pytest.mark.parametrize("adv_sign", [1.0, -1.0])
@pytest.mark.parametrize("ratio", [0.5, 0.79, 0.81, 1.0, 1.19, 1.21, 1.5])
def test_ppo_clipping_engages_only_outside_interval_in_direction_of_advantage(ratio, adv_sign):
    """eps = 0.2, one item, A = +-2, loss = -min(r*A, clip(r, 0.8, 1.2)*A), gradient wrt logp.

    The clipped term is the minimum (so the gradient is zero) exactly when the ratio has left [0.8, 1.2] in the
    direction the advantage pushes it: A > 0 and r > 1.2, or A < 0 and r < 0.8. Everywhere else the gradient is
    that of the unclipped term, d(-r*A)/dlogp = -r*A; e.g. r = 1.5, A = -2: -1.5 * -2 = 3.0 (not clipped).
    The value is -min(r*A, clip(r)*A): e.g. r = 1.5, A = 2 -> -min(3.0, 2.4) = -2.4.
    """
    adv = 2.0 * adv_sign
    logp = t([LN(ratio)], requires_grad=True)
    loss = ppo_clip_loss(logp, t([0.0]), t([adv]), clip_eps=0.2, reduction="sum")
    loss.backward()
    clipped = (adv > 0 and ratio > 1.2) or (adv < 0 and ratio < 0.8)
    expected_grad = 0.0 if clipped else -ratio * adv
    assert_close(logp.grad, t([expected_grad]))
    assert_close(loss, t(-min(ratio * adv, min(max(ratio, 0.8), 1.2) * adv)))
    assert (logp.grad.abs() == 0).item() == clipped


def test_ppo_with_ratio_one_has_the_a2c_policy_gradient():
    """At r = 1 (current policy = collecting policy) the PPO surrogate -r*A and the A2C term -logp*A differ in value
    (-A vs -logp*A) but have the same gradient: d(-r*A) = -r * dlogp * A = -A * dlogp = d(-logp*A).
    Checked on a linear softmax policy over 3 actions, batch of 4, gradients wrt its weights.
    """
    torch.manual_seed(0)
    policy = torch.nn.Linear(3, 3).double()
    obs, actions, adv = torch.randn(4, 3, **T64), torch.tensor([0, 2, 1, 2]), torch.randn(4, **T64)

    def logp():
        return torch.log_softmax(policy(obs), -1).gather(1, actions[:, None]).squeeze(1)

    old = logp().detach()
    ppo = ppo_clip_loss(logp(), old, adv, clip_eps=0.2)
    g_ppo = torch.autograd.grad(ppo, list(policy.parameters()))
    a2c = a2c_policy_loss(logp(), adv)
    g_a2c = torch.autograd.grad(a2c, list(policy.parameters()))
    for a, b in zip(g_ppo, g_a2c, strict=True):
        assert_close(a, b)
    assert_close(ppo, -adv.mean())
    assert not torch.allclose(ppo, a2c)


@pytest.mark.parametrize("clip, expected", [(None, 0.41), (0.5, 0.7225)])
def test_ppo_value_loss_hand_worked(clip, expected):
    """V = [1.0, 3.0], V_old = [2.0, 2.0], R = [0.0, 2.2].

    unclipped: 0.5 * mean((1 - 0)^2, (3 - 2.2)^2) = 0.5 * mean(1, 0.64) = 0.41
    clipped, eps = 0.5: V_clip = V_old + clip(V - V_old, -0.5, 0.5) = [1.5, 2.5]
        item 0: max((1 - 0)^2, (1.5 - 0)^2) = max(1, 2.25) = 2.25   (clipped term wins)
        item 1: max((3 - 2.2)^2, (2.5 - 2.2)^2) = max(0.64, 0.09) = 0.64   (unclipped term wins)
        0.5 * mean(2.25, 0.64) = 0.7225
    Gradient (clipped, mean): item 0 goes through the clipped value, which is constant in V there -> 0;
        item 1: 0.5 * 2 * (3 - 2.2) / 2 = 0.4.
    """
    values = t([1.0, 3.0], requires_grad=True)
    loss = ppo_value_loss(values, t([0.0, 2.2]), t([2.0, 2.0]), clip_eps=clip)
    assert_close(loss, t(expected))
    loss.backward()
    assert_close(values.grad, t([0.0, 0.4]) if clip else t([0.5, 0.4]))


def test_ppo_value_clipping_needs_old_values():
    with pytest.raises(ValueError, match="old_values"):
        ppo_value_loss(t([1.0]), t([0.0]), None, clip_eps=0.2)


def test_normalize_advantages_hand_worked():
    """A = [1, 3]: mean 2, unbiased std sqrt(((1-2)^2 + (3-2)^2) / 1) = sqrt(2) -> [-1/sqrt2, 1/sqrt2].
    A single item is only centred: [5] -> [0]."""
    assert_close(normalize_advantages(t([1.0, 3.0])), t([-1.0, 1.0]) / math.sqrt(2.0))
    assert_close(normalize_advantages(t([5.0])), t([0.0]))


@pytest.mark.parametrize("normalize, policy", [(False, -1.1), (True, 0.353553)])
@pytest.mark.parametrize("vf_clip, value", [(None, 0.41), (0.5, 0.7225)])
def test_ppo_loss_combines_terms(normalize, policy, vf_clip, value):
    """r = [1.5, 0.5] (as above), A = [1, 2], V = [1, 3], V_old = [2, 2], R = [0, 2.2], H = [0.5, 0.7];
    eps = 0.2, c1 = vf_coef = 0.5, c2 = ent_coef = 0.01.

    policy, unnormalised: -1.1 (test_ppo_clip_loss_hand_worked).
    policy, normalised: A -> [1, 2] - 1.5 over unbiased std 0.707107 = [-0.707107, 0.707107]
        item 0: r = 1.5, A < 0: min(1.5 * -0.707107, 1.2 * -0.707107) = -1.060660 -> loss 1.060660
        item 1: r = 0.5, A > 0: min(0.5 * 0.707107, 0.8 * 0.707107) = 0.353553 -> loss -0.353553
        mean = 0.353553
    value: 0.41 unclipped, 0.7225 with vf_clip 0.5 (test_ppo_value_loss_hand_worked).
    total = policy + 0.5 * value - 0.01 * mean(H) = policy + 0.5 * value - 0.006.
    clip fraction: |1.5 - 1| > 0.2 and |0.5 - 1| > 0.2 -> 1.0.
    approx KL = mean((r - 1) - ln r) = mean(0.5 - 0.405465, -0.5 + 0.693147) = mean(0.094535, 0.193147) = 0.143841.
    """
    terms = ppo_loss(t([LN(0.6), LN(0.25)]), t([LN(0.4), LN(0.5)]), t([1.0, 2.0]), t([1.0, 3.0]), t([0.0, 2.2]),
                     entropy=t([0.5, 0.7]), old_values=t([2.0, 2.0]), clip_eps=0.2, vf_clip_eps=vf_clip,
                     vf_coef=0.5, ent_coef=0.01, normalize_advantage=normalize)
    assert_close(terms.policy, t(policy), atol=1e-6, rtol=0)
    assert_close(terms.value, t(value))
    assert_close(terms.entropy, t(0.6))
    assert_close(terms.total, t(policy + 0.5 * value - 0.006), atol=1e-6, rtol=0)
    assert_close(terms.clip_fraction, t(1.0))
    assert_close(terms.approx_kl, t(0.143841), atol=1e-6, rtol=0)


def test_ppo_clip_fraction_counts_ratios_outside_interval():
    """r = [1.0, 1.1, 1.3, 0.7], eps = 0.2: outside [0.8, 1.2] are 1.3 and 0.7 -> clip fraction 2/4 = 0.5."""
    ratios = t([1.0, 1.1, 1.3, 0.7])
    terms = ppo_loss(ratios.log(), torch.zeros(4, **T64), torch.ones(4, **T64), torch.zeros(4, **T64),
                     torch.zeros(4, **T64), normalize_advantage=False)
    assert_close(terms.clip_fraction, t(0.5))


# ----------------------------------------------------------------------------------------------- A2C, pure


@pytest.mark.parametrize("reduction, policy, value, entropy, total", [
    ("mean", 1.386294, 0.5, 0.627741, 1.630017),
    ("sum", 2.772589, 1.0, 1.255482, 3.260033),
    ("none", [1.386294, 1.386294], [0.5, 0.5], [0.693147, 0.562335], [1.629363, 1.630671]),
])
def test_a2c_loss_hand_worked(reduction, policy, value, entropy, total):
    """logp = [ln 0.5, ln 0.25] = [-0.693147, -1.386294], A = [2, 1], V = [0.5, 1.0], R = [1.5, 0.0],
    H = [ln 2, -(0.25 ln 0.25 + 0.75 ln 0.75)] = [0.693147, 0.562335]; vf_coef 0.5, ent_coef 0.01.

    policy  = -logp * A = [0.693147 * 2, 1.386294 * 1] = [1.386294, 1.386294]
    value   = 0.5 * (R - V)^2 = [0.5 * 1, 0.5 * 1] = [0.5, 0.5]
    total   = policy + 0.5 * value - 0.01 * H = [1.386294 + 0.25 - 0.006931, 1.386294 + 0.25 - 0.005623]
            = [1.629363, 1.630671]; mean 1.630017, sum 3.260033.
    """
    terms = a2c_loss(t([LN(0.5), LN(0.25)]), t([2.0, 1.0]), t([0.5, 1.0]), t([1.5, 0.0]),
                     entropy=t([LN(2.0), 0.562335]), vf_coef=0.5, ent_coef=0.01, reduction=reduction)
    for got, want in zip(terms, (total, policy, value, entropy), strict=False):
        assert_close(got, t(want), atol=1e-6, rtol=0)


def test_a2c_treats_advantages_as_constants():
    """Passing A = R - V with the graph attached must not add a policy-term gradient to V: dL/dV is only the value
    term's, vf_coef * (V - R) / N = 0.5 * ([0.5, 1.0] - [1.5, 0.0]) / 2 = [-0.25, 0.25]."""
    values = t([0.5, 1.0], requires_grad=True)
    returns = t([1.5, 0.0])
    loss = a2c_loss(t([LN(0.5), LN(0.25)]), returns - values, values, returns, vf_coef=0.5).total
    loss.backward()
    assert_close(values.grad, t([-0.25, 0.25]))
    policy_only = a2c_policy_loss(t([LN(0.5), LN(0.25)]), returns - values)
    assert not policy_only.requires_grad  # no path from the advantage into the loss


@pytest.mark.parametrize("fn", ["ppo", "a2c", "impala"])
def test_reductions_agree_and_bad_reduction_is_refused(fn):
    """For each loss: the "sum" total equals the sum of the "none" totals and "mean" their mean."""
    g = torch.Generator().manual_seed(1)
    x = [torch.randn(3, 2, generator=g, **T64) for _ in range(6)]
    boot = torch.randn(2, generator=g, **T64)

    def call(reduction):
        if fn == "ppo":
            return ppo_loss(x[0], x[1], x[2], x[3], x[4], x[5], normalize_advantage=True, reduction=reduction)
        if fn == "a2c":
            return a2c_loss(x[0], x[2], x[3], x[4], x[5], reduction=reduction)
        return impala_loss(x[0], x[1], x[2], x[4].sigmoid(), x[3], boot, x[5], reduction=reduction)

    per_item = call("none").total
    assert per_item.shape == (3, 2)
    assert_close(call("sum").total, per_item.sum())
    assert_close(call("mean").total, per_item.mean())
    with pytest.raises(ValueError, match="reduction"):
        call("max")


def test_mismatched_shapes_are_refused():
    with pytest.raises(ValueError, match="advantages has shape"):
        a2c_loss(torch.zeros(3), torch.zeros(4), torch.zeros(3), torch.zeros(3))


# ----------------------------------------------------------------------------------------------- IMPALA, pure

IMPALA_CASES = {
    # behaviour log-probs, expected vs, pg advantages, policy, value, total
    "on_policy": ([LN(0.5), LN(0.5)], [4.42, 3.8], [3.92, 2.8], 2.328975, 5.8016, 5.222844),
    "rho_clipped": ([LN(0.25), LN(0.5)], [4.42, 3.8], [3.92, 2.8], 2.328975, 5.8016, 5.222844),
    "rho_below_one": ([LN(0.5), 0.0], [3.16, 2.4], [2.66, 1.4], 1.407089, 2.2589, 2.529608),
}


@pytest.mark.parametrize("case", list(IMPALA_CASES))
def test_impala_loss_hand_worked(case):
    """T = 2, B = 1; target policy logits [0, 0] at both steps (pi = 0.5 for both actions, logp = -ln 2,
    H = ln 2); rewards [1, 2], discounts [0.9, 0.9], V = [0.5, 1.0], V(x_T) = 2.0; vf_coef 0.5, ent_coef 0.01;
    rho_bar = rho_bar_pg = 1 (c_bar = 1).

    on_policy (mu = pi, rho = c = 1): delta_1 = 2 + 0.9*2.0 - 1.0 = 2.8, v_1 = 1.0 + 2.8 = 3.8;
        delta_0 = 1 + 0.9*1.0 - 0.5 = 1.4, v_0 = 0.5 + 1.4 + 0.9*1*(3.8 - 1.0) = 4.42.
        A_pg = [1 + 0.9*3.8 - 0.5, 2 + 0.9*2.0 - 1.0] = [3.92, 2.8].
        policy = mean(ln2 * 3.92, ln2 * 2.8) = ln2 * 3.36 = 2.328975
        value = mean(0.5 * (4.42 - 0.5)^2, 0.5 * (3.8 - 1.0)^2) = mean(7.6832, 3.92) = 5.8016
        total = 2.328975 + 0.5 * 5.8016 - 0.01 * 0.693147 = 5.222844
    rho_clipped (mu(a_0) = 0.25 -> pi/mu = 2, clipped to rho = 1, c = min(1, 2) = 1): same as on_policy.
    rho_below_one (mu(a_1) = 1 -> rho_1 = c_1 = 0.5): v_1 = 1.0 + 0.5*2.8 = 2.4;
        v_0 = 0.5 + 1.4 + 0.9*1*(2.4 - 1.0) = 3.16; A_pg = [1 + 0.9*2.4 - 0.5, 0.5 * 2.8] = [2.66, 1.4].
        policy = ln2 * mean(2.66, 1.4) = ln2 * 2.03 = 1.407089
        value = mean(0.5 * 2.66^2, 0.5 * 1.4^2) = mean(3.5378, 0.98) = 2.2589
        total = 1.407089 + 0.5 * 2.2589 - 0.006931 = 2.529608
    Gradient of total wrt V: vf_coef * (V - v) / N = 0.5 * (V - v) / 2 (v is a constant target).
    """
    behaviour, vs, pg, policy, value, total = IMPALA_CASES[case]
    values = t([[0.5], [1.0]], requires_grad=True)
    bootstrap = t([2.0], requires_grad=True)
    terms = impala_loss(t([[LN(0.5)], [LN(0.5)]]), t(behaviour).reshape(2, 1), t([[1.0], [2.0]]),
                        t([[0.9], [0.9]]), values, bootstrap, entropy=t([[LN(2.0)], [LN(2.0)]]),
                        vf_coef=0.5, ent_coef=0.01)
    assert_close(terms.vs, t(vs).reshape(2, 1))
    assert_close(terms.pg_advantages, t(pg).reshape(2, 1))
    assert_close(terms.policy, t(policy), atol=1e-6, rtol=0)
    assert_close(terms.value, t(value))
    assert_close(terms.total, t(total), atol=1e-6, rtol=0)
    terms.total.backward()
    assert_close(values.grad, 0.25 * (values.detach() - t(vs).reshape(2, 1)))
    assert bootstrap.grad is None  # the bootstrap value is part of the (constant) target
