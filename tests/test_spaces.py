"""Spaces alone: sampling with batch/time ranks, nests, torch conversion, checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlrun import spaces as sp

NESTED = sp.Dict({"img": sp.Box(0, 255, (2, 3), np.uint8),
                  "aux": sp.Tuple((sp.Discrete(5), sp.Box(-1.0, 1.0, (4,), np.float32)))})


@pytest.mark.parametrize("batch_shape", [(), (7,), (3, 2)])
def test_sample_has_batch_ranks_and_fits_the_space(batch_shape: tuple[int, ...]) -> None:
    value = sp.sample(NESTED, batch_shape, seed=1)
    assert value["img"].shape == (*batch_shape, 2, 3) and value["img"].dtype == np.uint8
    assert value["aux"][0].shape == batch_shape and value["aux"][0].dtype == np.int64
    assert ((0 <= value["aux"][0]) & (value["aux"][0] < 5)).all()
    assert (np.abs(value["aux"][1]) <= 1.0).all()
    sp.check(NESTED, value, batch_ranks=len(batch_shape))


def test_sampling_is_seeded() -> None:
    a, b = sp.sample(NESTED, (4,), seed=3), sp.sample(NESTED, (4,), seed=3)
    np.testing.assert_array_equal(a["aux"][1], b["aux"][1])


def test_flatten_unflatten_roundtrip() -> None:
    assert list(sp.flatten_space(NESTED)) == ["aux/0", "aux/1", "img"]  # gymnasium sorts Dict keys
    value = sp.sample(NESTED, (2,), seed=0)
    flat = sp.flatten(NESTED, value)
    back = sp.unflatten(NESTED, flat)
    np.testing.assert_array_equal(back["aux"][1], value["aux"][1])
    assert isinstance(back["aux"], tuple)


def test_cat_joins_nested_values_leaf_by_leaf() -> None:
    """Batches of 2, 0 and 3 rows of a nested space give one of 5, each leaf in order; an empty batch adds nothing."""
    parts = [sp.to_torch(NESTED, sp.sample(NESTED, (k,), seed=k)) for k in (2, 0, 3)]
    joined = sp.cat(NESTED, parts)
    sp.check(NESTED, joined, batch_ranks=1)
    assert joined["img"].shape == (5, 2, 3) and isinstance(joined["aux"], tuple)
    assert torch.equal(joined["aux"][1], torch.cat([parts[0]["aux"][1], parts[2]["aux"][1]]))
    assert torch.equal(joined["img"][2:], parts[2]["img"])


def test_as_numpy_takes_arrays_numbers_and_tensors_that_need_grad() -> None:
    weights = torch.ones(3, requires_grad=True)
    out = sp.as_numpy(weights * 2)
    assert isinstance(out, np.ndarray) and out.tolist() == [2.0, 2.0, 2.0]
    assert sp.as_numpy([1, 2]).tolist() == [1, 2] and sp.as_numpy(3.5).shape == ()


def test_flatten_and_unflatten_leave_no_reference_cycle_holding_the_values() -> None:
    """The values are freed as soon as the caller drops them (a self-calling closure would keep them in a cycle
    until the cyclic collector ran: rollout frames piling up between collections)."""
    import gc
    import weakref

    value = sp.sample(NESTED, (4,), seed=0)
    ref = weakref.ref(value["img"])
    gc.disable()
    try:
        rebuilt = sp.unflatten(NESTED, sp.flatten(NESTED, value))
        assert rebuilt["img"] is value["img"]
        del value, rebuilt
        assert ref() is None
    finally:
        gc.enable()


def test_to_torch_uses_the_space_dtypes() -> None:
    t = sp.to_torch(NESTED, sp.sample(NESTED, (2,), seed=0))
    assert t["img"].dtype == torch.uint8 and t["aux"][0].dtype == torch.int64 and t["aux"][1].dtype == torch.float32


def test_check_names_the_leaf_and_the_problem() -> None:
    value = sp.sample(NESTED, (2,), seed=0)
    value["aux"] = (value["aux"][0], value["aux"][1][:, :3])
    with pytest.raises(sp.SpaceError, match=r"obs\[aux/1\] has shape \(2, 3\), expected 1 batch rank\(s\) \+ \(4,\)"):
        sp.check(NESTED, value, where="obs")
    with pytest.raises(sp.SpaceError, match="dtype"):
        sp.check(sp.Box(0, 1, (2,), np.float32), np.zeros((1, 2), np.float64))


def test_same_and_describe() -> None:
    assert sp.same(sp.Box(0, 1, (3,), np.float32), sp.Box(-5, 5, (3,), np.float32))
    assert not sp.same(sp.Box(0, 1, (3,), np.float32), sp.Box(0, 1, (4,), np.float32))
    assert not sp.same(sp.Discrete(3), sp.Discrete(4))
    assert sp.describe(NESTED) == "Dict(aux: Tuple(Discrete(5), Box(4,) float32), img: Box(2, 3) uint8)"
    assert sp.flat_dim(sp.Box(0, 1, (2, 3))) == 6 and sp.flat_dim(sp.Discrete(9)) == 1
