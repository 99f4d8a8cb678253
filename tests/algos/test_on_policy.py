"""The shared base of the actor-critic algorithms (rlrun/algos/on_policy.py): the helpers their agents are built
with, checked alone (the agent base and the plans are exercised through PPO's, A2C's and TRPO's tests)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.algos.a2c_config import A2CConfig
from rlrun.algos.on_policy import build_actor_critic, clip_to_bounds, make_reward_scaler, rmsprop_or_adam
from rlrun.algos.ppo import PPOAgent
from rlrun.algos.ppo_config import PPOConfig
from rlrun.components.normalizers import RewardScaler
from rlrun.components.optimizers.adam import Adam
from rlrun.errors import ConfigError

OBS = sp.Box(-1.0, 1.0, (3,), np.float32)


def test_rmsprop_or_adam_takes_the_configured_optimizer():
    """RMSProp with alpha, eps and the extra kwargs (IMPALA's momentum); Adam with eps only."""
    cfg = replace(A2CConfig(), optimizer="rmsprop", rmsprop_alpha=0.9, optimizer_eps=1e-3, lr=0.01, max_grad_norm=2.0)
    rmsprop = rmsprop_or_adam(cfg, [torch.nn.Parameter(torch.zeros(2))], momentum=0.5)
    group = rmsprop.param_groups[0]
    assert isinstance(rmsprop, torch.optim.RMSprop)
    assert (group["alpha"], group["eps"], group["momentum"], group["lr"]) == (0.9, 1e-3, 0.5, 0.01)
    adam = rmsprop_or_adam(replace(cfg, optimizer="adam"), [torch.nn.Parameter(torch.zeros(2))])
    assert isinstance(adam, Adam) and adam.param_groups[0]["eps"] == 1e-3


def test_make_reward_scaler_only_with_normalize_reward():
    assert make_reward_scaler(PPOConfig()) is None
    scaler = make_reward_scaler(replace(PPOConfig(), normalize_reward=True, gamma=0.9, reward_clip=5.0))
    assert isinstance(scaler, RewardScaler) and (scaler.gamma, scaler.clip) == (0.9, 5.0)
    assert make_reward_scaler(object()) is None  # a config without the key


def test_build_actor_critic_registers_the_bounds_and_clip_to_bounds_uses_them():
    """Box actions [-1, 2] x [0, 0.5]: the bounds become buffers, samples are clipped per dimension; Discrete actions
    pass through; other action spaces are refused."""
    box = sp.Box(np.array([-1.0, 0.0], np.float32), np.array([2.0, 0.5], np.float32))
    agent = PPOAgent(PPOConfig(hidden_sizes=[4])).build(obs=OBS, actions=box)
    assert agent.continuous and agent.output_spaces["get_actions"] is box
    assert torch.equal(agent.action_low, torch.tensor([-1.0, 0.0]))
    clipped = clip_to_bounds(agent, torch.tensor([[3.0, -1.0], [0.5, 0.25]]))
    assert torch.equal(clipped, torch.tensor([[2.0, 0.0], [0.5, 0.25]]))
    discrete = PPOAgent(PPOConfig(hidden_sizes=[4])).build(obs=OBS, actions=sp.Discrete(3))
    assert not discrete.continuous and not hasattr(discrete, "action_low")
    assert torch.equal(clip_to_bounds(discrete, torch.tensor([7, -2])), torch.tensor([7, -2]))
    with pytest.raises(ConfigError, match="needs a Discrete or Box action space"):
        build_actor_critic(PPOAgent(PPOConfig(hidden_sizes=[4])), OBS, sp.MultiDiscrete([2, 2]))


def test_bootstrap_truncated_false_treats_a_truncation_as_a_termination():
    """A rollout of 6 steps x 2 copies, copy 0 cut by a time limit at step 2 and copy 1 terminated at step 4: with
    algo.bootstrap_truncated=false the advantages are exactly those of the same rollout with the truncation marked
    as a termination (CleanRL's ``done = terminated or truncated``), and differ from the default's only in copy 0
    up to the cut (the steps whose returns cross it)."""
    from conftest import rollout_form

    torch.manual_seed(0)
    default = PPOAgent(replace(PPOConfig(), hidden_sizes=[8])).build(obs=OBS, actions=sp.Discrete(2))
    cleanrl = PPOAgent(replace(PPOConfig(), hidden_sizes=[8], bootstrap_truncated=False)).build(
        obs=OBS, actions=sp.Discrete(2))
    cleanrl.load_state_dict(default.state_dict())
    T, B = 6, 2
    obs = torch.as_tensor(sp.sample(OBS, (T + 1, B), seed=1))
    terminated, truncated = torch.zeros(T, B, dtype=torch.bool), torch.zeros(T, B, dtype=torch.bool)
    truncated[2, 0] = terminated[4, 1] = True
    steps = {"obs": obs[:-1], "next_obs": obs[1:], "actions": torch.zeros(T, B, dtype=torch.int64),
             "rewards": torch.ones(T, B), "terminated": terminated, "truncated": truncated}
    _, adv_cleanrl, _ = cleanrl.advantages(rollout_form(steps))
    _, adv_as_termination, _ = default.advantages(rollout_form({**steps, "terminated": terminated | truncated}))
    _, adv_default, _ = default.advantages(rollout_form(steps))
    torch.testing.assert_close(adv_cleanrl, adv_as_termination)
    differs = ~torch.isclose(adv_cleanrl, adv_default)
    assert differs[:3, 0].all() and not differs[3:, 0].any() and not differs[:, 1].any()
