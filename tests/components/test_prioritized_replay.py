"""Tests for PrioritizedReplayMemory (Schaul et al. 2016, Eq. 1-2): built alone from a record space with
ComponentTest, sampling frequencies against P(i) = p_i^alpha / sum_k p_k^alpha, importance weights worked by hand,
the max-priority rule, priority updates, ring-buffer overwrite and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.components.prioritized_replay import PrioritizedReplayMemory
from rlrun.components.testing import ComponentTest

SCALAR = sp.Box(-np.inf, np.inf, (), np.float32)
RECORDS = sp.Dict({"obs": sp.Box(-10, 10, (2,), np.float32), "action": sp.Discrete(3), "reward": SCALAR})


def records(ids):
    """Records whose obs[0] is the given id, so a sampled record tells which one it is."""
    ids = torch.as_tensor(ids, dtype=torch.float32)
    return {"obs": torch.stack([ids, -ids], dim=1), "action": ids.long() % 3, "reward": ids * 0.5}


def memory(capacity, **kwargs):
    mem = PrioritizedReplayMemory(capacity, **kwargs)
    return mem, ComponentTest(mem, {"records": RECORDS}, batch_shape=(5,))


def draw_counts(mem, n_items, draws, batch_size):
    counts = np.zeros(n_items)
    for _ in range(draws // batch_size):
        batch, idx, _ = mem.sample(batch_size)
        # the records returned are the ones stored at the returned slots
        torch.testing.assert_close(batch["obs"][:, 0], idx.float())
        counts += np.bincount(idx.numpy(), minlength=n_items)
    return counts


def chi_square(counts, probs):
    expected = counts.sum() * np.asarray(probs)
    return float(((counts - expected) ** 2 / expected).sum())


def test_component_test_insert_and_sample_fit_the_declared_spaces():
    mem, test = memory(16)
    slots = test.call("insert")  # 5 records sampled from RECORDS
    assert slots.tolist() == [0, 1, 2, 3, 4]
    assert test.call("size") == 5
    out = test.call("sample", batch_size=7)
    sp.check(mem.output_spaces["sample"], out, batch_ranks=1, where="sample()")
    batch, idx, weights = out
    assert idx.dtype == torch.int64 and weights.dtype == torch.float32
    assert torch.all(idx < 5) and torch.all((weights > 0) & (weights <= 1))
    # all priorities equal (the initial max priority 1): uniform, every weight 1
    torch.testing.assert_close(weights, torch.ones(7))
    test.call("update_priorities", indices=idx, td_errors=torch.randn(7))
    assert [c.method for c in test.calls] == ["update_priorities"]


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("batch_size", [1, 32])
def test_sampling_frequencies_converge_to_priority_proportions(alpha, batch_size):
    """Priorities p = [1, 2, 3, 4] (eps=0); P(i) = p_i^alpha / sum_k p_k^alpha.

    alpha=1: [0.1, 0.2, 0.3, 0.4]; alpha=0: uniform. Chi-square with 3 degrees of freedom over 1200-3000 draws must
    stay below 16.3 (its 99.9% quantile); the seed makes the outcome deterministic.
    """
    mem, _ = memory(4, alpha=alpha, eps=0.0, seed=1)
    mem.insert(records([0, 1, 2, 3]))
    mem.update_priorities(torch.arange(4), torch.tensor([1.0, -2.0, 3.0, -4.0]))  # |td| is used
    probs = np.array([1.0, 2.0, 3.0, 4.0]) ** alpha
    probs /= probs.sum()
    torch.testing.assert_close(mem.probabilities(), torch.from_numpy(probs))
    counts = draw_counts(mem, 4, 3008 if batch_size == 32 else 1200, batch_size)
    assert chi_square(counts, probs) < 16.3, (counts, probs)


def test_a_skewed_distribution_is_not_mistaken_for_the_target():
    """Guard that the chi-square check above can fail: the draws of a memory whose priorities were never updated
    (all equal, so uniform) are rejected against P = [0.1, 0.2, 0.3, 0.4] (expected counts 300, 600, 900, 1200
    out of 3008 draws; about 750 of each drawn: chi-square about 900)."""
    mem, _ = memory(4, alpha=1.0, eps=0.0, seed=1)
    mem.insert(records([0, 1, 2, 3]))
    counts = draw_counts(mem, 4, 3008, 32)
    assert chi_square(counts, [0.1, 0.2, 0.3, 0.4]) > 16.3, counts


def test_importance_weights_hand_worked():
    """3 items with priorities 1, 2, 3; alpha = 1, beta = 1; N = 3.

    P = [1/6, 2/6, 3/6]; N * P = [0.5, 1, 1.5]; w = (N P)^-1 = [2, 1, 2/3]; max w = 2 (the smallest P, from the
    min tree); normalised w = [1, 0.5, 1/3].
    """
    mem, _ = memory(8, alpha=1.0, beta_start=1.0, beta_end=1.0, eps=0.0)
    mem.insert(records([0, 1, 2]))
    mem.update_priorities([0, 1, 2], [1.0, 2.0, 3.0])
    expected = torch.tensor([1.0, 0.5, 1.0 / 3.0])
    seen = set()
    for _ in range(20):
        _, idx, weights = mem.sample(3)
        torch.testing.assert_close(weights, expected[idx])
        seen |= set(idx.tolist())
    assert seen == {0, 1, 2}


def test_beta_is_annealed_linearly_by_sample_calls():
    """Priorities 1, 2, 3 as above with alpha = 1 and beta from 0.4 to 1.0 over 4 sample() calls.

    w_i = (P_min / P_i)^beta = (1 / p_i)^beta; at call t, beta = 0.4 + 0.15 t, held at 1.0 from t = 4 on.
    Item 1 (p = 2): t=0: 2^-0.4 = 0.7579; t=2: 2^-0.7 = 0.6156; t>=4: 1/2.
    Item 2 (p = 3): t=0: 3^-0.4 = 0.6444; t=2: 3^-0.7 = 0.4635; t>=4: 1/3.
    """
    mem, _ = memory(8, alpha=1.0, beta_start=0.4, beta_end=1.0, beta_steps=4, eps=0.0)
    mem.insert(records([0, 1, 2]))
    mem.update_priorities([0, 1, 2], [1.0, 2.0, 3.0])
    p = torch.tensor([1.0, 2.0, 3.0])
    hand_worked = {0: [1.0, 0.7579, 0.6444], 2: [1.0, 0.6156, 0.4635], 4: [1.0, 0.5, 1.0 / 3.0]}
    for t in range(7):
        beta = min(0.4 + 0.15 * t, 1.0)
        assert int(mem.timestep) == t and mem.beta() == pytest.approx(beta)
        _, idx, weights = mem.sample(6)
        torch.testing.assert_close(weights, (1.0 / p[idx]) ** beta)
        if t in hand_worked:
            torch.testing.assert_close(weights, torch.tensor(hand_worked[t])[idx], rtol=0, atol=1e-4)


def test_new_items_get_the_running_max_priority():
    """alpha = 0.5, eps = 0. Initial max priority 1 -> leaf 1^0.5 = 1. After |td| = 9 the max is 9 -> new leaves
    9^0.5 = 3. Lowering every priority later (|td| = 0.25, leaf 0.5) does not lower the max: new leaves stay 3."""
    mem, _ = memory(8, alpha=0.5, eps=0.0)
    mem.insert(records([0, 1]))
    assert mem.sum_tree.leaves()[:2].tolist() == [1.0, 1.0]
    mem.update_priorities([0, 1], [9.0, -4.0])
    assert mem.sum_tree.leaves()[:2].tolist() == [3.0, 2.0]
    mem.insert(records([2]))
    assert mem.sum_tree.leaves()[2] == 3.0
    mem.update_priorities([0, 1, 2], [0.25, 0.25, 0.25])
    mem.insert(records([3, 4]))
    assert mem.sum_tree.leaves()[:5].tolist() == [0.5, 0.5, 0.5, 3.0, 3.0]
    assert mem.sum_tree.sum() == 7.5 and mem.min_tree.min() == 0.5
    assert mem.max_priority == 9.0


def test_insert_with_td_errors_sets_those_priorities():
    mem, _ = memory(8, alpha=1.0, eps=0.5)
    mem.insert(records([0, 1, 2]), td_errors=torch.tensor([1.0, -3.0, 0.0]))
    assert mem.sum_tree.leaves()[:3].tolist() == [1.5, 3.5, 0.5]
    assert mem.max_priority == 3.5


def test_update_priorities_changes_the_distribution():
    """Four items, equal priorities -> uniform. Then item 3 gets |td| = 97 (p = 97 + 1 = 98) and item 0 gets 0
    (p = 0 + 1 = 1) with eps = 1, alpha = 1: P = [1, 1, 1, 98] / 101 for items 0..3."""
    mem, _ = memory(4, alpha=1.0, eps=1.0, seed=3)
    mem.insert(records([0, 1, 2, 3]))
    torch.testing.assert_close(mem.probabilities(), torch.full((4,), 0.25, dtype=torch.float64))
    mem.update_priorities(torch.tensor([3, 0]), torch.tensor([97.0, 0.0]))
    probs = np.array([1.0, 1.0, 1.0, 98.0]) / 101.0
    torch.testing.assert_close(mem.probabilities(), torch.from_numpy(probs))
    counts = draw_counts(mem, 4, 2020, 20)
    assert counts[3] / counts.sum() == pytest.approx(98 / 101, abs=0.02)


def test_zero_priority_items_are_never_sampled_and_do_not_set_the_max_weight():
    """eps = 0, alpha = 1, beta = 1: priorities [0, 1, 4]. Item 0 is never drawn; P over the others is [1/5, 4/5]
    and the weights are normalised by the smallest positive priority: w = (1 / p)^1 = [1, 1/4]."""
    mem, _ = memory(4, alpha=1.0, beta_start=1.0, eps=0.0)
    mem.insert(records([0, 1, 2]))
    mem.update_priorities([0, 1, 2], [0.0, 1.0, 4.0])
    expected = torch.tensor([float("nan"), 1.0, 0.25])
    for _ in range(20):
        _, idx, weights = mem.sample(4)
        assert torch.all(idx > 0)
        torch.testing.assert_close(weights, expected[idx])


def test_ring_buffer_overwrite_updates_the_trees():
    """Capacity 4, alpha 1, eps 0. Items 0..3 get priorities [10, 1, 2, 3]; max priority 10. Inserting items 4, 5
    overwrites slots 0, 1 with the max priority: leaves [10, 10, 2, 3], sum 25, min 2."""
    mem, _ = memory(4, alpha=1.0, eps=0.0)
    mem.insert(records([0, 1, 2, 3]))
    mem.update_priorities([0, 1, 2, 3], [10.0, 1.0, 2.0, 3.0])
    slots = mem.insert(records([4, 5]))
    assert slots.tolist() == [0, 1]
    assert mem.size() == 4 and int(mem.index) == 2
    assert mem.sum_tree.leaves().tolist() == [10.0, 10.0, 2.0, 3.0]
    assert mem.sum_tree.sum() == 25.0 and mem.min_tree.min() == 2.0
    assert mem.store_obs[:, 0].tolist() == [4.0, 5.0, 2.0, 3.0]
    # Overwriting the low-priority slot 2 raises the minimum.
    mem.insert(records([6]))
    assert mem.min_tree.min() == 3.0


def test_insert_more_than_capacity_keeps_the_last_records():
    """Capacity 4, index at 1 after one insert; inserting 6 records (ids 1..6) one by one writes
    1->1, 2->2, 3->3, 4->0, 5->1, 6->2: slots hold [4, 5, 6, 3] and the index ends at (1 + 6) % 4 = 3."""
    mem, _ = memory(4)
    mem.insert(records([0]))
    slots = mem.insert(records([1, 2, 3, 4, 5, 6]))
    assert slots.tolist() == [3, 0, 1, 2]
    assert mem.store_obs[:, 0].tolist() == [4.0, 5.0, 6.0, 3.0]
    assert int(mem.index) == 3 and mem.size() == 4


def test_checkpoint_round_trip_restores_trees_generator_and_schedule():
    mem, _ = memory(8, alpha=0.7, seed=5)
    mem.insert(records(range(6)))
    mem.update_priorities([0, 3, 5], [2.0, 0.1, 7.0])
    mem.sample(4)
    state = mem.state_dict()
    other, _ = memory(8, alpha=0.7, seed=99)
    other.load_state_dict(state)
    assert other.max_priority == mem.max_priority and int(other.timestep) == 1
    np.testing.assert_array_equal(other.sum_tree.tree, mem.sum_tree.tree)
    np.testing.assert_array_equal(other.min_tree.tree, mem.min_tree.tree)
    for _ in range(3):
        a, b = mem.sample(5), other.sample(5)
        torch.testing.assert_close(a[1], b[1])
        torch.testing.assert_close(a[2], b[2])


def test_errors_name_the_memory():
    mem, _ = memory(4, eps=0.0)
    with pytest.raises(RuntimeError, match="memory: cannot sample from an empty memory"):
        mem.sample(2)
    mem.insert(records([0, 1]))
    with pytest.raises(IndexError, match=r"\[0, 2\)"):
        mem.update_priorities([2], [1.0])
    with pytest.raises(ValueError, match="finite"):
        mem.update_priorities([0], [float("nan")])
    with pytest.raises(ValueError, match="2 indices but 1 td_errors"):
        mem.update_priorities([0, 1], [1.0])
    mem.update_priorities([0, 1], [0.0, 0.0])
    with pytest.raises(RuntimeError, match="priority 0"):
        mem.sample(2)
    with pytest.raises(ValueError, match="capacity"):
        PrioritizedReplayMemory(0)
