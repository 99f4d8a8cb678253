"""The MinAtar paper's torso (rlrun.components.networks.MinAtarCNN, Young & Tian 2019), built alone from MinAtar's
observation space: its output and parameter count worked out, equal to the paper's layers written out, its
LayerNorm option (PQN's), and algo.network=auto choosing it for a bool image. Then Revisiting Rainbow's torso
(MinAtarConv): the padded conv alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.base import ComponentBuildError
from rlrun.components.networks import MLP, MinAtarCNN, MinAtarConv, NatureCNN, auto_torso, make_torso
from rlrun.components.q_network import QNetwork
from rlrun.components.testing import ComponentTest
from rlrun.errors import ConfigError

BREAKOUT = sp.Box(0, 1, (4, 10, 10), np.bool_)  # MinAtar Breakout, channel-first


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("batch_shape", [(3,), (2, 2)])
def test_output_and_parameters(batch_shape):
    """conv 4 -> 16 channels, 3x3: 16 * (4 * 9 + 1) = 592 parameters, 16 x 8 x 8 = 1024 features out;
    fc 1024 -> 128: 1024 * 128 + 128 = 131,200. Total 131,792; output [*batch, 128] float32."""
    net = MinAtarCNN()
    test = ComponentTest(net, {"obs": BREAKOUT}, batch_shape=batch_shape)
    assert n_params(net) == 592 + 131_200 == 131_792
    out = test.call("forward", obs=test.sample("obs"))
    assert out.shape == (*batch_shape, 128) and out.dtype == torch.float32


def test_equals_the_papers_layers_written_out():
    """relu(fc(flatten(relu(conv(x))))) on the 0./1. floats of the bool channels (MinAtar's examples/dqn.py feeds
    the state as floats)."""
    net = MinAtarCNN()
    test = ComponentTest(net, {"obs": BREAKOUT}, batch_shape=(5,))
    obs = test.sample("obs")
    conv, fc = net.body[0], net.body[3]
    x = obs.float()
    ref = F.relu(F.linear(F.relu(F.conv2d(x, conv.weight, conv.bias)).flatten(1), fc.weight, fc.bias))
    assert_close(test.call("forward", obs=obs), ref)


def test_layer_norm_option():
    """LayerNorm over the conv's 16x8x8 output and over the 128 features, each before its ReLU (PQN's MinAtar
    network): 2 x 1024 + 2 x 128 more parameters."""
    net = MinAtarCNN(layer_norm=True)
    ComponentTest(net, {"obs": BREAKOUT})
    assert [type(m).__name__ for m in net.body] == ["Conv2d", "LayerNorm", "ReLU", "Flatten", "Linear", "LayerNorm",
                                                     "ReLU"]
    assert n_params(net) == 131_792 + 2 * 1024 + 2 * 128


def test_too_small_an_image_is_refused_at_build():
    with pytest.raises(ComponentBuildError, match="too small"):
        ComponentTest(MinAtarCNN(), {"obs": sp.Box(0, 1, (10, 10, 2), np.bool_)})


def test_auto_chooses_it_for_a_bool_image():
    assert auto_torso(BREAKOUT) == "minatar_cnn"
    assert auto_torso(sp.Box(0, 255, (4, 84, 84), np.uint8)) == "nature_cnn"
    assert auto_torso(sp.Box(-1, 1, (4,), np.float32)) == "mlp"
    assert isinstance(make_torso("auto", [64], "relu", obs=BREAKOUT), MinAtarCNN)
    q = QNetwork("auto")  # DQN's Q-network chooses at its build, from the observation space
    ComponentTest(q, {"obs": BREAKOUT, "actions": sp.Discrete(6)})
    assert isinstance(q.torso, MinAtarCNN)


def test_layer_norm_is_for_the_mlp_and_minatar_cnn_only():
    assert make_torso("mlp", [8], "relu", layer_norm=True).layer_norm
    assert isinstance(make_torso("minatar_cnn", [8], "relu", layer_norm=True), MinAtarCNN)
    assert not isinstance(make_torso("minatar_cnn", [8], "relu"), (MLP, NatureCNN))
    with pytest.raises(ConfigError, match="algo.layer_norm=true: the nature_cnn torso has no LayerNorm option"):
        make_torso("nature_cnn", [8], "relu", layer_norm=True)


def test_minatar_conv_is_the_padded_conv_alone():
    """conv 4 -> 16 channels, 3x3, padding 1: 592 parameters and 16 x 10 x 10 = 1600 features (flax's 'SAME' on
    10x10), no fc layer; equal to relu(conv2d(x, padding=1)) flattened. The registry names it for algo.network."""
    net = make_torso("minatar_conv", [64], "relu")
    assert isinstance(net, MinAtarConv)
    test = ComponentTest(net, {"obs": BREAKOUT}, batch_shape=(2, 3))
    assert n_params(net) == 592
    obs = test.sample("obs")
    out = test.call("forward", obs=obs)
    assert out.shape == (2, 3, 1600)
    conv = net.body[0]
    ref = F.relu(F.conv2d(obs.reshape(6, 4, 10, 10).float(), conv.weight, conv.bias, padding=1)).flatten(1)
    assert_close(out, ref.reshape(2, 3, 1600))
