"""rlrun.execution.rollout: the learner's rollout, built from the sample batches of test_sample_batch (a nested Dict
observation space, episodes ending mid-batch and at its last step) and from the same steps observed one by one;
its next observations checked against those worked out step by step there."""

from __future__ import annotations

import numpy as np
import torch

from rlrun.execution.rollout import Rollout

from .test_sample_batch import OBS, B, T, make_batch

CPU = torch.device("cpu")


def flat(x: np.ndarray) -> torch.Tensor:
    """``[T, B, ...]`` -> ``[T * B, ...]``, row ``t * B + b``."""
    return torch.as_tensor(x.reshape(-1, *x.shape[2:]))


def with_log_prob(seed: int) -> tuple:
    batch, expected = make_batch(seed)
    batch.extras["log_prob"] = np.random.default_rng(seed).normal(size=(T, B)).astype(np.float32)
    return batch, expected


def test_one_batch_keeps_its_fields_and_answers_every_next_observation() -> None:
    batch, expected = with_log_prob(seed=0)
    r = Rollout.from_samples([batch], OBS, CPU)
    assert (r.num_steps, r.num_envs) == (T, B)
    for key in expected:
        np.testing.assert_array_equal(r.obs[key].numpy(), batch.obs[key][:T])
        np.testing.assert_array_equal(r.last_obs[key].numpy(), batch.obs[key][T])
    assert r.final_index.tolist() == batch.final_index().tolist()
    np.testing.assert_array_equal(r.done.numpy(), batch.done)
    np.testing.assert_array_equal(r.extras["log_prob"].numpy(), batch.extras["log_prob"])
    every = torch.arange(T * B)
    got = r.next_obs(every)
    for key in expected:
        torch.testing.assert_close(got[key], flat(expected[key]), rtol=0, atol=0, msg=key)
    rows = torch.tensor([1, 6, 8, 13, 14])  # three ended episodes, a step inside, the last step of copy 2
    got = r.next_obs(rows)
    for key in expected:
        torch.testing.assert_close(got[key], flat(expected[key])[rows], rtol=0, atol=0, msg=key)


def test_batches_of_two_workers_sit_side_by_side_along_b() -> None:
    """Worker 1's copies are copies B..2B-1 of the joined rollout: its ended step t * B + b is t * 2B + B + b, in
    ascending order among worker 0's."""
    (b0, e0), (b1, e1) = with_log_prob(seed=1), with_log_prob(seed=2)
    r = Rollout.from_samples([b0, b1], OBS, CPU)
    assert (r.num_steps, r.num_envs) == (T, 2 * B)
    renumbered = [t * 2 * B + b for t, b in zip(*divmod(b0.final_index(), B), strict=True)]
    renumbered += [t * 2 * B + B + b for t, b in zip(*divmod(b1.final_index(), B), strict=True)]
    assert r.final_index.tolist() == sorted(renumbered)
    np.testing.assert_array_equal(r.actions.numpy(), np.concatenate([b0.actions, b1.actions], axis=1))
    got = r.next_obs(torch.arange(T * 2 * B))
    for key in e0:
        torch.testing.assert_close(got[key], flat(np.concatenate([e0[key], e1[key]], axis=1)), rtol=0, atol=0)


def test_steps_observed_one_by_one_make_the_same_rollout() -> None:
    """What ``rlrun.make_agent`` collects (each step with its real next observation) equals the workers' form,
    except ``last_obs`` of a copy whose episode ended at the last step: the application's steps never show its reset
    observation, so there it holds the final one, which no next observation reads (``final_obs`` answers)."""
    batch, _ = with_log_prob(seed=3)
    steps = []
    for t in range(T):
        obs, actions, rewards, next_obs, terminated, truncated = batch.step(t)
        steps.append({"obs": obs, "next_obs": next_obs, "actions": actions, "rewards": rewards,
                      "terminated": terminated, "truncated": truncated, "log_prob": batch.extras["log_prob"][t]})
    a, b = Rollout.from_steps(steps, OBS, CPU), Rollout.from_samples([batch], OBS, CPU)
    went_on = torch.as_tensor(~batch.done[T - 1])  # copy 1 ended at the last step
    for key in OBS.spaces:
        for name in ("obs", "final_obs"):
            assert torch.equal(getattr(a, name)[key], getattr(b, name)[key]), (name, key)
        assert torch.equal(a.last_obs[key][went_on], b.last_obs[key][went_on]) and not went_on.all()
        assert torch.equal(a.next_obs(torch.arange(T * B))[key], b.next_obs(torch.arange(T * B))[key])
    for name in ("final_index", "actions", "rewards", "terminated", "truncated"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.extras.keys() == b.extras.keys() == {"log_prob"}
    assert torch.equal(a.extras["log_prob"], b.extras["log_prob"])


def test_rows_and_step_rows_are_flat_steps() -> None:
    batch, _ = make_batch()
    r = Rollout.from_samples([batch], OBS, CPU)
    assert r.step_rows(T - 1).tolist() == [(T - 1) * B + b for b in range(B)]
    assert r.rows(r.done).tolist() == r.final_index.tolist()
    scaled = r.replace(rewards=r.rewards * 2)  # what normalize_rollout does: the other fields are shared
    assert torch.equal(scaled.rewards, torch.full((T, B), 2.0)) and torch.equal(r.rewards, torch.ones(T, B))
    assert scaled.obs is r.obs and scaled.extras is r.extras
