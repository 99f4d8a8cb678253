"""rlrun.ops.epsilon_greedy against the same draws written out in torch ops: the same actions and the same random
stream on every shape, with ties and NaN, a float epsilon or one per row; the torch path where numpy cannot hold the
values (bfloat16); rates of exploration by count."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun.ops.epsilon_greedy import epsilon_greedy


def written_out(q: torch.Tensor, n: int, eps: float | torch.Tensor) -> torch.Tensor:
    """The stream's definition in torch ops: a uniform action per row, then a uniform in [0, 1) per row."""
    greedy = q.argmax(dim=-1)
    random = torch.randint(0, n, greedy.shape)
    return torch.where(torch.rand(greedy.shape) < eps, random, greedy)


@pytest.mark.parametrize("shape", [(), (1,), (8,), (3, 5)])
def test_the_same_actions_and_stream_as_the_torch_ops(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape))
    for trial in range(300):
        n = int(rng.integers(1, 7))
        q = torch.from_numpy(rng.integers(-2, 3, (*shape, n)).astype(np.float32))  # many ties
        if trial % 5 == 0:
            q.view(-1)[int(rng.integers(q.numel()))] = float("nan")
        eps: float | torch.Tensor = (float(rng.random()) if trial % 2 else
                                     torch.from_numpy(rng.random(shape).astype(np.float32)))
        seed = int(rng.integers(1 << 30))
        torch.manual_seed(seed)
        expected, after_expected = written_out(q, n, eps), torch.rand(2)
        torch.manual_seed(seed)
        got, after_got = epsilon_greedy(q, n, eps), torch.rand(2)
        assert got.dtype == torch.int64 and got.shape == shape
        assert torch.equal(got, expected) and torch.equal(after_got, after_expected)


def test_bfloat16_values_take_the_torch_path_with_the_same_draws() -> None:
    q = torch.tensor([[0.0, 1.0, 0.5], [2.0, -1.0, 2.0]], dtype=torch.bfloat16)
    torch.manual_seed(3)
    expected = written_out(q, 3, 0.5)
    torch.manual_seed(3)
    assert torch.equal(epsilon_greedy(q, 3, 0.5), expected)


def test_epsilon_zero_is_greedy_one_is_uniform_and_rows_keep_their_own_rate() -> None:
    torch.manual_seed(0)
    q = torch.tensor([[0.0, 5.0, 1.0, 2.0]]).repeat(40_000, 1)
    assert torch.equal(epsilon_greedy(q, 4, 0.0), torch.ones(40_000, dtype=torch.int64))
    counts = torch.bincount(epsilon_greedy(q, 4, 1.0), minlength=4).numpy() / 40_000
    assert np.allclose(counts, 0.25, atol=0.01)
    per_row = torch.tensor([0.0, 0.4], dtype=torch.float32).repeat(20_000)
    actions = epsilon_greedy(q, 4, per_row).numpy().reshape(20_000, 2)
    assert (actions[:, 0] == 1).all()
    assert abs((actions[:, 1] != 1).mean() - 0.4 * 3 / 4) < 0.015  # explores 40%, lands off the greedy 3/4 of it


def test_draws_first_made_inside_inference_mode_serve_calls_outside_it_and_in_other_threads() -> None:
    """The op reuses its draws' tensors per thread and shape: made under inference mode (a rollout), they must still
    take a call outside it (an evaluation, a user's call), with the same draws as the torch ops there."""
    import threading

    shape = (3, 7)  # a shape no other test used: its tensors are made here, under inference mode
    q = torch.zeros(*shape, 3)
    with torch.inference_mode():
        torch.manual_seed(5)
        inside = epsilon_greedy(q, 3, 0.5)
    torch.manual_seed(5)
    outside = epsilon_greedy(q.requires_grad_(), 3, 0.5)
    assert torch.equal(inside, outside)
    torch.manual_seed(5)
    assert torch.equal(outside, written_out(q.detach(), 3, 0.5))
    got: list[torch.Tensor] = []
    thread = threading.Thread(target=lambda: got.append(epsilon_greedy(q.detach(), 3, 1.0)))
    thread.start()
    thread.join()
    assert got[0].shape == shape and int(got[0].max()) < 3
