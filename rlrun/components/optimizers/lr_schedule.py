"""The learning-rate schedule of the agents that anneal theirs (PPO, A2C, TRPO's value fit, IMPALA, APPO): ``lr``
decays linearly to 0 over ``total_env_steps`` env steps trained on (CleanRL's and IMPALA's ``anneal_lr``), or stays
``lr``."""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)


class LinearDecay:
    """``lr * remaining(env_steps)`` when ``anneal``, else ``lr``; :meth:`apply` puts it into an optimizer.

    Past the horizon the rate is 0 and the agent no longer learns: the first :meth:`apply` there logs a warning that
    says so (a run resumed with a larger budget keeps the schedule of its first one)."""

    def __init__(self, lr: float, anneal: bool, total_env_steps: int | None, owner: str) -> None:
        self.lr, self.anneal, self.total_env_steps, self.owner = float(lr), anneal, total_env_steps, owner
        self._warned = False

    def remaining(self, env_steps: int) -> float:
        """The share of the schedule still ahead: ``1 - env_steps / total_env_steps``, at least 0 (1 without a
        horizon)."""
        if not self.total_env_steps:
            return 1.0
        return max(0.0, 1.0 - env_steps / float(self.total_env_steps))

    def rate(self, env_steps: int) -> float:
        return self.lr * (self.remaining(env_steps) if self.anneal else 1.0)

    def apply(self, optimizer: torch.optim.Optimizer, env_steps: int) -> float:
        """Set every parameter group of ``optimizer`` to the rate at ``env_steps``; returns it."""
        lr = self.rate(env_steps)
        if lr == 0.0 and self.lr > 0.0 and not self._warned:
            self._warned = True
            log.warning("%s: the learning rate has annealed to 0 at env step %d (algo.total_env_steps=%s), so the "
                        "agent no longer learns. A run resumed with a larger stop.env_steps keeps the schedule of "
                        "its first budget; start a new run with algo.total_env_steps set to train longer.",
                        self.owner, env_steps, self.total_env_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr
