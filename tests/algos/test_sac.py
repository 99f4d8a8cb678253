"""SAC (rlrun/algos/sac.py): the target and the three losses against hand-worked numbers, the components built alone
from spaces, acting in the Box bounds, the update (targets Polyak-averaged, temperature moving the right way),
weights and checkpoints, determinism, learning Pendulum-v1, the CLI on local and Ray, and the Discrete-space error."""

from __future__ import annotations

import math
import pickle
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_same, only_summary, run_rlrun
from omegaconf import OmegaConf

from rlrun import spaces as sp
from rlrun.algos.sac import (
    SAC,
    Actor,
    QFunction,
    SACAgent,
    Temperature,
    TwinQ,
    sac_actor_loss,
    sac_critic_loss,
    sac_critic_target,
    sac_temperature_loss,
)
from rlrun.algos.sac_config import SACConfig
from rlrun.app.run import run_experiment, seed_everything
from rlrun.components.testing import ComponentTest
from rlrun.config import compose
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError
from rlrun.registry import registry

OBS = sp.Box(-8.0, 8.0, (3,), np.float32)  # Pendulum-v1's observation
PENDULUM_ACTIONS = sp.Box(-2.0, 2.0, (1,), np.float32)
UNIT = sp.Box(-1.0, 1.0, (2,), np.float32)
SMALL = SACConfig(hidden_sizes=[16], batch_size=8, buffer_size=64, learning_starts=0)
# Tiny settings for runs through the run loop: a few hundred env steps of Pendulum-v1.
TINY = ["env=pendulum", "algo=sac", "algo.hidden_sizes=[16]", "algo.batch_size=16", "algo.buffer_size=1000",
        "algo.learning_starts=64", "algo.rollout_steps=8", "algo.train_every=1"]


def build_algo(overrides: list[str], seed: int = 0) -> SAC:
    """An algorithm built the way ``run_experiment`` builds it (seeded globals, env factory, local executor)."""
    cfg = compose(["logger=none", f"seed={seed}", *overrides])
    torch.set_num_threads(cfg.device.torch_threads)  # as run_experiment does (1: no thread contention on 2 cores)
    seed_everything(seed)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, seed)
    return registry.get("algo", cfg.algo.name)(OmegaConf.to_object(cfg.algo), env_factory.spec, executor,
                                               torch.device("cpu"), seed)


def params_of(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def fill(agent: SACAgent, n: int = 32, seed: int = 0, low: float = -2.0, high: float = 2.0) -> None:
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    actions = rng.uniform(low, high, (n, 1)).astype(np.float32)
    agent.observe(obs, actions, rng.normal(size=n).astype(np.float32), obs[::-1].copy(), rng.random(n) < 0.2,
                  rng.random(n) < 0.2)


# ---------------------------------------------------------------------------------------------- the math


def test_critic_target_worked_example():
    """B = 2, alpha = 0.5, gamma = 0.9; item 2 terminated (discount 0).
    min(Q1', Q2') = [min(3, 2), min(1, 5)] = [2, 1]; log pi(a'|s') = [-1, 0.4]
    soft value V(s') = min Q' - alpha log pi = [2 + 0.5, 1 - 0.2] = [2.5, 0.8]
    y = r + d V(s') = [1 + 0.9 * 2.5, -1 + 0 * 0.8] = [3.25, -1]."""
    y = sac_critic_target(torch.tensor([1.0, -1.0]), torch.tensor([0.9, 0.0]), torch.tensor([3.0, 1.0]),
                          torch.tensor([2.0, 5.0]), torch.tensor([-1.0, 0.4]), 0.5)
    torch.testing.assert_close(y, torch.tensor([3.25, -1.0]))


def test_critic_loss_worked_example():
    """y = [1, 2], Q1 = [0, 2], Q2 = [3, 1]: (1/2) mean((Q1 - y)^2) = (1/2)(1 + 0)/2 = 0.25,
    (1/2) mean((Q2 - y)^2) = (1/2)(4 + 1)/2 = 1.25; J_Q = 1.5. No gradient reaches the target."""
    q1 = torch.tensor([0.0, 2.0], requires_grad=True)
    q2 = torch.tensor([3.0, 1.0])
    target = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = sac_critic_loss(q1, q2, target)
    assert float(loss.detach()) == pytest.approx(1.5)
    loss.backward()
    torch.testing.assert_close(q1.grad, torch.tensor([-0.5, 0.0]))  # d/dq1 0.5 mean((q1 - y)^2) = (q1 - y) / B
    assert target.grad is None


def test_actor_loss_worked_example():
    """alpha = 0.2, log pi = [-1, 0.5], Q1 = [2, 0], Q2 = [1, 3]: alpha log pi - min Q = [-0.2 - 1, 0.1 - 0]
    = [-1.2, 0.1]; mean = -0.55."""
    loss = sac_actor_loss(torch.tensor([-1.0, 0.5]), torch.tensor([2.0, 0.0]), torch.tensor([1.0, 3.0]), 0.2)
    assert float(loss) == pytest.approx(-0.55)


def test_temperature_loss_worked_example_and_direction():
    """log alpha = ln 0.5 (alpha 0.5), target entropy H = -1, log pi = [-0.5, 1.5] (entropy estimate -mean = -0.5,
    above the target -1): J = -mean(alpha (log pi + H)) = -0.5 * mean([-1.5, 0.5]) = -0.5 * -0.5 = 0.25.
    dJ/d(log alpha) = -alpha mean(log pi + H) = 0.25 > 0: gradient descent lowers alpha (entropy above target).
    With log pi = [2, 2] (entropy -2 < -1): dJ/d(log alpha) = -0.5 * (2 - 1) = -0.5 < 0: alpha grows."""
    log_alpha = torch.tensor(math.log(0.5), requires_grad=True)
    loss = sac_temperature_loss(log_alpha, torch.tensor([-0.5, 1.5]), -1.0)
    assert float(loss.detach()) == pytest.approx(0.25)
    loss.backward()
    assert float(log_alpha.grad) == pytest.approx(0.25)
    log_alpha.grad = None
    sac_temperature_loss(log_alpha, torch.tensor([2.0, 2.0]), -1.0).backward()
    assert float(log_alpha.grad) == pytest.approx(-0.5)


# ---------------------------------------------------------------------------------------------- components


def test_actor_and_critics_built_alone():
    actor = ComponentTest(Actor([16], "relu", -5.0, 2.0), {"obs": OBS, "actions": UNIT}, batch_shape=(7,))
    mean, log_std = actor.call("forward")
    assert mean.shape == log_std.shape == (7, 2)
    q = ComponentTest(QFunction([16], "relu"), {"obs": OBS, "actions": UNIT}, batch_shape=(7,))
    assert q.call("forward").shape == (7,)
    twin = ComponentTest(TwinQ([16], "relu"), {"obs": OBS, "actions": UNIT}, batch_shape=(7,))
    q1, q2 = twin.call("forward")
    assert q1.shape == q2.shape == (7,) and not torch.allclose(q1, q2)  # independent initialisations


@pytest.mark.parametrize("learn", [True, False])
def test_temperature_built_alone(learn):
    """alpha starts at init_alpha; the target entropy defaults to -|A| = -2 for a 2-dimensional action."""
    temp = Temperature(init_alpha=0.5, learn=learn)
    test = ComponentTest(temp, {"actions": UNIT})
    assert float(test.call("alpha", output_batch_ranks=0)) == pytest.approx(0.5)  # a scalar
    assert temp.target_entropy == -2.0
    assert len(list(temp.parameters())) == (1 if learn else 0)
    assert Temperature(target_entropy=-0.3).build(actions=UNIT).target_entropy == -0.3


@pytest.mark.parametrize("actions", [PENDULUM_ACTIONS, sp.Box(np.array([0.0, -1.0], np.float32),
                                                              np.array([1.0, 3.0], np.float32))],
                         ids=["pendulum", "asymmetric"])
def test_agent_acts_inside_the_box_bounds(actions):
    """Warm-up: uniform random actions over the whole Box; afterwards policy samples, and the squashed mean when not
    exploring; all inside the bounds."""
    agent = SACAgent(replace(SMALL, learning_starts=10))
    test = ComponentTest(agent, {"obs": OBS, "actions": actions}, batch_shape=(2000,))
    low, high = torch.as_tensor(actions.low), torch.as_tensor(actions.high)
    warm = test.call("get_actions", explore=True)
    assert warm.shape == (2000, *actions.shape)
    span = high - low  # uniform over the box: each quarter of each dimension gets about a quarter of the samples
    quarters = ((warm - low) / span * 4).floor().clamp(0, 3)
    for q in range(4):
        assert ((quarters == q).float().mean(0) - 0.25).abs().max() < 0.05
    agent.env_steps.fill_(10)
    sampled = test.call("get_actions", explore=True)
    greedy = test.call("get_actions", explore=False)
    obs = test.sample("obs")
    mean, _ = agent.actor(obs)
    torch.testing.assert_close(agent.get_actions(obs, explore=False),
                               low + (torch.tanh(mean) + 1) * (high - low) / 2)
    assert not torch.equal(sampled, greedy)


def test_observe_normalises_actions_and_discounts():
    """Env actions [-2, 0, 1] of a Box(-2, 2) are stored as [-1, 0, 0.5]; terminated -> discount 0, truncated ->
    gamma (bootstrap from the final observation), neither -> gamma."""
    agent = SACAgent(replace(SMALL, gamma=0.9)).build(obs=OBS, actions=PENDULUM_ACTIONS)
    obs = np.zeros((3, 3), np.float32)
    agent.observe(obs, np.array([[-2.0], [0.0], [1.0]], np.float32), np.ones(3, np.float32), obs,
                  np.array([True, False, False]), np.array([False, True, False]))
    assert agent.memory.size() == 3 and int(agent.env_steps) == 3
    torch.testing.assert_close(agent.memory.store_action[:3], torch.tensor([[-1.0], [0.0], [0.5]]))
    torch.testing.assert_close(agent.memory.store_discount[:3], torch.tensor([0.0, 0.9, 0.9]))


def test_update_steps_every_part_and_polyak_averages_the_target():
    """One update under ComponentTest's trace (only the agent's own sub-components are called): the actor, both Q
    networks and log(alpha) move; the target critic is exactly (1 - tau) target + tau critic_after."""
    agent = SACAgent(replace(SMALL, tau=0.25))
    test = ComponentTest(agent, {"obs": OBS, "actions": PENDULUM_ACTIONS})
    fill(agent)
    actor0, critic0, target0 = params_of(agent.actor), params_of(agent.critic), params_of(agent.target_critic)
    alpha0 = float(agent.temperature.alpha())
    info = test.call("update", check_output=False)
    for key in ("loss/critic", "loss/actor", "loss/temperature", "policy/alpha", "policy/entropy", "q/mean"):
        assert torch.isfinite(info[key]), key
    assert float(info["policy/alpha"]) == pytest.approx(alpha0)  # the alpha the losses used: before its step
    assert all(not torch.equal(v, actor0[k]) for k, v in params_of(agent.actor).items())
    assert all(not torch.equal(v, critic0[k]) for k, v in params_of(agent.critic).items())
    assert float(agent.temperature.alpha()) != alpha0
    critic1 = params_of(agent.critic)
    for k, v in params_of(agent.target_critic).items():
        torch.testing.assert_close(v, 0.75 * target0[k] + 0.25 * critic1[k])
    assert {"actor", "critic", "target_critic", "temperature", "memory", "target_sync"} <= {
        c.callee for c in test.calls}
    for optimizer in (agent.actor_optimizer, agent.critic_optimizer, agent.alpha_optimizer):  # one Adam step each
        assert {int(s["step"]) for s in optimizer.state.values()} == {1}
    # the critic's parameters are trainable again after the actor's step (frozen only during it)
    assert all(p.requires_grad for p in agent.critic.parameters())


def test_fixed_temperature_does_not_move():
    agent = SACAgent(replace(SMALL, learn_alpha=False, init_alpha=0.2)).build(obs=OBS, actions=PENDULUM_ACTIONS)
    fill(agent)
    info = agent.update()
    assert "loss/temperature" not in info and agent.alpha_optimizer is None
    assert float(agent.temperature.alpha()) == pytest.approx(0.2)


def test_the_temperature_follows_the_entropy_target():
    """Entropy target far above what a policy with log-std <= -4 can have: alpha must grow; far below: shrink."""
    for target, grows in ((5.0, True), (-20.0, False)):
        torch.manual_seed(0)
        agent = SACAgent(replace(SMALL, target_entropy=target, log_std_max=-4.0, alpha_lr=0.05)).build(
            obs=OBS, actions=PENDULUM_ACTIONS)
        fill(agent)
        for _ in range(5):
            agent.update()
        assert (float(agent.temperature.alpha()) > 1.0) == grows


# ---------------------------------------------------------------------------------------------- bad input


def test_discrete_action_space_is_refused_with_one_clear_message():
    spec = EnvSpec("CartPole-v1", sp.Box(-1.0, 1.0, (4,), np.float32), sp.Discrete(2))
    with pytest.raises(ConfigError, match=r"algo=sac needs a continuous \(float Box\) action space, but env "
                                          r"CartPole-v1 has Discrete\(2\)"):
        SAC.make_agent(SACConfig(), spec, 0)
    unbounded = EnvSpec("Fake-v0", OBS, sp.Box(-np.inf, np.inf, (1,), np.float32))
    with pytest.raises(ConfigError, match="must be finite"):
        SAC.make_agent(SACConfig(), unbounded, 0)


def test_cli_refuses_cartpole(workdir: Path):
    """rlrun algo=sac on the default env (CartPole-v1, Discrete(2)): exit 2, one line naming the space, no traceback."""
    proc = run_rlrun(["algo=sac", "logger=none"], workdir)
    assert proc.returncode == 2, proc.stderr
    assert "algo=sac needs a continuous (float Box) action space, but env CartPole-v1 has Discrete(2)" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------------- weights, state


def test_policy_factory_builds_an_acting_copy_without_replay():
    """What a Ray worker gets: a picklable factory of an agent with a 1-transition memory; with the learner's weights
    it acts as the learner (the env-step count ends its warm-up too)."""
    algo = build_algo(TINY)
    try:
        policy = pickle.loads(pickle.dumps(algo.policy_factory))(1)
        assert isinstance(policy, SACAgent) and policy.memory.capacity == 1
        algo.agent.env_steps.fill_(500)
        policy.set_weights(algo.agent.get_weights())
        assert int(policy.env_steps) == 500
        obs = torch.as_tensor(sp.sample(OBS, (5,), 0))
        torch.testing.assert_close(policy.get_actions(obs, explore=False), algo.agent.get_actions(obs, explore=False))
        torch.manual_seed(3)
        a = algo.agent.get_actions(obs)
        torch.manual_seed(3)
        torch.testing.assert_close(policy.get_actions(obs), a)  # past warm-up: the same policy samples
    finally:
        algo.stop()


def test_state_dict_round_trip_continues_identically(tmp_path: Path):
    """Train, save (a weights-only torch file, as checkpoints are), load into an algorithm built with another seed:
    the same parameters, Adam moments, log(alpha), replay contents and generator, counters; so the next update (same
    global torch seed) gives bitwise the same state in both."""
    a, b = build_algo(TINY, seed=0), build_algo(TINY, seed=5)
    try:
        for _ in range(12):
            a.training_step()
        assert a.gradient_steps == 12 * 8 - 64 + 8  # learning from the step that reaches 64 env steps
        torch.save(a.state_dict(), tmp_path / "state.pt")
        b.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
        assert (b.env_steps, b.gradient_steps, b.update_budget) == (a.env_steps, a.gradient_steps, a.update_budget)
        for algo in (a, b):
            torch.manual_seed(7)
            algo.agent.update()
        assert_same(a.state_dict(), b.state_dict())
    finally:
        a.stop()
        b.stop()


def test_same_seed_same_parameters():
    """executor=local, the same seed and config twice: identical parameters after K = 12 training steps (past the
    warm-up: 32 gradient steps); another seed gives other parameters."""
    runs = []
    for seed in (0, 0, 1):
        algo = build_algo(TINY, seed=seed)
        try:
            for _ in range(12):
                algo.training_step()
            assert algo.gradient_steps == 40
            runs.append(algo.agent.state_dict())  # parameters, buffers, replay, Adam moments (extra state)
        finally:
            algo.stop()
    assert_same(runs[0], runs[1])
    assert any(not torch.equal(runs[0][k], runs[2][k]) for k in runs[0] if k.startswith(("actor.", "critic.")))




def test_the_pendulum_preset_applies_the_learning_test_settings():
    """conf/algo_env/sac_pendulum.yaml: rlrun algo=sac env=pendulum runs the settings the learning test measures."""
    cfg = compose(["algo=sac", "env=pendulum"])
    assert [list(cfg.algo.hidden_sizes), cfg.algo.batch_size, cfg.algo.train_every, cfg.algo.rollout_steps,
            cfg.algo.learning_starts] == [[64, 64], 128, 2, 8, 1000]
    assert cfg.stop.env_steps == 20000
    assert compose(["algo=sac", "env=pendulum", "algo.batch_size=32"]).algo.batch_size == 32  # overrides win


# ---------------------------------------------------------------------------------------------- learning, CLI

# The learning test runs the env=pendulum preset (conf/algo_env/sac_pendulum.yaml): smaller than the paper's sizes
# (Table 1: 256 x 256 units, batch 256, one gradient step per env step) so that it runs quickly on 2 shared cores.

def test_learns_pendulum(tmp_path: Path):
    """Seeded: the mean return of the last 20 episodes reaches -400 within 15k env steps (the run stops there)."""
    cfg = compose(["algo=sac", "env=pendulum", "seed=0", "stop.env_steps=15000",
                   "stop.episode_return_mean=-400", "logger=none", "export.formats=[]", "checkpoint.at_end=false"])
    start = time.perf_counter()
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary
    assert summary["episode_return_mean"] >= -400, summary
    print(f"SAC Pendulum-v1: {summary['env_steps']} env steps, {time.perf_counter() - start:.1f} s")


def test_cli_local_run_writes_summary_and_exports(workdir: Path):
    """A short CLI run on executor=local: summary.json, and the end-of-run TorchScript export acts with the squashed
    mean inside the Box bounds; `rlrun eval` runs the greedy policy from the checkpoint."""
    run_rlrun([*TINY, "stop.env_steps=160", "logger=none"], workdir, check=True)
    summary = only_summary(workdir)
    assert summary["algo"] == "sac" and summary["env"] == "Pendulum-v1", summary
    assert summary["stop_reason"] == "env_steps" and summary["env_steps"] == 160 and summary["error"] is None
    policy = torch.jit.load(summary["export"][0])
    out = policy(torch.as_tensor(sp.sample(OBS, (4,), 0)))
    assert out.shape == (4, 1) and float(out.abs().max()) <= 2.0


def test_cli_ray_run(workdir: Path):
    """The same plan on executor=ray: one worker acting with the factory-built copy, weights synced per sample."""
    proc = run_rlrun([*TINY, "executor=ray", "executor.num_workers=1", "executor.num_cpus=2", "stop.env_steps=160",
                      "logger=none", "export.formats=[]"], workdir, check=True)
    summary = only_summary(workdir)
    assert summary["algo"] == "sac" and summary["stop_reason"] == "env_steps", proc.stderr
    assert summary["env_steps"] == 160 and summary["error"] is None
