"""The config schema of Rainbow (``algo=rainbow``, rlrun/algos/rainbow.py): C51's keys (rlrun/algos/c51_config.py)
with Rainbow's parts switched on by default. ``conf/algo/rainbow.yaml`` selects it; the registry names it
(``registry.schema("algo", "rainbow")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass

from rlrun.algos.c51_config import C51Config
from rlrun.schema import key


@dataclass
class RainbowConfig(C51Config):
    """Rainbow (Hessel et al. 2018): C51 with noisy nets, a dueling head, double Q, proportional prioritised replay
    and n-step returns, the six parts of the paper's Table 1 (its seventh, DQN itself, is the base). Each part is a
    key of C51's schema; this one only turns them on. The sizes are DQN's CartPole-v1 ones (conf/algo/dqn.yaml);
    conf/algo_env/rainbow_atari.yaml holds the paper's Atari values.
    """

    name: str = "rainbow"
    noisy: bool = True
    """Noisy nets instead of epsilon-greedy. Default: on, Hessel et al. 2018 (Table 1, "Noisy Nets sigma_0")."""
    dueling: bool = True
    """Dueling head, per atom. Default: on, Hessel et al. 2018."""
    double_q: bool = True
    """Bootstrap action from the online network. Default: on, Hessel et al. 2018."""
    prioritized_replay: bool = True
    """Proportional prioritised replay on the per-item loss. Default: on, Hessel et al. 2018."""
    per_alpha: float = key(0.5, "[0, 1]")
    """Priority exponent. Default: 0.5, Hessel et al. 2018, Table 1 ("Prioritization exponent omega")."""
    n_step: int = key(3, "[1, inf)")
    """Steps per transition. Default: 3, Hessel et al. 2018, Table 1 ("Multi-step returns n")."""
