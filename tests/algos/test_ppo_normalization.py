"""PPO with observation normalisation and reward scaling (algo.normalize_obs / algo.normalize_reward) on a real
MuJoCo task: the statistics are the agent's state, so (1) they travel to workers with the weights, (2) a stopped
and resumed run equals an uninterrupted one bitwise, and (3) the exported policy takes raw observations and acts
as the live agent does. Also: the MuJoCo presets compose to the references' settings."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import assert_same, rollout_form
from test_resume import without_unseeded_spaces

from rlrun import checkpoint as ckpt
from rlrun.execution.rollout import Rollout

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

N = 256  # env steps per half: 2 rollouts of 128 steps of one Hopper copy
SMALL = ["algo=ppo", "env=mujoco", "env.id=Hopper-v5", "algo.rollout_steps=128", "algo.num_epochs=2",
         "algo.minibatch_size=64", "algo.hidden_sizes=[16]", f"algo.total_env_steps={2 * N}", "logger=none",
         "export.formats=[]"]


def compose(overrides: list[str]):  # noqa: ANN201
    from rlrun.config import compose as _compose

    return _compose(overrides)


def test_presets_are_the_references_settings() -> None:
    ppo = compose(["algo=ppo", "env=mujoco"])
    assert ppo.algo.normalize_obs and ppo.algo.normalize_reward and ppo.algo.rollout_steps == 2048
    assert (ppo.algo.lr, ppo.algo.minibatch_size, ppo.algo.num_epochs, ppo.algo.vf_clip_eps) == (3e-4, 64, 10, 0.2)
    assert ppo.executor.num_envs == 1 and ppo.stop.env_steps == 1_000_000 and not ppo.algo.anneal_clip
    sac = compose(["algo=sac", "env=mujoco", "env.id=Hopper-v5"])
    assert (sac.algo.batch_size, sac.algo.hidden_sizes, sac.algo.actor_lr) == (256, [256, 256], 3e-4)
    plain = compose(["algo=ppo"])  # elsewhere the keys stay off
    assert not plain.algo.normalize_obs and not plain.algo.normalize_reward


def hopper_rollout(steps: int = 128) -> Rollout:
    env = gym.make("Hopper-v5")
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    rows = {k: [] for k in ("obs", "next_obs", "actions", "rewards", "terminated", "truncated", "log_prob",
                            "raw_action")}
    for _ in range(steps):
        a = rng.uniform(-1, 1, 3).astype(np.float32)
        nxt, r, term, trunc, _ = env.step(a)
        for k, v in (("obs", obs), ("next_obs", nxt), ("actions", a), ("raw_action", a), ("rewards", r),
                     ("terminated", term), ("truncated", trunc), ("log_prob", -3.0)):
            rows[k].append(v)
        obs = env.reset()[0] if term or trunc else nxt
    return rollout_form({k: torch.as_tensor(np.array(v)).unsqueeze(1).float() if k not in ("terminated", "truncated")
                         else torch.as_tensor(np.array(v)).unsqueeze(1) for k, v in rows.items()})


def test_statistics_update_from_raw_observations_and_travel_with_the_weights() -> None:
    from rlrun.algos.ppo import PPO
    from rlrun.envs.mujoco_env import MujocoEnvFactory

    cfg = compose(SMALL)
    spec = MujocoEnvFactory(cfg.env).spec
    learner = PPO.make_agent(cfg.algo, spec, seed=0)
    rollout = hopper_rollout()
    learner.update(rollout)
    raw = rollout.obs.squeeze(1).double().numpy()
    n = len(raw)
    np.testing.assert_allclose(learner.network.obs_normalizer.stats.mean.numpy(), raw.sum(0) / (n + 1e-4),
                               rtol=1e-9)
    weights = learner.get_weights()
    assert "obs_normalizer.stats.mean" in weights and "obs_normalizer.stats.var" in weights
    worker = PPO.make_worker_policy(cfg.algo, spec, worker_index=1)
    obs = rollout.obs.squeeze(1)
    assert not torch.allclose(worker.get_actions(obs, explore=False), learner.get_actions(obs, explore=False))
    worker.set_weights(weights)
    assert torch.equal(worker.get_actions(obs, explore=False), learner.get_actions(obs, explore=False))


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:
    from rlrun.app.run import run_experiment

    run_dir = tmp_path_factory.mktemp("norm-reference") / "run"
    run_experiment(compose([*SMALL, f"stop.env_steps={2 * N}", "export.formats=[torchscript]"]), run_dir)
    return run_dir


def test_stop_then_resume_equals_an_uninterrupted_run(reference_run: Path, tmp_path: Path) -> None:
    from rlrun.app.run import run_experiment

    run_dir = tmp_path / "run"
    run_experiment(compose([*SMALL, f"stop.env_steps={N}"]), run_dir)
    half = ckpt.load_checkpoint(ckpt.checkpoint_path(run_dir))
    overrides = [f"resume={run_dir}", f"stop.env_steps={2 * N}"]
    run_experiment(compose(overrides), tmp_path / "unused", overrides=overrides)
    a = ckpt.load_checkpoint(ckpt.checkpoint_path(run_dir))
    b = ckpt.load_checkpoint(ckpt.checkpoint_path(reference_run))
    agent = a["algo"]["agent"]
    assert float(agent["network.obs_normalizer.stats.count"]) > 2 * N  # the statistics are in the state...
    assert not torch.equal(agent["network.obs_normalizer.stats.mean"],  # ...and moved in the second half
                           half["algo"]["agent"]["network.obs_normalizer.stats.mean"])
    assert agent["reward_scaler._extra_state"]["returns"] is not None
    assert_same(a["algo"], b["algo"], "algo")
    assert_same({k: v for k, v in a["loop"].items() if k != "wall_time_s"},
                {k: v for k, v in b["loop"].items() if k != "wall_time_s"}, "loop")
    assert_same(a["rng"], b["rng"], "rng")
    assert_same(without_unseeded_spaces(a["executor"]), without_unseeded_spaces(b["executor"]), "executor")


def test_the_exported_policy_takes_raw_observations(reference_run: Path) -> None:
    from rlrun.export import restore

    model = torch.jit.load(str(reference_run / "export" / "policy.pt"))
    restored = restore(reference_run)
    try:
        policy = restored.policy()
        mean = policy.network.obs_normalizer.stats.mean
        assert float(mean.abs().max()) > 0.1  # the normalisation is not the identity: the comparison can fail
        raw = hopper_rollout(64).obs.squeeze(1)
        with torch.no_grad():
            live = policy.get_actions(raw, explore=False)
            exported = model(raw)
            unnormalised = policy.network.head.get_policy(policy.network.torso(raw))[0].clamp(-1, 1)
        torch.testing.assert_close(exported, live, rtol=1e-5, atol=1e-6)
        assert not torch.allclose(exported, unnormalised, atol=1e-3)  # the normaliser is inside the model
    finally:
        restored.close()


def test_the_onnx_policy_takes_raw_observations(reference_run: Path, tmp_path: Path) -> None:
    import onnxruntime as ort

    from rlrun.export import export_onnx, restore

    restored = restore(reference_run)
    try:
        policy = restored.policy()
        path = export_onnx(policy, restored.spec.observation_space, tmp_path / "policy.onnx")
        raw = hopper_rollout(64).obs.squeeze(1).double()  # MuJoCo observations are float64
        session = ort.InferenceSession(str(path))
        got = session.run(None, {session.get_inputs()[0].name: raw.numpy()})[0]
        with torch.no_grad():
            live = policy.get_actions(raw, explore=False).numpy()
        np.testing.assert_allclose(got, live, rtol=1e-5, atol=1e-6)
    finally:
        restored.close()
