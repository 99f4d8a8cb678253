"""APPO (rlrun/algos/appo.py): the loss against hand-worked numbers, its epochs and KL option, its agreement with
IMPALA where they coincide, checkpoints, determinism, learning CartPole-v1, and the CLI (local, Ray, Pong)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import only_summary, run_rlrun

from rlrun.algos.appo import APPOAgent, appo_loss
from rlrun.algos.appo_config import APPOConfig
from rlrun.app.run import run_experiment
from rlrun.config import compose
from rlrun.errors import ConfigError
from rlrun.execution.rollout import Rollout

from .test_impala import ENTROPY, tiny_agent, tiny_rollout
from .test_ppo import assert_same_state, build_algo, params_of

TINY = APPOConfig(hidden_sizes=[], orthogonal_init=False, gamma=0.5, ent_coef=0.01, vf_coef=0.5, clip_eps=0.4,
                  num_epochs=1)


def test_appo_loss_worked_example():
    """The tiny batch of test_impala: log pi = [ln 3/4, ln 1/4], behaviour log mu = ln 1/2, rewards [1, 0],
    termination at step 1, V = 1, gamma = 0.5 (discounts [0.5, 0]), clip_eps = 0.4.

    V-trace targets (rho-bar 1): v = [1.25, 0.5] (worked out in test_impala).
    Advantages without rho^pg: A_0 = 1 + 0.5 * v_1 - 1 = 0.25;  A_1 = 0 + 0 * V(x_2) - 1 = -1.
    Ratios pi/mu = [1.5, 0.5], clipped to [1.4, 0.6]:
        min(1.5 * 0.25, 1.4 * 0.25) = 0.35;  min(0.5 * -1, 0.6 * -1) = -0.6;  L_policy = -(0.35 - 0.6) / 2 = 0.125
    L_value = 0.5 * ((1.25 - 1)^2 + (0.5 - 1)^2) / 2 = 0.078125;  clip fraction 1
    total = 0.125 + 0.5 * 0.078125 - 0.01 * H = 0.1584392;  with KL = [0.2, 0.4] and kl_coef 2: + 2 * 0.3.
    """
    log_probs = torch.tensor([[math.log(0.75)], [math.log(0.25)]], requires_grad=True)
    args = (log_probs, torch.full((2, 1), math.log(0.5)), torch.tensor([[1.0], [0.0]]), torch.tensor([[0.5], [0.0]]),
            torch.ones(2, 1, requires_grad=True), torch.ones(1))
    entropy = torch.full((2, 1), ENTROPY)
    t = appo_loss(*args, entropy, clip_eps=0.4, vf_coef=0.5, ent_coef=0.01)
    torch.testing.assert_close(t.vs, torch.tensor([[1.25], [0.5]]))
    torch.testing.assert_close(t.advantages, torch.tensor([[0.25], [-1.0]]))
    assert float(t.policy.detach()) == pytest.approx(0.125, abs=1e-6)
    assert float(t.value.detach()) == pytest.approx(0.078125, abs=1e-6)
    assert float(t.clip_fraction) == 1.0
    assert float(t.total.detach()) == pytest.approx(0.125 + 0.5 * 0.078125 - 0.01 * ENTROPY, abs=1e-6)
    with_kl = appo_loss(*args, entropy, kl=torch.tensor([[0.2], [0.4]]), clip_eps=0.4, vf_coef=0.5, ent_coef=0.01,
                        kl_coef=2.0)
    assert float(with_kl.total.detach()) == pytest.approx(float(t.total.detach()) + 0.6, abs=1e-6)
    # Both surrogate terms are clipped: no policy gradient reaches log_probs from the surrogate.
    t.policy.backward()
    assert float(log_probs.grad.abs().sum()) == 0.0


def test_update_runs_the_configured_epochs():
    """num_epochs gradient steps on the same batch; the first step's loss is the worked example's."""
    agent = tiny_agent(APPOAgent, replace(TINY, num_epochs=3))
    info = agent.update(tiny_rollout())
    assert info["gradient_steps"] == 3 and int(agent.updates) == 1
    states = agent.optimizer.state_dict()["state"].values()
    assert {int(s["step"]) for s in states} == {3}
    one = tiny_agent(APPOAgent, TINY).update(tiny_rollout())
    assert float(one["loss"]) == pytest.approx(0.125 + 0.5 * 0.078125 - 0.01 * ENTROPY, abs=1e-6)


def test_kl_loss_uses_the_recorded_behaviour_policy():
    """use_kl_loss: KL(mu || pi) from the recorded behaviour logits (uniform) to pi = [1/4, 3/4]:
    0.5 ln(0.5 / 0.25) + 0.5 ln(0.5 / 0.75) = 0.1438410."""
    agent = tiny_agent(APPOAgent, replace(TINY, use_kl_loss=True, kl_coef=1.0))
    rollout = tiny_rollout()
    rollout.extras["behaviour_logits"] = torch.zeros(2, 1, 2)
    info = agent.update(rollout)
    assert float(info["policy/kl"]) == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3), abs=1e-6)
    with pytest.raises(ConfigError, match="num_epochs=0"):
        APPOAgent(replace(TINY, num_epochs=0))


def test_one_epoch_on_local_matches_impala():
    """On executor=local (no lag, pi = mu: ratio 1, no clipping) one APPO epoch is IMPALA's gradient step: the same
    parameters after 3 updates (up to float rounding of ratios that are 1 only up to rounding)."""
    common = ["executor.num_envs=2", "algo.unroll_length=8", "algo.hidden_sizes=[16]", "algo.batch_size=2"]
    params = []
    for algo_name in ("impala", "appo"):
        algo = build_algo([f"algo={algo_name}", *common, "algo.num_epochs=1"] if algo_name == "appo"
                          else [f"algo={algo_name}", *common])
        try:
            for _ in range(3):
                algo.training_step()
            params.append(params_of(algo.agent.network))
        finally:
            algo.stop()
    for k in params[0]:
        torch.testing.assert_close(params[0][k], params[1][k], rtol=1e-4, atol=1e-5)


def test_same_seed_same_parameters_and_state_round_trip(tmp_path: Path):
    """The same seed twice: identical parameters after 3 updates; a state_dict saved and loaded into an algorithm
    built with another seed continues identically (one more update on the same batch)."""
    overrides = ["algo=appo", "executor.num_envs=2", "algo.unroll_length=8", "algo.hidden_sizes=[16]",
                 "algo.batch_size=2", "algo.use_kl_loss=true"]
    a, b, c = build_algo(overrides, seed=0), build_algo(overrides, seed=0), build_algo(overrides, seed=9)
    try:
        for _ in range(3):
            a.training_step()
            b.training_step()
        assert_same_state(a.agent.state_dict(), b.agent.state_dict())
        torch.save(a.state_dict(), tmp_path / "state.pt")
        c.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
        assert (c.env_steps, c.updates, c.gradient_steps) == (48, 3, 12)  # 3 updates of 4 epochs (default)
        (batch, _), = list(a.workers.sample_async(8))
        rollout = Rollout.from_samples([batch], a.spec.observation_space, torch.device("cpu"))
        for x in (a, c):
            x.agent.update(rollout)
        assert_same_state(a.agent.state_dict(), c.agent.state_dict())
    finally:
        for x in (a, b, c):
            x.stop()


def test_pong_preset():
    pong = compose(["algo=appo", "env=pong"]).algo
    assert (pong.network, pong.shared_torso, pong.clip_eps, pong.num_epochs) == ("impala_resnet", True, 0.3, 2)


def test_learns_cartpole(tmp_path: Path):
    """Seeded: mean return >= 195 over the last 20 episodes within 60k env steps, 8 env copies on executor=local
    (stops when it gets there: seeds 0-3 took 9.9k, 9.9k, 8.6k, 19.8k env steps, 8-14 s on 2 shared cores)."""
    cfg = compose(["algo=appo", "executor.num_envs=8", "seed=0", "stop.env_steps=60000",
                   "stop.episode_return_mean=195", "logger=none", "export.formats=[]", "checkpoint.at_end=false"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary
    assert summary["episode_return_mean"] >= 195


def test_pong_smoke_local(tmp_path: Path):
    summary = run_experiment(compose(["algo=appo", "env=pong", "executor.num_envs=2", "algo.unroll_length=8",
                                      "algo.batch_size=2", "stop.env_steps=64", "logger=none",
                                      "algo.learner=sync"]),  # the preset's thread mode drops batches queued at the end
                             tmp_path / "run")
    assert summary["env_steps"] == 64 and summary["frames"] == 256 and summary["error"] is None
    assert summary["export"], "the greedy policy was exported"
    from rlrun.checkpoint import load_checkpoint

    state = load_checkpoint(Path(summary["checkpoint"]))["algo"]
    assert state["agent"]["network.torso.body.0.weight"].shape == (16, 4, 3, 3)
    assert state["gradient_steps"] == 4 * 2  # 4 updates of num_epochs = 2 (the preset)


def test_cli_on_ray_with_pong(workdir: Path):
    proc = run_rlrun(["algo=appo", "env=pong", "executor=ray", "executor.num_workers=2", "executor.num_cpus=2",
                      "algo.unroll_length=8", "algo.batch_size=2", "stop.env_steps=64", "logger=none",
                      "export.formats=[]"], workdir, check=True, timeout=240)
    summary = only_summary(workdir / "outputs")
    assert summary["stop_reason"] == "env_steps" and summary["env_steps"] >= 64 and summary["error"] is None
    assert summary["algo"] == "appo" and "Traceback" not in proc.stderr
