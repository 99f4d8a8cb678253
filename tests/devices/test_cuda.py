"""The device strategies on a GPU: what tests/devices/test_devices.py proves on the CPU, run on CUDA.

Every test here is marked ``cuda`` and takes the ``accelerator`` fixture: the CUDA device where there is one;
elsewhere the tests skip, except in the GPU kit's dry run (``RLRUN_CUDA_TESTS_ON_CPU=1``, benchmarks/gpu), which runs
them on the CPU so they cannot rot between GPU machines (a CPU run proves the wiring, not the device). On a GPU
machine: ``pytest -m cuda`` (the kit's first stage).

- every algorithm's update on the device equals its CPU update on a fixed batch (the learner benchmark's cases:
  the agent as the run builds it, moved to the device as the run moves it): the first two updates' outputs,
  so the optimizer step in between matched too;
- ``device=cuda`` and ``device=auto`` runs end to end, the agent's parameters on the GPU;
- a device map splitting an agent between the GPU and the CPU acts and updates as the unmapped agent;
- CPU -> GPU copies through pinned memory (``non_blocking``) arrive intact;
- replicas on one GPU give the update of one replica on the whole batch;
- ``device.precision=bf16`` (autocast) updates PPO, IMPALA and APPO close to fp32;
- ``device.compile`` (inductor on a GPU) acts and updates as eager.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from rlrun import spaces as sp
from rlrun.algos.dqn import DQNAgent
from rlrun.algos.dqn_config import DQNConfig
from rlrun.app.run import run_experiment
from rlrun.config import compose
from rlrun.devices import compile_networks, resolve_device
from rlrun.devices.device_map import apply_device_map, move
from rlrun.devices.replicas import ReplicatedUpdate

pytestmark = pytest.mark.cuda

ON_CPU_ENV = "RLRUN_CUDA_TESTS_ON_CPU"  # the GPU kit's dry run sets it (benchmarks/gpu/kit.py)
# A cuDNN convolution may use TF32 (10-bit mantissa) unless told not to: the CPU comparisons need fp32 arithmetic.
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
OBS = sp.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = sp.Discrete(2)
RUN = ["stop.env_steps=512", "logger=none", "export.formats=[]", "checkpoint.at_end=false"]


@pytest.fixture
def accelerator() -> torch.device:
    if torch.cuda.is_available():
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        return torch.device("cuda")
    if os.environ.get(ON_CPU_ENV) == "1":
        return torch.device("cpu")
    pytest.skip(f"needs CUDA (or {ON_CPU_ENV}=1: the GPU kit's dry run on the CPU)")


def cuda_only(device: torch.device) -> None:
    if device.type != "cuda":
        pytest.skip("a CUDA-only path (the dry run on the CPU cannot take it)")


def device_name(device: torch.device) -> str:
    return "cuda" if device.type == "cuda" else "cpu"


# ---------------------------------------------------------------------------------------------- every update


def update_cases() -> list[str]:
    from benchmarks.learner_throughput import ALL_CASES

    return list(ALL_CASES)


@pytest.mark.parametrize("case", update_cases())
def test_every_update_on_the_device_equals_the_cpu_update(case: str, accelerator: torch.device) -> None:
    """The learner benchmark's case ``case`` (DQN, PPO, A2C, TRPO, IMPALA, APPO, Ape-X, SAC): the agent built on the
    CPU with seed 0, then moved to the device; the same batch there; the same random draws (``manual_seed`` seeds
    every device). Two updates: the second's outputs depend on the first's optimizer step."""
    from benchmarks.learner_throughput import make_pair

    cpu, dev = make_pair(case, torch.device("cpu")), make_pair(case, accelerator)
    for step in range(2):
        torch.manual_seed(1000 + step)
        ours = cpu.agent()
        torch.manual_seed(1000 + step)
        theirs = dev.agent()
        for key in cpu.checked:
            a, b = torch.as_tensor(ours[key]), torch.as_tensor(theirs[key])
            assert b.device.type == accelerator.type or b.dim() == 0, f"{case}: {key} was computed on {b.device}"
            torch.testing.assert_close(b.detach().cpu().float(), a.detach().float(), **TOLERANCE,
                                       msg=f"{case}: update {step}: {key}")


# ---------------------------------------------------------------------------------------------- runs


@pytest.mark.parametrize("name", ["cuda", "auto"])
def test_a_run_on_the_device_end_to_end(name: str, accelerator: torch.device, tmp_path: Path) -> None:
    """PPO on CartPole with ``device=cuda`` / ``device=auto``: the run finishes its env steps and its checkpoint
    holds the agent (saved from the device)."""
    if name == "cuda":
        name = device_name(accelerator)
    assert resolve_device(compose([f"device={name}"]).device).type == accelerator.type
    summary = run_experiment(compose(["algo=ppo", "env=cartpole", f"device={name}", *RUN[:-1]]), tmp_path)
    assert summary["env_steps"] >= 512
    assert (tmp_path / "checkpoints" / "latest.pt").is_file()


def test_make_agent_on_the_device_acts_on_numpy_observations(accelerator: torch.device) -> None:
    """``rlrun.make_agent(..., device=cuda)``: the parameters live on the GPU, observations come as numpy arrays
    from the application's env and actions go back as numpy, one per observation."""
    import gymnasium as gym

    from rlrun import make_agent

    env = gym.make("CartPole-v1")
    agent = make_agent("ppo", env.observation_space, env.action_space, device=accelerator)
    assert agent.device.type == accelerator.type
    assert {p.device.type for p in agent.component.parameters()} == {accelerator.type}
    obs = np.stack([env.reset(seed=s)[0] for s in range(3)])
    actions = agent.get_actions(obs, explore=False)
    assert isinstance(actions, np.ndarray) and actions.shape == (3,) and set(actions.tolist()) <= {0, 1}


# ---------------------------------------------------------------------------------------------- device maps


def dqn_agent():  # type: ignore[no-untyped-def]
    """A small DQN agent (MLP [16]) built with seed 0 on the CPU, as tests/devices/test_devices.py builds it."""
    cfg = replace(DQNConfig(), hidden_sizes=[16], buffer_size=64, batch_size=8)
    torch.manual_seed(0)
    return DQNAgent(cfg, 0).build(obs=OBS, actions=ACTIONS)


def fixed_batch(n: int = 12) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"obs": torch.rand(n, 4, generator=g) * 2 - 1, "action": torch.randint(0, 2, (n,), generator=g),
            "reward": torch.randn(n, generator=g), "next_obs": torch.rand(n, 4, generator=g) * 2 - 1,
            "discount": torch.full((n,), 0.99)}


def test_a_device_map_splits_an_agent_and_updates_as_unmapped(accelerator: torch.device) -> None:
    """DQN's online network on the device, its target network and memory on the CPU: acting and one update give
    the all-CPU agent's numbers (data crosses at the API calls between them)."""
    plain, mapped = dqn_agent(), dqn_agent()
    placement = apply_device_map(mapped, {"q": str(accelerator), "target_q": "cpu", "memory": "cpu"})
    assert placement["q.torso"].type == accelerator.type and placement["target_q"].type == "cpu"
    assert {p.device.type for p in mapped.q.parameters()} == {accelerator.type}
    obs = fixed_batch()["obs"]
    torch.testing.assert_close(mapped.get_actions(obs, False).cpu(), plain.get_actions(obs, False))
    a, b = plain.update(fixed_batch()), mapped.update(fixed_batch())
    torch.testing.assert_close(b["loss"].cpu(), a["loss"], **TOLERANCE)
    for (k, p), (_, q) in zip(plain.q.state_dict().items(), mapped.q.state_dict().items(), strict=True):
        torch.testing.assert_close(q.cpu(), p, **TOLERANCE, msg=k)


def test_pinned_non_blocking_copies_arrive_intact(accelerator: torch.device) -> None:
    """A nest of CPU tensors (uint8 frames, floats, int64) moved to the GPU through pinned memory: after the
    stream is synchronised, every value equals its source, dtypes kept."""
    cuda_only(accelerator)
    nest = {"frames": torch.randint(0, 256, (64, 4, 84, 84), dtype=torch.uint8),
            "x": [torch.randn(1000), (torch.arange(10),)]}
    moved = move(nest, accelerator)
    torch.cuda.synchronize()
    assert moved["frames"].device.type == "cuda" and moved["frames"].dtype == torch.uint8
    assert torch.equal(moved["frames"].cpu(), nest["frames"])
    assert torch.equal(moved["x"][0].cpu(), nest["x"][0]) and torch.equal(moved["x"][1][0].cpu(), nest["x"][1][0])


# ---------------------------------------------------------------------------------------------- replicas


def test_replicas_on_one_device_equal_one_replica(accelerator: torch.device) -> None:
    """``device=replicas`` with 2 replicas on one GPU: DQN's update on a batch of 12 split 6 + 6 gives the loss
    and parameters of the whole-batch update."""
    whole, split = dqn_agent().to(accelerator), dqn_agent().to(accelerator)
    split.update_strategy = ReplicatedUpdate(2, None, accelerator.type)
    batch = move(fixed_batch(), accelerator)
    a, b = whole.update(batch), split.update(batch)
    torch.testing.assert_close(b["loss"], a["loss"], **TOLERANCE)
    for (k, p), (_, q) in zip(whole.q.state_dict().items(), split.q.state_dict().items(), strict=True):
        torch.testing.assert_close(q, p, **TOLERANCE, msg=k)


# ---------------------------------------------------------------------------------------------- bf16, compile


@pytest.mark.parametrize("algo", ["ppo", "impala", "appo"])
def test_bf16_updates_close_to_fp32(algo: str, accelerator: torch.device, tmp_path: Path) -> None:
    """``device.precision=bf16``: a short run of each algorithm that takes it learns with finite losses (bf16 keeps
    8 bits of mantissa: the figures are compared with fp32's in the kit's Pong stage, not here)."""
    from rlrun.devices.strategy import cpu_has_bf16

    if accelerator.type == "cpu" and not cpu_has_bf16():
        pytest.skip("this CPU has no bfloat16 instructions (device.precision=bf16 is refused on it)")
    env = ["env=cartpole"] if algo == "ppo" else ["env=cartpole", "algo.batch_size=4", "algo.unroll_length=16"]
    summary = run_experiment(compose([f"algo={algo}", *env, f"device={device_name(accelerator)}",
                                      "device.precision=bf16", *RUN]), tmp_path)
    assert summary["env_steps"] >= 512


def test_compiled_networks_act_and_update_as_eager(accelerator: torch.device) -> None:
    """``device.compile``: DQN's networks under torch.compile (inductor on a GPU; the eager backend in the dry run,
    which checks the tracing alone) give the eager agent's greedy actions, loss and parameters."""
    backend = {"backend": "inductor"} if accelerator.type == "cuda" else {"backend": "eager"}
    eager, compiled = dqn_agent().to(accelerator), dqn_agent().to(accelerator)
    assert compile_networks(compiled, **backend) == ["q", "target_q"]
    obs = move(fixed_batch()["obs"], accelerator)
    torch.testing.assert_close(compiled.get_actions(obs, False), eager.get_actions(obs, False))
    batch = move(fixed_batch(), accelerator)
    a, b = eager.update(batch), compiled.update(batch)
    torch.testing.assert_close(b["loss"], a["loss"], **TOLERANCE)
    for p, q in zip(eager.q.parameters(), compiled.q.parameters(), strict=True):
        torch.testing.assert_close(q, p, **TOLERANCE)


def test_the_config_reaches_the_device(accelerator: torch.device) -> None:
    """What ``rlrun device=cuda`` composes is what resolve_device turns into the GPU (no CPU fallback)."""
    cfg = compose([f"device={device_name(accelerator)}"]).device
    assert OmegaConf.select(cfg, "name") == device_name(accelerator)
    assert resolve_device(cfg).type == accelerator.type
