"""The local executor's worker set (rlrun/execution/local.py, rollout_worker.py): the worker-set contract in one
process, the serial mode, each worker's own acting random stream, whole-game scores of Atari envs, and the
executor's stage timing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from rlrun.config import AtariEnvConfig, LocalExecutorConfig
from rlrun.envs.atari import AtariEnvFactory
from rlrun.envs.gym_env import GymEnvFactory
from rlrun.errors import ConfigError
from rlrun.execution.local import LocalExecutor
from rlrun.execution.rollout_worker import RolloutWorker, acting_seed


def cartpole() -> GymEnvFactory:
    return GymEnvFactory(OmegaConf.create({"name": "gym", "id": "CartPole-v1", "max_episode_steps": None,
                                           "frame_skip": 1, "kwargs": {}}))


class PoleFollower:
    """Deterministic: push the way the pole leans; records the batch size of every call."""

    def __init__(self) -> None:
        self.batch_sizes: list[int] = []

    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        self.batch_sizes.append(obs.shape[0])
        return (obs[:, 2] > 0).to(torch.int64), {"lean": obs[:, 2].clone()}


class Coin:
    """Random actions from torch's global generator (as epsilon-greedy draws them)."""

    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        return torch.randint(0, 2, (obs.shape[0],))


def test_serial_mode_calls_the_policy_one_observation_at_a_time_and_gives_the_sync_transitions() -> None:
    serial_policy, sync_policy = PoleFollower(), PoleFollower()
    serial = RolloutWorker(cartpole(), serial_policy, num_envs=3, seed=5, vector_mode="serial")
    sync = RolloutWorker(cartpole(), sync_policy, num_envs=3, seed=5, vector_mode="sync")
    a, b = serial.sample(60), sync.sample(60)
    assert set(serial_policy.batch_sizes) == {1} and len(serial_policy.batch_sizes) == 180
    assert set(sync_policy.batch_sizes) == {3} and len(sync_policy.batch_sizes) == 60
    for key in ("obs", "actions", "rewards", "final_obs", "terminated", "truncated", "last_obs"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    np.testing.assert_array_equal(a.extras["lean"], b.extras["lean"])
    assert a.episode_returns == b.episode_returns and len(a.episode_returns) >= 1
    serial.close()
    sync.close()


def test_a_worker_acts_with_its_own_random_stream() -> None:
    """Draws from torch's global generator between two samples (what a learner does) change nothing in what the
    worker does, and sampling leaves the global generator where it was; another worker index is another stream."""
    a = RolloutWorker(cartpole(), Coin(), num_envs=2, seed=0)
    b = RolloutWorker(cartpole(), Coin(), num_envs=2, seed=0)
    c = RolloutWorker(cartpole(), Coin(), num_envs=2, seed=0, worker_index=1)
    first_a = a.sample(30).actions
    torch.manual_seed(123)
    torch.rand(1000)  # the learner draws
    before = torch.get_rng_state()
    second_a = a.sample(30).actions
    assert torch.equal(torch.get_rng_state(), before)
    first_b, second_b = b.sample(30).actions, b.sample(30).actions
    np.testing.assert_array_equal(first_a, first_b)
    np.testing.assert_array_equal(second_a, second_b)
    assert not np.array_equal(first_a, c.sample(30).actions)
    assert acting_seed(0, 0) != acting_seed(0, 1) and acting_seed(0, 0) != acting_seed(1, 0)
    for w in (a, b, c):
        w.close()


def test_whole_game_scores_of_an_atari_game_with_life_loss_episodes() -> None:
    """Breakout has 5 lives and, by default, a lost life ends a training episode (the game goes on) and rewards are
    clipped to their sign. A worker's batch reports each finished *game* besides the episodes: per env copy, the
    games are the episodes taken 5 at a time, a game's length is the sum of their lengths, and its raw score is at
    least their clipped return (Breakout's bricks are worth 1, 4 or 7)."""
    factory = AtariEnvFactory(OmegaConf.structured(AtariEnvConfig(game="Breakout")))
    worker = RolloutWorker(factory, Coin(), num_envs=2, seed=0)
    batch = worker.sample(400)
    worker.close()
    assert len(batch.game_scores) == len(batch.game_lengths) >= 1
    done, rewards = batch.terminated | batch.truncated, batch.rewards  # [T, B]
    expected_lengths, clipped_sums = [], []
    for copy in range(2):
        ends = np.flatnonzero(done[:, copy])
        starts = np.concatenate([[0], ends[:-1] + 1])
        episodes = [(int(e - s + 1), float(rewards[s:e + 1, copy].sum())) for s, e in zip(starts, ends, strict=True)]
        for g in range(len(episodes) // 5):
            group = episodes[5 * g: 5 * g + 5]
            expected_lengths.append(sum(n for n, _ in group))
            clipped_sums.append(sum(r for _, r in group))
    assert sorted(batch.game_lengths) == sorted(expected_lengths)
    by_length = dict(zip(batch.game_lengths, batch.game_scores, strict=True))
    for length, clipped in zip(expected_lengths, clipped_sums, strict=True):
        assert by_length[length] >= clipped
    assert len(batch.episode_returns) >= 5 * len(batch.game_scores)


def test_cartpole_batches_have_no_games() -> None:
    worker = RolloutWorker(cartpole(), Coin(), num_envs=2, seed=0)
    batch = worker.sample(100)
    worker.close()
    assert batch.episode_returns and batch.game_scores == [] and batch.game_lengths == []


def executor(**overrides) -> LocalExecutor:  # noqa: ANN003
    return LocalExecutor(OmegaConf.structured(LocalExecutorConfig(**overrides)), cartpole(), seed=0)


def test_local_worker_set_contract() -> None:
    """sample: one batch per worker; sample_async: (batch, worker 0) min_batches times; sync_weights: nothing to
    do (the worker acts with the learner's object); metrics: stage seconds since the last call, no restarts."""
    ex = executor(num_envs=2)
    policy = Coin()
    ws = ex.worker_set(policy, "cpu", policy_factory=lambda i: Coin())
    assert ws.workers[0].policy is policy and ws.num_envs == 2 and ws.num_workers == 1
    batches = ws.sample(10)
    assert len(batches) == 1 and batches[0].env_steps == 20
    got = list(ws.sample_async(5, min_batches=3))
    assert [w for _, w in got] == [0, 0, 0] and all(b.env_steps == 10 for b, _ in got)
    ws.sync_weights()
    ws.sync_weights({"anything": 1}, worker_ids=[0])
    metrics = ex.metrics()
    assert metrics["executor/worker_restarts"] == 0
    assert metrics["time/env_step_s"] > 0 and metrics["time/inference_s"] > 0
    assert "time/env_step_s" not in ex.metrics()  # reset by the report
    ex.stop()


@pytest.mark.parametrize("key, value, match", [("num_envs", 0, "executor.num_envs=0"),
                                               ("num_workers", 0, "executor.num_workers=0"),
                                               ("vector_mode", "threads", "executor.vector_mode=threads")])
def test_bad_local_executor_config(key: str, value, match: str) -> None:  # noqa: ANN001
    with pytest.raises(ConfigError, match=match):
        executor(**{key: value})


class Constant(torch.nn.Module):
    """Always action ``a``; its weights are that one number (a learner changes it in place)."""

    def __init__(self, a: int = 0) -> None:
        super().__init__()
        self.register_buffer("a", torch.tensor(a))

    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        return self.a.expand(obs.shape[0]).clone()


def actions_of(batch) -> set[int]:  # noqa: ANN001
    return set(batch.actions.reshape(-1).tolist())


def test_several_workers_with_policies_of_their_own_get_copies_of_the_learners_weights() -> None:
    """num_workers=2 with a policy factory: each worker acts with the factory's policy for its index, never the
    learner's object; sample() first copies the learner's current weights in (not sharing its tensors); a
    per-worker sync reaches that worker only; env copy i of worker w is seeded seed + w * num_envs + i."""
    ex = executor(num_envs=2, num_workers=2)
    assert ex.num_workers == 2 and ex.num_envs_per_worker == 2
    learner = Constant(0)
    built: list[int] = []

    def factory(w: int) -> Constant:
        built.append(w)
        return Constant(1)

    ws = ex.worker_set(learner, "cpu", policy_factory=factory)
    assert built == [0, 1] and ws.num_workers == 2 and ws.num_envs == 4
    assert all(w.policy is not learner for w in ws.workers)
    batches = ws.sample(5)
    assert [b.env_steps for b in batches] == [10, 10] and all(actions_of(b) == {0} for b in batches)
    assert all(w.policy.a.data_ptr() != learner.a.data_ptr() for w in ws.workers)
    learner.a.fill_(1)
    assert all(actions_of(b) == {1} for b in ws.sample(5))
    ws.sync_weights({"a": torch.tensor(0)}, worker_ids=[1])
    got = list(ws.sample_async(3, min_batches=2))
    assert [(w, actions_of(b)) for b, w in got] == [(0, {1}), (1, {0})]
    assert [w for _, w in ws.sample_async(3, min_batches=3)] == [0, 1, 0]  # the turn goes on across calls

    second = executor(num_envs=2, num_workers=2).worker_set(Constant(0), "cpu", policy_factory=lambda w: Constant(0))
    first_obs = [b.obs[0] for b in second.sample(1)]  # step 0: the reset observations of copies 0 and 1
    for w in range(2):
        alone = RolloutWorker(cartpole(), Constant(0), num_envs=2, seed=0 + w * 2)  # seed + w * num_envs
        np.testing.assert_array_equal(first_obs[w], alone.obs)
        alone.close()
    assert not np.array_equal(first_obs[0], first_obs[1])
    second.stop()
    ex.stop()


def test_several_workers_without_a_factory_all_act_with_the_learners_policy() -> None:
    ex = executor(num_envs=1, num_workers=3)
    learner = Constant(1)
    ws = ex.worker_set(learner, "cpu")
    assert [w.policy is learner for w in ws.workers] == [True, True, True]
    assert all(actions_of(b) == {1} for b in ws.sample(4))
    ex.stop()


class Hooked:
    """Counts reset_episodes calls and episode ends; postprocess_batch adds a per-row extra and an info entry."""

    def __init__(self) -> None:
        self.resets = 0
        self.ended = 0
        self.grad_enabled: list[bool] = []

    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        return torch.zeros(obs.shape[0], dtype=torch.int64)

    def reset_episodes(self, done: np.ndarray) -> None:
        self.resets += 1
        self.ended += int(done.sum())

    def postprocess_batch(self, batch):  # noqa: ANN001, ANN201
        self.grad_enabled.append(torch.is_grad_enabled() and not torch.is_inference_mode_enabled())
        batch.extras["double_reward"] = batch.rewards * 2
        batch.info["rows"] = torch.tensor(batch.env_steps)
        return batch


def test_worker_side_policy_hooks() -> None:
    """reset_episodes after every env step with the mask of finished copies; postprocess_batch once per rollout,
    with autograd on, its extras and info kept, its time counted as the postprocess stage."""
    ex = executor(num_envs=2)
    policy = Hooked()
    ws = ex.worker_set(policy, "cpu")
    (batch,) = ws.sample(40)  # always pushing left: CartPole episodes end within ~10 steps
    assert policy.resets == 40
    assert policy.ended == len(batch.episode_returns) >= 2
    assert policy.grad_enabled == [True]
    np.testing.assert_array_equal(batch.extras["double_reward"], batch.rewards * 2)
    assert int(batch.info["rows"]) == 80 and batch.postprocess_seconds > 0
    assert ex.metrics()["time/postprocess_s"] > 0
    ex.stop()


def test_a_worker_state_carries_a_recurrent_policys_memories() -> None:
    """A worker whose policy keeps a state per env copy (recurrent PPO) puts it in ``get_state()``: on a remote
    worker the checkpoint has it from nowhere else. A second worker restored from that state acts as the first
    does from there on (same memories, same env copies, same acting stream)."""
    from rlrun.agent import make_agent

    def worker() -> tuple[RolloutWorker, object]:
        env = cartpole()
        agent = make_agent("ppo", env.spec.observation_space, env.spec.action_space, seed=0, recurrent="lstm",
                           recurrent_size=8, hidden_sizes=[8]).component
        return RolloutWorker(env, agent, num_envs=2, seed=5), agent

    first, first_agent = worker()
    first.sample(20)
    state, rng = first.get_state(), first.rng_state
    assert state["acting"] is not None and float(state["acting"][0].abs().max()) > 0
    second, second_agent = worker()
    second.sample(3)  # other memories and env states, then overwritten
    assert second.set_state(state)
    second.rng_state = rng
    torch.testing.assert_close(second_agent.acting_state(), first_agent.acting_state(), rtol=0, atol=0)
    a, b = first.sample(30), second.sample(30)
    assert torch.equal(torch.as_tensor(a.actions), torch.as_tensor(b.actions))
    first.close()
    second.close()
