"""Typed schemas for every config group, registered in Hydra's ConfigStore, and the validation of a composed config.

Step units, used exactly throughout rlrun (see README's glossary):
- *agent step*: one action chosen by the agent in one environment copy;
- *env step*: the same count, summed over all environment copies and workers (``stop.env_steps`` counts these);
- *frame*: an agent step times the environment's frame skip (1 for non-Atari environments);
- *gradient step*: one optimizer update.

Each YAML option of a group starts its defaults list with ``/schema/<group>/<schema name>@_here_``, so the
option is typed by its schema when composed. Hydra still lets ``+algo.extra=1`` add a key to a typed node, so
``validate()`` re-checks every group against its schema once the config is composed, before anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlrun.errors import ConfigError
from rlrun.schema import Declared, check_declared, key

# ---------------------------------------------------------------- algo


@dataclass
class DQNConfig(Declared):
    """Double DQN (van Hasselt et al., 2016) with a target network and uniform replay (Mnih et al., 2015).

    The defaults are conf/algo/dqn.yaml's (kept equal to it): tuned for CartPole-v1 on 2 CPU cores.
    """

    key_prefix: ClassVar[str] = "algo"

    name: str = "dqn"
    lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step."""
    batch_size: int = key(256, "[1, inf)")
    """Transitions per gradient step."""
    buffer_size: int = key(100_000, "[1, inf)")
    """Replay capacity, in transitions."""
    learning_starts: int = key(1_000, "[0, inf)")
    """Env steps collected with the initial policy before the first gradient step."""
    train_every: int = key(4, "[1, inf)")
    """Env steps (summed over env copies) per gradient step: replay ratio = batch_size / train_every."""
    rollout_steps: int = key(16, "[1, inf)")
    """Agent steps per env copy collected by one call of training_step() (its gradient steps follow it)."""
    target_update_every: int = key(500, "[1, inf)")
    """Gradient steps between hard target-network syncs (ignored when tau < 1)."""
    tau: float = key(0.02, "(0, 1]")
    """Target-network sync coefficient: 1 = hard copy every target_update_every steps, < 1 = Polyak every step."""
    double_q: bool = True
    """Select the bootstrap action with the online network (double DQN) instead of the target network."""
    huber_delta: Optional[float] = key(None, "(0, inf)")
    """Huber loss threshold on the TD error; null: squared error 0.5 * td^2."""
    max_grad_norm: Optional[float] = key(10.0, "(0, inf)")
    """Global gradient-norm clip; null disables."""
    hidden_sizes: list[int] = key(factory=lambda: [64, 64], items="[1, inf)")
    """Hidden layer widths of the MLP torso."""
    activation: str = key("relu", choices=('relu', 'tanh', 'elu'))
    """Torso activation: relu | tanh | elu."""
    epsilon_start: float = key(1.0, "[0, 1]")
    """Epsilon-greedy exploration at the start."""
    epsilon_end: float = key(0.02, "[0, 1]")
    """Epsilon-greedy exploration after the schedule."""
    epsilon_decay_steps: int = key(10_000, "[1, inf)")
    """Env steps over which epsilon decays linearly from start to end."""
    network: str = "mlp"
    """Torso: mlp (hidden_sizes, activation) | nature_cnn (Mnih et al. 2015) | impala_resnet (Espeholt et al. 2018)."""
    dueling: bool = False
    """Dueling Q head, Q = V + A - mean(A) (Wang et al. 2016, Eq. 9)."""
    prioritized_replay: bool = False
    """Proportional prioritised replay (Schaul et al. 2016) instead of uniform replay."""
    per_alpha: float = key(0.6, "[0, 1]")
    """Priority exponent alpha (Schaul et al. 2016, Table 3: 0.6 for the proportional variant)."""
    per_beta_start: float = key(0.4, "[0, 1]")
    """Importance-sampling exponent beta at the start, annealed linearly to 1 (Schaul et al. 2016: 0.4)."""
    per_beta_steps: int = key(100_000, "[1, inf)")
    """Gradient steps over which beta anneals to 1."""
    frames_per_record: Optional[float] = key(1.1, "(0, inf)")
    """Replay of stacked uint8 frames (Atari obs/next_obs): keep each distinct frame once, in a ring of this many
    frames per transition (a stream needs ~1.0-1.1; the oldest transitions are dropped when it needs more); null
    stores every stack whole (56 KB per Atari transition instead of ~8 KB). Other observations are unaffected."""
    n_step: int = key(1, "[1, inf)")
    """Steps per transition: n-step returns (Sutton 1988; Hessel et al. 2018 use 3); truncation bootstraps."""


@dataclass
class NormalizationKeys(Declared):
    """Observation normalisation and reward scaling (rlrun/components/normalizers.py): keys of the PPO family."""

    key_prefix: ClassVar[str] = "algo"

    normalize_obs: bool = False
    """Normalise observations by their running mean and std (float Box observations; CleanRL ppo_continuous_action /
    Baselines VecNormalize); the statistics are part of the network: checkpointed, sent to workers, exported."""
    obs_clip: float = key(10.0, "(0, inf)")
    """Clip normalised observations to [-obs_clip, obs_clip] (with normalize_obs)."""
    normalize_reward: bool = False
    """Divide rewards by the running std of the discounted return (per env copy, gamma = algo.gamma), as CleanRL /
    Baselines VecNormalize; episode returns in metrics stay raw."""
    reward_clip: float = key(10.0, "(0, inf)")
    """Clip scaled rewards to [-reward_clip, reward_clip] (with normalize_reward)."""


@dataclass
class PPOConfig(NormalizationKeys):
    """PPO (Schulman et al. 2017) with the implementation details of CleanRL's ppo.py / Baselines' ppo2.

    The defaults are conf/algo/ppo.yaml's (kept equal to it; each cited there): tuned for CartPole-v1 on 2 CPU
    cores from the rl-baselines3-zoo CartPole-v1 hyperparameters. Run it with several env copies
    (executor.num_envs=8): one rollout is rollout_steps x num_envs env steps.
    """

    name: str = "ppo"
    lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate at env step 0 (annealed linearly to 0 over total_env_steps when anneal_lr)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over total_env_steps (CleanRL's anneal_lr)."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps of the LR schedule; the YAML default is the run's budget ${stop.env_steps}; null: constant LR."""
    gamma: float = key(0.98, "(0, 1]")
    """Discount factor per agent step."""
    gae_lambda: float = key(0.8, "[0, 1]")
    """GAE lambda (Schulman et al. 2016): 1 = Monte-Carlo advantages, 0 = one-step TD errors."""
    rollout_steps: int = key(32, "[1, inf)")
    """Agent steps per env copy per update (T); one update learns on T x executor.num_envs env steps."""
    num_epochs: int = key(20, "[1, inf)")
    """Passes over each rollout (epochs of minibatch gradient steps)."""
    minibatch_size: int = key(256, "[1, inf)")
    """Env steps (transitions) per gradient step."""
    clip_eps: float = key(0.2, "(0, inf)")
    """Clip range of the probability ratio, epsilon of Eq. 7 (dimensionless), at env step 0."""
    anneal_clip: bool = True
    """Anneal clip_eps linearly to 0 over total_env_steps, as the LR (Baselines ppo2 / rl-zoo lin_0.2)."""
    vf_clip_eps: Optional[float] = key(None, "(0, inf)")
    """Clip range of the value update around the rollout's values, in units of return; null: unclipped."""
    vf_coef: float = key(0.5, "[0, inf)")
    """Weight of the value loss in the total loss."""
    ent_coef: float = key(0.0, "[0, inf)")
    """Weight of the entropy bonus (nats) in the total loss."""
    normalize_advantage: bool = True
    """Normalise advantages to zero mean and unit std per minibatch."""
    max_grad_norm: Optional[float] = key(0.5, "(0, inf)")
    """Global gradient-norm clip per gradient step; null disables."""
    adam_eps: float = key(1e-5, "(0, inf)")
    """Adam's epsilon (CleanRL / Baselines: 1e-5 instead of torch's 1e-8)."""
    network: str = "auto"
    """Torso: auto (nature_cnn for uint8 images [C, H, W], else mlp) | mlp | nature_cnn | impala_resnet."""
    hidden_sizes: list[int] = key(factory=lambda: [64, 64], items="[1, inf)")
    """Hidden layer widths of an MLP torso."""
    activation: str = key("tanh", choices=('relu', 'tanh', 'elu'))
    """MLP torso activation: relu | tanh | elu."""
    shared_torso: bool = False
    """One torso for policy and value (Atari layout); false: the critic has its own torso of the same shape."""
    orthogonal_init: bool = True
    """Orthogonal init (gain sqrt 2 torso, 0.01 policy layer, 1 value layer), zero biases."""
    init_log_std: float = key(0.0, "any")
    """Initial log standard deviation of the Gaussian policy (natural log; Box actions only)."""


@dataclass
class A2CConfig(NormalizationKeys):
    """Synchronous advantage actor-critic, A2C (Mnih et al. 2016, the synchronous variant of Algorithm S3 as in
    OpenAI Baselines / SB3): one gradient step per rollout of n steps of every env copy.

    The defaults are conf/algo/a2c.yaml's (kept equal to it; each cited there). Run it with several env copies
    (executor.num_envs=8).
    """

    name: str = "a2c"
    mode: str = key("sync", choices=('sync', 'async'))
    """sync: A2C, one gradient step on the rollouts of all workers | async: A3C, every worker computes the gradient
    on its own rollout and the learner applies each as it arrives (Mnih et al. 2016; RLlib Flow's A3C)."""
    lr: float = key(7e-4, "(0, inf)")
    """Learning rate at env step 0 (annealed linearly to 0 over total_env_steps when anneal_lr)."""
    optimizer: str = key("rmsprop", choices=('rmsprop', 'adam'))
    """rmsprop (Mnih et al. 2016) | adam."""
    rmsprop_alpha: float = key(0.99, "[0, 1)")
    """RMSProp smoothing constant (rmsprop only)."""
    optimizer_eps: float = key(1e-5, "(0, inf)")
    """The optimizer's epsilon (Baselines / SB3: 1e-5)."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over total_env_steps."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps of the LR schedule; the YAML default is the run's budget ${stop.env_steps}; null: constant LR."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step."""
    gae_lambda: float = key(1.0, "[0, 1]")
    """GAE lambda: 1 = n-step returns minus V (the paper's advantage), < 1 = GAE."""
    rollout_steps: int = key(5, "[1, inf)")
    """Agent steps per env copy per gradient step (the paper's t_max)."""
    vf_coef: float = key(0.5, "[0, inf)")
    """Weight of the value loss in the total loss."""
    ent_coef: float = key(0.0, "[0, inf)")
    """Weight of the entropy bonus (nats) in the total loss."""
    normalize_advantage: bool = False
    """Normalise advantages to zero mean and unit std per rollout."""
    max_grad_norm: Optional[float] = key(0.5, "(0, inf)")
    """Global gradient-norm clip per gradient step; null disables."""
    network: str = "auto"
    """Torso: auto (nature_cnn for uint8 images [C, H, W], else mlp) | mlp | nature_cnn | impala_resnet."""
    hidden_sizes: list[int] = key(factory=lambda: [64, 64], items="[1, inf)")
    """Hidden layer widths of an MLP torso."""
    activation: str = key("tanh", choices=('relu', 'tanh', 'elu'))
    """MLP torso activation: relu | tanh | elu."""
    shared_torso: bool = False
    """One torso for policy and value (Atari layout); false: the critic has its own torso of the same shape."""
    orthogonal_init: bool = True
    """Orthogonal init (gain sqrt 2 torso, 0.01 policy layer, 1 value layer), zero biases."""
    init_log_std: float = key(0.0, "any")
    """Initial log standard deviation of the Gaussian policy (natural log; Box actions only)."""


@dataclass
class TRPOConfig(NormalizationKeys):
    """TRPO (Schulman et al. 2015, "Trust Region Policy Optimization"): one natural-gradient step of the policy
    under a KL trust region with a backtracking line search per rollout, and epochs of Adam minibatch steps on a
    separate value network (as SB3-contrib's TRPO and Spinning Up).

    The defaults are conf/algo/trpo.yaml's (kept equal to it; each cited there): rl-baselines3-zoo's
    hyperparams/trpo.yml CartPole-v1 entry. Run it with several env copies (executor.num_envs=8).
    """

    name: str = "trpo"
    max_kl: float = key(0.01, "(0, inf)")
    """Trust-region radius delta: largest mean KL(pi_old || pi_new) per update, in nats."""
    cg_iters: int = key(10, "[1, inf)")
    """Conjugate-gradient iterations solving F x = g for the natural-gradient direction."""
    cg_damping: float = key(1e-3, "[0, inf)")
    """Damping added to the Fisher matrix, F + cg_damping * I (dimensionless)."""
    line_search_max_backtracks: int = key(10, "[1, inf)")
    """Step fractions 1, r, r^2, ... tried by the line search before the update is given up (policy unchanged)."""
    line_search_backtrack_ratio: float = key(0.8, "(0, 1)")
    """Factor r the step fraction shrinks by per line-search try, in (0, 1)."""
    line_search_accept_ratio: float = key(0.1, "[0, 1)")
    """Share of the linearly predicted surrogate improvement a step must realise to be accepted."""
    normalize_advantage: bool = True
    """Normalise advantages to zero mean and unit std over each rollout."""
    lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate of the value function at env step 0 (the policy moves by the trust-region step)."""
    anneal_lr: bool = False
    """Anneal the value function's learning rate linearly to 0 over total_env_steps."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps of the LR schedule; the YAML default is the run's budget ${stop.env_steps}; null: constant LR."""
    adam_eps: float = key(1e-5, "(0, inf)")
    """Adam's epsilon of the value optimizer."""
    vf_epochs: int = key(20, "[1, inf)")
    """Passes of the value function over each rollout (epochs of minibatch Adam steps)."""
    vf_minibatch_size: int = key(512, "[1, inf)")
    """Env steps (transitions) per value-function gradient step."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step."""
    gae_lambda: float = key(0.98, "[0, 1]")
    """GAE lambda (Schulman et al. 2016): 1 = Monte-Carlo advantages, 0 = one-step TD errors."""
    rollout_steps: int = key(128, "[1, inf)")
    """Agent steps per env copy per update (T); one update learns on T x executor.num_envs env steps."""
    network: str = "auto"
    """Torso of the actor and of the critic (each its own): auto (nature_cnn for uint8 images [C, H, W], else mlp) |
    mlp | nature_cnn | impala_resnet."""
    hidden_sizes: list[int] = key(factory=lambda: [64, 64], items="[1, inf)")
    """Hidden layer widths of an MLP torso (actor and critic alike)."""
    activation: str = key("tanh", choices=('relu', 'tanh', 'elu'))
    """MLP torso activation: relu | tanh | elu."""
    orthogonal_init: bool = True
    """Orthogonal init (gain sqrt 2 torso, 0.01 policy layer, 1 value layer), zero biases."""
    init_log_std: float = key(0.0, "any")
    """Initial log standard deviation of the Gaussian policy (natural log; Box actions only)."""


@dataclass
class SACConfig(Declared):
    """Soft actor-critic (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications"): a tanh-squashed
    Gaussian policy, twin Q-networks with Polyak-averaged targets, a learned temperature. Box actions only.

    The defaults are conf/algo/sac.yaml's (kept equal to it; each cited there): the paper's Table 1 and
    rl-baselines3-zoo's Pendulum-v1 entry, with the network and batch made smaller to learn Pendulum-v1 quickly on
    2 CPU cores.
    """

    key_prefix: ClassVar[str] = "algo"

    name: str = "sac"
    actor_lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate of the policy."""
    critic_lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate of the twin Q-networks."""
    alpha_lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate of log(alpha), the log-temperature (when learn_alpha)."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step."""
    tau: float = key(0.005, "(0, 1]")
    """Polyak coefficient of the target Q-networks per gradient step: target <- (1 - tau) target + tau online."""
    batch_size: int = key(256, "[1, inf)")
    """Transitions per gradient step."""
    buffer_size: int = key(100_000, "[1, inf)")
    """Replay capacity, in transitions."""
    learning_starts: int = key(1_000, "[0, inf)")
    """Env steps acted with uniform random actions (in the Box bounds) before the policy acts and learning starts."""
    train_every: int = key(1, "[1, inf)")
    """Env steps (summed over env copies) per round of gradient_steps gradient steps."""
    gradient_steps: int = key(1, "[1, inf)")
    """Gradient steps per round (each: one critic, one actor and one temperature update, one target sync)."""
    rollout_steps: int = key(1, "[1, inf)")
    """Agent steps per env copy collected by one call of training_step() (its gradient steps follow it)."""
    hidden_sizes: list[int] = key(factory=lambda: [256, 256], items="[1, inf)")
    """Hidden layer widths of the policy's and of each Q-network's MLP."""
    activation: str = key("relu", choices=('relu', 'tanh', 'elu'))
    """MLP activation: relu | tanh | elu."""
    learn_alpha: bool = True
    """Learn the temperature alpha towards target_entropy (Haarnoja et al. 2018b, Sec. 5); false: alpha = init_alpha."""
    init_alpha: float = key(1.0, "(0, inf)")
    """Temperature alpha at the start (the fixed one when learn_alpha is false)."""
    target_entropy: Optional[float] = key(None, "any")
    """Entropy target of the temperature loss, in nats of the [-1, 1]-normalised action; null: -|A| (dim of A)."""
    log_std_min: float = key(-5.0, "any")
    """Lower bound of the policy's log standard deviation (before the tanh squash)."""
    log_std_max: float = key(2.0, "any")
    """Upper bound of the policy's log standard deviation."""
    max_grad_norm: Optional[float] = key(None, "(0, inf)")
    """Global gradient-norm clip of each of the three updates; null disables."""


@dataclass
class IMPALAConfig(Declared):
    """IMPALA (Espeholt et al. 2018): asynchronous actors, a V-trace actor-critic learner (rlrun/algos/impala.py).

    The defaults are conf/algo/impala.yaml's (kept equal to it; each cited there): RLlib's IMPALA defaults and its
    CartPole tuned example, tuned where marked. The Atari values of the paper are in conf/algo_env/impala_atari.yaml.
    """

    key_prefix: ClassVar[str] = "algo"

    name: str = "impala"
    learner: str = key("sync", choices=('sync', 'thread'))
    """sync: one learner update per training step, in it (deterministic on the local executor) | thread: the
    learner on its own thread fed by a bounded queue of unroll batches (IMPALA/TorchBeast: actors keep acting while
    it learns; the Atari presets)."""
    learner_queue: int = key(2, "[1, inf)")
    """Thread mode: learner batches queued (bounded: when full the plan waits, IMPALA's backpressure)."""
    lr: float = key(5e-4, "(0, inf)")
    """Learning rate at env step 0 (annealed linearly to 0 over total_env_steps when anneal_lr)."""
    optimizer: str = key("adam", choices=('adam', 'rmsprop'))
    """adam | rmsprop (Espeholt et al. 2018)."""
    rmsprop_alpha: float = key(0.99, "[0, 1)")
    """RMSProp smoothing constant (the paper's "decay"; rmsprop only)."""
    rmsprop_momentum: float = key(0.0, "[0, 1)")
    """RMSProp momentum (rmsprop only)."""
    optimizer_eps: float = key(1e-8, "(0, inf)")
    """The optimizer's epsilon (paper's RMSProp: 0.01)."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over total_env_steps (the paper's Atari schedule)."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps of the LR schedule; the YAML default is the run's budget ${stop.env_steps}; null: constant LR."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step."""
    unroll_length: int = key(20, "[1, inf)")
    """Agent steps per env copy in one unroll (T); a worker's sample is T x its env copies."""
    batch_size: int = key(8, "[1, inf)")
    """Env-copy unrolls per learner update (B; rounded up to whole worker samples of num_envs unrolls each)."""
    vf_coef: float = key(0.5, "[0, inf)")
    """Weight of the baseline (value) loss 0.5 (v_s - V)^2."""
    ent_coef: float = key(0.01, "[0, inf)")
    """Weight of the entropy bonus (nats)."""
    clip_rho_threshold: Optional[float] = key(1.0, "(0, inf)")
    """V-trace rho-bar: clip of the importance weight in the value targets; null: no clipping."""
    clip_pg_rho_threshold: Optional[float] = key(1.0, "(0, inf)")
    """V-trace rho-bar of the policy-gradient advantage (IMPALA only; APPO's ratio replaces it); null: no clip."""
    loss_reduction: str = key("mean", choices=('mean', 'sum'))
    """mean | sum of the loss over the T x B items (the paper's and TorchBeast's code sum)."""
    max_grad_norm: Optional[float] = key(40.0, "(0, inf)")
    """Global gradient-norm clip per gradient step; null disables."""
    network: str = "auto"
    """Torso: auto (nature_cnn for uint8 images [C, H, W], else mlp) | mlp | nature_cnn | impala_resnet."""
    hidden_sizes: list[int] = key(factory=lambda: [256, 256], items="[1, inf)")
    """Hidden layer widths of an MLP torso (shared by policy and value)."""
    activation: str = key("tanh", choices=('relu', 'tanh', 'elu'))
    """MLP torso activation: relu | tanh | elu."""
    use_lstm: bool = False
    """An LSTM core between torso and head (per-env-copy recurrent state while acting, unrolled by the learner)."""
    lstm_size: int = key(256, "[1, inf)")
    """Units of the LSTM core (use_lstm only)."""
    shared_torso: bool = False
    """One torso (and LSTM core) for policy and value (IMPALA's layout); false: the critic has its own."""
    orthogonal_init: bool = True
    """Orthogonal init (gain sqrt 2 torso, 0.01 policy layer, 1 value layer), zero biases."""


@dataclass
class APPOConfig(IMPALAConfig):
    """APPO: IMPALA's plan with PPO's clipped surrogate on V-trace advantages (RLlib's APPO; rlrun/algos/appo.py).

    Every IMPALA key, plus the surrogate's; defaults are conf/algo/appo.yaml's (kept equal to it; cited there).
    """

    name: str = "appo"
    clip_eps: float = key(0.4, "(0, inf)")
    """Clip range of the probability ratio to the behaviour policy (dimensionless; RLlib APPO clip_param)."""
    num_epochs: int = key(4, "[1, inf)")
    """Gradient steps on each learner batch (RLlib's num_sgd_iter)."""
    use_kl_loss: bool = False
    """Add kl_coef * KL(behaviour || current policy) to the loss."""
    kl_coef: float = key(1.0, "[0, inf)")
    """Weight of the KL penalty (use_kl_loss only)."""


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


# ---------------------------------------------------------------- env


@dataclass
class GymEnvConfig(Declared):
    key_prefix: ClassVar[str] = "env"

    name: str = "gym"
    id: str = MISSING
    """A registered gymnasium id, e.g. CartPole-v1."""
    max_episode_steps: Optional[int] = key(None, "[1, inf)")
    """Override the id's time limit (agent steps); null keeps the registered one."""
    frame_skip: int = key(1, "[1, inf)")
    """Frames per agent step, for the frames/s figure (1 for non-Atari environments)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for gymnasium.make."""
    solved_return: Optional[float] = key(None, "any")
    """The env's "solved" mean return (CartPole-v1: 475); the default for stop.episode_return_mean."""


@dataclass
class AtariEnvConfig(Declared):
    """An Atari 2600 game of the ALE (ale-py ships the ROMs) under the DeepMind/IMPALA protocol by default
    (Mnih et al. 2015, Methods; Espeholt et al. 2018); rlrun/envs/atari.py builds it, protocol.json records it."""

    key_prefix: ClassVar[str] = "env"

    name: str = "atari"
    game: str = MISSING
    """ALE game as in its gymnasium id ALE/<Game>-v5: Pong, Breakout, MsPacman (ms_pacman is accepted too)."""
    id: str = "${.game}"
    """The env's name in run names, summaries and tags (default: the game); the gymnasium id is ALE/<Game>-v5."""
    backend: str = key("gymnasium", choices=('gymnasium', 'envpool'))
    """gymnasium: rlrun's wrappers on ale-py, vectorised by gymnasium (sync/async) | envpool: C++ pool (extra)."""
    envpool_threads: int = key(0, "[0, inf)")
    """envpool backend only: C++ threads stepping a worker's env copies; 0 = one per CPU core, at most num_envs."""
    frame_skip: int = key(4, "[1, inf)")
    """Emulator frames per agent step (the action is repeated); frames = agent steps x frame_skip."""
    max_pool: bool = True
    """Observe the pixel-wise max of the last two frames of a skip (removes Atari sprite flicker)."""
    noop_max: int = key(30, "[0, inf)")
    """At a game's reset, take a uniform random 1..noop_max no-op frames (0 disables), from the env's seeded RNG."""
    screen_size: int = key(84, "[1, inf)")
    """Observed frame height and width, pixels (resized with area interpolation)."""
    grayscale: bool = True
    """Grayscale frames (1 channel) instead of RGB (3 channels per stacked frame)."""
    frame_stack: int = key(4, "[1, inf)")
    """Last frames stacked channel-first: observation [frame_stack x channels, screen_size, screen_size] uint8."""
    terminal_on_life_loss: bool = True
    """Training episodes end when a life is lost (the game itself goes on); the game score still spans all lives."""
    clip_rewards: bool = True
    """Training reward = sign(game reward); the game score stays unclipped."""
    repeat_action_probability: float = key(0.0, "[0, 1]")
    """Sticky actions: chance per frame that the emulator repeats the previous action (Machado et al. use 0.25)."""
    full_action_space: bool = False
    """All 18 joystick actions instead of the game's minimal set."""
    max_episode_frames: Optional[int] = key(108_000, "[1, inf)")
    """Game cut-off in frames (skipped and no-op frames count): 108k = 30 min at 60 Hz = 27k agent steps; null: none."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for gymnasium.make("ALE/<Game>-v5", ...), e.g. mode, difficulty, render_mode."""


# ---------------------------------------------------------------- device


@dataclass
class DeviceConfig(Declared):
    key_prefix: ClassVar[str] = "device"

    name: str = "cpu"
    """cpu | cuda | auto (CUDA if present, else CPU) | replicas (synchronous data-parallel learner update)."""
    torch_threads: int = key(1, "[1, inf)")
    """torch intra-op threads in this process; 1 is fastest when env workers share the cores (MEASURED.md)."""
    map: dict[str, str] = field(default_factory=dict)
    """Per-component placement, component name (or dotted path, e.g. q.torso) -> torch device, e.g.
    {memory: cpu, q: cuda}; applied after the agent is built; unmapped components stay on their parent's device."""
    num_replicas: int = key(0, "[0, inf)")
    """device=replicas: replicas the update batch is split across (gradients averaged, one optimizer step);
    0 = one per visible CUDA device."""
    compile: bool = False
    """torch.compile the agent's networks (act and update paths); falls back to eager with a warning."""
    precision: str = key("fp32", choices=('fp32', 'bf16'))
    """fp32 | bf16 (bfloat16 autocast for the update; CUDA only)."""


# ---------------------------------------------------------------- executor


@dataclass
class LocalExecutorConfig(Declared):
    key_prefix: ClassVar[str] = "executor"

    name: str = "local"
    num_envs: int = key(1, "[1, inf)")
    """Environment copies stepped together by each in-process worker."""
    num_workers: int = key(1, "[1, inf)")
    """In-process rollout workers, sampled one after another (as many as executor=ray's actors: same seeds, same
    per-worker policies, for debugging multi-worker plans such as Ape-X); worker w's copy i is seeded
    seed + w * num_envs + i."""
    vector_mode: str = key("sync", choices=('sync', 'async', 'serial', 'pipelined'))
    """sync: all env copies in this process | async: one subprocess per env copy (gymnasium AsyncVectorEnv) |
    serial: sync env copies and the policy called on one observation at a time (batch 1), for debugging |
    pipelined: the copies in two groups, one stepping (envpool threads or subprocesses) while the policy acts on the
    other (needs >= 2 copies; the fast setting for Atari with env.backend=envpool)."""


@dataclass
class RayExecutorConfig(Declared):
    """Rollout workers as Ray actors, the learner in the driver (rlrun/execution/ray_executor.py)."""

    key_prefix: ClassVar[str] = "executor"

    name: str = "ray"
    num_workers: int = key(2, "[1, inf)")
    """Rollout worker actors (processes)."""
    num_envs_per_worker: int = key(1, "[1, inf)")
    """Env copies per worker; worker w's copy i is seeded with seed + w * num_envs_per_worker + i."""
    vector_mode: str = key("sync", choices=('sync', 'async', 'serial', 'pipelined'))
    """How a worker steps its env copies: sync | async (a subprocess per copy) | serial (batch-1 inference) |
    pipelined (two groups of copies: one steps while the policy acts on the other; >= 2 copies)."""
    address: Optional[str] = None
    """null: start a local Ray cluster (shut down at the end) | auto: the cluster `ray start` made on this machine |
    ray://host:10001: a remote cluster through Ray Client."""
    num_cpus: Optional[int] = key(None, "[1, inf)")
    """CPUs of the local cluster this executor starts (null: every core); ignored with an address."""
    object_store_memory: Optional[int] = key(None, "[1, inf)")
    """Bytes of Ray's object store of the local cluster this executor starts (null: Ray's default, 30% of RAM)."""
    cpus_per_worker: float = key(1.0, "[0, inf)")
    """CPUs Ray reserves for each worker actor (num_workers x this must fit in the cluster)."""
    worker_niceness: int = key(0, "[-20, 19]")
    """Unix nice value of the Ray worker processes of a local cluster this executor starts (Ray's own default, 15,
    puts the rollout workers below every other process of the machine); ignored with an address."""
    worker_device: str = "cpu"
    """Device the workers act on (the learner's is device.name)."""
    worker_torch_threads: int = key(1, "[1, inf)")
    """torch intra-op threads per worker process (1: workers share the cores; MEASURED.md)."""
    max_in_flight_per_worker: int = key(2, "[1, inf)")
    """Async sampling: sample requests pending per worker at most (bounds the object store's rollouts)."""
    max_worker_restarts: int = key(10, "[0, inf)")
    """A dead worker is replaced by a new one this many times per run at most; one more death ends the run."""
    sync_weights_on_sample: bool = True
    """A synchronous sample() first sends the learner's weights to the workers unless the plan synced since the
    previous sample (so a plan written for executor=local acts with current weights)."""
    cpus_per_replay_shard: float = key(0.0, "[0, inf)")
    """CPUs Ray reserves for each replay shard actor (algo=apex); 0: shards share the workers' cores."""
    replay_max_in_flight: int = key(2, "[1, inf)")
    """Replay sample requests pending over all shards at most (bounded prefetch for the learner; algo=apex)."""
    replay_max_pending_ops: int = key(4, "[1, inf)")
    """Adds and priority updates not yet finished per replay shard at most; the driver waits beyond (algo=apex)."""
    max_replay_shard_restarts: int = key(10, "[0, inf)")
    """A dead replay shard is replaced by an empty one this many times per run at most; one more ends the run."""
    observation_transfer: str = key("shared_memory", choices=('shared_memory', 'object_store'))
    """How rollout observations reach the driver: shared_memory (a segment the driver lends to each request, for
    workers on the driver's node; others use the object store) | object_store (Ray's object store always)."""
    preload_modules: list[str] = field(default_factory=lambda: ["torch", "rlrun.execution.ray_executor"])
    """Modules the workers of a local cluster this executor starts import before they get work (Ray's
    preload_python_modules): Ray starts workers during ray.init, so these imports overlap the driver's own set-up
    instead of delaying the first sample. [] turns it off; ignored with an address."""


# ---------------------------------------------------------------- logger


@dataclass
class TensorBoardConfig(Declared):
    key_prefix: ClassVar[str] = "logger.tensorboard"

    enabled: bool = True
    flush_secs: int = key(10, "[1, inf)")


@dataclass
class MLflowConfig(Declared):
    key_prefix: ClassVar[str] = "logger.mlflow"

    enabled: bool = True
    tracking_uri: Optional[str] = None
    """null: a local sqlite store, sqlite:///<working directory>/mlflow.db (absolute). Any MLflow URI otherwise."""
    experiment: str = "rlrun"
    flush_interval_s: float = key(10.0, "[0, inf)")
    """Metrics are buffered and sent in one batch at most this often (and at the end)."""
    probe_timeout_s: float = key(3.0, "(0, inf)")
    """Seconds to wait for an http(s) tracking server to answer before using the local fallback store."""
    parent_run_id: Optional[str] = None
    """Make this run a child of that MLflow run (tag mlflow.parentRunId); a sweep sets it for each job."""
    run_id: Optional[str] = None
    """Log to this existing MLflow run instead of creating one (a resumed run continues its MLflow run)."""
    tags: dict[str, str] = field(default_factory=dict)
    """Extra MLflow tags for the run; a sweep sets rlrun.group, rlrun.sweep_dir, rlrun.job_num, rlrun.overrides."""


@dataclass
class ConsoleConfig(Declared):
    key_prefix: ClassVar[str] = "logger.console"

    enabled: bool = True
    interval_s: float = key(5.0, "(0, inf)")
    """Seconds between plain progress lines when the output is not a terminal."""


@dataclass
class LoggerConfig(Declared):
    key_prefix: ClassVar[str] = "logger"

    name: str = "default"
    tensorboard: TensorBoardConfig = field(default_factory=TensorBoardConfig)
    mlflow: MLflowConfig = field(default_factory=MLflowConfig)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    report_interval_s: float = key(1.0, "[0, inf)")
    """Seconds between metric reports to every sink (0: after every training_step); the last one is always sent."""


# ---------------------------------------------------------------- run


@dataclass
class StopConfig(Declared):
    """The run stops at whichever condition comes first; null disables a condition."""

    key_prefix: ClassVar[str] = "stop"

    env_steps: Optional[int] = key(100_000, "[1, inf)")
    wall_time_s: Optional[float] = key(None, "(0, inf)")
    episode_return_mean: Optional[float] = key("${oc.select:env.solved_return,null}", "any")  # type: ignore[assignment]
    """Stop once the mean return of the last `return_window` episodes reaches this; by default the env's
    `solved_return` (null where it has none)."""


@dataclass
class CheckpointConfig(Declared):
    key_prefix: ClassVar[str] = "checkpoint"

    interval_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps between checkpoints; null: only the final one."""
    interval_minutes: Optional[float] = key(None, "(0, inf)")
    """Wall-clock minutes between checkpoints (whichever interval comes first); null: no time-based checkpoints."""
    at_end: bool = True
    """Write a checkpoint when the run ends (not after an error: the last good one is kept)."""
    replay: bool = True
    """Include the replay memory (can be large); false: a resumed run starts with an empty memory (not exact)."""
    keep_last: int = key(1, "[1, inf)")
    """Checkpoints kept: latest.pt always; with N > 1 also the last N - 1 before it as step-<env steps>.pt."""
    keep_best: bool = False
    """Keep the checkpoint of the best periodic evaluation (eval.interval_env_steps) as best.pt."""


@dataclass
class EvalConfig(Declared):
    """Greedy evaluation during training (rlrun/periodic_eval.py): eval/return_mean, eval/return_std."""

    key_prefix: ClassVar[str] = "eval"

    interval_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps between evaluations (at multiples of it); null: no evaluation during training."""
    episodes: int = key(10, "[1, inf)")
    """Greedy episodes per evaluation, on an env copy of its own."""
    seed: Optional[int] = key(None, "[0, inf)")
    """Seed of the first episode of every evaluation; null: the run seed + 1,000,003."""
    background: Optional[bool] = None
    """Play evaluations on a driver thread while training goes on; null: true for executor=ray, false for local
    (inline: deterministic)."""


@dataclass
class ExportConfig(Declared):
    key_prefix: ClassVar[str] = "export"

    formats: list[str] = key(factory=lambda: ["torchscript"], choices=('torchscript', 'onnx'))
    """Export the greedy acting policy at the end of a run to <run dir>/export/ in these formats (torchscript ->
    policy.pt, onnx -> policy.onnx, needs the export extra); [] disables."""


@dataclass
class SweepConfig(Declared):
    """Settings of a sweep (``rlrun -m``); ignored by a single run. See rlrun/sweep.py."""

    key_prefix: ClassVar[str] = "sweep"

    resume: Optional[str] = None
    """A sweep directory to resume (rlrun -m <same overrides> sweep.resume=DIR): its completed jobs are skipped."""


@dataclass
class RunConfig(Declared):
    key_prefix: ClassVar[str] = ""

    algo: Any = MISSING
    env: Any = MISSING
    device: Any = MISSING
    executor: Any = MISSING
    logger: Any = MISSING
    seed: int = key(0, "[0, inf)")
    run_name: str = "${algo.name}-${env.id}-seed${seed}"
    stop: StopConfig = field(default_factory=StopConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    return_window: int = key(20, "[1, inf)")
    """Episodes in the `episode/return_mean` figure."""
    sweep: SweepConfig = field(default_factory=SweepConfig)
    resume: Optional[str] = None
    """A run directory (or checkpoint file) to continue from its last checkpoint: rlrun resume=<run dir>."""
    export: ExportConfig = field(default_factory=ExportConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)


GROUPS = ("algo", "env", "device", "executor", "logger")

# The schema of each built-in option; plugins add theirs through the registry (entry.schema).
_BUILTIN_SCHEMAS = {
    ("algo", "dqn"): DQNConfig,
    ("algo", "ppo"): PPOConfig,
    ("algo", "a2c"): A2CConfig,
    ("algo", "impala"): IMPALAConfig,
    ("algo", "appo"): APPOConfig,
    ("algo", "sac"): SACConfig,
    ("algo", "trpo"): TRPOConfig,
    ("algo", "apex"): ApexConfig,
    ("env", "gym"): GymEnvConfig,
    ("device", "device"): DeviceConfig,
    ("executor", "local"): LocalExecutorConfig,
    ("executor", "ray"): RayExecutorConfig,
    ("logger", "logger"): LoggerConfig,
}


def store_schemas() -> None:
    """Put every schema into Hydra's ConfigStore (group ``schema/<group>``) and the run schema as ``base_config``."""
    from rlrun.registry import registry

    cs = ConfigStore.instance()
    cs.store(name="base_config", node=RunConfig)
    for (group, name), schema in _BUILTIN_SCHEMAS.items():
        cs.store(group=f"schema/{group}", name=name, node=schema)
    for group in ("algo", "env", "executor"):
        for name in registry.names(group):
            if (group, name) in _BUILTIN_SCHEMAS:
                continue
            schema = registry.schema(group, name)
            if schema is not None:
                cs.store(group=f"schema/{group}", name=name, node=schema)


def schema_for(group: str, node: DictConfig) -> Any:
    """The schema class that a composed group node must satisfy."""
    from rlrun.registry import RegistryError, registry

    if group == "device":
        return DeviceConfig
    if group == "logger":
        return LoggerConfig
    name = node.get("name") if isinstance(node, DictConfig) else None
    if name is None:
        raise ConfigError(f"{group}: the config has no 'name' key, so rlrun cannot tell which {group} to build. "
                          f"Pick one with {group}=<option>.")
    try:
        return registry.schema(group, name)
    except RegistryError as e:
        raise ConfigError(f"{group}.name: {e}") from None


def validate(cfg: DictConfig) -> DictConfig:
    """Check every group against its schema (types, unknown keys, the declared ranges and choices of
    :mod:`rlrun.schema`) and the run settings that involve several keys; return cfg.

    Raises ConfigError naming the key, the bad value and what it may be.
    """
    for group in GROUPS:
        node = cfg.get(group)
        if not isinstance(node, DictConfig):
            raise ConfigError(f"{group}: missing; choose one with {group}=<option>.")
        schema = schema_for(group, node)
        _check_against(schema, node, prefix=group)
    top = {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k not in GROUPS and k != "hydra"}
    _check_against(RunConfig, OmegaConf.create(top), prefix="", skip=GROUPS)
    stop = cfg.stop
    if stop.env_steps is None and stop.wall_time_s is None and stop.episode_return_mean is None:
        raise ConfigError("stop: every stop condition is null, so the run would never end. "
                          "Set at least one of stop.env_steps, stop.wall_time_s, stop.episode_return_mean.")
    if cfg.checkpoint.keep_best and cfg.eval.interval_env_steps is None:
        raise ConfigError("checkpoint.keep_best=true needs evaluations to rank checkpoints by: set "
                          "eval.interval_env_steps (e.g. eval.interval_env_steps=10000).")
    return cfg


def _check_against(schema: Any, node: DictConfig, prefix: str, skip: tuple[str, ...] = ()) -> None:
    from dataclasses import fields

    valid = [f.name for f in fields(schema)]
    for name in node.keys():
        if name not in valid and name not in skip:
            where = f"{prefix}.{name}" if prefix else str(name)
            raise ConfigError(f"{where}: unknown key for {schema.__name__}. Valid keys: {', '.join(valid)}.")
    try:
        typed = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.to_container(node, resolve=True))
    except OmegaConfBaseException as e:
        full = getattr(e, "full_key", "") or ""
        where = f"{prefix}.{full}" if prefix and full else (prefix or full)
        raise ConfigError(f"{where}: {_first_line(e)}") from None
    # the typed values (a float key given as 1 is 1.0 here): ranges and choices as the schema declares them
    values = OmegaConf.to_container(typed, resolve=True)
    check_declared(schema, {k: v for k, v in values.items() if k in node and k not in skip}, prefix)


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
