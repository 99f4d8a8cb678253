"""The config schema of BC (``algo=bc``, rlrun/algos/bc.py): each key's default, declared range and docstring,
said once here. ``conf/algo/bc.yaml`` selects it; the registry names it (``registry.schema("algo", "bc")``). No heavy
imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rlrun.schema import Declared, key


@dataclass
class BCConfig(Declared):
    """Behaviour cloning: supervised learning of the dataset's actions from its observations (Pomerleau 1991; the
    offline-RL baseline of Fu et al. 2020, D4RL, and of CORL's ``any_percent_bc.py``). Discrete actions: a
    categorical policy on the cross-entropy; Box actions: a deterministic tanh policy on the squared error of the
    action normalised to [-1, 1]. Learns from a dataset (data=minari), takes no env steps.

    The defaults are CORL's ``any_percent_bc.py`` (Tarasov et al. 2022), each said below.
    """

    key_prefix: ClassVar[str] = "algo"
    offline: ClassVar[bool] = True  # learns from data=..., never from env workers

    name: str = "bc"
    lr: float = key(3e-4, "(0, inf)")
    """Adam learning rate of the policy. Default: CORL any_percent_bc.py actor_lr."""
    batch_size: int = key(256, "[1, inf)")
    """Transitions per gradient step, drawn uniformly from the dataset. Default: CORL batch_size."""
    normalize_obs: bool = False
    """Standardise observations by the dataset's mean and std, computed when the run starts; the statistics are the
    agent's (checkpointed, applied when acting: rlrun eval and exports take raw observations). Default: false, as
    IQL's and CQL's here, so that the three learn from the same inputs; CORL's any_percent_bc.py sets true
    (normalize)."""
    updates_per_iteration: int = key(100, "[1, inf)")
    """Gradient steps per training_step() (one report, stop check and checkpoint check each). Default: a round
    number that keeps the loop's overhead small; not a learning setting."""
    hidden_sizes: list[int] = key(factory=lambda: [256, 256], items="[1, inf)")
    """Hidden layer widths of the policy's MLP. Default: CORL's Actor (256, 256)."""
    activation: str = key("relu", choices=("relu", "tanh", "elu"))
    """MLP activation: relu | tanh | elu. Default: CORL (ReLU)."""
