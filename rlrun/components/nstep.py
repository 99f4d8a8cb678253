"""n-step transitions from a stream of per-step transitions of B env copies.

The n-step return of Sutton & Barto, *Reinforcement Learning: An Introduction* (2nd ed., 2018), Eq. 7.1, as used
with replay by Rainbow (Hessel et al. 2018, Eq. 2) and Ape-X (Horgan et al. 2018): for a step ``t`` of one env
copy, with ``m`` the number of steps in its window,

    R_t^(m)  = sum_{k=0}^{m-1} gamma^k r_{t+k}
    discount = gamma^m * (1 - terminated_{t+m-1})
    target   = R_t^(m) + discount * max_a Q(next_obs_{t+m-1}, a)

``m = n`` unless the episode ends inside the window, then ``m`` stops at the ending step. A *termination* (MDP
terminal state) gives discount 0: nothing to bootstrap from. A *time-limit truncation* keeps ``gamma^m`` and the
bootstrap reads the real final observation (the caller passes it as that step's ``next_obs``, not the
observation after the automatic reset). A step flagged both terminated and truncated counts as terminated. This is
the same convention as :func:`rlrun.ops.nstep_returns`, which computes the targets of a whole ``[T, B]`` rollout at
once; the aggregator computes them online, one step at a time, carrying unfinished windows across calls.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, api


class NStepAggregator(Component):
    """Turns per-step transitions of B env copies into n-step transitions, statefully per copy.

    ``add(obs, actions, rewards, next_obs, terminated, truncated)`` takes one step of every copy (leading rank B)
    and returns the n-step transitions completed by it, as a dict with keys ``obs``, ``action``, ``reward``
    (the n-step return ``R_t^(m)``), ``next_obs`` (``next_obs_{t+m-1}``) and ``discount`` (``gamma^m (1 -
    terminated)``), each with leading rank K (K = 0 when nothing completed), ordered by env copy and then by
    start step: CPU tensors, whatever the inputs (numpy arrays or tensors). This is the record of ``DQNAgent``'s
    replay memory, so the output goes straight into it (the memory moves it to its device).

    A copy completes one transition per step once it has n steps pending (the oldest window), and at the end of
    its episode it flushes every pending window, shorter ones included. The pending windows are not saved in
    checkpoints (they are tied to the envs' current episodes); call ``reset()`` when the envs are reset.

    Args:
        n: number of steps per transition (1 = ordinary one-step transitions).
        gamma: discount factor per agent step.
        name: component name (default ``"n_step"``).
    """

    def __init__(self, n: int, gamma: float, name: str | None = None) -> None:
        super().__init__(name or "n_step")
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        if not 0.0 <= float(gamma) <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
        self.n = int(n)
        self.gamma = float(gamma)
        k = np.arange(self.n, dtype=np.float64)
        # G[j, k] = gamma^(k - j) for k >= j, else 0: returns[b, j] = sum_k G[j, k] * rewards_window[b, k].
        self._discount_matrix = np.where(k[None, :] >= k[:, None], self.gamma ** (k[None, :] - k[:, None]), 0.0)
        # Pending steps, in numpy: a step of one or a few env copies is a few dozen tiny array operations, each a
        # fraction of a torch call's overhead. The outputs are tensors.
        self._windows: dict[str, dict[str, np.ndarray]] | None = None
        self._rewards: np.ndarray | None = None  # [B, n] float64, 0 past each copy's count
        self._count: np.ndarray | None = None  # [B] int64, steps pending per copy

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self._leaves = {"obs": sp.flatten_space(obs), "action": sp.flatten_space(actions)}
        scalar = sp.Box(-np.inf, np.inf, (), np.float32)
        self.output_spaces["add"] = sp.Dict({"obs": obs, "action": actions, "reward": scalar, "next_obs": obs,
                                             "discount": scalar})

    def pending(self) -> torch.Tensor:
        """Steps held per env copy, waiting for their window to complete (``[B]``; empty before the first add)."""
        return torch.from_numpy(self._count.copy()) if self._count is not None else torch.zeros(0, dtype=torch.int64)

    @api
    def reset(self) -> None:
        """Drop every pending step (e.g. after the envs were reset outside an episode end)."""
        self._windows = self._rewards = self._count = None

    @api
    def add(self, obs: Any, actions: Any, rewards: Any, next_obs: Any, terminated: Any, truncated: Any) -> Any:
        """Add one step of every env copy; return the n-step transitions it completes (leading rank K >= 0).

        Args:
            obs: ``[B, ...]`` observations the actions were taken in.
            actions: ``[B, ...]`` actions taken.
            rewards: ``[B]`` rewards of this step.
            next_obs: ``[B, ...]`` real next observations (for a truncated copy its real final observation).
            terminated: ``[B]`` bool, the step reached a terminal state (no bootstrap).
            truncated: ``[B]`` bool, the episode was cut by a time limit (bootstrap from ``next_obs``).
        """
        obs_space, act_space = self.input_spaces["obs"], self.input_spaces["actions"]
        flat = {"obs": _flat_numpy(obs_space, obs), "action": _flat_numpy(act_space, actions)}
        flat_next = _flat_numpy(obs_space, next_obs)
        r = sp.as_numpy(rewards).astype(np.float64)
        if r.ndim != 1:
            raise ValueError(f"{self.name}.add: rewards must have shape [B], got {tuple(r.shape)}")
        B = int(r.shape[0])
        term, trunc = sp.as_numpy(terminated) != 0, sp.as_numpy(truncated) != 0
        for what, value in (("terminated", term), ("truncated", trunc)):
            if value.shape != (B,):
                raise ValueError(f"{self.name}.add: {what} must have shape [B] = [{B}] like rewards, got "
                                 f"{tuple(value.shape)}")
        for group, values in (("obs", flat["obs"]), ("actions", flat["action"]), ("next_obs", flat_next)):
            for key, v in values.items():
                if v.ndim == 0 or int(v.shape[0]) != B:
                    raise ValueError(f"{self.name}.add: {group}{'/' + key if key else ''} has shape "
                                     f"{tuple(v.shape)} but rewards has {B} rows")

        if self._count is None:
            n = self.n
            # numpy arrays of each leaf's dtype (sp.dtype names it as torch does: Discrete is int64)
            self._windows = {g: {k: torch.zeros((B, n, *sp.shape(s)), dtype=sp.dtype(s)).numpy()
                                 for k, s in leaves.items()} for g, leaves in self._leaves.items()}
            self._rewards = np.zeros((B, n), dtype=np.float64)
            self._count = np.zeros(B, dtype=np.int64)
        elif int(self._count.shape[0]) != B:
            raise ValueError(f"{self.name}.add: got {B} env copies but the pending windows hold "
                             f"{self._count.shape[0]}; call reset() when the number of copies changes")

        rows = np.arange(B)
        count = self._count
        for g, values in flat.items():
            for key, v in values.items():
                self._windows[g][key][rows, count] = v
        self._rewards[rows, count] = r
        count += 1

        # Which windows complete: every pending one of a copy whose episode ended, and the full (n-step) oldest
        # window (position 0) of a copy still running.
        done = term | trunc
        full = ~done & (count == self.n)
        pos = np.arange(self.n)[None, :]
        emit = (done[:, None] & (pos < count[:, None])) | (full[:, None] & (pos == 0))
        b_idx, j_idx = emit.nonzero()
        steps = count[b_idx] - j_idx  # m, steps in each completed window
        returns = self._rewards @ self._discount_matrix.T  # [B, n]: R over positions j .. count-1
        out_flat: dict[str, Any] = {
            "obs": {k: torch.from_numpy(w[b_idx, j_idx]) for k, w in self._windows["obs"].items()},
            "action": {k: torch.from_numpy(w[b_idx, j_idx]) for k, w in self._windows["action"].items()},
            "reward": torch.from_numpy(returns[b_idx, j_idx].astype(np.float32)),
            "next_obs": {k: torch.from_numpy(v[b_idx]) for k, v in flat_next.items()},
            "discount": torch.from_numpy((self.gamma ** steps.astype(np.float64) * ~term[b_idx]).astype(np.float32)),
        }

        # Slide the full windows of running copies by one step; empty the windows of copies whose episode ended.
        if full.any():  # (the last position's old value is never read: the next step writes it)
            for w in (*self._windows["obs"].values(), *self._windows["action"].values(), self._rewards):
                w[full, :-1] = w[full, 1:]
            self._rewards[full, -1] = 0.0
            count[full] -= 1
        self._rewards[done] = 0.0
        count[done] = 0

        return {
            "obs": sp.unflatten(obs_space, out_flat["obs"]),
            "action": sp.unflatten(act_space, out_flat["action"]),
            "reward": out_flat["reward"],
            "next_obs": sp.unflatten(obs_space, out_flat["next_obs"]),
            "discount": out_flat["discount"],
        }


def _flat_numpy(space: sp.Space, value: Any) -> dict[str, np.ndarray]:
    """``value``'s leaves (arrays or tensors) as numpy arrays, keyed as :func:`rlrun.spaces.flatten` keys them."""
    return {key: sp.as_numpy(leaf) for key, leaf in sp.flatten(space, value).items()}
