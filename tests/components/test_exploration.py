"""Tests for rlrun.components.exploration: LinearSchedule's values by hand, and EpsilonGreedy built alone from the
space of Q: greedy actions, the schedule over its step counter, and the action frequencies epsilon implies."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.components.base import ComponentBuildError
from rlrun.components.exploration import EpsilonGreedy, LinearSchedule
from rlrun.components.testing import ComponentTest

Q_SPACE = sp.Box(-np.inf, np.inf, (4,), np.float32)


@pytest.mark.parametrize("t,value", [(-3, 1.0), (0, 1.0), (2, 0.82), (5, 0.55), (10, 0.1), (25, 0.1)])
def test_linear_schedule_hand_worked(t, value):
    """start 1, end 0.1 over 10 steps: 1 + (t / 10) (0.1 - 1) = 1 - 0.09 t until t = 10, then 0.1 (and 1 before
    t = 0)."""
    assert LinearSchedule(1.0, 0.1, 10)(t) == pytest.approx(value)


def test_linear_schedule_may_rise_and_needs_at_least_one_step():
    assert LinearSchedule(0.0, 2.0, 4)(1) == pytest.approx(0.5)
    zero_steps = LinearSchedule(1.0, 0.5, 0)  # counted as 1 step: the end value from t = 1 on
    assert (zero_steps(0), zero_steps(1), zero_steps(7)) == (1.0, 0.5, 0.5)


def test_built_from_the_q_space():
    exploration = EpsilonGreedy(1.0, 0.1, 10)
    ComponentTest(exploration, {"q": Q_SPACE})
    assert exploration.output_spaces["get_actions"] == sp.Discrete(4)
    assert exploration.num_actions == 4 and "timestep" in exploration.state_dict()
    with pytest.raises(ComponentBuildError, match="exploration.q expects a rank-1 space"):
        EpsilonGreedy().build(q=sp.Box(-np.inf, np.inf, (2, 4), np.float32))
    with pytest.raises(ComponentBuildError, match="exploration.q expects a floating-point space"):
        EpsilonGreedy().build(q=sp.Box(-10, 10, (4,), np.int64))


def test_epsilon_follows_the_schedule_over_advanced_env_steps():
    """start 1, end 0.1 over 10 env steps: 1 at t = 0; 0.55 after 5; 0.1 after 12 (the step counter is a buffer, so
    it is saved with the component)."""
    exploration = EpsilonGreedy(1.0, 0.1, 10)
    test = ComponentTest(exploration, {"q": Q_SPACE})
    assert exploration.epsilon() == pytest.approx(1.0)
    test.call("advance", 5)
    assert int(exploration.timestep) == 5 and exploration.epsilon() == pytest.approx(0.55)
    test.call("advance", 7)
    assert int(exploration.state_dict()["timestep"]) == 12 and exploration.epsilon() == pytest.approx(0.1)


def test_greedy_without_exploration_or_with_epsilon_zero():
    q = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, -1.0, 0.0, 4.9], [0.0, 0.0, 0.0, 7.0]])
    expected = torch.tensor([1, 0, 3])
    test = ComponentTest(EpsilonGreedy(1.0, 1.0, 1), {"q": Q_SPACE}, batch_shape=(3,))
    assert torch.equal(test.call("get_actions", q, explore=False), expected)  # epsilon 1 but no exploration
    zero = ComponentTest(EpsilonGreedy(0.0, 0.0, 1), {"q": Q_SPACE}, batch_shape=(3,))
    assert torch.equal(zero.call("get_actions", q, explore=True), expected)


@pytest.mark.parametrize("epsilon", [1.0, 0.5])
def test_action_frequencies(epsilon):
    """With probability epsilon a uniform action of the 4, else the greedy one (action 2 here): P(greedy) =
    1 - epsilon + epsilon / 4, P(other) = epsilon / 4. 20 000 draws: the standard error is <= 0.0035."""
    n = 20_000
    q = torch.tensor([0.0, 1.0, 2.0, -1.0]).expand(n, 4)
    torch.manual_seed(0)
    actions = ComponentTest(EpsilonGreedy(epsilon, epsilon, 1), {"q": Q_SPACE}, batch_shape=(n,)).call(
        "get_actions", q, explore=True)
    freq = torch.bincount(actions, minlength=4).double() / n
    expected = torch.full((4,), epsilon / 4, dtype=torch.float64)
    expected[2] += 1.0 - epsilon
    torch.testing.assert_close(freq, expected, rtol=0, atol=0.02)


def test_epsilon_follows_every_way_the_step_counter_changes():
    """epsilon is kept between calls until the counter changes: by advance, by a weight sync's in-place copy, by a
    state-dict load, and when a move replaces the buffer; a counter made under inference mode is read each time."""
    exploration = EpsilonGreedy(1.0, 0.0, 10)
    ComponentTest(exploration, {"q": Q_SPACE})
    assert exploration.epsilon() == pytest.approx(1.0) and exploration.epsilon() == pytest.approx(1.0)
    exploration.advance(2)
    assert exploration.epsilon() == pytest.approx(0.8)
    exploration.timestep.copy_(torch.tensor(5))  # DQN's set_weights
    assert exploration.epsilon() == pytest.approx(0.5)
    exploration.load_state_dict({"timestep": torch.tensor(9)})
    assert exploration.epsilon() == pytest.approx(0.1)
    exploration.timestep = torch.tensor(3)  # what a move to another device does
    assert exploration.epsilon() == pytest.approx(0.7)
    with torch.inference_mode():
        exploration.timestep = torch.tensor(6)
    assert exploration.epsilon() == pytest.approx(0.4)
    exploration.timestep = torch.tensor(1)
    assert exploration.epsilon() == pytest.approx(0.9)
