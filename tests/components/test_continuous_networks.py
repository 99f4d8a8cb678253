"""rlrun/components/continuous_networks.py: the Q(s, a) critics and the deterministic actor, each built alone from
spaces and called with samples of them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.components.base import ComponentBuildError
from rlrun.components.continuous_networks import DeterministicActor, QFunction, TwinQ
from rlrun.components.testing import ComponentTest

OBS = sp.Box(-8.0, 8.0, (3,), np.float32)
UNIT = sp.Box(-1.0, 1.0, (2,), np.float32)


def test_critics_built_alone():
    q = ComponentTest(QFunction([16], "relu"), {"obs": OBS, "actions": UNIT}, batch_shape=(7,))
    assert q.call("forward").shape == (7,)
    twin = ComponentTest(TwinQ([16], "relu"), {"obs": OBS, "actions": UNIT}, batch_shape=(7,))
    q1, q2 = twin.call("forward")
    assert q1.shape == q2.shape == (7,) and not torch.allclose(q1, q2)  # independent initialisations
    obs, actions = twin.sample("obs"), twin.sample("actions")
    torch.testing.assert_close(twin.component.first_q(obs, actions), twin.component(obs, actions)[0])


@pytest.mark.parametrize("actions", [UNIT, sp.Box(-1.0, 1.0, (2, 3), np.float32)], ids=["vector", "matrix"])
def test_deterministic_actor_acts_in_the_unit_box_with_the_action_shape(actions):
    """tanh of a linear layer: inside [-1, 1], shaped as the action space; a deterministic function of obs."""
    actor = DeterministicActor([16], "relu")
    test = ComponentTest(actor, {"obs": OBS, "actions": actions}, batch_shape=(5,))
    out = test.call("forward").detach()
    assert out.shape == (5, *actions.shape) and float(out.abs().max()) <= 1.0
    obs = test.sample("obs")
    torch.testing.assert_close(actor(obs), actor(obs))


def test_deterministic_actor_is_tanh_of_its_output_layer():
    """With the output layer's weights zero and its bias b = [atanh(0.5), -atanh(0.25)], mu(s) = tanh(b) = [0.5,
    -0.25] whatever the observation."""
    actor = DeterministicActor([4], "relu").build(obs=OBS, actions=UNIT)
    with torch.no_grad():
        actor.out.weight.zero_()
        actor.out.bias.copy_(torch.tensor([np.arctanh(0.5), -np.arctanh(0.25)]))
    out = actor(torch.as_tensor(sp.sample(OBS, (3,), 0)))
    torch.testing.assert_close(out, torch.tensor([[0.5, -0.25]] * 3))


def test_networks_refuse_a_discrete_action_space():
    for net in (QFunction([4], "relu"), DeterministicActor([4], "relu")):
        with pytest.raises(ComponentBuildError, match="expects Box"):
            net.build(obs=OBS, actions=sp.Discrete(3))
