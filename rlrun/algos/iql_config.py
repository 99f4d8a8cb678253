"""The config schema of IQL (``algo=iql``, rlrun/algos/iql.py): each key's default, declared range and docstring,
said once here. ``conf/algo/iql.yaml`` selects it; the registry names it (``registry.schema("algo", "iql")``). No
heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rlrun.schema import Declared, key


@dataclass
class IQLConfig(Declared):
    """Implicit Q-learning (Kostrikov, Nair and Levine 2021, "Offline Reinforcement Learning with Implicit
    Q-Learning"): V(s) fitted to an upper expectile of the twin critics' Q(s, a) on the dataset's actions, Q fitted
    to r + gamma V(s'), and the policy extracted by advantage-weighted regression. Never queries Q on an action
    outside the dataset. Box actions; learns from a dataset (data=minari), takes no env steps.

    The defaults are the paper's MuJoCo locomotion settings (Appendix B) as CORL's ``iql.py`` (Tarasov et al. 2022)
    has them; CORL's deterministic-policy option (``iql_deterministic``) is the policy here.
    """

    key_prefix: ClassVar[str] = "algo"
    offline: ClassVar[bool] = True  # learns from data=..., never from env workers
    buffer_size: ClassVar[int] = 1  # the dataset is the replay: the acting base's memory holds nothing
    learning_starts: ClassVar[int] = 0  # no uniform warm-up: nothing is acted while learning

    name: str = "iql"
    actor_lr: float = key(3e-4, "(0, inf)")
    """Adam learning rate of the policy. Default: paper Appendix B, CORL actor_lr."""
    critic_lr: float = key(3e-4, "(0, inf)")
    """Adam learning rate of the twin Q-networks. Default: paper Appendix B, CORL qf_lr."""
    value_lr: float = key(3e-4, "(0, inf)")
    """Adam learning rate of V. Default: paper Appendix B, CORL vf_lr."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: paper Appendix B."""
    tau: float = key(0.005, "(0, 1]")
    """Polyak coefficient of the target Q-networks per gradient step. Default: paper Appendix B (alpha = 0.005)."""
    expectile: float = key(0.7, "(0, 1)")
    """The expectile of Q(s, a) over the dataset's actions that V fits (0.5: the mean, -> 1: the maximum).
    Default: paper Appendix B, MuJoCo locomotion (tau = 0.7)."""
    beta: float = key(3.0, "[0, inf)")
    """Inverse temperature of the advantage weights exp(beta (Q - V)). Default: paper Appendix B, MuJoCo (3.0)."""
    reward_scale: Optional[float] = key(None, "(0, inf)")
    """Factor on the dataset's rewards; null: 1000 / (max - min episode return) of the dataset, computed when the run
    starts, recorded as data.reward_scale (MLflow, summary.json) and kept in checkpoints. beta is relative to the
    rewards' scale: the paper's beta = 3 assumes this normalisation. Default: the paper's D4RL MuJoCo setting (the
    reference train_offline.py's normalize)."""
    max_weight: float = key(100.0, "(0, inf)")
    """Upper clip of the advantage weights. Default: paper's implementation and CORL (EXP_ADV_MAX = 100)."""
    batch_size: int = key(256, "[1, inf)")
    """Transitions per gradient step, drawn uniformly from the dataset. Default: paper Appendix B."""
    normalize_obs: bool = False
    """Standardise observations by the dataset's mean and std, computed when the run starts; the statistics are the
    agent's (checkpointed, applied when acting: rlrun eval and exports take raw observations). Default: false, as
    the paper's reference implementation (ikostrikov/implicit_q_learning normalises rewards only); CORL's iql.py
    sets true (normalize)."""
    updates_per_iteration: int = key(100, "[1, inf)")
    """Gradient steps per training_step() (one report, stop check and checkpoint check each). Default: a round
    number that keeps the loop's overhead small; not a learning setting."""
    hidden_sizes: list[int] = key(factory=lambda: [256, 256], items="[1, inf)")
    """Hidden layer widths of the policy's, V's and each Q-network's MLP. Default: paper Appendix B."""
    activation: str = key("relu", choices=("relu", "tanh", "elu"))
    """MLP activation: relu | tanh | elu. Default: paper (ReLU)."""
