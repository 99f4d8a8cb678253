"""Action masks: a Dict observation with an ``action_mask`` leaf (1 = legal, as PettingZoo's classic games give it)
restricts a Discrete action's scores, logits or Q-values, to the legal actions."""

from __future__ import annotations

from typing import Any

import torch

MASK_KEY = "action_mask"
MASKED = -1e9
"""The score of an illegal action: zero probability under a softmax (exp(-1e9) underflows to 0) and never the
argmax, yet finite, so entropies, log-probabilities and TD targets stay free of inf and NaN."""


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
