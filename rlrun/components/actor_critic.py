"""The actor-critic network of the PPO family (PPO, A2C, TRPO); its torso is ``networks.make_torso``'s.

- ``ActorCritic``: obs -> (policy parameters, V(obs)), with one torso shared by policy and value or one each, the
  orthogonal initialisation of OpenAI Baselines' ppo2 / CleanRL's ppo.py (Huang et al. 2022, "The 37
  Implementation Details of Proximal Policy Optimization", details 2 and 3), and an optional observation
  normaliser whose statistics travel with the weights.
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.components.heads import PolicyValueHead
from rlrun.components.networks import make_torso, orthogonal_init_torsos
from rlrun.components.normalizers import ObservationNormalizer
from rlrun.ops.action_mask import apply_action_mask, mask_space_of

__all__ = ["ActorCritic"]


class ActorCritic(Component):
    """obs -> (policy parameters, V(obs)): a torso (or one for the actor and one for the critic) and a
    ``PolicyValueHead`` (logits for Discrete actions, (mean, log_std) of a diagonal Gaussian for Box actions).

    With ``shared_torso=False`` the actor and the critic have torsos of the same architecture and their own
    weights (CleanRL's ppo.py for classic control); the head's policy layer reads the actor's features and its
    value layer the critic's. ``shared_torso=True`` is CleanRL's Atari layout (one torso, two linear layers).
    """

    def __init__(self, network: str = "auto", hidden_sizes: list[int] | tuple[int, ...] = (64, 64),
                 activation: str = "tanh", shared_torso: bool = False, orthogonal_init: bool = True,
                 init_log_std: float = 0.0, normalize_obs: bool = False, obs_clip: float = 10.0,
                 name: str = "actor_critic", action_mask: str = "auto") -> None:
        """``network``: torso kind (see :func:`rlrun.components.networks.make_torso`); ``hidden_sizes``/``activation``:
        MLP torso layout; ``shared_torso``: one torso for policy and value; ``orthogonal_init``: orthogonal weights
        (gain sqrt(2) in the torso, 0.01 policy layer, 1 value layer), zero biases, as in CleanRL / Baselines;
        ``init_log_std``: initial log-std of a Gaussian policy (natural log; Box actions only); ``normalize_obs``:
        observations pass through an :class:`ObservationNormalizer` (running mean/std, clipped to ``obs_clip``)
        before the torsos; its statistics are buffers of this network, so they travel with its weights and are part
        of an exported policy; ``action_mask``: auto (a Dict observation's ``action_mask`` masks Discrete logits) |
        off (it is ignored)."""
        super().__init__(name)
        self.network, self.hidden_sizes, self.activation = network, list(hidden_sizes), activation
        self.shared_torso, self.orthogonal_init = bool(shared_torso), bool(orthogonal_init)
        self.head = PolicyValueHead(init_log_std, orthogonal_init, name="head")
        self.obs_normalizer = ObservationNormalizer(obs_clip, name="obs_normalizer") if normalize_obs else None
        self.action_mask = action_mask

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.masked = self.action_mask != "off" and mask_space_of(obs, actions, "algo.action_mask=auto") is not None
        if self.obs_normalizer is not None:
            self.build_child(self.obs_normalizer, obs=obs)
            obs = self.obs_normalizer.output_spaces["forward"]
        self.torso = make_torso(self.network, self.hidden_sizes, self.activation, "torso", obs=obs)
        self.build_child(self.torso, obs=obs)
        self.critic_torso = None
        if not self.shared_torso:
            self.critic_torso = make_torso(self.network, self.hidden_sizes, self.activation, "critic_torso", obs=obs)
            self.build_child(self.critic_torso, obs=obs)
        self.build_child(self.head, x=self.torso.output("forward"), actions=actions)
        if self.critic_torso is not None:  # the value layer reads the critic's features (same width)
            self.build_child(self.head, x=self.critic_torso.output("forward"))
        if self.orthogonal_init:
            orthogonal_init_torsos(self.torso, self.critic_torso)
        self.output_spaces["get_policy"] = self.head.output_spaces["get_policy"]
        self.output_spaces["get_value"] = self.head.output_spaces["get_value"]
        self.output_spaces["forward"] = self.head.output_spaces["forward"]

    @api
    def get_policy(self, obs: Any) -> Any:
        """The action distribution's parameters; a Dict observation's ``action_mask`` masks Discrete logits
        (:func:`rlrun.ops.apply_action_mask`)."""
        raw = obs
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        return self._masked(self.head.get_policy(self.torso(obs)), raw)

    @api
    def get_value(self, obs: Any) -> torch.Tensor:
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        torso = self.torso if self.critic_torso is None else self.critic_torso
        return self.head.get_value(torso(obs))

    @api
    def update_obs_statistics(self, obs: Any) -> None:
        """Fold raw observations ``[N, ...]`` into the observation normaliser's statistics (no-op without one)."""
        if self.obs_normalizer is not None:
            self.obs_normalizer.update(obs)

    @api
    def forward(self, obs: Any) -> tuple[Any, torch.Tensor]:
        raw = obs
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        if self.critic_torso is None:
            params, value = self.head(self.torso(obs))
            return self._masked(params, raw), value
        return self._masked(self.head.get_policy(self.torso(obs)), raw), self.head.get_value(self.critic_torso(obs))

    def _masked(self, params: Any, obs: Any) -> Any:
        """Discrete logits masked by the observation's action mask (unless ``action_mask=off``)."""
        return apply_action_mask(params, obs) if self.masked else params
