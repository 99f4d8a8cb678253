"""Networks: torsos that map an observation to a feature vector, and a recurrent core.

- ``MLP`` (with ``FlattenObservation``): any (nested) observation of Box/Discrete/MultiBinary leaves.
- ``MultiInputTorso``: a Dict/Tuple observation with image parts: a CNN per image, the other parts flattened, all
  concatenated, then the MLP layers (Stable-Baselines3's ``MultiInputPolicy``).
- ``NatureCNN`` (Mnih et al. 2015) and ``ImpalaResNet`` (Espeholt et al. 2018): channel-first images ``[C, H, W]``.
- ``MinAtarCNN`` (Young & Tian 2019): MinAtar's small ``[C, 10, 10]`` grids of 0/1 object channels.
- ``LSTMCore``: the recurrent core of kind ``lstm`` (:mod:`rlrun.components.recurrent_core`).
- ``make_torso``: the feed-forward torso an ``algo.network`` names, through the registry's ``network`` kind (the
  one road: every algorithm's torso, and a plugin's own networks), or for ``auto`` the one the observation space
  calls for (a uint8 image ``[C, H, W]``: the Nature CNN; a bool one, MinAtar's object channels: the MinAtar CNN;
  a Dict/Tuple with an image part: the multi-input torso; anything else: an MLP).

A Dict observation's top-level ``action_mask`` entry (:mod:`rlrun.ops.action_mask`) is never a torso input: it
restricts the actions, it does not describe the state.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.components.base import Component, ComponentBuildError, api
from rlrun.components.recurrent_core import RecurrentCore
from rlrun.errors import ConfigError
from rlrun.ops.action_mask import MASK_KEY
from rlrun.registry import RegistryError, registry

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU}


def input_leaves(space: sp.Space) -> dict[str, sp.Space]:
    """The leaves of a (nested) observation space a torso reads: all of them but a Dict's top-level action mask."""
    return {k: v for k, v in sp.flatten_space(space).items() if k != MASK_KEY}


def flat_input_dim(space: sp.Space) -> int:
    """Width of the concatenated, flattened input leaves of a (nested) observation space; Discrete leaves are
    one-hot; the action mask is left out (:func:`input_leaves`)."""
    total = 0
    for leaf in input_leaves(space).values():
        total += leaf.n if isinstance(leaf, sp.Discrete) else sp.flat_dim(leaf)
    return total


class FlattenObservation(Component):
    """Concatenates every input leaf of a (nested) observation batch into one float vector per item (a Dict's
    ``action_mask`` is not an input)."""

    def _build(self, obs: sp.Space) -> None:
        self._leaves = input_leaves(obs)
        for key, leaf in self._leaves.items():
            if not isinstance(leaf, (sp.Box, sp.Discrete, sp.MultiBinary)):
                raise _unsupported(self.name, key, leaf)
        width = flat_input_dim(obs)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (width,), np.float32)
        # A rank-1 float32 Box is already what the layers take: pass it through untouched.
        self._identity = (isinstance(obs, sp.Box) and len(obs.shape) == 1 and sp.dtype(obs) == torch.float32)

    @api
    def forward(self, obs) -> torch.Tensor:  # noqa: ANN001 - a tensor or a nest of tensors
        if self._identity:
            return obs
        if len(self._leaves) == 1 and "" in self._leaves:
            return self._leaf(self._leaves[""], obs)
        flat = sp.flatten(self.input_spaces["obs"], obs)
        return torch.cat([self._leaf(space, flat[k]) for k, space in self._leaves.items()], dim=-1)

    @staticmethod
    def _leaf(space: sp.Space, x: torch.Tensor) -> torch.Tensor:
        if isinstance(space, sp.Discrete):
            return nn.functional.one_hot(x.long() - int(space.start), space.n).float()
        return x.reshape(*x.shape[: x.dim() - len(space.shape)], -1).float()


def _unsupported(name: str, key: str, leaf: sp.Space) -> Exception:
    where = f"{name}.obs[{key}]" if key else f"{name}.obs"
    return ComponentBuildError(f"{where}: cannot flatten {sp.describe(leaf)}")


class MLP(Component):
    """Fully connected torso: flatten the observation, then Linear (+ LayerNorm) + activation per hidden size."""

    def __init__(self, hidden_sizes: list[int] | tuple[int, ...] = (64, 64), activation: str = "relu",
                 name: str | None = None, layer_norm: bool = False) -> None:
        """``layer_norm``: a LayerNorm (Ba et al. 2016) between each Linear and its activation, what lets PQN learn
        without a target network (Gallici et al. 2024, Section 4)."""
        super().__init__(name or "mlp")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation '{activation}' is not one of {', '.join(ACTIVATIONS)}")
        self.hidden_sizes = list(hidden_sizes)
        self.activation = activation
        self.layer_norm = bool(layer_norm)
        self.flatten = FlattenObservation("flatten")

    def _build(self, obs: sp.Space) -> None:
        self.build_child(self.flatten, obs=obs)
        width = self.flatten.output_spaces["forward"].shape[0]
        layers: list[nn.Module] = []
        for size in self.hidden_sizes:
            layers += [nn.Linear(width, size), *([nn.LayerNorm(size)] if self.layer_norm else []),
                       ACTIVATIONS[self.activation]()]
            width = size
        self.layers = nn.Sequential(*layers)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (width,), np.float32)

    @api
    def forward(self, obs) -> torch.Tensor:  # noqa: ANN001
        return self.layers(self.flatten(obs))


# ---------------------------------------------------------------------------------------------- image torsos


def _conv_out(size: int, kernel: int, stride: int, padding: int = 0) -> int:
    """Output length of a convolution or pooling along one spatial axis (PyTorch's formula, floor mode)."""
    return (size + 2 * padding - kernel) // stride + 1


def _require_image(component: Component, key: str, space: sp.Space) -> tuple[int, int, int]:
    """``(C, H, W)`` of a channel-first image Box, or a ComponentBuildError naming the component and input."""
    if not isinstance(space, sp.Box) or len(space.shape) != 3:
        raise ComponentBuildError(f"{component.name}.{key} expects an image Box [C, H, W] (channel-first, uint8 or "
                                  f"float) but got {sp.describe(space)}")
    c, h, w = (int(d) for d in space.shape)
    return c, h, w


class _ImageTorso(Component):
    """Shared plumbing of the image torsos: any number of batch ranks, uint8 scaled by 1/255, cast to float.

    Subclasses set ``self.body`` (an ``nn.Module`` from ``[N, C, H, W]`` float to ``[N, F]``) and
    ``self.features`` (F) in ``_build_body``.

    Memory layout on the CPU: the images are handed to the convolutions channels-last (``torch.channels_last``,
    oneDNN's native layout: the same values and the same mathematics, other kernels) when gradients are recorded,
    and also when acting if ``channels_last_acting``, chosen per torso: oneDNN's kernels suit both torsos' updates
    and the IMPALA ResNet's acting, but not the Nature CNN's small acting batches, so it acts contiguous
    (docs/devices.md). The parameters stay as they are; the features come out as before.
    On CUDA the input is left contiguous (not measured there).
    """

    channels_last_acting: ClassVar[bool] = False

    @classmethod
    def conv_layout(cls, x: torch.Tensor) -> torch.Tensor:
        """Images ``[N, C, H, W]`` in the memory layout this torso gives its convolutions (see above)."""
        if x.device.type == "cpu" and (cls.channels_last_acting or torch.is_grad_enabled()):
            return x.contiguous(memory_format=torch.channels_last)
        return x

    def _build(self, obs: sp.Space) -> None:
        c, h, w = _require_image(self, "obs", obs)
        self._image_shape = (c, h, w)
        # uint8 pixels are scaled to [0, 1]; other integer dtypes are only cast; floats are used as they are.
        self._scale = 1.0 / 255.0 if np.dtype(obs.dtype) == np.uint8 else None
        self._build_body(c, h, w)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (self.features,), np.float32)

    def _build_body(self, c: int, h: int, w: int) -> None:
        """Subclasses: set ``self.body`` and ``self.features`` for a ``[C, H, W]`` input."""
        raise TypeError(f"{type(self).__name__} must define _build_body (the conv stack for its input size)")

    def _too_small(self, h: int, w: int, out_h: int, out_w: int, min_size: int) -> Exception:
        return ComponentBuildError(
            f"{self.name}.obs: image {h}x{w} is too small (the last conv layer would output {out_h}x{out_w}); "
            f"{type(self).__name__} needs H and W >= {min_size} (got {sp.describe(self.input_spaces['obs'])}; "
            f"is the image channel-last? it must be [C, H, W])")

    @api
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs`` ``[*batch, C, H, W]`` -> features ``[*batch, F]`` (batch ranks are folded into one and back)."""
        lead = obs.shape[:-3]
        x = self.conv_layout(obs.reshape(-1, *self._image_shape))  # before the cast: the uint8 copy is the cheap one
        if self._scale is not None:
            x = x.to(torch.float32) * self._scale
        elif not x.is_floating_point():
            x = x.to(torch.float32)
        return self.body(x).reshape(*lead, self.features)


class NatureCNN(_ImageTorso):
    """The DQN torso of Mnih et al. 2015 ("Human-level control through deep RL", Methods: model architecture).

    conv 32 filters 8x8 stride 4 -> ReLU -> conv 64 4x4 stride 2 -> ReLU -> conv 64 3x3 stride 1 -> ReLU ->
    flatten -> fc ``hidden_size`` -> ReLU. Input ``obs``: Box ``[C, H, W]`` channel-first (e.g. 4 stacked 84x84
    frames), uint8 (scaled by 1/255 inside) or float. On 4x84x84 the conv output is 64x7x7 = 3136 features and the
    torso has 1,684,128 parameters (worked out in ``tests/components/test_networks.py``). Any H, W >= 36 works:
    the flatten size is computed at build from the conv formula.
    """

    def __init__(self, hidden_size: int = 512, name: str | None = None) -> None:
        """``hidden_size``: width of the final fully connected layer (features out; 512 in the paper)."""
        super().__init__(name or "nature_cnn")
        self.hidden_size = int(hidden_size)

    def _build_body(self, c: int, h: int, w: int) -> None:
        oh, ow = h, w
        for kernel, stride in ((8, 4), (4, 2), (3, 1)):
            oh, ow = _conv_out(oh, kernel, stride), _conv_out(ow, kernel, stride)
        if oh < 1 or ow < 1:
            raise self._too_small(h, w, oh, ow, min_size=36)
        self.features = self.hidden_size
        self.body = nn.Sequential(
            nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * oh * ow, self.hidden_size), nn.ReLU(),
        )


class MinAtarCNN(_ImageTorso):
    """The network of the MinAtar paper (Young & Tian 2019, Section 4; MinAtar's examples/dqn.py): one conv of 16
    3x3 filters, stride 1, no padding -> ReLU -> flatten -> fc ``hidden_size`` (128) -> ReLU: a quarter of the Nature
    DQN's filters and units, for 10x10 inputs.

    Input ``obs``: Box ``[C, H, W]`` channel-first, MinAtar's bool object channels (cast to 0./1.; uint8 would be
    scaled by 1/255 as for any image torso). On MinAtar's ``[C, 10, 10]`` the conv gives 16x8x8 = 1024 features and
    the torso has ``16 * (9C + 1) + 1024 * 128 + 128`` parameters (Breakout, C = 4: 131,792; worked out in the
    tests). ``layer_norm``: a LayerNorm after the conv (over its channels and positions) and after the fc layer,
    each before its ReLU: the MinAtar network of PQN (Gallici et al. 2024, purejaxql).
    """

    def __init__(self, hidden_size: int = 128, name: str | None = None, layer_norm: bool = False) -> None:
        """``hidden_size``: width of the fully connected layer (128 in the paper)."""
        super().__init__(name or "minatar_cnn")
        self.hidden_size = int(hidden_size)
        self.layer_norm = bool(layer_norm)

    def _build_body(self, c: int, h: int, w: int) -> None:
        oh, ow = _conv_out(h, 3, 1), _conv_out(w, 3, 1)
        if oh < 1 or ow < 1:
            raise self._too_small(h, w, oh, ow, min_size=3)
        self.features = self.hidden_size
        norm = self.layer_norm
        self.body = nn.Sequential(
            nn.Conv2d(c, 16, 3, stride=1), *([nn.LayerNorm([16, oh, ow])] if norm else []), nn.ReLU(),
            nn.Flatten(),
            nn.Linear(16 * oh * ow, self.hidden_size), *([nn.LayerNorm(self.hidden_size)] if norm else []), nn.ReLU(),
        )


class MinAtarConv(_ImageTorso):
    """The MinAtar network of Obando-Ceron & Castro 2021 ("Revisiting Rainbow"; their ``RainbowDQN`` with
    ``net_conf='minatar'`` and ``hidden_layer=0``, JohanSamir/revisiting_rainbow networks_new.py): one conv of 16 3x3
    filters, stride 1, padded to keep the size (flax's default 'SAME') -> ReLU -> flatten. No fully connected layer:
    the Q heads read the conv's features. On MinAtar's ``[C, 10, 10]``: 16x10x10 = 1600 features and ``16 * (9C + 1)``
    parameters (Breakout, C = 4: 592).
    """

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name or "minatar_conv")

    def _build_body(self, c: int, h: int, w: int) -> None:
        self.features = 16 * h * w
        self.body = nn.Sequential(nn.Conv2d(c, 16, 3, stride=1, padding=1), nn.ReLU(), nn.Flatten())


class _ResidualBlock(nn.Module):
    """``x + conv(relu(conv(relu(x))))`` with 3x3 convs that keep the size (Espeholt et al. 2018, Fig. 3)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


class ImpalaResNet(_ImageTorso):
    """The "large" IMPALA torso of Espeholt et al. 2018 (Fig. 3, right), as in TorchBeast's ``AtariNet``.

    For each stack's channel count: conv 3x3 (stride 1, padding 1) -> max-pool 3x3 stride 2 (padding 1) ->
    ``num_blocks`` residual blocks [ReLU, conv 3x3, ReLU, conv 3x3, + skip]; then ReLU -> flatten ->
    fc ``hidden_size`` -> ReLU. Each pool halves H and W (rounding up): 84 -> 42 -> 21 -> 11, so on 4x84x84 the
    flatten size is 32x11x11 = 3872 and the torso has 1,089,232 parameters (worked out in the tests).
    Input ``obs`` as for :class:`NatureCNN` (uint8 scaled by 1/255, any H, W >= 1).
    """

    channels_last_acting = True

    def __init__(self, channels: tuple[int, ...] | list[int] = (16, 32, 32), num_blocks: int = 2,
                 hidden_size: int = 256, name: str | None = None) -> None:
        """``channels``: output channels of each conv stack (16, 32, 32 in the paper); ``num_blocks``: residual
        blocks per stack (2 in the paper); ``hidden_size``: width of the final fully connected layer (256)."""
        super().__init__(name or "impala_resnet")
        if not channels or min(channels) < 1 or num_blocks < 0:
            raise ValueError(f"ImpalaResNet needs positive channels and num_blocks >= 0, got {channels}, "
                             f"{num_blocks}")
        self.channels = tuple(int(ch) for ch in channels)
        self.num_blocks = int(num_blocks)
        self.hidden_size = int(hidden_size)

    def _build_body(self, c: int, h: int, w: int) -> None:
        layers: list[nn.Module] = []
        in_ch, oh, ow = c, h, w
        for out_ch in self.channels:
            layers += [nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.MaxPool2d(3, stride=2, padding=1)]
            layers += [_ResidualBlock(out_ch) for _ in range(self.num_blocks)]
            in_ch, oh, ow = out_ch, _conv_out(oh, 3, 2, 1), _conv_out(ow, 3, 2, 1)
        self.features = self.hidden_size
        layers += [nn.ReLU(), nn.Flatten(), nn.Linear(in_ch * oh * ow, self.hidden_size), nn.ReLU()]
        self.body = nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------------- several inputs


def is_image(space: sp.Space) -> bool:
    """A channel-first image ``[C, H, W]`` an image torso reads: a rank-3 Box of uint8 pixels or bool channels."""
    return (isinstance(space, sp.Box) and len(space.shape) == 3
            and np.dtype(space.dtype) in (np.dtype(np.uint8), np.dtype(np.bool_)))


def image_torso(space: sp.Space, name: str) -> Component:
    """The CNN for one image part: the Nature CNN for uint8 frames of at least 36x36 (its smallest input), the
    MinAtar CNN for smaller ones and for bool object channels."""
    _, h, w = space.shape
    if np.dtype(space.dtype) == np.uint8 and min(h, w) >= 36:
        return NatureCNN(name=name)
    return MinAtarCNN(name=name)


class MultiInputTorso(Component):
    """A Dict or Tuple observation with image parts (Stable-Baselines3's ``MultiInputPolicy``): each image part
    (:func:`is_image`) through its own CNN (:func:`image_torso`), every other part flattened (Discrete one-hot),
    all concatenated in the space's leaf order, then Linear + activation per hidden size. The top-level
    ``action_mask`` is not an input.

    Children: ``image_<i>`` for the i-th image part (in leaf order); ``output_spaces["forward"]``: Box(F,) with F the
    last hidden size (the concatenation's width without hidden sizes).
    """

    def __init__(self, hidden_sizes: list[int] | tuple[int, ...] = (64, 64), activation: str = "relu",
                 name: str | None = None) -> None:
        """``hidden_sizes``/``activation``: the layers after the concatenation."""
        super().__init__(name or "multi_input")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation '{activation}' is not one of {', '.join(ACTIVATIONS)}")
        self.hidden_sizes = list(hidden_sizes)
        self.activation = activation

    def _build(self, obs: sp.Space) -> None:
        self._leaves = input_leaves(obs)
        if not sp.is_nested(obs) or not self._leaves:
            raise ComponentBuildError(f"{self.name}.obs expects a Dict or Tuple observation with at least one input "
                                      f"part but got {sp.describe(obs)}")
        self.images = nn.ModuleDict()
        self._routes: list[tuple[str, str | None]] = []  # (leaf key, image torso name or None: flattened)
        width = 0
        for key, leaf in self._leaves.items():
            if is_image(leaf):
                torso = image_torso(leaf, f"image_{len(self.images)}")
                self.build_child(torso, obs=leaf)
                self.images[torso.name] = torso
                self._routes.append((key, torso.name))
                width += torso.output_spaces["forward"].shape[0]
            elif isinstance(leaf, (sp.Box, sp.Discrete, sp.MultiBinary)):
                self._routes.append((key, None))
                width += leaf.n if isinstance(leaf, sp.Discrete) else sp.flat_dim(leaf)
            else:
                raise _unsupported(self.name, key, leaf)
        layers: list[nn.Module] = []
        for size in self.hidden_sizes:
            layers += [nn.Linear(width, size), ACTIVATIONS[self.activation]()]
            width = size
        self.layers = nn.Sequential(*layers)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (width,), np.float32)

    def routes(self) -> dict[str, str]:
        """``{leaf key: the torso that reads it}``: an image torso's name, or ``flatten``."""
        return {key: torso or "flatten" for key, torso in self._routes}

    @api
    def forward(self, obs) -> torch.Tensor:  # noqa: ANN001 - a nest of tensors
        flat = sp.flatten(self.input_spaces["obs"], obs)
        parts = [self.images[torso](flat[key]) if torso is not None
                 else FlattenObservation._leaf(self._leaves[key], flat[key]) for key, torso in self._routes]
        return self.layers(torch.cat(parts, dim=-1))


# ---------------------------------------------------------------------------------------------- recurrent core


class LSTMCore(RecurrentCore):
    """IMPALA's LSTM core: a :class:`~rlrun.components.recurrent_core.RecurrentCore` of kind ``lstm`` (state
    ``(h, c)``); ``lstm`` is its ``nn.LSTM``."""

    def __init__(self, hidden_size: int = 256, name: str | None = None) -> None:
        super().__init__("lstm", hidden_size, name or "lstm_core")

    @property
    def lstm(self) -> nn.LSTM:
        return self.rnn


def auto_torso(obs: sp.Space) -> str:
    """The torso ``algo.network=auto`` picks for ``obs``: ``nature_cnn`` for a uint8 image Box ``[C, H, W]``
    (Atari frames), ``minatar_cnn`` for a bool one (MinAtar's object channels), ``multi_input`` for a Dict or Tuple
    with such an image among its parts, ``mlp`` otherwise (a Dict of vectors: flattened and concatenated)."""
    if sp.is_nested(obs):
        return "multi_input" if any(is_image(leaf) for leaf in input_leaves(obs).values()) else "mlp"
    if isinstance(obs, sp.Box) and len(obs.shape) == 3:
        if np.dtype(obs.dtype) == np.uint8:
            return "nature_cnn"
        if np.dtype(obs.dtype) == np.bool_:
            return "minatar_cnn"
    return "mlp"


LAYER_NORM_TORSOS = ("mlp", "minatar_cnn")  # the torsos that take layer_norm


def make_torso(network: str, hidden_sizes: list[int], activation: str, name: str = "torso",
               obs: sp.Space | None = None, layer_norm: bool = False) -> Component:
    """The torso ``network`` names in the registry's ``network`` kind, built as ``name``: an MLP gets
    ``hidden_sizes`` and ``activation``; ``auto`` picks one from ``obs`` (:func:`auto_torso`; it needs ``obs``).
    ``layer_norm`` (PQN's): the MLP and the MinAtar CNN take it; another torso asked for it is a ConfigError. Only
    feed-forward torsos (obs -> features) qualify: a recurrent core is the algorithm's own choice
    (``algo.recurrent``)."""
    if network == "auto":
        if obs is None:
            raise ConfigError("algo.network=auto needs the observation space to choose; name a torso instead.")
        network = auto_torso(obs)
    try:
        torso_class = registry.get("network", network)
    except RegistryError as e:
        raise ConfigError(f"algo.network={network}: {e}") from None
    if layer_norm and torso_class not in (MLP, MinAtarCNN):
        raise ConfigError(f"algo.layer_norm=true: the {network} torso has no LayerNorm option; use one of "
                          f"{', '.join(LAYER_NORM_TORSOS)}, or algo.layer_norm=false.")
    if torso_class is MLP:
        return MLP(list(hidden_sizes), activation, name=name, layer_norm=layer_norm)
    if torso_class is MultiInputTorso:
        return MultiInputTorso(list(hidden_sizes), activation, name=name)
    if torso_class is MinAtarCNN:
        return MinAtarCNN(name=name, layer_norm=layer_norm)
    if not isinstance(torso_class, type) or not issubclass(torso_class, Component) or torso_class is LSTMCore:
        raise ConfigError(f"algo.network={network}: not a feed-forward torso (obs -> features); choose one of "
                          f"{', '.join(n for n in registry.names('network') if n != 'lstm_core')}"
                          f"{' or auto' if obs is not None else ''}.")
    return torso_class(name=name)


def orthogonal_init_torsos(*torsos: nn.Module | None) -> None:
    """Orthogonal weights with gain sqrt(2) and zero biases for every Linear and Conv2d layer of each torso, in
    order (None skipped): OpenAI Baselines' ppo2 / CleanRL's ``layer_init`` for the hidden layers (Huang et al.
    2022, "The 37 Implementation Details of PPO", detail 2). The heads' layers get their own gains."""
    for torso in torsos:
        for m in torso.modules() if torso is not None else ():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.orthogonal_(m.weight, math.sqrt(2.0))
                nn.init.zeros_(m.bias)
