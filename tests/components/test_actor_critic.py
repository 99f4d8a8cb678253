"""Tests for rlrun.components.actor_critic: the torso choice (make_torso) and ActorCritic built alone from spaces,
its outputs against the layers applied by hand, the orthogonal initialisation and the observation normaliser."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.actor_critic import ActorCritic
from rlrun.components.networks import MLP, ImpalaResNet, NatureCNN, make_torso
from rlrun.components.testing import ComponentTest
from rlrun.errors import ConfigError

VECTOR = sp.Box(-1.0, 1.0, (4,), np.float32)
ATARI = sp.Box(0, 255, (4, 84, 84), np.uint8)
FLOAT_IMAGE = sp.Box(0.0, 1.0, (3, 84, 84), np.float32)
GAUSSIAN = sp.Box(-2.0, 2.0, (2,), np.float32)


# ---------------------------------------------------------------------------------------------- make_torso


@pytest.mark.parametrize("network,obs,kind", [
    ("auto", VECTOR, MLP),
    ("auto", ATARI, NatureCNN),  # uint8 [C, H, W]: an image
    ("auto", FLOAT_IMAGE, MLP),  # auto picks the CNN for uint8 images only
    ("mlp", ATARI, MLP),
    ("nature_cnn", ATARI, NatureCNN),
    ("impala_resnet", ATARI, ImpalaResNet),
])
def test_make_torso_picks_the_named_or_the_fitting_torso(network, obs, kind):
    torso = make_torso(network, [8], "tanh", "torso", obs=obs)
    assert type(torso) is kind and torso.name == "torso"
    if kind is MLP:
        assert torso.hidden_sizes == [8] and torso.activation == "tanh"


def test_make_torso_refuses_unknown_names():
    with pytest.raises(ConfigError, match="algo.network=lstm: unknown network 'lstm'. Did you mean 'lstm_core'"):
        make_torso("lstm", [8], "tanh", "torso", obs=VECTOR)
    with pytest.raises(ConfigError, match=r"algo.network=lstm_core: not a feed-forward torso .* or auto\."):
        make_torso("lstm_core", [8], "tanh", "torso", obs=VECTOR)
    with pytest.raises(ConfigError, match="algo.network=auto needs the observation space"):
        make_torso("auto", [8], "tanh", "torso")


# ---------------------------------------------------------------------------------------------- ActorCritic


@pytest.mark.parametrize("shared_torso", [False, True])
@pytest.mark.parametrize("actions", [sp.Discrete(3), GAUSSIAN], ids=["discrete", "box"])
def test_actor_critic_built_alone(actions, shared_torso):
    net = ActorCritic("mlp", [16], "tanh", shared_torso=shared_torso)
    test = ComponentTest(net, {"obs": VECTOR, "actions": actions}, batch_shape=(5,))
    params, value = test.call("forward")
    assert value.shape == (5,)
    if isinstance(actions, sp.Discrete):
        assert params.shape == (5, 3)
    else:
        assert params[0].shape == params[1].shape == (5, 2)
    obs = test.sample("obs")
    assert_close(net(obs)[1], test.call("get_value", obs=obs))
    if not shared_torso:  # a separate critic: the value does not depend on the actor's torso
        before = net.get_value(obs)
        with torch.no_grad():
            for p in net.torso.parameters():
                p.add_(1.0)
        assert_close(net.get_value(obs), before)
    n_torsos = 1 if shared_torso else 2
    assert sum(1 for name in ("torso", "critic_torso") if getattr(net, name, None) is not None) == n_torsos


def test_an_atari_space_gets_nature_cnn_torsos_and_the_right_shapes():
    """uint8 [4, 84, 84] frames, 6 actions, network=auto: a Nature CNN per torso (512 features), logits [B, 6]."""
    net = ActorCritic("auto", shared_torso=False)
    test = ComponentTest(net, {"obs": ATARI, "actions": sp.Discrete(6)}, batch_shape=(2,))
    assert isinstance(net.torso, NatureCNN) and isinstance(net.critic_torso, NatureCNN)
    assert net.torso.output_spaces["forward"].shape == (512,)
    logits, value = test.call("forward")
    assert logits.shape == (2, 6) and value.shape == (2,)
    assert test.call("get_policy").shape == (2, 6)


@pytest.mark.parametrize("shared_torso", [False, True])
@pytest.mark.parametrize("actions", [sp.Discrete(3), GAUSSIAN], ids=["discrete", "box"])
def test_outputs_are_the_layers_applied_by_hand(actions, shared_torso):
    """One tanh hidden layer of 8: policy = W_p tanh(W_a x + b_a) + b_p (the actor's torso), value =
    w_v tanh(W_c x + b_c) + b_v (the critic's torso, or the actor's when shared), computed with numpy from the
    weights; a Gaussian's log-std is the learned vector broadcast over the batch (init_log_std = -0.5)."""
    net = ActorCritic("mlp", [8], "tanh", shared_torso=shared_torso, init_log_std=-0.5)
    test = ComponentTest(net, {"obs": VECTOR, "actions": actions}, batch_shape=(6,))
    obs = test.sample("obs")
    x = obs.double().numpy()

    def np_(t: torch.Tensor) -> np.ndarray:
        return t.detach().double().numpy()

    actor, critic = net.torso.layers[0], (net.torso if shared_torso else net.critic_torso).layers[0]
    h_actor = np.tanh(x @ np_(actor.weight).T + np_(actor.bias))
    h_critic = np.tanh(x @ np_(critic.weight).T + np_(critic.bias))
    policy = h_actor @ np_(net.head.policy.weight).T + np_(net.head.policy.bias)
    value = (h_critic @ np_(net.head.value.weight).T + np_(net.head.value.bias))[:, 0]
    params, v = test.call("forward", obs=obs)
    assert_close(v.double(), torch.as_tensor(value))
    if isinstance(actions, sp.Discrete):
        assert_close(params.double(), torch.as_tensor(policy))
    else:
        mean, log_std = params
        assert_close(mean.double(), torch.as_tensor(policy))
        assert_close(log_std, torch.full((6, 2), -0.5))


def test_orthogonal_initialisation():
    """Torso layers: orthogonal with gain sqrt(2) (W^T W = 2 I for a tall [16, 4] matrix), zero biases; policy layer
    gain 0.01, value layer gain 1 (W W^T = g^2 I for wide matrices), zero biases."""
    net = ActorCritic("mlp", [16], "tanh", shared_torso=False, orthogonal_init=True)
    net.build(obs=VECTOR, actions=sp.Discrete(3))
    for torso in (net.torso, net.critic_torso):
        w = torso.layers[0].weight.detach().double()
        assert_close(w.T @ w, 2.0 * torch.eye(4, dtype=torch.float64), rtol=0, atol=1e-5)
        assert torch.count_nonzero(torso.layers[0].bias) == 0
    for layer, gain in ((net.head.policy, 0.01), (net.head.value, 1.0)):
        w = layer.weight.detach().double()
        assert_close(w @ w.T, gain ** 2 * torch.eye(w.shape[0], dtype=torch.float64), rtol=0, atol=1e-5)
        assert torch.count_nonzero(layer.bias) == 0


def test_normalize_obs_feeds_the_torsos_normalised_observations():
    """With ``normalize_obs`` the torsos read clip((x - mean) / sqrt(var + 1e-8), -5, 5) of the statistics that
    update_obs_statistics folds in (population mean and variance of the observations seen), and those statistics
    are buffers of the network (they travel with its weights)."""
    net = ActorCritic("mlp", [8], "tanh", shared_torso=True, normalize_obs=True, obs_clip=5.0)
    test = ComponentTest(net, {"obs": VECTOR, "actions": sp.Discrete(2)}, batch_shape=(4,))
    assert any(k.startswith("obs_normalizer.") for k in net.state_dict())
    data = torch.randn(50, 4, generator=torch.Generator().manual_seed(1)) * 3.0 + 1.0
    test.call("update_obs_statistics", obs=data)
    obs = test.sample("obs")
    d = data.double()
    # RunningMeanStd starts from mean 0, var 1 with a prior count of 1e-4
    count = 1e-4 + 50
    mean = d.mean(0) * 50 / count
    m2 = 1.0 * 1e-4 + d.var(0, unbiased=False) * 50 + d.mean(0).square() * (1e-4 * 50 / count)
    normalised = ((obs.double() - mean) / torch.sqrt(m2 / count + 1e-8)).clamp(-5.0, 5.0).float()
    layer = net.torso.layers[0]
    h = torch.tanh(normalised @ layer.weight.T + layer.bias)
    assert_close(test.call("get_value", obs=obs), net.head.value(h).squeeze(-1))
    assert not torch.allclose(net.get_value(obs), net.head.value(torch.tanh(layer(obs))).squeeze(-1))  # raw obs
