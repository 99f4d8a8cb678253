"""C51 (Bellemare, Dabney & Munos, "A Distributional Perspective on Reinforcement Learning", ICML 2017): DQN whose
network outputs, for each action, a categorical distribution of the return on ``num_atoms`` fixed atoms over
``[v_min, v_max]``; the Bellman target ``r + gamma^n z`` is projected back onto the atoms and learnt by cross-entropy
(:mod:`rlrun.ops.distributional`). Acting is greedy in the distribution's mean.

It is DQN with another network and loss: :class:`C51Agent` is DQN's agent (replay, prioritised replay, n-step,
target sync, the gradient step, epsilon-greedy or noisy exploration) building a
:class:`~rlrun.components.distributional_q.DistributionalQNetwork` and its loss, and the plan is DQN's. Rainbow
(rlrun/algos/rainbow.py) is this with every switch on. Its config schema is ``rlrun.algos.c51_config.C51Config``.
"""

from __future__ import annotations

from rlrun.algos.c51_config import C51Config
from rlrun.algos.dqn import DQN, DQNAgent
from rlrun.components.base import Component
from rlrun.components.distributional_q import DistributionalLoss, DistributionalQNetwork, distributional_q_loss


class C51Agent(DQNAgent):
    """DQN's agent on a categorical return distribution: the networks, the loss and the loss function differ."""

    cfg: C51Config
    loss_of = staticmethod(distributional_q_loss)

    def make_q_network(self, name: str) -> Component:
        cfg = self.cfg
        return DistributionalQNetwork("categorical", cfg.num_atoms, cfg.v_min, cfg.v_max, cfg.network,
                                      cfg.hidden_sizes, cfg.activation, cfg.dueling, cfg.noisy, cfg.noisy_std, name,
                                      action_mask=cfg.action_mask)

    def make_loss(self) -> Component:
        return DistributionalLoss("categorical", self.cfg.double_q)


class C51(DQN):
    """DQN's plan with :class:`C51Agent`."""

    agent_class = C51Agent
