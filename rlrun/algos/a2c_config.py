"""The config schema of A2C/A3C (``algo=a2c``, rlrun/algos/a2c.py): each key's default, declared range and
docstring, said once here. ``conf/algo/a2c.yaml`` selects it; the registry names it
(``registry.schema("algo", "a2c")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rlrun.algos.on_policy_config import OnPolicyKeys
from rlrun.algos.recurrent_config import RecurrentKeys
from rlrun.schema import key


@dataclass
class A2CConfig(RecurrentKeys, OnPolicyKeys):
    """Synchronous advantage actor-critic, A2C (Mnih et al. 2016, the synchronous variant of Algorithm S3 as in
    OpenAI Baselines / SB3): one gradient step per rollout of n steps of every env copy.

    The defaults are said here only, each with its source (conf/algo/a2c.yaml selects this schema). Run it with
    several env copies (executor.num_envs=8).
    """

    name: str = "a2c"
    mode: str = key("sync", choices=('sync', 'async'))
    """sync: A2C, one gradient step on the rollouts of all workers | async: A3C, every worker computes the gradient on
    its own rollout and the learner applies each as it arrives (Mnih et al. 2016; RLlib Flow's A3C). Default: sync,
    as Baselines/SB3."""
    lr: float = key(7e-4, "(0, inf)")
    """Learning rate at env step 0 (annealed linearly to 0 over total_env_steps when anneal_lr). Default: SB3 A2C /
    Baselines a2c."""
    optimizer: str = key("rmsprop", choices=('rmsprop', 'adam'))
    """rmsprop (Mnih et al. 2016) | adam. Default: Mnih et al. 2016 (shared RMSProp), SB3 A2C."""
    rmsprop_alpha: float = key(0.99, "[0, 1)")
    """RMSProp smoothing constant (rmsprop only). Default: SB3 A2C / Baselines a2c."""
    optimizer_eps: float = key(1e-5, "(0, inf)")
    """The optimizer's epsilon (Baselines / SB3: 1e-5). Default: SB3 A2C / Baselines a2c."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over total_env_steps. Default: SB3 A2C: constant."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps of the LR schedule; the YAML default is the run's budget ${stop.env_steps}; null: constant LR."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: SB3 A2C."""
    gae_lambda: float = key(1.0, "[0, 1]")
    """GAE lambda: 1 = n-step returns minus V (the paper's advantage), < 1 = GAE. Default: SB3 A2C."""
    rollout_steps: int = key(5, "[1, inf)")
    """Agent steps per env copy per gradient step (the paper's t_max). Default: Mnih et al. 2016 / SB3 A2C."""
    vf_coef: float = key(0.5, "[0, inf)")
    """Weight of the value loss in the total loss. Default: SB3 A2C / Baselines a2c."""
    ent_coef: float = key(0.0, "[0, inf)")
    """Weight of the entropy bonus (nats) in the total loss. Default: rl-zoo CartPole-v1 (Mnih et al. 2016: 0.01)."""
    normalize_advantage: bool = False
    """Normalise advantages to zero mean and unit std per rollout. Default: SB3 A2C: off."""
    max_grad_norm: Optional[float] = key(0.5, "(0, inf)")
    """Global gradient-norm clip per gradient step; null disables. Default: SB3 A2C / Baselines a2c."""
    network: str = "auto"
    """Torso: auto (nature_cnn for uint8 images [C, H, W], else mlp) | mlp | nature_cnn | impala_resnet."""
    hidden_sizes: list[int] = key(factory=lambda: [64, 64], items="[1, inf)")
    """Hidden layer widths of an MLP torso. Default: SB3 MlpPolicy."""
    activation: str = key("tanh", choices=('relu', 'tanh', 'elu'))
    """MLP torso activation: relu | tanh | elu. Default: SB3 MlpPolicy."""
    shared_torso: bool = False
    """One torso for policy and value (Atari layout); false: the critic has its own torso of the same shape. Default:
    SB3 MlpPolicy (Atari: shared)."""
    orthogonal_init: bool = True
    """Orthogonal init (gain sqrt 2 torso, 0.01 policy layer, 1 value layer), zero biases. Default: SB3 / Baselines."""
    init_log_std: float = key(0.0, "any")
    """Initial log standard deviation of the Gaussian policy (natural log; Box actions only). Default: SB3."""
