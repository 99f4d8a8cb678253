"""The config schema of TRPO (``algo=trpo``, rlrun/algos/trpo.py): each key's default, declared range and
docstring, said once here. ``conf/algo/trpo.yaml`` selects it; the registry names it
(``registry.schema("algo", "trpo")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rlrun.algos.normalization_config import NormalizationKeys
from rlrun.schema import key


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
