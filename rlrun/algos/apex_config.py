"""The config schema of Ape-X DQN (``algo=apex``, rlrun/algos/apex.py): each key's default, declared range and
docstring, said once here. ``conf/algo/apex.yaml`` selects it; the registry names it
(``registry.schema("algo", "apex")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rlrun.schema import Declared, key


@dataclass
class ApexConfig(Declared):
    """Ape-X DQN (Horgan et al. 2018): many epsilon-greedy actors with per-actor epsilons, actor-side initial
    priorities of n-step transitions, sharded prioritised replay, one learner (rlrun/algos/apex.py).

    The defaults are conf/algo/apex.yaml's (kept equal to it; each cited there): tuned for CartPole-v1 with 2
    workers on 2 CPU cores; conf/algo_env/apex_atari.yaml has the paper's Atari values.
    """

    key_prefix: ClassVar[str] = "algo"

    name: str = "apex"
    lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate (per gradient step)."""
    adam_eps: float = key(1e-8, "(0, inf)")
    """Adam's epsilon."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step."""
    frames_per_record: Optional[float] = key(1.1, "(0, inf)")
    """Replay of stacked uint8 frames (Atari obs/next_obs): keep each distinct frame once, in a ring of this many
    frames per transition (a stream needs ~1.0-1.1; the oldest transitions are dropped when it needs more); null
    stores every stack whole (56 KB per Atari transition instead of ~8 KB). Other observations are unaffected."""
    learner: str = key("thread", choices=('thread', 'sync'))
    """thread: the learner runs free on its own thread, fed by a bounded queue of replay batches (Horgan et al.
    2018; actors never wait for it) | sync: train_every env steps per gradient step inside each training step
    (deterministic on the local executor; actors wait while it learns)."""
    learner_queue: int = key(16, "[1, inf)")
    """Thread mode: replay batches prefetched for the learner (bounded: memory stays flat)."""
    max_replay_ratio: Optional[float] = key(None, "(0, inf)")
    """Thread mode: at most this many samples replayed per env step stored (gradient steps x batch_size / env
    steps); null: as fast as the learner goes (the paper's setting). Sync mode uses train_every instead."""
    n_step: int = key(3, "[1, inf)")
    """Steps per transition (n-step returns, aggregated in each rollout worker per env copy)."""
    batch_size: int = key(128, "[1, inf)")
    """Transitions per gradient step (each batch is drawn from one replay shard)."""
    buffer_size: int = key(50_000, "[1, inf)")
    """Replay capacity over all shards, in transitions (each shard holds buffer_size // num_replay_shards)."""
    num_replay_shards: int = key(2, "[1, inf)")
    """Replay shards (executor=ray: one actor each; executor=local: in-process)."""
    learning_starts: int = key(1_000, "[0, inf)")
    """Env steps stored before the first gradient step."""
    train_every: float = key(4.0, "(0, inf)")
    """Env steps (summed over all workers) per gradient step: replay ratio = batch_size / train_every."""
    rollout_steps: int = key(16, "[1, inf)")
    """Agent steps per env copy in one rollout (the actor's local buffer; Horgan et al. send every 50)."""
    max_weight_sync_delay: int = key(400, "[1, inf)")
    """Env steps a worker samples between weight syncs from the learner (RLlib Ape-X max_weight_sync_delay)."""
    target_update_every: int = key(500, "[1, inf)")
    """Gradient steps between hard target-network syncs (ignored when tau < 1)."""
    tau: float = key(1.0, "(0, 1]")
    """Target-network sync coefficient: 1 = hard copy every target_update_every steps, < 1 = Polyak every step."""
    double_q: bool = True
    """Select the bootstrap action with the online network (double DQN), learner and actor priorities."""
    dueling: bool = True
    """Dueling Q head, Q = V + A - mean(A) (Wang et al. 2016, Eq. 9)."""
    huber_delta: Optional[float] = key(None, "(0, inf)")
    """Huber loss threshold on the TD error; null: squared error 0.5 * td^2."""
    max_grad_norm: Optional[float] = key(10.0, "(0, inf)")
    """Global gradient-norm clip; null disables."""
    network: str = "mlp"
    """Torso: mlp (hidden_sizes, activation) | nature_cnn (Mnih et al. 2015) | impala_resnet (Espeholt et al. 2018)."""
    hidden_sizes: list[int] = key(factory=lambda: [128, 128], items="[1, inf)")
    """Hidden layer widths of the MLP torso."""
    activation: str = key("relu", choices=('relu', 'tanh', 'elu'))
    """Torso activation: relu | tanh | elu."""
    epsilon_base: float = key(0.4, "[0, 1]")
    """Actor epsilons eps_i = epsilon_base^(1 + epsilon_alpha * i / (N - 1)) over the N env copies of all workers."""
    epsilon_alpha: float = key(7.0, "[0, inf)")
    """Exponent spread of the actor epsilons (Horgan et al. 2018, Sec. 4.1: 7)."""
    per_alpha: float = key(0.6, "[0, 1]")
    """Priority exponent alpha (Horgan et al. 2018, App. D: 0.6)."""
    per_beta_start: float = key(0.4, "[0, 1]")
    """Importance-sampling exponent beta at the start (Horgan et al. 2018: 0.4)."""
    per_beta_end: float = key(1.0, "[0, 1]")
    """Importance-sampling exponent after per_beta_steps (Ape-X keeps it at per_beta_start; Schaul et al.: 1)."""
    per_beta_steps: int = key(10_000, "[1, inf)")
    """Batches drawn from a shard over which its beta moves linearly from start to end."""
    per_eps: float = key(1e-6, "(0, inf)")
    """Added to |TD error| so that no priority is 0."""
