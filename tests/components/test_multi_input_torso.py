"""The multi-input torso, built from Dict and Tuple spaces alone: its output space, which torso reads each part,
that the action mask is no input, and ``algo.network=auto``'s choice."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.base import ComponentBuildError
from rlrun.components.networks import MLP, MinAtarCNN, MultiInputTorso, NatureCNN, auto_torso, make_torso

FRAME = sp.Box(0, 255, (3, 40, 40), np.uint8)  # >= 36 on a side: the Nature CNN
GRID = sp.Box(0, 1, (2, 5, 5), np.bool_)  # object channels: the MinAtar CNN
SPACE = sp.Dict({"frame": FRAME, "grid": GRID, "speed": sp.Box(-1, 1, (3,), np.float32), "mode": sp.Discrete(4),
                 "action_mask": sp.Box(0, 1, (6,), np.int8)})


def sample(space: sp.Space, n: int, seed: int = 0):  # noqa: ANN201 - a nest of tensors
    return sp.to_torch(space, sp.sample(space, (n,), seed=seed))


def test_each_part_goes_to_its_torso_and_the_features_are_concatenated_then_the_mlp() -> None:
    torso = MultiInputTorso([32, 16], "relu").build(obs=SPACE)
    assert torso.routes() == {"frame": "image_0", "grid": "image_1", "mode": "flatten", "speed": "flatten"}
    assert isinstance(torso.images["image_0"], NatureCNN) and isinstance(torso.images["image_1"], MinAtarCNN)
    assert torso.images["image_0"].input_spaces["obs"] == FRAME and torso.images["image_1"].input_spaces["obs"] == GRID
    # concatenation: 512 (Nature CNN) + 128 (MinAtar CNN) + 4 (Discrete one-hot) + 3 (vector) = 647 into the MLP
    assert torso.layers[0].in_features == 512 + 128 + 4 + 3
    assert torso.output_spaces["forward"] == sp.Box(-np.inf, np.inf, (16,), np.float32)
    seen = {}
    for name, image in torso.images.items():
        image.register_forward_hook(lambda m, args, out, name=name: seen.__setitem__(name, args[0]))
    obs = sample(SPACE, 5)
    out = torso(obs)
    assert out.shape == (5, 16)
    assert torch.equal(seen["image_0"], obs["frame"]) and torch.equal(seen["image_1"], obs["grid"])


def test_the_action_mask_is_no_input_and_every_other_part_is() -> None:
    torch.manual_seed(0)
    torso = MultiInputTorso([16]).build(obs=SPACE)
    obs = sample(SPACE, 4)
    assert_close(torso(obs), torso({**obs, "action_mask": 1 - obs["action_mask"]}))
    for key, other in (("speed", -obs["speed"]), ("mode", (obs["mode"] + 1) % 4), ("grid", ~obs["grid"]),
                       ("frame", 255 - obs["frame"])):
        assert not torch.allclose(torso(obs), torso({**obs, key: other})), key


def test_tuple_spaces_and_batch_ranks() -> None:
    space = sp.Tuple((GRID, sp.Box(0, 1, (2,), np.float32)))
    torso = MultiInputTorso([8]).build(obs=space)
    assert torso.routes() == {"0": "image_0", "1": "flatten"}
    grid, vec = sample(space, 6)
    assert torso((grid.reshape(2, 3, 2, 5, 5), vec.reshape(2, 3, 2))).shape == (2, 3, 8)  # time and batch ranks


def test_a_plain_space_is_refused_by_name() -> None:
    with pytest.raises(ComponentBuildError, match="multi_input.obs expects a Dict or Tuple"):
        MultiInputTorso().build(obs=FRAME)


def test_auto_chooses_from_the_space() -> None:
    assert auto_torso(SPACE) == "multi_input"
    vectors = sp.Dict({"observation": sp.Box(0, 1, (3, 3, 2), np.int8), "action_mask": sp.Box(0, 1, (9,), np.int8)})
    assert auto_torso(vectors) == "mlp"  # no image part: flattened and concatenated by the MLP
    assert auto_torso(sp.Dict({"action_mask": GRID, "x": sp.Box(0, 1, (2,))})) == "mlp"  # the mask is no image part
    assert isinstance(make_torso("auto", [8], "relu", obs=SPACE), MultiInputTorso)
    mlp = make_torso("auto", [8], "relu", obs=vectors).build(obs=vectors)
    assert isinstance(mlp, MLP) and mlp.layers[0].in_features == 18  # the 9-entry mask is not an input
