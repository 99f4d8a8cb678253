"""``env.vectorization=vector_entry_point`` (rlrun/envs/vector_entry_point.py): CartPole's own numpy-batched vector env
under gymnasium's SAME_STEP autoreset semantics, checked against gymnasium itself (real envs, no mocks): the dynamics
of ``CartPoleVectorEnv.step`` and ``CartPoleEnv.step`` bit for bit, a finished copy reset within the step with its
real last observation in ``final_obs``, no ``final_obs`` key when nothing ended, truncation at 500 steps, the types
``SyncVectorEnv`` returns, seeding, the env state in checkpoints (a continued run steps identically, a resumed
``rlrun`` run equals an uninterrupted one), the config errors, and a training run through the CLI."""

from __future__ import annotations

import io
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import assert_same, only_summary, run_rlrun
from omegaconf import OmegaConf

from rlrun.config import compose
from rlrun.envs.env_state import set_vector_env_state, vector_env_state
from rlrun.envs.gym_env import GymEnvFactory
from rlrun.envs.vector_entry_point import CartPoleSameStep, adaptable_ids, make_same_step
from rlrun.errors import CheckpointError, ConfigError
from rlrun.execution.rollout_worker import RolloutWorker

N = 8
FINAL_KEYS = {"final_obs", "_final_obs", "final_info", "_final_info"}


def factory(env_id: str = "CartPole-v1", vectorization: str = "vector_entry_point",
            max_episode_steps: int | None = None, **kwargs) -> GymEnvFactory:  # noqa: ANN003
    return GymEnvFactory(OmegaConf.create({"name": "gym", "id": env_id, "max_episode_steps": max_episode_steps,
                                           "frame_skip": 1, "kwargs": kwargs, "vectorization": vectorization}))


def balance(obs: np.ndarray) -> np.ndarray:
    """A controller that keeps every pole up for 500 steps and more: push towards where the pole falls."""
    return (obs[:, 2] + 0.5 * obs[:, 3] + 0.01 * obs[:, 0] + 0.1 * obs[:, 1] > 0).astype(np.int64)


def test_only_cartpole_ids_have_a_vector_entry_point_rlrun_adapts() -> None:
    """gymnasium 1.4 registers vector entry points for CartPole-v0/v1 (numpy) and three phys2d ids (jax, not
    installed with rlrun, no per-copy reset here)."""
    assert adaptable_ids() == ["CartPole-v0", "CartPole-v1"]
    envs = factory().make_vector(N)
    assert isinstance(envs, CartPoleSameStep) and envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    assert envs.num_envs == N and envs.single_observation_space == factory().spec.observation_space
    envs.close()


def test_same_dynamics_as_gymnasiums_cartpole_vector_env_and_cartpole_env() -> None:
    """From the same float64 state and actions (random actions, 2000 steps of 8 copies, many episodes ending), the
    adapter's next state is gymnasium's ``CartPoleVectorEnv.step``'s and every copy's ``CartPoleEnv.step``'s, bit
    for bit, with the same terminated and reward; a copy that ended shows that state in ``final_obs``."""
    envs = factory().make_vector(N)
    envs.reset(seed=3)
    batched = gym.make_vec("CartPole-v1", num_envs=N, vectorization_mode="vector_entry_point")
    batched.reset(seed=0)
    singles = [gym.make("CartPole-v1").unwrapped for _ in range(N)]
    for s in singles:
        s.reset(seed=0)
    rng = np.random.default_rng(1)
    ended = 0
    for _ in range(2000):
        actions = rng.integers(0, 2, N)
        before, steps = envs.env.state.copy(), envs.env.steps.copy()
        batched.state, batched.steps, batched.prev_done = before.copy(), steps.copy(), np.zeros(N, dtype=bool)
        want_obs, want_rew, want_term, want_trunc, _ = batched.step(actions)
        obs, rew, term, trunc, info = envs.step(actions)
        assert np.array_equal(term, want_term) and np.array_equal(trunc, want_trunc)
        assert np.array_equal(rew, want_rew.astype(np.float64))
        done = term | trunc
        real = np.array([info["final_obs"][i] if done[i] else obs[i] for i in range(N)])
        assert np.array_equal(real, want_obs)
        assert np.array_equal(envs.env.state[:, ~done], batched.state[:, ~done])  # float64, bit for bit
        for i, s in enumerate(singles):
            s.state, s.steps_beyond_terminated = before[:, i].copy(), None
            single_obs, single_rew, single_term, _, _ = s.step(int(actions[i]))
            assert np.array_equal(single_obs, real[i]) and single_term == term[i] and single_rew == rew[i]
            if not done[i]:
                assert np.array_equal(s.state, envs.env.state[:, i])
        ended += int(done.sum())
    assert ended > 500
    envs.close()


def test_a_copy_that_ends_is_reset_in_the_same_step_and_nothing_else_is_said_otherwise() -> None:
    """Pushing left ends every episode in about 10 steps. At the step a copy ends: its returned observation is a
    fresh reset one (within +-0.05), ``final_obs`` holds its real, terminal, last observation, the masks name exactly
    the copies that ended; at steps where no copy ended the info is empty (no ``final_obs`` key)."""
    envs = factory().make_vector(N)
    obs, info = envs.reset(seed=list(range(N)))
    assert info == {}
    quiet = ended = 0
    for _ in range(60):
        previous_state = envs.env.state.copy()
        obs, _, term, trunc, info = envs.step(np.zeros(N, dtype=np.int64))
        done = term | trunc
        if not done.any():
            assert info == {}
            quiet += 1
            continue
        assert set(info) == FINAL_KEYS and info["final_info"] == {}
        assert np.array_equal(info["_final_obs"], done) and np.array_equal(info["_final_info"], done)
        for i in range(N):
            if not done[i]:
                assert info["final_obs"][i] is None
                continue
            final = info["final_obs"][i]
            assert final.shape == (4,) and final.dtype == np.float32
            assert abs(final[2]) > 12 * 2 * np.pi / 360 or abs(final[0]) > 2.4  # terminal
            assert np.abs(obs[i]).max() <= 0.05 and envs.env.steps[i] == 0  # reset in this step
            assert not np.array_equal(final, obs[i])
            assert np.array_equal(envs.env.state[:, i].astype(np.float32), obs[i])
            assert not np.array_equal(envs.env.state[:, i], previous_state[:, i])
            ended += 1
    assert ended >= 40 and quiet >= 20
    envs.close()


def test_truncation_at_the_time_limit() -> None:
    """A balanced pole runs into CartPole-v1's 500-step limit: truncated (not terminated) at step 500 exactly, for
    every copy at once, each then reset; the override env.max_episode_steps=20 cuts at 20, as TimeLimit does."""
    for limit, f in ((500, factory()), (20, factory(max_episode_steps=20))):
        envs = f.make_vector(N)
        obs, _ = envs.reset(seed=list(range(N)))
        for step in range(1, limit + 1):
            obs, _, term, trunc, info = envs.step(balance(obs))
            assert not term.any(), f"limit {limit}: a pole fell at step {step}"
            if step < limit:
                assert not trunc.any() and "final_obs" not in info
        assert trunc.all() and set(info) == FINAL_KEYS and (envs.env.steps == 0).all()
        obs, _, _, trunc, info = envs.step(balance(obs))
        assert not trunc.any() and info == {}
        envs.close()


def test_same_types_as_sync_vector_env() -> None:
    """Observations, rewards, terminated and truncated have SyncVectorEnv's dtypes and shapes, and the info at a
    step where copies ended has the same keys and value types."""
    out = {}
    for vectorization in ("copies", "vector_entry_point"):
        envs = factory(vectorization=vectorization).make_vector(N)
        obs, _ = envs.reset(seed=list(range(N)))
        first = envs.step(np.ones(N, dtype=np.int64))
        for _ in range(100):
            result = envs.step(np.ones(N, dtype=np.int64))
            if "final_obs" in result[4]:
                break
        out[vectorization] = (obs, first, result)
        envs.close()
    (obs_a, first_a, end_a), (obs_b, first_b, end_b) = out["copies"], out["vector_entry_point"]
    assert (obs_a.dtype, obs_a.shape) == (obs_b.dtype, obs_b.shape)
    for x, y in zip((*first_a[:4], *end_a[:4]), (*first_b[:4], *end_b[:4]), strict=True):
        assert (x.dtype, x.shape) == (y.dtype, y.shape)
    assert first_a[4] == first_b[4] == {}
    assert set(end_a[4]) == set(end_b[4]) == FINAL_KEYS
    for key in FINAL_KEYS:
        assert type(end_a[4][key]) is type(end_b[4][key])
    assert end_a[4]["_final_obs"].dtype == end_b[4]["_final_obs"].dtype == bool
    assert end_a[4]["final_obs"].dtype == end_b[4]["final_obs"].dtype == object


def test_seeding_is_deterministic() -> None:
    """The same per-copy seeds give the same steps, resets included (600 steps of a controller that lets poles
    fall now and then); other seeds give other ones; an int seed gives gymnasium's own first observations."""
    def run(seed: list[int]) -> list[np.ndarray]:
        envs = factory().make_vector(N)
        obs, _ = envs.reset(seed=seed)
        out = [obs]
        rng = np.random.default_rng(0)
        for _ in range(600):
            actions = np.where(rng.random(N) < 0.2, rng.integers(0, 2, N), balance(obs))
            obs, rew, term, trunc, info = envs.step(actions)
            out += [obs, rew, term, trunc, *[f for f in info.get("final_obs", ()) if f is not None]]
        envs.close()
        return out

    a, b, c = run(list(range(N))), run(list(range(N))), run(list(range(1, N + 1)))
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    assert len(a) > 4 * 600  # episodes ended
    envs = factory().make_vector(N)
    own = gym.make_vec("CartPole-v1", num_envs=N, vectorization_mode="vector_entry_point")
    assert np.array_equal(envs.reset(seed=5)[0], own.reset(seed=5)[0])


def _roundtrip(state: dict) -> dict:
    buf = io.BytesIO()
    torch.save(state, buf)  # plain data: it loads without running code
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def test_env_state_round_trip_continues_identically() -> None:
    """The state saved after 150 steps (batched arrays, step counters, the generator), through torch.save/load,
    put into an env seeded otherwise that has gone its own way: both continue with the same 700 steps (100 random
    ones, where poles fall, then balancing ones up to the time limit), resets and truncations included."""
    a = factory().make_vector(N)
    obs_a, _ = a.reset(seed=list(range(N)))
    rng = np.random.default_rng(0)
    for _ in range(150):
        obs_a = a.step(rng.integers(0, 2, N))[0]
    state = _roundtrip(vector_env_state(a))
    assert set(state) == {"batched"}
    b = factory().make_vector(N)
    b.reset(seed=99)
    for _ in range(37):
        b.step(np.ones(N, dtype=np.int64))
    set_vector_env_state(b, state)
    ended = truncated = 0
    for t in range(700):
        actions = rng.integers(0, 2, N) if t < 100 else balance(obs_a)
        ra, rb = a.step(actions), b.step(actions)
        for x, y in zip(ra[:4], rb[:4], strict=True):
            assert np.array_equal(x, y)
        assert set(ra[4]) == set(rb[4])
        for i in np.flatnonzero(ra[2] | ra[3]):
            assert np.array_equal(ra[4]["final_obs"][i], rb[4]["final_obs"][i])
            ended += 1
        truncated += int(ra[3].sum())
        obs_a = ra[0]
    assert ended >= 30 and truncated == N
    assert np.array_equal(a.env.np_random.random(4), b.env.np_random.random(4))
    a.close()
    b.close()


def test_env_state_of_another_vectorization_or_size_is_refused() -> None:
    batched, copies = factory().make_vector(2), factory(vectorization="copies").make_vector(2)
    for envs in (batched, copies):
        envs.reset(seed=[0, 1])
    with pytest.raises(CheckpointError, match="env.vectorization changed"):
        set_vector_env_state(copies, vector_env_state(batched))
    with pytest.raises(CheckpointError, match="env.vectorization changed"):
        set_vector_env_state(batched, vector_env_state(copies))
    three = factory().make_vector(3)
    three.reset(seed=0)
    with pytest.raises(CheckpointError, match="holds 2 env copies but the run has 3"):
        set_vector_env_state(three, vector_env_state(batched))


class Balance:
    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        return torch.from_numpy(balance(obs.numpy()))


def test_rollout_worker_samples_and_its_state_round_trips() -> None:
    """A rollout worker acts on the adapter as on SyncVectorEnv (final observations of the ended episodes, 500-step
    episodes of the balancing policy); its state, put into another worker, continues identically."""
    a = RolloutWorker(factory(), Balance(), num_envs=4, seed=1)
    batch = a.sample(520)
    assert batch.rewards.dtype == np.float32 and batch.obs.shape == (521, 4, 4)
    assert batch.episode_lengths == [500] * 4 and batch.episode_returns == [500.0] * 4
    assert batch.final_obs.shape == (4, 4) and batch.truncated[499].all()
    state = _roundtrip(a.get_state())
    b = RolloutWorker(factory(), Balance(), num_envs=4, seed=2)
    b.sample(7)
    assert b.set_state(state)
    x, y = a.sample(30), b.sample(30)
    assert np.array_equal(x.obs, y.obs) and np.array_equal(x.rewards, y.rewards)
    a.close()
    b.close()


# ---------------------------------------------------------------------------------------------------- config

def test_ids_without_an_adaptable_vector_entry_point_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"env.vectorization=vector_entry_point: Pendulum-v1 registers no vector "
                                          r"entry point in gymnasium .* \(ids that do: CartPole-v0, CartPole-v1\); "
                                          r"use env.vectorization=copies\."):
        factory("Pendulum-v1")
    with pytest.raises(ConfigError, match=r"phys2d/CartPole-v1's vector entry point .*CartPoleJaxVectorEnv cannot "
                                          r"be reset per copy"):
        factory("phys2d/CartPole-v1")
    with pytest.raises(ConfigError, match="env.kwargs: CartPole-v1 does not accept"):  # the single env refuses first
        factory(no_such_argument=1)
    with pytest.raises(ConfigError, match="env.kwargs: CartPole-v1's vector entry point does not accept"):
        make_same_step("CartPole-v1", "CartPole-v1", 2, {"no_such_argument": 1})
    with pytest.raises(ConfigError, match="executor.vector_mode=async: the env's own vectorised implementation"):
        factory().make_vector(2, "async")


@pytest.mark.parametrize("overrides, needle", [
    (["executor.vector_mode=async"], "env.vectorization=vector_entry_point with executor.vector_mode=async"),
    (["executor.vector_mode=pipelined"], "with executor.vector_mode=pipelined: the env's own"),
    (["executor=ray", "executor.vector_mode=async"], "use executor.vector_mode=sync or serial"),
])
def test_vector_modes_that_cannot_step_it_are_refused_when_composed(overrides: list[str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        compose(["env=cartpole", "env.vectorization=vector_entry_point", *overrides])
    compose(["env=cartpole", "env.vectorization=vector_entry_point", "executor.vector_mode=serial"])


def test_protocol_card_records_the_vectorization() -> None:
    card = factory().protocol_card()
    assert card["vectorization"] == "vector_entry_point" and card["backend"] == "gymnasium"
    assert card["registered"]["vector_entry_point"].endswith("CartPoleVectorEnv")
    assert factory(vectorization="copies").protocol_card()["vectorization"] == "copies"


def test_auto_steps_the_batched_env_where_it_can_and_copies_elsewhere() -> None:
    """env.vectorization=auto (PPO's CartPole preset): CartPole ids in a vector mode that keeps the copies in the
    worker's process get the batched env; an id without an adaptable vector entry point, or a subprocess /
    pipelined vector mode, gets env copies, without an error."""
    auto = factory(vectorization="auto")
    envs = auto.make_vector(4)
    assert isinstance(envs, CartPoleSameStep)
    envs.close()
    for mode in ("sync", "serial", "async", "pipelined"):
        assert auto.vectorization_for(mode) == ("copies" if mode in ("async", "pipelined") else "vector_entry_point")
    envs = auto.make_vector(2, "async")
    assert isinstance(envs, gym.vector.AsyncVectorEnv)
    envs.close()
    assert auto.protocol_card()["vectorization"] == "vector_entry_point"
    for other in (factory("Acrobot-v1", vectorization="auto"), factory("Pendulum-v1", vectorization="auto")):
        assert other.vectorization_for("sync") == "copies" and other.protocol_card()["vectorization"] == "copies"
        envs = other.make_vector(2)
        assert isinstance(envs, gym.vector.SyncVectorEnv)
        envs.close()


def test_auto_is_the_ppo_cartpole_presets_choice_and_composes_with_every_vector_mode() -> None:
    assert compose(["algo=ppo"]).env.vectorization == "auto"
    assert compose(["algo=dqn"]).env.vectorization == "copies"
    assert compose(["algo=ppo", "~algo_env"]).env.vectorization == "copies"
    for mode in ("sync", "serial", "async", "pipelined"):
        compose(["algo=ppo", f"executor.vector_mode={mode}"])
    compose(["algo=ppo", "executor=ray", "executor.vector_mode=async"])


def test_a_run_records_what_auto_chose_in_its_vector_mode(tmp_path: Path) -> None:
    """protocol.json says what stepped the copies: the batched env with the default sync mode, copies with
    executor.vector_mode=async."""
    from rlrun.app.run import write_protocol_card

    for mode, expected in (("sync", "vector_entry_point"), ("async", "copies")):
        cfg = compose(["algo=ppo", f"executor.vector_mode={mode}"])
        card = write_protocol_card(tmp_path, GymEnvFactory(cfg.env), cfg)
        assert card["vectorization"] == expected
        assert json.loads((tmp_path / "protocol.json").read_text())["vectorization"] == expected


@pytest.mark.parametrize("override, needle", [
    ("env=pendulum", "Pendulum-v1 registers no vector entry point"),
    ("executor.vector_mode=async", "with executor.vector_mode=async"),
    ("env.vectorization=batched", "env.vectorization=batched"),
])
def test_cli_refuses_with_one_line_and_exit_code_2(workdir: Path, override: str, needle: str) -> None:
    args = ["env.vectorization=vector_entry_point", override, "logger=none"]
    if override.startswith("env.vectorization"):
        args = [override, "logger=none"]
    proc = run_rlrun(args, workdir)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not list(workdir.rglob("summary.json"))


# ---------------------------------------------------------------------------------------------------- end to end

def test_cli_trains_ppo_on_cartpole_with_the_vector_entry_point(workdir: Path) -> None:
    """rlrun algo=ppo env=cartpole env.vectorization=vector_entry_point: 8 copies (the preset), 6144 env steps;
    it learns (mean return 148 at seed 1, against the random policy's ~22); protocol.json records the
    vectorization."""
    proc = run_rlrun(["algo=ppo", "env=cartpole", "env.vectorization=vector_entry_point", "stop.env_steps=6144",
                      "logger=none", "export.formats=[]", "seed=1"], workdir)
    assert proc.returncode == 0, proc.stderr
    summary = only_summary(workdir)
    assert summary["env_steps"] >= 6144 and summary["stop_reason"] in ("env_steps", "episode_return_mean")
    assert summary["episodes"] > 50 and summary["episode_return_mean"] > 80
    protocol = json.loads(next(workdir.rglob("protocol.json")).read_text())
    assert protocol["vectorization"] == "vector_entry_point"


def test_resumed_run_equals_an_uninterrupted_one() -> None:
    """DQN on CartPole with the vector entry point, 4 copies: 2N env steps in one go, and N, stop, resume to 2N,
    give the same checkpoint: algorithm state, loop counters, RNGs, and the batched env state (arrays, counters,
    generator) of the worker."""
    import tempfile

    from rlrun import checkpoint as ckpt
    from rlrun.app.run import run_experiment

    n = 400
    common = ["env.vectorization=vector_entry_point", "executor.num_envs=4", "algo.learning_starts=100",
              "algo.hidden_sizes=[32]", "algo.batch_size=32", "algo.buffer_size=5000", "algo.rollout_steps=4",
              "export.formats=[]", "logger=none", "algo.epsilon_decay_steps=600"]
    with tempfile.TemporaryDirectory() as tmp:
        whole, part = Path(tmp) / "whole", Path(tmp) / "part"
        run_experiment(compose([*common, f"stop.env_steps={2 * n}"]), whole)
        run_experiment(compose([*common, f"stop.env_steps={n}"]), part)
        overrides = [f"resume={part}", f"stop.env_steps={2 * n}"]
        run_experiment(compose(overrides), Path(tmp) / "unused", overrides=overrides)
        a = ckpt.load_checkpoint(ckpt.checkpoint_path(whole))
        b = ckpt.load_checkpoint(ckpt.checkpoint_path(part))
    assert a["loop"]["env_steps"] == b["loop"]["env_steps"] == 2 * n
    assert a["algo"]["gradient_steps"] > 100  # the comparison covers real learning
    assert_same(a["algo"], b["algo"], "algo")
    assert_same(a["rng"], b["rng"], "rng")
    envs_a = [w["envs"] for ws in a["executor"]["worker_sets"] for w in ws]
    envs_b = [w["envs"] for ws in b["executor"]["worker_sets"] for w in ws]
    assert all(set(e) == {"batched"} for e in envs_a)

    def seeded(envs: list[dict]) -> list[list[dict]]:  # the spaces nobody seeds draw OS entropy: they differ
        return [[{**layer, "spaces": {k: v for k, v in layer["spaces"].items() if k == "action_space"}}
                 for layer in e["batched"]] for e in envs]

    assert_same(seeded(envs_a), seeded(envs_b), "envs")
