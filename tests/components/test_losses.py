"""Tests for rlrun.components.losses: the DQNLoss component built alone from spaces, its (double) DQN TD errors and
Huber / squared losses against hand-worked numbers, importance weights, and the gradient reaching only Q(s, a)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.base import ComponentBuildError
from rlrun.components.losses import DQNLoss
from rlrun.components.testing import ComponentTest

Q_SPACE = sp.Box(-np.inf, np.inf, (2,), np.float32)

# Batch of 2: a = [0, 1], r = [1, 0.5], d = [0.9, 0] (the second terminal). Q(s, .) = [[1, 2], [3, 4]] -> Q(s, a) =
# [1, 4]; Q_target(s') = [[10, 20], [30, 40]]; Q_online(s') = [[5, 0], [7, 1]].
# Double DQN: a' = argmax online = [0, 0] -> bootstrap [10, 30] -> y = [1 + 9, 0.5] -> TD = [9, -3.5].
# Plain DQN:  a' = argmax target = [1, 1] -> bootstrap [20, 40] -> y = [1 + 18, 0.5] -> TD = [18, -3.5].
Q = [[1.0, 2.0], [3.0, 4.0]]
INPUTS = dict(actions=torch.tensor([0, 1]), rewards=torch.tensor([1.0, 0.5]), discounts=torch.tensor([0.9, 0.0]),
              q_next_target=torch.tensor([[10.0, 20.0], [30.0, 40.0]]),
              q_next_online=torch.tensor([[5.0, 0.0], [7.0, 1.0]]))


def loss_test(double_q: bool, huber_delta: float | None = 1.0) -> ComponentTest:
    return ComponentTest(DQNLoss(double_q, huber_delta), {"q": Q_SPACE, "actions": sp.Discrete(2)}, batch_shape=(2,))


@pytest.mark.parametrize("double_q,huber_delta,td,loss", [
    # Huber, delta 1: |TD| > 1 -> |TD| - 0.5: [8.5, 3] -> mean 5.75 (double); [17.5, 3] -> 10.25 (plain).
    (True, 1.0, [9.0, -3.5], 5.75),
    (False, 1.0, [18.0, -3.5], 10.25),
    # Squared: 0.5 TD^2: [40.5, 6.125] -> 23.3125; [162, 6.125] -> 84.0625.
    (True, None, [9.0, -3.5], 23.3125),
    (False, None, [18.0, -3.5], 84.0625),
    # Huber, delta 10: |TD| <= 10 -> 0.5 TD^2 = [40.5, 6.125] -> 23.3125 (double); 18 > 10 -> 10 (18 - 5) = 130,
    # -> (130 + 6.125) / 2 = 68.0625 (plain).
    (True, 10.0, [9.0, -3.5], 23.3125),
    (False, 10.0, [18.0, -3.5], 68.0625),
])
def test_hand_worked(double_q, huber_delta, td, loss):
    """Plain DQN ignores a given online Q(s'): it selects with the target network."""
    out_loss, out_td = loss_test(double_q, huber_delta).call("loss", torch.tensor(Q), **INPUTS)
    assert_close(out_td, torch.tensor(td))
    assert_close(out_loss, torch.tensor(loss))


def test_double_and_plain_differ_only_where_the_bootstrap_counts():
    """The non-terminal item's targets differ (9 vs 18); the terminal one's (discount 0) agree."""
    _, double = loss_test(True).call("loss", torch.tensor(Q), **INPUTS)
    _, plain = loss_test(False).call("loss", torch.tensor(Q), **INPUTS)
    assert double[0] != plain[0] and double[1] == plain[1]


def test_importance_weights_scale_each_item():
    """Weights [1, 0] (prioritised replay): Huber [8.5, 3] -> mean([8.5, 0]) = 4.25; the TD errors are unweighted."""
    loss, td = loss_test(True).call("loss", torch.tensor(Q), **INPUTS, weights=torch.tensor([1.0, 0.0]))
    assert_close(loss, torch.tensor(4.25))
    assert_close(td, torch.tensor([9.0, -3.5]))


def test_the_gradient_reaches_only_the_taken_action_values():
    """Huber with delta 1 beyond the quadratic zone: dL/dQ(s_i, a_i) = -sign(TD_i) / B = [-0.5, 0.5]; 0 for the
    actions not taken; the bootstrap values and the returned TD errors carry no gradient."""
    q = torch.tensor(Q, requires_grad=True)
    target = INPUTS["q_next_target"].clone().requires_grad_(True)
    loss, td = loss_test(True).call("loss", q, **{**INPUTS, "q_next_target": target})
    loss.backward()
    assert_close(q.grad, torch.tensor([[-0.5, 0.0], [0.0, 0.5]]))
    assert target.grad is None and not td.requires_grad


def test_built_from_spaces_and_refuses_mismatched_ones():
    """The output is (scalar loss, per-item TD errors); Q must be a float vector of one value per action."""
    loss = DQNLoss().build(q=Q_SPACE, actions=sp.Discrete(2))
    assert isinstance(loss.output_spaces["loss"], sp.Tuple)
    with pytest.raises(ComponentBuildError, match="q has 3 action values but actions is"):
        DQNLoss().build(q=sp.Box(-np.inf, np.inf, (3,), np.float32), actions=sp.Discrete(2))
    with pytest.raises(ComponentBuildError, match="loss.actions expects Discrete"):
        DQNLoss().build(q=Q_SPACE, actions=sp.Box(-1.0, 1.0, (2,), np.float32))
    with pytest.raises(ComponentBuildError, match="loss.q expects a rank-1 space"):
        DQNLoss().build(q=sp.Box(-np.inf, np.inf, (2, 2), np.float32), actions=sp.Discrete(2))
