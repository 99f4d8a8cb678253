"""Return and advantage estimators on time-major tensors.

All functions here are pure: they take torch tensors laid out ``[T, B]``
(time first, then batch), return new tensors and keep no state.

Done convention (shared by every function in :mod:`rlrun.ops`)
---------------------------------------------------------------
``done_t`` is the flag returned by the environment step that produced
``rewards[t]``.  The caller builds the per-step discount as
``discounts[t] = gamma * (1 - done_t)``; a zero discount therefore means
"nothing after step ``t`` belongs to the same episode", so every estimator
below stops accumulating (and stops bootstrapping) across it.
:func:`nstep_returns` is the exception that takes ``terminated`` and
``truncated`` flags separately, because it must bootstrap through a time-limit
truncation but not through a true termination.

Gradients: :func:`discounted_returns`, :func:`gae` and :func:`nstep_returns`
are plain differentiable tensor expressions; detach ``values`` /
``bootstrap_value`` / ``next_values`` first (or call under
``torch.no_grad()``) when the outputs are meant as fixed targets.
"""

from __future__ import annotations

import numbers

import torch

from rlrun.ops.checks import check_shape, check_time_major

__all__ = ["discounted_returns", "gae", "nstep_returns", "q_lambda_returns", "truncation_aware_gae"]


# --------------------------------------------------------------------------- #
# Discounted returns
# --------------------------------------------------------------------------- #


def discounted_returns(
    rewards: torch.Tensor,
    discounts: torch.Tensor,
    bootstrap_value: torch.Tensor,
) -> torch.Tensor:
    r"""Bootstrapped discounted returns (TD(lambda=1) / Monte-Carlo with bootstrap).

    Computes, by a backward recursion over time (vectorised over the batch),

    .. math::

        R_t = r_t + \gamma_t R_{t+1}, \qquad R_T = \text{bootstrap\_value},

    i.e. :math:`R_t = \sum_{k=t}^{T-1} (\prod_{i=t}^{k-1}\gamma_i) r_k
    + (\prod_{i=t}^{T-1}\gamma_i) V(x_T)` -- the discounted return of
    Sutton & Barto, *Reinforcement Learning: An Introduction* (2nd ed., 2018),
    Eq. 3.8, truncated at the end of the rollout and bootstrapped with
    :math:`V(x_T)`, with a per-step discount :math:`\gamma_t`.

    Args:
        rewards: ``[T, B]`` float, ``rewards[t]`` is the reward of step ``t``.
        discounts: ``[T, B]`` float, ``discounts[t] = gamma * (1 - done_t)`` where
            ``done_t`` is the done flag returned by the step that produced
            ``rewards[t]``.  A zero discount ends the episode: nothing after
            step ``t`` (and not the bootstrap) contributes to ``R_t``.
        bootstrap_value: ``[B]`` float, :math:`V(x_T)`, the value of the
            observation following the last step of the rollout.

    Returns:
        ``[T, B]`` tensor of returns :math:`R_t`.

    Raises:
        ValueError: if a shape does not match ``rewards``' ``[T, B]``.
    """
    T, B = check_time_major("rewards", rewards)
    check_shape("discounts", discounts, (T, B), "rewards")
    check_shape("bootstrap_value", bootstrap_value, (B,), "rewards.shape[1]")

    steps = []
    acc = bootstrap_value
    for t in range(T - 1, -1, -1):
        acc = rewards[t] + discounts[t] * acc
        steps.append(acc)
    if not steps:
        return torch.empty_like(rewards)
    steps.reverse()
    return torch.stack(steps, dim=0)


# --------------------------------------------------------------------------- #
# Generalised advantage estimation
# --------------------------------------------------------------------------- #


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    discounts: torch.Tensor,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Generalised Advantage Estimation.

    Schulman, Moritz, Levine, Jordan & Abbeel, "High-Dimensional Continuous
    Control Using Generalized Advantage Estimation", ICLR 2016, Eq. 16:

    .. math::

        \hat A_t = \sum_{l=0}^{T-t-1} \Big(\prod_{i=t}^{t+l-1} \lambda\gamma_i\Big)
        \delta_{t+l}, \qquad
        \delta_t = r_t + \gamma_t V(x_{t+1}) - V(x_t),

    with the paper's constant :math:`\gamma` generalised to the per-step
    discount :math:`\gamma_t` (so a zero discount cuts the trace) and the sum
    truncated at the end of the rollout.  Computed by the equivalent backward
    recursion :math:`\hat A_t = \delta_t + \gamma_t\lambda \hat A_{t+1}`,
    :math:`\hat A_T = 0`.

    Args:
        rewards: ``[T, B]`` float, reward of step ``t``.
        values: ``[T, B]`` float, :math:`V(x_t)`, value of the observation the
            step-``t`` action was taken in.
        bootstrap_value: ``[B]`` float, :math:`V(x_T)`, value of the observation
            following the last step.
        discounts: ``[T, B]`` float, ``discounts[t] = gamma * (1 - done_t)`` with
            ``done_t`` the done flag of the step that produced ``rewards[t]``.
            A zero discount ends the episode: :math:`\delta_t` does not
            bootstrap and later TD errors do not flow into :math:`\hat A_t`.
        lam: the GAE :math:`\lambda \in [0, 1]`.  ``lam=1`` gives the discounted
            return minus the value, ``lam=0`` the one-step TD error.

    Returns:
        ``(advantages, returns)``, both ``[T, B]``, with
        ``returns = advantages + values`` (the TD(lambda) value target).

    Raises:
        ValueError: if a shape does not match ``rewards``' ``[T, B]`` or ``lam``
            is outside ``[0, 1]``.
    """
    T, B = check_time_major("rewards", rewards)
    check_shape("values", values, (T, B), "rewards")
    check_shape("bootstrap_value", bootstrap_value, (B,), "rewards.shape[1]")
    check_shape("discounts", discounts, (T, B), "rewards")
    if not isinstance(lam, numbers.Real) or not 0.0 <= float(lam) <= 1.0:
        raise ValueError(f"lam must be a real number in [0, 1], got {lam!r}")
    lam = float(lam)

    next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
    deltas = rewards + discounts * next_values - values
    trace = discounts * lam

    steps = []
    acc = torch.zeros_like(bootstrap_value)
    for t in range(T - 1, -1, -1):
        acc = deltas[t] + trace[t] * acc
        steps.append(acc)
    if not steps:
        advantages = torch.empty_like(rewards)
    else:
        steps.reverse()
        advantages = torch.stack(steps, dim=0)
    return advantages, advantages + values


def truncation_aware_gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
                         terminated: torch.Tensor, truncated: torch.Tensor, gamma: float,
                         lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""GAE (Schulman et al. 2016, Eq. 16) over a rollout that may cross episode ends of both kinds.

    .. math::

        \delta_t = r_t + \gamma (1 - \mathrm{term}_t) V(s'_t) - V(s_t), \qquad
        \hat A_t = \delta_t + \gamma\lambda (1 - \mathrm{done}_t) \hat A_{t+1}, \quad \hat A_T = 0

    where :math:`s'_t` is the *real* observation after step ``t`` (the final observation of an episode that
    ended at ``t``, not the reset one) and ``done = terminated | truncated``. A termination is a true end
    (nothing follows: no bootstrap); a time-limit truncation is not (the state still has value
    :math:`V(s'_t)`; Pardo et al. 2018, "Time Limits in Reinforcement Learning"), but the trace is cut at both
    because the next row of the rollout is a new episode. The advantage estimator of PPO, A2C and TRPO.

    Computed with :func:`gae` (which bootstraps from ``values[t+1]`` under a per-step discount) by
    folding the truncation bootstrap into the reward: ``r'_t = r_t + gamma V(s'_t)`` at truncations,
    ``discount_t = gamma (1 - done_t)``, and ``bootstrap_value = V(s'_{T-1})`` (for a copy that did not finish,
    ``s'_{T-1}`` is the observation the next rollout starts from).

    Args:
        rewards: ``[T, B]`` reward of step ``t``.
        values: ``[T, B]`` :math:`V(s_t)` of the observation the step-``t`` action was taken in.
        next_values: ``[T, B]`` :math:`V(s'_t)` of the real observation after step ``t``. Where the episode goes
            on, :math:`s'_t` is :math:`s_{t+1}`, so only the entries at episode ends and at the last step are read
            (``values[t + 1]`` is used elsewhere).
        terminated: ``[T, B]`` bool, the episode ended at step ``t`` (no bootstrap).
        truncated: ``[T, B]`` bool, the episode was cut at step ``t`` by a time limit (bootstrap from
            :math:`V(s'_t)`); where both flags are set, termination wins.
        gamma: discount per agent step.
        lam: GAE :math:`\lambda \in [0, 1]` (1: discounted returns minus V; 0: one-step TD errors).

    Returns:
        ``(advantages, returns)``, both ``[T, B]``; ``returns = advantages + values`` (the TD(lambda) target).
    """
    terminated, truncated = terminated.to(rewards.dtype), truncated.to(rewards.dtype)
    done = torch.clamp(terminated + truncated, max=1.0)
    truncated_only = truncated * (1.0 - terminated)
    rewards = rewards + gamma * truncated_only * next_values
    return gae(rewards, values, next_values[-1], gamma * (1.0 - done), lam)


# --------------------------------------------------------------------------- #
# n-step returns with termination / truncation
# --------------------------------------------------------------------------- #


def nstep_returns(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    next_values: torch.Tensor,
    gamma: float,
    n: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""n-step bootstrapped targets, distinguishing termination from truncation.

    The n-step return of Sutton & Barto, *Reinforcement Learning: An
    Introduction* (2nd ed., 2018), Eq. 7.1 (as used by Rainbow, Hessel et al.
    2018, Eq. 2), computed for every start step ``t`` of a ``[T, B]`` rollout:

    .. math::

        G_t = \sum_{k=0}^{m-1} \gamma^k r_{t+k}
              + \gamma^m (1 - \text{terminated}_{t+m-1})\,
                \text{next\_values}_{t+m-1},

    where the window length is

    .. math::

        m = \min\big(n,\; e_t - t + 1,\; T - t\big), \qquad
        e_t = \min\{k \ge t : \text{terminated}_k \lor \text{truncated}_k\}

    (``e_t`` is the first step at or after ``t`` that ends the episode; if there
    is none the middle term is dropped).  So the window always contains at
    least step ``t`` itself (``m >= 1``), and:

    * **termination** at step ``t+m-1`` ends the window and does **not**
      bootstrap (the episode's true value after it is 0);
    * **time-limit truncation** at step ``t+m-1`` ends the window but **does**
      bootstrap from ``next_values[t+m-1]``, the value of the *real* final
      observation (not the observation after the automatic reset);
    * a window that runs past the end of the rollout is cut at ``T - 1`` and
      bootstraps from ``next_values[T-1]`` = :math:`V(s_T)`.

    If a step is flagged both terminated and truncated, termination wins (no
    bootstrap).

    Besides the full target, the pieces are returned so that a replay memory
    can store them and recompute the target later with a different (e.g.
    target-network) value function::

        returns[t] == partial_sum[t] + bootstrap_discounts[t] * next_values[next_index[t], b]

    i.e. to re-target with new values ``V'`` of the real next observations use
    ``(returns - bootstrap_discounts * next_values.gather(0, next_index))
    + bootstrap_discounts * V'.gather(0, next_index)``; the observation to
    evaluate for step ``t`` is the real next observation of step
    ``next_index[t]``.

    Args:
        rewards: ``[T, B]`` float, reward of step ``t``.
        terminated: ``[T, B]`` bool or float (nonzero = true), the
            ``terminated`` flag returned by the step that produced
            ``rewards[t]`` (MDP terminal state reached).
        truncated: ``[T, B]`` bool or float (nonzero = true), the ``truncated``
            flag returned by that same step (time limit / episode cut for a
            reason outside the MDP).
        next_values: ``[T, B]`` float, :math:`V(s_{t+1})` where :math:`s_{t+1}` is
            the real next observation of step ``t`` -- for a truncated step the
            real final observation, not the reset one.  Its value at a
            terminated step is never used.
        gamma: the constant discount factor :math:`\gamma`.
        n: the number of steps, an integer ``>= 1``.

    Returns:
        ``(returns, bootstrap_discounts, next_index)``, all ``[T, B]``:

        * ``returns`` (float): the full target :math:`G_t`;
        * ``bootstrap_discounts`` (float): :math:`\gamma^m (1 -
          \text{terminated}_{t+m-1})`, the factor multiplying the bootstrap
          value (0 when the window ends in a termination);
        * ``next_index`` (int64): :math:`t + m - 1`, the time index in
          ``next_values`` whose value is bootstrapped from.

    Raises:
        ValueError: if a shape does not match ``rewards``' ``[T, B]`` or ``n``
            is not a positive integer.
    """
    T, B = check_time_major("rewards", rewards)
    check_shape("terminated", terminated, (T, B), "rewards")
    check_shape("truncated", truncated, (T, B), "rewards")
    check_shape("next_values", next_values, (T, B), "rewards")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    n = int(n)
    gamma = float(gamma)

    term = terminated != 0
    ended = term | (truncated != 0)

    partial = torch.zeros_like(rewards)
    # Window length m per start step; every window contains its own step t.
    length = torch.zeros((T, B), dtype=torch.int64, device=rewards.device)
    # open_[t] is True while the window starting at t may still take step t+k.
    open_ = torch.ones((T, B), dtype=torch.bool, device=rewards.device)
    for k in range(min(n, T)):
        # Windows starting at t < T - k can reach step t + k.
        still = open_[: T - k]
        partial[: T - k] += torch.where(
            still, (gamma**k) * rewards[k:], torch.zeros_like(rewards[k:])
        )
        length[: T - k] += still.to(torch.int64)
        open_[: T - k] = still & ~ended[k:]

    time = torch.arange(T, dtype=torch.int64, device=rewards.device).unsqueeze(1)
    next_index = time + length - 1
    term_at_end = term.gather(0, next_index)
    bootstrap_discounts = torch.full_like(rewards, gamma).pow(length.to(rewards.dtype))
    bootstrap_discounts = bootstrap_discounts * (~term_at_end).to(rewards.dtype)
    # torch.where (not a multiplication by 0) so that a non-finite value stored
    # for a terminal observation cannot leak into the target.
    returns = torch.where(
        term_at_end,
        partial,
        partial + bootstrap_discounts * next_values.gather(0, next_index),
    )
    return returns, bootstrap_discounts, next_index


# --------------------------------------------------------------------------- #
# Q(lambda) returns (PQN)
# --------------------------------------------------------------------------- #


def q_lambda_returns(rewards: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
                     truncated: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    r"""Peng's Q(lambda) returns over a rollout (Peng & Williams 1996; the target of PQN, Gallici et al. 2024,
    "Simplifying Deep Temporal Difference Learning", Eq. 7 and Algorithm 1), by a backward recursion:

    .. math::

        G_t = r_t + \gamma (1 - \mathrm{term}_t)
              \big[(1 - \lambda_t) \max_a Q(s'_t, a) + \lambda_t G_{t+1}\big], \qquad
        \lambda_t = \lambda (1 - \mathrm{done}_t) \text{ for } t < T - 1, \quad \lambda_{T-1} = 0

    where :math:`s'_t` is the *real* observation after step ``t`` (an episode's final observation where it ended
    at ``t``) and ``done = terminated | truncated``. A termination has no bootstrap; a time-limit truncation
    bootstraps from :math:`\max_a Q(s'_t, a)` (Pardo et al. 2018) but the lambda-chain is cut there, as at the last
    step of the rollout, because the next row is another episode (or not collected yet). ``lam=0`` gives the
    one-step Q-learning target, ``lam=1`` the discounted return bootstrapped at the episode's or rollout's end.

    (CleanRL's ``pqn.py`` cuts only the bootstrap term at an episode's end, carrying ``lam * G_{t+1}`` of the next
    episode across it; the paper's reference implementation, purejaxql, cuts the chain, as here.)

    Args:
        rewards: ``[T, B]`` reward of step ``t``.
        next_values: ``[T, B]`` :math:`\max_a Q(s'_t, a)`. Where the episode goes on, :math:`s'_t` is
            :math:`s_{t+1}`; the entries at terminations are never read.
        terminated: ``[T, B]`` bool or 0/1, the episode ended at step ``t`` (no bootstrap).
        truncated: ``[T, B]`` bool or 0/1, a time limit cut the episode at step ``t`` (bootstrap, chain cut);
            where both flags are set, termination wins.
        gamma: discount per agent step.
        lam: :math:`\lambda \in [0, 1]`.

    Returns:
        ``[T, B]`` the targets :math:`G_t` (as differentiable as ``next_values``: detach them, or call under
        ``torch.no_grad()``, for fixed targets).
    """
    T, B = check_time_major("rewards", rewards)
    check_shape("next_values", next_values, (T, B), "rewards")
    check_shape("terminated", terminated, (T, B), "rewards")
    check_shape("truncated", truncated, (T, B), "rewards")
    term = terminated != 0
    keep = 1.0 - (term | (truncated != 0)).to(rewards.dtype)  # 0 where the chain is cut
    returns = torch.empty_like(rewards)
    chain = next_values[-1]  # G_T: the last step's lambda-mix is all bootstrap
    for t in range(T - 1, -1, -1):
        lam_t = lam * keep[t] if t < T - 1 else torch.zeros_like(keep[t])
        mix = (1.0 - lam_t) * next_values[t] + lam_t * chain
        # torch.where, not a product with 0: a non-finite value at a terminal step cannot leak into the target
        chain = rewards[t] + torch.where(term[t], torch.zeros_like(mix), gamma * mix)
        returns[t] = chain
    return returns
