"""benchmarks/sampling_limit.py: the serial limit, one round on CartPole."""

from __future__ import annotations

import pytest


def test_serial_limit_and_medians_with_misses() -> None:
    """Env 3000 steps/s and policy 1500/s one after the other: 1 / (1/3000 + 1/1500) = 1000 steps/s.
    Seeds reaching a threshold in [10, miss, 30] s: median of [10, inf, 30] = 30; [miss, miss, 5]: a miss."""
    from benchmarks.sampling_limit import serial_limit

    from benchmarks.time_to_threshold import _median_or_none

    assert serial_limit(3000.0, 1500.0) == pytest.approx(1000.0)
    assert _median_or_none([10.0, None, 30.0]) == 30.0 and _median_or_none([None, None, 5.0]) is None


def test_sampling_limit_measures_rlrun_beside_the_limit_and_a_hand_written_actor() -> None:
    """One round on CartPole x2, local executor: every side measured (rlrun with exploration on and off), and the
    fractions are the ratios of the measured speeds (one round: the medians are those speeds)."""
    from benchmarks.sampling_limit import measure, serial_limit

    f = measure("cartpole", 2, rounds=1, seconds=0.05, executors=["local"])
    speed = {side: f[f"cartpole/x2/env_steps_per_s/{side}"]
             for side in ("raw_env", "policy_forward", "serial_limit", "hand_written", "rlrun_local",
                          "rlrun_local_greedy")}
    assert all(v > 100 for v in speed.values()), speed
    assert speed["serial_limit"] == pytest.approx(serial_limit(speed["raw_env"], speed["policy_forward"]), rel=1e-3)
    assert f["fraction_of_limit/cartpole/x2/local"] == pytest.approx(speed["rlrun_local"] / speed["serial_limit"],
                                                                     rel=2e-3)
    assert f["fraction_of_limit/cartpole/x2/hand_written"] == pytest.approx(
        speed["hand_written"] / speed["serial_limit"], rel=2e-3)
    assert f["fraction_of_hand_written/cartpole/x2/local"] == pytest.approx(
        speed["rlrun_local"] / speed["hand_written"], rel=2e-3)
    assert f["fraction_of_limit/cartpole/x2/local_greedy"] == pytest.approx(
        speed["rlrun_local_greedy"] / speed["serial_limit"], rel=2e-3)
    shares = [f[f"time_share/cartpole/x2/local/{part}"] for part in ("env", "inference", "other")]
    assert sum(shares) == pytest.approx(1.0, abs=0.01)
