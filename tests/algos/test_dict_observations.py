"""Dict observations (rlrun/GoalGrid-v0: the goal in a bool image, the agent's place in a vector) through the
multi-input torso that ``algo.network=auto`` picks: PPO learns the task, the DQN family and IMPALA run on it,
on the local and Ray executors; a run stopped and resumed equals an uninterrupted one; the TorchScript export of a
Dict input acts like the live agent and ONNX refuses it in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import assert_same

from rlrun import checkpoint as ckpt
from rlrun import spaces as sp
from rlrun.app.run import run_experiment
from rlrun.components.networks import MultiInputTorso
from rlrun.config import compose
from rlrun.errors import RlrunError
from rlrun.export import export_onnx, restore

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
GRID = ["env=goal_grid", "logger=none", "seed=0"]


def test_ppo_learns_a_task_that_needs_both_parts(tmp_path: Path) -> None:
    """A random player scores about 0.44 per episode; the goal is seen only in the image and the agent's place
    only in the vector, so a return near the optimum (about 1.3: +1 and the shaping of the start distance) needs
    both. Seeded PPO passes 1.2 over its last 20 episodes within 30k env steps."""
    cfg = compose(["algo=ppo", "executor.num_envs=8", "algo.num_epochs=5", *GRID, "stop.env_steps=30000",
                   "stop.episode_return_mean=1.2", "export.formats=[]", "checkpoint.at_end=false"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary


@pytest.mark.parametrize("algo", [["algo=dqn", "algo.learning_starts=100"],
                                  ["algo=c51", "algo.learning_starts=100"],
                                  ["algo=impala", "executor.num_envs=2"], ["algo=a2c"]],
                         ids=["dqn", "c51", "impala", "a2c"])
def test_other_algorithms_build_the_multi_input_torso_and_learn_on_it(algo: list[str], tmp_path: Path) -> None:
    cfg = compose([*algo, *GRID, "stop.env_steps=400", "export.formats=[]"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["env_steps"] >= 400
    state = ckpt.load_checkpoint(ckpt.checkpoint_path(tmp_path))["algo"]
    assert any(".torso.images.image_0." in name for name in _names(state)), sorted(_names(state))[:8]


def test_the_ray_executor_runs_it(tmp_path: Path) -> None:
    cfg = compose(["algo=ppo", *GRID, "executor=ray", "executor.num_cpus=2", "executor.num_workers=1",
                   "executor.num_envs_per_worker=2", "stop.env_steps=256", "export.formats=[]"])
    assert run_experiment(cfg, tmp_path)["env_steps"] >= 256


def test_stop_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    common = ["algo=ppo", "executor.num_envs=2", "algo.rollout_steps=16", "algo.num_epochs=2",
              "algo.minibatch_size=16", "algo.total_env_steps=128", *GRID, "export.formats=[]"]
    run_experiment(compose([*common, "stop.env_steps=128"]), tmp_path / "whole")
    run_experiment(compose([*common, "stop.env_steps=64"]), tmp_path / "parts")
    overrides = [f"resume={tmp_path / 'parts'}", "stop.env_steps=128"]
    run_experiment(compose(overrides), tmp_path / "unused", overrides=overrides)
    whole, parts = (ckpt.load_checkpoint(ckpt.checkpoint_path(tmp_path / d)) for d in ("whole", "parts"))
    assert parts["loop"]["env_steps"] == whole["loop"]["env_steps"] == 128
    assert_same(parts["algo"], whole["algo"], "algo")
    assert_same(parts["rng"], whole["rng"], "rng")
    assert parts["loop"]["episodes"] == whole["loop"]["episodes"] > 0


def test_torchscript_export_of_a_dict_input_acts_like_the_live_agent(tmp_path: Path) -> None:
    run_experiment(compose(["algo=ppo", "executor.num_envs=2", "algo.rollout_steps=16", *GRID,
                            "stop.env_steps=64", "export.formats=[torchscript]"]), tmp_path)
    model = torch.jit.load(str(tmp_path / "export" / "policy.pt"))
    restored = restore(tmp_path)
    try:
        policy = restored.policy()
        assert isinstance(policy.network.torso, MultiInputTorso)
        space = restored.spec.observation_space
        obs = sp.to_torch(space, sp.sample(space, (300,), seed=1))
        obs["image"] = torch.zeros_like(obs["image"])
        obs["image"][torch.arange(300), 0, torch.randint(0, 5, (300,)), torch.randint(0, 5, (300,))] = True
        with torch.no_grad():
            expected = policy.get_actions(obs, explore=False)
        assert len(set(expected.tolist())) > 1  # the comparison can fail
        assert torch.equal(model(obs), expected)
        assert torch.equal(model({k: v[:1] for k, v in obs.items()}), expected[:1])  # any batch size
        with pytest.raises(RlrunError, match="ONNX export needs a single-array observation space") as e:
            export_onnx(policy, space, tmp_path / "policy.onnx")
        assert "\n" not in str(e.value)
    finally:
        restored.close()


def _names(state: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in state.items():
        out += _names(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}."]
    return out


