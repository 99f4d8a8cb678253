"""Running-statistics normalisers (rlrun/components/normalizers.py), each built alone from its input spaces and
checked against values computed independently with numpy: the running mean/variance, the clipped observation
normalisation, and reward scaling by the running std of each env copy's discounted return (Baselines'
VecNormalize loop), whose per-copy returns carry over between rollouts and through a state dict."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.components.normalizers import ObservationNormalizer, RewardScaler, RunningMeanStd
from rlrun.errors import ConfigError

EPS_COUNT = 1e-4  # the statistics' initial count (mean 0, var 1 seen that many times)


def test_running_mean_std_equals_numpy_over_everything_seen() -> None:
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(int(rng.integers(1, 40)), 3)) for _ in range(25)]
    rms = RunningMeanStd((3,))
    for b in batches:
        rms.update(torch.as_tensor(b))
    data = np.concatenate(batches)
    n = len(data)
    # the initial (mean 0, var 1, count eps) pseudo-sample folded in exactly
    mean = data.sum(0) / (n + EPS_COUNT)
    m2 = ((data - data.mean(0)) ** 2).sum(0) + EPS_COUNT * 1.0 + (data.mean(0) ** 2) * EPS_COUNT * n / (n + EPS_COUNT)
    np.testing.assert_allclose(rms.mean.numpy(), mean, rtol=1e-10)
    np.testing.assert_allclose(rms.var.numpy(), m2 / (n + EPS_COUNT), rtol=1e-10)
    assert float(rms.count) == pytest.approx(n + EPS_COUNT)


def test_observation_normalizer_from_its_space() -> None:
    space = sp.Box(-np.inf, np.inf, (4,), np.float32)
    norm = ObservationNormalizer(clip=5.0).build(obs=space)
    assert norm.output_spaces["forward"] == sp.Box(-5.0, 5.0, (4,), np.float32)
    rng = np.random.default_rng(1)
    seen = rng.normal([0, 10, -3, 100], [1, 2, 0.5, 30], size=(500, 4))
    norm.update(torch.as_tensor(seen, dtype=torch.float32))
    x = rng.normal([0, 10, -3, 100], [1, 2, 0.5, 30], size=(64, 4)).astype(np.float32)
    x[0] = [50, 10, -3, 100]  # far out: clipped to +5
    mean, var = norm.stats.mean.numpy(), norm.stats.var.numpy()
    expected = np.clip((x.astype(np.float64) - mean) / np.sqrt(var + 1e-8), -5, 5)
    out = norm(torch.as_tensor(x))
    assert out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert out[0, 0] == 5.0
    assert abs(float(out[1:].mean())) < 0.3 and 0.7 < float(out[1:].std()) < 1.3


@pytest.mark.parametrize("space", [sp.Discrete(3), sp.Box(0, 255, (4, 84, 84), np.uint8)])
def test_observation_normalizer_refuses_non_float_spaces(space: sp.Space) -> None:
    with pytest.raises(ConfigError, match="normalize_obs=true needs a float Box"):
        ObservationNormalizer().build(obs=space)


def vecnormalize_loop(rewards: np.ndarray, dones: np.ndarray, gamma: float, clip: float) -> np.ndarray:
    """Baselines / SB3 VecNormalize's reward path, written out: ret = ret * gamma + r; update var(ret) with the
    batch of copies; r / sqrt(var + eps), clipped; ret = 0 where an episode ended."""
    mean, var, count = 0.0, 1.0, EPS_COUNT
    ret = np.zeros(rewards.shape[1])
    out = np.zeros_like(rewards)
    for t in range(len(rewards)):
        ret = ret * gamma + rewards[t]
        bm, bv, bn = ret.mean(), ret.var(), len(ret)
        delta, total = bm - mean, count + bn
        mean, var = mean + delta * bn / total, (var * count + bv * bn + delta ** 2 * count * bn / total) / total
        count = total
        out[t] = np.clip(rewards[t] / np.sqrt(var + 1e-8), -clip, clip)
        ret[dones[t]] = 0.0
    return out


def test_reward_scaler_equals_the_vecnormalize_loop_across_rollouts_and_a_state_dict() -> None:
    rng = np.random.default_rng(2)
    T, B = 40, 3
    rewards = rng.normal(1.0, 3.0, size=(2 * T, B))
    terminated = rng.random((2 * T, B)) < 0.05
    truncated = rng.random((2 * T, B)) < 0.05
    expected = vecnormalize_loop(rewards, terminated | truncated, 0.99, 10.0)

    def part(scaler: RewardScaler, lo: int, hi: int) -> np.ndarray:
        return scaler.scale(torch.as_tensor(rewards[lo:hi]), torch.as_tensor(terminated[lo:hi]),
                            torch.as_tensor(truncated[lo:hi])).numpy()

    first = RewardScaler(0.99).build()
    got_a = part(first, 0, T)
    restored = RewardScaler(0.99).build()  # the second rollout after a checkpoint round trip
    restored.load_state_dict(first.state_dict())
    got_b = part(restored, T, 2 * T)
    np.testing.assert_allclose(np.concatenate([got_a, got_b]), expected, rtol=1e-5, atol=1e-6)
    fresh = part(RewardScaler(0.99).build(), T, 2 * T)  # without the carried-over returns it differs
    assert not np.allclose(fresh, got_b)


@pytest.mark.parametrize("copies", [1, 3, 8])
def test_reward_scaler_folds_each_step_as_running_mean_std_update_does_bit_for_bit(copies: int) -> None:
    """The scaler's per-step arithmetic (Python floats, for speed) gives exactly the numbers of folding each step's
    discounted returns into a RunningMeanStd with its torch update, statistics and carried-over returns included."""
    g = torch.Generator().manual_seed(copies)
    scaler = RewardScaler(0.99, clip=5.0).build()
    stats, returns = RunningMeanStd(()), torch.zeros(copies, dtype=torch.float64)
    for scale in (1.0, 30.0, 1e3):  # three rollouts, the returns and statistics carried over
        rewards = torch.randn(200, copies, generator=g) * scale
        terminated = torch.rand(200, copies, generator=g) < 0.02
        truncated = torch.rand(200, copies, generator=g) < 0.01
        expected = torch.empty(200, copies, dtype=torch.float64)
        for t in range(200):
            returns = returns * 0.99 + rewards[t].double()
            stats.update(returns)
            expected[t] = rewards[t].double() / torch.sqrt(stats.var + 1e-8)
            returns = torch.where(terminated[t] | truncated[t], torch.zeros_like(returns), returns)
        got = scaler.scale(rewards, terminated, truncated)
        assert got.dtype == torch.float32 and torch.equal(got, expected.clamp(-5.0, 5.0).float())
        for name in ("mean", "var", "count"):
            assert torch.equal(getattr(scaler.stats, name), getattr(stats, name)), name
        assert torch.equal(scaler.returns, returns)


def test_reward_scaler_clips() -> None:
    scaler = RewardScaler(0.9, clip=1.0).build()
    out = scaler.scale(torch.tensor([[100.0], [-100.0]]), torch.zeros(2, 1, dtype=torch.bool),
                       torch.zeros(2, 1, dtype=torch.bool))
    assert out.tolist() == [[1.0], [-1.0]]
