"""The DQN agent with the Nature CNN or the MLP (``algo.network``), and the same Q-networks written by hand in
plain PyTorch, with the agent's weights copied in: the "bare" side of the learner and sampling benchmarks."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp

ATARI_OBS = sp.Box(0, 255, (4, 84, 84), np.uint8)
CARTPOLE_OBS = sp.Box(-np.inf, np.inf, (4,), np.float32)


def dqn_agent(obs_space: sp.Space, actions: sp.Discrete, network: str, seed: int = 0, **overrides: Any) -> Any:
    """The built DQNAgent (plain Q head, uniform replay); ``network``: ``mlp`` or ``nature_cnn``; ``overrides``:
    other DQNConfig fields. The replay memory is kept tiny (``buffer_size`` 64 unless overridden): these
    benchmarks feed batches themselves, and 100k Atari frames would be 5.6 GB."""
    from rlrun.algos.dqn import DQNAgent
    from rlrun.config import DQNConfig

    overrides.setdefault("buffer_size", 64)
    cfg = replace(DQNConfig(), network=network, dueling=False, prioritized_replay=False, **overrides)
    return DQNAgent(cfg, seed).build(obs=obs_space, actions=actions)


def bare_q_network(obs_space: sp.Box, num_actions: int, network: str, hidden_sizes: list[int] = (64, 64)
                   ) -> nn.Sequential:
    """The Q-network written by hand: Nature CNN (Mnih et al. 2015: conv 32x8x8/4, 64x4x4/2, 64x3x3/1, fc 512)
    or an MLP, then a linear layer to the action values. Input: float observations (see :func:`bare_input`)."""
    if network == "nature_cnn":
        c, h, w = obs_space.shape
        for kernel, stride in ((8, 4), (4, 2), (3, 1)):
            h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
        return nn.Sequential(
            nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(),
            nn.Linear(64 * h * w, 512), nn.ReLU(), nn.Linear(512, num_actions))
    layers: list[nn.Module] = []
    width = int(np.prod(obs_space.shape))
    for size in hidden_sizes:
        layers += [nn.Linear(width, size), nn.ReLU()]
        width = size
    return nn.Sequential(*layers, nn.Linear(width, num_actions))


def bare_input(obs: torch.Tensor, network: str) -> torch.Tensor:
    """What a hand-written script feeds its network: uint8 frames scaled to [0, 1], vectors as float."""
    if network == "nature_cnn":
        return obs.to(torch.float32) * (1.0 / 255.0)
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
