"""Tests for rlrun.ops.returns: discounted_returns, gae, truncation_aware_gae, nstep_returns.

Each estimator is compared with a deliberately slow reference written directly
from the paper's closed-form sum (plain Python floats, double loops, no
recursion), plus hand-worked examples and special cases.  None of the
references calls the function under test.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch.testing import assert_close

from rlrun.ops import discounted_returns, gae, nstep_returns, truncation_aware_gae

# float32 recursion vs. float64 reference
TOL = dict(rtol=1e-5, atol=1e-5)


def _random_rollout(T, B, seed, p_done=0.25, gamma=0.9):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(T, B, generator=g)
    values = torch.randn(T, B, generator=g)
    bootstrap = torch.randn(B, generator=g)
    done = torch.rand(T, B, generator=g) < p_done
    discounts = gamma * (~done).float()
    return rewards, values, bootstrap, discounts


def _tensor(rows):
    return torch.tensor(rows, dtype=torch.float32)


# --------------------------------------------------------------------------- #
# Slow references (closed-form sums in Python floats)
# --------------------------------------------------------------------------- #


def ref_discounted_returns(rewards, discounts, bootstrap):
    """R_t = sum_{k=t}^{T-1} (prod_{i=t}^{k-1} d_i) r_k + (prod_{i=t}^{T-1} d_i) V_T."""
    r, d, v_T = rewards.tolist(), discounts.tolist(), bootstrap.tolist()
    T, B = len(r), len(v_T)
    out = [[0.0] * B for _ in range(T)]
    for b in range(B):
        for t in range(T):
            total = 0.0
            for k in range(t, T):
                prod = 1.0
                for i in range(t, k):
                    prod *= d[i][b]
                total += prod * r[k][b]
            prod = 1.0
            for i in range(t, T):
                prod *= d[i][b]
            out[t][b] = total + prod * v_T[b]
    return torch.tensor(out, dtype=torch.float64)


def ref_gae(rewards, values, bootstrap, discounts, lam):
    """Schulman et al. 2016, Eq. 16 with per-step discounts:

    A_t = sum_{l=0}^{T-t-1} (prod_{i=t}^{t+l-1} lam * d_i) * delta_{t+l},
    delta_k = r_k + d_k V_{k+1} - V_k,  V_T = bootstrap.
    """
    r, v, d, v_T = rewards.tolist(), values.tolist(), discounts.tolist(), bootstrap.tolist()
    T, B = len(r), len(v_T)
    adv = [[0.0] * B for _ in range(T)]
    for b in range(B):

        def V(k):
            return v[k][b] if k < T else v_T[b]

        for t in range(T):
            total = 0.0
            for ell in range(T - t):
                weight = 1.0
                for i in range(t, t + ell):
                    weight *= lam * d[i][b]
                k = t + ell
                delta = r[k][b] + d[k][b] * V(k + 1) - V(k)
                total += weight * delta
            adv[t][b] = total
    adv = torch.tensor(adv, dtype=torch.float64)
    return adv, adv + values.double()


def ref_nstep(rewards, terminated, truncated, next_values, gamma, n):
    """G_t = sum_{k<m} gamma^k r_{t+k} + gamma^m (1 - term_{t+m-1}) nv_{t+m-1},

    m = min(n, (first end at or after t) - t + 1, T - t).
    """
    r, te, tr, nv = rewards.tolist(), terminated.tolist(), truncated.tolist(), next_values.tolist()
    T, B = len(r), len(r[0]) if r else 0
    G = [[0.0] * B for _ in range(T)]
    bd = [[0.0] * B for _ in range(T)]
    idx = [[0] * B for _ in range(T)]
    for b in range(B):
        for t in range(T):
            steps_to_end = math.inf
            for k in range(t, T):
                if te[k][b] or tr[k][b]:
                    steps_to_end = k - t + 1
                    break
            m = int(min(n, steps_to_end, T - t))
            total = sum(gamma**k * r[t + k][b] for k in range(m))
            j = t + m - 1
            disc = gamma**m * (0.0 if te[j][b] else 1.0)
            G[t][b] = total + disc * nv[j][b]
            bd[t][b] = disc
            idx[t][b] = j
    return (
        torch.tensor(G, dtype=torch.float64),
        torch.tensor(bd, dtype=torch.float64),
        torch.tensor(idx, dtype=torch.int64),
    )


# --------------------------------------------------------------------------- #
# discounted_returns
# --------------------------------------------------------------------------- #


def test_discounted_returns_hand_worked():
    """T=3, B=2, gamma=0.9, rewards [1, 2, 3] in both columns, bootstrap 10.

    Column 0, no episode end (discounts 0.9, 0.9, 0.9):
        R_2 = 3 + 0.9 * 10   = 12.0
        R_1 = 2 + 0.9 * 12   = 12.8
        R_0 = 1 + 0.9 * 12.8 = 12.52
    Column 1, done at t=1 (discounts 0.9, 0.0, 0.9):
        R_2 = 3 + 0.9 * 10   = 12.0
        R_1 = 2 + 0.0 * 12   = 2.0    (episode ended at step 1: no carry-over)
        R_0 = 1 + 0.9 * 2    = 2.8
    """
    rewards = _tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    discounts = _tensor([[0.9, 0.9], [0.9, 0.0], [0.9, 0.9]])
    bootstrap = _tensor([10.0, 10.0])
    expected = _tensor([[12.52, 2.8], [12.8, 2.0], [12.0, 12.0]])
    assert_close(discounted_returns(rewards, discounts, bootstrap), expected)


@pytest.mark.parametrize("T", [1, 2, 7, 16])
@pytest.mark.parametrize("B", [1, 4])
@pytest.mark.parametrize("seed", [0, 1])
def test_discounted_returns_matches_reference(T, B, seed):
    rewards, _, bootstrap, discounts = _random_rollout(T, B, seed)
    got = discounted_returns(rewards, discounts, bootstrap)
    assert got.shape == (T, B) and got.dtype == torch.float32
    assert_close(got.double(), ref_discounted_returns(rewards, discounts, bootstrap), **TOL)


def test_discounted_returns_float64_tight():
    rewards, _, bootstrap, discounts = _random_rollout(9, 3, seed=5)
    rewards, bootstrap, discounts = rewards.double(), bootstrap.double(), discounts.double()
    got = discounted_returns(rewards, discounts, bootstrap)
    assert got.dtype == torch.float64
    assert_close(got, ref_discounted_returns(rewards, discounts, bootstrap))


def test_discounted_returns_empty_rollout():
    got = discounted_returns(torch.zeros(0, 3), torch.zeros(0, 3), torch.zeros(3))
    assert got.shape == (0, 3)


# --------------------------------------------------------------------------- #
# gae
# --------------------------------------------------------------------------- #


def test_gae_hand_worked():
    """T=2, B=1, discounts 0.5, lam=0.5, rewards [1, 1], values [0, 0], bootstrap 2.

    delta_1 = 1 + 0.5 * 2 - 0 = 2
    delta_0 = 1 + 0.5 * 0 - 0 = 1
    A_1 = delta_1 = 2
    A_0 = delta_0 + (0.5 * 0.5) * delta_1 = 1 + 0.25 * 2 = 1.5
    returns = A + values = [1.5, 2]
    """
    rewards = _tensor([[1.0], [1.0]])
    values = _tensor([[0.0], [0.0]])
    discounts = _tensor([[0.5], [0.5]])
    adv, ret = gae(rewards, values, _tensor([2.0]), discounts, lam=0.5)
    assert_close(adv, _tensor([[1.5], [2.0]]))
    assert_close(ret, _tensor([[1.5], [2.0]]))


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
@pytest.mark.parametrize("T", [1, 3, 12])
@pytest.mark.parametrize("B", [1, 5])
def test_gae_matches_reference(lam, T, B):
    rewards, values, bootstrap, discounts = _random_rollout(T, B, seed=T * 10 + B)
    adv, ret = gae(rewards, values, bootstrap, discounts, lam)
    ref_adv, ref_ret = ref_gae(rewards, values, bootstrap, discounts, lam)
    assert adv.shape == ret.shape == (T, B)
    assert_close(adv.double(), ref_adv, **TOL)
    assert_close(ret.double(), ref_ret, **TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_lambda_one_is_discounted_return_minus_value(seed):
    rewards, values, bootstrap, discounts = _random_rollout(10, 3, seed)
    adv, ret = gae(rewards, values, bootstrap, discounts, lam=1.0)
    mc = ref_discounted_returns(rewards, discounts, bootstrap)
    assert_close(ret.double(), mc, **TOL)
    assert_close(adv.double(), mc - values.double(), **TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_lambda_zero_is_one_step_td_error(seed):
    rewards, values, bootstrap, discounts = _random_rollout(10, 3, seed)
    adv, ret = gae(rewards, values, bootstrap, discounts, lam=0.0)
    td = torch.empty_like(rewards)
    for t in range(10):
        v_next = values[t + 1] if t + 1 < 10 else bootstrap
        td[t] = rewards[t] + discounts[t] * v_next - values[t]
    assert_close(adv, td)
    assert_close(ret, td + values)


def test_gae_episode_end_cuts_trace():
    """With discounts[2] = 0, nothing from steps >= 3 or the bootstrap may reach A_0..A_2."""
    rewards, values, bootstrap, discounts = _random_rollout(6, 2, seed=3, p_done=0.0)
    discounts[2] = 0.0
    adv, _ = gae(rewards, values, bootstrap, discounts, lam=0.9)
    rewards2, values2 = rewards.clone(), values.clone()
    rewards2[3:] += 5.0
    values2[3:] -= 7.0
    adv2, _ = gae(rewards2, values2, bootstrap + 11.0, discounts, lam=0.9)
    assert_close(adv2[:3], adv[:3])
    assert not torch.allclose(adv2[3:], adv[3:])


@pytest.mark.parametrize("lam", [-0.1, 1.5])
def test_gae_rejects_bad_lambda(lam):
    rewards, values, bootstrap, discounts = _random_rollout(3, 2, seed=0)
    with pytest.raises(ValueError, match="lam"):
        gae(rewards, values, bootstrap, discounts, lam)


# --------------------------------------------------------------------------- #
# truncation_aware_gae (GAE over terminations and time-limit truncations)
# --------------------------------------------------------------------------- #


def ref_truncation_aware_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """The definition, one copy and one step at a time (Schulman et al. 2016, Eq. 16, with episode ends):
    A_t = sum_l (gamma lam)^l delta_{t+l} until the episode ends, delta_t = r_t + gamma (1 - term_t) V(s'_t) - V(s_t).
    """
    T, B = rewards.shape
    adv = torch.zeros(T, B, dtype=torch.float64)
    for b in range(B):
        for t in range(T):
            total, weight = 0.0, 1.0
            for k in range(t, T):
                delta = rewards[k, b] + gamma * (1.0 - float(terminated[k, b])) * next_values[k, b] - values[k, b]
                total += weight * float(delta)
                if terminated[k, b] or truncated[k, b]:
                    break
                weight *= gamma * lam
            adv[t, b] = total
    return adv, adv + values.double()


def test_truncation_aware_gae_bootstraps_from_the_final_observation_at_truncation():
    """T = 3 steps of B = 3 copies, gamma = 0.5, lambda = 0.5, rewards 1, V(s_t) = [1, 2, 3] in every copy, and
    V(s'_t) of the real next observations = [2, 4, 5]: at step 1 the episode ends and s'_1 is its final observation
    (value 4), not the reset observation s_2 (value 3). Copy 0 is *truncated* at step 1, copy 1 *terminated*, and
    copy 2 both (a time limit reached on the terminal step: termination wins, so it is copy 1's case).

    Copy 0 (truncation: bootstrap from V(s'_1) = 4, cut the trace):
        delta_0 = 1 + 0.5 * 2 - 1 = 1;   delta_1 = 1 + 0.5 * 4 - 2 = 1;   delta_2 = 1 + 0.5 * 5 - 3 = 0.5
        A_2 = 0.5;   A_1 = delta_1 = 1;   A_0 = delta_0 + 0.25 * A_1 = 1.25;   R = A + V = [2.25, 3, 3.5]
    Copy 1 (termination: no bootstrap):
        delta_1 = 1 + 0 - 2 = -1;   A = [1 + 0.25 * (-1), -1, 0.5] = [0.75, -1, 0.5];   R = [1.75, 1, 3.5]
    (Bootstrapping copy 0 from zero would give A_1 = -1, like copy 1; from the reset observation's V(s_2) = 3,
    A_1 = 0.5: both differ from the expected 1.)
    Copy 2 (both flags): as copy 1; bootstrapping it like a truncation would give copy 0's A_1 = 1.
    """
    rewards = torch.ones(3, 3)
    values = torch.tensor([[1.0], [2.0], [3.0]]).expand(3, 3)
    next_values = torch.tensor([[2.0], [4.0], [5.0]]).expand(3, 3)
    terminated = torch.tensor([[False, False, False], [False, True, True], [False, False, False]])
    truncated = torch.tensor([[False, False, False], [True, False, True], [False, False, False]])
    adv, ret = truncation_aware_gae(rewards, values, next_values, terminated, truncated, gamma=0.5, lam=0.5)
    assert_close(adv, torch.tensor([[1.25, 0.75, 0.75], [1.0, -1.0, -1.0], [0.5, 0.5, 0.5]]))
    assert_close(ret, torch.tensor([[2.25, 1.75, 1.75], [3.0, 1.0, 1.0], [3.5, 3.5, 3.5]]))


@pytest.mark.parametrize("lam", [0.0, 0.8, 1.0])
@pytest.mark.parametrize("gamma", [0.9, 1.0])
def test_truncation_aware_gae_matches_the_definition(gamma, lam):
    """Random rollouts with both kinds of episode ends (and steps with both flags set: termination wins). Where an
    episode goes on, the next observation is the next row's, so V(s'_t) = V(s_{t+1}) there."""
    g = torch.Generator().manual_seed(3)
    T, B = 7, 4
    rewards, values, final_values = (torch.randn(T, B, generator=g, dtype=torch.float64) for _ in range(3))
    terminated = torch.rand(T, B, generator=g) < 0.2
    truncated = torch.rand(T, B, generator=g) < 0.2
    terminated[2, 1] = truncated[2, 1] = True  # the draws alone need not hold a step with both flags
    done = terminated | truncated
    next_values = final_values.clone()
    next_values[:-1] = torch.where(done[:-1], final_values[:-1], values[1:])
    adv, ret = truncation_aware_gae(rewards, values, next_values, terminated, truncated, gamma, lam)
    ref_adv, ref_ret = ref_truncation_aware_gae(rewards, values, next_values, terminated, truncated, gamma, lam)
    assert_close(adv, ref_adv)
    assert_close(ret, ref_ret)


# --------------------------------------------------------------------------- #
# nstep_returns
# --------------------------------------------------------------------------- #


def _flags(rows):
    return torch.tensor(rows, dtype=torch.bool)


def test_nstep_no_episode_end():
    """(a) T=4, B=1, gamma=0.5, n=2, rewards [1, 2, 3, 4], next_values [10, 20, 30, 40].

    No terminated/truncated flags; m = min(2, T - t) = [2, 2, 2, 1].
        G_0 = 1 + 0.5*2 + 0.25*next_values[1] = 1 + 1 + 0.25*20 = 7.0
        G_1 = 2 + 0.5*3 + 0.25*next_values[2] = 2 + 1.5 + 7.5  = 11.0
        G_2 = 3 + 0.5*4 + 0.25*next_values[3] = 3 + 2 + 10     = 15.0
        G_3 = 4 + 0.5*next_values[3]          = 4 + 20          = 24.0  (window hits T)
    bootstrap_discounts = [0.25, 0.25, 0.25, 0.5], next_index = [1, 2, 3, 3].
    """
    rewards = _tensor([[1.0], [2.0], [3.0], [4.0]])
    next_values = _tensor([[10.0], [20.0], [30.0], [40.0]])
    none = _flags([[False]] * 4)
    ret, bd, idx = nstep_returns(rewards, none, none, next_values, gamma=0.5, n=2)
    assert_close(ret, _tensor([[7.0], [11.0], [15.0], [24.0]]))
    assert_close(bd, _tensor([[0.25], [0.25], [0.25], [0.5]]))
    assert idx.dtype == torch.int64
    assert idx.tolist() == [[1], [2], [3], [3]]


def test_nstep_termination_inside_window():
    """(b) T=4, B=1, gamma=0.5, n=3, rewards [1, 2, 3, 4], next_values [10, 20, 30, 40],
    terminated at t=1.

        G_0: m = min(3, 1-0+1=2, 4) = 2  -> 1 + 0.5*2 + 0 (terminated[1]: no bootstrap) = 2.0
        G_1: m = min(3, 1, 3) = 1        -> 2 + 0                                       = 2.0
        G_2: m = min(3, inf, 2) = 2      -> 3 + 0.5*4 + 0.25*next_values[3] = 3+2+10     = 15.0
        G_3: m = 1                       -> 4 + 0.5*40                                  = 24.0
    bootstrap_discounts = [0, 0, 0.25, 0.5], next_index = [1, 1, 3, 3].
    """
    rewards = _tensor([[1.0], [2.0], [3.0], [4.0]])
    next_values = _tensor([[10.0], [20.0], [30.0], [40.0]])
    terminated = _flags([[False], [True], [False], [False]])
    truncated = _flags([[False]] * 4)
    ret, bd, idx = nstep_returns(rewards, terminated, truncated, next_values, gamma=0.5, n=3)
    assert_close(ret, _tensor([[2.0], [2.0], [15.0], [24.0]]))
    assert_close(bd, _tensor([[0.0], [0.0], [0.25], [0.5]]))
    assert idx.tolist() == [[1], [1], [3], [3]]


def test_nstep_truncation_inside_window():
    """(c) Same as (b) but step 1 is *truncated* (time limit) instead of terminated.

    next_values[1] = 20 is V of the real final observation of the truncated episode.
        G_0: m = 2 -> 1 + 0.5*2 + 0.25*next_values[1] = 1 + 1 + 5 = 7.0
        G_1: m = 1 -> 2 + 0.5*next_values[1]          = 2 + 10    = 12.0
        G_2: m = 2 -> 3 + 0.5*4 + 0.25*40             = 15.0
        G_3: m = 1 -> 4 + 0.5*40                      = 24.0
    bootstrap_discounts = [0.25, 0.5, 0.25, 0.5], next_index = [1, 1, 3, 3].
    """
    rewards = _tensor([[1.0], [2.0], [3.0], [4.0]])
    next_values = _tensor([[10.0], [20.0], [30.0], [40.0]])
    terminated = _flags([[False]] * 4)
    truncated = _flags([[False], [True], [False], [False]])
    ret, bd, idx = nstep_returns(rewards, terminated, truncated, next_values, gamma=0.5, n=3)
    assert_close(ret, _tensor([[7.0], [12.0], [15.0], [24.0]]))
    assert_close(bd, _tensor([[0.25], [0.5], [0.25], [0.5]]))
    assert idx.tolist() == [[1], [1], [3], [3]]


def test_nstep_window_past_end_of_rollout():
    """(d) T=3, B=1, gamma=0.5, n=5 (> T), rewards [1, 2, 4], next_values [8, 16, 32].

    Every window is cut by T: m = T - t = [3, 2, 1], all bootstrap from next_values[2] = 32.
        G_0 = 1 + 0.5*2 + 0.25*4 + 0.125*32 = 1 + 1 + 1 + 4 = 7.0
        G_1 = 2 + 0.5*4 + 0.25*32           = 2 + 2 + 8     = 12.0
        G_2 = 4 + 0.5*32                    = 4 + 16        = 20.0
    bootstrap_discounts = [0.125, 0.25, 0.5], next_index = [2, 2, 2].
    """
    rewards = _tensor([[1.0], [2.0], [4.0]])
    next_values = _tensor([[8.0], [16.0], [32.0]])
    none = _flags([[False]] * 3)
    ret, bd, idx = nstep_returns(rewards, none, none, next_values, gamma=0.5, n=5)
    assert_close(ret, _tensor([[7.0], [12.0], [20.0]]))
    assert_close(bd, _tensor([[0.125], [0.25], [0.5]]))
    assert idx.tolist() == [[2], [2], [2]]


def test_nstep_terminated_and_truncated_same_step_does_not_bootstrap():
    """Both flags on step 0: termination wins. G_0 = r_0 = 3, even with a NaN next value."""
    rewards = _tensor([[3.0], [1.0]])
    next_values = _tensor([[float("nan")], [2.0]])
    both = _flags([[True], [False]])
    ret, bd, idx = nstep_returns(rewards, both, both, next_values, gamma=0.9, n=3)
    assert_close(ret, _tensor([[3.0], [1.0 + 0.9 * 2.0]]))
    assert_close(bd, _tensor([[0.0], [0.9]]))
    assert idx.tolist() == [[0], [1]]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 50])
@pytest.mark.parametrize("T", [1, 4, 11])
@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("flag_dtype", [torch.bool, torch.float32])
def test_nstep_matches_reference(n, T, B, flag_dtype):
    g = torch.Generator().manual_seed(1000 * n + 10 * T + B)
    rewards = torch.randn(T, B, generator=g)
    next_values = torch.randn(T, B, generator=g)
    terminated = torch.rand(T, B, generator=g) < 0.15
    truncated = torch.rand(T, B, generator=g) < 0.15
    gamma = 0.93
    ret, bd, idx = nstep_returns(
        rewards, terminated.to(flag_dtype), truncated.to(flag_dtype), next_values, gamma, n
    )
    ref_ret, ref_bd, ref_idx = ref_nstep(rewards, terminated, truncated, next_values, gamma, n)
    assert ret.shape == bd.shape == idx.shape == (T, B)
    assert idx.dtype == torch.int64
    assert torch.equal(idx, ref_idx)
    assert_close(bd.double(), ref_bd, **TOL)
    assert_close(ret.double(), ref_ret, **TOL)


def test_nstep_pieces_allow_retargeting():
    """Swapping next_values for target-network values via the returned pieces
    gives the same target as calling nstep_returns with the new values."""
    g = torch.Generator().manual_seed(7)
    T, B, gamma, n = 9, 4, 0.9, 3
    rewards = torch.randn(T, B, generator=g)
    terminated = torch.rand(T, B, generator=g) < 0.2
    truncated = torch.rand(T, B, generator=g) < 0.2
    online, target = torch.randn(T, B, generator=g), torch.randn(T, B, generator=g)
    ret, bd, idx = nstep_returns(rewards, terminated, truncated, online, gamma, n)
    partial = ret - bd * online.gather(0, idx)
    retargeted = partial + bd * target.gather(0, idx)
    ref_ret, _, _ = ref_nstep(rewards, terminated, truncated, target, gamma, n)
    assert_close(retargeted.double(), ref_ret, **TOL)


def test_nstep_one_step_is_td_target():
    g = torch.Generator().manual_seed(11)
    rewards, next_values = torch.randn(6, 2, generator=g), torch.randn(6, 2, generator=g)
    terminated = torch.rand(6, 2, generator=g) < 0.3
    truncated = torch.rand(6, 2, generator=g) < 0.3
    ret, bd, idx = nstep_returns(rewards, terminated, truncated, next_values, 0.99, 1)
    assert_close(ret, rewards + 0.99 * (~terminated).float() * next_values)
    assert torch.equal(idx, torch.arange(6).unsqueeze(1).expand(6, 2))


@pytest.mark.parametrize("n", [0, -1, 2.0, True])
def test_nstep_rejects_bad_n(n):
    x = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="n must be"):
        nstep_returns(x, x, x, x, 0.9, n)


# --------------------------------------------------------------------------- #
# Shape validation
# --------------------------------------------------------------------------- #

T_, B_ = 4, 3
GOOD = {
    "rewards": torch.zeros(T_, B_),
    "values": torch.zeros(T_, B_),
    "discounts": torch.zeros(T_, B_),
    "bootstrap_value": torch.zeros(B_),
    "terminated": torch.zeros(T_, B_, dtype=torch.bool),
    "truncated": torch.zeros(T_, B_, dtype=torch.bool),
    "next_values": torch.zeros(T_, B_),
}
BAD = {  # wrong shape for each argument
    "rewards": torch.zeros(T_),
    "values": torch.zeros(T_ + 1, B_),
    "discounts": torch.zeros(T_, B_ + 1),
    "bootstrap_value": torch.zeros(T_, B_),
    "terminated": torch.zeros(T_, 1, dtype=torch.bool),
    "truncated": torch.zeros(B_, T_, dtype=torch.bool),
    "next_values": torch.zeros(T_, B_, 1),
}


def _call(fn, names, bad, **extra):
    kwargs = {k: (BAD[k] if k == bad else GOOD[k]) for k in names}
    return fn(**kwargs, **extra)


@pytest.mark.parametrize("bad", ["rewards", "discounts", "bootstrap_value"])
def test_discounted_returns_shape_errors(bad):
    got = re.escape(str(tuple(BAD[bad].shape)))
    with pytest.raises(ValueError, match=rf"^{bad} must have shape .*got shape {got}$"):
        _call(discounted_returns, ["rewards", "discounts", "bootstrap_value"], bad)


@pytest.mark.parametrize("bad", ["rewards", "values", "bootstrap_value", "discounts"])
def test_gae_shape_errors(bad):
    with pytest.raises(ValueError, match=rf"^{bad} must have shape"):
        _call(gae, ["rewards", "values", "bootstrap_value", "discounts"], bad, lam=0.9)


@pytest.mark.parametrize("bad", ["rewards", "terminated", "truncated", "next_values"])
def test_nstep_shape_errors(bad):
    with pytest.raises(ValueError, match=rf"^{bad} must have shape"):
        _call(
            nstep_returns, ["rewards", "terminated", "truncated", "next_values"], bad,
            gamma=0.9, n=3,
        )


def test_shape_error_message_states_expected_and_got():
    with pytest.raises(ValueError) as info:
        discounted_returns(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(2))
    msg = str(info.value)
    assert "bootstrap_value" in msg and "(3,)" in msg and "(2,)" in msg
