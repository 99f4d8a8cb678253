"""benchmarks/time_to_threshold.py: crossings of the 20-episode mean, medians with misses, variants, one tiny run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_time_to_threshold_crossings_and_peer_ratios() -> None:
    """20-episode window: 19 returns of 500 are not a mean yet; the 20th (440) gives (19*500 + 440)/20 = 497:
    both 450 and 475 are reached then. Peer ratio = peer's median time / rlrun's = 30 / 20 = 1.5."""
    from benchmarks.time_to_threshold import Crossings, summarize

    c = Crossings((450.0, 475.0), start=0.0)
    c.add([500.0] * 19, env_steps=1000)
    assert c.reached == {} and not c.done
    c.add([440.0], env_steps=1100)
    assert c.done and {thr: steps for thr, (_, steps) in c.reached.items()} == {450.0: 1100, 475.0: 1100}

    def runs(*times: float | None) -> list[Crossings]:
        out = []
        for t in times:
            r = Crossings((450.0,), 0.0)
            if t is not None:
                r.reached[450.0] = (t, int(t * 1000))
            out.append(r)
        return out

    figures = summarize({"rlrun_dqn": runs(20.0, 25.0, None), "sb3_ppo": runs(30.0, 31.0, 29.0)}, (450.0,))
    assert figures["time_s/rlrun_dqn/450"] == 25.0 and figures["fraction_reached/rlrun_dqn/450"] == round(2 / 3, 4)
    assert figures["time_s/sb3_ppo/450"] == 30.0 and figures["env_steps/sb3_ppo/450"] == 30000
    assert figures["ratio/time_to_450/sb3_ppo_over_rlrun_dqn"] == pytest.approx(30.0 / 25.0)


def test_medians_with_misses() -> None:
    """Seeds reaching a threshold in [10, miss, 30] s: median of [10, inf, 30] = 30; [miss, miss, 5]: a miss."""
    from benchmarks.time_to_threshold import _median_or_none

    assert _median_or_none([10.0, None, 30.0]) == 30.0 and _median_or_none([None, None, 5.0]) is None


def test_time_to_threshold_variants_parse_and_refuse_other_forms() -> None:
    from benchmarks.time_to_threshold import parse_variant

    assert parse_variant("copies_10:env.vectorization=copies  algo.num_epochs=10") == (
        "copies_10", ("env.vectorization=copies", "algo.num_epochs=10"))
    for bad in ("no_colon", ":algo.lr=1", "name:", "name:algo.lr", "a@b:algo.lr=1", "a/b:algo.lr=1"):
        with pytest.raises(SystemExit, match="NAME:key=value"):
            parse_variant(bad)


def test_time_to_threshold_runs_a_variant_beside_the_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PPO on CartPole to a mean of 20 (reached within 2,048 env steps), the preset (8 copies: 256 env steps an
    iteration) and a variant on 5 env copies (160): both contenders, the variant's overrides applied and in the record,
    and the means over seeds that all reached it."""
    from benchmarks.common import OUT_ENV
    from benchmarks.time_to_threshold import main

    monkeypatch.setenv(OUT_ENV, str(tmp_path / "record.json"))
    figures = main(["--algos", "ppo", "--seeds", "0,1", "--peers", "off", "--budget-env-steps", "2048",
                    "--thresholds", "20", "--variant", "copies:env.vectorization=copies executor.num_envs=5"])
    assert figures["variant/copies"] == "env.vectorization=copies executor.num_envs=5"
    for who in ("rlrun_ppo", "rlrun_ppo:copies"):
        assert figures[f"fraction_reached/{who}/20"] == 1.0
        seeds = figures[f"time_s/{who}/20/seeds"]
        assert figures[f"time_s_mean/{who}/20"] == pytest.approx(sum(seeds) / 2, abs=0.01)
    assert all(n % 256 == 0 for n in figures["env_steps/rlrun_ppo/20/seeds"])
    assert all(n % 160 == 0 for n in figures["env_steps/rlrun_ppo:copies/20/seeds"])
    assert json.loads((tmp_path / "record.json").read_text())["benchmark"] == "time_to_threshold"
