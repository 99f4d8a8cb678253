"""Tests for rlrun.components.q_network: the torso choice, QNetwork built alone from spaces (plain and dueling Q
against the layers applied by hand), and q_loss, with one SGD step on it, against a gradient step worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.components.heads import DuelingQHead, QHead
from rlrun.components.losses import DQNLoss
from rlrun.components.networks import MLP, ImpalaResNet, NatureCNN, make_torso
from rlrun.components.optimizers import optimizer_step
from rlrun.components.q_network import QNetwork, q_loss
from rlrun.components.testing import ComponentTest
from rlrun.errors import ConfigError

VECTOR = sp.Box(-1.0, 1.0, (4,), np.float32)
ATARI = sp.Box(0, 255, (4, 84, 84), np.uint8)


# ---------------------------------------------------------------------------------------------- torso


@pytest.mark.parametrize("network,kind", [("mlp", MLP), ("nature_cnn", NatureCNN), ("impala_resnet", ImpalaResNet)])
def test_q_torso_comes_from_the_registry(network, kind):
    torso = make_torso(network, [32, 16], "elu")
    assert type(torso) is kind and torso.name == "torso"
    if kind is MLP:
        assert torso.hidden_sizes == [32, 16] and torso.activation == "elu"


@pytest.mark.parametrize("network,message", [("lstm_core", "not a feed-forward torso"),
                                             ("no_such_net", "algo.network=no_such_net")])
def test_q_torso_refuses_what_is_not_a_feed_forward_torso(network, message):
    with pytest.raises(ConfigError, match=message):
        make_torso(network, [8], "relu")


# ---------------------------------------------------------------------------------------------- QNetwork


def test_plain_q_is_the_linear_head_on_the_torso_features():
    """MLP [8] relu + QHead: Q = W relu(W_1 x + b_1) + b, computed with numpy from the weights."""
    net = QNetwork("mlp", [8], "relu", dueling=False)
    test = ComponentTest(net, {"obs": VECTOR, "actions": sp.Discrete(3)}, batch_shape=(5,))
    assert isinstance(net.head, QHead) and net.head.name == "q_head"
    obs = test.sample("obs")
    x = obs.double().numpy()
    hidden, head = net.torso.layers[0], net.head.linear
    h = np.maximum(0.0, x @ hidden.weight.detach().double().numpy().T + hidden.bias.detach().double().numpy())
    q = h @ head.weight.detach().double().numpy().T + head.bias.detach().double().numpy()
    out = test.call("forward", obs=obs)
    assert out.shape == (5, 3)
    assert_close(out.double(), torch.as_tensor(q))


def test_dueling_q_is_value_plus_centred_advantages():
    """MLP [8] relu + DuelingQHead: Q = V + A - mean_a A (Wang et al. 2016, Eq. 9) with V = w_v h + b_v and
    A = W_a h + b_a, computed with numpy from the weights."""
    net = QNetwork("mlp", [8], "relu", dueling=True)
    test = ComponentTest(net, {"obs": VECTOR, "actions": sp.Discrete(4)}, batch_shape=(5,))
    assert isinstance(net.head, DuelingQHead)
    obs = test.sample("obs")

    def np_(t: torch.Tensor) -> np.ndarray:
        return t.detach().double().numpy()

    hidden = net.torso.layers[0]
    h = np.maximum(0.0, obs.double().numpy() @ np_(hidden.weight).T + np_(hidden.bias))
    v = h @ np_(net.head.value.weight).T + np_(net.head.value.bias)  # [5, 1]
    a = h @ np_(net.head.advantage.weight).T + np_(net.head.advantage.bias)  # [5, 4]
    q = v + a - a.mean(axis=1, keepdims=True)
    assert_close(test.call("forward", obs=obs).double(), torch.as_tensor(q))


def test_dueling_hand_worked():
    """No hidden layer (the torso only flattens): obs x = [1, 2]; V = 1 (zero weights, bias 1); A = W_a x with
    W_a = [[1, 0], [0, 1], [1, 1]] -> A = [1, 2, 3], mean 2 -> Q = 1 + [1, 2, 3] - 2 = [0, 1, 2]."""
    net = QNetwork("mlp", [], dueling=True).build(obs=sp.Box(-5.0, 5.0, (2,), np.float32), actions=sp.Discrete(3))
    with torch.no_grad():
        net.head.value.weight.zero_()
        net.head.value.bias.fill_(1.0)
        net.head.advantage.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        net.head.advantage.bias.zero_()
    assert_close(net(torch.tensor([[1.0, 2.0]])), torch.tensor([[0.0, 1.0, 2.0]]))


def test_image_observations_get_the_named_cnn():
    net = QNetwork("nature_cnn", dueling=True)
    out = ComponentTest(net, {"obs": ATARI, "actions": sp.Discrete(6)}, batch_shape=(2,)).call("forward")
    assert isinstance(net.torso, NatureCNN) and out.shape == (2, 6)


# ---------------------------------------------------------------------------------------------- q_loss


class Learner(Component):
    """The smallest owner of a Q gradient step: linear Q-networks (the torso only flattens: Q(s) = W s + b), the
    squared DQN loss (0.5 TD^2, mean over items) and plain SGD, lr 0.1."""

    def __init__(self, double_q: bool) -> None:
        super().__init__("learner")
        self.q = QNetwork("mlp", [], name="q")
        self.target_q = QNetwork("mlp", [], name="target_q")
        self.loss = DQNLoss(double_q, huber_delta=None)

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.build_child(self.q, obs=obs, actions=actions)
        self.build_child(self.target_q, obs=obs, actions=actions)
        self.build_child(self.loss, q=self.q.output("forward"), actions=actions)
        self.optimizer = torch.optim.SGD(self.q.parameters(), lr=0.1)
        with torch.no_grad():  # online Q(s) = s, target Q(s) = s with the two actions swapped
            self.q.head.linear.weight.copy_(torch.eye(2))
            self.target_q.head.linear.weight.copy_(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
            for net in (self.q, self.target_q):
                net.head.linear.bias.zero_()

    @api
    def update(self, batch: dict, weights: torch.Tensor | None = None) -> dict:
        loss, info = q_loss(self.q, self.target_q, self.loss, (batch, weights))
        info.update(optimizer_step(self.optimizer, loss))
        return info


BATCH = {"obs": torch.tensor([[1.0, 2.0], [3.0, 0.0]]), "action": torch.tensor([0, 1]),
         "reward": torch.tensor([1.0, 1.0]), "discount": torch.tensor([0.5, 0.5]),
         "next_obs": torch.tensor([[2.0, 1.0], [1.0, 3.0]])}


@pytest.mark.parametrize("double_q,weights,td,loss,w_after,b_after", [
    # Q(s, a) = [1, 0]. Online Q(s') = [[2, 1], [1, 3]] -> argmax [0, 1]; target Q(s') = [[1, 2], [3, 1]].
    # Double: bootstrap Q_target(s', [0, 1]) = [1, 1]; y = 1 + 0.5 * 1 = [1.5, 1.5]; TD = [0.5, 1.5];
    # loss = mean(0.5 TD^2) = (0.125 + 1.125) / 2 = 0.625. dL/dW[a_i] = -TD_i s_i / 2, dL/db[a_i] = -TD_i / 2:
    # W[0] = [1, 0] + 0.1 * 0.25 * [1, 2] = [1.025, 0.05]; W[1] = [0, 1] + 0.1 * 0.75 * [3, 0] = [0.225, 1];
    # b = 0.1 * [0.25, 0.75] = [0.025, 0.075].
    (True, None, [0.5, 1.5], 0.625, [[1.025, 0.05], [0.225, 1.0]], [0.025, 0.075]),
    # Plain: bootstrap max_a Q_target(s') = [2, 3]; y = [2, 2.5]; TD = [1, 2.5]; loss = (0.5 + 3.125) / 2 = 1.8125;
    # W[0] = [1, 0] + 0.1 * 0.5 * [1, 2] = [1.05, 0.1]; W[1] = [0, 1] + 0.1 * 1.25 * [3, 0] = [0.375, 1];
    # b = [0.05, 0.125].
    (False, None, [1.0, 2.5], 1.8125, [[1.05, 0.1], [0.375, 1.0]], [0.05, 0.125]),
    # Double with importance weights [2, 0]: loss = (2 * 0.125 + 0) / 2 = 0.125; only W[0], b[0] move, twice as far.
    (True, [2.0, 0.0], [0.5, 1.5], 0.125, [[1.05, 0.1], [0.0, 1.0]], [0.05, 0.0]),
])
def test_q_loss_step_hand_worked(double_q, weights, td, loss, w_after, b_after):
    learner = Learner(double_q)
    test = ComponentTest(learner, {"obs": sp.Box(-5.0, 5.0, (2,), np.float32), "actions": sp.Discrete(2)})
    target_before = {k: v.clone() for k, v in learner.target_q.state_dict().items()}
    w = None if weights is None else torch.tensor(weights)
    info = test.call("update", batch=BATCH, weights=w)
    assert_close(info["td_error"], torch.tensor(td))
    assert_close(info["loss"], torch.tensor(loss))
    assert_close(learner.q.head.linear.weight.detach(), torch.tensor(w_after))
    assert_close(learner.q.head.linear.bias.detach(), torch.tensor(b_after))
    for k, v in learner.target_q.state_dict().items():  # the target network only provides the bootstrap
        assert torch.equal(v, target_before[k]), k
