"""The config schema of SAC (``algo=sac``, rlrun/algos/sac.py): each key's default, declared range and
docstring, said once here. ``conf/algo/sac.yaml`` selects it; the registry names it
(``registry.schema("algo", "sac")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rlrun.schema import Declared, key


@dataclass
class SACConfig(Declared):
    """Soft actor-critic (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications"): a tanh-squashed
    Gaussian policy, twin Q-networks with Polyak-averaged targets, a learned temperature. Box actions only.

    The defaults are said here only, each with its source (conf/algo/sac.yaml selects this schema): the paper's Table
    1 and rl-baselines3-zoo's Pendulum-v1 entry, with the network and batch made smaller to learn Pendulum-v1 quickly
    on 2 CPU cores.
    """

    key_prefix: ClassVar[str] = "algo"

    name: str = "sac"
    actor_lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate of the policy. Default: rl-zoo sac.yml Pendulum-v1 learning_rate (paper Table 1: 3e-4)."""
    critic_lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate of the twin Q-networks. Default: rl-zoo Pendulum-v1 (CleanRL q_lr 1e-3)."""
    alpha_lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate of log(alpha), the log-temperature (when learn_alpha). Default: rl-zoo Pendulum-v1 (SB3 uses
    one LR for all three)."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: paper Table 1."""
    tau: float = key(0.005, "(0, 1]")
    """Polyak coefficient of the target Q-networks per gradient step: target <- (1 - tau) target + tau online. Default:
    paper Table 1."""
    batch_size: int = key(256, "[1, inf)")
    """Transitions per gradient step. Default: paper Table 1."""
    buffer_size: int = key(100_000, "[1, inf)")
    """Replay capacity, in transitions. Default: paper 1e6, here = the default stop.env_steps (as dqn.yaml)."""
    learning_starts: int = key(1_000, "[0, inf)")
    """Env steps acted with uniform random actions (in the Box bounds) before the policy acts and learning starts.
    Default: env steps of uniform random actions before the policy acts and learns (SB3 100, CleanRL 5000)."""
    train_every: int = key(1, "[1, inf)")
    """Env steps (summed over env copies) per round of gradient_steps gradient steps. Default: paper Table 1 (SB3
    train_freq 1)."""
    gradient_steps: int = key(1, "[1, inf)")
    """Gradient steps per round (each: one critic, one actor and one temperature update, one target sync). Default:
    paper Table 1 (SB3 gradient_steps 1)."""
    rollout_steps: int = key(1, "[1, inf)")
    """Agent steps per env copy collected by one call of training_step() (its gradient steps follow it)."""
    hidden_sizes: list[int] = key(factory=lambda: [256, 256], items="[1, inf)")
    """Hidden layer widths of the policy's and of each Q-network's MLP. Default: paper Table 1."""
    activation: str = key("relu", choices=('relu', 'tanh', 'elu'))
    """MLP activation: relu | tanh | elu. Default: paper Table 1 (ReLU)."""
    learn_alpha: bool = True
    """Learn the temperature alpha towards target_entropy (Haarnoja et al. 2018b, Sec. 5); false: alpha = init_alpha.
    Default: SB3 ent_coef auto, CleanRL autotune."""
    init_alpha: float = key(1.0, "(0, inf)")
    """Temperature alpha at the start (the fixed one when learn_alpha is false). Default: SB3 "auto" starts at 1.0,
    CleanRL log_alpha = 0."""
    target_entropy: Optional[float] = key(None, "any")
    """Entropy target of the temperature loss, in nats of the [-1, 1]-normalised action; null: -|A| (dim of A)."""
    log_std_min: float = key(-5.0, "any")
    """Lower bound of the policy's log standard deviation (before the tanh squash). Default: CleanRL
    sac_continuous_action.py LOG_STD_MIN."""
    log_std_max: float = key(2.0, "any")
    """Upper bound of the policy's log standard deviation. Default: CleanRL LOG_STD_MAX."""
    max_grad_norm: Optional[float] = key(None, "(0, inf)")
    """Global gradient-norm clip of each of the three updates; null disables. Default: no gradient clipping (paper,
    SB3, CleanRL)."""
