"""The linear learning-rate schedule, against worked values."""

from __future__ import annotations

import logging

import pytest
import torch

from rlrun.components.optimizers.lr_schedule import LinearDecay


def _adam() -> torch.optim.Optimizer:
    return torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=1.0)


def test_the_rate_decays_linearly_to_zero_and_stays_there() -> None:
    """lr 0.1 over 1,000 env steps: 0.1 at 0, 0.075 at 250, 0.025 at 750, 0 at 1,000 and past it."""
    schedule = LinearDecay(0.1, anneal=True, total_env_steps=1000, owner="agent")
    assert [schedule.rate(n) for n in (0, 250, 750, 1000, 5000)] == pytest.approx([0.1, 0.075, 0.025, 0.0, 0.0])
    assert schedule.remaining(250) == pytest.approx(0.75)


def test_without_annealing_or_a_horizon_the_rate_is_constant() -> None:
    assert LinearDecay(0.1, anneal=False, total_env_steps=1000, owner="agent").rate(750) == 0.1
    assert LinearDecay(0.1, anneal=True, total_env_steps=None, owner="agent").rate(10**9) == 0.1


def test_apply_sets_every_group_and_warns_once_at_zero(caplog: pytest.LogCaptureFixture) -> None:
    optimizer = _adam()
    optimizer.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 1.0})
    schedule = LinearDecay(0.1, anneal=True, total_env_steps=1000, owner="ppo_agent")
    with caplog.at_level(logging.WARNING):
        assert schedule.apply(optimizer, 500) == pytest.approx(0.05)
        assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([0.05, 0.05])
        assert "annealed" not in caplog.text
        schedule.apply(optimizer, 1000)
        schedule.apply(optimizer, 2000)
    assert [g["lr"] for g in optimizer.param_groups] == [0.0, 0.0]
    assert caplog.text.count("ppo_agent: the learning rate has annealed to 0 at env step 1000") == 1
