"""rlrun.ops.q_lambda_returns (PQN's target): hand-worked examples, and a naive reference written from the
lambda-return's definition as a weighted sum of n-step returns (Sutton & Barto 2018, Eq. 12.3, episodic form), in
Python floats, with terminations and truncations."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from rlrun.ops import q_lambda_returns


def _col(xs):
    return torch.tensor(xs, dtype=torch.float32).unsqueeze(1)  # [T, 1]


def test_hand_worked_without_episode_end():
    """gamma 0.5, lambda 0.5, r = 1, 2, 3, max Q(s'_t) = 4, 8, 16:
    G_2 = 3 + 0.5 * 16 = 11 (the rollout's end: bootstrap only);
    G_1 = 2 + 0.5 * (0.5 * 8 + 0.5 * 11) = 6.75;
    G_0 = 1 + 0.5 * (0.5 * 4 + 0.5 * 6.75) = 3.6875."""
    zeros = _col([0, 0, 0]).bool()
    g = q_lambda_returns(_col([1, 2, 3]), _col([4, 8, 16]), zeros, zeros, 0.5, 0.5)
    assert_close(g, _col([3.6875, 6.75, 11.0]))


def test_hand_worked_termination_and_truncation():
    """The same rollout with an episode end at t = 1.
    Terminated: G_1 = 2 (no bootstrap), G_0 = 1 + 0.5 * (0.5 * 4 + 0.5 * 2) = 2.5, G_2 = 11 (the next episode).
    Truncated: G_1 = 2 + 0.5 * 8 = 6 (bootstrap, chain cut), G_0 = 1 + 0.5 * (0.5 * 4 + 0.5 * 6) = 3.5."""
    r, nv, none, at1 = _col([1, 2, 3]), _col([4, 8, 16]), _col([0, 0, 0]).bool(), _col([0, 1, 0]).bool()
    assert_close(q_lambda_returns(r, nv, at1, none, 0.5, 0.5), _col([2.5, 2.0, 11.0]))
    assert_close(q_lambda_returns(r, nv, none, at1, 0.5, 0.5), _col([3.5, 6.0, 11.0]))
    assert_close(q_lambda_returns(r, nv, at1, at1, 0.5, 0.5), _col([2.5, 2.0, 11.0]))  # termination wins


def _naive(rewards, next_values, terminated, truncated, gamma, lam):
    """G_t = (1 - lam) sum_{n=1}^{m-1} lam^(n-1) G_t^(n) + lam^(m-1) G_t^(m), where m reaches the episode's end
    (termination or truncation) or the rollout's last step, and G_t^(n) is the n-step return bootstrapped from
    max Q(s'_{t+n-1}) unless step t+n-1 terminated."""
    T, B = len(rewards), len(rewards[0])
    out = [[0.0] * B for _ in range(T)]
    for b in range(B):
        for t in range(T):
            end = t
            while end < T - 1 and not (terminated[end][b] or truncated[end][b]):
                end += 1
            m = end - t + 1

            def n_step(n):
                total = sum(gamma ** k * rewards[t + k][b] for k in range(n))
                last = t + n - 1
                return total + (0.0 if terminated[last][b] else gamma ** n * next_values[last][b])

            out[t][b] = (1 - lam) * sum(lam ** (n - 1) * n_step(n) for n in range(1, m)) + lam ** (m - 1) * n_step(m)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("lam", [0.0, 0.65, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_naive_reference(seed, lam):
    g = torch.Generator().manual_seed(seed)
    T, B, gamma = 9, 4, 0.9
    rewards, next_values = torch.randn(T, B, generator=g), torch.randn(T, B, generator=g)
    terminated = torch.rand(T, B, generator=g) < 0.2
    truncated = torch.rand(T, B, generator=g) < 0.15
    next_values[terminated] = float("nan")  # never read: a terminal step has no bootstrap
    got = q_lambda_returns(rewards, next_values, terminated, truncated, gamma, lam)
    want = _naive(rewards.tolist(), next_values.tolist(), terminated.tolist(), truncated.tolist(), gamma, lam)
    assert torch.isfinite(got).all()
    assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_lambda_zero_is_the_one_step_target():
    g = torch.Generator().manual_seed(3)
    r, nv = torch.randn(6, 3, generator=g), torch.randn(6, 3, generator=g)
    term = torch.rand(6, 3, generator=g) < 0.3
    trunc = torch.zeros(6, 3, dtype=torch.bool)
    assert_close(q_lambda_returns(r, nv, term, trunc, 0.99, 0.0), r + 0.99 * (~term).float() * nv)


def test_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="next_values"):
        q_lambda_returns(torch.zeros(3, 2), torch.zeros(3), torch.zeros(3, 2), torch.zeros(3, 2), 0.9, 0.5)
