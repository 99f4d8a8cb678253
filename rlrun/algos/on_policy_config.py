"""Keys the PPO family (PPO, A2C, TRPO: rlrun/algos/on_policy.py) shares: observation normalisation and reward
scaling (the components are rlrun/components/normalizers.py) and how a time-limit truncation is treated. A mixin of
their schemas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rlrun.schema import Declared, key


@dataclass
class OnPolicyKeys(Declared):
    """Observation normalisation, reward scaling and time-limit truncations: keys of the PPO family."""

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
    action_mask: str = key("auto", choices=("auto", "off"))
    """Invalid-action masks (Discrete actions): auto (when the observation carries an ``action_mask`` entry, or the
    env's info dict does, illegal actions are never chosen and get no probability, in acting and in learning) | off
    (the mask is ignored). See docs/action-masks.md."""
    bootstrap_truncated: bool = True
    """At a time-limit truncation, bootstrap the advantage from the value of the episode's real final observation
    (the episode did not end; Pardo et al. 2018, "Time Limits in Reinforcement Learning"). false: treat it as a
    termination (value 0), as CleanRL's ppo.py and ppo_continuous_action.py do (``done = terminated or
    truncated``): for comparing with those references. Default: bootstrap."""
