"""Networks: torsos that map an observation (possibly nested) to a feature vector."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.components.base import Component, api

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU}


def flat_input_dim(space: sp.Space) -> int:
    """Width of the concatenated, flattened leaves of a (nested) observation space; Discrete leaves are one-hot."""
    total = 0
    for leaf in sp.flatten_space(space).values():
        total += leaf.n if isinstance(leaf, sp.Discrete) else sp.flat_dim(leaf)
    return total


class FlattenObservation(Component):
    """Concatenates every leaf of a (nested) observation batch into one float vector per item."""

    def _build(self, obs: sp.Space) -> None:
        self._leaves = sp.flatten_space(obs)
        for key, leaf in self._leaves.items():
            if not isinstance(leaf, (sp.Box, sp.Discrete, sp.MultiBinary)):
                raise _unsupported(self.name, key, leaf)
        width = flat_input_dim(obs)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (width,), np.float32)

    @api
    def forward(self, obs) -> torch.Tensor:  # noqa: ANN001 - a tensor or a nest of tensors
        if len(self._leaves) == 1 and "" in self._leaves:
            return self._leaf(self._leaves[""], obs)
        flat = sp.flatten(self.input_spaces["obs"], obs)
        return torch.cat([self._leaf(self._leaves[k], v) for k, v in flat.items()], dim=-1)

    @staticmethod
    def _leaf(space: sp.Space, x: torch.Tensor) -> torch.Tensor:
        if isinstance(space, sp.Discrete):
            return nn.functional.one_hot(x.long() - int(space.start), space.n).float()
        return x.reshape(*x.shape[: x.dim() - len(space.shape)], -1).float()


def _unsupported(name: str, key: str, leaf: sp.Space) -> Exception:
    from rlrun.components.base import ComponentBuildError

    where = f"{name}.obs[{key}]" if key else f"{name}.obs"
    return ComponentBuildError(f"{where}: cannot flatten {sp.describe(leaf)}")


class MLP(Component):
    """Fully connected torso: flatten the observation, then Linear + activation per hidden size."""

    def __init__(self, hidden_sizes: list[int] | tuple[int, ...] = (64, 64), activation: str = "relu",
                 name: str | None = None) -> None:
        super().__init__(name or "mlp")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation '{activation}' is not one of {', '.join(ACTIVATIONS)}")
        self.hidden_sizes = list(hidden_sizes)
        self.activation = activation
        self.flatten = FlattenObservation("flatten")

    def _build(self, obs: sp.Space) -> None:
        self.build_child(self.flatten, obs=obs)
        width = self.flatten.output_spaces["forward"].shape[0]
        layers: list[nn.Module] = []
        for size in self.hidden_sizes:
            layers += [nn.Linear(width, size), ACTIVATIONS[self.activation]()]
            width = size
        self.layers = nn.Sequential(*layers)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (width,), np.float32)

    @api
    def forward(self, obs) -> torch.Tensor:  # noqa: ANN001
        return self.layers(self.flatten(obs))
