"""The run loop's stop conditions (rlrun/app/run.py: ``StopConditions``, ``RunLoop.stop_reason``)."""

from __future__ import annotations

from types import SimpleNamespace

from omegaconf import DictConfig

from rlrun.app.run import RunLoop, StopConditions
from rlrun.config import compose


def test_stop_conditions_are_resolved_once_into_plain_values():
    """``stop.episode_return_mean`` defaults to an interpolation of the env's solved return: the loop holds its
    value (CartPole-v1: 475), not a config node that would parse the interpolation again at every check."""
    cfg = compose(["stop.env_steps=300"])
    stop = StopConditions.from_config(cfg.stop)
    assert stop == StopConditions(env_steps=300, gradient_steps=None, wall_time_s=None, episode_return_mean=475)
    assert not any(isinstance(v, DictConfig) for v in vars(stop).values())


def test_the_loop_stops_at_the_first_condition_reached():
    cfg = compose(["stop.env_steps=300", "stop.episode_return_mean=100", "return_window=2"])
    loop = RunLoop(cfg, frame_skip=1)
    step = SimpleNamespace(env_steps=100, metrics={}, episode_returns=[150.0], episode_lengths=[150])
    loop.add(step)
    assert loop.stop_reason() is None  # one return in a window of 2
    loop.add(step)
    assert loop.stop_reason() == "episode_return_mean"
    loop = RunLoop(compose(["stop.env_steps=300", "stop.episode_return_mean=null"]), frame_skip=1)
    for _ in range(3):
        assert loop.stop_reason() is None
        loop.add(step)
    assert loop.stop_reason() == "env_steps"
