"""Checkpoint contents and safety (rlrun/checkpoint.py): plain-data encoding, RNG and env state capture, atomic
writes, safe and readable loading, replay on/off, the resume config merge, the checkpoint schedule, and a
non-finite loss stopping a run with its last good checkpoint kept.

The exactness of a whole resumed run through the CLI is tested in tests/test_resume.py; here the same property is
checked in-process on the algorithm and executor alone (fast).
"""

from __future__ import annotations

import io
import json
import random
from collections import deque
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import assert_same
from omegaconf import OmegaConf

from rlrun import checkpoint as ckpt
from rlrun import plain_data
from rlrun.app.run import CheckpointSchedule
from rlrun.config import compose
from rlrun.envs import env_state
from rlrun.errors import CheckpointError, ConfigError
from rlrun.registry import registry

SMALL = ["algo.hidden_sizes=[16]", "algo.batch_size=16", "algo.buffer_size=2000", "algo.learning_starts=40",
         "algo.target_update_every=20", "logger=none"]


def roundtrip(obj):
    """torch.save then torch.load(weights_only=True), as a checkpoint file goes."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def build(overrides=(), seed=0, num_envs=1):
    """A DQN algorithm and its local executor, built as the run loop builds them."""
    cfg = compose([*SMALL, f"executor.num_envs={num_envs}", f"seed={seed}", *overrides])
    torch.set_num_threads(1)  # as device.torch_threads=1 does in a run; many threads only contend on 2 cores
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, seed)
    algo = registry.get("algo", cfg.algo.name)(OmegaConf.to_object(cfg.algo), env_factory.spec, executor,
                                               torch.device("cpu"), seed)
    return cfg, algo, executor




# ---------------------------------------------------------------------------------------------------- encoding


@pytest.mark.parametrize("value", [
    np.arange(6, dtype=np.float64).reshape(2, 3),
    np.array([[1, 2], [3, 4]], dtype=np.uint8),
    np.array([True, False]),
    np.array([], dtype=np.int64).reshape(0, 3),
    np.float32(1.5),
    np.int64(-7),
    (3, [np.arange(3, dtype=np.uint32)], None, "x", b"\x00\x01", 2.5, True),
    {"a": deque([1, np.float64(2.0)], maxlen=3), 5: np.zeros(2, dtype=np.float16)},
    2 ** 100,
])
def test_encode_roundtrips_through_a_weights_only_load(value) -> None:
    back = plain_data.decode(roundtrip(plain_data.encode(value)))
    assert type(back) is type(value)
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and back.shape == value.shape and np.array_equal(back, value)
    elif isinstance(value, dict):
        assert list(back["a"]) == [1, 2.0] and back["a"].maxlen == 3
        assert back[5].dtype == np.float16 and np.array_equal(back[5], value[5])
    elif isinstance(value, tuple):
        assert back[0] == 3 and np.array_equal(back[1][0], value[1][0]) and back[1][0].dtype == np.uint32
        assert back[2:] == value[2:]
    else:
        assert back == value and getattr(back, "dtype", None) == getattr(value, "dtype", None)


def test_encoded_generator_continues_the_same_stream() -> None:
    g = np.random.default_rng(123)
    g.random(5)
    back = plain_data.decode(roundtrip(plain_data.encode(g)))
    assert isinstance(back, np.random.Generator)
    assert np.array_equal(back.random(10), g.random(10))


@pytest.mark.parametrize("value", [object(), lambda: 1, np.array([object()]), {(1, 2): 3}])
def test_objects_are_not_plain(value) -> None:
    with pytest.raises(plain_data.NotPlain):
        plain_data.encode(value)


def test_global_rngs_are_restored() -> None:
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    state = roundtrip(plain_data.rng_state())
    first = (torch.rand(4), np.random.rand(4), [random.random() for _ in range(4)])
    plain_data.set_rng_state(state)
    second = (torch.rand(4), np.random.rand(4), [random.random() for _ in range(4)])
    assert torch.equal(first[0], second[0]) and np.array_equal(first[1], second[1]) and first[2] == second[2]


# ---------------------------------------------------------------------------------------------------- env state


def rollout(envs, actions):
    out = []
    for a in actions:
        obs, rew, term, trunc, _ = envs.step(a)
        out.append((obs.copy(), rew.copy(), term.copy(), trunc.copy()))
    return out


def test_vector_env_state_restores_the_same_future_across_episode_ends() -> None:
    """Two CartPole copies with random actions: 200 steps cross several episode ends (SAME_STEP autoreset draws
    the reset state from each env's generator). Snapshot, run 200 steps, restore, run them again: identical."""
    from rlrun.envs.gym_env import GymEnvFactory

    factory = GymEnvFactory(OmegaConf.create({"id": "CartPole-v1", "max_episode_steps": None, "frame_skip": 1,
                                              "kwargs": {}}))
    envs = factory.make_vector(2)
    envs.action_space.seed(0)
    envs.reset(seed=[0, 1])
    rng = np.random.default_rng(0)
    rollout(envs, rng.integers(0, 2, size=(30, 2)))
    state = roundtrip(env_state.vector_env_state(envs))
    actions = rng.integers(0, 2, size=(200, 2))
    first = rollout(envs, actions)
    sampled_first = envs.action_space.sample()
    assert sum(int(t.any()) for _, _, t, _ in first) >= 2, "the rollout should cross episode ends"
    env_state.set_vector_env_state(envs, state)
    second = rollout(envs, actions)
    for (o1, r1, t1, u1), (o2, r2, t2, u2) in zip(first, second, strict=True):
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2) and np.array_equal(t1, t2) and np.array_equal(u1, u2)
    assert np.array_equal(envs.action_space.sample(), sampled_first)
    envs.close()


def test_atari_emulator_state_is_restored() -> None:
    """An ALE env's state lives in the emulator (RAM, frame counters, its RNG), not in Python attributes: the
    snapshot stores ale-py's cloned state with its RNG (sticky actions draw from it)."""
    ale_py = pytest.importorskip("ale_py")
    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", frameskip=2, repeat_action_probability=0.25)
    env.reset(seed=0)
    for _ in range(5):
        env.step(env.action_space.sample())
    state = roundtrip(env_state.env_state(env))
    actions = [2, 3, 2, 2, 3, 0, 1, 2, 3, 3] * 3
    first = [env.step(a)[0].copy() for a in actions]
    env_state.set_env_state(env, state)
    second = [env.step(a)[0].copy() for a in actions]
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert not all(np.array_equal(first[0], f) for f in first), "the frames should change"
    env.close()


def test_env_state_of_other_wrappers_is_refused() -> None:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    state = env_state.env_state(env)
    other = gym.make("CartPole-v1", max_episode_steps=None, disable_env_checker=True)
    with pytest.raises(CheckpointError, match="env copies are built as"):
        env_state.set_env_state(other, state)


@pytest.mark.parametrize("layer, key", [(0, "env"), (-1, "brand_new"), (-1, "render_mode")])
def test_env_state_sets_only_attributes_the_env_has(layer: int, key: str) -> None:
    """A tampered env state naming an attribute a save never keeps (a wrapper's inner env, render_mode) or one the
    env does not have: refused with the checkpoint error, and nothing of the env is changed."""
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    state = roundtrip(env_state.env_state(env))
    state[layer]["attrs"][key] = plain_data.encode(1)
    inner, attrs = env.env, dict(vars(env.unwrapped))
    with pytest.raises(CheckpointError, match=f"sets attribute '{key}'"):
        env_state.set_env_state(env, state)
    assert env.env is inner and "brand_new" not in vars(env.unwrapped) and env.unwrapped.render_mode is None
    assert vars(env.unwrapped).keys() == attrs.keys()


def test_damaged_emulator_state_is_the_checkpoint_error() -> None:
    """ALE's own deserializer raises what it likes on damaged bytes (SystemError among them): one CheckpointError."""
    ale_py = pytest.importorskip("ale_py")
    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5")
    env.reset(seed=0)
    state = roundtrip(env_state.env_state(env))
    state[-1]["emulator"] = plain_data.bytes_to_tensor(b"\x07" * 64)
    with pytest.raises(CheckpointError, match="emulator state"):
        env_state.set_env_state(env, state)
    env.close()


# ---------------------------------------------------------------------------------------------------- algorithm


def train(algo, iterations):
    return [algo.training_step() for _ in range(iterations)]


def snapshot(algo, executor, include_replay=True):
    return roundtrip({"algo": ckpt.algo_state(algo, include_replay), "executor": executor.state_dict(),
                      "rng": plain_data.rng_state()})


@pytest.mark.parametrize("num_envs", [1, 2])
def test_algorithm_and_workers_continue_exactly_from_a_snapshot(num_envs: int) -> None:
    """In-process: build, train 30 iterations, snapshot; (a) train 30 more; (b) build afresh, restore, train 30
    more. Every tensor of the algorithm state, the episode returns and the RNGs agree bitwise."""
    torch.manual_seed(0)
    _, algo, executor = build(num_envs=num_envs)
    train(algo, 30)
    state = snapshot(algo, executor)
    results_a = train(algo, 30)
    final_a = snapshot(algo, executor)
    algo.stop()

    torch.manual_seed(123)  # building consumes other random numbers: the restore must not depend on them
    _, algo_b, executor_b = build(num_envs=num_envs)
    ckpt.load_algo_state(algo_b, state["algo"])
    assert executor_b.load_state_dict(state["executor"]) is True
    plain_data.set_rng_state(state["rng"])
    results_b = train(algo_b, 30)
    final_b = snapshot(algo_b, executor_b)
    algo_b.stop()
    assert algo_b.gradient_steps > 0
    assert [r.episode_returns for r in results_a] == [r.episode_returns for r in results_b]
    assert_same(final_a["algo"], final_b["algo"], "algo")
    assert_same(final_a["rng"], final_b["rng"], "rng")
    assert_same(final_a["executor"]["worker_sets"][0][0]["obs"], final_b["executor"]["worker_sets"][0][0]["obs"])


def test_checkpoint_without_replay_loads_with_an_empty_memory() -> None:
    _, algo, executor = build()
    train(algo, 20)
    assert algo.agent.memory.size() > 0
    full = ckpt.algo_state(algo, include_replay=True)
    small = roundtrip(ckpt.algo_state(algo, include_replay=False))
    assert any(k.startswith("memory.") for k in full["agent"])
    assert not any(k.startswith("memory.") for k in small["agent"])
    _, algo_b, _ = build(seed=5)
    ckpt.load_algo_state(algo_b, small, replay_included=False)
    assert algo_b.agent.memory.size() == 0
    for name, value in algo.agent.q.state_dict().items():
        assert torch.equal(value, algo_b.agent.q.state_dict()[name])
    assert algo_b.env_steps == algo.env_steps
    with pytest.raises(CheckpointError, match="does not fit"):
        ckpt.load_algo_state(algo_b, small, replay_included=True)  # memory keys missing and not expected
    algo.stop()
    algo_b.stop()


def test_non_finite_parameters_are_named() -> None:
    _, algo, _ = build()
    assert ckpt.non_finite_parameters(algo) == []
    with torch.no_grad():
        next(algo.agent.q.parameters()).view(-1)[0] = float("nan")
    names = ckpt.non_finite_parameters(algo)
    assert len(names) == 1 and names[0].startswith("agent.q."), names
    algo.stop()


# ---------------------------------------------------------------------------------------------------- files


def test_save_is_atomic_a_failed_write_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints" / "latest.pt"
    good = {"algo": {"w": torch.ones(3)}, "config": {}, "loop": {"env_steps": 10}, "rng": {}}
    ckpt.save_checkpoint(path, good)
    with pytest.raises(Exception):  # noqa: B017 - torch.save cannot pickle a lambda: the write fails midway
        ckpt.save_checkpoint(path, {**good, "loop": {"env_steps": 20}, "bad": lambda: None})
    loaded = ckpt.load_checkpoint(path)
    assert loaded["loop"]["env_steps"] == 10 and torch.equal(loaded["algo"]["w"], torch.ones(3))


def test_a_tampered_checkpoint_does_not_run_code(tmp_path: Path) -> None:
    """The payload's unpickling would create a file (builtins.open(marker, "w")). A plain torch.load shows it
    would; load_checkpoint refuses it with a CheckpointError and the file is not created."""
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    path = tmp_path / "latest.pt"
    torch.save({"format": ckpt.FORMAT, "version": ckpt.VERSION, "algo": Payload(), "config": {}, "loop": {},
                "rng": {}}, path)
    with pytest.raises(CheckpointError, match="refused"):
        ckpt.load_checkpoint(path)
    assert not marker.exists()
    torch.load(path, weights_only=False)  # the unsafe way: the payload runs (so this test can fail)
    assert marker.exists()


@pytest.mark.parametrize("damage,needle", [
    ("truncate", "truncated or corrupt"),
    ("garbage", "truncated or corrupt"),
    ("foreign", "not an rlrun checkpoint"),
    ("newer", "newer rlrun"),
    ("older", "older rlrun .*version 1;"),
    ("missing", "cannot be read"),
])
def test_unreadable_checkpoints_give_a_clear_error(tmp_path: Path, damage: str, needle: str) -> None:
    path = tmp_path / "latest.pt"
    state = {"algo": {"w": torch.arange(10000.0)}, "config": {}, "loop": {}, "rng": {}}
    ckpt.save_checkpoint(path, state)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(bytes(range(256)) * 10)
    elif damage == "foreign":
        torch.save({"weights": torch.zeros(2)}, path)
    elif damage == "newer":
        torch.save({**state, "format": ckpt.FORMAT, "version": ckpt.VERSION + 1}, path)
    elif damage == "older":
        torch.save({**state, "format": ckpt.FORMAT, "version": 1}, path)
    else:
        path.unlink()
    with pytest.raises(CheckpointError, match=needle):
        ckpt.load_checkpoint(path)


def test_find_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such run directory"):
        ckpt.find_checkpoint(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="no checkpoint in this directory"):
        ckpt.find_checkpoint(tmp_path)
    path = ckpt.checkpoint_path(tmp_path)
    ckpt.save_checkpoint(path, {"algo": {}, "config": {}, "loop": {}, "rng": {}})
    assert ckpt.find_checkpoint(tmp_path) == path.resolve() == ckpt.find_checkpoint(path)
    assert ckpt.run_dir_of(path) == tmp_path.resolve()


# ---------------------------------------------------------------------------------------------------- resume config


def saved_config(*overrides: str) -> dict:
    return OmegaConf.to_container(compose([*SMALL, *overrides]), resolve=True)


def test_resume_config_applies_compatible_overrides_and_keeps_the_rest() -> None:
    saved = saved_config("algo.lr=0.0005", "seed=4", "stop.env_steps=1000")
    overrides = ["resume=/x", "stop.env_steps=3000", "logger=default", "checkpoint.interval_env_steps=100", "seed=4"]
    composed = compose(overrides)
    cfg = ckpt.resume_config(saved, composed, overrides)
    assert cfg.stop.env_steps == 3000 and cfg.checkpoint.interval_env_steps == 100
    assert cfg.logger.mlflow.enabled is True  # the logger group was swapped
    assert cfg.algo.lr == 0.0005 and cfg.seed == 4 and cfg.algo.hidden_sizes == [16]  # saved values
    assert type(OmegaConf.to_object(cfg.algo)).__name__ == "DQNConfig"  # typed again by its schema
    assert cfg.resume == "/x"


@pytest.mark.parametrize("override,key", [
    ("algo.lr=0.1", "algo.lr"), ("seed=1", "seed"), ("env.id=Acrobot-v1", "env.id"),
    ("executor.num_envs=2", "executor.num_envs"), ("algo.hidden_sizes=[64]", "algo.hidden_sizes"),
])
def test_resume_config_refuses_an_incompatible_override(override: str, key: str) -> None:
    saved = saved_config()
    overrides = ["resume=/x", override]
    with pytest.raises(ConfigError) as e:
        ckpt.resume_config(saved, compose(overrides), overrides)
    message = str(e.value)
    assert override in message and f"the run has {key}=" in message and "start a new run" in message


def test_prepare_resume_argv_checks_first_and_points_hydra_at_the_run_dir(tmp_path: Path) -> None:
    ckpt.save_checkpoint(ckpt.checkpoint_path(tmp_path), {"algo": {}, "config": saved_config(), "loop": {},
                                                          "rng": {}})
    argv = ckpt.prepare_resume_argv([f"resume={tmp_path}", "stop.env_steps=5"])
    assert argv[0] == f"resume='{ckpt.checkpoint_path(tmp_path).resolve()}'" and argv[1] == "stop.env_steps=5"
    assert f"hydra.run.dir='{tmp_path.resolve()}'" in argv and "hydra.output_subdir=null" in argv
    assert ckpt.prepare_resume_argv(["seed=1"]) == ["seed=1"]
    with pytest.raises(ConfigError, match="multirun"):
        ckpt.prepare_resume_argv(["-m", f"resume={tmp_path}"])
    with pytest.raises(ConfigError, match="algo.lr=0.5"):  # refused before Hydra starts
        ckpt.prepare_resume_argv([f"resume={tmp_path}", "algo.lr=0.5"])


# ---------------------------------------------------------------------------------------------------- schedule


def test_checkpoint_schedule_by_env_steps_keeps_multiples_after_a_resume() -> None:
    cfg = OmegaConf.create({"interval_env_steps": 100, "interval_minutes": None})
    s = CheckpointSchedule(cfg, 0)
    assert not s.due(96) and s.due(100)
    s.written(104)  # written at 104: the next is at 200, not 204
    assert not s.due(196) and s.due(200)
    resumed = CheckpointSchedule(cfg, 250)
    assert not resumed.due(296) and resumed.due(300)


def test_checkpoint_schedule_by_minutes() -> None:
    s = CheckpointSchedule(OmegaConf.create({"interval_env_steps": None, "interval_minutes": 1e-9}), 0)
    assert s.due(1)
    never = CheckpointSchedule(OmegaConf.create({"interval_env_steps": None, "interval_minutes": None}), 0)
    assert not never.due(10 ** 9)


# ---------------------------------------------------------------------------------------------------- non-finite


def test_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    """algo.lr=1e30: the first Adam step moves every weight by about 1e30, so the next Q-values overflow float32
    and the TD loss becomes inf/NaN in the first learning iteration (iteration 25 reaches env step 100 =
    learning_starts). Checkpoints every 48 env steps: those at env steps 48 and 96 are good (no learning yet); the
    run stops at iteration 25 before writing another one. (The CLI turns an RlrunError into one line on stderr and
    its exit code, as tests/app/test_cli.py shows for other errors.)"""
    from rlrun.app.run import run_experiment
    from rlrun.errors import RlrunError

    run_dir = tmp_path / "run"
    cfg = compose(["algo.lr=1e30", "algo.learning_starts=100", "algo.hidden_sizes=[16]", "logger=none",
                   "algo.rollout_steps=4", "algo.train_every=1",
                   "checkpoint.interval_env_steps=48", "stop.env_steps=2000"])
    with pytest.raises(RlrunError) as e:
        run_experiment(cfg, run_dir)
    message = str(e.value)
    assert message.startswith("non-finite loss: loss/td = ") and "at iteration 25 (env step 100)" in message
    assert f"the last good checkpoint (env step 96) is kept at {ckpt.checkpoint_path(run_dir)}" in message
    state = ckpt.load_checkpoint(ckpt.checkpoint_path(run_dir))
    assert state["loop"]["env_steps"] == 96
    assert all(torch.isfinite(v).all() for k, v in state["algo"]["agent"].items()
               if isinstance(v, torch.Tensor) and v.is_floating_point() and not k.startswith("memory."))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "error" and summary["error"] == message
    assert summary["env_steps"] == 100
    assert not (run_dir / "export").exists()  # a diverged policy is not exported


@pytest.mark.parametrize("override,needle", [
    ("checkpoint.interval_env_steps=0", "checkpoint.interval_env_steps=0: must be >= 1"),
    ("checkpoint.interval_minutes=-1", "checkpoint.interval_minutes=-1.0: must be > 0"),
    ("export.formats=[tflite]", "export.formats=[.tflite.]: every element must be one of torchscript, onnx"),
])
def test_bad_checkpoint_and_export_settings_are_refused(override: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[")):
        compose([override])


def test_config_imports_names_each_module_a_saved_config_would_import() -> None:
    """What a checkpoint's config may not import without the user: a gymnasium module:Env id, a PettingZoo module
    outside the installed families, preload modules beyond rlrun's own; the families and rlrun's defaults pass."""
    assert ckpt.config_imports({"env": {"name": "gym", "id": "pkg.mod:Env-v0"}}) == {"pkg.mod": "env.id=pkg.mod:Env-v0"}
    assert ckpt.config_imports({"env": {"name": "gym", "id": "ALE/Pong-v5"}}) == {}
    assert ckpt.config_imports({"env": {"name": "pettingzoo", "id": "evil.mod"}}) == {"evil.mod": "env.id=evil.mod"}
    assert ckpt.config_imports({"env": {"name": "pettingzoo", "id": "mpe2.simple_spread_v3"}}) == {}
    assert ckpt.config_imports({"env": {"name": "pettingzoo", "id": "pistonball_v6"}}) == {}
    preload = {"executor": {"preload_modules": ["torch", "rlrun.execution.ray_actor", "evil"]}}
    assert ckpt.config_imports(preload) == {"evil": "executor.preload_modules=[torch,rlrun.execution.ray_actor,evil]"}
    with pytest.raises(ConfigError, match=r"asks to import evil \(executor\.preload_modules=.*trust.*evil"):
        ckpt.check_saved_imports(preload, (), "name {modules}")
    ckpt.check_saved_imports(preload, ("evil",), "name {modules}")


def test_resume_joins_no_ray_cluster_the_checkpoint_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """A saved executor.address (a Ray cluster: it would run the driver's code and send back what it likes) is
    refused on resume unless the user names the same cluster with RAY_ADDRESS; auto (this machine's) stays."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    saved = saved_config("executor=ray", "executor.address=ray://203.0.113.9:10001")
    overrides = ["resume=/x"]
    with pytest.raises(ConfigError, match=r"joins the Ray cluster at executor\.address=ray://203\.0\.113\.9:10001.*"
                                          r"RAY_ADDRESS=ray://203\.0\.113\.9:10001 rlrun resume="):
        ckpt.resume_config(saved, compose(overrides), overrides)
    monkeypatch.setenv("RAY_ADDRESS", "ray://203.0.113.9:10001")
    assert ckpt.resume_config(saved, compose(overrides), overrides).executor.address == "ray://203.0.113.9:10001"
    monkeypatch.delenv("RAY_ADDRESS")
    auto = saved_config("executor=ray", "executor.address=auto")
    assert ckpt.resume_config(auto, compose(overrides), overrides).executor.address == "auto"
