"""Device strategies (rlrun/devices/: strategy, device_map, replicas, compile), on CPU.

What these tests prove without a GPU, and what they do not:
- Device maps: the mechanism (each API call moves its tensor arguments to its component's device; a mapped
  component's parameters live there; the graph prints the placement) is shown with the ``meta`` device, which is a
  real second torch device on every machine: arguments arriving at a meta-placed API really are meta tensors, and
  handing meta data to a CPU component fails (meta holds no values), which is how we know the move happened at
  the edge and nowhere else. The pinned-memory, non-blocking CPU -> CUDA copy path is NOT exercised here (it
  needs CUDA), nor is any CUDA placement.
- ``device=replicas``: the synchronous data-parallel update with 2-4 replicas equals one replica on the whole
  batch (DQN's update, fixed batch, mean-reduced loss). Replicas run one after another on the CPU; no multi-GPU
  execution is tested.
- ``device.compile``: the wiring (networks compiled with torch.compile's ``eager`` backend give the agent's eager
  actions and update) and the fallback with a warning; the speed-up of the inductor backend is measured in
  benchmarks/device_compile.py, not here.
- ``device.precision=bf16``: on a CPU with bfloat16 instructions (AVX512-BF16 or AMX), PPO learns CartPole with its
  update under autocast; its refusal on a CPU without them (the hardware query replaced: the refusal cannot run
  for real on a machine that has them). Its speed is measured in docs/devices.md, not here.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from rlrun import spaces as sp
from rlrun.algos.dqn import DQNAgent
from rlrun.algos.dqn_config import DQNConfig
from rlrun.app.run import run_experiment
from rlrun.components.base import Component, api
from rlrun.components.graph import graph_text, trace_calls
from rlrun.components.testing import ComponentTest
from rlrun.config import compose
from rlrun.devices import CompiledOrEager, compile_networks, resolve_device
from rlrun.devices.device_map import apply_device_map, component_paths, move
from rlrun.devices.replicas import ReplicatedUpdate, split_batch
from rlrun.devices.strategy import cpu_has_bf16
from rlrun.errors import ConfigError
from rlrun.execution.rollout import Rollout

OBS = sp.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = sp.Discrete(2)
NO_CUDA = not torch.cuda.is_available()


def device_cfg(**kw):  # type: ignore[no-untyped-def]
    """A device node as the CLI makes it: through the schema (which checks its declared ranges and choices)."""
    from rlrun.config import DeviceConfig

    return OmegaConf.structured(DeviceConfig(**kw))


# ---------------------------------------------------------------------------------------------- resolve_device


def test_cpu_and_auto_and_the_log_says_what_auto_chose(caplog: pytest.LogCaptureFixture) -> None:
    assert resolve_device(device_cfg()) == torch.device("cpu")
    with caplog.at_level(logging.INFO, logger="rlrun.devices"):
        chosen = resolve_device(device_cfg(name="auto"))
    assert chosen.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert f"device=auto chose {chosen}" in caplog.text


@pytest.mark.skipif(not NO_CUDA, reason="checks the errors of a machine without CUDA")
@pytest.mark.parametrize("kw, words", [
    ({"name": "cuda"}, ["device=cuda", "CUDA is not available", "device=auto"]),
    ({"name": "cpu", "map": {"q": "cuda"}}, ["device.map.q=cuda", "CUDA is not available"]),
    ({"name": "replicas"}, ["num_replicas=0", "one replica per CUDA device", "Set device.num_replicas"]),
])
def test_what_a_machine_without_cuda_refuses(kw: dict, words: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        resolve_device(device_cfg(**kw))
    for w in words:
        assert w in str(e.value)


def test_bf16_on_a_cpu_without_bfloat16_instructions_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlrun.devices import strategy

    monkeypatch.setattr(strategy, "cpu_has_bf16", lambda: False)
    with pytest.raises(ConfigError) as e:
        resolve_device(device_cfg(name="cpu", precision="bf16"))
    for w in ("device.precision=bf16", "AVX512-BF16 or AMX", "device.precision=fp32"):
        assert w in str(e.value)
    assert resolve_device(device_cfg(name="cpu")) == torch.device("cpu")  # fp32 needs nothing


def dtypes_in_a_training_step(overrides: list[str], steps: int = 1) -> tuple[Any, list[tuple[str, torch.dtype]]]:
    """``(algorithm, [(where, dtype), ...])``: the plan of ``rlrun <overrides>`` built and its device strategy
    applied as run_experiment does, then ``steps`` training steps, recording the dtype of the torso's output
    (acting and update) and of the heads' outputs."""
    from rlrun.app.run import build_plan, seed_everything
    from rlrun.devices import apply_device_strategy
    from rlrun.registry import registry

    cfg = compose([*overrides, "logger=none"])
    seed_everything(0)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, 0)
    algo = build_plan(OmegaConf.to_object(cfg.algo), env_factory, executor, resolve_device(cfg.device), 0)
    apply_device_strategy(cfg.device, algo)
    dtypes: list[tuple[str, torch.dtype]] = []
    algo.agent.network.torso.register_forward_hook(lambda m, a, out: dtypes.append(("torso", out.dtype)))
    head = algo.agent.network.head

    def recorded(call):  # noqa: ANN001, ANN202 - a head's API method, wrapped to record its output's dtype
        def port(x: torch.Tensor) -> torch.Tensor:
            out = call(x)
            dtypes.append(("head", out.dtype))
            return out
        return port

    head.get_policy, head.get_value = recorded(head.get_policy), recorded(head.get_value)
    try:
        for _ in range(steps):
            algo.training_step()
    finally:
        executor.stop()
    return algo, dtypes


@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no bfloat16 instructions (AVX512-BF16 or AMX)")
def test_bf16_on_a_cpu_with_bfloat16_instructions_learns_cartpole(tmp_path: Path) -> None:
    """device.precision=bf16 on the CPU: PPO's update runs under bfloat16 autocast (the torso's features are bf16
    in the update, float32 when acting; the heads' outputs float32) and the run learns CartPole as test_ppo's fp32
    run does (seeded: mean return >= 195 over 20 episodes within 40k env steps)."""
    _, dtypes = dtypes_in_a_training_step(["algo=ppo", "device.precision=bf16", "executor.num_envs=2",
                                           "algo.rollout_steps=16"])
    assert ("torso", torch.bfloat16) in dtypes and ("torso", torch.float32) in dtypes  # update, acting
    assert {d for name, d in dtypes if name == "head"} == {torch.float32}
    _, full = dtypes_in_a_training_step(["algo=ppo", "executor.num_envs=2", "algo.rollout_steps=16"])
    assert {d for _, d in full} == {torch.float32}

    cfg = compose(["algo=ppo", "device.precision=bf16", "executor.num_envs=8", "seed=0", "stop.env_steps=40000",
                   "stop.episode_return_mean=195", "logger=none", "export.formats=[]", "checkpoint.at_end=false"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary
    assert summary["episode_return_mean"] >= 195


@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no bfloat16 instructions (AVX512-BF16 or AMX)")
@pytest.mark.parametrize("algo", ["impala", "appo"])
def test_bf16_reaches_impala_and_appo_through_their_gradient_step(algo: str) -> None:
    """IMPALA and APPO (V-trace over whole unrolls: no replica shards) declare ``autocasts_updates``: bf16 is their
    gradient step's autocast (the torso in bf16 inside the update, the heads in float32); device=replicas is
    refused for them with a message that says bf16 is available."""
    from rlrun.devices import apply_device_strategy

    plan, dtypes = dtypes_in_a_training_step([f"algo={algo}", "device.precision=bf16", "executor.num_envs=2",
                                              "algo.unroll_length=8", "algo.batch_size=2"], steps=2)
    assert plan.agent.update_autocast == ("cpu", torch.bfloat16)
    assert ("torso", torch.bfloat16) in dtypes and ("torso", torch.float32) in dtypes  # update, acting
    assert {d for name, d in dtypes if name == "head"} == {torch.float32}
    replicas = compose([f"algo={algo}", "device=replicas", "device.num_replicas=2"]).device
    with pytest.raises(ConfigError, match=r"so device=replicas is not available for it \(replicas are for algo=a2c, "
                                          r"apex, c51, dqn, ppo, pqn, qrdqn, rainbow; bf16 also for algo=appo, "
                                          r"impala\)"):
        apply_device_strategy(replicas, plan)


@pytest.mark.parametrize("kw, words", [
    ({"name": "tpu"}, ["device.name=tpu", "cpu, cuda, auto, replicas"]),
    ({"precision": "fp8"}, ["device.precision=fp8", "fp32, bf16"]),
    ({"map": {"q": "gpu0"}}, ["device.map.q=gpu0", "not a torch device"]),
    ({"name": "replicas", "num_replicas": -1}, ["device.num_replicas=-1"]),
])
def test_bad_device_settings_are_config_errors(kw: dict, words: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        resolve_device(device_cfg(**kw))
    for w in words:
        assert w in str(e.value)


# ---------------------------------------------------------------------------------------------- move + device map


def test_move_moves_every_tensor_of_a_nest_and_keeps_dtypes() -> None:
    """Tensors (nested in dicts, lists, tuples) go to the target device with their dtype; a tensor already there is
    the same object (no copy); numpy arrays and other leaves are untouched."""
    a, b = torch.ones(2, dtype=torch.uint8), torch.zeros(3, dtype=torch.float64)
    arr = np.ones(2)
    out = move({"a": a, "rest": [b, (arr, 3)]}, torch.device("meta"))
    assert out["a"].device.type == "meta" and out["a"].dtype == torch.uint8 and out["a"].shape == (2,)
    assert out["rest"][0].device.type == "meta" and out["rest"][0].dtype == torch.float64
    assert out["rest"][1][0] is arr and out["rest"][1][1] == 3
    same = move({"a": a}, torch.device("cpu"))
    assert same["a"] is a


def test_move_moves_the_fields_of_a_rollout_and_passes_a_config_on() -> None:
    """A learner's rollout (a dataclass of tensors, as a mapped agent's update gets it) arrives as a copy with every
    field moved, its observation nests and extras too; a dataclass without tensors (a config) is the same object."""
    T, B = 2, 3
    obs = {"x": torch.zeros(T, B, 4)}
    rollout = Rollout(obs=obs, last_obs={"x": torch.zeros(B, 4)}, final_obs={"x": torch.zeros(0, 4)},
                      final_index=torch.zeros(0, dtype=torch.int64), actions=torch.zeros(T, B, dtype=torch.int64),
                      rewards=torch.zeros(T, B), terminated=torch.zeros(T, B, dtype=torch.bool),
                      truncated=torch.zeros(T, B, dtype=torch.bool), extras={"log_prob": torch.zeros(T, B)})
    out = move(rollout, torch.device("meta"))
    assert isinstance(out, Rollout) and out is not rollout and rollout.obs["x"].device.type == "cpu"
    leaves = [out.obs["x"], out.last_obs["x"], out.final_obs["x"], out.final_index, out.actions, out.rewards,
              out.terminated, out.truncated, out.extras["log_prob"]]
    assert {t.device.type for t in leaves} == {"meta"} and out.final_index.dtype == torch.int64
    cfg = DQNConfig()
    assert move(cfg, torch.device("meta")) is cfg


class Probe(Component):
    """Test component: ``forward(x) = x + bias``, recording the device of each ``x`` it is given."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.seen: list[torch.device] = []

    def _build(self, x: sp.Space) -> None:
        self.bias = torch.nn.Parameter(torch.ones(sp.shape(x)))
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, sp.shape(x), np.float32)

    @api
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(x.device)
        return x + self.bias


class TwoStages(Component):
    """Test component: ``second(first(x))``."""

    def __init__(self) -> None:
        super().__init__("two_stages")
        self.first, self.second = Probe("first"), Probe("second")

    def _build(self, x: sp.Space) -> None:
        self.build_child(self.first, x=x)
        self.build_child(self.second, x=self.first.output("forward"))
        self.output_spaces["forward"] = self.second.output_spaces["forward"]

    @api
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


def built_two_stages() -> TwoStages:
    test = ComponentTest(TwoStages(), {"x": OBS}, batch_shape=(3,))
    test.call("forward")  # unmapped: everything on the CPU
    assert test.component.first.seen == [torch.device("cpu")] == test.component.second.seen
    return test.component  # type: ignore[return-value]


def test_a_component_placed_on_another_device_gets_its_arguments_there() -> None:
    """Map {second: meta}: the parent (cpu) passes first's CPU output to second, which receives it on meta and
    computes there (its bias is meta); the result is meta-shaped [3, 4]. The graph prints the placement."""
    c = built_two_stages()
    placement = apply_device_map(c, {"second": "meta"})
    assert placement == {"two_stages": torch.device("cpu"), "first": torch.device("cpu"),
                         "second": torch.device("meta")}
    assert c.second.bias.device.type == "meta" and c.first.bias.device.type == "cpu"
    out = c(torch.zeros(3, 4))
    assert c.first.seen[-1].type == "cpu" and c.second.seen[-1].type == "meta"
    assert out.device.type == "meta" and out.shape == (3, 4)
    text = graph_text(c)
    assert "second [Probe] on meta" in text and "first [Probe] on cpu" in text


def test_data_crosses_back_at_the_edge_and_meta_cannot_hand_over_values() -> None:
    """Map {first: meta}: first computes on meta; the call into second (cpu) tries to move first's meta output to
    the CPU, which fails (a meta tensor has no data): the move happens at that API edge."""
    c = built_two_stages()
    apply_device_map(c, {"first": "meta"})
    with pytest.raises((NotImplementedError, RuntimeError), match="meta"):
        c(torch.zeros(3, 4))
    assert c.first.seen[-1].type == "meta"
    assert len(c.second.seen) == 1  # never reached with the meta data


def dqn_agent(seed: int = 0, **kw) -> DQNAgent:  # type: ignore[no-untyped-def]
    cfg = replace(DQNConfig(), hidden_sizes=[16], buffer_size=64, batch_size=8, **kw)
    torch.manual_seed(seed)  # the networks' initial parameters
    return DQNAgent(cfg, seed).build(obs=OBS, actions=ACTIONS)


def fixed_batch(n: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.rand(n, 4, generator=g) * 2 - 1, "action": torch.randint(0, 2, (n,), generator=g),
            "reward": torch.randn(n, generator=g), "next_obs": torch.rand(n, 4, generator=g) * 2 - 1,
            "discount": torch.full((n,), 0.99)}


def test_an_unknown_component_name_lists_the_valid_ones() -> None:
    agent = dqn_agent()
    with pytest.raises(ConfigError) as e:
        apply_device_map(agent, {"replay": "cpu"})
    msg = str(e.value)
    assert "no component named 'replay'" in msg
    for name in ("memory", "q", "q.torso", "target_q", "exploration", "target_sync"):
        assert name in msg
    assert set(component_paths(agent)) >= {"q", "q.torso", "q.q_head", "target_q.torso", "memory"}


def test_a_mapped_agent_is_traced_as_an_unmapped_one() -> None:
    """The placement wrappers call the class's API methods at each call, so a trace (rlrun graph, ComponentTest)
    records a mapped agent's calls as an unmapped one's."""
    plain, mapped = dqn_agent(), dqn_agent()
    apply_device_map(mapped, {"q": "cpu", "exploration": "cpu"})
    obs = fixed_batch()["obs"]
    calls = [[(c.caller, c.callee, c.method) for c in trace_calls(lambda a=a: a.get_actions(obs, explore=False))[1]]
             for a in (plain, mapped)]
    assert calls[0] == calls[1] and ("dqn_agent", "q", "forward") in calls[0]


def test_a_dqn_agent_with_a_device_map_updates_as_without() -> None:
    """Every API of the mapped agent goes through the moving wrappers (all moves are no-ops on one CPU), so
    acting and one update give exactly the unmapped agent's numbers; dotted paths and bare names both place."""
    plain, mapped = dqn_agent(), dqn_agent()
    placement = apply_device_map(mapped, {"memory": "cpu", "q": "cpu", "target_q.torso": "cpu"})
    assert placement["q.torso"] == torch.device("cpu") and "_Placed" in type(mapped.__dict__["update"]).__name__
    obs = fixed_batch()["obs"]
    torch.testing.assert_close(mapped.get_actions(obs, False), plain.get_actions(obs, False), rtol=0, atol=0)
    batch = fixed_batch()
    a, b = plain.update(batch), mapped.update(batch)
    torch.testing.assert_close(b["loss"], a["loss"], rtol=0, atol=0)
    for (k, p), (_, q) in zip(plain.q.state_dict().items(), mapped.q.state_dict().items(), strict=True):
        torch.testing.assert_close(q, p, rtol=0, atol=0, msg=k)


# ---------------------------------------------------------------------------------------------- replicas


def test_split_batch_cuts_every_leaf_alike() -> None:
    """A batch of 5 in 2 shards: rows [0, 1, 2] and [3, 4] of every tensor and array; None stays None."""
    batch = ({"x": torch.arange(5), "y": np.arange(5) * 10}, None)
    shards = split_batch(batch, 2)
    assert shards[0][0]["x"].tolist() == [0, 1, 2] and shards[1][0]["x"].tolist() == [3, 4]
    assert shards[1][0]["y"].tolist() == [30, 40] and shards[0][1] is None and shards[1][1] is None


@pytest.mark.parametrize("num_replicas", [2, 3, 5])
@pytest.mark.parametrize("max_grad_norm", [None, 0.01])
def test_replicas_give_the_update_of_one_replica_on_the_whole_batch(num_replicas: int,
                                                                    max_grad_norm: float | None) -> None:
    """One DQN update on a fixed batch of 12 (mean-reduced Huber loss): split across ``num_replicas`` replicas
    (shards of 6+6, 4+4+4, or the unequal 3+3+2+2+2, each gradient weighted by its share n_i/12) it gives the same
    loss, TD errors, parameters after the Adam step (with and without gradient clipping, where 0.01 clips
    always) as the plain update on the whole batch."""
    whole, split = dqn_agent(max_grad_norm=max_grad_norm), dqn_agent(max_grad_norm=max_grad_norm)
    split.update_strategy = ReplicatedUpdate(num_replicas)
    batch = fixed_batch()
    a, b = whole.update(batch), split.update(batch)
    torch.testing.assert_close(b["loss"], a["loss"])
    torch.testing.assert_close(b["td_error"], a["td_error"])
    if max_grad_norm is not None:
        torch.testing.assert_close(b["grad_norm"], a["grad_norm"])
        assert float(a["grad_norm"]) > max_grad_norm
    moved = 0.0
    for (k, p), (_, q) in zip(whole.q.state_dict().items(), split.q.state_dict().items(), strict=True):
        torch.testing.assert_close(q, p, msg=k)
    for p, q in zip(whole.q.parameters(), dqn_agent(max_grad_norm=max_grad_norm).q.parameters(), strict=True):
        moved += float((p - q).detach().abs().sum())
    assert moved > 0  # the step did change the parameters


def test_more_replicas_than_rows_is_refused() -> None:
    agent = dqn_agent()
    agent.update_strategy = ReplicatedUpdate(4)
    with pytest.raises(ValueError, match="batch of 3 cannot be split across 4 replicas"):
        agent.update(fixed_batch(3))


# ---------------------------------------------------------------------------------------------- compile


def test_compiled_networks_act_and_update_as_eager() -> None:
    """torch.compile (eager backend: dynamo's graph capture without code generation, fast enough for a test)
    on q and target_q: greedy actions, loss and parameters after one update equal the eager agent's."""
    eager, compiled = dqn_agent(), dqn_agent()
    assert compile_networks(compiled, backend="eager") == ["q", "target_q"]
    assert isinstance(compiled.q.__dict__["forward"], CompiledOrEager)
    obs = fixed_batch()["obs"]
    torch.testing.assert_close(compiled.get_actions(obs, False), eager.get_actions(obs, False), rtol=0, atol=0)
    batch = fixed_batch()
    a, b = eager.update(batch), compiled.update(batch)
    torch.testing.assert_close(b["loss"], a["loss"])
    for p, q in zip(eager.q.parameters(), compiled.q.parameters(), strict=True):
        torch.testing.assert_close(q, p)


def test_compile_falls_back_to_eager_with_a_warning() -> None:
    """A backend torch.compile cannot use stands in for an unsupported platform: the warning names the function,
    and the eager result comes back (2 * 3 = 6)."""
    with pytest.warns(RuntimeWarning, match="torch.compile of double is not supported here"):
        fn = CompiledOrEager(lambda x: 2 * x, "double", backend="no_such_backend")
        assert int(fn(torch.tensor(3))) == 6
    assert fn.compiled is None
    assert int(fn(torch.tensor(4))) == 8


# ---------------------------------------------------------------------------------------------- runs


RUN = ["stop.env_steps=300", "algo.learning_starts=100", "logger=none", "export.formats=[]",
       "checkpoint.at_end=false"]


def test_a_run_with_replicas_and_a_device_map(tmp_path: Path) -> None:
    """device=replicas (2 CPU replicas) with a device map runs DQN end to end."""
    summary = run_experiment(compose(RUN + ["device=replicas", "device.num_replicas=2",
                                            "+device.map={memory: cpu, q: cpu}"]), tmp_path / "run")
    assert summary["env_steps"] >= 300


def test_replicas_for_an_agent_without_the_update_hook_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"does not route its update through the device strategy, so device=replicas "
                                          r"and device.precision=bf16 are not available for it \(replicas are for "
                                          r"algo=a2c, apex, c51, dqn, ppo, pqn, qrdqn, rainbow; bf16 also for "
                                          r"algo=appo, impala\)"):
        run_experiment(compose(["algo=trpo", "device=replicas", "device.num_replicas=2", "stop.env_steps=300",
                                "logger=none", "export.formats=[]"]), tmp_path / "run")


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_replicas_give_ppo_and_a2c_the_update_of_one_replica(algo: str) -> None:
    """PPO (every minibatch step of its epochs) and A2C (its one step) through ReplicatedUpdate(3): the parameters
    and optimizer moments after an update on a fixed rollout equal the plain update's within float tolerance
    (advantage normalisation off: with it each replica normalises its own shard, as RLlib's towers do)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from algos.test_ppo import _random_rollout, build_algo

    overrides = [f"algo={algo}", "algo.hidden_sizes=[8]", "algo.normalize_advantage=false", "executor.num_envs=2"]
    if algo == "ppo":
        overrides += ["algo.minibatch_size=16", "algo.num_epochs=2"]
    plain, split = build_algo(overrides, seed=0), build_algo(overrides, seed=0)
    try:
        split.agent.update_strategy = ReplicatedUpdate(3)
        rollout = _random_rollout(plain.agent, T=8, B=4, seed=2)
        a, b = plain.agent.update(rollout), split.agent.update(rollout)
        torch.testing.assert_close(float(a["loss"]), float(b["loss"]), rtol=1e-5, atol=1e-6)
        for (name, p), q in zip(plain.agent.network.named_parameters(), split.agent.network.parameters(),
                                 strict=True):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)
        fresh = build_algo(overrides, seed=0)  # the update moved the parameters
        assert any(not torch.equal(p, q) for p, q in zip(fresh.agent.network.parameters(),
                                                          plain.agent.network.parameters(), strict=True))
        fresh.stop()
    finally:
        plain.stop()
        split.stop()


def test_a_ppo_run_with_replicas(tmp_path: Path) -> None:
    summary = run_experiment(compose(["algo=ppo", "executor.num_envs=2", "device=replicas", "device.num_replicas=2",
                                      "stop.env_steps=256", "logger=none", "export.formats=[]"]), tmp_path / "run")
    assert summary["stop_reason"] == "env_steps" and summary["env_steps"] >= 256


def test_a_bad_map_name_fails_the_run_listing_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no component named 'replay'.*Valid names: .*memory"):
        run_experiment(compose(RUN + ["+device.map={replay: cpu}"]), tmp_path / "run")
