"""The batch a rollout worker returns: ``T`` agent steps of ``B`` env copies, time-major, in the one form every
consumer reads (replay inserts, n-step windows, the Ray transfer; on-policy learners read the same fields as torch
tensors, :class:`rlrun.execution.rollout.Rollout`):

==============  ===================  ===========================================================================
field           shape                meaning
==============  ===================  ===========================================================================
``obs``         ``[T + 1, B, ...]``  ``obs[t]``: what the policy acted on at step t; ``obs[T]``: what each copy
                                     goes on from (a reset observation where its episode ended at step T - 1)
``actions``     ``[T, B, ...]``
``rewards``     ``[T, B]`` float32
``terminated``  ``[T, B]`` bool
``truncated``   ``[T, B]`` bool
``final_obs``   ``[K, ...]``         the real final observation of each of the K steps where an episode ended,
                                     in the order of :meth:`SampleBatch.final_index` (t-major)
``extras``      ``{key: [T, B, ...]}``  what the policy recorded while acting (log-probabilities, values)
==============  ===================  ===========================================================================

The next observation of step t is ``obs[t + 1]``, except where an episode ended there: then it is that episode's
final observation (gymnasium's SAME_STEP autoreset puts the reset observation in ``obs[t + 1]``). Nobody stores
``next_obs``: :meth:`SampleBatch.step` and :meth:`SampleBatch.transitions` build it where a replay memory needs
it (in numpy, without leaving the worker's arrays), and :meth:`rlrun.execution.rollout.Rollout.next_obs` the rows
a learner bootstraps from. Observations are kept once (T + 1 plus K instead of 2T), so nothing is dropped for the
Ray transfer and nothing rebuilt after it.

Observations are nests (dicts and tuples of arrays) where the space is nested; the helpers here map over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlrun.ops.time_major import map_nest

__all__ = ["SampleBatch", "map_nest", "stack_nests"]


def stack_nests(nests: list[Any], axis: int = 0) -> Any:
    """Nests of equal structure stacked leafwise along a new ``axis`` (``np.stack``)."""
    return map_nest(lambda *leaves: np.stack(leaves, axis=axis), *nests)


@dataclass
class SampleBatch:
    """``T`` agent steps of ``B`` env copies, time-major (module docstring). ``episode_returns``/``lengths`` hold
    every episode that ended in this batch; ``env_seconds``/``inference_seconds`` time the two acting stages."""

    obs: Any
    """``[T + 1, B, ...]`` (None where a worker-side hook moved what the learner needs into ``info``: Ape-X)."""
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: Any = None
    """``[K, ...]``: the real final observations of the K ended episodes, in :meth:`final_index` order."""
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    env_seconds: float = 0.0
    inference_seconds: float = 0.0
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-step policy outputs recorded at acting time ``[T, B, ...]``."""
    game_scores: list[float] = field(default_factory=list)
    """Raw scores of the whole games that ended in this batch (Atari: unclipped rewards over all lives, from
    ``rlrun.envs.atari.games_from_infos``); empty for envs without the ``game_score`` info (CartPole)."""
    game_lengths: list[int] = field(default_factory=list)
    """Agent steps of those games, in the same order."""
    transfer_seconds: float = 0.0
    """Seconds spent sending this batch to another process (Ray executor; 0 in-process)."""
    info: dict[str, Any] = field(default_factory=dict)
    """Worker-computed data that is not one value per step (a ``postprocess_batch`` hook's gradients, statistics):
    a nest of tensors, arrays and numbers; tensors travel between processes as numpy arrays."""
    postprocess_seconds: float = 0.0
    """Seconds of the policy's ``postprocess_batch`` hook in the worker (0 without one)."""

    @property
    def num_steps(self) -> int:
        """T: agent steps per env copy."""
        return int(self.rewards.shape[0])

    @property
    def num_envs(self) -> int:
        """B: env copies."""
        return int(self.rewards.shape[1])

    @property
    def env_steps(self) -> int:
        return int(self.rewards.size)

    @property
    def done(self) -> np.ndarray:
        """``[T, B]``: an episode ended at this step (terminated or truncated)."""
        return self.terminated | self.truncated

    def final_index(self) -> np.ndarray:
        """``[K]`` int64: the flat positions ``t * B + b`` of the steps where an episode ended, ascending: row k of
        ``final_obs`` belongs to step ``final_index()[k]``."""
        return np.flatnonzero(self.done.reshape(-1))

    @property
    def acted_obs(self) -> Any:
        """``[T, B, ...]``: the observations the policy acted on (a view of ``obs[:T]``)."""
        return map_nest(lambda x: x[:-1], self.obs)

    @property
    def last_obs(self) -> Any:
        """``[B, ...]``: what every env copy goes on from after this batch (a view of ``obs[T]``)."""
        return map_nest(lambda x: x[-1], self.obs)

    def step(self, t: int) -> tuple[Any, np.ndarray, np.ndarray, Any, np.ndarray, np.ndarray]:
        """Step ``t`` of every copy as transitions ``(obs, actions, rewards, next_obs, terminated, truncated)``,
        ``[B, ...]`` each; ``next_obs`` is the real next observation: a view of ``obs[t + 1]``, or where an
        episode ended at step t a new array with that episode's final observation in its row."""
        b = self.num_envs
        ended = np.flatnonzero(self.done[t])
        if len(ended):
            k = np.searchsorted(self.final_index(), t * b + ended)

            def real(x: np.ndarray, final: np.ndarray) -> np.ndarray:
                out = x[t + 1].copy()
                out[ended] = final[k]
                return out

            next_obs = map_nest(real, self.obs, self.final_obs)
        else:
            next_obs = map_nest(lambda x: x[t + 1], self.obs)
        return (map_nest(lambda x: x[t], self.obs), self.actions[t], self.rewards[t], next_obs,
                self.terminated[t], self.truncated[t])

    def transitions(self) -> tuple[Any, np.ndarray, np.ndarray, Any, np.ndarray, np.ndarray]:
        """Every step as transitions ``(obs, actions, rewards, next_obs, terminated, truncated)`` in rows
        ``t * B + b`` (``[T * B, ...]`` each; ``next_obs`` a new array, as :meth:`next_obs`): what a replay memory
        stores in one insert."""
        def rows(x: np.ndarray) -> np.ndarray:
            return x.reshape(-1, *x.shape[2:])

        return (map_nest(rows, self.acted_obs), rows(self.actions), rows(self.rewards), map_nest(rows, self.next_obs()),
                rows(self.terminated), rows(self.truncated))

    def next_obs(self) -> Any:
        """``[T, B, ...]``: every step's real next observation (a new array; what :meth:`transitions` stores and
        tests compare with: learners read only the rows they need, :meth:`rlrun.execution.rollout.Rollout.next_obs`)."""
        t, b = divmod(self.final_index(), self.num_envs)

        def real(x: np.ndarray, final: np.ndarray) -> np.ndarray:
            out = x[1:].copy()
            out[t, b] = final
            return out

        return map_nest(real, self.obs, self.final_obs)
