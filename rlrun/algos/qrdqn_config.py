"""The config schema of QR-DQN (``algo=qrdqn``, rlrun/algos/qrdqn.py): DQN's keys (rlrun/algos/dqn_config.py) and
the number of quantiles. ``conf/algo/qrdqn.yaml`` selects it; the registry names it
(``registry.schema("algo", "qrdqn")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rlrun.algos.dqn_config import DQNConfig
from rlrun.schema import key


@dataclass
class QRDQNConfig(DQNConfig):
    """QR-DQN (Dabney, Rowland, Bellemare & Munos 2018): DQN learning ``num_quantiles`` quantiles of the return by
    the quantile Huber loss, at the midpoint fractions (2i + 1) / 2N. Every DQN key keeps its meaning;
    ``huber_delta`` is the loss's threshold kappa (null: the plain quantile regression loss).

    The defaults are DQN's CartPole-v1 ones (conf/algo/dqn.yaml) with the paper's kappa and rl-baselines3-zoo's
    CartPole-v1 quantile count; conf/algo_env/qrdqn_cartpole.yaml holds that zoo entry's other settings too.
    """

    name: str = "qrdqn"
    num_quantiles: int = key(10, "[1, inf)")
    """Quantiles N per action (Dabney et al. 2018 used 200 on Atari). Default: rl-baselines3-zoo qrdqn.yml CartPole-v1
    n_quantiles."""
    huber_delta: Optional[float] = key(1.0, "(0, inf)")
    """kappa, the quantile Huber loss's threshold (Dabney et al. 2018, Eq. 10); null: the plain quantile regression
    loss (Eq. 8). Default: kappa = 1, the paper's."""
