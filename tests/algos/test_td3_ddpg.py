"""TD3 (rlrun/algos/td3.py) and DDPG (rlrun/algos/ddpg.py), over the pieces they share with SAC
(rlrun/algos/off_policy_continuous.py): the targets, the actor loss, the exploration noise and the critics' loss
against hand-worked numbers; acting inside the Box bounds; the delayed actor and target steps; the smoothing key
reaching the target; weights, checkpoints, determinism; learning Pendulum-v1; the CLI on local and Ray; the
Discrete-space error. Each agent-level test runs for both algorithms (parametrized)."""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_same, only_summary, run_rlrun
from omegaconf import OmegaConf

from rlrun import spaces as sp
from rlrun.algos.ddpg import DDPG, DDPGAgent, ddpg_critic_target
from rlrun.algos.ddpg_config import DDPGConfig
from rlrun.algos.off_policy_continuous import critic_regression_loss, deterministic_actor_loss, gaussian_exploration
from rlrun.algos.td3 import TD3, TD3Agent, smoothed_target_action, td3_critic_target
from rlrun.algos.td3_config import TD3Config
from rlrun.app.run import run_experiment, seed_everything
from rlrun.components.continuous_networks import QFunction, TwinQ
from rlrun.components.testing import ComponentTest
from rlrun.config import compose
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError
from rlrun.registry import registry

OBS = sp.Box(-8.0, 8.0, (3,), np.float32)  # Pendulum-v1's observation
PENDULUM_ACTIONS = sp.Box(-2.0, 2.0, (1,), np.float32)
ASYMMETRIC = sp.Box(np.array([0.0, -1.0], np.float32), np.array([1.0, 3.0], np.float32))
ALGOS = {"td3": (TD3, TD3Agent, TD3Config), "ddpg": (DDPG, DDPGAgent, DDPGConfig)}


def small(algo: str, **keys):  # noqa: ANN003, ANN201 - a TD3Config or DDPGConfig
    return ALGOS[algo][2](**{"hidden_sizes": [16], "batch_size": 8, "buffer_size": 64, "learning_starts": 0, **keys})


def agent_of(algo: str, actions: sp.Space = PENDULUM_ACTIONS, **keys):  # noqa: ANN003, ANN201
    return ALGOS[algo][1](small(algo, **keys)).build(obs=OBS, actions=actions)


def tiny(algo: str) -> list[str]:
    """Tiny settings for runs through the run loop: a few hundred env steps of Pendulum-v1."""
    return ["env=pendulum", f"algo={algo}", "algo.hidden_sizes=[16]", "algo.batch_size=16", "algo.buffer_size=1000",
            "algo.learning_starts=64", "algo.rollout_steps=8", "algo.train_every=1"]


def build_algo(overrides: list[str], seed: int = 0):  # noqa: ANN201 - a TD3 or DDPG plan
    """An algorithm built the way ``run_experiment`` builds it (seeded globals, env factory, local executor)."""
    cfg = compose(["logger=none", f"seed={seed}", *overrides])
    torch.set_num_threads(cfg.device.torch_threads)
    seed_everything(seed)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, seed)
    return registry.get("algo", cfg.algo.name)(OmegaConf.to_object(cfg.algo), env_factory.spec, executor,
                                               torch.device("cpu"), seed)


def params_of(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def fill(agent, n: int = 32, seed: int = 0) -> None:  # noqa: ANN001
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    agent.observe(obs, rng.uniform(-2, 2, (n, 1)).astype(np.float32), rng.normal(size=n).astype(np.float32),
                  obs[::-1].copy(), rng.random(n) < 0.2, rng.random(n) < 0.2)


# ---------------------------------------------------------------------------------------------- the math


def test_smoothed_target_action_worked_example():
    """mu'(s') = [0.9, -0.2, 0.0], eps = [1, -5, 2], sigma = 0.2, c = 0.5:
    sigma eps = [0.2, -1.0, 0.4] -> clipped to [-0.5, 0.5]: [0.2, -0.5, 0.4];
    mu' + noise = [1.1, -0.7, 0.4] -> clipped to [-1, 1]: [1.0, -0.7, 0.4]."""
    a = smoothed_target_action(torch.tensor([0.9, -0.2, 0.0]), torch.tensor([1.0, -5.0, 2.0]), 0.2, 0.5)
    torch.testing.assert_close(a, torch.tensor([1.0, -0.7, 0.4]))


def test_td3_critic_target_worked_example():
    """B = 2, gamma = 0.9, item 2 terminated (discount 0): min(Q1', Q2') = [min(3, 2), min(1, 5)] = [2, 1];
    y = r + d min Q' = [1 + 0.9 * 2, -1 + 0 * 1] = [2.8, -1]."""
    y = td3_critic_target(torch.tensor([1.0, -1.0]), torch.tensor([0.9, 0.0]), torch.tensor([3.0, 1.0]),
                          torch.tensor([2.0, 5.0]))
    torch.testing.assert_close(y, torch.tensor([2.8, -1.0]))


def test_ddpg_critic_target_worked_example():
    """r = [1, 0.5], d = [0.5, 0] (the second terminated), Q'(s', mu'(s')) = [4, 10]:
    y = [1 + 2, 0.5 + 0] = [3, 0.5]."""
    y = ddpg_critic_target(torch.tensor([1.0, 0.5]), torch.tensor([0.5, 0.0]), torch.tensor([4.0, 10.0]))
    torch.testing.assert_close(y, torch.tensor([3.0, 0.5]))


def test_deterministic_actor_loss_worked_example():
    """Q1(s, mu(s)) = [2, -1, 5]: J = -mean = -2; dJ/dQ = -1/3 each (the actor ascends Q)."""
    q = torch.tensor([2.0, -1.0, 5.0], requires_grad=True)
    loss = deterministic_actor_loss(q)
    assert float(loss.detach()) == pytest.approx(-2.0)
    loss.backward()
    torch.testing.assert_close(q.grad, torch.full((3,), -1.0 / 3.0))


def test_critic_regression_loss_worked_example():
    """y = [1, 2], Q1 = [0, 2], Q2 = [3, 1]: mean((Q1 - y)^2) = (1 + 0)/2 = 0.5, mean((Q2 - y)^2) = (4 + 1)/2 = 2.5;
    twin (TD3): 3.0; one critic (DDPG): 0.5. No gradient reaches the target."""
    q1 = torch.tensor([0.0, 2.0], requires_grad=True)
    target = torch.tensor([1.0, 2.0], requires_grad=True)
    assert float(critic_regression_loss(target, q1, torch.tensor([3.0, 1.0])).detach()) == pytest.approx(3.0)
    loss = critic_regression_loss(target, q1)
    assert float(loss.detach()) == pytest.approx(0.5)
    loss.backward()
    torch.testing.assert_close(q1.grad, torch.tensor([-1.0, 0.0]))  # d/dq1 mean((q1 - y)^2) = 2 (q1 - y) / B
    assert target.grad is None


def test_gaussian_exploration_worked_example_is_clipped_to_the_bounds():
    """mu(s) = [0.95, -0.5, 0.0, -0.99], eps = [1, 1, -2, -1], sigma = 0.1: mu + sigma eps = [1.05, -0.4, -0.2,
    -1.09] -> clipped to [-1, 1]: [1.0, -0.4, -0.2, -1.0]."""
    a = gaussian_exploration(torch.tensor([0.95, -0.5, 0.0, -0.99]), torch.tensor([1.0, 1.0, -2.0, -1.0]), 0.1)
    torch.testing.assert_close(a, torch.tensor([1.0, -0.4, -0.2, -1.0]))


# ---------------------------------------------------------------------------------------------- agents


@pytest.mark.parametrize("algo,critic", [("td3", TwinQ), ("ddpg", QFunction)])
def test_agent_networks(algo, critic):
    """TD3: twin critics; DDPG: one. Target copies start equal to the online networks and are not trained."""
    agent = agent_of(algo)
    assert type(agent.critic) is critic and type(agent.target_critic) is critic
    for online, target in ((agent.actor, agent.target_actor), (agent.critic, agent.target_critic)):
        assert_same(params_of(online), params_of(target))
        assert not any(p.requires_grad for p in target.parameters())


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("actions", [PENDULUM_ACTIONS, ASYMMETRIC], ids=["pendulum", "asymmetric"])
def test_acting_stays_inside_the_box_bounds(algo, actions):
    """Warm-up: uniform random actions over the whole Box. Then mu(s) rescaled to the bounds when not exploring, and
    with exploration noise far wider than the Box (sigma = 5) every action is still inside it, many at its edges."""
    agent = ALGOS[algo][1](small(algo, learning_starts=10, exploration_noise=5.0))
    test = ComponentTest(agent, {"obs": OBS, "actions": actions}, batch_shape=(2000,))
    low, high = torch.as_tensor(actions.low), torch.as_tensor(actions.high)
    warm = test.call("get_actions", explore=True)
    quarters = ((warm - low) / (high - low) * 4).floor().clamp(0, 3)
    for q in range(4):
        assert ((quarters == q).float().mean(0) - 0.25).abs().max() < 0.05
    agent.env_steps.fill_(10)
    obs = test.sample("obs")
    greedy = agent.get_actions(obs, explore=False)
    torch.testing.assert_close(greedy, low + (agent.actor(obs) + 1) * (high - low) / 2)
    noisy = test.call("get_actions", explore=True)
    assert bool(((noisy >= low) & (noisy <= high)).all())
    assert float(((noisy == low) | (noisy == high)).float().mean()) > 0.5  # sigma 5: most actions clipped


@pytest.mark.parametrize("algo", ALGOS)
def test_actor_and_targets_step_every_policy_delay_critic_steps(algo):
    """policy_delay = 2, tau = 0.25. Update 1: the critic moves; the actor and both targets do not; no actor loss.
    Update 2: the actor moves, and each target is exactly (1 - tau) target + tau online."""
    agent = ALGOS[algo][1](small(algo, tau=0.25, policy_delay=2))
    test = ComponentTest(agent, {"obs": OBS, "actions": PENDULUM_ACTIONS})
    fill(agent)
    actor0, critic0 = params_of(agent.actor), params_of(agent.critic)
    targets0 = params_of(agent.target_actor), params_of(agent.target_critic)
    info = test.call("update", check_output=False)
    assert set(info) == {"loss", "loss/critic", "q/mean"} and all(torch.isfinite(v) for v in info.values())
    assert all(not torch.equal(v, critic0[k]) for k, v in params_of(agent.critic).items())
    assert_same(params_of(agent.actor), actor0)
    assert_same((params_of(agent.target_actor), params_of(agent.target_critic)), targets0)
    info = test.call("update", check_output=False)
    assert "loss/actor" in info and torch.isfinite(info["loss/actor"])
    assert all(not torch.equal(v, actor0[k]) for k, v in params_of(agent.actor).items())
    for online, target, before in ((agent.actor, agent.target_actor, targets0[0]),
                                   (agent.critic, agent.target_critic, targets0[1])):
        now = params_of(online)
        for k, v in params_of(target).items():
            torch.testing.assert_close(v, 0.75 * before[k] + 0.25 * now[k])
    assert {"actor", "critic", "target_actor", "target_critic", "memory", "target_sync"} <= {
        c.callee for c in test.calls}
    assert all(p.requires_grad for p in agent.critic.parameters())  # frozen only during the actor's step
    assert int(agent.critic_steps) == 2


@pytest.mark.parametrize("noise_clip,smoothed", [(0.0, False), (0.5, True)])
def test_td3_smoothing_reaches_the_target(noise_clip, smoothed):
    """TD3's critic loss on one fixed batch, against the loss worked out from its networks before the step with the
    unsmoothed target y = r + d min Q'(s', mu'(s')): equal when noise_clip = 0 (the noise clipped to nothing),
    different when policy_noise = 0.2 may move the target action by up to 0.5."""
    agent = agent_of("td3", policy_noise=0.2, noise_clip=noise_clip)
    fill(agent)
    batch = agent.memory.sample(8)
    with torch.no_grad():
        y = td3_critic_target(batch["reward"], batch["discount"],
                              *agent.target_critic(batch["next_obs"], agent.target_actor(batch["next_obs"])))
        expected = critic_regression_loss(y, *agent.critic(batch["obs"], batch["action"]))
    got = agent.update(batch)["loss/critic"]
    assert (not torch.allclose(got, expected)) if smoothed else torch.allclose(got, expected)


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("algo", ALGOS)
def test_discrete_action_space_is_refused_with_one_clear_message(algo):
    spec = EnvSpec("CartPole-v1", sp.Box(-1.0, 1.0, (4,), np.float32), sp.Discrete(2))
    with pytest.raises(ConfigError, match=rf"algo={algo} needs a continuous \(float Box\) action space, but env "
                                          r"CartPole-v1 has Discrete\(2\)"):
        ALGOS[algo][0].make_agent(small(algo), spec, 0)
    unbounded = EnvSpec("Fake-v0", OBS, sp.Box(-np.inf, np.inf, (1,), np.float32))
    with pytest.raises(ConfigError, match="must be finite"):
        ALGOS[algo][0].make_agent(small(algo), unbounded, 0)


@pytest.mark.parametrize("algo", ALGOS)
def test_cli_refuses_cartpole(algo, workdir: Path):
    """rlrun algo=td3 / ddpg on the default env (CartPole-v1, Discrete(2)): exit 2, one line, no traceback."""
    proc = run_rlrun([f"algo={algo}", "logger=none"], workdir)
    assert proc.returncode == 2, proc.stderr
    assert (f"algo={algo} needs a continuous (float Box) action space, but env CartPole-v1 has Discrete(2)"
            in proc.stderr)
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("key,value", [("policy_delay", 0), ("exploration_noise", -0.1), ("tau", 0.0)])
def test_out_of_range_keys_are_refused(key, value, workdir: Path):
    proc = run_rlrun(["algo=td3", "env=pendulum", f"algo.{key}={value}", "logger=none"], workdir)
    assert proc.returncode == 2 and f"algo.{key}" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------- weights, state


@pytest.mark.parametrize("algo", ALGOS)
def test_policy_factory_builds_an_acting_copy_without_replay(algo):
    """What a Ray worker gets: a picklable factory of an agent with a 1-transition memory; with the learner's weights
    it acts as the learner (the env-step count ends its warm-up too)."""
    plan = build_algo(tiny(algo))
    try:
        policy = pickle.loads(pickle.dumps(plan.policy_factory))(1)
        assert isinstance(policy, ALGOS[algo][1]) and policy.memory.capacity == 1
        plan.agent.env_steps.fill_(500)
        policy.set_weights(plan.agent.get_weights())
        assert int(policy.env_steps) == 500
        obs = torch.as_tensor(sp.sample(OBS, (5,), 0))
        torch.testing.assert_close(policy.get_actions(obs, explore=False), plan.agent.get_actions(obs, explore=False))
        torch.manual_seed(3)
        a = plan.agent.get_actions(obs)
        torch.manual_seed(3)
        torch.testing.assert_close(policy.get_actions(obs), a)  # past warm-up: the same noise, the same actions
    finally:
        plan.stop()


@pytest.mark.parametrize("algo", ALGOS)
def test_state_dict_round_trip_continues_identically(algo, tmp_path: Path):
    """Train, save (a weights-only torch file, as checkpoints are), load into a plan built with another seed: the
    same parameters, targets, Adam moments, replay, critic-step count and counters; so the next two updates (same
    global torch seed: the smoothing noise) give bitwise the same state in both."""
    a, b = build_algo(tiny(algo), seed=0), build_algo(tiny(algo), seed=5)
    try:
        for _ in range(12):
            a.training_step()
        assert a.gradient_steps == 12 * 8 - 64 + 8
        torch.save(a.state_dict(), tmp_path / "state.pt")
        b.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
        assert (b.env_steps, b.gradient_steps, b.update_budget) == (a.env_steps, a.gradient_steps, a.update_budget)
        for plan in (a, b):
            torch.manual_seed(7)
            plan.agent.update()
            plan.agent.update()
        assert_same(a.state_dict(), b.state_dict())
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("algo", ALGOS)
def test_same_seed_same_parameters(algo):
    """executor=local, the same seed and config twice: identical state after 12 training steps (40 gradient steps);
    another seed gives other parameters."""
    runs = []
    for seed in (0, 0, 1):
        plan = build_algo(tiny(algo), seed=seed)
        try:
            for _ in range(12):
                result = plan.training_step()
            assert plan.gradient_steps == 40
            assert {"loss/critic", "loss/actor", "q/mean", "replay/size"} <= set(result.metrics)
            runs.append(plan.agent.state_dict())
        finally:
            plan.stop()
    assert_same(runs[0], runs[1])
    assert any(not torch.equal(runs[0][k], runs[2][k]) for k in runs[0] if k.startswith(("actor.", "critic.")))


@pytest.mark.parametrize("algo", ALGOS)
def test_the_presets_apply(algo):
    """env=pendulum: the learning test's settings; env=mujoco: CleanRL's, 1M env steps, replay in checkpoints."""
    cfg = compose([f"algo={algo}", "env=pendulum"])
    assert [list(cfg.algo.hidden_sizes), cfg.algo.gamma, cfg.algo.learning_starts] == [[64, 64], 0.98, 1000]
    cfg = compose([f"algo={algo}", "env=mujoco"])
    assert [cfg.algo.actor_lr, cfg.algo.batch_size, cfg.algo.learning_starts, cfg.algo.policy_delay,
            cfg.stop.env_steps, cfg.checkpoint.replay] == [3e-4, 256, 25_000, 2, 1_000_000, True]
    assert compose([f"algo={algo}", "env=pendulum", "algo.batch_size=32"]).algo.batch_size == 32  # overrides win


# ---------------------------------------------------------------------------------------------- learning, CLI

# The learning tests run the env=pendulum presets (conf/algo_env/td3_pendulum.yaml, ddpg_pendulum.yaml): smaller
# than CleanRL's sizes so that they run quickly on 2 shared cores.

@pytest.mark.parametrize("algo", ALGOS)
def test_learns_pendulum(algo, tmp_path: Path):
    """Seeded: the mean return of the last 20 episodes reaches -400 within 15k env steps (the run stops there)."""
    cfg = compose([f"algo={algo}", "env=pendulum", "seed=0", "stop.env_steps=15000",
                   "stop.episode_return_mean=-400", "logger=none", "export.formats=[]", "checkpoint.at_end=false"])
    start = time.perf_counter()
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary
    assert summary["episode_return_mean"] >= -400, summary
    print(f"{algo} Pendulum-v1: {summary['env_steps']} env steps, {time.perf_counter() - start:.1f} s")


@pytest.mark.parametrize("algo", ALGOS)
def test_cli_local_run_writes_summary_and_exports(algo, workdir: Path):
    """A short CLI run on executor=local: summary.json, and the end-of-run TorchScript export acts with mu(s) inside
    the Box bounds."""
    run_rlrun([*tiny(algo), "stop.env_steps=160", "logger=none"], workdir, check=True)
    summary = only_summary(workdir)
    assert summary["algo"] == algo and summary["env"] == "Pendulum-v1", summary
    assert summary["stop_reason"] == "env_steps" and summary["env_steps"] == 160 and summary["error"] is None
    policy = torch.jit.load(summary["export"][0])
    out = policy(torch.as_tensor(sp.sample(OBS, (4,), 0)))
    assert out.shape == (4, 1) and float(out.abs().max()) <= 2.0


@pytest.mark.parametrize("algo", ALGOS)
def test_cli_ray_run(algo, workdir: Path):
    """The same plan on executor=ray: one worker acting with the factory-built copy, weights synced per sample."""
    proc = run_rlrun([*tiny(algo), "executor=ray", "executor.num_workers=1", "executor.num_cpus=2",
                      "stop.env_steps=160", "logger=none", "export.formats=[]"], workdir, check=True)
    summary = only_summary(workdir)
    assert summary["algo"] == algo and summary["stop_reason"] == "env_steps", proc.stderr
    assert summary["env_steps"] == 160 and summary["error"] is None


def test_td3_config_extends_ddpgs():
    """TD3's keys are DDPG's and the smoothing's two, with the same CleanRL defaults."""
    assert {f for f in TD3Config.__dataclass_fields__} - set(DDPGConfig.__dataclass_fields__) == {
        "policy_noise", "noise_clip"}
    td3, ddpg = TD3Config(), DDPGConfig()
    assert all(getattr(td3, f) == getattr(ddpg, f) for f in DDPGConfig.__dataclass_fields__ if f != "name")
