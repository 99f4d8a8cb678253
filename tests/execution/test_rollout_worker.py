"""The rollout worker with a real CartPole vector env: transitions, final observations, extras, time-major views."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from rlrun.envs.gym_env import GymEnvFactory
from rlrun.errors import ConfigError
from rlrun.execution.rollout_worker import RolloutWorker


class PushLeft:
    """Always action 0, and records the observation's first feature as an extra."""

    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        return torch.zeros(obs.shape[0], dtype=torch.int64), {"x0": obs[:, 0].clone()}


def factory() -> GymEnvFactory:
    return GymEnvFactory(OmegaConf.create({"name": "gym", "id": "CartPole-v1", "max_episode_steps": None,
                                           "frame_skip": 1, "kwargs": {}}))


def test_sample_records_transitions_extras_and_the_last_observation() -> None:
    worker = RolloutWorker(factory(), PushLeft(), num_envs=3, seed=7)
    first = worker.obs.copy()
    batch = worker.sample(40)  # pushing left ends a CartPole episode in ~10 steps: several episodes end
    assert batch.env_steps == 120 and batch.num_steps == 40 and batch.num_envs == 3
    assert batch.obs.shape == (41, 3, 4) and batch.actions.shape == batch.rewards.shape == (40, 3)
    assert (batch.actions == 0).all() and len(batch.episode_returns) >= 6
    np.testing.assert_array_equal(batch.obs[0], first)
    np.testing.assert_array_equal(batch.extras["x0"], batch.obs[:-1, :, 0])  # recorded at acting time
    done = batch.terminated | batch.truncated
    assert batch.final_obs.shape == (int(done.sum()), 4) == (len(batch.episode_returns), 4)
    # Every final observation is terminal (pole or cart out), and differs from the reset observation after it.
    for k, (t, b) in enumerate(zip(*np.nonzero(done), strict=True)):
        final = batch.final_obs[k]
        assert abs(final[2]) > 0.2 or abs(final[0]) > 2.4
        assert not np.array_equal(final, batch.obs[t + 1, b])
        assert abs(batch.obs[t + 1, b]).max() <= 0.05  # CartPole resets within +-0.05
    np.testing.assert_array_equal(batch.last_obs, worker.obs)
    assert sum(batch.episode_lengths) <= 120
    worker.close()


def test_state_roundtrip_continues_identically() -> None:
    a = RolloutWorker(factory(), PushLeft(), num_envs=2, seed=1)
    a.sample(5)
    buf = io.BytesIO()
    torch.save(a.get_state(), buf)  # plain data: it loads without running code
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    b = RolloutWorker(factory(), PushLeft(), num_envs=2, seed=2)  # other seeds: the env state must come from `state`
    b.sample(7)
    assert b.set_state(state)
    np.testing.assert_array_equal(a.sample(3).obs, b.sample(3).obs)
    a.close()
    b.close()


# ---------------------------------------------------------------------------------------------------- pipelined

FIELDS = ("obs", "actions", "rewards", "final_obs", "terminated", "truncated", "last_obs")


class HashPolicy:
    """A deterministic policy whose actions vary with the observation (each row's action is a hash of its pixels
    or features), so pipelined and sync workers must take the same actions only if they see the same
    observations; records the hash as an extra."""

    def __init__(self, num_actions: int) -> None:
        self.num_actions = num_actions
        self.calls = 0

    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        self.calls += 1
        x = obs.reshape(obs.shape[0], -1)
        h = (x * 1000).to(torch.int64).sum(dim=1) if x.dtype.is_floating_point else x.to(torch.int64).sum(dim=1)
        return (h * 2654435761 // 7) % self.num_actions, {"h": h}


def assert_same_batches(a: RolloutWorker, b: RolloutWorker, samples: int, steps: int) -> int:
    ended = 0
    for k in range(samples):
        x, y = a.sample(steps), b.sample(steps)
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=f"sample {k}: {name}")
        np.testing.assert_array_equal(x.extras["h"], y.extras["h"])
        assert (x.episode_returns, x.episode_lengths) == (y.episode_returns, y.episode_lengths)
        assert (x.game_scores, x.game_lengths) == (y.game_scores, y.game_lengths)
        assert y.num_envs == a.num_envs and y.env_steps == steps * a.num_envs
        ended += len(x.episode_returns)
    return ended


def atari_factory(**overrides):  # noqa: ANN003, ANN201
    pytest.importorskip("envpool", reason="envpool is an optional extra: pip install 'rlrun[envpool]'")
    from rlrun.config import AtariEnvConfig
    from rlrun.envs.atari import AtariEnvFactory

    cfg = dict(game="Breakout", backend="envpool", noop_max=1, envpool_threads=1, max_episode_frames=200)
    return AtariEnvFactory(OmegaConf.structured(AtariEnvConfig(**{**cfg, **overrides})))


@pytest.mark.parametrize("num_envs", [2, 5])
def test_pipelined_gives_the_transitions_of_sync_on_envpool(num_envs: int) -> None:
    """Breakout through envpool, games cut off after 50 agent steps (so whole games, life losses and the game
    scores of several games fall inside the samples), a deterministic policy: a pipelined worker (copies in two
    groups, 1+1 or 3+2, one group stepping while the policy acts on the other) records the same observations,
    actions, rewards, next/final observations, episode ends, extras, episodes and games as a sync worker, row for
    row, and calls the policy twice per agent step (once per group)."""
    f = atari_factory()
    sync = RolloutWorker(f, HashPolicy(4), num_envs, seed=3)
    policy = HashPolicy(4)
    pipelined = RolloutWorker(f, policy, num_envs, seed=3, vector_mode="pipelined")
    assert [len(range(lo, hi)) for lo, hi in pipelined.envs.bounds] == [(num_envs + 1) // 2, num_envs // 2]
    assert assert_same_batches(sync, pipelined, samples=4, steps=16) >= num_envs  # every copy ended an episode
    assert policy.calls == 4 * 16 * 2
    sync.close()
    pipelined.close()


def test_pipelined_with_gymnasium_async_copies() -> None:
    """The gymnasium backend pipelines through ``AsyncVectorEnv`` groups (a subprocess per copy): CartPole, 2
    copies, same transitions as sync across episode ends."""
    sync = RolloutWorker(factory(), HashPolicy(2), 2, seed=11)
    pipelined = RolloutWorker(factory(), HashPolicy(2), 2, seed=11, vector_mode="pipelined")
    assert assert_same_batches(sync, pipelined, samples=2, steps=40) >= 2
    sync.close()
    pipelined.close()


class Recurrent(HashPolicy):
    def reset_episodes(self, done: np.ndarray) -> None: ...


class FailsOnCall(HashPolicy):
    def __init__(self, num_actions: int, fail_at: int) -> None:
        super().__init__(num_actions)
        self.fail_at = fail_at

    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        if self.calls + 1 == self.fail_at:
            self.calls += 1
            raise ValueError("policy failed")
        return super().get_actions(obs, explore)


def test_pipelined_refuses_what_it_cannot_do_and_recovers_from_a_failed_sample() -> None:
    """One copy (nothing to overlap) and a policy with per-copy state (``reset_episodes``) are refused with a
    ConfigError naming the mode. A policy that fails mid-rollout (its 3rd call: group 0 of step 1, while group 1
    is stepping) leaves no step in flight: the worker samples again afterwards."""
    f = atari_factory()
    with pytest.raises(ConfigError, match="vector_mode=pipelined"):
        RolloutWorker(f, HashPolicy(4), 1, seed=0, vector_mode="pipelined")
    with pytest.raises(ConfigError, match="reset_episodes"):
        RolloutWorker(f, Recurrent(4), 2, seed=0, vector_mode="pipelined")
    worker = RolloutWorker(f, FailsOnCall(4, fail_at=3), 2, seed=0, vector_mode="pipelined")
    with pytest.raises(ValueError, match="policy failed"):
        worker.sample(4)
    assert not any(g._stepping for g in worker.envs.groups)
    assert worker.sample(4).env_steps == 8
    worker.close()
