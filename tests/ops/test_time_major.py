"""Tests for rlrun.ops.time_major: flatten_time, map_nest and next_obs_rows on tensors and nests."""

from __future__ import annotations

import torch

from rlrun.ops import flatten_time, map_nest, next_obs_rows


def test_row_t_times_b_plus_b_is_step_t_of_copy_b():
    T, B = 3, 4
    x = torch.arange(T * B * 2, dtype=torch.float32).reshape(T, B, 2)
    flat = flatten_time(x)
    assert flat.shape == (T * B, 2)
    for t in range(T):
        for b in range(B):
            assert torch.equal(flat[t * B + b], x[t, b])


def test_rank_two_becomes_rank_one():
    x = torch.tensor([[1, 2], [3, 4], [5, 6]])
    assert torch.equal(flatten_time(x), torch.tensor([1, 2, 3, 4, 5, 6]))


def test_nests_keep_their_structure_and_container_types():
    """Dicts, tuples and lists are rebuilt as they were, every leaf flattened alone (image leaves keep [C, H, W])."""
    T, B = 2, 3
    nest = {"image": torch.zeros(T, B, 1, 4, 4, dtype=torch.uint8),
            "pair": (torch.ones(T, B), [torch.arange(T * B).reshape(T, B, 1)])}
    flat = flatten_time(nest)
    assert set(flat) == {"image", "pair"}
    assert flat["image"].shape == (T * B, 1, 4, 4) and flat["image"].dtype == torch.uint8
    assert isinstance(flat["pair"], tuple) and isinstance(flat["pair"][1], list)
    assert flat["pair"][0].shape == (T * B,)
    assert torch.equal(flat["pair"][1][0], torch.arange(T * B).reshape(T * B, 1))


# ---------------------------------------------------------------------------------------------------- next_obs_rows


def _rollout(T: int, B: int, done: list[tuple[int, int]]) -> tuple:
    """Observations numbered so every one is distinct: acted on ``obs[t, b] = 10 t + b``, the last ``10 T + b``,
    the final observation of an episode that ended at (t, b) ``-(10 t + b) - 1``; and, by hand, every step's next
    observation (``obs[t + 1, b]``, ``last[b]`` at T - 1, the final one where an episode ended)."""
    obs = torch.tensor([[[10.0 * t + b] for b in range(B)] for t in range(T)])
    last = torch.tensor([[10.0 * T + b] for b in range(B)])
    ended = sorted(t * B + b for t, b in done)
    final = torch.tensor([[-(10.0 * (i // B) + i % B) - 1] for i in ended]).reshape(len(ended), 1)
    expected = torch.cat([obs[1:], last[None]])
    for t, b in done:
        expected[t, b] = -(10.0 * t + b) - 1
    return obs, last, final, torch.tensor(ended, dtype=torch.int64), expected


def test_next_obs_rows_reads_the_next_step_the_last_observation_or_the_final_one() -> None:
    T, B = 4, 3
    obs, last, final, index, expected = _rollout(T, B, done=[(0, 2), (1, 0), (3, 1), (3, 2)])
    every = torch.arange(T * B)
    torch.testing.assert_close(next_obs_rows(obs, last, final, index, every), expected.reshape(T * B, 1))
    rows = torch.tensor([11, 1, 3, 9, 2])  # any order, any subset: the last step, mid-rollout, an ended episode
    torch.testing.assert_close(next_obs_rows(obs, last, final, index, rows), expected.reshape(T * B, 1)[rows])


def test_next_obs_rows_without_ended_episodes_and_on_nests() -> None:
    T, B = 3, 2
    obs, last, final, index, expected = _rollout(T, B, done=[])
    nest = {"x": obs, "pair": (obs * 2, obs.to(torch.int64))}
    got = next_obs_rows(nest, {"x": last, "pair": (last * 2, last.to(torch.int64))},
                        {"x": final, "pair": (final * 2, final.to(torch.int64))}, index, torch.arange(T * B))
    flat = expected.reshape(T * B, 1)
    torch.testing.assert_close(got["x"], flat)
    torch.testing.assert_close(got["pair"][0], flat * 2)
    assert got["pair"][1].dtype == torch.int64 and torch.equal(got["pair"][1], flat.to(torch.int64))


def test_map_nest_keeps_structure() -> None:
    out = map_nest(lambda a, b: a + b, {"a": (1, [2])}, {"a": (10, [20])})
    assert out == {"a": (11, [22])}
