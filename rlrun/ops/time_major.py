"""Reshapes of time-major nests: rollouts laid out ``[T, B, ...]`` (time first, then the env copies), as leaves of
dicts, tuples and lists of tensors (a nested observation space's batches).

Pure functions; they return views where ``reshape`` can.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

__all__ = ["flatten_time", "map_nest", "next_obs_rows"]


def map_nest(fn: Callable[..., Any], *nests: Any) -> Any:
    """``fn`` applied leafwise to nests of the same structure (dicts, tuples, lists; anything else is a leaf)."""
    first = nests[0]
    if isinstance(first, dict):
        return {k: map_nest(fn, *(n[k] for n in nests)) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(map_nest(fn, *parts) for parts in zip(*nests, strict=True))
    return fn(*nests)


def flatten_time(x: Any) -> Any:
    """``[T, B, ...]`` -> ``[T * B, ...]`` leafwise (dicts, tuples and lists of tensors): row ``t * B + b`` of the
    result is ``[t, b]`` of the rollout (C order, the order of ``SampleBatch.final_index``). What a learner does to a
    rollout before minibatching it or passing it through a feed-forward network."""
    return map_nest(lambda t: t.reshape(-1, *t.shape[2:]), x)


def next_obs_rows(obs: Any, last_obs: Any, final_obs: Any, final_index: torch.Tensor, rows: torch.Tensor) -> Any:
    """The real next observations of the flat steps ``rows`` (``[R]`` int64, ``t * B + b``) of a time-major
    rollout, ``[R, ...]`` leafwise: ``obs[t + 1, b]``, or ``last_obs[b]`` at ``t = T - 1``, except where an episode
    ended at that step: its final observation.

    ``obs``: ``[T, B, ...]`` the observations acted on; ``last_obs``: ``[B, ...]`` what each copy went on from after
    step T - 1; ``final_obs``: ``[K, ...]`` the final observations of the ended episodes at the flat steps
    ``final_index`` (``[K]``, ascending): the fields of ``rlrun.execution.rollout.Rollout``, whose ``next_obs`` is
    this. Only the rows asked for are gathered (a learner bootstraps from the last step and the truncations, not
    from every step)."""
    rows = rows.reshape(-1)
    k = torch.searchsorted(final_index, rows) if len(final_index) else None
    is_final = None
    if k is not None:
        k = k.clamp(max=len(final_index) - 1)
        is_final = final_index[k] == rows

    def leaf(o: torch.Tensor, last: torch.Tensor, final: torch.Tensor) -> torch.Tensor:
        T, B = o.shape[:2]
        r = rows.to(o.device)
        out = torch.empty((len(r), *o.shape[2:]), dtype=o.dtype, device=o.device)
        inside = r < (T - 1) * B
        out[inside] = o.reshape(T * B, *o.shape[2:]).index_select(0, r[inside] + B)
        out[~inside] = last.index_select(0, r[~inside] - (T - 1) * B)
        if is_final is not None:
            mask = is_final.to(o.device)
            out[mask] = final.index_select(0, k[is_final].to(final.device)).to(o.device)
        return out

    return map_nest(leaf, obs, last_obs, final_obs)
