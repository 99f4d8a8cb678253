"""Exploration: turn action values into actions."""

from __future__ import annotations

import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, ComponentBuildError, api
from rlrun.ops.action_mask import legal_of
from rlrun.ops.epsilon_greedy import epsilon_greedy


class LinearSchedule:
    """A value that moves linearly from ``start`` to ``end`` over ``steps`` and then stays at ``end``."""

    def __init__(self, start: float, end: float, steps: int) -> None:
        self.start, self.end, self.steps = float(start), float(end), max(int(steps), 1)

    def __call__(self, t: int) -> float:
        frac = min(max(t, 0) / self.steps, 1.0)
        return self.start + frac * (self.end - self.start)


class EpsilonGreedy(Component):
    """With probability epsilon(t) a uniform random action, else argmax Q; epsilon follows a linear schedule in t.

    ``t`` (env steps) is kept in a buffer so it is saved with the component and restored from checkpoints.

    Built from the space of Q and, where the observations carry an action mask (a Dict observation's
    ``action_mask`` leaf, :mod:`rlrun.ops.action_mask`), that leaf's space: then a random action is uniform among
    the actions the mask left legal in Q (illegal ones hold :data:`~rlrun.ops.action_mask.MASKED`). Without a mask
    input no row is checked for one (the check costs a tenth of acting on a small env; a masked Q given to such a
    component explores illegal actions too).
    """

    def __init__(self, start: float = 1.0, end: float = 0.02, decay_steps: int = 10_000,
                 name: str | None = None) -> None:
        super().__init__(name or "exploration")
        self.schedule = LinearSchedule(start, end, decay_steps)

    def _build(self, q: sp.Space, action_mask: sp.Space | None = None) -> None:
        self.require("q", q, kinds=(sp.Box,), rank=1, floating=True)
        self.num_actions = int(q.shape[0])
        self.masked = action_mask is not None
        if self.masked and sp.shape(action_mask) != (self.num_actions,):
            raise ComponentBuildError(f"{self.name}.action_mask expects one entry per action ({self.num_actions}) "
                                      f"but got {sp.describe(action_mask)}")
        self.register_buffer("timestep", torch.zeros((), dtype=torch.int64))
        self.output_spaces["get_actions"] = sp.Discrete(self.num_actions)

    def epsilon(self) -> float:
        """epsilon at the step counter. Called at every acting step: kept until the counter's tensor changes, which
        its version counter tells (``advance``, a weight sync's ``copy_`` and a checkpoint load all write it in
        place; a move to another device replaces it), without ``int()`` of a tensor. A write through
        ``timestep.data`` bypasses the version counter: call ``advance`` instead."""
        t = self.timestep
        cached = self.__dict__.get("_epsilon_at")
        if cached is not None and cached[0] is t and cached[1] == t._version:
            return cached[2]
        value = self.schedule(int(t))
        if not t.is_inference():  # an inference tensor has no version counter
            self.__dict__["_epsilon_at"] = (t, t._version, value)
        return value

    @api
    def get_actions(self, q: torch.Tensor, explore: bool = True) -> torch.Tensor:
        if not explore:
            return q.argmax(dim=-1)
        eps = self.epsilon()
        legal = legal_of(q) if self.masked else None
        if legal is None or bool(legal.all()):
            return epsilon_greedy(q, self.num_actions, eps)
        # uniform among the legal actions
        greedy = q.argmax(dim=-1)
        random = torch.multinomial(legal.reshape(-1, q.shape[-1]).float(), 1).reshape(greedy.shape)
        pick_random = torch.rand(greedy.shape, device=q.device) < eps
        return torch.where(pick_random, random, greedy)

    @api
    def advance(self, env_steps: int) -> None:
        self.timestep += int(env_steps)

    def with_step(self, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``weights`` (an agent's ``get_weights``) with this schedule's step added, so that a remote acting copy
        explores with the learner's epsilon."""
        return {**weights, STEP_KEY: self.timestep.detach().clone()}

    def take_step(self, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Set the step from ``weights`` (when they carry one, :meth:`with_step`); the rest of them, to load."""
        weights = dict(weights)
        step = weights.pop(STEP_KEY, None)
        if step is not None:
            self.timestep.copy_(step)
        return weights


STEP_KEY = "exploration.timestep"
"""The key of the schedule's step among an agent's weights."""
