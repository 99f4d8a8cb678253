"""The config schema of DDPG (``algo=ddpg``, rlrun/algos/ddpg.py): each key's default, declared range and docstring,
said once here; TD3's schema (rlrun/algos/td3_config.py) extends it. ``conf/algo/ddpg.yaml`` selects it; the
registry names it (``registry.schema("algo", "ddpg")``). No heavy imports: the CLI loads every schema at start-up.

The defaults are CleanRL's ``ddpg_continuous_action.py`` (``Args``; the same values in ``td3_continuous_action.py``):
https://github.com/vwxyzjn/cleanrl/blob/master/cleanrl/ddpg_continuous_action.py, documented at
https://docs.cleanrl.dev/rl-algorithms/ddpg/ (which lists where they differ from Lillicrap et al. 2016)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rlrun.schema import Declared, key


@dataclass
class DDPGConfig(Declared):
    """Deep deterministic policy gradient (Lillicrap et al. 2016, "Continuous control with deep reinforcement
    learning") as CleanRL's ``ddpg_continuous_action.py`` keeps it: a deterministic tanh actor acting with Gaussian
    noise, one Q-network, target copies of both with Polyak averaging. Box actions only."""

    key_prefix: ClassVar[str] = "algo"

    name: str = "ddpg"
    actor_lr: float = key(3e-4, "(0, inf)")
    """Adam learning rate of the actor. Default: CleanRL learning_rate 3e-4 (Lillicrap et al. 2016: 1e-4)."""
    critic_lr: float = key(3e-4, "(0, inf)")
    """Adam learning rate of the critic(s). Default: CleanRL learning_rate 3e-4 (Lillicrap et al. 2016: 1e-3)."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: CleanRL gamma."""
    tau: float = key(0.005, "(0, 1]")
    """Polyak coefficient of the target actor and critic per delayed step: target <- (1 - tau) target + tau online.
    Default: CleanRL tau (Lillicrap et al. 2016: 0.001)."""
    batch_size: int = key(256, "[1, inf)")
    """Transitions per gradient step. Default: CleanRL batch_size (Lillicrap et al. 2016: 64)."""
    buffer_size: int = key(1_000_000, "[1, inf)")
    """Replay capacity, in transitions. Default: CleanRL buffer_size 1e6."""
    learning_starts: int = key(25_000, "[0, inf)")
    """Env steps acted with uniform random actions (in the Box bounds) before the policy acts and learning starts.
    Default: CleanRL learning_starts 25e3."""
    train_every: int = key(1, "[1, inf)")
    """Env steps (summed over env copies) per round of gradient_steps critic steps. Default: CleanRL (one update
    per env step)."""
    gradient_steps: int = key(1, "[1, inf)")
    """Critic steps per round (the actor and the targets step on every policy_delay-th). Default: CleanRL."""
    rollout_steps: int = key(1, "[1, inf)")
    """Agent steps per env copy collected by one call of training_step() (its gradient steps follow it). Default:
    CleanRL's loop (one env step between updates)."""
    policy_delay: int = key(2, "[1, inf)")
    """Critic steps per actor step and target update (delayed policy updates). Default: CleanRL policy_frequency 2,
    which its DDPG keeps too (Lillicrap et al. 2016: 1, every step)."""
    exploration_noise: float = key(0.1, "[0, inf)")
    """Standard deviation of the Gaussian noise added to the actor's actions while acting, in units of half the Box
    width (the action normalised to [-1, 1]); clipped to the bounds. Default: CleanRL exploration_noise 0.1
    (Lillicrap et al. 2016: an Ornstein-Uhlenbeck process)."""
    hidden_sizes: list[int] = key(factory=lambda: [256, 256], items="[1, inf)")
    """Hidden layer widths of the actor's and of each Q-network's MLP. Default: CleanRL 256 x 256 (Lillicrap et al.
    2016: 400 x 300)."""
    activation: str = key("relu", choices=('relu', 'tanh', 'elu'))
    """MLP activation: relu | tanh | elu. Default: CleanRL ReLU."""
    max_grad_norm: Optional[float] = key(None, "(0, inf)")
    """Global gradient-norm clip of the critic's and the actor's steps; null disables. Default: no clipping
    (CleanRL)."""
