"""The DQN agent with the Nature CNN or the MLP (``algo.network``), and the same Q-networks written by hand in
plain PyTorch, with the agent's weights copied in: the "bare" side of the learner and sampling benchmarks.

:func:`bare_torso` writes out every torso rlrun has (Nature CNN, IMPALA ResNet, MLP) as a plain ``nn.Sequential``
with the same layer order as rlrun's, so :func:`copy_weights` can copy an agent's torso into it (the learner
benchmark's actor-critic, dueling and SAC references build on it)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.components.networks import ImpalaResNet, NatureCNN

ATARI_OBS = sp.Box(0, 255, (4, 84, 84), np.uint8)
CARTPOLE_OBS = sp.Box(-np.inf, np.inf, (4,), np.float32)


def dqn_agent(obs_space: sp.Space, actions: sp.Discrete, network: str, seed: int = 0, **overrides: Any) -> Any:
    """The built DQNAgent (plain Q head, uniform replay); ``network``: ``mlp`` or ``nature_cnn``; ``overrides``:
    other DQNConfig fields. The replay memory is kept tiny (``buffer_size`` 64 unless overridden): these
    benchmarks feed batches themselves, and 100k Atari frames would be 5.6 GB."""
    from rlrun.algos.dqn import DQNAgent
    from rlrun.algos.dqn_config import DQNConfig

    overrides.setdefault("buffer_size", 64)
    cfg = replace(DQNConfig(), network=network, dueling=False, prioritized_replay=False, **overrides)
    return DQNAgent(cfg, seed).build(obs=obs_space, actions=actions)


class BareResidualBlock(nn.Module):
    """``x + conv1(relu(conv0(relu(x))))``, 3x3 convs keeping the size (Espeholt et al. 2018, Fig. 3)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


def bare_torso(obs_space: sp.Box, network: str, hidden_sizes: Sequence[int] = (64, 64), activation: str = "relu"
               ) -> nn.Sequential:
    """A torso written by hand, float input (see :func:`bare_input`) -> features:

    - ``nature_cnn`` (Mnih et al. 2015): conv 32x8x8/4, 64x4x4/2, 64x3x3/1, fc 512, ReLUs;
    - ``impala_resnet`` (Espeholt et al. 2018, Fig. 3 right): per stack of 16, 32, 32 channels conv 3x3 ->
      max-pool 3x3/2 (padding 1) -> 2 residual blocks; then ReLU, fc 256, ReLU;
    - ``mlp``: Linear + ``activation`` per hidden size.
    """
    if network == "nature_cnn":
        c, h, w = obs_space.shape
        for kernel, stride in ((8, 4), (4, 2), (3, 1)):
            h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
        return nn.Sequential(
            nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(), nn.Linear(64 * h * w, 512), nn.ReLU())
    if network == "impala_resnet":
        c, h, w = obs_space.shape
        layers: list[nn.Module] = []
        for out in (16, 32, 32):
            layers += [nn.Conv2d(c, out, 3, padding=1), nn.MaxPool2d(3, stride=2, padding=1),
                       BareResidualBlock(out), BareResidualBlock(out)]
            c, h, w = out, (h + 1) // 2, (w + 1) // 2
        return nn.Sequential(*layers, nn.ReLU(), nn.Flatten(), nn.Linear(c * h * w, 256), nn.ReLU())
    if network != "mlp":
        raise ValueError(f"no hand-written torso for network={network}")
    act = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU}[activation]
    layers = []
    width = int(np.prod(obs_space.shape))
    for size in hidden_sizes:
        layers += [nn.Linear(width, size), act()]
        width = size
    return nn.Sequential(*layers)


def torso_width(torso: nn.Sequential) -> int:
    """Features out of a :func:`bare_torso` (the last Linear's width)."""
    return [m for m in torso if isinstance(m, nn.Linear)][-1].out_features


def bare_q_network(obs_space: sp.Box, num_actions: int, network: str, hidden_sizes: Sequence[int] = (64, 64)
                   ) -> nn.Sequential:
    """The Q-network written by hand: :func:`bare_torso` (ReLU MLP or a CNN), then a linear layer to the action
    values. Input: float observations (see :func:`bare_input`)."""
    torso = bare_torso(obs_space, network, hidden_sizes, "relu")
    return nn.Sequential(*torso, nn.Linear(torso_width(torso), num_actions))


def bare_input(obs: torch.Tensor, network: str) -> torch.Tensor:
    """What a hand-written script feeds its network: uint8 frames scaled to [0, 1] (leading ranks folded into
    one), vectors as float. Frames go in the memory layout rlrun's image torsos give their convolutions on the CPU
    (their ``conv_layout``: channels-last when gradients are recorded, and when acting for the IMPALA ResNet), so the
    two sides run the same kernels and the comparison is the API's cost alone; the layout's own gain is measured
    apart (docs/devices.md, "Convolutions get their images channels-last")."""
    if network in ("nature_cnn", "impala_resnet"):
        obs = obs.reshape(-1, *obs.shape[-3:])
        obs = {"nature_cnn": NatureCNN, "impala_resnet": ImpalaResNet}[network].conv_layout(obs)
        return obs.to(torch.float32) * (1.0 / 255.0)
    if obs.dim() > 2:  # a rollout's [T, B, n] of vector observations (the MLP cases' observations are vectors)
        obs = obs.reshape(-1, obs.shape[-1])
    return obs.reshape(obs.shape[0], -1).to(torch.float32)


def copy_weights(source: nn.Module, target: nn.Module) -> None:
    """Copy parameters in registration order; the two networks must have the same parameter shapes."""
    src, dst = list(source.parameters()), list(target.parameters())
    shapes = [tuple(p.shape) for p in src], [tuple(p.shape) for p in dst]
    if shapes[0] != shapes[1]:
        raise ValueError(f"the agent's Q-network {shapes[0]} and the hand-written one {shapes[1]} differ; the "
                         f"bare reference no longer matches the agent's network")
    with torch.no_grad():
        for s, d in zip(src, dst, strict=True):
            d.copy_(s)


def bare_copy_of(agent: Any, obs_space: sp.Box, num_actions: int, network: str) -> tuple[nn.Sequential, nn.Sequential]:
    """``(online, target)`` hand-written networks holding the agent's online and target weights."""
    hidden = list(getattr(agent.cfg, "hidden_sizes", (64, 64)))
    online = bare_q_network(obs_space, num_actions, network, hidden)
    copy_weights(agent.q, online)
    target = copy.deepcopy(online)
    copy_weights(agent.target_q, target)
    target.requires_grad_(False)
    return online, target
