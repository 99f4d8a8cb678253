"""rlrun.make_agent (rlrun/agent.py): an algorithm's agent in an application's own loop, without the CLI — acting,
observing, updating, saving, exporting, and its errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import assert_same

import rlrun
from rlrun.errors import CheckpointError, ConfigError
from rlrun.registry import RegistryError


def vector_env(env_id: str, n: int) -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})


@pytest.fixture
def one_thread():  # noqa: ANN201 - as the CLI runs (device.torch_threads=1); restored after the test
    before = torch.get_num_threads()
    yield 1
    torch.set_num_threads(before)


def run_loop(agent: rlrun.agent.Agent, envs: gym.vector.VectorEnv, steps: int, update_every: int, seed: int = 0,
             stop_at: float | None = None) -> list[float]:
    """The README's loop: act, step, observe (with the real final observations), update every few steps."""
    obs, _ = envs.reset(seed=seed)
    returns, acc = [], np.zeros(envs.num_envs)
    for step in range(steps):
        actions = agent.get_actions(obs)
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        agent.observe(obs, actions, rewards, agent.final_obs(next_obs, terminated, truncated, info), terminated,
                      truncated)
        acc += rewards
        for i in np.flatnonzero(terminated | truncated):
            returns.append(float(acc[i]))
            acc[i] = 0.0
        if (step + 1) % update_every == 0:
            agent.update()
        obs = next_obs
        if stop_at is not None and len(returns) >= 20 and np.mean(returns[-20:]) >= stop_at:
            break
    return returns


def test_ppo_learns_cartpole_in_an_applications_own_loop(one_thread):
    """8 env copies, an update every rollout_steps (32) agent steps: mean return >= 195 over the last 20 episodes
    within 40k env steps (seed 0 gets there after ~15k, ~8 s on a busy machine)."""
    envs = vector_env("CartPole-v1", 8)
    agent = rlrun.make_agent("ppo", envs.single_observation_space, envs.single_action_space, seed=0,
                             torch_threads=one_thread, total_env_steps=60_000)
    assert torch.get_num_threads() == 1 and agent.config.rollout_steps == 32
    returns = run_loop(agent, envs, 40_000 // 8, agent.config.rollout_steps, stop_at=195)
    envs.close()
    assert np.mean(returns[-20:]) >= 195, returns[-20:]


def test_dqn_in_an_applications_own_loop_stores_learns_and_exports(tmp_path, one_thread):
    """observe() stores every row in the replay memory; update() takes a gradient step (weights change); a single
    unbatched observation gets an unbatched action; the exported TorchScript policy acts as get_actions(explore=
    False); save/load restores the weights, optimizer and replay exactly."""
    envs = vector_env("CartPole-v1", 4)
    agent = rlrun.make_agent("dqn", envs.single_observation_space, envs.single_action_space, seed=1,
                             torch_threads=one_thread, batch_size=32, hidden_sizes=[16])
    memory = agent.component.memory
    run_loop(agent, envs, 20, update_every=10**9)
    assert int(memory.count) == 80
    before = {k: v.clone() for k, v in agent.get_weights().items()}
    metrics = agent.update()
    assert "loss" in metrics and np.isfinite(metrics["loss"])
    assert any(not torch.equal(before[k], v) for k, v in agent.get_weights().items())

    single = envs.single_observation_space.sample()
    action = agent.get_actions(single, explore=False)
    assert np.ndim(action) == 0 and envs.single_action_space.contains(action.item())

    obs = np.stack([envs.single_observation_space.sample() for _ in range(16)])
    path = agent.export_model(tmp_path / "policy.pt")
    exported = torch.jit.load(str(path))
    np.testing.assert_array_equal(exported(torch.as_tensor(obs)).numpy(), agent.get_actions(obs, explore=False))

    agent.save(tmp_path / "agent.pt")
    twin = rlrun.make_agent("dqn", envs.single_observation_space, envs.single_action_space, seed=7,
                            batch_size=32, hidden_sizes=[16])
    twin.load(tmp_path / "agent.pt")
    assert_same(agent.component.state_dict(), twin.component.state_dict(), "agent")
    envs.close()


def test_load_refuses_a_file_that_would_run_code(tmp_path):
    """A file for Agent.load whose unpickling would run code (here: create a marker file; an attack would call
    os.system) is refused with the checkpoints' one-line CheckpointError, and the code never runs."""
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    agent = rlrun.make_agent("dqn", space, gym.spaces.Discrete(2), seed=0, hidden_sizes=[8])
    path = tmp_path / "agent.pt"
    torch.save({**agent.component.state_dict(), "extra": Payload()}, path)
    with pytest.raises(CheckpointError, match=r"agent\.pt: refused: the file holds Python objects"):
        agent.load(path)
    assert not marker.exists()


def test_continuous_actions_with_ppo_keep_the_raw_sample_for_the_update(one_thread):
    """Pendulum (Box actions): observe() hands PPO the unclipped sample get_actions drew (its log-prob is of that
    sample), and an update runs on the observed steps."""
    envs = vector_env("Pendulum-v1", 2)
    agent = rlrun.make_agent("ppo", envs.single_observation_space, envs.single_action_space, seed=0,
                             torch_threads=one_thread, rollout_steps=8, minibatch_size=8, num_epochs=1)
    obs, _ = envs.reset(seed=0)
    actions = agent.get_actions(obs)
    assert actions.shape == (2, 1) and np.all(np.abs(actions) <= 2.0)
    raw = agent._extras["raw_action"].clone()
    next_obs, rewards, terminated, truncated, _ = envs.step(actions)
    agent.observe(obs, actions, rewards, next_obs, terminated, truncated)
    assert torch.equal(agent.component._steps[0]["raw_action"], raw)
    run_loop(agent, envs, 7, update_every=10**9)
    assert "loss" in agent.update() and agent.component._steps == []
    envs.close()


def test_observe_needs_the_batch_get_actions_acted_for():
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    agent = rlrun.make_agent("ppo", space, gym.spaces.Discrete(2))
    agent.get_actions(np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match="observe\\(\\): 2 rows, but the last get_actions\\(\\) acted for 4"):
        agent.observe(np.zeros((2, 3), np.float32), np.zeros(2, np.int64), np.zeros(2), np.zeros((2, 3), np.float32),
                      np.zeros(2, bool), np.zeros(2, bool))


@pytest.mark.parametrize("algo, overrides, error, match", [
    ("ppo", {"learning_rate": 1e-3}, ConfigError, "'learning_rate' is not a config key of algo=ppo"),
    ("dqn", {"epsilon_star": 0.5}, ConfigError, "Did you mean epsilon_start"),
    ("dqn", {"batch_size": "big"}, ConfigError, "make_agent\\('dqn'\\).*batch_size"),
    ("dqnn", {}, RegistryError, "dqn"),
])
def test_bad_arguments_are_one_clear_error(algo, overrides, error, match):
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    with pytest.raises(error, match=match):
        rlrun.make_agent(algo, space, gym.spaces.Discrete(2), **overrides)


def test_dqn_refuses_continuous_actions_at_build_time():
    with pytest.raises(ConfigError, match="Discrete"):
        rlrun.make_agent("dqn", gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Box(-1, 1, (1,), np.float32))


@pytest.mark.parametrize("algo", ["dqn", "ppo", "a2c", "trpo", "impala", "appo", "sac", "pqn"])
def test_every_algorithm_acts_observes_and_updates_in_an_applications_loop(algo: str, one_thread):
    """20 steps of 4 env copies (Pendulum for SAC, CartPole otherwise), then update(): a finite loss and moved
    weights. IMPALA and APPO learn from rollouts given to update(): the wrapper collects the observed steps."""
    env_id = "Pendulum-v1" if algo == "sac" else "CartPole-v1"
    envs = vector_env(env_id, 4)
    small = {"batch_size": 16} if algo in ("dqn", "sac") else {}
    agent = rlrun.make_agent(algo, envs.single_observation_space, envs.single_action_space, seed=0,
                             torch_threads=one_thread, **small)
    before = {k: v.clone() for k, v in agent.component.state_dict().items() if isinstance(v, torch.Tensor)}
    run_loop(agent, envs, 20, update_every=10**9)
    metrics = agent.update()
    envs.close()
    losses = [v for k, v in metrics.items() if k == "loss" or k.startswith("loss/")]
    assert losses and all(np.isfinite(v) for v in losses), metrics
    after = agent.component.state_dict()
    assert any(not torch.equal(v, after[k]) for k, v in before.items() if v.is_floating_point())


@pytest.mark.parametrize("algo", ["bc", "iql", "cql"])
def test_offline_algorithms_are_refused_with_the_reason(algo: str):
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    with pytest.raises(ConfigError, match=f"algo={algo} learns from a dataset, on batches its plan draws: train it "
                                          f"with the CLI"):
        rlrun.make_agent(algo, space, gym.spaces.Box(-1, 1, (1,), np.float32))


def test_apex_is_refused_with_the_reason():
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    with pytest.raises(ConfigError, match="algo=apex's agent learns from its plan's distributed parts"):
        rlrun.make_agent("apex", space, gym.spaces.Discrete(2))
