"""The config schema of C51 (``algo=c51``, rlrun/algos/c51.py): DQN's keys (rlrun/algos/dqn_config.py) and the
categorical support's. ``conf/algo/c51.yaml`` selects it; the registry names it (``registry.schema("algo", "c51")``).
No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass

from rlrun.algos.dqn_config import DQNConfig
from rlrun.errors import ConfigError
from rlrun.schema import key


@dataclass
class C51Config(DQNConfig):
    """C51 (Bellemare, Dabney & Munos 2017): DQN learning a categorical return distribution on ``num_atoms`` atoms
    spread evenly over ``[v_min, v_max]``, by cross-entropy to the projected Bellman target. Every DQN key keeps its
    meaning (``double_q`` picks the bootstrap action with the online network, as Rainbow; plain C51 used the target
    network's) except ``huber_delta``, which C51's loss does not use.

    The defaults are DQN's CartPole-v1 ones (conf/algo/dqn.yaml) with CleanRL ``c51.py``'s support;
    conf/algo_env/c51_cartpole.yaml holds CleanRL's classic-control settings, c51_atari.yaml the paper's.
    """

    name: str = "c51"
    num_atoms: int = key(101, "[2, inf)")
    """Atoms of the categorical support (the paper's 51 gave C51 its name). Default: CleanRL c51.py (classic
    control)."""
    v_min: float = key(-100.0, "any")
    """Lowest atom: the smallest return the distribution can hold, in the env's (n-step discounted) reward units.
    Default: CleanRL c51.py (classic control)."""
    v_max: float = key(100.0, "any")
    """Highest atom (must be > v_min); returns beyond [v_min, v_max] are clipped onto its ends. Default: CleanRL
    c51.py (classic control)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.v_min < self.v_max:
            raise ConfigError(f"algo.v_min={self.v_min}, algo.v_max={self.v_max}: the support needs v_min < v_max "
                              f"(e.g. algo.v_min=-10 algo.v_max=10).")
