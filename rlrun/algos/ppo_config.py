"""The config schema of PPO (``algo=ppo``, rlrun/algos/ppo.py): each key's default, declared range and
docstring, said once here. ``conf/algo/ppo.yaml`` selects it; the registry names it
(``registry.schema("algo", "ppo")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rlrun.algos.on_policy_config import OnPolicyKeys
from rlrun.algos.recurrent_config import RecurrentKeys
from rlrun.schema import key


@dataclass
class PPOConfig(RecurrentKeys, OnPolicyKeys):
    """PPO (Schulman et al. 2017) with the implementation details of CleanRL's ppo.py / Baselines' ppo2.

    The defaults are said here only, each with its source (conf/algo/ppo.yaml selects this schema): tuned for
    CartPole-v1 on 2 CPU cores from the rl-baselines3-zoo CartPole-v1 hyperparameters. Run it with several env copies
    (executor.num_envs=8): one rollout is rollout_steps x num_envs env steps.
    """

    name: str = "ppo"
    lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate at env step 0 (annealed linearly to 0 over total_env_steps when anneal_lr). Default: rl-zoo
    CartPole-v1: lin_0.001."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over total_env_steps (CleanRL's anneal_lr). Default: rl-zoo lin_
    schedule, CleanRL anneal_lr."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps of the LR schedule; the YAML default is the run's budget ${stop.env_steps}; null: constant LR."""
    gamma: float = key(0.98, "(0, 1]")
    """Discount factor per agent step. Default: rl-zoo CartPole-v1."""
    gae_lambda: float = key(0.8, "[0, 1]")
    """GAE lambda (Schulman et al. 2016): 1 = Monte-Carlo advantages, 0 = one-step TD errors. Default: rl-zoo
    CartPole-v1."""
    rollout_steps: int = key(32, "[1, inf)")
    """Agent steps per env copy per update (T); one update learns on T x executor.num_envs env steps. Default: rl-zoo
    CartPole-v1 n_steps."""
    num_epochs: int = key(20, "[1, inf)")
    """Passes over each rollout (epochs of minibatch gradient steps). Default: rl-zoo CartPole-v1 n_epochs (CleanRL
    4)."""
    minibatch_size: int = key(256, "[1, inf)")
    """Env steps (transitions) per gradient step. With algo.recurrent: whole env-copy sequences of rollout_steps,
    max(1, minibatch_size // rollout_steps) of them per gradient step (CleanRL ppo_atari_lstm's minibatches of
    envs). Default: rl-zoo CartPole-v1 batch_size."""
    clip_eps: float = key(0.2, "(0, inf)")
    """Clip range of the probability ratio, epsilon of Eq. 7 (dimensionless), at env step 0. Default: Schulman et al.
    2017 Table 3 / rl-zoo."""
    anneal_clip: bool = True
    """Anneal clip_eps linearly to 0 over total_env_steps, as the LR (Baselines ppo2 / rl-zoo lin_0.2). Default: rl-zoo
    CartPole-v1 lin_0.2."""
    vf_clip_eps: Optional[float] = key(None, "(0, inf)")
    """Clip range of the value update around the rollout's values, in units of return; null: unclipped. Default: null =
    unclipped, tuned here (CleanRL: 0.2)."""
    vf_coef: float = key(0.5, "[0, inf)")
    """Weight of the value loss in the total loss. Default: CleanRL / SB3."""
    ent_coef: float = key(0.0, "[0, inf)")
    """Weight of the entropy bonus (nats) in the total loss. Default: rl-zoo CartPole-v1 (CleanRL 0.01)."""
    normalize_advantage: bool = True
    """Normalise advantages to zero mean and unit std per minibatch. Default: CleanRL norm_adv / SB3."""
    max_grad_norm: Optional[float] = key(0.5, "(0, inf)")
    """Global gradient-norm clip per gradient step; null disables. Default: CleanRL / SB3."""
    adam_eps: float = key(1e-5, "(0, inf)")
    """Adam's epsilon (CleanRL / Baselines: 1e-5 instead of torch's 1e-8). Default: CleanRL / Baselines ppo2."""
    network: str = "auto"
    """Torso: auto (nature_cnn for uint8 images [C, H, W], else mlp) | mlp | nature_cnn | impala_resnet."""
    hidden_sizes: list[int] = key(factory=lambda: [64, 64], items="[1, inf)")
    """Hidden layer widths of an MLP torso. Default: CleanRL / SB3 MlpPolicy."""
    activation: str = key("tanh", choices=('relu', 'tanh', 'elu'))
    """MLP torso activation: relu | tanh | elu. Default: CleanRL / SB3 MlpPolicy."""
    shared_torso: bool = False
    """One torso for policy and value (Atari layout); false: the critic has its own torso of the same shape. Default:
    CleanRL ppo.py (Atari: shared)."""
    orthogonal_init: bool = True
    """Orthogonal init (gain sqrt 2 torso, 0.01 policy layer, 1 value layer), zero biases. Default: CleanRL layer_init
    / Baselines."""
    init_log_std: float = key(0.0, "any")
    """Initial log standard deviation of the Gaussian policy (natural log; Box actions only). Default: CleanRL / SB3."""
