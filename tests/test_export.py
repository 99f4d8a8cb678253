"""Export of the acting policy (rlrun/export.py): TorchScript written by the run itself and by ``rlrun export``,
ONNX run with onnxruntime; the exported model's actions equal the live agent's greedy actions on the same
observations (sampled from the observation space and collected from real episodes)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import run_rlrun

from rlrun import spaces as sp
from rlrun.errors import CheckpointError, ConfigError, RlrunError
from rlrun.export import FORMATS, export_onnx, export_policy, export_torchscript, policy_dir, restore

# torch 2.13 marks torch.jit deprecated (in favour of torch.export); TorchScript files are still what libtorch loads.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """600 env steps of DQN on CartPole (in this process), exporting TorchScript at the end (the default)."""
    from rlrun.app.run import run_experiment
    from rlrun.config import compose

    run_dir = tmp_path_factory.mktemp("export") / "run"
    run_experiment(compose(["stop.env_steps=600", "algo.learning_starts=100", "algo.hidden_sizes=[32]",
                            "algo.rollout_steps=4",
                            "logger=none"]), run_dir)
    return run_dir


def observations(space: sp.Space, n: int = 512) -> torch.Tensor:
    """n observations sampled from the space (unbounded dims: uniform in [-1, 1]) and n from real episodes."""
    sampled = sp.to_torch(space, sp.sample(space, (n,), seed=1))
    env = gym.make("CartPole-v1")
    real, rng = [], np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    while len(real) < n:
        real.append(obs)
        obs, _, term, trunc, _ = env.step(int(rng.integers(2)))
        if term or trunc:
            obs, _ = env.reset()
    return torch.cat([sampled, torch.as_tensor(np.stack(real))])


def live_actions(restored, obs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return restored.policy().get_actions(obs, explore=False)


def test_the_run_exports_torchscript_that_acts_like_the_live_agent(trained_run: Path) -> None:
    import json

    summary = json.loads((trained_run / "summary.json").read_text())
    path = trained_run / "export" / "policy.pt"
    assert summary["export"] == [str(path.resolve())]
    model = torch.jit.load(str(path))
    assert list(model.named_buffers()) == [] and list(model.named_parameters()) == []  # frozen: acting only
    # The export holds the acting policy only; the checkpoint also the optimizer and the 600 transitions stored so
    # far (not the replay's 100k-record capacity, 4.8 MB of CartPole records: it holds what is stored).
    checkpoint = (trained_run / "checkpoints" / "latest.pt").stat().st_size
    assert path.stat().st_size < checkpoint < 1_000_000
    restored = restore(trained_run)
    try:
        obs = observations(restored.spec.observation_space)
        expected = live_actions(restored, obs)
        assert len(set(expected.tolist())) == 2  # both actions occur: the comparison can fail
        assert torch.equal(model(obs), expected)
        assert torch.equal(model(obs[:1]), expected[:1])  # any batch size
    finally:
        restored.close()


def test_onnx_export_acts_like_the_live_agent(trained_run: Path, tmp_path: Path) -> None:
    """onnxruntime's matrix kernels round differently from torch's, so an observation whose two Q-values are
    within float32 rounding (1e-4 here) may flip; all others must agree, and such near-ties must be rare."""
    ort = pytest.importorskip("onnxruntime")
    restored = restore(trained_run)
    try:
        path = export_onnx(restored.policy(), restored.spec.observation_space, tmp_path / "policy.onnx")
        obs = observations(restored.spec.observation_space)
        expected = live_actions(restored, obs)
        with torch.no_grad():
            q = restored.algo.agent.q(obs)
        gap = (q.max(-1).values - q.min(-1).values).numpy()
    finally:
        restored.close()
    session = ort.InferenceSession(str(path))
    assert [i.name for i in session.get_inputs()] == ["obs"] and [o.name for o in session.get_outputs()] == ["actions"]
    got = session.run(None, {"obs": obs.numpy()})[0]
    clear = gap > 1e-4
    assert clear.mean() > 0.99
    assert np.array_equal(got[clear], expected.numpy()[clear])
    assert np.array_equal(session.run(None, {"obs": obs[:3].numpy()})[0][clear[:3]],
                          expected.numpy()[:3][clear[:3]])  # a dynamic batch dimension
    assert not path.with_name(path.name + ".data").exists()  # one self-contained file


def test_rlrun_export_command(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_rlrun(["export", str(trained_run), "--format", "torchscript", "--out", str(out)], tmp_path, check=True)
    assert sorted(p.name for p in out.iterdir()) == [FORMATS["torchscript"]]
    assert f"wrote {out / 'policy.pt'}" in proc.stdout and "checkpoint at env step 600" in proc.stdout
    restored = restore(trained_run)
    try:
        obs = observations(restored.spec.observation_space, 64)
        assert torch.equal(torch.jit.load(str(out / "policy.pt"))(obs), live_actions(restored, obs))
    finally:
        restored.close()


def test_export_errors_are_one_clear_line(tmp_path: Path) -> None:
    nested = sp.Dict({"a": sp.Box(-1, 1, (2,), np.float32)})
    with pytest.raises(RlrunError, match="single-array observation space"):
        export_onnx(torch.nn.Linear(2, 2), nested, tmp_path / "p.onnx")
    with pytest.raises(RlrunError, match="not one of torchscript, onnx"):
        export_policy(torch.nn.Linear(2, 2), sp.Box(-1, 1, (2,), np.float32), tmp_path, ["savedmodel"])

    class NoActions(torch.nn.Module):
        def get_actions(self, obs, explore=True):
            raise ValueError("this policy cannot act")

    with pytest.raises(RlrunError, match="TorchScript export failed: this policy cannot act"):
        export_torchscript(NoActions(), sp.Box(-1, 1, (2,), np.float32), tmp_path / "p.pt")
    with pytest.raises(CheckpointError, match="no such run directory or checkpoint file") as e:
        restore(tmp_path / "nothing")
    assert e.value.exit_code == 2


def test_a_policy_id_never_names_a_path_outside_the_export_directory(tmp_path: Path) -> None:
    """rlrun export of a multi-agent checkpoint writes <out>/<policy id>/: a policy id from a checkpoint's config
    (which rlrun export does not validate as a run does) that is a path is refused before anything is written."""
    assert policy_dir(tmp_path, "learner") == tmp_path / "learner"
    for bad in ("../x", str(tmp_path.parent / "x"), "a/b", "..", "."):
        with pytest.raises(ConfigError, match="not a plain name"):
            policy_dir(tmp_path, bad)
