"""The offline learners (BC, IQL, CQL) and their data: the losses against hand-worked values, the dataset read as a
batch source and its refusals, learning from small datasets of scripted policies written in the test (CartPole-v1,
Pendulum-v1), rlrun eval on an offline run, and the exact resume of an offline run."""

from __future__ import annotations

import math
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import assert_same, run_rlrun

from rlrun import checkpoint as ckpt
from rlrun.algos.bc import bc_continuous_loss, bc_discrete_loss
from rlrun.algos.cql import cql_regularizer
from rlrun.algos.iql import advantage_weights, expectile_loss, weighted_regression_loss
from rlrun.app.evaluate import evaluate
from rlrun.app.run import run_experiment
from rlrun.config import compose
from rlrun.errors import ConfigError
from rlrun.execution.dataset import TransitionDataset, load_minari

# ---------------------------------------------------------------------------------------------------- datasets


def cartpole_expert(obs: np.ndarray) -> int:
    """Push towards where the pole falls: 500 (the maximum) on every seed tried."""
    return int(obs[2] + 0.5 * obs[3] > 0)


def pendulum_expert(obs: np.ndarray) -> np.ndarray:
    """Energy-shaping swing-up, then a PD hold near the top: about -130 mean return (random actions: about -1200).
    With theta = 0 upright the dynamics are theta'' = 15 sin(theta) + 3 u, so the energy w^2 / 2 + 15 cos(theta) is
    15 at rest upright; the torque pumps energy in until it gets there."""
    c, _, w = obs
    if c > 0.95:
        u = -(10.0 * math.atan2(obs[1], c) + 2.0 * w)
    else:
        u = 2.0 * np.sign(w * (15.0 - (0.5 * w * w + 15.0 * c))) if w != 0 else 2.0
    return np.clip([u], -2.0, 2.0).astype(np.float32)


def write_dataset(root: Path, dataset_id: str, env_id: str, policy, episodes: int, epsilon: float,
                  seed: int = 0) -> None:
    """Play ``policy`` (a uniform random action with probability ``epsilon``) and write a Minari dataset."""
    import minari
    from minari.data_collector import EpisodeBuffer

    from rlrun.execution.dataset import minari_root

    env, rng = gym.make(env_id), np.random.default_rng(seed)
    env.action_space.seed(seed)
    buffers = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        steps = {"observations": [obs], "actions": [], "rewards": [], "terminations": [], "truncations": []}
        done = False
        while not done:
            action = env.action_space.sample() if rng.random() < epsilon else policy(obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            for k, v in (("observations", obs), ("actions", action), ("rewards", reward),
                         ("terminations", terminated), ("truncations", truncated)):
                steps[k].append(v)
            done = terminated or truncated
        buffers.append(EpisodeBuffer(id=episode, **{k: np.asarray(v) for k, v in steps.items()}))
    with minari_root(str(root)):
        minari.create_dataset_from_buffers(dataset_id, buffers, env=env.spec, eval_env=env.spec,
                                           algorithm_name="scripted", author="test", author_email="-",
                                           code_permalink="-", description="a scripted policy")
    env.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """Two datasets: CartPole-v1 of the scripted expert with 20% random actions, Pendulum-v1 likewise with 30%."""
    path = tmp_path_factory.mktemp("datasets")
    write_dataset(path, "cartpole/mixed-v0", "CartPole-v1", cartpole_expert, 10, 0.2)
    write_dataset(path, "pendulum/mixed-v0", "Pendulum-v1", pendulum_expert, 20, 0.3)
    return path


def offline(root: Path, algo: str, env: str, dataset: str, *extra: str) -> list[str]:
    return [f"algo={algo}", f"env={env}", "data=minari", f"data.id={dataset}", f"data.root={root}", "seed=0",
            "logger=none", "export.formats=[]", *extra]


# ---------------------------------------------------------------------------------------------------- losses


def test_expectile_loss_by_hand():
    """u = [2, -1], tau = 0.7: (0.7 * 4 + 0.3 * 1) / 2 = 1.55; tau = 0.5 is half the squared error."""
    u = torch.tensor([2.0, -1.0])
    assert float(expectile_loss(u, 0.7)) == pytest.approx(1.55)
    assert float(expectile_loss(u, 0.5)) == pytest.approx(0.5 * float(u.pow(2).mean()))


def test_expectile_loss_fits_an_upper_expectile():
    """Minimising over a constant v the loss of x - v, for x = {0, 1}: tau = 0.5 gives the mean, 0.9 gives
    v = 0.9 (the tau-expectile of a fair coin is tau)."""
    x = torch.tensor([0.0, 1.0])
    for tau in (0.5, 0.9):
        v = torch.zeros((), requires_grad=True)
        opt = torch.optim.SGD([v], lr=0.5)
        for _ in range(500):
            opt.zero_grad()
            expectile_loss(x - v, tau).backward()
            opt.step()
        assert float(v.detach()) == pytest.approx(tau, abs=1e-4)


def test_advantage_weights_and_weighted_regression_by_hand():
    """beta 2, advantages [0, 1, 10], max 100: weights [1, e^2, 100] (the last clipped). Regression of mu = [[0],
    [1]] to a = [[1], [1]] with weights [3, 5]: (3 * 1 + 5 * 0) / 2 = 1.5."""
    w = advantage_weights(torch.tensor([0.0, 1.0, 10.0]), 2.0, 100.0)
    assert torch.allclose(w, torch.tensor([1.0, math.exp(2.0), 100.0]))
    loss = weighted_regression_loss(torch.tensor([[0.0], [1.0]]), torch.tensor([[1.0], [1.0]]),
                                    torch.tensor([3.0, 5.0]))
    assert float(loss) == pytest.approx(1.5)


def test_cql_regularizer_by_hand():
    """One state, proposals Q = [0, ln 3] with log densities 0: logsumexp = ln 4; Q(data) = 1 -> ln 4 - 1. With log
    densities [0, ln 3] the importance weights even them out: logsumexp([0, 0]) = ln 2 -> ln 2 - 1. Temperature 2 on
    Q = [0, 2 ln 3]: 2 ln(1 + 3) - 1."""
    q_data = torch.tensor([1.0])
    assert float(cql_regularizer(torch.tensor([[0.0, math.log(3)]]), torch.zeros(1, 2), q_data)) == pytest.approx(
        math.log(4) - 1)
    assert float(cql_regularizer(torch.tensor([[0.0, math.log(3)]]), torch.tensor([[0.0, math.log(3)]]),
                                 q_data)) == pytest.approx(math.log(2) - 1)
    assert float(cql_regularizer(torch.tensor([[0.0, 2 * math.log(3)]]), torch.zeros(1, 2), q_data,
                                 temperature=2.0)) == pytest.approx(2 * math.log(4) - 1)


def test_cql_regularizer_pushes_down_unseen_actions_and_up_the_data():
    q = torch.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    q_data = torch.tensor([1.0], requires_grad=True)
    cql_regularizer(q, torch.zeros(1, 3), q_data).backward()
    assert (q.grad > 0).all() and float(q_data.grad) == -1.0  # gradient descent lowers q, raises Q(data)
    assert float(q.grad.sum()) == pytest.approx(1.0)  # softmax weights


def test_a_fresh_cql_policy_is_as_wide_as_corls():
    """The head maps its output smoothly into [log_std_min, log_std_max], so a zero output is their midpoint: with
    CQL's bounds (-5, 2), log std -1.5 (std 0.22), near CORL's fresh policy (log std -1). CORL's own bounds (-20, 2),
    a hard clamp there, would start the policy at log std -9 (std 1e-4): nearly deterministic, its proposals'
    log densities so high that the logsumexp ignores them, and every early gradient step spent widening it."""
    from omegaconf import OmegaConf

    from rlrun.algos.cql import CQLAgent

    cfg = OmegaConf.to_object(compose(["algo=cql", "env=pendulum", "data=minari", "data.id=x-v0",
                                       "stop.gradient_steps=1"]).algo)
    agent = CQLAgent(cfg).build(obs=gym.make("Pendulum-v1").observation_space,
                                actions=gym.make("Pendulum-v1").action_space)
    with torch.no_grad():
        agent.actor.head.log_std.weight.zero_()
        agent.actor.head.log_std.bias.zero_()
        _, log_std = agent.actor(torch.zeros(4, 3))
    assert torch.equal(log_std, torch.full((4, 1), -1.5))


def test_bc_losses_by_hand():
    """Cross-entropy of logits [0, ln 3] at action 1: -ln(3/4). Squared error of [[0.5, -0.5]] to [[1, 1]]:
    (0.25 + 2.25) / 2."""
    assert float(bc_discrete_loss(torch.tensor([[0.0, math.log(3)]]), torch.tensor([1]))) == pytest.approx(
        -math.log(0.75))
    assert float(bc_continuous_loss(torch.tensor([[0.5, -0.5]]), torch.tensor([[1.0, 1.0]]))) == pytest.approx(1.25)


# ---------------------------------------------------------------------------------------------------- the data


def test_transitions_pair_each_observation_with_the_next_in_its_episode():
    class Episode:
        def __init__(self, start: int, length: int, terminated: bool) -> None:
            self.observations = np.arange(start, start + length + 1, dtype=np.float32)[:, None]
            self.actions = np.zeros((length, 1), np.float32)
            self.rewards = np.ones(length)
            self.terminations = np.array([False] * (length - 1) + [terminated])

    data = TransitionDataset.from_episodes([Episode(0, 2, True), Episode(10, 3, False)])
    assert len(data) == 5 and data.episode_returns == [2.0, 3.0]
    assert data.obs[:, 0].tolist() == [0, 1, 10, 11, 12] and data.next_obs[:, 0].tolist() == [1, 2, 11, 12, 13]
    assert data.terminated.tolist() == [False, True, False, False, False]
    a = data.sample(8, torch.Generator().manual_seed(3))
    b = data.sample(8, torch.Generator().manual_seed(3))
    assert all(torch.equal(a[k], b[k]) for k in a) and a["obs"].shape == (8, 1)
    assert torch.equal(a["next_obs"], a["obs"] + 1)  # every pair is consecutive


def test_the_reward_scale_stretches_the_returns_over_1000(root: Path):
    """Three episodes returning -100, -300 and -200: 1000 / (-100 - -300) = 5, by hand. The plan of IQL (reward_scale
    null) learns on rewards times 5; CQL's default (1) and a number keep theirs; equal returns are refused."""
    from rlrun.registry import registry

    class Episode:
        def __init__(self, rewards: list[float]) -> None:
            self.observations = np.zeros((len(rewards) + 1, 3), np.float32)
            self.actions = np.zeros((len(rewards), 1), np.float32)
            self.rewards, self.terminations = np.asarray(rewards), np.zeros(len(rewards), bool)

    data = TransitionDataset.from_episodes([Episode([-50.0, -50.0]), Episode([-300.0]), Episode([-120.0, -80.0])])
    assert data.return_range_scale() == pytest.approx(5.0)
    with pytest.raises(ConfigError, match="every episode of the dataset returns -100; give a number"):
        TransitionDataset.from_episodes([Episode([-100.0]), Episode([-60.0, -40.0])]).return_range_scale()

    def learnt_rewards(algo: str, *extra: str) -> tuple[float, list[float]]:
        """The plan's reward scale and the distinct rewards of a batch it learns on."""
        from omegaconf import OmegaConf

        from rlrun.algos.base import build_plan

        cfg = compose(offline(root, algo, "pendulum", "x-v0", "stop.gradient_steps=1", "algo.hidden_sizes=[8]",
                              "algo.batch_size=64", *extra))
        factory = registry.build("env", cfg.env.name, cfg.env)
        executor = registry.build("executor", cfg.executor.name, cfg.executor, factory, 0)
        try:
            plan = build_plan(OmegaConf.to_object(cfg.algo), factory, executor, torch.device("cpu"), 0, data=data)
            return plan.reward_scale, sorted(plan.sample()["reward"].unique().tolist())
        finally:
            executor.stop()

    assert learnt_rewards("iql") == (5.0, [-1500.0, -600.0, -400.0, -250.0])
    assert learnt_rewards("cql") == (1.0, [-300.0, -120.0, -80.0, -50.0])
    assert learnt_rewards("iql", "algo.reward_scale=0.5") == (0.5, [-150.0, -60.0, -40.0, -25.0])


def test_a_dataset_is_read_against_the_env(root: Path):
    from omegaconf import OmegaConf

    from rlrun.registry import registry

    cfg = compose(offline(root, "iql", "pendulum", "pendulum/mixed-v0", "stop.gradient_steps=1"))
    spec = registry.build("env", cfg.env.name, cfg.env).spec
    data = load_minari(cfg.data, spec)
    assert len(data) == 20 * 200 and len(data.episode_returns) == 20
    cartpole = registry.build("env", "gym", compose(["env=cartpole"]).env).spec
    with pytest.raises(ConfigError, match=r"its observation space Box\(3,\) .* is not env CartPole-v1's"):
        load_minari(cfg.data, cartpole)
    with pytest.raises(ConfigError, match="no such dataset under .*pendulum/mixed-v0"):
        load_minari(OmegaConf.create({"id": "pendulum/none-v0", "root": str(root)}), spec)


@pytest.mark.parametrize("overrides, message", [
    (["algo=sac", "env=pendulum", "data=minari", "data.id=a-v0", "stop.gradient_steps=1"],
     "algo=sac learns online from the env, not from a dataset"),
    (["algo=iql", "env=pendulum"], "algo=iql learns from a dataset: give one with data=minari"),
    (["algo=bc", "data=minari", "data.id=a-v0"], "set stop.gradient_steps"),
    (["algo=bc", "data=minari", "data.id=a-v0", "stop.gradient_steps=1", "eval.interval_env_steps=10"],
     "eval.interval_env_steps=10: an offline run"),
])
def test_bad_offline_configs_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message):
        compose(overrides)


@pytest.mark.parametrize("env, dataset, data_root, message", [
    ("cartpole", "pendulum/mixed-v0", None, r"data.id=pendulum/mixed-v0: its observation space Box\(3,\) .* is not "
                                            r"env CartPole-v1's"),
    ("pendulum", "pendulum/none-v0", None, "data.id=pendulum/none-v0: no such dataset under"),
    ("pendulum", "pendulum/mixed-v0", "datasets", "data.id=pendulum/mixed-v0: no such dataset under .*datasets "
                                                  r"\(local datasets: none\)"),
])
def test_a_bad_dataset_is_refused_before_the_run_directory_exists(root: Path, workdir: Path, env: str,
                                                                     dataset: str, data_root: str | None,
                                                                     message: str):
    """Through the command line: one line on stderr, exit 2, and nothing written in the working directory (no empty
    run directory; a data.root that does not exist is not made)."""
    proc = run_rlrun([*offline(root, "bc", env, dataset, "stop.gradient_steps=1"),
                      *([f"data.root={data_root}"] if data_root else [])], workdir)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), proc.stderr
    assert list(workdir.iterdir()) == []


# ---------------------------------------------------------------------------------------------------- learning


def test_bc_clones_the_cartpole_expert_from_mixed_data(root: Path, tmp_path: Path):
    """20% of the dataset's actions are random; the clone of the rest balances the pole for 500 steps."""
    cfg = compose(offline(root, "bc", "cartpole", "cartpole/mixed-v0", "stop.gradient_steps=1000",
                          "algo.hidden_sizes=[64,64]", "algo.lr=1e-3"))
    summary = run_experiment(cfg, tmp_path / "run")
    assert summary["stop_reason"] == "gradient_steps" and summary["gradient_steps"] == 1000
    assert summary["env_steps"] == 0 and summary["data"]["id"] == "cartpole/mixed-v0"
    result = evaluate(tmp_path / "run", episodes=5, write=False)  # rlrun eval on an offline run
    assert result.return_mean >= 450, result.returns
    assert result.extra["checkpoint_at"] == "gradient step 1000"  # not "env step 0": it takes none


@pytest.mark.parametrize("algo, extra", [
    ("bc", ["algo.lr=1e-3"]),
    ("bc", ["algo.lr=1e-3", "algo.normalize_obs=true"]),  # learns on standardised obs, acts on the env's raw ones
    # Pendulum's mixed returns span about 360, so IQL's default normalisation (reward_scale null) multiplies rewards
    # by 2.7 and sharpens the weights; within 2,000 gradient steps the target critics have made about ten backups
    # (tau 0.005), too few to see the swing-up's delayed gain, and sharp weights then prefer myopic actions. Mild
    # weights on the raw rewards keep the policy near the data's mostly expert actions.
    ("iql", ["algo.reward_scale=1", "algo.beta=0.5"]),
])  # CQL's is below: its policy is greedy on Q, which 2,000 gradient steps leave far from the swing-up's horizon
def test_learns_pendulum_from_mixed_data(root: Path, tmp_path: Path, algo: str, extra: list[str]):
    """The dataset's behaviour is the swing-up expert with 30% random actions (its episodes return -480 to -115);
    each learner's greedy policy swings up: a 5-episode mean above -400 (random actions: about -1200)."""
    cfg = compose(offline(root, algo, "pendulum", "pendulum/mixed-v0", "stop.gradient_steps=2000",
                          "algo.hidden_sizes=[64,64]", *extra))
    run_experiment(cfg, tmp_path / "run")
    result = evaluate(tmp_path / "run", episodes=5, write=False)
    assert result.return_mean > -400, result.returns


def inverted_pendulum_expert(obs: np.ndarray) -> np.ndarray:
    """A PD hold of InvertedPendulum-v5's pole (and cart): 1000, the maximum, on every seed tried; with 20% random
    actions its episodes end after about 120 steps (random actions: about 6)."""
    x, theta, x_dot, theta_dot = obs
    return np.clip([x + 20.0 * theta + 0.5 * x_dot + theta_dot], -3.0, 3.0).astype(np.float32)


def test_cql_learns_to_balance_from_mixed_data(root: Path, tmp_path: Path):
    """CQL's greedy policy, learnt from episodes of the PD hold with 20% random actions, keeps the pole up more than
    twice as long as the dataset's episodes do on average. A task whose value is near at hand (every step alive
    pays 1; a fall is a few bad actions away), which CQL's greedy policy learns in 2,000 gradient steps."""
    from rlrun.registry import registry

    write_dataset(root, "pendulum/inverted-mixed-v0", "InvertedPendulum-v5", inverted_pendulum_expert, 20, 0.2)
    cfg = compose(offline(root, "cql", "mujoco", "pendulum/inverted-mixed-v0", "env.id=InvertedPendulum-v5",
                          "stop.gradient_steps=2000", "algo.hidden_sizes=[64,64]"))
    dataset_mean = float(np.mean(load_minari(cfg.data, registry.build("env", cfg.env.name, cfg.env).spec)
                                 .episode_returns))
    run_experiment(cfg, tmp_path / "run")
    result = evaluate(tmp_path / "run", episodes=5, write=False)
    assert dataset_mean < 150 and result.return_mean > 2 * dataset_mean, (dataset_mean, result.returns)


@pytest.mark.parametrize("algo", ["bc", "iql", "cql"])
def test_normalize_obs_uses_the_datasets_statistics_and_acts_on_raw_observations(root: Path, tmp_path: Path,
                                                                                  algo: str):
    """algo.normalize_obs=true: the checkpointed statistics are the mean and variance of the dataset's observations
    (numpy's, here), and acting on a raw observation (what rlrun eval and exports feed) is acting without the
    normaliser on the standardised one, which is what the agent learnt on."""
    from rlrun.envs.gym_env import EnvSpec
    from rlrun.registry import registry

    run_experiment(compose(offline(root, algo, "pendulum", "pendulum/mixed-v0", "algo.normalize_obs=true",
                                   "algo.hidden_sizes=[16]", "algo.updates_per_iteration=10",
                                   "stop.gradient_steps=20")), tmp_path / "run")
    state = ckpt.load_checkpoint(ckpt.checkpoint_path(tmp_path / "run"))["algo"]["agent"]
    obs = TransitionDataset.from_episodes(_episodes(root, "pendulum/mixed-v0")).obs.astype(np.float64)
    mean, var = state["obs_normalizer.stats.mean"], state["obs_normalizer.stats.var"]
    np.testing.assert_allclose(mean.numpy(), obs.mean(0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(var.numpy(), obs.var(0), rtol=1e-6)

    env = gym.make("Pendulum-v1")
    cfg = registry.schema("algo", algo)(normalize_obs=True, hidden_sizes=[16])
    spec = EnvSpec(id="Pendulum-v1", observation_space=env.observation_space, action_space=env.action_space)
    agent = registry.get("algo", algo).make_agent(cfg, spec, 0)  # as rlrun eval builds it
    agent.load_state_dict(state)
    raw = torch.as_tensor(obs[:16], dtype=torch.float32)
    standardised = ((raw.double() - mean) / torch.sqrt(var + 1e-8)).clamp(-10, 10).float()
    with torch.no_grad():
        acted = agent.get_actions(raw, explore=False)
        agent.obs_normalizer = None
        torch.testing.assert_close(acted, agent.get_actions(standardised, explore=False))
        assert not torch.allclose(acted, agent.get_actions(raw, explore=False))  # the statistics matter here


# ---------------------------------------------------------------------------------------------------- resume


def test_an_offline_run_resumes_exactly(root: Path, tmp_path: Path):
    """IQL for 400 gradient steps, against 200, then resume=<run dir> to 400: the same weights, optimizer moments
    and dataset generator, bit for bit."""
    common = offline(root, "iql", "pendulum", "pendulum/mixed-v0", "algo.hidden_sizes=[32,32]",
                     "algo.updates_per_iteration=50")
    run_experiment(compose([*common, "stop.gradient_steps=400"]), tmp_path / "straight")
    first = run_experiment(compose([*common, "stop.gradient_steps=200"]), tmp_path / "resumed")
    assert first["gradient_steps"] == 200
    overrides = [f"resume={tmp_path / 'resumed'}", "stop.gradient_steps=400"]
    summary = run_experiment(compose(overrides), tmp_path / "unused", overrides=overrides)
    assert summary["gradient_steps"] == 400 and summary["stop_reason"] == "gradient_steps"
    a = ckpt.load_checkpoint(ckpt.checkpoint_path(tmp_path / "straight"))
    b = ckpt.load_checkpoint(ckpt.checkpoint_path(tmp_path / "resumed"))
    assert a["algo"]["gradient_steps"] == 400
    # IQL's reward scale (null: from the dataset's returns) is recorded and kept across the resume
    scale = TransitionDataset.from_episodes(_episodes(root, "pendulum/mixed-v0")).return_range_scale()
    assert first["data"]["reward_scale"] == summary["data"]["reward_scale"] == b["algo"]["reward_scale"] == scale
    assert_same(a["algo"], b["algo"], "algo")
    assert_same(a["rng"], b["rng"], "rng")


def _episodes(root: Path, dataset_id: str) -> list:
    import minari

    from rlrun.execution.dataset import minari_root

    with minari_root(str(root)):
        return list(minari.load_dataset(dataset_id).iterate_episodes())
