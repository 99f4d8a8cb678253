"""The rollout worker with a real CartPole vector env: transitions, final observations, extras, time-major views."""

from __future__ import annotations

import numpy as np
import torch
from omegaconf import OmegaConf

from rlrun.envs.gym_env import GymEnvFactory
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
    batch = worker.sample(40)  # pushing left ends a CartPole episode in ~10 steps: several episodes end
    assert batch.env_steps == 120 and batch.num_steps == 40 and batch.num_envs == 3
    assert (batch.actions == 0).all() and len(batch.episode_returns) >= 6
    np.testing.assert_array_equal(batch.extras["x0"], batch.obs[:, 0])  # recorded at acting time
    obs_tm, next_tm = batch.time_major(batch.obs), batch.time_major(batch.next_obs)
    assert obs_tm.shape == (40, 3, 4)
    done_tm = batch.time_major(batch.terminated | batch.truncated)
    # Within an episode next_obs[t] is obs[t + 1]; at an episode end it is the real final observation instead.
    for t in range(39):
        for b in range(3):
            if not done_tm[t, b]:
                np.testing.assert_array_equal(next_tm[t, b], obs_tm[t + 1, b])
            else:
                assert not np.array_equal(next_tm[t, b], obs_tm[t + 1, b])
                assert abs(next_tm[t, b, 2]) > 0.2 or abs(next_tm[t, b, 0]) > 2.4  # terminal: pole or cart out
    np.testing.assert_array_equal(batch.last_obs, worker.obs)
    assert sum(batch.episode_lengths) <= 120
    worker.close()


def test_state_roundtrip_continues_identically() -> None:
    a = RolloutWorker(factory(), PushLeft(), num_envs=2, seed=1)
    a.sample(5)
    state = {k: np.copy(v) for k, v in a.get_state().items()}
    b = RolloutWorker(factory(), PushLeft(), num_envs=2, seed=1)
    b.sample(5)
    b.set_state(state)
    np.testing.assert_array_equal(a.sample(3).obs, b.sample(3).obs)
    a.close()
    b.close()
