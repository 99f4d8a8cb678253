"""``ActingState``: the recurrent state a recurrent policy keeps per env copy while acting (IMPALA, APPO, and PPO /
A2C with ``algo.recurrent``): taken before each step, advanced after it, zeroed where an episode ended."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

__all__ = ["ActingState"]

State = tuple[torch.Tensor, ...]


class ActingState:
    """The per-env-copy state of a recurrent policy while acting; not a buffer (weights syncs never carry it), but
    saved with a plan's checkpoint (:meth:`snapshot` / :meth:`restore`) so a resumed run acts on as it would have.

    ``before_step(obs, initial_state)``: the state to act from, ``initial_state(B)`` on the first call or when the
    number of env copies changes; ``after_step(state)`` keeps the state the step produced; ``reset(done)`` zeroes
    the copies whose episode ended (the rollout worker's ``reset_episodes`` hook, after every env step).
    """

    def __init__(self) -> None:
        self.state: State | None = None

    def before_step(self, obs: Any, initial_state: Callable[[int], State]) -> State:
        batch = _batch_size(obs)
        state = self.state
        if state is None or state[0].shape[0] != batch:  # first call, or another number of env copies
            return initial_state(batch)
        if state[0].is_inference() and not torch.is_inference_mode_enabled():
            return tuple(s.clone() for s in state)  # acted in a worker's inference mode, used outside it
        return state

    def after_step(self, state: State | None) -> None:
        self.state = None if state is None else tuple(s.detach() for s in state)

    def reset(self, done: np.ndarray) -> None:
        if self.state is None or not np.any(done):
            return
        h = self.state[0]
        keep = torch.as_tensor(~np.asarray(done, dtype=bool), dtype=h.dtype, device=h.device).unsqueeze(-1)
        self.state = tuple(s * keep for s in self.state)

    def snapshot(self) -> State | None:
        """A copy of the state (None before the first step)."""
        return None if self.state is None else tuple(t.clone() for t in self.state)

    def restore(self, state: State | None) -> None:
        self.state = None if state is None else tuple(t.clone() for t in state)


def _batch_size(obs: Any) -> int:
    while isinstance(obs, (dict, tuple, list)):
        obs = next(iter(obs.values())) if isinstance(obs, dict) else obs[0]
    return int(obs.shape[0])
