"""The Q-network of DQN and Ape-X, and the (double) DQN loss both learners minimise.

- ``QNetwork``: obs -> torso -> Q head, plain (one linear layer) or dueling, Q = V + A - mean(A) (Wang et al.
  2016, "Dueling Network Architectures for Deep Reinforcement Learning", Eq. 9).
- ``q_loss``: the DQN loss (:class:`~rlrun.components.losses.DQNLoss`) on a replay batch, the bootstrap from the
  target network (Mnih et al. 2015) with the action selected by the online one for double DQN (van Hasselt et al.
  2016, Eq. 4).
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.components.heads import DuelingQHead, QHead
from rlrun.components.losses import DQNLoss
from rlrun.components.networks import make_torso
from rlrun.ops.action_mask import apply_action_mask, mask_space_of

__all__ = ["QNetwork", "q_loss"]


class QNetwork(Component):
    """Torso + Q head (plain or dueling): obs -> Q(obs, ·)."""

    def __init__(self, network: str = "mlp", hidden_sizes: list[int] | tuple[int, ...] = (64, 64),
                 activation: str = "relu", dueling: bool = False, name: str = "q", layer_norm: bool = False,
                 noisy: bool = False, noisy_std: float = 0.5, action_mask: str = "auto") -> None:
        """``network``, ``hidden_sizes``, ``activation``, ``layer_norm``: the torso (see
        :func:`rlrun.components.networks.make_torso`; ``auto`` chooses it from the observation space at the build);
        ``dueling``: a :class:`~rlrun.components.heads.DuelingQHead` instead of a linear
        :class:`~rlrun.components.heads.QHead`; ``noisy``: the head's layers are noisy (sigma_0 ``noisy_std``);
        ``action_mask``: auto (a Dict observation's ``action_mask`` masks the Q-values) | off (it is ignored)."""
        super().__init__(name)
        self._torso_args = (network, list(hidden_sizes), activation, layer_norm)
        # a named torso is made now (a bad name fails before the build); auto waits for the observation space
        self.torso = None if network == "auto" else make_torso(network, list(hidden_sizes), activation, "torso",
                                                               layer_norm=layer_norm)
        self._head_args = (dueling, noisy, noisy_std)
        self.head: QHead | DuelingQHead | None = None  # made at the build, after the torso: one parameter order
        self.action_mask = action_mask

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.masked = self.action_mask != "off" and mask_space_of(obs, actions, "algo.action_mask=auto") is not None
        if self.torso is None:
            network, hidden_sizes, activation, layer_norm = self._torso_args
            self.torso = make_torso(network, hidden_sizes, activation, "torso", obs=obs, layer_norm=layer_norm)
        dueling, noisy, noisy_std = self._head_args
        self.head = (DuelingQHead(name="q_head", noisy=noisy, noisy_std=noisy_std) if dueling
                     else QHead("q_head", noisy=noisy, noisy_std=noisy_std))
        self.build_child(self.torso, obs=obs)
        self.build_child(self.head, x=self.torso.output("forward"), actions=actions)
        self.output_spaces["forward"] = self.head.output_spaces["get_q"]

    @api
    def forward(self, obs: Any) -> torch.Tensor:
        """Q-values ``[B, n]``; a Dict observation's ``action_mask`` sets illegal actions' to a large negative
        value (never greedy, never the bootstrap's max: :func:`rlrun.ops.apply_action_mask`)."""
        q = self.head.get_q(self.torso(obs))
        return apply_action_mask(q, obs) if self.masked else q


def q_loss(q: QNetwork, target_q: QNetwork, loss: DQNLoss, data: tuple[dict, torch.Tensor | None]
           ) -> tuple[torch.Tensor, dict]:
    """``(loss, {"td_error": per item})`` of ``loss`` on a replay batch ``data = (batch, weights)``: ``batch`` with
    obs, action, reward, discount, next_obs; ``weights`` the importance weights ``[B]`` or None.

    The bootstrap values come from ``target_q`` (no gradient); with ``loss.double_q`` the bootstrap action is
    selected by ``q`` at ``next_obs`` (double DQN), else by ``target_q``. Call it from the owning agent's API method
    (the networks and the loss are its sub-components). DQN's and Ape-X's learner loss."""
    batch, weights = data
    q_values = q(batch["obs"])
    with torch.no_grad():
        q_next_target = target_q(batch["next_obs"])
        q_next_online = q(batch["next_obs"]) if loss.double_q else None
    total, td = loss.loss(q_values, batch["action"], batch["reward"], batch["discount"], q_next_target,
                          q_next_online, weights)
    return total, {"td_error": td}
