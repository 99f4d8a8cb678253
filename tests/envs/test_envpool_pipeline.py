"""Two-phase stepping of the envpool backend (rlrun/envs/envpool_env.py): ``step_async`` + ``step_wait`` is
``step``, and misuse (a second start, a wait without a start) fails loudly instead of hanging envpool."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from rlrun.config import AtariEnvConfig
from rlrun.envs.atari import AtariEnvFactory

envpool = pytest.importorskip("envpool", reason="envpool is an optional extra: pip install 'rlrun[envpool]'")


def factory(**overrides) -> AtariEnvFactory:  # noqa: ANN003
    cfg = dict(game="Breakout", backend="envpool", noop_max=1, envpool_threads=1, max_episode_frames=200)
    return AtariEnvFactory(OmegaConf.structured(AtariEnvConfig(**{**cfg, **overrides})))


def test_step_async_then_wait_is_step() -> None:
    """Two pools, same seeds, same random actions for 120 agent steps (games cut off after 200 frames = 50 agent
    steps, so every copy ends at least two games, and loses lives): one stepped with ``step``, the other with
    ``step_async``/``step_wait``. Observations, rewards, terminations, truncations, final observations, lives
    and game scores are identical at every step."""
    a, b = factory().make_vector(3), factory().make_vector(3)
    oa, _ = a.reset(seed=[5, 6, 7])
    ob, _ = b.reset(seed=[5, 6, 7])
    assert np.array_equal(oa, ob)
    rng = np.random.default_rng(0)
    games = 0
    for step in range(120):
        action = rng.integers(0, 4, 3)
        ra = a.step(action)
        b.step_async(action)
        rb = b.step_wait()
        for x, y in zip(ra[:4], rb[:4], strict=True):
            assert np.array_equal(x, y), f"step {step}"
        assert np.array_equal(ra[4]["lives"], rb[4]["lives"])
        if "final_info" in ra[4]:
            for i in np.flatnonzero(ra[2] | ra[3]):
                assert np.array_equal(ra[4]["final_obs"][i], rb[4]["final_obs"][i])
            fa, fb = ra[4]["final_info"], rb[4]["final_info"]
            assert np.array_equal(fa.get("game_score", []), fb.get("game_score", []))
            games += int(np.sum(fa.get("_game_score", 0)))
    assert games >= 6
    a.close()
    b.close()


def test_misuse_raises_and_reset_collects_a_step_in_flight() -> None:
    envs = factory().make_vector(2)
    envs.reset(seed=0)
    with pytest.raises(RuntimeError, match="step_async first"):
        envs.step_wait()
    envs.step_async(np.zeros(2, dtype=np.int64))
    with pytest.raises(RuntimeError, match="not been collected"):
        envs.step_async(np.zeros(2, dtype=np.int64))
    obs, _ = envs.reset()  # collects the step in flight first, then resets every copy
    assert obs.shape == (2, 4, 84, 84)
    envs.step_async(np.ones(2, dtype=np.int64))
    envs.close()  # with a step in flight: collected, then closed
    assert envs.pool is None
