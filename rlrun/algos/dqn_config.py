"""The config schema of DQN (``algo=dqn``, rlrun/algos/dqn.py): each key's default, declared range and
docstring, said once here. ``conf/algo/dqn.yaml`` selects it; the registry names it
(``registry.schema("algo", "dqn")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rlrun.schema import Declared, key


@dataclass
class DQNConfig(Declared):
    """Double DQN (van Hasselt et al., 2016) with a target network and uniform replay (Mnih et al., 2015).

    The defaults are said here only (conf/algo/dqn.yaml selects this schema): tuned for CartPole-v1 on 2 CPU cores.
    """

    key_prefix: ClassVar[str] = "algo"

    name: str = "dqn"
    lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate. Default: tuned for CartPole-v1 on 2 cores, see docs/algorithms/dqn.md."""
    adam_eps: float = key(1e-8, "(0, inf)")
    """Adam's epsilon. Default: torch's default (C51's and Rainbow's presets set their papers' larger ones)."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: the usual CartPole value (horizon ~100 steps)."""
    batch_size: int = key(256, "[1, inf)")
    """Transitions per gradient step. Default: tuned for CartPole-v1 on 2 cores, see docs/algorithms/dqn.md."""
    buffer_size: int = key(100_000, "[1, inf)")
    """Replay capacity, in transitions. Default: = the default stop.env_steps, so nothing is overwritten."""
    learning_starts: int = key(1_000, "[0, inf)")
    """Env steps collected with the initial policy before the first gradient step. Default: as in SB3 rl-zoo's CartPole
    DQN."""
    train_every: int = key(4, "[1, inf)")
    """Env steps (summed over env copies) per gradient step: replay ratio = batch_size / train_every. Default: tuned
    here."""
    rollout_steps: int = key(16, "[1, inf)")
    """Agent steps per env copy collected by one call of training_step() (its gradient steps follow it). Default:
    amortises per-call overhead; tuned here."""
    target_update_every: int = key(500, "[1, inf)")
    """Gradient steps between hard target-network syncs (ignored when tau < 1)."""
    tau: float = key(0.02, "(0, 1]")
    """Target-network sync coefficient: 1 = hard copy every target_update_every steps, < 1 = Polyak every step.
    Default: tuned here."""
    double_q: bool = True
    """Select the bootstrap action with the online network (double DQN) instead of the target network. Default: van
    Hasselt et al. 2016."""
    huber_delta: Optional[float] = key(None, "(0, inf)")
    """Huber loss threshold on the TD error; null: squared error 0.5 * td^2. Default: null = squared error (learnt
    faster here than 1.0)."""
    max_grad_norm: Optional[float] = key(10.0, "(0, inf)")
    """Global gradient-norm clip; null disables. Default: as in SB3's DQN."""
    hidden_sizes: list[int] = key(factory=lambda: [64, 64], items="[1, inf)")
    """Hidden layer widths of the MLP torso. Default: as fast to learn as [128, 128] here and ~1.5x cheaper per step."""
    activation: str = key("relu", choices=('relu', 'tanh', 'elu'))
    """Torso activation: relu | tanh | elu."""
    epsilon_start: float = key(1.0, "[0, 1]")
    """Epsilon-greedy exploration at the start."""
    epsilon_end: float = key(0.02, "[0, 1]")
    """Epsilon-greedy exploration after the schedule. Default: tuned for CartPole-v1 on 2 cores, see
    docs/algorithms/dqn.md."""
    epsilon_decay_steps: int = key(10_000, "[1, inf)")
    """Env steps over which epsilon decays linearly from start to end. Default: tuned for CartPole-v1 on 2 cores, see
    docs/algorithms/dqn.md."""
    network: str = "auto"
    """Torso: auto (from the observation space: nature_cnn for uint8 images [C, H, W], minatar_cnn for bool images,
    the multi-input torso for a Dict/Tuple with image parts, else mlp) | mlp | nature_cnn | impala_resnet |
    minatar_cnn | minatar_conv (Revisiting Rainbow's: the conv alone, no fc layer)."""
    action_mask: str = key("auto", choices=("auto", "off"))
    """Invalid-action masks (Discrete actions): auto (when the observation carries an ``action_mask`` entry, or the
    env's info dict does, illegal actions are never chosen and get no probability, in acting and in learning) | off
    (the mask is ignored). See docs/action-masks.md."""
    dueling: bool = False
    """Dueling Q head, Q = V + A - mean(A) (Wang et al. 2016, Eq. 9). """
    noisy: bool = False
    """Noisy nets (Fortunato et al. 2018): the Q head's linear layers carry learnt factorised Gaussian noise,
    resampled at every gradient step, and exploration is that noise's (epsilon_* are unused: epsilon is
    noisy_epsilon); acting without exploration uses the mean weights."""
    noisy_epsilon: float = key(0.0, "[0, 1]")
    """With noisy nets, a constant epsilon-greedy on top of the noise. Default: 0, exploration by the noise alone
    (Fortunato et al. 2018; Hessel et al. 2018); the Dopamine-based Rainbow of Obando-Ceron & Castro 2021 keeps 0.01."""
    noisy_std: float = key(0.5, "(0, inf)")
    """sigma_0 of the noisy layers' initial noise scale, sigma = sigma_0 / sqrt(inputs). Default: Fortunato et al. 2018,
    Sec. 3.2 (factorised noise)."""
    prioritized_replay: bool = False
    """Proportional prioritised replay (Schaul et al. 2016) instead of uniform replay."""
    per_alpha: float = key(0.6, "[0, 1]")
    """Priority exponent alpha (Schaul et al. 2016, Table 3: 0.6 for the proportional variant). Default: priority
    exponent (Schaul et al. 2016, Table 3)."""
    per_beta_start: float = key(0.4, "[0, 1]")
    """Importance-sampling exponent beta at the start, annealed linearly to per_beta_end. Default: 0.4, Schaul et al.
    2016."""
    per_beta_steps: int = key(100_000, "[1, inf)")
    """Gradient steps over which beta anneals from per_beta_start to per_beta_end."""
    per_beta_end: float = key(1.0, "[0, 1]")
    """Importance-sampling exponent after per_beta_steps. Default: 1, full correction (Schaul et al. 2016, Sec. 3.4);
    per_beta_end = per_beta_start keeps beta fixed, as Dopamine's prioritised replay does (0.5)."""
    frames_per_record: Optional[float] = key(1.1, "(0, inf)")
    """Replay of stacked uint8 frames (Atari obs/next_obs): keep each distinct frame once, in a ring of this many
    frames per transition (a stream needs ~1.0-1.1; the oldest transitions are dropped when it needs more); null
    stores every stack whole (56 KB per Atari transition instead of ~8 KB). Other observations are unaffected."""
    n_step: int = key(1, "[1, inf)")
    """Steps per transition: n-step returns (Sutton 1988; Hessel et al. 2018 use 3); truncation bootstraps. Default:
    time-limit truncation bootstraps."""
