"""The peers benchmark's TD3 task (benchmarks/peers/td3_task.py, ``mujoco_td3``): how each contender's episode ends
are read, how the training window's speed is taken from them, that both contenders run CleanRL's settings, and
rlrun's contender on HalfCheetah-v5 for real at a tiny budget. CleanRL's script runs only where its venv is made."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.peers import td3_task as tt
from benchmarks.peers.td3_task import TD3Run, episode_end, measure, summarize

ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def test_episode_ends_are_read_from_both_contenders() -> None:
    assert episode_end('{"episodes": [-300.5], "env_steps": 1000}\n') == 1000
    assert episode_end('{"episodes": [], "env_steps": 1001}\n') is None  # a training step without an episode end
    # CleanRL counts global_step from 0: its first 1,000-step episode ends at global_step=999
    assert episode_end("global_step=999, episodic_return=[-312.45]\n") == 1000
    assert episode_end("SPS: 61\n") is None and episode_end("model saved\n") is None


def test_training_speed_is_the_window_after_the_first_full_training_episode() -> None:
    starts = tt.LEARNING_STARTS
    # episodes end every 1,000 steps: the random warm-up fast, training at 50 steps/s from `starts` on
    ends = [(0.1 * k, 1000 * k) for k in range(1, starts // 1000 + 1)]
    t0 = ends[-1][0]
    ends += [(t0 + 20.0 * k, starts + 1000 * k) for k in range(1, 6)]
    run = TD3Run(wall_s=200.0, episode_ends=ends)
    assert run.env_steps == starts + 5000
    # from the end of the first whole training episode (starts + 1000, at t0 + 20) to the last (t0 + 100)
    assert run.training_steps_per_s == pytest.approx(4000 / 80.0)
    assert TD3Run(episode_ends=ends[:-4]).training_steps_per_s is None  # one point in the window: no speed


def test_medians_and_the_ratio_by_hand() -> None:
    def run(rate: float, wall: float, error: str | None = None) -> TD3Run:
        base = tt.LEARNING_STARTS + 1000
        return TD3Run(wall_s=wall, peak_rss_mib=300.0, error=error,
                      episode_ends=[(10.0, base), (10.0 + 1000 / rate, base + 1000)])

    row = summarize([run(60.0, 100.0), run(50.0, 120.0), run(40.0, 130.0), run(1.0, 1.0, error="exit 1")])
    assert row["training_steps_per_s"] == 50.0 and row["wall_s"] == 120.0
    assert row["fraction_completed"] == 0.75 and row["per_seed"]["errors"][3] == "exit 1"


def test_a_run_is_timed_and_a_short_one_says_why(tmp_path: Path) -> None:
    path = tmp_path / "contender.py"
    path.write_text(textwrap.dedent("""
        import json
        for k in range(1, 4):
            print(json.dumps({"episodes": [-1.0], "env_steps": 1000 * k}), flush=True)
    """))
    done = measure([sys.executable, str(path)], 3000, 60.0, tmp_path, ENV)
    assert done.error is None and [s for _, s in done.episode_ends] == [1000, 2000, 3000] and done.wall_s > 0
    short = measure([sys.executable, str(path)], 5000, 60.0, tmp_path, ENV)
    assert short.error == "ended after 3000 of 5000 env steps"


def test_both_contenders_run_cleanrls_td3_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from benchmarks.peers import venvs
    from benchmarks.peers.contenders.rlrun_td3_halfcheetah import overrides
    from rlrun.config import compose

    a = compose(overrides(0, 15_000, tt.LEARNING_STARTS)).algo
    # CleanRL td3_continuous_action.py's Args, by hand
    assert [a.actor_lr, a.critic_lr, a.gamma, a.tau, a.batch_size, a.buffer_size, a.policy_delay,
            a.exploration_noise, a.policy_noise, a.noise_clip, list(a.hidden_sizes), a.activation] == [
        3e-4, 3e-4, 0.99, 0.005, 256, 1_000_000, 2, 0.1, 0.2, 0.5, [256, 256], "relu"]
    assert a.learning_starts == tt.LEARNING_STARTS
    assert {"cleanrl/td3_continuous_action.py", "cleanrl_utils/buffers.py"} <= set(venvs.PEERS["cleanrl"].scripts)
    monkeypatch.setattr(venvs, "script", lambda peer, name: tmp_path / name)
    assert tt.command("cleanrl", "/venv/bin/python", 2, 15_000) == [
        "/venv/bin/python", str(tmp_path / "cleanrl" / "td3_continuous_action.py"), "--seed", "2", "--env-id",
        "HalfCheetah-v4", "--total-timesteps", "15000", "--learning-starts", str(tt.LEARNING_STARTS)]


def test_the_rlrun_contender_trains_td3_and_reports_its_episodes(tmp_path: Path) -> None:
    argv = [sys.executable, str(tt.HERE / "contenders" / "rlrun_td3_halfcheetah.py"), "--seed", "1",
            "--budget-env-steps", "2000", "--learning-starts", "1500"]
    out = subprocess.run(argv, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300,
                         check=True).stdout
    ends = [s for s in map(episode_end, out.splitlines()) if s is not None]
    assert ends == [1000, 2000]  # two whole episodes, 500 training steps in the second
    assert out.splitlines()[-1].startswith('{"episodes": [') and '"env_steps": 2000' in out.splitlines()[-1]


def test_cleanrls_script_trains_where_its_venv_is_made(tmp_path: Path) -> None:
    from benchmarks.peers.mujoco_task import contender_env
    from benchmarks.peers.venvs import PEERS, PeerUnavailable, ensure, venv_dir

    if not (venv_dir(PEERS["cleanrl"]) / "ready.json").exists():
        pytest.skip("the cleanrl venv is not made here (python -m benchmarks.peers.venvs cleanrl makes it)")
    try:
        python = str(ensure(PEERS["cleanrl"]))
    except PeerUnavailable as e:  # the scripts not fetched (no network) and not put in the cache
        pytest.skip(str(e))
    argv = tt.command("cleanrl", python, 0, 2000)
    argv[argv.index("--learning-starts") + 1] = "1500"
    done = measure(argv, 2000, 300.0, tmp_path, {**ENV, **contender_env("cleanrl")})
    assert done.error is None and [s for _, s in done.episode_ends] == [1000, 2000]
