"""Tests for rlrun.ops.vtrace against a slow reference written from IMPALA Eq. 1.

Reference (Espeholt et al. 2018, Eq. 1, lambda = 1, per-step discounts):

    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t V
    delta_t V = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))
    rho_t = min(rho_bar, exp(log_rho_t)),  c_i = min(1, exp(log_rho_i))
    pg_adv_s = rho^pg_s (r_s + gamma_s v_{s+1} - V(x_s)),  v_T = V(x_T)

computed as an explicit double sum over Python floats (no recursion) and never
calling the function under test.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from rlrun.ops import VTraceReturns, discounted_returns, vtrace

TOL = dict(rtol=1e-5, atol=1e-5)


def ref_vtrace(log_rhos, discounts, rewards, values, bootstrap, clip_rho, clip_pg_rho):
    lr, d, r, v, v_T = (
        log_rhos.tolist(),
        discounts.tolist(),
        rewards.tolist(),
        values.tolist(),
        bootstrap.tolist(),
    )
    T, B = len(r), len(v_T)
    vs = [[0.0] * B for _ in range(T)]
    pg = [[0.0] * B for _ in range(T)]
    for b in range(B):

        def V(k):
            return v[k][b] if k < T else v_T[b]

        def rho(k, clip):
            x = math.exp(lr[k][b])
            return x if clip is None else min(clip, x)

        for s in range(T):
            total = 0.0
            for t in range(s, T):
                weight = 1.0
                for i in range(s, t):
                    weight *= d[i][b] * min(1.0, math.exp(lr[i][b]))
                delta = rho(t, clip_rho) * (r[t][b] + d[t][b] * V(t + 1) - V(t))
                total += weight * delta
            vs[s][b] = V(s) + total
        for s in range(T):
            v_next = vs[s + 1][b] if s + 1 < T else v_T[b]
            pg[s][b] = rho(s, clip_pg_rho) * (r[s][b] + d[s][b] * v_next - V(s))
    return torch.tensor(vs, dtype=torch.float64), torch.tensor(pg, dtype=torch.float64)


def _inputs(T, B, seed, p_done=0.25, rho_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    log_rhos = rho_scale * torch.randn(T, B, generator=g)
    # mix of gamma values per step, some zero (episode ends)
    gammas = torch.where(torch.rand(T, B, generator=g) < 0.5, 0.99, 0.9)
    discounts = gammas * (torch.rand(T, B, generator=g) >= p_done).float()
    rewards = torch.randn(T, B, generator=g)
    values = torch.randn(T, B, generator=g)
    bootstrap = torch.randn(B, generator=g)
    return log_rhos, discounts, rewards, values, bootstrap


def test_vtrace_hand_worked():
    """T=2, B=1, discounts 0.5, rewards [1, 2], values [0.5, 1], bootstrap 2,
    rhos = [2, 0.5] (log_rhos = [log 2, log 0.5]), both thresholds 1.

    clipped rho = [1, 0.5], c = [1, 0.5]
    delta_0 = 1   * (1 + 0.5*1.0 - 0.5) = 1.0
    delta_1 = 0.5 * (2 + 0.5*2.0 - 1.0) = 1.0
    v_1 = 1.0 + delta_1                       = 2.0
    v_0 = 0.5 + delta_0 + 0.5*c_0*delta_1      = 0.5 + 1 + 0.5 = 2.0
    pg_0 = 1   * (1 + 0.5*v_1 - 0.5) = 1.5
    pg_1 = 0.5 * (2 + 0.5*v_T - 1.0) = 0.5 * 2 = 1.0   (v_T = bootstrap = 2)
    """
    out = vtrace(
        log_rhos=torch.tensor([[math.log(2.0)], [math.log(0.5)]]),
        discounts=torch.tensor([[0.5], [0.5]]),
        rewards=torch.tensor([[1.0], [2.0]]),
        values=torch.tensor([[0.5], [1.0]]),
        bootstrap_value=torch.tensor([2.0]),
    )
    assert isinstance(out, VTraceReturns)
    assert_close(out.vs, torch.tensor([[2.0], [2.0]]))
    assert_close(out.pg_advantages, torch.tensor([[1.5], [1.0]]))


THRESHOLDS = [(1.0, 1.0), (None, None), (0.5, 2.0), (2.0, None), (None, 0.7)]


@pytest.mark.parametrize("clip_rho, clip_pg_rho", THRESHOLDS)
@pytest.mark.parametrize("T", [1, 2, 5, 13])
@pytest.mark.parametrize("B", [1, 3])
def test_vtrace_matches_reference(clip_rho, clip_pg_rho, T, B):
    inputs = _inputs(T, B, seed=100 * T + B)
    out = vtrace(
        *inputs, clip_rho_threshold=clip_rho, clip_pg_rho_threshold=clip_pg_rho
    )
    ref_vs, ref_pg = ref_vtrace(*inputs, clip_rho, clip_pg_rho)
    assert out.vs.shape == out.pg_advantages.shape == (T, B)
    assert out.vs.dtype == torch.float32
    assert_close(out.vs.double(), ref_vs, **TOL)
    assert_close(out.pg_advantages.double(), ref_pg, **TOL)


@pytest.mark.parametrize("clip_rho, clip_pg_rho", THRESHOLDS)
def test_vtrace_matches_reference_float64_tight(clip_rho, clip_pg_rho):
    inputs = [x.double() for x in _inputs(8, 4, seed=42, rho_scale=1.5)]
    out = vtrace(*inputs, clip_rho_threshold=clip_rho, clip_pg_rho_threshold=clip_pg_rho)
    ref_vs, ref_pg = ref_vtrace(*inputs, clip_rho, clip_pg_rho)
    assert_close(out.vs, ref_vs)
    assert_close(out.pg_advantages, ref_pg)


@pytest.mark.parametrize("T, B", [(1, 1), (6, 2), (15, 4)])
def test_on_policy_vs_equals_discounted_returns(T, B):
    """log_rhos = 0: all rho = c = 1, so v_s is the bootstrapped discounted return
    (TD(lambda=1)) and pg_advantage is that return minus V(x_s)."""
    _, discounts, rewards, values, bootstrap = _inputs(T, B, seed=T + B)
    out = vtrace(torch.zeros(T, B), discounts, rewards, values, bootstrap)
    returns = discounted_returns(rewards, discounts, bootstrap)
    assert_close(out.vs, returns)
    assert_close(out.pg_advantages, returns - values)


def test_clipped_large_rhos_equal_on_policy():
    """All rho >= 1 with both thresholds 1: clipped rho = c = 1, i.e. on-policy."""
    log_rhos, discounts, rewards, values, bootstrap = _inputs(7, 3, seed=9)
    off = vtrace(log_rhos.abs() + 0.1, discounts, rewards, values, bootstrap)
    on = vtrace(torch.zeros(7, 3), discounts, rewards, values, bootstrap)
    assert_close(off.vs, on.vs)
    assert_close(off.pg_advantages, on.pg_advantages)
    # ... but without clipping they must differ.
    unclipped = vtrace(
        log_rhos.abs() + 0.1, discounts, rewards, values, bootstrap,
        clip_rho_threshold=None, clip_pg_rho_threshold=None,
    )
    assert not torch.allclose(unclipped.vs, on.vs)


def test_episode_end_cuts_trace():
    """discounts[2] = 0: v_0..v_2 must not depend on anything at t >= 3 or the bootstrap."""
    log_rhos, discounts, rewards, values, bootstrap = _inputs(6, 2, seed=4, p_done=0.0)
    discounts[2] = 0.0
    a = vtrace(log_rhos, discounts, rewards, values, bootstrap)
    rewards2, values2 = rewards.clone(), values.clone()
    rewards2[3:] += 3.0
    values2[3:] -= 2.0
    b = vtrace(log_rhos, discounts, rewards2, values2, bootstrap + 5.0)
    assert_close(b.vs[:3], a.vs[:3])
    assert_close(b.pg_advantages[:3], a.pg_advantages[:3])


def test_outputs_are_detached():
    inputs = [x.clone().requires_grad_(True) for x in _inputs(4, 2, seed=0)]
    out = vtrace(*inputs)
    assert not out.vs.requires_grad
    assert not out.pg_advantages.requires_grad


def test_empty_rollout():
    z = torch.zeros(0, 3)
    out = vtrace(z, z, z, z, torch.zeros(3))
    assert out.vs.shape == out.pg_advantages.shape == (0, 3)


# --------------------------------------------------------------------------- #
# Validation
# --------------------------------------------------------------------------- #

NAMES = ["log_rhos", "discounts", "rewards", "values", "bootstrap_value"]
BAD = {
    "log_rhos": torch.zeros(4, 3, 1),
    "discounts": torch.zeros(3, 3),
    "rewards": torch.zeros(4, 2),
    "values": torch.zeros(4),
    "bootstrap_value": torch.zeros(4, 3),
}


@pytest.mark.parametrize("bad", NAMES)
def test_shape_errors_name_the_argument(bad):
    kwargs = {name: torch.zeros(4, 3) for name in NAMES}
    kwargs["bootstrap_value"] = torch.zeros(3)
    kwargs[bad] = BAD[bad]
    with pytest.raises(ValueError, match=rf"^{bad} must have shape") as info:
        vtrace(**kwargs)
    assert str(tuple(BAD[bad].shape)) in str(info.value)


@pytest.mark.parametrize("arg", ["clip_rho_threshold", "clip_pg_rho_threshold"])
@pytest.mark.parametrize("value", [0.0, -1.0])
def test_bad_thresholds(arg, value):
    z = torch.zeros(2, 2)
    with pytest.raises(ValueError, match=arg):
        vtrace(z, z, z, z, torch.zeros(2), **{arg: value})
