"""Tests for rlrun.components.distributions: Categorical, DiagGaussian, make_distribution.

Hand-worked small examples (arithmetic in the docstrings) and torch.distributions as the independent reference,
over batch ranks and event ranks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import distributions as td
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.distributions import Categorical, DiagGaussian, make_distribution

LN3 = math.log(3.0)


# --------------------------------------------------------------------------------------------------- Categorical


def test_categorical_hand_example():
    """logits [0, ln 3] -> exp [1, 3] / 4 -> probs [0.25, 0.75].
    log_prob(0) = ln 0.25 = -1.386294, log_prob(1) = ln 0.75 = -0.287682; mode = 1.
    entropy = -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.25 * 1.386294 + 0.75 * 0.287682 = 0.346574 + 0.215762 = 0.562335.
    KL(p || uniform) = 0.25 ln(0.25 / 0.5) + 0.75 ln(0.75 / 0.5) = -0.173287 + 0.304099 = 0.130812.
    KL(uniform || p) = 0.5 ln(0.5 / 0.25) + 0.5 ln(0.5 / 0.75) = 0.346574 - 0.202733 = 0.143841."""
    p = Categorical(torch.tensor([0.0, LN3]))
    assert_close(p.probs, torch.tensor([0.25, 0.75]))
    assert_close(p.log_prob(torch.tensor(0)), torch.tensor(-1.386294))
    assert_close(p.log_prob(torch.tensor(1)), torch.tensor(-0.287682))
    assert p.deterministic().item() == 1
    assert_close(p.entropy(), torch.tensor(0.562335))
    uniform = Categorical(torch.tensor([0.0, 0.0]))
    assert_close(p.kl(uniform), torch.tensor(0.130812))
    assert_close(uniform.kl(p), torch.tensor(0.143841))
    assert_close(p.kl(p), torch.tensor(0.0))


def test_categorical_logits_are_shift_invariant():
    """logits [5, 5 + ln 3] are the same distribution as [0, ln 3]."""
    assert_close(Categorical(torch.tensor([5.0, 5.0 + LN3])).probs, torch.tensor([0.25, 0.75]))


@pytest.mark.parametrize("batch_shape", [(), (7,), (3, 4)])
def test_categorical_matches_torch(batch_shape):
    g = torch.Generator().manual_seed(0)
    logits, other = torch.randn(*batch_shape, 5, generator=g) * 2, torch.randn(*batch_shape, 5, generator=g)
    actions = torch.randint(0, 5, batch_shape, generator=g)
    ours, ref = Categorical(logits), td.Categorical(logits=logits)
    assert_close(ours.probs, ref.probs)
    assert_close(ours.log_prob(actions), ref.log_prob(actions))
    assert_close(ours.entropy(), ref.entropy())
    assert_close(ours.kl(Categorical(other)), td.kl_divergence(ref, td.Categorical(logits=other)))
    assert_close(ours.deterministic(), ref.probs.argmax(-1))
    sample = ours.sample()
    assert sample.shape == batch_shape and sample.dtype == torch.int64


def test_categorical_sample_frequencies():
    """20,000 draws from [0.25, 0.75]: the frequency of action 1 has std sqrt(0.25 * 0.75 / 20000) = 0.0031; allow
    5 std. Draws are batched ([200, 100]) and independent across the batch."""
    torch.manual_seed(0)
    s = Categorical(torch.tensor([0.0, LN3]).expand(200, 100, 2)).sample()
    assert s.shape == (200, 100)
    assert abs(s.float().mean().item() - 0.75) < 0.016
    assert abs(s[:, 0].float().mean() - s[:, 1].float().mean()) < 0.2  # not one draw copied over the batch
    assert not s.requires_grad


def test_categorical_masked_actions():
    """logits [0, -inf, ln 3]: action 1 has probability 0 and is never drawn; entropy and KL stay finite and
    equal those of [0, ln 3] over the remaining actions (0.562335, see the hand example)."""
    torch.manual_seed(0)
    masked = Categorical(torch.tensor([[0.0, -math.inf, LN3]]).expand(500, 3))
    assert not (masked.sample() == 1).any()
    assert_close(masked.entropy()[0], torch.tensor(0.562335))
    assert_close(masked.kl(masked)[0], torch.tensor(0.0))
    full = Categorical(torch.tensor([0.0, 0.0, 0.0]))
    assert torch.isfinite(masked.kl(full)).all()
    assert torch.isinf(full.kl(Categorical(torch.tensor([0.0, -math.inf, LN3]))))  # q(1) = 0 < p(1) = 1/3


def test_categorical_start_offset():
    """Discrete(3, start=-1): actions are -1, 0, 1; index i has value i - 1."""
    dist = make_distribution(sp.Discrete(3, start=-1), torch.tensor([[0.0, 0.0, 5.0], [5.0, 0.0, 0.0]]))
    assert dist.deterministic().tolist() == [1, -1]
    ref = td.Categorical(logits=torch.tensor([[0.0, 0.0, 5.0], [5.0, 0.0, 0.0]]))
    assert_close(dist.log_prob(torch.tensor([1, -1])), ref.log_prob(torch.tensor([2, 0])))
    torch.manual_seed(0)
    assert set(dist.sample().tolist()) <= {-1, 0, 1}


# --------------------------------------------------------------------------------------------------- DiagGaussian


def test_gaussian_hand_example_1d():
    """N(0, 1): log_prob(1) = -1/2 - ln(2 pi)/2 = -0.5 - 0.918939 = -1.418939; entropy = 1/2 + ln(2 pi)/2 =
    1.418939. N(1, 2^2) (log-std ln 2): entropy = 1.418939 + ln 2 = 2.112086;
    log_prob(3) = -(3 - 1)^2 / (2 * 4) - ln 2 - 0.918939 = -0.5 - 0.693147 - 0.918939 = -2.112086.
    KL(N(1, 4) || N(0, 1)) = ln(1 / 2) + (4 + (1 - 0)^2) / (2 * 1) - 1/2 = -0.693147 + 2.5 - 0.5 = 1.306853.
    KL(N(0, 1) || N(1, 4)) = ln(2 / 1) + (1 + 1) / (2 * 4) - 1/2 = 0.693147 + 0.25 - 0.5 = 0.443147."""
    std_normal = DiagGaussian(torch.tensor([0.0]), torch.tensor([0.0]))
    wide = DiagGaussian(torch.tensor([1.0]), torch.tensor([math.log(2.0)]))
    assert_close(std_normal.log_prob(torch.tensor([1.0])), torch.tensor(-1.418939))
    assert_close(std_normal.entropy(), torch.tensor(1.418939))
    assert_close(wide.entropy(), torch.tensor(2.112086))
    assert_close(wide.log_prob(torch.tensor([3.0])), torch.tensor(-2.112086))
    assert_close(wide.kl(std_normal), torch.tensor(1.306853))
    assert_close(std_normal.kl(wide), torch.tensor(0.443147))
    assert_close(wide.kl(wide), torch.tensor(0.0))
    assert_close(wide.deterministic(), torch.tensor([1.0]))


def test_gaussian_2d_sums_over_dimensions():
    """Diagonal: [N(0, 1), N(1, 4)] has entropy 1.418939 + 2.112086 = 3.531025 and KL to [N(0, 1), N(0, 1)]
    of 0 + 1.306853 (the 1-D examples above)."""
    p = DiagGaussian(torch.tensor([[0.0, 1.0]]), torch.tensor([0.0, math.log(2.0)]))
    q = DiagGaussian(torch.tensor([[0.0, 0.0]]), torch.tensor([0.0, 0.0]))
    assert_close(p.entropy(), torch.tensor([3.531025]))
    assert_close(p.kl(q), torch.tensor([1.306853]))


@pytest.mark.parametrize("batch_shape", [(), (6,), (2, 3)])
@pytest.mark.parametrize("event_shape", [(), (3,), (2, 2)])
def test_gaussian_matches_torch(batch_shape, event_shape):
    g = torch.Generator().manual_seed(1)
    shape = (*batch_shape, *event_shape)
    mean, log_std = torch.randn(shape, generator=g), 0.5 * torch.randn(event_shape, generator=g)
    mean2, log_std2 = torch.randn(shape, generator=g), 0.5 * torch.randn(shape, generator=g)
    actions = torch.randn(shape, generator=g) * 2

    def ref(m, ls):
        return td.Independent(td.Normal(m, ls.exp().expand_as(m)), len(event_shape))

    ours, other = DiagGaussian(mean, log_std, len(event_shape)), DiagGaussian(mean2, log_std2, len(event_shape))
    assert_close(ours.log_prob(actions), ref(mean, log_std).log_prob(actions))
    assert_close(ours.entropy(), ref(mean, log_std).entropy())
    assert_close(ours.kl(other), td.kl_divergence(ref(mean, log_std), ref(mean2, log_std2)))
    assert ours.log_prob(actions).shape == batch_shape
    assert ours.sample().shape == shape


def test_gaussian_sampling_and_gradients():
    """Sample moments of N([1, -2], diag([0.5, 2])^2) from 20,000 draws (std of the mean estimate <= 0.014);
    sample() is detached, rsample() carries gradients to mean and log-std."""
    torch.manual_seed(0)
    mean = torch.tensor([1.0, -2.0]).expand(20_000, 2).clone().requires_grad_()
    log_std = torch.log(torch.tensor([0.5, 2.0])).requires_grad_()
    dist = DiagGaussian(mean, log_std)
    s = dist.sample()
    assert not s.requires_grad
    assert_close(s.mean(0), torch.tensor([1.0, -2.0]), atol=0.06, rtol=0)
    assert_close(s.std(0), torch.tensor([0.5, 2.0]), atol=0.05, rtol=0)
    dist.rsample().sum().backward()
    assert mean.grad is not None and log_std.grad.abs().sum() > 0


# --------------------------------------------------------------------------------------------------- make_distribution


@pytest.mark.parametrize("space,params,cls", [
    (sp.Discrete(4), torch.zeros(5, 4), Categorical),
    (sp.Box(-1, 1, (3,), np.float32), (torch.zeros(5, 3), torch.zeros(3)), DiagGaussian),
    (sp.Box(-1, 1, (2, 2), np.float32), (torch.zeros(5, 2, 2), torch.zeros(2, 2)), DiagGaussian),
], ids=["discrete", "box1", "box2"])
def test_make_distribution_chooses_by_space(space, params, cls):
    """Uniform logits over 4 actions: entropy ln 4 = 1.386294. A standard normal over n dimensions:
    n * 1.418939 (3 -> 4.256817, 2x2 -> 5.675756): the event rank follows the space."""
    dist = make_distribution(space, params)
    assert isinstance(dist, cls)
    expected = {"Discrete(4)": 1.386294, "Box(3,) float32": 4.256817, "Box(2, 2) float32": 5.675756}
    assert_close(dist.entropy(), torch.full((5,), expected[sp.describe(space)]))
    sp.check(space, dist.sample(), batch_ranks=1)


@pytest.mark.parametrize("space", [sp.MultiBinary(3), sp.MultiDiscrete([2, 3]), sp.Dict({"a": sp.Discrete(2)})])
def test_make_distribution_rejects_unsupported_spaces(space):
    with pytest.raises(sp.SpaceError) as e:
        make_distribution(space, torch.zeros(2, 3))
    assert sp.describe(space) in str(e.value)


def test_make_distribution_box_needs_mean_and_log_std():
    with pytest.raises(sp.SpaceError, match=r"Box\(3,\) float32.*\(mean, log_std\)"):
        make_distribution(sp.Box(-1, 1, (3,), np.float32), torch.zeros(2, 3))
