"""The distributional Q-network built alone from spaces (Q = the distribution's mean, dueling per atom), and
distributional_q_loss against the ops composed by hand: which action is taken, which bootstrap action is selected
(double Q or not), the importance weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.distributional_q import (
    AtomQHead,
    DistributionalLoss,
    DistributionalQNetwork,
    distributional_q_loss,
)
from rlrun.components.testing import ComponentTest
from rlrun.ops.distributional import categorical_projection, quantile_huber_loss, quantile_midpoints

OBS = sp.Box(-1.0, 1.0, (4,), np.float32)


@pytest.mark.parametrize("kind", ["categorical", "quantile"])
@pytest.mark.parametrize("dueling", [False, True])
def test_network_builds_from_spaces_and_its_q_is_the_distributions_mean(kind, dueling):
    torch.manual_seed(0)
    net = DistributionalQNetwork(kind, 7, -2.0, 2.0, hidden_sizes=[8], dueling=dueling)
    test = ComponentTest(net, {"obs": OBS, "actions": sp.Discrete(3)}, batch_shape=(5,))
    obs = test.sample("obs")
    dist = test.call("distribution", obs)
    assert dist.shape == (5, 3, 7)
    if kind == "categorical":
        assert_close(dist.exp().sum(-1), torch.ones(5, 3))
        want = (dist.exp() * torch.linspace(-2, 2, 7)).sum(-1)
    else:
        want = dist.mean(-1)
    assert_close(test.call("forward", obs), want)


def test_dueling_atoms_are_value_plus_centred_advantage_per_atom():
    torch.manual_seed(0)
    head = AtomQHead(5, dueling=True)
    x = ComponentTest(head, {"x": sp.Box(-1.0, 1.0, (6,), np.float32), "actions": sp.Discrete(3)},
                      batch_shape=(4,)).sample("x")
    value = head.value(x).unsqueeze(1)  # [B, 1, N]
    advantage = head.advantage(x).view(4, 3, 5)
    assert_close(head(x), value + advantage - advantage.mean(dim=1, keepdim=True))


def _networks(kind: str) -> tuple[DistributionalQNetwork, DistributionalQNetwork]:
    torch.manual_seed(3)
    q, target = (DistributionalQNetwork(kind, 11, -5.0, 5.0, hidden_sizes=[8], name=n) for n in ("q", "target_q"))
    for net in (q, target):
        net.build(obs=OBS, actions=sp.Discrete(3))
    return q, target


BATCH = {"obs": torch.rand(6, 4) * 2 - 1, "action": torch.tensor([0, 1, 2, 0, 1, 2]),
         "reward": torch.tensor([1.0, -0.5, 0.0, 2.0, 0.3, -1.0]),
         "discount": torch.tensor([0.99, 0.0, 0.97, 0.99, 0.0, 0.5]), "next_obs": torch.rand(6, 4) * 2 - 1}


@pytest.mark.parametrize("double_q", [True, False])
@pytest.mark.parametrize("kind", ["categorical", "quantile"])
def test_loss_is_the_ops_composed_by_hand(kind, double_q):
    q, target = _networks(kind)
    loss = DistributionalLoss(kind, double_q, kappa=1.0)
    loss.build(q=q.output_spaces["forward"], actions=sp.Discrete(3))
    weights = torch.tensor([1.0, 0.5, 2.0, 1.0, 0.1, 1.0])
    total, info = distributional_q_loss(q, target, loss, (BATCH, weights))

    rows = torch.arange(6)
    with torch.no_grad():
        next_dist = target.distribution(BATCH["next_obs"])
        chooser = q if double_q else target
        a_star = chooser(BATCH["next_obs"]).argmax(-1)
        boot = next_dist[rows, a_star]
        predicted = q.distribution(BATCH["obs"])[rows, BATCH["action"]]
        if kind == "categorical":
            m = categorical_projection(boot.exp(), BATCH["reward"], BATCH["discount"], torch.linspace(-5, 5, 11))
            per_item = -(m * predicted).sum(-1)
        else:
            targets = BATCH["reward"][:, None] + BATCH["discount"][:, None] * boot
            per_item = quantile_huber_loss(predicted, targets, quantile_midpoints(11), 1.0)
    assert_close(info["td_error"], per_item)
    assert_close(total, (per_item * weights).mean())
    total.backward()
    assert all(p.grad is None for p in target.parameters())  # no gradient into the target network
