"""The recurrent actor-critic of IMPALA, APPO, and of PPO and A2C with ``algo.recurrent=lstm|gru``: obs ->
[observation normaliser] -> torso -> [recurrent core] -> policy and value head, unrolled over time-major sequences
with the state reset at episode starts."""

from __future__ import annotations

from typing import Any

import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, api
from rlrun.components.heads import PolicyValueHead
from rlrun.components.networks import make_torso, orthogonal_init_torsos
from rlrun.components.normalizers import ObservationNormalizer
from rlrun.components.recurrent_core import RecurrentCore
from rlrun.ops import map_nest
from rlrun.ops.action_mask import apply_action_mask, mask_space_of

__all__ = ["RecurrentActorCritic", "State", "add_time", "drop_time", "sequence_starts", "value_after_step"]

State = tuple[torch.Tensor, ...] | None
"""A recurrent state: the actor's core state (``(h, c)`` of an LSTM, ``(h,)`` of a GRU), then the critic core's
when the critic has its own torso, each ``[B, H]``; None for a network without a core."""


class RecurrentActorCritic(Component):
    """obs -> torso -> [core] -> ``PolicyValueHead``.

    ``shared_torso=True`` is IMPALA's and CleanRL's ppo_atari_lstm layout (one torso and core for policy and value).
    With ``False`` the value reads a critic torso (and core) of the same architecture with its own weights (SB3
    RecurrentPPO's default, ``shared_lstm=False, enable_critic_lstm=True``).

    ``unroll(obs [T, B, ...], state, first [T, B])`` -> ``(policy params [T, B, ...], values [T, B], state)``:
    the cores run over T from ``state`` (None: zeros), zeroing it before the steps where ``first`` is set; a network
    without a core (``recurrent="none"``) ignores ``state`` and ``first`` and returns state None.
    ``forward(obs [B, ...])`` is one step from the zero state: ``(policy params, values)``.
    """

    def __init__(self, network: str = "auto", hidden_sizes: list[int] | tuple[int, ...] = (64, 64),
                 activation: str = "tanh", recurrent: str = "lstm", recurrent_size: int = 256,
                 shared_torso: bool = True, orthogonal_init: bool = True, init_log_std: float = 0.0,
                 normalize_obs: bool = False, obs_clip: float = 10.0, name: str = "network",
                 action_mask: str = "auto") -> None:
        """``network``, ``hidden_sizes``, ``activation``: the torso (:func:`rlrun.components.networks.make_torso`);
        ``recurrent``: ``lstm`` | ``gru`` | ``none``, a core of ``recurrent_size`` units between torso and head;
        ``shared_torso``: one torso (and core) for policy and value; ``orthogonal_init``: orthogonal torso weights
        (gain sqrt 2), zero biases, and the head's 0.01 / 1 gains (CleanRL / Baselines); ``init_log_std``: initial
        log-std of a Gaussian policy; ``normalize_obs``: a running mean/std normaliser before the torsos;
        ``action_mask``: auto (a Dict observation's ``action_mask`` masks the logits) | off."""
        super().__init__(name)
        self.network, self.hidden_sizes, self.activation = network, list(hidden_sizes), activation
        self.recurrent, self.recurrent_size = recurrent, int(recurrent_size)
        self.shared_torso, self.orthogonal_init = bool(shared_torso), bool(orthogonal_init)
        self.head = PolicyValueHead(init_log_std, orthogonal_init, name="head")
        self.obs_normalizer = ObservationNormalizer(obs_clip, name="obs_normalizer") if normalize_obs else None
        self.action_mask = action_mask

    def _stack(self, obs: sp.Space, prefix: str) -> tuple[Component, RecurrentCore | None, Any]:
        """A torso and, unless ``recurrent="none"``, a core on it: ``(torso, core, port of the features)``."""
        torso = make_torso(self.network, self.hidden_sizes, self.activation, f"{prefix}torso", obs=obs)
        self.build_child(torso, obs=obs)
        features, core = torso.output("forward"), None
        if self.recurrent != "none":
            core = RecurrentCore(self.recurrent, self.recurrent_size, name=f"{prefix}core")
            self.build_child(core, x=features)
            features = core.output("forward")
        return torso, core, features

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.masked = self.action_mask != "off" and mask_space_of(obs, actions, "algo.action_mask=auto") is not None
        if self.obs_normalizer is not None:
            self.build_child(self.obs_normalizer, obs=obs)
            obs = self.obs_normalizer.output_spaces["forward"]
        self.torso, self.core, features = self._stack(obs, "")
        self.build_child(self.head, x=features, actions=actions)
        self.critic_torso = self.critic_core = None
        if not self.shared_torso:  # the value layer reads the critic's features (same width)
            self.critic_torso, self.critic_core, critic_features = self._stack(obs, "critic_")
            self.build_child(self.head, x=critic_features)
        if self.orthogonal_init:
            orthogonal_init_torsos(self.torso, self.critic_torso)
        self.output_spaces["forward"] = self.head.output_spaces["forward"]

    @api
    def initial_state(self, batch_size: int) -> State:
        """The zero state of ``batch_size`` sequences (None without a core)."""
        if self.core is None:
            return None
        state = self.core.initial_state(batch_size)
        if self.critic_core is not None:
            state = (*state, *self.critic_core.initial_state(batch_size))
        return state

    @api
    def update_obs_statistics(self, obs: Any) -> None:
        """Fold raw observations ``[N, ...]`` into the observation normaliser's statistics (no-op without one)."""
        if self.obs_normalizer is not None:
            self.obs_normalizer.update(obs)

    @api
    def unroll(self, obs: Any, state: State = None,
               first: torch.Tensor | None = None) -> tuple[Any, torch.Tensor, State]:
        raw = obs  # the action mask, if any, is read from the observation as the env gave it
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        n = 0 if self.core is None else self.core.state_size
        x = self.torso(obs)  # [T, B, F]: the torsos fold any leading ranks
        actor_state = critic_state = ()
        if self.core is not None:
            x, actor_state = self.core(x, None if state is None else state[:n], first)
        if self.critic_torso is None:
            params, values = self.head(x)
        else:
            y = self.critic_torso(obs)
            if self.critic_core is not None:
                y, critic_state = self.critic_core(y, None if state is None else state[n:], first)
            params, values = self.head.get_policy(x), self.head.get_value(y)
        if self.masked:
            params = apply_action_mask(params, raw)
        return params, values, (*actor_state, *critic_state) if self.core is not None else None

    @api
    def forward(self, obs: Any) -> tuple[Any, torch.Tensor]:
        params, values, _ = self.unroll(add_time(obs))
        return drop_time(params), values[0]


def add_time(x: Any) -> Any:
    """A time rank of 1 in front of every tensor of a nest: one step as a sequence."""
    return map_nest(lambda t: t.unsqueeze(0), x)


def drop_time(x: Any) -> Any:
    """The first (only) time step of every tensor of a nest."""
    return map_nest(lambda t: t[0], x)


def sequence_starts(network: RecurrentActorCritic, done: torch.Tensor,
                    extras: dict[str, torch.Tensor]) -> tuple[torch.Tensor, State]:
    """What a learner unrolls a rollout's sequences from: ``first`` ``[T, B]`` (step t starts an episode:
    ``done[t - 1]``; at t = 0 the recorded state is already reset) and the state the acting policy recorded before
    the rollout's first step (extras ``state_0``, ``state_1``, ... ``[T, B, H]``)."""
    first = torch.zeros_like(done)
    first[1:] = done[:-1]
    n = len(network.initial_state(1))
    return first, tuple(extras[f"state_{i}"][0] for i in range(n))


def value_after_step(network: RecurrentActorCritic, obs: Any, next_obs: Any, state0: State, first: torch.Tensor,
                     t: int, b: int) -> torch.Tensor:
    """``V(s'_t)`` of env copy ``b`` from the state after its step ``t``, found by unrolling that copy's sequence
    (``obs`` ``[T, B, ...]`` from ``state0``, resets at ``first``) up to t; ``next_obs``: that step's next
    observation ``[1, ...]``. A truncation inside a rollout bootstraps from it (rare: one unroll each)."""
    col = slice(b, b + 1)
    prefix = map_nest(lambda x: x[:t + 1, col], obs)
    _, _, state = network.unroll(prefix, tuple(s0[col] for s0 in state0), first[:t + 1, col])
    return network.unroll(add_time(next_obs), state)[1][0, 0]
