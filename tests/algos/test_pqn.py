"""PQN (rlrun/algos/pqn.py): the agent built alone from spaces, its next-state values read from the real next
observations, the update's targets and gradient steps, the schedules and weights, the refusal of Box actions,
learning CartPole-v1, and the CLI on the local and Ray executors. (The Q(lambda) targets' own tests:
tests/ops/test_q_lambda_returns.py.)"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import only_summary, run_rlrun

from rlrun import spaces as sp
from rlrun.algos.pqn import PQN, PQNAgent
from rlrun.algos.pqn_config import PQNConfig
from rlrun.app.run import run_experiment
from rlrun.components.testing import ComponentTest
from rlrun.config import compose
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError
from rlrun.execution.rollout import Rollout
from rlrun.ops import q_lambda_returns

from .test_ppo import CARTPOLE_OBS, build_algo

SMALL = dict(hidden_sizes=[16], anneal_lr=False, total_env_steps=None)


def _agent(**overrides) -> PQNAgent:
    torch.manual_seed(0)
    return PQNAgent(PQNConfig(**{**SMALL, **overrides})).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))


def _steps(T: int, B: int, seed: int, done_at: dict[tuple[int, int], str] | None = None) -> list[dict]:
    """T steps of B copies with random observations; ``done_at[(t, b)]``: "terminated" or "truncated"."""
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((T + 1, B, 4)).astype(np.float32)
    steps = []
    for t in range(T):
        term, trunc = np.zeros(B, bool), np.zeros(B, bool)
        next_obs = obs[t + 1].copy()
        for (tt, b), kind in (done_at or {}).items():
            if tt == t:
                (term if kind == "terminated" else trunc)[b] = True
                next_obs[b] = rng.standard_normal(4)  # the real final observation; obs[t + 1] is the reset one
        steps.append({"obs": obs[t], "next_obs": next_obs, "actions": rng.integers(0, 2, B),
                      "rewards": rng.standard_normal(B).astype(np.float32), "terminated": term, "truncated": trunc})
    return steps


def test_agent_builds_from_spaces_with_a_layer_norm_q_network():
    """CleanRL's pqn.py network: Linear 120 -> LayerNorm -> ReLU -> Linear 84 -> LayerNorm -> ReLU -> Linear n; the
    update calls only the agent's own sub-components."""
    agent = PQNAgent(PQNConfig())
    test = ComponentTest(agent, {"obs": CARTPOLE_OBS, "actions": sp.Discrete(2)})
    layers = [type(m).__name__ for m in agent.network.torso.layers]
    assert layers == ["Linear", "LayerNorm", "ReLU", "Linear", "LayerNorm", "ReLU"]
    assert agent.network.head.linear.out_features == 2
    assert isinstance(agent.torch_optimizer(), torch.optim.RAdam)
    actions = test.call("get_actions", obs=torch.as_tensor(sp.sample(CARTPOLE_OBS, (5,), 0)))
    assert actions.shape == (5,)
    rollout = Rollout.from_steps(_steps(8, 2, 0), CARTPOLE_OBS, torch.device("cpu"))
    test.call("update", batch=rollout, check_output=False)
    assert {c.callee for c in test.calls} >= {"pqn_agent", "network"}


def test_next_max_q_reads_the_real_next_observations():
    """max_a Q(s'_t, a): obs[t + 1] within an episode, the real final observation at a termination or truncation,
    the observation after the last step at t = T - 1: a naive loop over the steps' own next_obs agrees."""
    agent = _agent()
    steps = _steps(6, 3, 1, {(2, 0): "terminated", (3, 1): "truncated", (5, 2): "truncated"})
    rollout = Rollout.from_steps(steps, CARTPOLE_OBS, torch.device("cpu"))
    with torch.no_grad():
        got = agent.next_max_q(rollout)
        want = torch.stack([agent.network(torch.as_tensor(s["next_obs"])).amax(-1) for s in steps])
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("bootstrap_truncated", [True, False])
def test_update_steps_towards_the_q_lambda_targets(bootstrap_truncated):
    """The targets are q_lambda_returns of the rollout under the weights before the update (truncations bootstrap,
    or with bootstrap_truncated=false end the return as CleanRL's); num_epochs x num_minibatches gradient steps of
    (rollout / num_minibatches) steps each; repeated updates on one rollout bring the TD loss down."""
    agent = _agent(lr=1e-2, num_epochs=3, num_minibatches=4, bootstrap_truncated=bootstrap_truncated, q_lambda=0.5)
    steps = _steps(8, 2, 2, {(3, 0): "truncated", (5, 1): "terminated"})
    rollout = Rollout.from_steps(steps, CARTPOLE_OBS, torch.device("cpu"))
    with torch.no_grad():
        term = rollout.terminated if bootstrap_truncated else rollout.terminated | rollout.truncated
        targets = q_lambda_returns(rollout.rewards.float(), agent.next_max_q(rollout), term, rollout.truncated,
                                   0.99, 0.5)
        before = agent.network(rollout.obs.reshape(16, 4)).gather(-1, rollout.actions.reshape(16, 1)).squeeze(-1)
    first_loss = float(((before - targets.reshape(16)) ** 2).mean())
    info = agent.update(rollout)
    assert info["gradient_steps"] == 12
    states = agent.torch_optimizer().state_dict()["state"].values()
    assert {int(s["step"]) for s in states} == {12}
    losses = [float(agent.update(rollout)["loss/td"]) for _ in range(60)]
    assert losses[-1] < 0.5 * first_loss


def test_epsilon_and_learning_rate_follow_their_schedules():
    """Epsilon decays linearly over epsilon_decay_steps env steps, set once per update (T x B = 64 env steps here);
    the learning rate anneals to 0 over total_env_steps."""
    agent = _agent(epsilon_decay_steps=128, epsilon_end=0.1, anneal_lr=True, total_env_steps=256, lr=1e-3)
    infos = [agent.update(Rollout.from_steps(_steps(16, 4, i), CARTPOLE_OBS, torch.device("cpu"))) for i in range(3)]
    assert [i["explore/epsilon"] for i in infos] == pytest.approx([1 - 0.9 * 0.5, 0.1, 0.1])
    assert [i["learn/lr"] for i in infos] == pytest.approx([1e-3, 0.75e-3, 0.5e-3])


def test_weights_carry_the_epsilon_schedule_to_an_acting_copy():
    """A Ray worker's copy (the picklable policy factory) acts as the learner once it has its weights, epsilon
    included."""
    algo = build_algo(["algo=pqn", "algo.hidden_sizes=[8]", "stop.env_steps=1000"])
    try:
        algo.agent.exploration.advance(100_000)
        policy = pickle.loads(pickle.dumps(algo.policy_factory))(1)
        policy.set_weights(algo.agent.get_weights())
        assert policy.exploration.epsilon() == algo.agent.exploration.epsilon() < 1.0
        obs = torch.as_tensor(sp.sample(CARTPOLE_OBS, (4,), 0))
        torch.testing.assert_close(policy.get_actions(obs, explore=False), algo.agent.get_actions(obs, explore=False))
    finally:
        algo.stop()


def test_state_dict_round_trip_continues_identically(tmp_path: Path):
    """Two updates, saved (weights-only, as checkpoints are) and loaded into an algorithm built with another seed:
    the same Q-network, RAdam moments, shuffling generator, epsilon step and LR schedule, so one more update on the
    same rollout gives the same parameters in both."""
    overrides = ["algo=pqn", "executor.num_envs=2", "algo.rollout_steps=16", "algo.hidden_sizes=[8]",
                 "stop.env_steps=1000"]
    a, b = build_algo(overrides, seed=0), build_algo(overrides, seed=5)
    try:
        for _ in range(2):
            a.training_step()
        torch.save(a.state_dict(), tmp_path / "state.pt")
        b.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
        assert (b.env_steps, b.updates, b.gradient_steps) == (a.env_steps, a.updates, a.gradient_steps) == (64, 2, 32)
        assert b.agent.exploration.epsilon() == a.agent.exploration.epsilon() < 1.0
        rollout = Rollout.from_steps(_steps(16, 2, 9), CARTPOLE_OBS, torch.device("cpu"))
        infos = [x.agent.update(rollout) for x in (a, b)]
        assert infos[0]["learn/lr"] == infos[1]["learn/lr"] < a.cfg.lr
        for (k, va), vb in zip(a.agent.state_dict().items(), b.agent.state_dict().values(), strict=True):
            if isinstance(va, torch.Tensor):
                assert torch.equal(va, vb), k
    finally:
        a.stop()
        b.stop()


def test_box_actions_are_refused():
    spec = EnvSpec("Pendulum-v1", CARTPOLE_OBS, sp.Box(-2.0, 2.0, (1,), np.float32))
    with pytest.raises(ConfigError, match="algo=pqn needs a Discrete action space"):
        PQN.make_agent(PQNConfig(), spec, 0)


def test_cli_refuses_pendulum_in_one_line(workdir: Path):
    proc = run_rlrun(["algo=pqn", "env=pendulum", "logger=none"], workdir)
    assert proc.returncode == 2, proc.stderr
    assert "algo=pqn needs a Discrete action space, but env Pendulum-v1 has Box" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_ranges_are_config_errors():
    with pytest.raises(ConfigError, match="algo.q_lambda"):
        compose(["algo=pqn", "algo.q_lambda=1.5"])
    with pytest.raises(ConfigError, match="algo.num_minibatches"):
        compose(["algo=pqn", "algo.num_minibatches=0"])


def test_the_cartpole_preset_is_cleanrls():
    """conf/algo_env/pqn_cartpole.yaml: CleanRL pqn.py's 4 env copies (2 x 2 on Ray) and 500k env steps; the
    schema holds its other values."""
    cfg = compose(["algo=pqn"])
    assert [cfg.executor.num_envs, cfg.stop.env_steps, cfg.algo.rollout_steps, cfg.algo.lr, cfg.algo.q_lambda,
            cfg.algo.total_env_steps] == [4, 500_000, 128, 2.5e-4, 0.65, 500_000]
    ray = compose(["algo=pqn", "executor=ray"]).executor
    assert ray.num_workers * ray.num_envs_per_worker == 4


# ---------------------------------------------------------------------------------------------- learning, CLI


def test_learns_cartpole(tmp_path: Path):
    """Seeded: mean return >= 195 over the last 20 episodes; CleanRL's network, lambda and minibatches on 4 env
    copies of 32-step rollouts, with a shorter epsilon decay and a higher learning rate than its 500k-step
    defaults so that the test stops within seconds (seeds 0 / 1 stopped at 12.3k / 11.4k env steps)."""
    cfg = compose(["algo=pqn", "seed=0", "algo.rollout_steps=32", "algo.epsilon_decay_steps=10000", "algo.lr=1e-3",
                   "stop.env_steps=60000", "stop.episode_return_mean=195", "logger=none", "export.formats=[]",
                   "checkpoint.at_end=false"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary
    assert summary["episode_return_mean"] >= 195


@pytest.mark.parametrize("executor", [["executor=local"],
                                      ["executor=ray", "executor.num_cpus=2", "executor.num_workers=2"]],
                         ids=["local", "ray"])
def test_cli_run_writes_summary(workdir: Path, executor: list[str]):
    proc = run_rlrun(["algo=pqn", *executor, "stop.env_steps=1024", "algo.rollout_steps=64", "logger=none",
                      "export.formats=[]"], workdir, check=True)
    summary = only_summary(workdir)
    assert summary["algo"] == "pqn" and summary["stop_reason"] == "env_steps", proc.stderr
    assert summary["env_steps"] == 1024 and summary["error"] is None and summary["episodes"] > 0
    assert "Traceback" not in proc.stderr
