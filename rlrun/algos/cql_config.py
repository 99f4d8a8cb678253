"""The config schema of CQL (``algo=cql``, rlrun/algos/cql.py): each key's default, declared range and docstring,
said once here. ``conf/algo/cql.yaml`` selects it; the registry names it (``registry.schema("algo", "cql")``). No
heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rlrun.schema import Declared, key


@dataclass
class CQLConfig(Declared):
    """Conservative Q-learning (Kumar, Zhou, Tucker and Levine 2020, "Conservative Q-Learning for Offline
    Reinforcement Learning"), CQL(H) on SAC's twin critics, squashed-Gaussian actor and learned temperature: the
    critics' loss adds alpha_cql (logsumexp_a Q(s, a) - Q(s, a_data)), which pushes down Q on actions the dataset
    does not hold. Box actions; learns from a dataset (data=minari), takes no env steps.

    The defaults are CORL's ``cql.py`` (Tarasov et al. 2022), which follow the paper's MuJoCo settings (Appendix F)
    and its reference implementation; each is said below.
    """

    key_prefix: ClassVar[str] = "algo"
    offline: ClassVar[bool] = True  # learns from data=..., never from env workers
    buffer_size: ClassVar[int] = 1  # the dataset is the replay: the acting base's memory holds nothing
    learning_starts: ClassVar[int] = 0  # no uniform warm-up: nothing is acted while learning

    name: str = "cql"
    actor_lr: float = key(1e-4, "(0, inf)")
    """Adam learning rate of the policy. Default: paper Appendix F (1e-4 for MuJoCo; CORL's configs 3e-5 / 1e-4)."""
    critic_lr: float = key(3e-4, "(0, inf)")
    """Adam learning rate of the twin Q-networks. Default: paper Appendix F, CORL qf_lr."""
    alpha_lr: float = key(1e-4, "(0, inf)")
    """Adam learning rate of log(alpha), SAC's temperature (when learn_alpha). Default: CORL (= policy_lr)."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: paper, CORL discount."""
    tau: float = key(0.005, "(0, 1]")
    """Polyak coefficient of the target Q-networks per gradient step. Default: CORL soft_target_update_rate."""
    cql_alpha: float = key(5.0, "[0, inf)")
    """Weight of the conservative regulariser (the paper's alpha; 0: plain SAC on the dataset). Default: paper
    Appendix F, MuJoCo (5.0; CORL's configs use 5 or 10)."""
    cql_n_actions: int = key(10, "[1, inf)")
    """Actions per state of each proposal (uniform, the policy at s, the policy at s') that estimate logsumexp_a Q.
    Default: paper Appendix F, CORL cql_n_actions."""
    cql_temperature: float = key(1.0, "(0, inf)")
    """Temperature of the logsumexp. Default: CORL cql_temp."""
    reward_scale: Optional[float] = key(1.0, "(0, inf)")
    """Factor on the dataset's rewards; null: 1000 / (max - min episode return) of the dataset (IQL's normalisation),
    recorded as data.reward_scale. Default: 1, the rewards as they are (CORL's normalize_reward false on MuJoCo)."""
    batch_size: int = key(256, "[1, inf)")
    """Transitions per gradient step, drawn uniformly from the dataset. Default: paper, CORL."""
    normalize_obs: bool = False
    """Standardise observations by the dataset's mean and std, computed when the run starts; the statistics are the
    agent's (checkpointed, applied when acting: rlrun eval and exports take raw observations). Default: false, as
    the paper's reference implementation (aviralkumar2907/CQL); CORL's cql.py sets true (normalize)."""
    updates_per_iteration: int = key(100, "[1, inf)")
    """Gradient steps per training_step() (one report, stop check and checkpoint check each). Default: a round
    number that keeps the loop's overhead small; not a learning setting."""
    hidden_sizes: list[int] = key(factory=lambda: [256, 256], items="[1, inf)")
    """Hidden layer widths of the policy's and each Q-network's MLP. Default: SAC's (paper Appendix F: 3 x 256)."""
    activation: str = key("relu", choices=("relu", "tanh", "elu"))
    """MLP activation: relu | tanh | elu. Default: paper (ReLU)."""
    learn_alpha: bool = True
    """Learn SAC's temperature towards target_entropy. Default: CORL use_automatic_entropy_tuning."""
    init_alpha: float = key(1.0, "(0, inf)")
    """SAC's temperature at the start (the fixed one when learn_alpha is false). Default: CORL (log alpha 0)."""
    target_entropy: Optional[float] = key(None, "any")
    """Entropy target, in nats of the [-1, 1]-normalised action; null: -|A|. Default: CORL."""
    log_std_min: float = key(-5.0, "any")
    """Lower bound of the policy's log standard deviation. The head maps its output smoothly into the bounds
    (rlrun/components/squashed_gaussian.py), so a fresh policy's log std is their midpoint: -1.5 here, about CORL's
    policy at its start (log std offset -1; CORL's -20 is a hard clamp that a smooth map would turn into a start at
    -9, a nearly deterministic policy). Default: SAC's (CleanRL)."""
    log_std_max: float = key(2.0, "any")
    """Upper bound of the policy's log standard deviation. Default: CORL and SAC's (2)."""
    max_grad_norm: Optional[float] = key(None, "(0, inf)")
    """Global gradient-norm clip of each update; null disables. Default: none (paper, CORL)."""
