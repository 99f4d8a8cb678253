"""PPO (rlrun/algos/ppo.py): the rollout, the update against hand-worked numbers, the agent built alone from
spaces, weights and checkpoints, determinism, learning CartPole-v1, and the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import only_summary, rollout_form, run_rlrun
from omegaconf import OmegaConf

from rlrun import spaces as sp
from rlrun.algos.ppo import PPO, PPOAgent
from rlrun.algos.ppo_config import PPOConfig
from rlrun.app.run import run_experiment, seed_everything
from rlrun.components.testing import ComponentTest
from rlrun.config import compose
from rlrun.execution.rollout import Rollout
from rlrun.registry import registry

CARTPOLE_OBS = gym.make("CartPole-v1").observation_space
PENDULUM = gym.make("Pendulum-v1")


def build_algo(overrides: list[str], seed: int = 0):  # noqa: ANN201 - an Algorithm
    """An algorithm built the way ``run_experiment`` builds it (seeded globals, env factory, local executor)."""
    cfg = compose(["logger=none", f"seed={seed}", *overrides])
    seed_everything(seed)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, seed)
    return registry.get("algo", cfg.algo.name)(OmegaConf.to_object(cfg.algo), env_factory.spec, executor,
                                               torch.device("cpu"), seed)


def params_of(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def assert_same_state(a, b, where: str = "state") -> None:  # noqa: ANN001
    """Exactly equal nests of tensors, dicts, lists and plain values (a component's state_dict with its extra
    state: optimizer moments, generator states)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same_state(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


# ---------------------------------------------------------------------------------------------- rollouts
# (the advantage estimator's tests: tests/ops/test_returns.py; the actor-critic network's:
# tests/components/test_actor_critic.py)


def test_rollout_from_samples_is_time_major_with_real_final_observations():
    """2 env copies, 6 agent steps, episodes cut at 4 agent steps: row t * B + b of the worker's batch is [t, b] of
    the rollout, and at the truncation the next observation is the final one, not the reset one."""
    algo = build_algo(["algo=ppo", "executor.num_envs=2", "env.max_episode_steps=4", "algo.rollout_steps=6"])
    try:
        (batch,) = algo.workers.sample(6)
        rollout = Rollout.from_samples([batch], algo.spec.observation_space, torch.device("cpu"))
        assert rollout.obs.shape == (6, 2, 4) and rollout.extras["log_prob"].shape == (6, 2)
        np.testing.assert_array_equal(rollout.obs.numpy(), batch.obs[:6])
        np.testing.assert_array_equal(rollout.last_obs.numpy(), batch.obs[6])
        assert rollout.truncated[3].all() and not rollout.terminated[3].any()
        # the cut at step 3 of both copies: their final observations, at flat steps 3 * 2 + b
        assert rollout.final_index.tolist() == [6, 7] and rollout.final_obs.shape == (2, 4)
        np.testing.assert_array_equal(rollout.final_obs.numpy(), batch.final_obs)
        # the step after the cut starts from a reset observation, which is not the final one
        assert not torch.equal(rollout.final_obs, rollout.obs[4])
    finally:
        algo.stop()


# ---------------------------------------------------------------------------------------------- components


@pytest.mark.parametrize("actions", [sp.Discrete(2), sp.Box(-1.0, 1.0, (1,), np.float32)], ids=["discrete", "box"])
def test_agent_acts_from_spaces(actions):
    """get_actions: a sample and its log-probability (and the raw, unclipped sample for Box), or the mode."""
    agent = PPOAgent(PPOConfig(hidden_sizes=[8], init_log_std=1.0))
    test = ComponentTest(agent, {"obs": CARTPOLE_OBS, "actions": actions}, batch_shape=(64,))
    greedy = test.call("get_actions", explore=False)
    sp.check(actions, greedy, where="greedy actions")
    acts, extras = test.call("get_actions", explore=True, check_output=False)
    sp.check(actions, acts, where="actions")
    assert extras["log_prob"].shape == (64,)
    if isinstance(actions, sp.Discrete):
        assert ((acts == 0) | (acts == 1)).all() and (extras["log_prob"] <= 0).all()
    else:  # std e^1: some samples fall outside [-1, 1]; they are clipped for the env, the learner gets the raw one
        raw = extras["raw_action"]
        assert (raw.abs() > 1).any() and (acts.abs() <= 1).all()
        torch.testing.assert_close(acts, raw.clamp(-1.0, 1.0))
        assert (greedy.abs() <= 1).all()


# ---------------------------------------------------------------------------------------------- the update


def _tiny_agent(agent_cls=PPOAgent, cfg=None):  # noqa: ANN001, ANN201
    """obs Box(1,), Discrete(2) actions; every torso weight zero, so the policy is softmax([0, ln 3]) = [1/4, 3/4]
    and V = 1 for every observation."""
    cfg = cfg or PPOConfig(hidden_sizes=[2], orthogonal_init=False, gamma=0.5, gae_lambda=0.5, num_epochs=1,
                           minibatch_size=2, normalize_advantage=False, ent_coef=0.01, vf_coef=0.5, clip_eps=0.2,
                           anneal_lr=False)
    agent = agent_cls(cfg).build(obs=sp.Box(-1.0, 1.0, (1,), np.float32), actions=sp.Discrete(2))
    with torch.no_grad():
        for p in agent.network.parameters():
            p.zero_()
        agent.network.head.policy.bias.copy_(torch.tensor([0.0, math.log(3.0)]))
        agent.network.head.value.bias.fill_(1.0)
    return agent


def _tiny_rollout() -> Rollout:
    """T = 2 steps of one copy, actions [1, 0] taken by a uniform behaviour policy (log-prob ln 1/2), rewards
    [1, 0], the episode terminates at step 1."""
    return rollout_form({"obs": torch.tensor([[[0.1]], [[0.2]]]), "next_obs": torch.tensor([[[0.2]], [[0.3]]]),
                         "actions": torch.tensor([[1], [0]]), "rewards": torch.tensor([[1.0], [0.0]]),
                         "terminated": torch.tensor([[False], [True]]), "truncated": torch.tensor([[False], [False]]),
                         "log_prob": torch.full((2, 1), math.log(0.5))})


def test_ppo_update_objective_on_a_tiny_batch():
    """One gradient step on the whole batch (1 epoch, minibatch 2); info["loss"] is the loss before the step.

    Advantages (gamma = 0.5, lambda = 0.5, V = 1): delta_0 = 1 + 0.5 * 1 - 1 = 0.5, delta_1 = 0 - 1 = -1
    (terminated), A = [0.5 + 0.25 * (-1), -1] = [0.25, -1], returns R = A + V = [1.25, 0].
    Ratios pi/pi_old: action 1: 0.75 / 0.5 = 1.5, action 0: 0.25 / 0.5 = 0.5 (both outside [0.8, 1.2]).
    Surrogate: min(1.5 * 0.25, 1.2 * 0.25) = 0.3;  min(0.5 * -1, 0.8 * -1) = -0.8;  L_policy = -(0.3 - 0.8) / 2 = 0.25
    L_value = 0.5 * ((1 - 1.25)^2 + (1 - 0)^2) / 2 = 0.265625
    H = -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.5623351
    total = 0.25 + 0.5 * 0.265625 - 0.01 * 0.5623351 = 0.3771892
    clip fraction = 1; approx KL = mean((r - 1) - ln r) = ((0.5 - ln 1.5) + (-0.5 + ln 2)) / 2 = 0.1438410
    """
    agent = _tiny_agent()
    before = params_of(agent.network)
    info = agent.update(_tiny_rollout())
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert float(info["loss/policy"]) == pytest.approx(0.25, abs=1e-6)
    assert float(info["loss/value"]) == pytest.approx(0.265625, abs=1e-6)
    assert float(info["policy/entropy"]) == pytest.approx(entropy, abs=1e-6)
    assert float(info["loss"]) == pytest.approx(0.25 + 0.5 * 0.265625 - 0.01 * entropy, abs=1e-6)
    assert float(info["policy/clip_fraction"]) == 1.0
    assert float(info["policy/approx_kl"]) == pytest.approx((0.5 - math.log(1.5) + math.log(2) - 0.5) / 2, abs=1e-6)
    assert info["gradient_steps"] == 1
    # Both surrogate terms are clipped constants (1.2 * 0.25 and 0.8 * -1), so the policy gradient is the entropy
    # bonus's alone: it lowers the logit of the likelier action 1. The value moves towards the returns.
    after = params_of(agent.network)
    assert after["head.value.bias"] != before["head.value.bias"]
    assert after["head.policy.bias"][1] < before["head.policy.bias"][1]
    assert after["head.policy.bias"][0] > before["head.policy.bias"][0]


@pytest.mark.parametrize("epochs,minibatch", [(1, 64), (3, 16)])
def test_minibatch_epochs_take_the_configured_gradient_steps(epochs, minibatch):
    """A rollout of T x B = 16 x 4 = 64 steps: epochs * ceil(64 / minibatch) gradient steps; the update (run under
    ComponentTest's trace) calls only the agent's own sub-components."""
    cfg = PPOConfig(hidden_sizes=[8], num_epochs=epochs, minibatch_size=minibatch, rollout_steps=16)
    agent = PPOAgent(cfg)
    test = ComponentTest(agent, {"obs": CARTPOLE_OBS, "actions": sp.Discrete(2)})
    info = test.call("update", batch=_random_rollout(agent, T=16, B=4), check_output=False)
    assert info["gradient_steps"] == epochs * math.ceil(64 / minibatch)
    assert {c.callee for c in test.calls} >= {"ppo_agent", "network"}
    assert {int(s["step"]) for s in agent.optimizer.state.values()} == {epochs * math.ceil(64 / minibatch)}


def _random_steps(agent: PPOAgent, T: int, B: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """A random rollout with its next observations ``next_obs`` (as an application observes steps)."""
    rng = np.random.default_rng(seed)
    obs = torch.as_tensor(sp.sample(CARTPOLE_OBS, (T + 1, B), rng))
    with torch.no_grad():
        actions, extras = agent.get_actions(obs[:-1].reshape(T * B, -1))
    return {"obs": obs[:-1], "next_obs": obs[1:], "actions": actions.reshape(T, B),
            "rewards": torch.ones(T, B), "terminated": torch.as_tensor(rng.random((T, B)) < 0.05),
            "truncated": torch.as_tensor(rng.random((T, B)) < 0.05), "log_prob": extras["log_prob"].reshape(T, B)}


def _random_rollout(agent: PPOAgent, T: int, B: int, seed: int = 0) -> Rollout:
    return rollout_form(_random_steps(agent, T, B, seed))


def test_learning_rate_anneals_linearly_to_zero(caplog):
    """lr 1e-3 over 1000 env steps; updates of 10 x 4 = 40 env steps: lr before update k is 1e-3 * (1 - 40 k / 1000),
    and the clip range 0.2 * (1 - 40 k / 1000).
    Past the horizon it stays 0, and the first update there says so (a resumed run keeps its first schedule)."""
    cfg = PPOConfig(hidden_sizes=[8], lr=1e-3, total_env_steps=1000, num_epochs=1)
    agent = PPOAgent(cfg).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))
    infos = [agent.update(_random_rollout(agent, T=10, B=4, seed=k)) for k in range(3)]
    assert [i["learn/lr"] for i in infos] == pytest.approx([1e-3, 1e-3 * 0.96, 1e-3 * 0.92])
    assert [i["policy/clip_eps"] for i in infos] == pytest.approx([0.2, 0.2 * 0.96, 0.2 * 0.92])  # anneal_clip
    agent.env_steps.fill_(5000)
    before = params_of(agent.network)
    assert agent.update(_random_rollout(agent, T=10, B=4))["learn/lr"] == 0.0
    assert "annealed to 0 at env step 5000" in caplog.text
    assert_same_state(params_of(agent.network), before)
    assert PPOAgent(PPOConfig(total_env_steps=None)).learning_rate() == PPOConfig().lr  # null: constant


def test_observe_then_update_equals_update_on_the_batch():
    """TensorForce-style use from an application's loop: observe() T steps, update(); the same as update(rollout)."""
    torch.manual_seed(0)
    a = PPOAgent(PPOConfig(hidden_sizes=[8])).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))
    b = PPOAgent(PPOConfig(hidden_sizes=[8])).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))
    b.load_state_dict(a.state_dict())
    rollout = _random_steps(a, T=5, B=3)
    for t in range(5):
        a.observe(rollout["obs"][t].numpy(), rollout["actions"][t], rollout["rewards"][t].numpy(),
                  rollout["next_obs"][t].numpy(), rollout["terminated"][t].numpy(), rollout["truncated"][t].numpy(),
                  {"log_prob": rollout["log_prob"][t]})
    a.update()
    b.update(rollout_form(rollout))
    for k, v in params_of(a.network).items():
        torch.testing.assert_close(v, params_of(b.network)[k])
    with pytest.raises(RuntimeError, match="no steps observe"):
        a.update()


# ---------------------------------------------------------------------------------------------- weights, state


def test_get_and_set_weights():
    a = PPOAgent(PPOConfig(hidden_sizes=[8]), seed=0).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))
    torch.manual_seed(1)
    b = PPOAgent(PPOConfig(hidden_sizes=[8]), seed=1).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))
    obs = torch.as_tensor(sp.sample(CARTPOLE_OBS, (16,), 0))
    assert not torch.allclose(a.network.get_value(obs), b.network.get_value(obs))
    weights = a.get_weights()
    b.set_weights(weights)
    torch.testing.assert_close(a.network.get_value(obs), b.network.get_value(obs))
    torch.testing.assert_close(a.get_actions(obs, explore=False), b.get_actions(obs, explore=False))
    # copies: training a does not change the weights handed out
    a.update(_random_rollout(a, T=8, B=2))
    torch.testing.assert_close(b.get_weights()["head.value.weight"], weights["head.value.weight"])


def test_state_dict_round_trip_continues_identically(tmp_path: Path):
    """Train 2 updates, save (weights-only torch file, as checkpoints are), load into an algorithm built with another
    seed: the same parameters, counters, Adam moments, shuffling generator and LR schedule, so one more update on
    the same rollout gives the same parameters in both."""
    overrides = ["algo=ppo", "executor.num_envs=2", "algo.rollout_steps=16", "algo.hidden_sizes=[8]",
                 "algo.num_epochs=10"]
    a, b = build_algo(overrides, seed=0), build_algo(overrides, seed=5)
    try:
        for _ in range(2):
            a.training_step()
        torch.save(a.state_dict(), tmp_path / "state.pt")
        b.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
        # 2 updates of 16 x 2 = 32 env steps, each 10 epochs of ceil(32 / 256) = 1 minibatch
        assert (b.env_steps, b.updates, b.gradient_steps) == (a.env_steps, a.updates, a.gradient_steps) == (64, 2, 20)
        rollout = _random_rollout(a.agent, T=16, B=2, seed=7)
        infos = [x.agent.update(rollout) for x in (a, b)]
        assert infos[0]["learn/lr"] == infos[1]["learn/lr"] < a.cfg.lr
        assert_same_state(a.state_dict(), b.state_dict())
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_same_seed_same_parameters(env_id):
    """executor=local, the same seed and config twice: identical parameters after K = 3 updates (Discrete and Box
    actions); another seed gives other parameters."""
    overrides = ["algo=ppo", f"env.id={env_id}", "executor.num_envs=2", "algo.rollout_steps=32",
                 "algo.hidden_sizes=[16]", "algo.minibatch_size=16", "algo.num_epochs=2"]
    runs = []
    for seed in (0, 0, 1):
        algo = build_algo(overrides, seed=seed)
        try:
            for _ in range(3):
                algo.training_step()
            runs.append(params_of(algo.agent.network))
        finally:
            algo.stop()
    for k in runs[0]:
        torch.testing.assert_close(runs[0][k], runs[1][k], rtol=0, atol=0)
    assert any(not torch.equal(runs[0][k], runs[2][k]) for k in runs[0])


def test_policy_factory_pickles_and_builds_an_acting_policy():
    """What a Ray worker gets: a picklable worker_index -> policy; weights then arrive by set_weights."""
    import pickle

    algo = build_algo(["algo=ppo", "algo.hidden_sizes=[8]"])
    try:
        factory = pickle.loads(pickle.dumps(algo.policy_factory))
        policy = factory(3)
        assert isinstance(policy, PPOAgent) and policy.built
        policy.set_weights(algo.agent.get_weights())
        obs = torch.as_tensor(sp.sample(CARTPOLE_OBS, (4,), 0))
        torch.testing.assert_close(policy.get_actions(obs, explore=False), algo.agent.get_actions(obs, explore=False))
    finally:
        algo.stop()


def test_rejects_other_action_spaces():
    from gymnasium.spaces import MultiDiscrete

    from rlrun.envs.gym_env import EnvSpec
    from rlrun.errors import ConfigError

    spec = EnvSpec("Fake-v0", CARTPOLE_OBS, MultiDiscrete([2, 3]))
    with pytest.raises(ConfigError, match="Discrete or Box"):
        PPO.make_agent(PPOConfig(), spec, 0)




def test_the_cartpole_preset_applies_the_tuned_settings():
    """conf/algo_env/ppo_cartpole.yaml: rlrun algo=ppo (env=cartpole, the default) runs 8 epochs at lr 3e-3 on 8 env
    copies (4 on each of the 2 Ray workers) stepped by CartPole's batched env (env.vectorization=auto); the schema
    keeps the zoo's values for other envs; overrides win."""
    cfg = compose(["algo=ppo"])
    assert [cfg.algo.num_epochs, cfg.algo.lr, cfg.algo.rollout_steps, cfg.algo.minibatch_size,
            cfg.executor.num_envs, cfg.env.vectorization] == [8, 3e-3, 32, 256, 8, "auto"]
    ray = compose(["algo=ppo", "executor=ray"]).executor
    assert ray.num_workers * ray.num_envs_per_worker == 8
    pendulum = compose(["algo=ppo", "env=pendulum"])
    assert [pendulum.algo.num_epochs, pendulum.algo.lr, pendulum.executor.num_envs] == [20, 1e-3, 1]
    assert compose(["algo=ppo", "algo.lr=1e-4", "executor.num_envs=2"]).algo.lr == 1e-4


# ---------------------------------------------------------------------------------------------- learning, CLI


def test_learns_cartpole(tmp_path: Path):
    """Seeded: mean return >= 195 over the last 20 episodes (return_window) within 40k env steps, 8 env copies
    (the run stops as soon as it gets there: ~15k env steps, ~3 s; seeds 0-4 took 8.2k-17.2k)."""
    cfg = compose(["algo=ppo", "executor.num_envs=8", "seed=0", "stop.env_steps=40000",
                   "stop.episode_return_mean=195", "logger=none", "export.formats=[]", "checkpoint.at_end=false"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary
    assert summary["episode_return_mean"] >= 195


def test_cli_run_writes_summary_and_exports(workdir: Path):
    proc = run_rlrun(["algo=ppo", "stop.env_steps=1024", "executor.num_envs=4", "algo.rollout_steps=64",
                      "logger=none"], workdir, check=True)
    summary = only_summary(workdir)
    assert summary["algo"] == "ppo" and summary["stop_reason"] == "env_steps", proc.stderr
    assert summary["env_steps"] == 1024
    policy = torch.jit.load(summary["export"][0])
    obs = torch.as_tensor(sp.sample(CARTPOLE_OBS, (3,), 0))
    assert policy(obs).shape == (3,)


def test_a_minibatch_larger_than_the_rollout_is_said_and_each_epoch_is_one_step(workdir: Path):
    proc = run_rlrun(["algo=ppo", "algo.minibatch_size=1000000", "algo.num_epochs=3", "stop.env_steps=1",
                      "logger=none", "export.formats=[]"], workdir, check=True)
    assert ("algo.minibatch_size=1000000 is larger than a rollout (algo.rollout_steps=32 x 8 env copies = 256 env "
            "steps): each epoch is one gradient step on the whole rollout") in proc.stdout + proc.stderr
    assert only_summary(workdir)["env_steps"] == 256
    exported = run_rlrun(["export", only_summary(workdir)["run_dir"]], workdir, check=True)  # built without envs
    assert "larger than a rollout" not in exported.stdout + exported.stderr
    quiet = run_rlrun(["algo=ppo", "stop.env_steps=1", "logger=none", "export.formats=[]"], workdir, check=True)
    assert "larger than a rollout" not in quiet.stdout + quiet.stderr


def test_cli_graph_prints_the_agent(workdir: Path):
    proc = run_rlrun(["graph", "algo=ppo"], workdir, check=True)
    out = proc.stdout
    assert out.startswith("# ppo on CartPole-v1")
    for name in ("ppo_agent", "network", "torso", "critic_torso", "head"):
        assert name in out, out


@pytest.mark.parametrize("executor", [["executor=local", "executor.num_envs=2"],
                                      ["executor=ray", "executor.num_cpus=2", "executor.num_workers=1",
                                       "executor.num_envs_per_worker=2"]], ids=["local", "ray"])
def test_pong_preset_smoke(tmp_path: Path, executor: list[str]):
    """rlrun algo=ppo env=pong applies conf/algo_env/ppo_atari.yaml (CleanRL's Atari PPO: a shared Nature CNN,
    8 env copies); a tiny run of it (2 copies, 16-step rollouts) learns on Pong frames on both executors."""
    preset = compose(["algo=ppo", "env=pong"])
    assert (preset.algo.network, preset.algo.shared_torso, preset.algo.rollout_steps, preset.executor.num_envs) == (
        "nature_cnn", True, 128, 8)
    assert compose(["algo=ppo", "env=pong", "executor=ray"]).executor.num_envs_per_worker == 4
    cfg = compose(["algo=ppo", "env=pong", *executor, "algo.rollout_steps=16", "algo.num_epochs=1",
                   "algo.minibatch_size=32", "stop.env_steps=64", "logger=none", "export.formats=[]",
                   "checkpoint.at_end=false"])
    summary = run_experiment(cfg, tmp_path / "run")
    assert summary["stop_reason"] == "env_steps" and summary["env_steps"] == 64 and summary["frames"] == 256
