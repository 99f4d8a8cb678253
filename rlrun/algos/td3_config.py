"""The config schema of TD3 (``algo=td3``, rlrun/algos/td3.py): DDPG's keys (rlrun/algos/ddpg_config.py, the same
CleanRL defaults) and the two of target policy smoothing. ``conf/algo/td3.yaml`` selects it; the registry names it
(``registry.schema("algo", "td3")``). No heavy imports: the CLI loads every schema at start-up.

The defaults are CleanRL's ``td3_continuous_action.py`` (``Args``):
https://github.com/vwxyzjn/cleanrl/blob/master/cleanrl/td3_continuous_action.py, documented at
https://docs.cleanrl.dev/rl-algorithms/td3/."""

from __future__ import annotations

from dataclasses import dataclass

from rlrun.algos.ddpg_config import DDPGConfig
from rlrun.schema import key


@dataclass
class TD3Config(DDPGConfig):
    """Twin delayed DDPG (Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic Methods"):
    DDPG with twin Q-networks (the minimum of both in the target), target policy smoothing (clipped noise on the
    target action) and delayed policy and target updates (``policy_delay``). Box actions only. Every key DDPG has,
    with CleanRL td3_continuous_action.py's defaults (the same values), and the smoothing's two."""

    name: str = "td3"
    policy_noise: float = key(0.2, "[0, inf)")
    """Standard deviation of the target policy smoothing noise on the target action, in units of half the Box width.
    Default: CleanRL policy_noise 0.2 (Fujimoto et al. 2018, Sec. 6.1)."""
    noise_clip: float = key(0.5, "[0, inf)")
    """The smoothing noise is clipped to [-noise_clip, noise_clip] (same units). Default: CleanRL noise_clip 0.5
    (Fujimoto et al. 2018, Sec. 6.1)."""
