"""The config schema of TRPO (``algo=trpo``, rlrun/algos/trpo.py): each key's default, declared range and
docstring, said once here. ``conf/algo/trpo.yaml`` selects it; the registry names it
(``registry.schema("algo", "trpo")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rlrun.algos.on_policy_config import OnPolicyKeys
from rlrun.schema import key


@dataclass
class TRPOConfig(OnPolicyKeys):
    """TRPO (Schulman et al. 2015, "Trust Region Policy Optimization"): one natural-gradient step of the policy
    under a KL trust region with a backtracking line search per rollout, and epochs of Adam minibatch steps on a
    separate value network (as SB3-contrib's TRPO and Spinning Up).

    The defaults are said here only, each with its source (conf/algo/trpo.yaml selects this schema): rl-baselines3-zoo's
    hyperparams/trpo.yml CartPole-v1 entry. Run it with several env copies (executor.num_envs=8).
    """

    name: str = "trpo"
    policy_update: str = key("trpo", choices=("trpo", "natural_gradient", "multi_step", "evolution_strategies"))
    """The optimizer module that takes the policy's step on the surrogate each update, by its registry name (kind
    optimizer, rlrun/components/optimizers): trpo (natural gradient + line search, TRPO) | natural_gradient (the full
    natural-gradient step to the trust-region boundary, no line search: truncated natural policy gradient, TNPG of
    Duan et al. 2016) | multi_step (policy_epochs epochs of Adam minibatch steps of policy_lr on the surrogate, no
    trust region; 1 epoch over the whole rollout is vanilla policy gradient, VPG, as Spinning Up's) |
    evolution_strategies (OpenAI-ES, Salimans et al. 2017: 2 x es_pairs perturbations of the policy's parameters,
    no gradient). max_kl, cg_iters and cg_damping apply to trpo and natural_gradient, the line_search_* keys to trpo.
    The value function is fitted by Adam epochs whatever this is. Default: trpo."""
    max_kl: float = key(0.01, "(0, inf)")
    """Trust-region radius delta: largest mean KL(pi_old || pi_new) per update, in nats. Default: Schulman et al. 2015
    Sec. 8 / SB3 target_kl."""
    cg_iters: int = key(10, "[1, inf)")
    """Conjugate-gradient iterations solving F x = g for the natural-gradient direction. Default: Schulman et al. 2015
    App. C / Spinning Up (SB3: 15)."""
    cg_damping: float = key(1e-3, "[0, inf)")
    """Damping added to the Fisher matrix, F + cg_damping * I (dimensionless). Default: rl-zoo CartPole-v1 (SB3 /
    Spinning Up default 0.1)."""
    line_search_max_backtracks: int = key(10, "[1, inf)")
    """Step fractions 1, r, r^2, ... tried by the line search before the update is given up (policy unchanged).
    Default: SB3 line_search_max_iter / Spinning Up backtrack_iters."""
    line_search_backtrack_ratio: float = key(0.8, "(0, 1)")
    """Factor r the step fraction shrinks by per line-search try, in (0, 1). Default: SB3 line_search_shrinking_factor
    / Spinning Up backtrack_coeff."""
    line_search_accept_ratio: float = key(0.1, "[0, 1)")
    """Share of the linearly predicted surrogate improvement a step must realise to be accepted. Default: Schulman's
    trpo code / Baselines."""
    normalize_advantage: bool = True
    """Normalise advantages to zero mean and unit std over each rollout. Default: SB3 TRPO."""
    policy_lr: float = key(3e-4, "(0, inf)")
    """Adam learning rate of the policy with policy_update=multi_step (constant). Default: Spinning Up VPG pi_lr."""
    policy_epochs: int = key(1, "[1, inf)")
    """Passes of the policy over each rollout with policy_update=multi_step. Default: 1, Spinning Up VPG's one step."""
    policy_minibatch_size: Optional[int] = key(None, "[1, inf)")
    """Env steps per policy gradient step with policy_update=multi_step; null: the whole rollout (one step per epoch).
    Default: null, Spinning Up VPG."""
    es_pairs: int = key(16, "[1, inf)")
    """Antithetic pairs of parameter perturbations per update with policy_update=evolution_strategies (2 x es_pairs
    surrogate evaluations besides the centre). Default: 16 (a population of 32)."""
    es_sigma: float = key(0.02, "(0, inf)")
    """Standard deviation of the parameter noise with policy_update=evolution_strategies, in parameter units. Default:
    Salimans et al. 2017, 0.02."""
    es_lr: float = key(0.01, "(0, inf)")
    """Step size of the rank-weighted noise sum with policy_update=evolution_strategies (plain SGD on the smoothed
    fitness). Default: Salimans et al. 2017, 0.01."""
    lr: float = key(1e-3, "(0, inf)")
    """Adam learning rate of the value function at env step 0 (the policy moves by the trust-region step). Default: rl-
    zoo CartPole-v1 learning_rate / Spinning Up vf_lr."""
    anneal_lr: bool = False
    """Anneal the value function's learning rate linearly to 0 over total_env_steps. Default: rl-zoo CartPole-v1."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps of the LR schedule; the YAML default is the run's budget ${stop.env_steps}; null: constant LR."""
    adam_eps: float = key(1e-5, "(0, inf)")
    """Adam's epsilon of the value optimizer. Default: SB3 on-policy policies."""
    vf_epochs: int = key(20, "[1, inf)")
    """Passes of the value function over each rollout (epochs of minibatch Adam steps). Default: rl-zoo CartPole-v1
    n_critic_updates."""
    vf_minibatch_size: int = key(512, "[1, inf)")
    """Env steps (transitions) per value-function gradient step. Default: rl-zoo CartPole-v1 batch_size."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: rl-zoo CartPole-v1."""
    gae_lambda: float = key(0.98, "[0, 1]")
    """GAE lambda (Schulman et al. 2016): 1 = Monte-Carlo advantages, 0 = one-step TD errors. Default: rl-zoo
    CartPole-v1."""
    rollout_steps: int = key(128, "[1, inf)")
    """Agent steps per env copy per update (T); one update learns on T x executor.num_envs env steps. Default: rl-zoo
    512 x 2 envs = 1024 = 128 x 8 here."""
    network: str = "auto"
    """Torso of the actor and of the critic (each its own): auto (nature_cnn for uint8 images [C, H, W], else mlp) |
    mlp | nature_cnn | impala_resnet."""
    hidden_sizes: list[int] = key(factory=lambda: [64, 64], items="[1, inf)")
    """Hidden layer widths of an MLP torso (actor and critic alike). Default: SB3 MlpPolicy."""
    activation: str = key("tanh", choices=('relu', 'tanh', 'elu'))
    """MLP torso activation: relu | tanh | elu. Default: SB3 MlpPolicy."""
    orthogonal_init: bool = True
    """Orthogonal init (gain sqrt 2 torso, 0.01 policy layer, 1 value layer), zero biases. Default: SB3 ortho_init /
    Baselines."""
    init_log_std: float = key(0.0, "any")
    """Initial log standard deviation of the Gaussian policy (natural log; Box actions only). Default: SB3
    log_std_init."""
