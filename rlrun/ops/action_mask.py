"""Action masks: a Dict observation with an ``action_mask`` leaf (1 = legal, as PettingZoo's classic games give it)
restricts a Discrete action's scores, logits or Q-values, to the legal actions. A single-agent env that gives its
mask in ``info`` instead has it moved into the observation (rlrun/envs/action_masks.py), so the mask travels with
every observation of a rollout or a replayed transition, ``next_obs`` included."""

from __future__ import annotations

from typing import Any

import torch

from rlrun import spaces as sp
from rlrun.errors import ConfigError
from rlrun.spaces import MASK_KEY

MASKED = -1e9
"""The score of an illegal action: zero probability under a softmax (exp(-1e9) underflows to 0) and never the
argmax, yet finite, so entropies, log-probabilities and TD targets stay free of inf and NaN."""


MASK_CHOICES = ("auto", "off")
"""``algo.action_mask``: auto (mask the actions when the observation carries a mask) | off (ignore the mask)."""


def mask_space_of(obs: sp.Space, actions: sp.Space, where: str) -> sp.Space | None:
    """The space of ``obs``'s action mask, None when it has none; a ConfigError (one line, exit 2) when the mask does
    not have one entry per action of a Discrete ``actions`` space, or when ``actions`` is not Discrete."""
    mask = obs.spaces.get(MASK_KEY) if isinstance(obs, sp.Dict) else None
    if mask is None:
        return None
    if not isinstance(actions, sp.Discrete):
        raise ConfigError(f"{where}: the observation has an {MASK_KEY} but the actions are {sp.describe(actions)}; "
                          f"masks apply to Discrete actions only: set algo.action_mask=off.")
    if sp.shape(mask) != (int(actions.n),):
        raise ConfigError(f"{where}: the observation's {MASK_KEY} has shape {sp.shape(mask)} but the env has "
                          f"{int(actions.n)} actions; give one 0/1 entry per action, or set algo.action_mask=off.")
    return mask


def action_mask_of(obs: Any) -> torch.Tensor | None:
    """The ``[B, n]`` mask of a Dict observation batch, None when the observation has none."""
    if isinstance(obs, dict) and MASK_KEY in obs:
        return obs[MASK_KEY]
    return None


def apply_action_mask(scores: torch.Tensor, obs: Any) -> torch.Tensor:
    """``scores`` ``[B, n]`` with the illegal actions of ``obs``'s mask set to :data:`MASKED`; unchanged without a
    mask. A row with no legal action at all (a finished game's final observation) is left as it is."""
    mask = action_mask_of(obs)
    if mask is None:
        return scores
    legal = mask.to(torch.bool)
    legal = legal | ~legal.any(dim=-1, keepdim=True)
    return scores.masked_fill(~legal, MASKED)


def legal_of(scores: torch.Tensor) -> torch.Tensor:
    """``[B, n]`` bool: the actions :func:`apply_action_mask` left legal (every action of an unmasked row)."""
    return scores > MASKED / 2
