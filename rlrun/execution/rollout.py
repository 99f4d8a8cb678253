"""The rollout a learner reads: ``T`` agent steps of ``B`` env copies as torch tensors on the learner's device,
time-major, with named fields. The workers' :class:`~rlrun.execution.sample_batch.SampleBatch` es become one
:class:`Rollout` once (:meth:`Rollout.from_samples`: workers side by side along B), as do the steps an application
observed (:meth:`Rollout.from_steps`, ``rlrun.make_agent``); every on-policy algorithm (PPO, A2C, TRPO, IMPALA,
APPO) reads its fields.

It is the sample batch's form split for learning: ``obs`` holds the T observations acted on and ``last_obs`` what
each copy goes on from after step T - 1, so that ``obs`` flattens to one row per step. The next observation of a
step is answered in one place, :meth:`Rollout.next_obs`, on the rows a learner asks for (it bootstraps from the
last step and the truncations, not from every step).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.ops.time_major import map_nest, next_obs_rows

__all__ = ["Rollout"]


@dataclass
class Rollout:
    """``T`` agent steps of ``B`` env copies, time-major (module docstring). Observations are nests (dicts and
    tuples of tensors) where the space is nested."""

    obs: Any
    """``[T, B, ...]``: what the policy acted on at each step."""
    last_obs: Any
    """``[B, ...]``: what every copy goes on from after step T - 1 (a reset observation where its episode ended
    there)."""
    final_obs: Any
    """``[K, ...]``: the real final observation of each of the K steps where an episode ended, in the order of
    ``final_index``."""
    final_index: torch.Tensor
    """``[K]`` int64, ascending: the flat steps ``t * B + b`` where an episode ended."""
    actions: torch.Tensor
    """``[T, B, ...]``: the actions sent to the env (clipped to a Box's bounds)."""
    rewards: torch.Tensor
    """``[T, B]``."""
    terminated: torch.Tensor
    """``[T, B]`` bool."""
    truncated: torch.Tensor
    """``[T, B]`` bool."""
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    """``{key: [T, B, ...]}``: what the policy recorded while acting (``log_prob``; ``raw_action``, the unclipped
    sample of a Box policy; IMPALA's behaviour parameters, weights version and recurrent state)."""

    @property
    def num_steps(self) -> int:
        """T: agent steps per env copy."""
        return int(self.rewards.shape[0])

    @property
    def num_envs(self) -> int:
        """B: env copies."""
        return int(self.rewards.shape[1])

    @property
    def done(self) -> torch.Tensor:
        """``[T, B]``: an episode ended at this step (terminated or truncated)."""
        return self.terminated | self.truncated

    def rows(self, where: torch.Tensor) -> torch.Tensor:
        """``[R]`` int64: the flat steps ``t * B + b`` where the ``[T, B]`` mask ``where`` is set, ascending."""
        return where.reshape(-1).nonzero().squeeze(1)

    def step_rows(self, t: int) -> torch.Tensor:
        """``[B]`` int64: the flat steps of step ``t`` of every copy."""
        B = self.num_envs
        return torch.arange(t * B, (t + 1) * B, device=self.final_index.device)

    def next_obs(self, rows: torch.Tensor) -> Any:
        """The real next observations of the flat steps ``rows`` (``[R]``, ``t * B + b``), ``[R, ...]`` leafwise:
        ``obs[t + 1, b]`` (``last_obs[b]`` after the last step), or where an episode ended at that step its final
        observation (:func:`rlrun.ops.next_obs_rows`)."""
        return next_obs_rows(self.obs, self.last_obs, self.final_obs, self.final_index,
                             rows.to(self.final_index.device))

    def replace(self, **changes: Any) -> Rollout:
        """A copy with ``changes`` to its fields (the others shared, not copied)."""
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ building

    @classmethod
    def from_samples(cls, batches: list[Any], obs_space: sp.Space, device: torch.device) -> Rollout:
        """The sample batches of a worker set as one rollout on ``device``: the workers' env copies side by side
        along B, in the order given (they must share T); ``final_index`` renumbered to the joined steps."""
        def joined(get: Callable[[Any], Any], axis: int = 1) -> Any:
            parts = [get(b) for b in batches]
            return parts[0] if len(parts) == 1 else map_nest(lambda *xs: np.concatenate(xs, axis=axis), *parts)

        total = sum(b.num_envs for b in batches)
        index, offset = [], 0
        for b in batches:  # each batch's flat steps t * B_j + b as steps of the joined rollout, t * B + offset + b
            t, col = divmod(b.final_index(), b.num_envs)
            index.append(t * total + offset + col)
            offset += b.num_envs
        final_index = np.concatenate(index)
        order = np.argsort(final_index, kind="stable")
        final_obs = map_nest(lambda x: x[order], joined(lambda b: b.final_obs, axis=0))

        def obs(x: Any) -> Any:
            return sp.to_torch(obs_space, x, device)

        def tensor(get: Callable[[Any], Any]) -> torch.Tensor:
            return torch.as_tensor(joined(get)).to(device)

        return cls(obs=obs(joined(lambda b: b.acted_obs)), last_obs=obs(joined(lambda b: b.last_obs, axis=0)),
                   final_obs=obs(final_obs), final_index=torch.as_tensor(final_index[order], device=device),
                   actions=tensor(lambda b: b.actions), rewards=tensor(lambda b: b.rewards),
                   terminated=tensor(lambda b: b.terminated), truncated=tensor(lambda b: b.truncated),
                   extras={k: tensor(lambda b, k=k: b.extras[k]) for k in batches[0].extras})

    @classmethod
    def from_steps(cls, steps: list[dict[str, Any]], obs_space: sp.Space, device: torch.device) -> Rollout:
        """Steps an application observed (``rlrun.make_agent``: per step ``obs``, ``next_obs`` (the real next
        observation), ``actions``, ``rewards``, ``terminated``, ``truncated`` and the acting extras, ``[B, ...]``
        each, numpy or torch) as one rollout on ``device``."""
        def stack(key: str) -> Any:
            return map_nest(lambda *xs: np.stack([sp.as_numpy(x) for x in xs]), *(s[key] for s in steps))

        def tensor(key: str) -> torch.Tensor:
            return torch.as_tensor(stack(key), device=device)

        done = stack("terminated").astype(bool) | stack("truncated").astype(bool)
        final_index = np.flatnonzero(done.reshape(-1))
        t, b = divmod(final_index, done.shape[1])
        next_obs = stack("next_obs")
        named = ("obs", "next_obs", "actions", "rewards", "terminated", "truncated")
        return cls(obs=sp.to_torch(obs_space, stack("obs"), device),
                   last_obs=sp.to_torch(obs_space, map_nest(lambda x: x[-1], next_obs), device),
                   final_obs=sp.to_torch(obs_space, map_nest(lambda x: x[t, b], next_obs), device),
                   final_index=torch.as_tensor(final_index, device=device),
                   actions=tensor("actions"), rewards=tensor("rewards"), terminated=tensor("terminated"),
                   truncated=tensor("truncated"), extras={k: tensor(k) for k in steps[0] if k not in named})
