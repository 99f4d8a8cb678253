"""C51, QR-DQN, noisy nets and Rainbow: each learns CartPole, runs reproducibly, and refuses bad input (a support
with v_min >= v_max, zero atoms or quantiles, a Box action space) with one line and exit 2, as Ape-X's
``algo.distribution`` does (its learning and wiring: tests/algos/test_apex.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import only_summary, run_rlrun

import rlrun
from rlrun import spaces as sp
from rlrun.algos.c51_config import C51Config
from rlrun.app.run import run_experiment
from rlrun.components.distributional_q import DistributionalQNetwork
from rlrun.components.noisy import NoisyLinear
from rlrun.config import compose
from rlrun.errors import ConfigError

QUIET = ["logger=none", "export.formats=[]", "checkpoint.at_end=false"]


# ---------------------------------------------------------------------------------------------- learning
# The schemas' defaults (DQN's CartPole-tuned sizes), without the (algo, env) presets: those are the references'
# settings (CleanRL c51.py, rl-zoo's qrdqn.yml), sized for 500k / 50k env steps, not for a test.


@pytest.mark.parametrize("algo,threshold", [("c51", 195), ("qrdqn", 195), ("rainbow", 150)])
def test_learns_cartpole(tmp_path: Path, algo: str, threshold: int) -> None:
    summary = run_experiment(compose([f"algo={algo}", "~algo_env", f"stop.episode_return_mean={threshold}",
                                      "stop.env_steps=20000", *QUIET]), tmp_path / "run")
    assert summary["stop_reason"] == "episode_return_mean", summary


def _params_after(tmp_path: Path, name: str) -> dict[str, torch.Tensor]:
    from rlrun.checkpoint import load_checkpoint

    run_dir = tmp_path / name
    run_experiment(compose(["algo=rainbow", "~algo_env", "stop.env_steps=600", "algo.learning_starts=200",
                            "logger=none", "export.formats=[]", "seed=5"]), run_dir)
    return load_checkpoint(run_dir / "checkpoints" / "latest.pt")["algo"]["agent"]


def test_same_seed_same_parameters(tmp_path: Path) -> None:
    """Rainbow (noise draws, prioritised sampling, n-step) twice with one seed: the same weights and noise."""
    a, b = _params_after(tmp_path, "a"), _params_after(tmp_path, "b")
    assert a.keys() == b.keys() and any("eps_in" in k for k in a)
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("algo", ["rainbow", "qrdqn"])
def test_cli_run_exports_the_greedy_policy_and_evaluates_from_its_checkpoint(workdir: Path, algo: str) -> None:
    """A short run, then ``rlrun eval`` from the checkpoint: the exported policy is greedy in Q (Rainbow: on the noisy
    layers' mean weights)."""
    run_rlrun([f"algo={algo}", "~algo_env", "stop.env_steps=320", "algo.learning_starts=100", "logger=none"], workdir,
              check=True)
    summary = only_summary(workdir / "outputs")
    assert summary["algo"] == algo and summary["env_steps"] == 320 and summary["error"] is None
    policy = torch.jit.load(summary["export"][0])
    assert policy(torch.zeros(3, 4)).shape == (3,)
    run_dir = Path(summary["run_dir"])
    run_rlrun(["eval", str(run_dir), "--episodes", "2"], workdir, check=True)
    assert len(json.loads((run_dir / "eval.json").read_text())["returns"]) == 2


# ---------------------------------------------------------------------------------------------- composition


OBS = sp.Box(-1.0, 1.0, (4,), np.float32)


def test_rainbow_is_c51_with_every_part_on() -> None:
    agent = rlrun.make_agent("rainbow", OBS, sp.Discrete(2), seed=0, batch_size=4).component
    assert isinstance(agent.q, DistributionalQNetwork) and agent.q.kind == "categorical"
    assert agent.q.head.dueling and any(isinstance(m, NoisyLinear) for m in agent.q.modules())
    assert type(agent.memory).__name__ == "PrioritizedReplayMemory" and agent.n_step.n == 3
    assert agent.loss.double_q and agent.exploration.epsilon() == 0.0


def test_noisy_dqn_explores_by_its_noise_and_acts_greedily_on_the_mean_weights() -> None:
    """algo.noisy=true: epsilon is 0 (no random actions), the noise is redrawn at each gradient step, and acting
    without exploration is greedy in the mean weights."""
    agent = rlrun.make_agent("dqn", OBS, sp.Discrete(2), seed=0, noisy=True, batch_size=4, learning_starts=0,
                             hidden_sizes=[8]).component
    assert agent.exploration.epsilon() == 0.0
    layer = agent.q.head.linear
    assert isinstance(layer, NoisyLinear)
    obs = torch.as_tensor(sp.sample(OBS, (64,), seed=1))
    features = agent.q.torso(obs)
    mean_q = features @ layer.weight_mu.T + layer.bias_mu
    torch.testing.assert_close(agent.get_actions(obs, explore=False), mean_q.argmax(-1))
    rows = np.zeros((8, 4), np.float32)
    agent.observe(rows, np.zeros(8, np.int64), np.ones(8, np.float32), rows, np.zeros(8, bool))
    before = layer.eps_in.clone()
    agent.update()
    assert not torch.equal(before, layer.eps_in)


def test_qrdqn_huber_delta_is_kappa_and_null_is_plain_quantile_regression() -> None:
    def kappa(**keys: float | None) -> float:
        return rlrun.make_agent("qrdqn", OBS, sp.Discrete(2), seed=0, **keys).component.loss.kappa

    assert kappa() == 1.0 and kappa(huber_delta=2.0) == 2.0 and kappa(huber_delta=None) == 0.0


# ---------------------------------------------------------------------------------------------- bad input


def test_schema_refuses_an_empty_support() -> None:
    with pytest.raises(ConfigError, match=r"algo.v_min=1.0, algo.v_max=1.0: the support needs v_min < v_max"):
        C51Config(v_min=1.0, v_max=1.0)
    with pytest.raises(ConfigError, match=r"algo.num_atoms=0: must be"):
        C51Config(num_atoms=0)


@pytest.mark.parametrize("args,says", [
    (["algo=c51", "algo.v_min=10", "algo.v_max=-10"],
     "algo.v_min=10.0, algo.v_max=-10.0: the support needs v_min < v_max"),
    (["algo=rainbow", "algo.num_atoms=0"], "algo.num_atoms=0: must be"),
    (["algo=qrdqn", "algo.num_quantiles=0"], "algo.num_quantiles=0: must be"),
    (["algo=apex", "algo.distribution=categorical", "algo.v_min=10", "algo.v_max=-10"],
     "algo.v_min=10.0, algo.v_max=-10.0: the support needs v_min < v_max"),
    (["algo=apex", "algo.distribution=quantile", "algo.num_quantiles=0"], "algo.num_quantiles=0: must be"),
    (["algo=apex", "algo.distribution=gaussian"], "algo.distribution=gaussian"),
    (["algo=c51", "env=pendulum"], "algo=c51 needs"),
    (["algo=qrdqn", "env=pendulum"], "algo=qrdqn needs"),
])
def test_cli_refuses_bad_input_with_one_line_and_exit_2(workdir: Path, args: list[str], says: str) -> None:
    proc = run_rlrun([*args, "logger=none"], workdir)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
