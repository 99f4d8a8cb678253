"""The env protocol card (rlrun/envs/protocol.py): every switch of the Atari protocol shows in the card, the card is
plain JSON, and each factory's card names the package versions that simulate its env."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from rlrun.config import AtariEnvConfig
from rlrun.envs.atari import AtariEnvFactory
from rlrun.envs.gym_env import GymEnvFactory
from rlrun.fingerprint import package_versions

ATARI_KEYS = {"env_id", "env_factory", "backend", "game", "versions", "frame_skip", "max_pool",
              "sticky_action_probability", "action_set", "num_actions", "max_episode_frames", "max_episode_steps",
              "life_loss", "reward_clipping", "noop_max", "frame_size", "grayscale", "frame_stack", "observation",
              "score", "units"}


def card(**overrides) -> dict:
    cfg = OmegaConf.structured(AtariEnvConfig(game=overrides.pop("game", "Pong"), **overrides))
    return AtariEnvFactory(cfg).protocol_card()


def test_default_card_is_the_deepmind_protocol() -> None:
    """Pong with the defaults: 4 frames per agent step, max-pooled; no sticky actions; minimal set (6 actions);
    108,000 frames = 108000 / 4 = 27,000 agent steps; life loss terminal; sign clipping; 30 no-ops; 84x84 gray x 4."""
    c = card()
    assert set(c) == ATARI_KEYS
    assert c["env_id"] == "ALE/Pong-v5" and c["game"] == "Pong" and c["backend"] == "gymnasium"
    assert (c["frame_skip"], c["max_pool"], c["sticky_action_probability"], c["action_set"], c["num_actions"]) == \
        (4, True, 0.0, "minimal", 6)
    assert (c["max_episode_frames"], c["max_episode_steps"]) == (108_000, 27_000)
    assert c["life_loss"].startswith("terminal for training") and c["reward_clipping"] == "sign"
    assert (c["noop_max"], c["frame_size"], c["grayscale"], c["frame_stack"]) == (30, [84, 84], True, 4)
    assert c["observation"]["shape"] == [4, 84, 84]
    assert c["versions"] == package_versions(("gymnasium", "ale-py"))
    assert json.loads(json.dumps(c)) == c, "the card is plain JSON"


@pytest.mark.parametrize("overrides,key,value", [
    ({"full_action_space": True}, "action_set", "full"),
    ({"full_action_space": True}, "num_actions", 18),
    ({"repeat_action_probability": 0.25}, "sticky_action_probability", 0.25),
    ({"terminal_on_life_loss": False}, "life_loss", "not terminal"),
    ({"clip_rewards": False}, "reward_clipping", "none"),
    ({"max_episode_frames": None}, "max_episode_steps", None),
    ({"frame_skip": 3, "max_episode_frames": 100}, "max_episode_steps", 34),  # ceil(100 / 3)
    ({"frame_skip": 1}, "max_pool", False),  # nothing to pool with one frame per step
    ({"noop_max": 0}, "noop_max", 0),
    ({"screen_size": 64, "grayscale": False, "frame_stack": 2}, "observation",
     {"shape": [6, 64, 64], "dtype": "uint8", "layout": "channel-first, oldest first"}),
])
def test_each_switch_shows_in_the_card(overrides: dict, key: str, value) -> None:
    assert card(**overrides)[key] == value


def test_envpool_card_names_envpool() -> None:
    pytest.importorskip("envpool")
    c = card(backend="envpool")
    assert c["backend"] == "envpool" and c["versions"]["envpool"] == package_versions(("envpool",))["envpool"]


def test_gym_card_is_plain_json() -> None:
    c = GymEnvFactory(OmegaConf.create({"name": "gym", "id": "CartPole-v1", "max_episode_steps": None,
                                        "frame_skip": 1, "kwargs": {"sutton_barto_reward": True}})).protocol_card()
    assert json.loads(json.dumps(c)) == c
    assert c["env_kwargs"] == {"sutton_barto_reward": True}
