"""Keys several algorithms share: observation normalisation and reward scaling (PPO, A2C, TRPO; the
components are rlrun/components/normalizers.py). A mixin of their schemas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rlrun.schema import Declared, key


@dataclass
class NormalizationKeys(Declared):
    """Observation normalisation and reward scaling (rlrun/components/normalizers.py): keys of the PPO family."""

    key_prefix: ClassVar[str] = "algo"

    normalize_obs: bool = False
    """Normalise observations by their running mean and std (float Box observations; CleanRL ppo_continuous_action /
    Baselines VecNormalize); the statistics are part of the network: checkpointed, sent to workers, exported.
    Default: CleanRL ppo_continuous_action: true."""
    obs_clip: float = key(10.0, "(0, inf)")
    """Clip normalised observations to [-obs_clip, obs_clip] (with normalize_obs). Default: CleanRL / Baselines
    VecNormalize."""
    normalize_reward: bool = False
    """Divide rewards by the running std of the discounted return (per env copy, gamma = algo.gamma), as CleanRL /
    Baselines VecNormalize; episode returns in metrics stay raw. Default: CleanRL ppo_continuous_action: true."""
    reward_clip: float = key(10.0, "(0, inf)")
    """Clip scaled rewards to [-reward_clip, reward_clip] (with normalize_reward). Default: CleanRL / Baselines
    VecNormalize."""
