"""Tests for rlrun.components.networks: MLP (flat and nested observations), NatureCNN, ImpalaResNet, LSTMCore.

Every network is built alone from its input spaces with ComponentTest. The conv torsos are compared with naive
functional references written from the papers (same weights, F.conv2d step by step); LSTMCore is compared with
the LSTM equations unrolled one step at a time with resets, as in TorchBeast's ``AtariNet.forward``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import assert_all_grads, n_params
from torch.nn import functional as F
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.base import Component, ComponentBuildError, api
from rlrun.components.heads import DuelingQHead, PolicyValueHead, QHead
from rlrun.components.networks import MLP, FlattenObservation, ImpalaResNet, LSTMCore, NatureCNN, flat_input_dim
from rlrun.components.testing import ComponentTest

ATARI = sp.Box(0, 255, (4, 84, 84), np.uint8)
FEATURES_512 = sp.Box(-np.inf, np.inf, (512,), np.float32)



# --------------------------------------------------------------------------------------------------- MLP


NESTED = sp.Dict({
    "pixels": sp.Box(0, 255, (3, 4), np.uint8),
    "pos": sp.Box(-1.0, 1.0, (2,), np.float32),
    "status": sp.Dict({"mode": sp.Discrete(3), "bits": sp.MultiBinary(2)}),
})


@pytest.mark.parametrize("batch_shape", [(5,), (2, 3)])
@pytest.mark.parametrize("activation", ["relu", "tanh", "elu"])
def test_mlp_nested_dict_observation(batch_shape, activation):
    """Width of the nested observation: pixels 3*4 = 12, pos 2, mode one-hot 3, bits 2 -> 19.
    MLP([8, 6]) parameters: (19*8 + 8) + (8*6 + 6) = 160 + 54 = 214."""
    mlp = MLP([8, 6], activation)
    test = ComponentTest(mlp, {"obs": NESTED}, batch_shape=batch_shape)
    assert flat_input_dim(NESTED) == 19
    assert n_params(mlp) == 214
    out = test.call("forward")
    assert out.shape == (*batch_shape, 6) and out.dtype == torch.float32
    # the call went through the flatten sub-component's API
    assert [(c.caller, c.callee) for c in test.calls] == [("<user>", "mlp"), ("mlp", "flatten")]


def test_flatten_observation_hand_example():
    """One record: pixels [[0..3],[4..7],[8..11]], pos [0.5, -0.5], mode 2, bits [1, 0]
    -> [0, 1, ..., 11, 0.5, -0.5, 1, 0, 0, 0, 1]: gymnasium sorts a Dict's keys, so "bits" comes before "mode"
    (one-hot of 3: [0, 0, 1])."""
    flat = FlattenObservation()
    test = ComponentTest(flat, {"obs": NESTED}, batch_shape=(1,))
    obs = {"pixels": torch.arange(12, dtype=torch.uint8).reshape(1, 3, 4), "pos": torch.tensor([[0.5, -0.5]]),
           "status": {"mode": torch.tensor([2]), "bits": torch.tensor([[1, 0]], dtype=torch.int8)}}
    expected = torch.tensor([list(range(12)) + [0.5, -0.5, 1.0, 0.0, 0.0, 0.0, 1.0]])
    test.call("forward", obs=obs, expected=expected)


# --------------------------------------------------------------------------------------------------- conv torsos


def nature_reference(net: NatureCNN, x: torch.Tensor) -> torch.Tensor:
    """Mnih et al. 2015 written out with the net's weights: x/255 -> relu(conv 8x8/4) -> relu(conv 4x4/2) ->
    relu(conv 3x3/1) -> flatten -> relu(fc)."""
    c1, c2, c3, fc = (m for m in net.body if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)))
    h = x.double() / 255.0
    h = F.relu(F.conv2d(h, c1.weight.double(), c1.bias.double(), stride=4))
    h = F.relu(F.conv2d(h, c2.weight.double(), c2.bias.double(), stride=2))
    h = F.relu(F.conv2d(h, c3.weight.double(), c3.bias.double(), stride=1))
    return F.relu(F.linear(h.flatten(1), fc.weight.double(), fc.bias.double())).float()


def impala_reference(net: ImpalaResNet, x: torch.Tensor) -> torch.Tensor:
    """Espeholt et al. 2018 Fig. 3 as in TorchBeast: per stack conv -> maxpool 3/2 -> blocks of
    x + conv(relu(conv(relu(x)))); then relu -> fc -> relu. Weights are taken from the net in order."""
    convs = [m for m in net.body.modules() if isinstance(m, torch.nn.Conv2d)]
    fc = [m for m in net.body.modules() if isinstance(m, torch.nn.Linear)][0]
    it = iter(convs)

    def conv(h):
        c = next(it)
        return F.conv2d(h, c.weight.double(), c.bias.double(), padding=1)

    h = x.double() / 255.0
    for _ in net.channels:
        h = F.max_pool2d(conv(h), 3, stride=2, padding=1)
        for _ in range(net.num_blocks):
            h = h + conv(F.relu(conv(F.relu(h))))
    h = F.relu(h).flatten(1)
    return F.relu(F.linear(h, fc.weight.double(), fc.bias.double())).float()


class QNetwork(Component):
    """Torso + head, built from ports (as an algorithm composes them), to count a whole network's parameters."""

    def __init__(self, torso: Component, head: Component) -> None:
        super().__init__("q")
        self.torso, self.head = torso, head

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.build_child(self.torso, obs=obs)
        self.build_child(self.head, x=self.torso.output("forward"), actions=actions)

    @api
    def forward(self, obs: torch.Tensor):
        return self.head.get_q(self.torso(obs))


def test_nature_cnn_parameter_count_4x84x84_6_actions():
    """Nature CNN on 4x84x84 (Mnih et al. 2015), worked out by hand:

    spatial size: conv1 (84 - 8)/4 + 1 = 20; conv2 (20 - 4)/2 + 1 = 9; conv3 (9 - 3)/1 + 1 = 7 -> 64*7*7 = 3136.
    conv1: 4*32*8*8 + 32  =     8,192 + 32  =     8,224
    conv2: 32*64*4*4 + 64 =    32,768 + 64  =    32,832
    conv3: 64*64*3*3 + 64 =    36,864 + 64  =    36,928
    fc:    3136*512 + 512 = 1,605,632 + 512 = 1,606,144
    torso                                    = 1,684,128
    Q head, 6 actions: 512*6 + 6 = 3,078 -> DQN network 1,687,206.
    Dueling head (linear streams): V 512 + 1 = 513, A 3,078 -> 3,591 -> dueling network 1,687,719.
    Dueling head with 512-wide streams (Wang et al.): V 512*512 + 512 + 513 = 263,169;
    A 262,656 + 3,078 = 265,734 -> 528,903 -> network 2,213,031.
    Policy-value head, 6 actions: logits 3,078 + value 513 = 3,591 -> actor-critic 1,687,719.
    """
    torso = NatureCNN().build(obs=ATARI)
    assert torso.output_spaces["forward"].shape == (512,)
    layers = [n_params(m) for m in torso.body if n_params(m)]
    assert layers == [8_224, 32_832, 36_928, 1_606_144]
    assert n_params(torso) == 1_684_128
    actions = sp.Discrete(6)
    assert n_params(QNetwork(NatureCNN(), QHead()).build(obs=ATARI, actions=actions)) == 1_687_206
    assert n_params(QNetwork(NatureCNN(), DuelingQHead()).build(obs=ATARI, actions=actions)) == 1_687_719
    assert n_params(QNetwork(NatureCNN(), DuelingQHead(512)).build(obs=ATARI, actions=actions)) == 2_213_031
    assert n_params(PolicyValueHead().build(x=FEATURES_512, actions=actions)) == 3_591


def test_impala_resnet_parameter_count_4x84x84():
    """IMPALA large network on 4x84x84 (Espeholt et al. 2018, Fig. 3), worked out by hand:

    spatial size: each max-pool 3x3/2 with padding 1 gives ceil(H/2): 84 -> 42 -> 21 -> 11 -> 32*11*11 = 3872.
    stack 1 (16 ch): conv 4*16*9 + 16 = 592;  4 block convs (16*16*9 + 16 = 2,320 each) = 9,280 -> 9,872
    stack 2 (32 ch): conv 16*32*9 + 32 = 4,640; 4 block convs (32*32*9 + 32 = 9,248 each) = 36,992 -> 41,632
    stack 3 (32 ch): conv 32*32*9 + 32 = 9,248; 4 block convs = 36,992 -> 46,240
    convs 97,744; fc 3872*256 + 256 = 991,232 + 256 = 991,488; torso 1,089,232.
    """
    torso = ImpalaResNet().build(obs=ATARI)
    assert torso.output_spaces["forward"].shape == (256,)
    convs = [n_params(m) for m in torso.body.modules() if isinstance(m, torch.nn.Conv2d)]
    assert sum(convs[:5]) == 9_872 and sum(convs[5:10]) == 41_632 and sum(convs[10:]) == 46_240
    assert n_params(torso) == 1_089_232


def impala_count(c, h, w, channels, blocks, hidden):
    """General count for the parametrized options (same arithmetic as the hand-worked one above)."""
    total, in_ch = 0, c
    for ch in channels:
        total += in_ch * ch * 9 + ch + blocks * 2 * (ch * ch * 9 + ch)
        in_ch, h, w = ch, math.ceil(h / 2), math.ceil(w / 2)
    return total + in_ch * h * w * hidden + hidden


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("batch_shape", [(3,), (2, 2)])
@pytest.mark.parametrize("image", [(4, 84, 84), (1, 36, 36), (3, 40, 64)])
def test_nature_cnn_matches_reference(dtype, batch_shape, image):
    """Output [*batch, 512] float32, equal to the paper's layers written out; other H, W than 84 work (36 is the
    smallest: conv3 then outputs 1x1)."""
    high = 255 if dtype == np.uint8 else 1.0
    net = NatureCNN()
    test = ComponentTest(net, {"obs": sp.Box(0, high, image, dtype)}, batch_shape=batch_shape)
    obs = test.sample("obs")
    out = test.call("forward", obs=obs)
    assert out.shape == (*batch_shape, 512) and out.dtype == torch.float32
    pixels = obs if dtype == np.uint8 else obs * 255.0  # the reference scales by 1/255 itself
    ref = nature_reference(net, pixels.reshape(-1, *image)).reshape(*batch_shape, 512)
    assert_close(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("channels,num_blocks,hidden", [((16, 32, 32), 2, 256), ((8, 16), 1, 32), ((8,), 0, 16)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("batch_shape", [(3,), (2, 2)])
def test_impala_resnet_matches_reference(channels, num_blocks, hidden, dtype, batch_shape):
    image = (3, 20, 15)
    high = 255 if dtype == np.uint8 else 1.0
    net = ImpalaResNet(channels, num_blocks, hidden)
    test = ComponentTest(net, {"obs": sp.Box(0, high, image, dtype)}, batch_shape=batch_shape)
    assert n_params(net) == impala_count(*image, channels, num_blocks, hidden)
    obs = test.sample("obs")
    out = test.call("forward", obs=obs)
    assert out.shape == (*batch_shape, hidden) and out.dtype == torch.float32
    pixels = obs if dtype == np.uint8 else obs * 255.0
    ref = impala_reference(net, pixels.reshape(-1, *image)).reshape(*batch_shape, hidden)
    assert_close(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls", [NatureCNN, ImpalaResNet])
def test_uint8_is_scaled_by_1_over_255(cls):
    """A net built for uint8 frames gives the same features as one built for float frames given frames/255."""
    u8, f32 = cls(), cls()
    ComponentTest(u8, {"obs": sp.Box(0, 255, (2, 36, 36), np.uint8)})
    ComponentTest(f32, {"obs": sp.Box(0.0, 1.0, (2, 36, 36), np.float32)})
    f32.load_state_dict(u8.state_dict())
    frames = torch.randint(0, 256, (3, 2, 36, 36), dtype=torch.uint8)
    assert_close(u8(frames), f32(frames.float() / 255.0))
    assert not torch.equal(u8(frames), f32(frames.float()))  # the scaling is not a no-op


@pytest.mark.parametrize("cls", [NatureCNN, ImpalaResNet])
def test_batch_ranks_fold_per_item(cls):
    """[T, B] observations give, item by item, what a single observation gives (no mixing across the batch)."""
    net = cls()
    test = ComponentTest(net, {"obs": sp.Box(0, 255, (1, 36, 36), np.uint8)}, batch_shape=(2, 3))
    obs = test.sample("obs")
    out = test.call("forward", obs=obs)
    for t in range(2):
        for b in range(3):
            assert_close(out[t, b], net(obs[t, b : b + 1])[0])


@pytest.mark.parametrize("cls", [NatureCNN, ImpalaResNet])
def test_conv_torsos_gradient_reaches_every_parameter(cls):
    net = cls()
    test = ComponentTest(net, {"obs": sp.Box(0.0, 1.0, (2, 36, 36), np.float32)}, batch_shape=(4,))
    test.call("forward").pow(2).sum().backward()
    assert_all_grads(net)


@pytest.mark.parametrize("cls,acting_channels_last", [(NatureCNN, False), (ImpalaResNet, True)])
def test_conv_torsos_memory_layout_on_the_cpu(cls, acting_channels_last):
    """On the CPU the convolutions get the images channels-last when gradients are recorded (and when acting for
    the IMPALA ResNet); features and gradients are those of the same layers given the contiguous images."""
    net = cls()
    ComponentTest(net, {"obs": sp.Box(0, 255, (4, 44, 44), np.uint8)})
    seen: list[bool] = []
    first_conv = next(m for m in net.body.modules() if isinstance(m, torch.nn.Conv2d))
    first_conv.register_forward_pre_hook(
        lambda m, args: seen.append(args[0].is_contiguous(memory_format=torch.channels_last)))
    frames = torch.randint(0, 256, (2, 3, 4, 44, 44), dtype=torch.uint8)
    out = net(frames)
    out.pow(2).sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    with torch.no_grad():
        acting = net(frames)
    assert seen == [True, acting_channels_last]

    flat = (frames.reshape(-1, 4, 44, 44).float() / 255.0).contiguous()  # the same layers, contiguous images
    net.zero_grad()
    ref = net.body(flat).reshape(2, 3, -1)
    ref.pow(2).sum().backward()
    assert seen[-1] is False and flat.is_contiguous()
    assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert_close(acting, ref.detach(), rtol=1e-4, atol=1e-5)
    for p, g in zip(net.parameters(), grads, strict=True):
        assert_close(g, p.grad, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("cls,name", [(NatureCNN, "nature_cnn"), (ImpalaResNet, "impala_resnet")])
@pytest.mark.parametrize("space", [sp.Box(-1, 1, (4,), np.float32), sp.Box(0, 255, (84, 84), np.uint8),
                                   sp.Discrete(5), sp.Dict({"image": ATARI})])
def test_conv_torsos_reject_non_images(cls, name, space):
    with pytest.raises(ComponentBuildError) as e:
        cls().build(obs=space)
    assert f"{name}.obs" in str(e.value) and sp.describe(space) in str(e.value)
    assert "[C, H, W]" in str(e.value)


def test_nature_cnn_rejects_too_small_or_channel_last_images():
    """35x35: conv1 (35-8)//4+1 = 7, conv2 (7-4)//2+1 = 2, conv3 2-3+1 = 0 -> too small; 84x84x4 channel-last:
    W = 4 < 8 -> too small, and the message hints at the layout."""
    for space in (sp.Box(0, 255, (4, 35, 35), np.uint8), sp.Box(0, 255, (84, 84, 4), np.uint8)):
        with pytest.raises(ComponentBuildError, match=r"nature_cnn\.obs.*too small.*>= 36.*channel-last"):
            NatureCNN().build(obs=space)


def test_build_error_through_a_parent_names_the_child():
    """Built as a sub-component, the error still names the child and its input."""
    with pytest.raises(ComponentBuildError, match=r"torso\.obs expects an image Box"):
        QNetwork(NatureCNN(name="torso"), QHead()).build(obs=sp.Box(-1, 1, (8,), np.float32),
                                                         actions=sp.Discrete(2))


# --------------------------------------------------------------------------------------------------- LSTM core


def lstm_reference(core: LSTMCore, x, state, first):
    """The LSTM equations unrolled step by step in float64, zeroing the state of an item before a first step
    (TorchBeast AtariNet.forward): i, f, g, o = split(W_ih x + b_ih + W_hh h + b_hh);
    c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(c')."""
    lstm = core.lstm
    w_ih, w_hh = lstm.weight_ih_l0.double(), lstm.weight_hh_l0.double()
    b = (lstm.bias_ih_l0 + lstm.bias_hh_l0).double()
    h, c = (s.double() for s in state)
    outs = []
    for t in range(x.shape[0]):
        keep = (1.0 - first[t].double()).unsqueeze(-1)
        h, c = h * keep, c * keep
        i, f, g, o = (x[t].double() @ w_ih.T + h @ w_hh.T + b).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs).float(), (h.float(), c.float())


def check_core_outputs(core, out, state, T, B):
    sp.check(core.output_spaces["forward"], out, batch_ranks=2, where="lstm_core.forward()")
    sp.check(core.output_spaces["initial_state"], state, batch_ranks=1, where="lstm_core.forward() state")
    assert out.shape == (T, B, core.hidden_size)


@pytest.mark.parametrize("hidden", [1, 8])
@pytest.mark.parametrize("flag_dtype", [torch.bool, torch.float32])
def test_lstm_core_matches_unrolled_equations_with_resets(hidden, flag_dtype):
    """T=6, B=3 from a random state; item 0 resets at t=0 and t=3, item 1 at t=4, item 2 never."""
    T, B = 6, 3
    core = LSTMCore(hidden)
    test = ComponentTest(core, {"x": sp.Box(-1, 1, (5,), np.float32)}, batch_shape=(T, B))
    first = torch.zeros(T, B, dtype=flag_dtype)
    first[0, 0] = first[3, 0] = first[4, 1] = 1
    state = (torch.randn(B, hidden), torch.randn(B, hidden))
    x = test.sample("x")
    out, new_state = test.call("forward", x=x, state=state, first=first)
    check_core_outputs(core, out, new_state, T, B)
    ref_out, ref_state = lstm_reference(core, x, state, first)
    assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    assert_close(new_state, ref_state, rtol=1e-5, atol=1e-5)


def test_lstm_core_reset_equals_two_halves_from_zero():
    """A reset of every item at t=3 of a 6-step sequence: outputs equal running x[:3] and x[3:] separately from
    zero state (the state carried out of the first half is discarded)."""
    core = LSTMCore(4)
    test = ComponentTest(core, {"x": sp.Box(-1, 1, (3,), np.float32)}, batch_shape=(6, 2))
    x = test.sample("x")
    first = torch.zeros(6, 2, dtype=torch.bool)
    first[3] = True
    random_state = (torch.randn(2, 4), torch.randn(2, 4))
    out, state = test.call("forward", x=x, state=None, first=first)
    first_half, _ = core(x[:3], None)
    second_half, second_state = core(x[3:], random_state, first[3:])  # reset at its t=0 discards random_state
    assert_close(out, torch.cat([first_half, second_half]))
    assert_close(state, second_state)
    zero_start, _ = core(x[3:], core.initial_state(2))
    assert_close(second_half, zero_start)
    # without the reset the second half differs (the test can fail)
    no_reset, _ = core(x, None, torch.zeros_like(first))
    assert not torch.allclose(no_reset[3:], second_half)


def test_lstm_core_step_by_step_equals_whole_sequence():
    """Acting one step at a time (T=1), carrying the state, gives the outputs of the whole sequence at once."""
    core = LSTMCore(4)
    test = ComponentTest(core, {"x": sp.Box(-1, 1, (3,), np.float32)}, batch_shape=(5, 2))
    x = test.sample("x")
    first = torch.tensor([[1, 1], [0, 0], [0, 1], [1, 0], [0, 0]], dtype=torch.bool)
    whole, whole_state = core(x, None, first)
    state, steps = core.initial_state(2), []
    for t in range(5):
        out, state = core(x[t : t + 1], state, first[t : t + 1])
        steps.append(out)
    assert_close(torch.cat(steps), whole)
    assert_close(state, whole_state)


def test_lstm_core_initial_state_and_gradients():
    core = LSTMCore(6)
    test = ComponentTest(core, {"x": sp.Box(-1, 1, (4,), np.float32)}, batch_shape=(3, 2))
    h, c = test.call("initial_state", 2, output_batch_ranks=1)
    sp.check(core.output_spaces["initial_state"], (h, c), batch_ranks=1)
    assert not h.any() and not c.any()
    x = test.sample("x")
    assert_close(core(x, (h, c))[0], core(x, None)[0])
    state = (torch.randn(2, 6, requires_grad=True), torch.randn(2, 6, requires_grad=True))
    out, (h1, c1) = core(x, state, torch.zeros(3, 2))
    (out.pow(2).sum() + h1.sum() + c1.sum()).backward()
    assert_all_grads(core)
    assert state[0].grad.abs().sum() > 0  # no reset: the given state is used


@pytest.mark.parametrize("space", [sp.Box(-1, 1, (2, 3), np.float32), sp.Box(0, 9, (4,), np.int64),
                                   sp.Discrete(3)])
def test_lstm_core_build_errors_name_component_and_input(space):
    with pytest.raises(ComponentBuildError) as e:
        LSTMCore(4).build(x=space)
    assert "lstm_core.x" in str(e.value) and sp.describe(space) in str(e.value)
