"""benchmarks/component_overhead.py: its speed ratios."""

from __future__ import annotations

import pytest

from benchmarks.suite import _api_speed_ratios


def test_component_overhead_ratios_are_derived_as_speed_ratios() -> None:
    """t_api / t_bare - 1 = 0.25 (25% overhead) -> speed ratio 1 / 1.25 = 0.8; -0.2 -> 1.25 (faster)."""
    derived = _api_speed_ratios({"act_overhead/cartpole_mlp/batch1": 0.25, "act_overhead/atari/batch256": -0.2,
                                 "act_us/cartpole_mlp/batch1/api": 30.0})
    assert derived == {"ratio/act_speed_api_vs_bare/cartpole_mlp/batch1": pytest.approx(0.8),
                       "ratio/act_speed_api_vs_bare/atari/batch256": pytest.approx(1.25)}
