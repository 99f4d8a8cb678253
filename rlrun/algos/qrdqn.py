"""QR-DQN (Dabney, Rowland, Bellemare & Munos, "Distributional Reinforcement Learning with Quantile Regression",
AAAI 2018): DQN whose network outputs, for each action, ``num_quantiles`` quantiles of the return at the fractions
(2i + 1) / 2N, learnt by the quantile Huber loss against the target ``r + gamma^n theta_j(s', a*)``
(:mod:`rlrun.ops.distributional`). Acting is greedy in the quantiles' mean.

It is DQN with another network and loss: :class:`QRDQNAgent` is DQN's agent building a quantile
:class:`~rlrun.components.distributional_q.DistributionalQNetwork` and its loss, and the plan is DQN's. Its config
schema is ``rlrun.algos.qrdqn_config.QRDQNConfig``.
"""

from __future__ import annotations

from rlrun.algos.dqn import DQN, DQNAgent
from rlrun.algos.qrdqn_config import QRDQNConfig
from rlrun.components.base import Component
from rlrun.components.distributional_q import DistributionalLoss, DistributionalQNetwork, distributional_q_loss


class QRDQNAgent(DQNAgent):
    """DQN's agent on quantiles of the return: the networks, the loss and the loss function differ."""

    cfg: QRDQNConfig
    loss_of = staticmethod(distributional_q_loss)

    def make_q_network(self, name: str) -> Component:
        cfg = self.cfg
        return DistributionalQNetwork("quantile", cfg.num_quantiles, network=cfg.network,
                                      hidden_sizes=cfg.hidden_sizes, activation=cfg.activation, dueling=cfg.dueling,
                                      noisy=cfg.noisy, noisy_std=cfg.noisy_std, name=name,
                                      action_mask=cfg.action_mask)

    def make_loss(self) -> Component:
        # huber_delta null: kappa 0, the plain quantile regression loss
        return DistributionalLoss("quantile", self.cfg.double_q, kappa=self.cfg.huber_delta or 0.0)


class QRDQN(DQN):
    """DQN's plan with :class:`QRDQNAgent`."""

    agent_class = QRDQNAgent
