"""The config schema of Ape-X DQN (``algo=apex``, rlrun/algos/apex.py): each key's default, declared range and
docstring, said once here. ``conf/algo/apex.yaml`` selects it; the registry names it
(``registry.schema("algo", "apex")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rlrun.errors import ConfigError
from rlrun.schema import Declared, key


@dataclass
class ApexConfig(Declared):
    """Ape-X DQN (Horgan et al. 2018): many epsilon-greedy actors with per-actor epsilons, actor-side initial
    priorities of n-step transitions, sharded prioritised replay, one learner (rlrun/algos/apex.py).

    The defaults are said here only, each with its source (conf/algo/apex.yaml selects this schema): tuned for
    CartPole-v1 with 2 workers on 2 CPU cores; conf/algo_env/apex_atari.yaml has the paper's Atari values.
    """

    key_prefix: ClassVar[str] = "algo"

    name: str = "apex"
    lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate (per gradient step). Default: as DQN's CartPole default (conf/algo/dqn.yaml), tuned here."""
    adam_eps: float = key(1e-8, "(0, inf)")
    """Adam's epsilon. Default: torch's default."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: the usual CartPole value."""
    frames_per_record: Optional[float] = key(1.1, "(0, inf)")
    """Replay of stacked uint8 frames (Atari obs/next_obs): keep each distinct frame once, in a ring of this many
    frames per transition (a stream needs ~1.0-1.1; the oldest transitions are dropped when it needs more); null
    stores every stack whole (56 KB per Atari transition instead of ~8 KB). Other observations are unaffected."""
    learner: str = key("thread", choices=('thread', 'sync'))
    """thread: the learner runs free on its own thread, fed by a bounded queue of replay batches (Horgan et al. 2018;
    actors never wait for it) | sync: train_every env steps per gradient step inside each training step
    (deterministic on the local executor; actors wait while it learns)."""
    learner_queue: int = key(16, "[1, inf)")
    """Thread mode: replay batches prefetched for the learner (bounded: memory stays flat)."""
    max_replay_ratio: Optional[float] = key(32.0, "(0, inf)")
    """Thread mode: at most this many samples replayed per env step stored (gradient steps x batch_size / env
    steps); null: as fast as the learner goes (the paper's setting). Sync mode uses train_every instead. Default:
    sync's batch_size / train_every, which keeps sync's sample efficiency on CartPole with 2 cores; the Atari
    presets run free (null)."""
    n_step: int = key(3, "[1, inf)")
    """Steps per transition (n-step returns, aggregated in each rollout worker per env copy). Default: Horgan et al.
    2018 (App. D: 3), aggregated per env copy in each worker."""
    batch_size: int = key(128, "[1, inf)")
    """Transitions per gradient step (each batch is drawn from one replay shard). Default: tuned here (paper: 512)."""
    buffer_size: int = key(50_000, "[1, inf)")
    """Replay capacity over all shards, in transitions (each shard holds buffer_size // num_replay_shards). Default:
    tuned here (paper: 2M)."""
    num_replay_shards: int = key(2, "[1, inf)")
    """Replay shards (executor=ray: one actor each; executor=local: in-process). Default: RLlib Ape-X
    num_replay_buffer_shards (4), 2 cores here."""
    learning_starts: int = key(1_000, "[0, inf)")
    """Env steps stored before the first gradient step. Default: as rlrun's DQN (SB3 zoo CartPole)."""
    train_every: float = key(4.0, "(0, inf)")
    """Env steps (summed over all workers) per gradient step: replay ratio = batch_size / train_every. Default: tuned
    here."""
    rollout_steps: int = key(16, "[1, inf)")
    """Agent steps per env copy in one rollout (the actor's local buffer; Horgan et al. send every 50). Default: tuned
    here (paper: 50)."""
    max_weight_sync_delay: int = key(400, "[1, inf)")
    """Env steps a worker samples between weight syncs from the learner (RLlib Ape-X max_weight_sync_delay). Default:
    RLlib Ape-X max_weight_sync_delay (paper: 400 frames)."""
    target_update_every: int = key(500, "[1, inf)")
    """Gradient steps between hard target-network syncs (ignored when tau < 1). Default: tuned here (paper: 2500)."""
    tau: float = key(1.0, "(0, 1]")
    """Target-network sync coefficient: 1 = hard copy every target_update_every steps, < 1 = Polyak every step.
    Default: hard target copies, as Horgan et al. 2018."""
    double_q: bool = True
    """Select the bootstrap action with the online network (double DQN), learner and actor priorities. Default: Ape-X
    DQN uses double Q."""
    dueling: bool = True
    """Dueling Q head, Q = V + A - mean(A) (Wang et al. 2016, Eq. 9). Default: Ape-X DQN uses the dueling head."""
    huber_delta: Optional[float] = key(None, "(0, inf)")
    """Huber loss threshold on the TD error; null: squared error 0.5 * td^2. With distribution=quantile it is the
    quantile Huber loss's kappa (null: the plain quantile regression loss), as QR-DQN's. Default: the Atari preset
    uses Huber 1.0."""
    distribution: str = key("none", choices=("none", "categorical", "quantile"))
    """What the learner and the actors' priorities estimate: none (Ape-X DQN's expected Q-values) | categorical
    (C51's return distribution on num_atoms atoms over [v_min, v_max], learnt by cross-entropy to the projected
    target) | quantile (QR-DQN's num_quantiles quantiles, learnt by the quantile Huber loss). With a distribution
    the priorities are the per-item loss, as Rainbow's (Hessel et al. 2018, Sec. 3), and the actors act on its
    mean. Default: Ape-X DQN (Horgan et al. 2018)."""
    num_atoms: int = key(101, "[2, inf)")
    """distribution=categorical: atoms of the support. Default: CleanRL c51.py (classic control), as algo=c51."""
    v_min: float = key(-100.0, "any")
    """distribution=categorical: the lowest atom, in (n-step discounted) reward units. Default: CleanRL c51.py
    (classic control), as algo=c51."""
    v_max: float = key(100.0, "any")
    """distribution=categorical: the highest atom (must be > v_min). Default: CleanRL c51.py (classic control), as
    algo=c51."""
    num_quantiles: int = key(10, "[1, inf)")
    """distribution=quantile: quantiles per action. Default: rl-baselines3-zoo qrdqn.yml CartPole-v1, as
    algo=qrdqn."""
    max_grad_norm: Optional[float] = key(10.0, "(0, inf)")
    """Global gradient-norm clip; null disables. Default: as rlrun's DQN (paper: 40)."""
    network: str = "auto"
    """Torso: auto (from the observation space: nature_cnn for uint8 images [C, H, W], minatar_cnn for bool images,
    the multi-input torso for a Dict/Tuple with image parts, else mlp) | mlp | nature_cnn | impala_resnet |
    minatar_cnn | minatar_conv (Revisiting Rainbow's: the conv alone, no fc layer)."""
    hidden_sizes: list[int] = key(factory=lambda: [128, 128], items="[1, inf)")
    """Hidden layer widths of the MLP torso. Default: tuned here on CartPole, where [64, 64] plateaued far below the
    target on some seeds (docs/algorithms/apex.md)."""
    activation: str = key("relu", choices=('relu', 'tanh', 'elu'))
    """Torso activation: relu | tanh | elu."""
    epsilon_base: float = key(0.4, "[0, 1]")
    """Actor epsilons eps_i = epsilon_base^(1 + epsilon_alpha * i / (N - 1)) over the N env copies of all workers.
    Default: Horgan et al. 2018 Sec. 4.1."""
    epsilon_alpha: float = key(7.0, "[0, inf)")
    """Exponent spread of the actor epsilons (Horgan et al. 2018, Sec. 4.1: 7). Default: Horgan et al. 2018 Sec. 4.1."""
    per_alpha: float = key(0.6, "[0, 1]")
    """Priority exponent alpha (Horgan et al. 2018, App. D: 0.6). Default: Horgan et al. 2018 App. D (Schaul et al.
    2016)."""
    per_beta_start: float = key(0.4, "[0, 1]")
    """Importance-sampling exponent beta at the start (Horgan et al. 2018: 0.4). Default: Horgan et al. 2018 App. D."""
    per_beta_end: float = key(1.0, "[0, 1]")
    """Importance-sampling exponent after per_beta_steps (Ape-X keeps it at per_beta_start; Schaul et al.: 1). Default:
    annealed to 1 as Schaul et al. 2016 (Ape-X keeps 0.4): without it, some CartPole seeds plateaued far below the
    target."""
    per_beta_steps: int = key(10_000, "[1, inf)")
    """Batches drawn from a shard over which its beta moves linearly from start to end. Default: tuned here
    (docs/algorithms/apex.md)."""
    per_eps: float = key(1e-6, "(0, inf)")
    """Added to |TD error| so that no priority is 0. Default: rlrun's PrioritizedReplayMemory default."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.distribution == "categorical" and not self.v_min < self.v_max:
            raise ConfigError(f"algo.v_min={self.v_min}, algo.v_max={self.v_max}: the support needs v_min < v_max "
                              f"(e.g. algo.v_min=-10 algo.v_max=10).")
