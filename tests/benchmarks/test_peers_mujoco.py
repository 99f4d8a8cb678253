"""The peers benchmark's MuJoCo task (benchmarks/peers/mujoco_task.py, ``mujoco_ppo``): how each contender's output is
read, how a run is timed to its exit and judged complete, how seeds become medians, returns and ratios, and that the
contenders run the same settings. Real child processes throughout, rlrun's contender on HalfCheetah-v5 at a budget
of one or two rollouts. The peers' venvs are made only by the benchmark itself (minutes), not here: the SB3 and
CleanRL contenders are run only where their venv is already made."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.peers import mujoco_task as mt
from benchmarks.peers.mujoco_task import MujocoRun, measure, parse_line

ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def child(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "contender.py"
    path.write_text("import json, sys, time\n" + textwrap.dedent(body))
    return [sys.executable, str(path)]


# ------------------------------------------------------------------------------------------------ the lines


def test_the_lines_of_every_contender_are_read() -> None:
    # rlrun's and SB3's scripts: the peers' JSON lines
    assert parse_line('{"episodes": [-300.5, -290.0], "env_steps": 2048}\n') == ([-300.5, -290.0], 2048, False)
    assert parse_line('{"episodes": [], "env_steps": 4096}\n') == ([], 4096, False)
    # CleanRL's ppo_continuous_action.py: print(f"global_step={global_step}, episodic_return={info['episode']['r']}")
    # with gymnasium 0.29's one-element array, and print("SPS:", ...) after each update
    assert parse_line("global_step=1000, episodic_return=[-312.4523]\n") == ([-312.4523], 1000, False)
    assert parse_line("global_step=3000, episodic_return=[1.2345e+03]\n") == ([1234.5], 3000, False)
    assert parse_line("SPS: 812\n") == ([], None, True)
    # anything else
    for line in ("a warning from mujoco\n", '{"agent_steps": 0, "seconds": 0.0}\n', "{not json\n", "[1, 2]\n"):
        assert parse_line(line) is None, line


def test_whole_rollouts_are_the_budget_of_every_contender() -> None:
    assert mt.ROLLOUT_STEPS == 2048
    assert mt.whole_rollouts(1_000_000) == 999_424  # CleanRL's 1M // 2048 = 488 iterations
    assert mt.whole_rollouts(4096) == 4096 and mt.whole_rollouts(5000) == 4096
    assert mt.whole_rollouts(100) == 2048  # at least one rollout
    assert mt.wall_cap_s(999_424) == pytest.approx(300 + 999_424 / 200)


# ------------------------------------------------------------------------------------------------ one run


def test_a_run_is_timed_to_its_exit_and_its_return_is_the_mean_of_the_last_100_episodes(tmp_path: Path) -> None:
    command = child(tmp_path, """
        time.sleep(0.3)  # start-up
        print("a log line", flush=True)
        for i in range(75):  # 150 episodes, 2 per rollout of 2048
            print(json.dumps({"episodes": [float(2 * i), float(2 * i + 1)], "env_steps": 2048 * (i + 1)}), flush=True)
        time.sleep(0.3)  # the contender's teardown is in its wall time
    """)
    run = measure(command, budget_env_steps=2048 * 75, cap_s=60, cwd=tmp_path, env=ENV)
    assert run.error is None and run.env_steps == 2048 * 75 and len(run.returns) == 150
    assert run.final_return == pytest.approx(statistics.fmean(range(50, 150)))  # episodes 50..149
    assert run.final_return == 99.5
    assert 0.3 <= run.first_episode_s < run.wall_s and run.wall_s >= 0.6
    assert run.env_steps_per_s == pytest.approx(2048 * 75 / run.wall_s)
    assert run.peak_rss_mib > 5


def test_cleanrl_updates_count_its_env_steps(tmp_path: Path) -> None:
    """CleanRL prints global_step only with an episode: its 4,096 env steps are its two updates (SPS lines)."""
    command = child(tmp_path, """
        for step in (1000, 2000):
            print(f"global_step={step}, episodic_return=[{-step / 10}]", flush=True)
        print("SPS: 900", flush=True)
        for step in (3000, 4000):
            print(f"global_step={step}, episodic_return=[{-step / 10}]", flush=True)
        print("SPS: 910", flush=True)
    """)
    run = measure(command, budget_env_steps=4096, cap_s=60, cwd=tmp_path, env=ENV)
    assert run.error is None and run.updates == 2 and run.env_steps == 4096
    assert run.returns == [-100.0, -200.0, -300.0, -400.0] and run.final_return == -250.0


@pytest.mark.parametrize("body, wanted", [
    ('print(json.dumps({"episodes": [1.0], "env_steps": 2048}))\n', "ended after 2048 of 4096 env steps"),
    ('print("mujoco missing", file=sys.stderr); raise SystemExit(3)\n', "exit 3: mujoco missing"),
    ('print(json.dumps({"episodes": [1.0], "env_steps": 2048}), flush=True); time.sleep(60)\n',
     "wall-time cap of 2 s reached at 2048 env steps"),
])
def test_a_run_that_does_not_train_for_the_budget_says_why(tmp_path: Path, body: str, wanted: str) -> None:
    run = measure(child(tmp_path, body), budget_env_steps=4096, cap_s=2.0, cwd=tmp_path, env=ENV)
    assert run.error is not None and run.error.startswith(wanted), run.error
    assert run.wall_s < 30


def test_a_warm_up_stops_at_the_first_episode(tmp_path: Path) -> None:
    command = child(tmp_path, """
        print(json.dumps({"episodes": [], "env_steps": 2048}), flush=True)
        print("global_step=1000, episodic_return=[-5.0]", flush=True)
        time.sleep(120)
    """)
    run = measure(command, 4096, cap_s=60, cwd=tmp_path, env=ENV, until_first_episode=True)
    assert run.error == "warm-up" and run.first_episode_s is not None and run.wall_s < 30


# ------------------------------------------------------------------------------------------------ the figures


def test_medians_returns_and_ratios_by_hand() -> None:
    def ran(wall: float, final: float, first: float = 5.0, rss: float = 400.0, error: str | None = None) -> MujocoRun:
        return MujocoRun(wall_s=wall, env_steps=999_424, first_episode_s=first, peak_rss_mib=rss,
                         returns=[-1e6] * 50 + [final] * 100, error=error)  # only the last 100 count

    ours = mt.summarize([ran(1200.0, 1600.0), ran(1300.0, 1800.0, 6.0), ran(900.0, 0.0, error="exit 1: boom")])
    assert ours["wall_s"] == 1250.0 and ours["env_steps"] == 999_424
    assert ours["env_steps_per_s"] == round(statistics.median([999_424 / 1200, 999_424 / 1300]), 2)  # 801.6
    assert ours["final_return"] == 1700.0 and ours["final_return_std"] == 100.0  # population std of 1600, 1800
    assert ours["first_episode_s"] == 5.5 and ours["fraction_completed"] == pytest.approx(2 / 3)
    assert ours["per_seed"]["errors"] == [None, None, "exit 1: boom"]
    assert ours["per_seed"]["final_return"] == [1600.0, 1800.0, 0.0]
    theirs = mt.summarize([ran(1875.0, 1360.0, 7.0, 500.0)])
    got = mt.ratios({"rlrun": ours, "sb3": theirs})
    assert got == {"ratio/mujoco_ppo/wall/sb3_over_rlrun": 1.5,  # 1875 / 1250
                   "ratio/mujoco_ppo/first_episode/sb3_over_rlrun": 1.273,  # 7 / 5.5
                   "ratio/mujoco_ppo/peak_rss/sb3_over_rlrun": 1.25,
                   "ratio/mujoco_ppo/final_return/sb3_over_rlrun": 0.8}  # 1360 / 1700
    # a negative return (a tiny budget) has no return ratio
    poor = mt.summarize([ran(20.0, -300.0)])
    assert "ratio/mujoco_ppo/final_return/sb3_over_rlrun" not in mt.ratios({"rlrun": ours, "sb3": poor})
    assert mt.ratios({"sb3": theirs}) == {}  # no rlrun row, no ratio


def test_the_table_reads_the_rows() -> None:
    rows = {"rlrun": {"version": "0.1.0", "env_id": "HalfCheetah-v5", "wall_s": 1250.0, "env_steps": 999_424,
                      "env_steps_per_s": 801.6, "final_return": 1700.0, "final_return_std": 100.0,
                      "fraction_completed": 1.0, "first_episode_s": 5.5, "peak_rss_mib": 400.0,
                      "env_only_steps_per_s": 13_900.0},
            "cleanrl": {"version": "cleanrl@fe8d8a03, gymnasium 0.29.1", "env_id": "HalfCheetah-v4",
                        "wall_s": None, "fraction_completed": 0.0}}
    figures = {"ratio/mujoco_ppo/wall/cleanrl_over_rlrun": None}
    lines = mt.markdown_rows(rows, figures)
    assert lines[0].startswith("| task | contender | version | env | wall time (s, median) |")
    assert len(lines) == 4 and all(line.count("|") == lines[0].count("|") for line in lines)
    assert ("| mujoco_ppo | rlrun | 0.1.0 | HalfCheetah-v5 | 1,250.0 | 999424 | 802 | 1,700.0 ± 100.0 | 1.00 | 5.50 "
            "| 400 | 13,900 | 1 |") in lines
    assert "| mujoco_ppo | cleanrl | cleanrl@fe8d8a03, gymnasium 0.29.1 | HalfCheetah-v4 | - |" in lines[3]


# ------------------------------------------------------------------------------------------------ the contenders


def test_every_contender_runs_cleanrls_settings() -> None:
    from benchmarks.peers.contenders.rlrun_halfcheetah import overrides
    from benchmarks.peers.contenders.sb3_halfcheetah import SETTINGS as SB3
    from rlrun.config import compose

    s = mt.SETTINGS
    cfg = compose(overrides(0, 999_424))
    a = cfg.algo
    assert cfg.env.name == "mujoco" and cfg.env.id == "HalfCheetah-v5" and cfg.stop.env_steps == 999_424
    assert [cfg.executor.num_envs, a.rollout_steps, a.num_epochs, a.minibatch_size, a.lr, a.anneal_lr,
            a.total_env_steps, a.gamma, a.gae_lambda, a.clip_eps, a.anneal_clip, a.vf_clip_eps, a.ent_coef,
            a.vf_coef, a.max_grad_norm, a.normalize_advantage, list(a.hidden_sizes), a.activation, a.shared_torso,
            a.normalize_obs, a.obs_clip, a.normalize_reward, a.reward_clip] == [
        s["num_envs"], s["num_steps"], s["update_epochs"], s["num_steps"] // s["num_minibatches"],
        s["learning_rate"], s["anneal_lr"], 999_424, s["gamma"], s["gae_lambda"], s["clip_coef"], False,
        s["clip_coef"], s["ent_coef"], s["vf_coef"], s["max_grad_norm"], s["norm_adv"], s["hidden"],
        s["activation"], False, True, s["obs_clip"], True, s["reward_clip"]]
    assert [SB3["n_envs"], SB3["n_steps"], SB3["n_epochs"], SB3["batch_size"], SB3["learning_rate"], SB3["gamma"],
            SB3["gae_lambda"], SB3["clip_range"], SB3["clip_range_vf"], SB3["ent_coef"], SB3["vf_coef"],
            SB3["max_grad_norm"], SB3["normalize_advantage"], SB3["net_arch"], SB3["activation"],
            SB3["norm_obs"], SB3["clip_obs"], SB3["norm_reward"], SB3["clip_reward"]] == [
        s["num_envs"], s["num_steps"], s["update_epochs"], s["num_steps"] // s["num_minibatches"],
        s["learning_rate"], s["gamma"], s["gae_lambda"], s["clip_coef"], s["clip_coef"], s["ent_coef"],
        s["vf_coef"], s["max_grad_norm"], s["norm_adv"], s["hidden"], s["activation"], True, s["obs_clip"], True,
        s["reward_clip"]]


def test_torchrl_runs_its_examples_settings_and_the_task_names_the_difference() -> None:
    """TorchRL runs config_mujoco.yaml: the task's rollouts, epochs, minibatches, lr, gamma, lambda, clip and sizes;
    its critic coefficient (0.25) is the difference the task's docstring names."""
    from benchmarks.peers.contenders.torchrl_halfcheetah import SETTINGS as TRL

    s = mt.SETTINGS
    assert [TRL["frames_per_batch"], TRL["ppo_epochs"], TRL["mini_batch_size"], TRL["lr"], TRL["anneal_lr"],
            TRL["gamma"], TRL["gae_lambda"], TRL["clip_epsilon"], TRL["entropy_coeff"], list(TRL["num_cells"]),
            TRL["obs_clip"]] == [
        s["num_steps"], s["update_epochs"], s["num_steps"] // s["num_minibatches"], s["learning_rate"],
        s["anneal_lr"], s["gamma"], s["gae_lambda"], s["clip_coef"], s["ent_coef"], s["hidden"], s["obs_clip"]]
    assert TRL["critic_coeff"] == 0.25 != s["vf_coef"]
    assert "critic coefficient of 0.25" in " ".join((mt.__doc__ or "").split())


def test_the_commands_give_each_contender_the_budget_and_its_env(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    from benchmarks.peers import venvs

    assert "cleanrl/ppo_continuous_action.py" in venvs.PEERS["cleanrl"].scripts  # fetched and sha256-checked
    assert any(p.startswith("mujoco==") for p in venvs.PEERS["sb3"].packages)
    assert any(p.startswith("mujoco==") for p in venvs.PEERS["cleanrl"].packages)
    fetched = tmp_path / "cleanrl" / "ppo_continuous_action.py"
    monkeypatch.setattr(venvs, "script", lambda peer, name: tmp_path / name)
    assert mt.command("cleanrl", "/venv/bin/python", 2, 4096) == [
        "/venv/bin/python", str(fetched), "--seed", "2", "--env-id", "HalfCheetah-v4", "--total-timesteps", "4096"]
    assert mt.command("sb3", "/sb3/bin/python", 1, 4096)[2:] == [
        "--seed", "1", "--env-id", "HalfCheetah-v5", "--budget-env-steps", "4096"]
    assert mt.command("torchrl", "/trl/bin/python", 2, 4096) == [
        "/trl/bin/python", str(mt.HERE / "contenders" / "torchrl_halfcheetah.py"), "--seed", "2", "--env-id",
        "HalfCheetah-v5", "--budget-env-steps", "4096"]
    assert any(p.startswith("mujoco==") for p in venvs.PEERS["torchrl"].packages)
    assert mt.contender_env("torchrl") == {}
    assert mt.command("rlrun", sys.executable, 0, 2048)[1] == str(mt.HERE / "contenders" / "rlrun_halfcheetah.py")
    assert mt.contender_env("rlrun") == {}
    assert mt.contender_env("cleanrl")["PYTHONPATH"] == str(venvs.scripts_dir(venvs.PEERS["cleanrl"]))


def test_the_rlrun_contender_trains_on_halfcheetah_and_reports_its_episodes(tmp_path: Path) -> None:
    out = subprocess.run(mt.command("rlrun", sys.executable, 1, 2048), cwd=tmp_path, env=ENV, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    parsed = [parse_line(line) for line in out.splitlines()]
    assert parsed and all(p is not None for p in parsed)
    returns = [r for p in parsed for r in p[0]]
    assert parsed[-1][1] == 2048 and len(returns) == 2  # two 1,000-step episodes in one rollout
    assert all(-2000.0 < r < 1000.0 for r in returns)  # raw returns, not normalised ones: a fresh policy's


def test_run_task_gives_the_flat_figures(tmp_path: Path) -> None:
    """The whole task with rlrun alone at one rollout: warm-up, the env's own speed, one seed, the figures."""
    logged: list[str] = []
    figures = mt.run_task({"rlrun": sys.executable}, {"rlrun": "0.1.0"}, [0], 3000, ENV,
                          log=lambda *a, **k: logged.append(" ".join(map(str, a))))
    assert figures["mujoco_ppo/budget_env_steps"] == 2048 and figures["mujoco_ppo/return_window"] == 100
    assert figures["mujoco_ppo/rlrun/fraction_completed"] == 1.0, figures["mujoco_ppo/rlrun/per_seed/errors"]
    assert figures["mujoco_ppo/rlrun/env_steps"] == 2048 and figures["mujoco_ppo/rlrun/env_id"] == "HalfCheetah-v5"
    wall, first = figures["mujoco_ppo/rlrun/wall_s"], figures["mujoco_ppo/rlrun/first_episode_s"]
    assert 0 < first < wall < 300
    assert figures["mujoco_ppo/rlrun/env_steps_per_s"] == pytest.approx(2048 / wall, rel=0.01)
    assert figures["mujoco_ppo/rlrun/per_seed/episodes"] == [2]
    assert figures["mujoco_ppo/rlrun/env_only_steps_per_s"] > 1000  # MEASURED.md: ~13.9k on these cores
    assert figures["mujoco_ppo/rlrun/final_return"] is not None and figures["mujoco_ppo/rlrun/peak_rss_mib"] > 100
    assert not [k for k in figures if k.startswith("ratio/")]  # no peer, no ratio
    assert logged and logged[0].startswith("peers: mujoco_ppo rlrun seed 0: 2048 env steps in ")


@pytest.mark.parametrize("name", ["sb3", "cleanrl", "torchrl"])
def test_a_peer_contender_trains_one_rollout_where_its_venv_is_made(name: str, tmp_path: Path) -> None:
    from benchmarks.peers.venvs import PEERS, PeerUnavailable, ensure, venv_dir

    if not (venv_dir(PEERS[name]) / "ready.json").exists():
        pytest.skip(f"the {name} venv is not made here (python -m benchmarks.peers.venvs {name} makes it)")
    try:
        python = str(ensure(PEERS[name]))
    except PeerUnavailable as e:  # CleanRL's script not fetched (no network) and not put in the cache
        pytest.skip(str(e))
    run = measure(mt.command(name, python, 0, 2048), 2048, 300, tmp_path, {**ENV, **mt.contender_env(name)})
    assert run.error is None, run.error
    assert run.env_steps == 2048 and len(run.returns) == 2 and all(-2000.0 < r < 1000.0 for r in run.returns)
