"""DQN: learns CartPole, is deterministic, and its switches (dueling, prioritised replay, n-step, CNN) work."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from rlrun import spaces as sp
from rlrun.algos.dqn import DQNAgent
from rlrun.algos.dqn_config import DQNConfig
from rlrun.app.run import run_experiment
from rlrun.components.losses import dqn_td_error
from rlrun.components.nstep import NStepAggregator
from rlrun.components.prioritized_replay import PrioritizedReplayMemory
from rlrun.config import compose
from rlrun.execution.sample_batch import SampleBatch

OBS = sp.Box(-1.0, 1.0, (4,), np.float32)


def test_default_dqn_learns_cartpole(tmp_path: Path) -> None:
    """The default config (what `make run` uses) reaches a 20-episode mean return of 195 well inside 40k steps."""
    summary = run_experiment(compose(["stop.episode_return_mean=195", "stop.env_steps=40000", "logger=none",
                                      "export.formats=[]", "checkpoint.at_end=false"]), tmp_path / "run")
    assert summary["stop_reason"] == "episode_return_mean", summary
    assert summary["episode_return_mean"] >= 195


def test_rainbow_style_switches_learn_cartpole(tmp_path: Path) -> None:
    """Dueling head + prioritised replay + 3-step returns on the same task and budget."""
    summary = run_experiment(compose(["algo.dueling=true", "algo.prioritized_replay=true", "algo.n_step=3",
                                      "stop.episode_return_mean=150", "stop.env_steps=40000", "logger=none",
                                      "export.formats=[]", "checkpoint.at_end=false"]), tmp_path / "run")
    assert summary["stop_reason"] == "episode_return_mean", summary


def _params_after(tmp_path: Path, name: str) -> dict[str, torch.Tensor]:
    from rlrun.checkpoint import load_checkpoint

    run_dir = tmp_path / name
    run_experiment(compose(["stop.env_steps=1200", "algo.learning_starts=200", "logger=none", "export.formats=[]",
                            "algo.prioritized_replay=true", "algo.n_step=2", "seed=11"]), run_dir)
    return load_checkpoint(run_dir / "checkpoints" / "latest.pt")["algo"]["agent"]


def test_same_seed_same_parameters(tmp_path: Path) -> None:
    a, b = _params_after(tmp_path, "a"), _params_after(tmp_path, "b")
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), key


def test_td_error_worked_example() -> None:
    """Batch of 2, actions a = [0, 1], rewards r = [1, 0.5], discounts d = [0.9, 0] (the second terminal).

    Q(s, .)       = [[1, 2], [3, 4]]          -> Q(s, a) = [1, 4]
    Q_target(s')  = [[10, 20], [30, 40]]
    Q_online(s')  = [[5, 0], [7, 1]]

    Double DQN selects a' with the online net: argmax [5, 0] = 0, argmax [7, 1] = 0 -> bootstrap
    Q_target(s', a') = [10, 30]; y = [1 + 0.9 * 10, 0.5 + 0 * 30] = [10, 0.5]; TD = y - Q(s, a) = [9, -3.5].
    Plain DQN selects a' with the target net: argmax [10, 20] = 1, argmax [30, 40] = 1 -> bootstrap [20, 40];
    y = [1 + 0.9 * 20, 0.5 + 0 * 40] = [19, 0.5]; TD = [18, -3.5].
    The non-terminal item tells them apart (9 vs 18); on the terminal one (discount 0) they must agree.
    """
    q = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    args = (q, torch.tensor([0, 1]), torch.tensor([1.0, 0.5]), torch.tensor([0.9, 0.0]),
            torch.tensor([[10.0, 20.0], [30.0, 40.0]]))
    double = dqn_td_error(*args, q_next_online=torch.tensor([[5.0, 0.0], [7.0, 1.0]]))
    plain = dqn_td_error(*args)
    torch.testing.assert_close(double, torch.tensor([9.0, -3.5]))
    torch.testing.assert_close(plain, torch.tensor([18.0, -3.5]))
    assert double[0] != plain[0] and double[1] == plain[1]


def test_switches_compose_the_library_components() -> None:
    cfg = replace(DQNConfig(), dueling=True, prioritized_replay=True, n_step=3, batch_size=4)
    agent = DQNAgent(cfg).build(obs=OBS, actions=sp.Discrete(2))
    assert type(agent.q.head).__name__ == "DuelingQHead"
    assert isinstance(agent.memory, PrioritizedReplayMemory) and isinstance(agent.n_step, NStepAggregator)
    # T = 6 steps of B = 2 copies, no episode end: 3-step windows complete from step 3 on
    obs = np.random.default_rng(0).uniform(-1, 1, (7, 2, 4)).astype(np.float32)
    for t in range(6):
        agent.observe(obs[t], np.zeros(2, np.int64), np.ones(2, np.float32), obs[t + 1], np.zeros(2, bool),
                      np.zeros(2, bool))
    assert agent.memory.size() == (6 - 3 + 1) * 2
    records, _, _ = agent.memory.sample(4)
    torch.testing.assert_close(records["reward"], torch.full((4,), 1 + 0.99 + 0.99 ** 2))  # 3 rewards of 1
    torch.testing.assert_close(records["discount"], torch.full((4,), 0.99 ** 3))
    before = agent.memory.probabilities().clone()
    agent.update()
    assert not torch.equal(before, agent.memory.probabilities())  # priorities follow the TD errors


def test_observe_batch_stores_what_observing_step_by_step_stores() -> None:
    """A worker's batch goes into replay in one insert; the memory must hold what T inserts of one step each
    leave: the same records in the same slots, the same priorities. T = 6 steps of B = 2 copies; copy 0's
    episode terminates at step 2 and copy 1's is truncated at step 4, so windows flush, shorter ones included."""
    T, B = 6, 2
    rng = np.random.default_rng(0)
    terminated, truncated = np.zeros((T, B), bool), np.zeros((T, B), bool)
    terminated[2, 0] = truncated[4, 1] = True
    batch = SampleBatch(rng.uniform(-1, 1, (T + 1, B, 4)).astype(np.float32), rng.integers(0, 2, (T, B)),
                        rng.normal(size=(T, B)).astype(np.float32), terminated, truncated,
                        rng.uniform(-1, 1, (2, 4)).astype(np.float32))
    cfg = replace(DQNConfig(), prioritized_replay=True, n_step=3, buffer_size=64)
    at_once, by_step = (DQNAgent(cfg).build(obs=OBS, actions=sp.Discrete(2)) for _ in range(2))
    at_once.observe_batch(batch)
    for t in range(T):
        by_step.observe(*batch.step(t))
    # copy 0: 3 windows flushed at step 2, then steps 3-5 make one full window; copy 1: 3 full windows by step 4
    # (from steps 0, 1, 2), then its 2 shorter ones flushed there; step 5 starts a new window
    assert at_once.memory.size() == by_step.memory.size() == 4 + 5
    stored = at_once.memory.state_dict()
    for key, value in by_step.memory.state_dict().items():  # the records, and the trees in the extra state
        if isinstance(value, dict):
            assert value.keys() == stored[key].keys()
            assert all(torch.equal(torch.as_tensor(v), torch.as_tensor(stored[key][k])) for k, v in value.items())
        else:
            assert torch.equal(stored[key], value), key
    np.testing.assert_array_equal(at_once.memory.sum_tree.tree, by_step.memory.sum_tree.tree)
    assert int(at_once.exploration.timestep) == int(by_step.exploration.timestep) == T * B


def test_noisy_epsilon_and_the_beta_schedule_reach_the_components() -> None:
    """algo.noisy_epsilon: a constant epsilon on top of noisy nets (0 by default); algo.per_beta_end: where beta
    stops (a fixed beta when it equals per_beta_start)."""
    noisy = replace(DQNConfig(), noisy=True, prioritized_replay=True, per_beta_steps=10)
    default = DQNAgent(noisy).build(obs=OBS, actions=sp.Discrete(2))
    assert default.exploration.epsilon() == 0.0
    agent = DQNAgent(replace(noisy, noisy_epsilon=0.01, per_beta_start=0.5, per_beta_end=0.5))
    agent.build(obs=OBS, actions=sp.Discrete(2))
    agent.exploration.advance(10**6)
    assert agent.exploration.epsilon() == 0.01
    assert (default.memory.beta(), agent.memory.beta()) == (0.4, 0.5)
    default.memory.timestep.fill_(10)
    agent.memory.timestep.fill_(10)
    assert (default.memory.beta(), agent.memory.beta()) == (1.0, 0.5)


@pytest.mark.parametrize("network", ["nature_cnn", "impala_resnet"])
def test_image_torsos_build_and_update(network: str) -> None:
    cfg = replace(DQNConfig(), network=network, dueling=True, batch_size=2, buffer_size=8)
    image = sp.Box(0, 255, (4, 84, 84), np.uint8)
    agent = DQNAgent(cfg).build(obs=image, actions=sp.Discrete(6))
    frames = sp.sample(image, (4,), seed=0)
    agent.observe(frames, np.arange(4) % 6, np.ones(4, np.float32), frames, np.zeros(4, bool))
    info = agent.update()
    assert torch.isfinite(info["loss"])
    assert agent.get_actions(torch.as_tensor(frames), explore=False).shape == (4,)


@pytest.mark.parametrize("executor", [["executor=local"], ["executor=ray", "executor.num_cpus=2",
                                                          "executor.num_workers=1"]], ids=["local", "ray"])
def test_pong_smoke_run(tmp_path: Path, executor: list[str]) -> None:
    """A few hundred frames of Pong under the DeepMind protocol with the Nature CNN of the Atari preset
    (conf/algo_env/dqn_atari.yaml), on both executors: frames = 4 x env steps."""
    preset = compose(["env=pong"]).algo
    assert (preset.network, preset.lr, preset.batch_size, preset.huber_delta) == ("nature_cnn", 1e-4, 32, 1.0)
    summary = run_experiment(compose(["env=pong", *executor, "algo.learning_starts=64",
                                      "algo.batch_size=8", "algo.buffer_size=512", "algo.rollout_steps=8",
                                      "algo.train_every=8", "stop.env_steps=160", "logger=none",
                                      "export.formats=[]"]), tmp_path / "run")
    assert summary["env_steps"] == 160 and summary["frames"] == 640
