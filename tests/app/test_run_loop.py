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


def test_the_loop_reports_the_sum_of_every_return_and_a_resume_keeps_it():
    """``episode/return_total`` sums every finished episode's return (the window forgets, the total does not), and
    a checkpoint's loop state carries it on."""
    from rlrun.metric_names import EPISODES, RETURN_MEAN, RETURN_TOTAL

    cfg = compose(["stop.env_steps=1000", "return_window=2"])
    loop = RunLoop(cfg, frame_skip=1)
    for returns in ([1.0, 2.0], [], [10.0], [-4.5]):
        loop.add(SimpleNamespace(env_steps=10, metrics={}, episode_returns=returns, episode_lengths=[5] * len(returns)))
    metrics = loop.report({})
    assert metrics[RETURN_TOTAL] == 8.5 and metrics[EPISODES] == 4 and metrics[RETURN_MEAN] == 2.75
    resumed = RunLoop(cfg, frame_skip=1)
    resumed.load_state_dict(loop.state_dict())
    resumed.add(SimpleNamespace(env_steps=10, metrics={}, episode_returns=[1.5], episode_lengths=[5]))
    assert resumed.report({})[RETURN_TOTAL] == 10.0
