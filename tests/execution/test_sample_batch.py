"""rlrun.execution.sample_batch: the time-major batch form, built from spaces (a nested Dict observation space of
an image and a vector, as an env with several observation parts gives it) and checked against next observations
worked out step by step here."""

from __future__ import annotations

import numpy as np

from rlrun import spaces as sp
from rlrun.execution.sample_batch import SampleBatch, stack_nests

OBS = sp.Dict({"image": sp.Box(0, 255, (2, 3, 3), np.uint8), "vector": sp.Box(-1.0, 1.0, (4,), np.float32)})
T, B = 5, 3
DONE = {(0, 1), (2, 0), (2, 2), (4, 1)}  # (t, b): an episode ended at step t of copy b (one at the last step)
TRUNCATED, TERMINATED = {(0, 1), (2, 2)}, {(2, 0), (4, 1)}  # alternately, in sorted order (make_batch)


def make_batch(seed: int = 0) -> tuple[SampleBatch, dict]:
    """A batch of random observations; the final observations of the ended episodes are random too (distinct
    from the reset observations after them); ``expected_next``: every step's next observation, by hand."""
    obs = sp.sample(OBS, (T + 1, B), seed=seed)
    finals = {tb: sp.sample(OBS, (), seed=seed + 100 + i) for i, tb in enumerate(sorted(DONE))}
    terminated = np.zeros((T, B), bool)
    truncated = np.zeros((T, B), bool)
    for i, (t, b) in enumerate(sorted(DONE)):
        (terminated if i % 2 else truncated)[t, b] = True
    order = sorted(DONE)  # t-major: the order of final_index
    batch = SampleBatch(obs, np.arange(T * B).reshape(T, B), np.ones((T, B), np.float32), terminated, truncated,
                        stack_nests([finals[tb] for tb in order]))
    expected = {key: np.array(v[1:]) for key, v in obs.items()}
    for (t, b), final in finals.items():
        for key in expected:
            expected[key][t, b] = final[key]
    return batch, expected


def test_shapes_counts_and_views() -> None:
    batch, _ = make_batch()
    assert (batch.num_steps, batch.num_envs, batch.env_steps) == (T, B, T * B)
    assert batch.final_index().tolist() == [0 * B + 1, 2 * B + 0, 2 * B + 2, 4 * B + 1]
    assert batch.acted_obs["image"].shape == (T, B, 2, 3, 3) and batch.last_obs["vector"].shape == (B, 4)
    np.testing.assert_array_equal(batch.last_obs["image"], batch.obs["image"][T])
    assert np.shares_memory(batch.acted_obs["vector"], batch.obs["vector"])  # views, not copies


def test_next_obs_is_the_next_step_except_where_an_episode_ended() -> None:
    batch, expected = make_batch()
    got = batch.next_obs()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    assert not np.shares_memory(got["image"], batch.obs["image"])  # a new array: obs is left as it was


def test_step_gives_one_steps_transitions() -> None:
    batch, expected = make_batch(seed=3)
    for t in range(T):
        obs, actions, rewards, next_obs, terminated, truncated = batch.step(t)
        for key in expected:
            np.testing.assert_array_equal(obs[key], batch.obs[key][t])
            np.testing.assert_array_equal(next_obs[key], expected[key][t], err_msg=f"step {t}: {key}")
        np.testing.assert_array_equal(actions, np.arange(t * B, (t + 1) * B))
        assert rewards.shape == terminated.shape == truncated.shape == (B,)
        assert set(np.flatnonzero(terminated)) == {b for (s, b) in TERMINATED if s == t}
        assert set(np.flatnonzero(truncated)) == {b for (s, b) in TRUNCATED if s == t}


def test_transitions_are_every_step_in_rows_t_times_b_plus_b() -> None:
    batch, expected = make_batch(seed=5)
    obs, actions, rewards, next_obs, terminated, truncated = batch.transitions()
    assert actions.tolist() == list(range(T * B)) and rewards.shape == terminated.shape == truncated.shape == (T * B,)
    for key in expected:
        np.testing.assert_array_equal(obs[key], batch.obs[key][:T].reshape(T * B, *batch.obs[key].shape[2:]))
        np.testing.assert_array_equal(next_obs[key], expected[key].reshape(T * B, *expected[key].shape[2:]))
    assert set(np.flatnonzero(terminated)) == {t * B + b for t, b in TERMINATED}
    assert set(np.flatnonzero(truncated)) == {t * B + b for t, b in TRUNCATED}
