"""The Ray executor on a cluster of several nodes on this machine, as Ray's own tests make one
(``ray.cluster_utils.Cluster``: a head and a worker node, each its own raylet and object store on 127.0.0.1):
where ``executor.placement`` puts the workers, and which of their rollouts take the shared-memory path."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from rlrun.config import RayExecutorConfig
from rlrun.envs.gym_env import GymEnvFactory

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def two_nodes():  # noqa: ANN201
    """A head node (the driver's) and a worker node, 2 CPUs each."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def cartpole() -> GymEnvFactory:
    return GymEnvFactory(OmegaConf.create({"name": "gym", "id": "CartPole-v1", "max_episode_steps": None,
                                           "frame_skip": 1, "kwargs": {}}))


class Uniform(torch.nn.Module):
    """Acts uniformly at random (2 actions); a module, so its (empty) weights travel as any policy's do."""

    def get_actions(self, obs, explore=True):  # noqa: ANN001, ANN201
        return torch.randint(0, 2, (obs.shape[0],))


@pytest.mark.parametrize("placement, on_driver_node", [("spread", 1), ("pack", 2)])
def test_placement_puts_the_workers_and_only_remote_ones_use_the_object_store(two_nodes, placement: str,
                                                                              on_driver_node: int) -> None:
    """spread: one worker per node; pack: both on the driver's node. A worker there lends its rollouts through
    shared memory, one on the other node through the object store."""
    import ray.cloudpickle

    from rlrun.execution.ray_executor import RayExecutor

    ray.cloudpickle.register_pickle_by_value(__import__(__name__))
    cfg = OmegaConf.structured(RayExecutorConfig(num_workers=2, num_envs_per_worker=2, placement=placement))
    executor = RayExecutor(cfg, cartpole(), seed=0)
    try:
        ws = executor.worker_set(Uniform())
        batches = ws.sample(8)
        assert [b.obs.shape for b in batches] == [(9, 2, 4), (9, 2, 4)]
        assert all(np.isfinite(b.obs).all() for b in batches)
        on = ray.get([a.node_id.remote() for a in ws.actors])
        here = ray.get_runtime_context().get_node_id()
        assert sum(node == here for node in on) == on_driver_node
        assert list(ws._on_this_node) == [node == here for node in on]
    finally:
        executor.stop()


# ---------------------------------------------------------------------------------------------------- node loss

FAST_HEALTH_CHECKS = {"health_check_period_ms": 500, "health_check_failure_threshold": 3,
                      "health_check_initial_delay_ms": 0}


def one_cpu_nodes(worker_nodes: int, **head_args):  # noqa: ANN003, ANN201
    """A head node (the driver's) and ``worker_nodes`` worker nodes, 1 CPU each; the driver connected to it."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False, **head_args})
    for _ in range(worker_nodes):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture
def three_nodes():  # noqa: ANN201
    """A head node (the driver's) and two worker nodes, 1 CPU each; a node's death is noticed within ~1.5 s."""
    yield from one_cpu_nodes(2, _system_config=FAST_HEALTH_CHECKS)


LOSS = {}  # the running test's cluster and what its plan saw; read through sys.modules, so never pickled


def node_losing_dqn():  # noqa: ANN201
    """DQN whose plan, at iteration 4, removes (kills the raylet of) a worker node hosting a rollout worker. The
    class travels to the workers by value (its policy factory): it reaches the cluster through ``sys.modules``."""
    import sys

    from rlrun.algos.dqn import DQN

    class NodeLosingDQN(DQN):
        def training_step(self):  # noqa: ANN202
            loss = sys.modules[type(self).__module__].LOSS
            loss["iterations"] = loss.get("iterations", 0) + 1
            if "cluster" not in loss:  # a resumed run: nothing to remove
                return super().training_step()
            if loss["iterations"] != 5:  # the 5th meets the dead worker: the plan's own request must find it
                loss.setdefault("nodes", []).append(ray.get([a.node_id.remote() for a in self.workers.actors]))
            if loss["iterations"] == 4:
                nodes, head = loss["nodes"][-1], ray.get_runtime_context().get_node_id()
                victim = next(n for n in loss["cluster"].worker_nodes if n.node_id in nodes and n.node_id != head)
                loss["removed"] = victim.node_id
                loss["cluster"].remove_node(victim, allow_graceful=False)
                deadline = time.monotonic() + 30  # until the cluster has noticed (health checks every 0.5 s)
                while any(n["NodeID"] == victim.node_id and n["Alive"] for n in ray.nodes()):
                    assert time.monotonic() < deadline, "the removed node still looks alive after 30 s"
                    time.sleep(0.1)
            return super().training_step()

    return NodeLosingDQN


def run_losing_a_node(tmp_path, cluster, extra: list[str]):  # noqa: ANN001, ANN201
    import ray.cloudpickle

    from rlrun.app.run import run_experiment
    from rlrun.config import compose
    from rlrun.registry import registry

    ray.cloudpickle.register_pickle_by_value(__import__(__name__))
    LOSS.clear()
    LOSS["cluster"] = cluster
    registry.register("algo", "dqn_node_loss_test", node_losing_dqn(), schema=registry.schema("algo", "dqn"),
                      replace=True)
    try:
        cfg = compose(["executor=ray", "executor.num_workers=2", "executor.placement=spread", "stop.env_steps=320",
                       "algo.learning_starts=32", "algo.rollout_steps=16", "export.formats=[]", "logger=none",
                       "logger.console.enabled=false", "logger.tensorboard.enabled=true", *extra])
        cfg.algo.name = "dqn_node_loss_test"
        try:
            summary = run_experiment(cfg, tmp_path, overrides=[])
        except Exception as e:  # noqa: BLE001 - the test reads summary.json either way
            summary = {"raised": e, **__import__("json").loads((tmp_path / "summary.json").read_text())}
    finally:
        registry._entries["algo"].pop("dqn_node_loss_test", None)
        LOSS.pop("cluster", None)
    return summary, LOSS


def test_a_removed_node_s_worker_is_recreated_on_a_surviving_node_and_the_run_finishes(tmp_path, three_nodes) -> None:
    """spread puts the 2 workers on 2 of the 3 nodes; killing a worker node's raylet at iteration 4 kills its
    worker, which comes back on the node that had room; the run reaches its stop condition and the metrics count
    one restart and the rollout lost with it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    summary, seen = run_losing_a_node(tmp_path, three_nodes, [])
    assert summary["stop_reason"] == "env_steps" and summary["env_steps"] == 320, summary
    before, after = seen["nodes"][3], seen["nodes"][4]  # at iterations 4 and 6
    assert seen["removed"] in before and seen["removed"] not in after
    assert len(set(after)) == 2  # still one worker per node: the replacement went to the node that had room
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert events.Scalars("executor/worker_restarts")[-1].value == 1
    assert events.Scalars("executor/lost_env_steps")[-1].value == 16  # one request: 16 steps x 1 env copy


def test_no_room_for_a_replacement_stops_with_a_clear_error_and_a_final_checkpoint(tmp_path, three_nodes) -> None:
    """3 workers of 1 CPU fill the 3 nodes; once a node is gone no node has room for its worker's replacement: the
    run stops after executor.restart_timeout_s with one clear error, stop_reason error and a final checkpoint of the
    learner at the step it reached, which a later run resumes from."""
    import torch

    from rlrun.errors import PlacementError

    summary, seen = run_losing_a_node(tmp_path, three_nodes, ["executor.num_workers=3",
                                                              "executor.restart_timeout_s=3"])
    assert isinstance(summary["raised"], PlacementError)
    message = str(summary["raised"])
    assert "rollout worker" in message and "could not be started again within executor.restart_timeout_s=3" in message
    assert "needs 1 CPU(s) and the cluster has 0 free of 2 on 2 live node(s)" in message
    assert "saved" in message and "rlrun resume=" in message
    assert summary["stop_reason"] == "error" and "restart_timeout_s" in summary["error"]
    state = torch.load(tmp_path / "checkpoints" / "latest.pt", weights_only=False)
    assert state["workers_lost"] is True and state["executor"] is None and state["replay_included"] is False
    assert state["loop"]["env_steps"] == summary["env_steps"] >= 3 * 3 * 16  # iterations 1-3 done (3 workers x 16)

    # A node joins again; the run resumes from that checkpoint (not exactly: fresh env copies) and finishes.
    from rlrun.app.run import run_experiment
    from rlrun.config import compose
    from rlrun.registry import registry

    three_nodes.add_node(num_cpus=1)
    three_nodes.wait_for_nodes()
    registry.register("algo", "dqn_node_loss_test", node_losing_dqn(), schema=registry.schema("algo", "dqn"),
                      replace=True)
    try:
        overrides = [f"resume={tmp_path}", "stop.env_steps=480"]
        resumed = run_experiment(compose(overrides), tmp_path, overrides=overrides)
    finally:
        registry._entries["algo"].pop("dqn_node_loss_test", None)
    assert resumed["stop_reason"] == "env_steps" and resumed["env_steps"] == 480


# ---------------------------------------------------------------------------------------------------- replay shards


def make_memory(shard_index: int):  # noqa: ANN201
    from rlrun import spaces as sp
    from rlrun.components.prioritized_replay import PrioritizedReplayMemory

    records = sp.Dict({"x": sp.Box(-np.inf, np.inf, (2,), np.float32)})
    return PrioritizedReplayMemory(16, alpha=0.5, beta_start=0.4, beta_end=0.4, eps=1e-6,
                                   seed=shard_index).build(records=records)


def shard_nodes(shards) -> list[str]:  # noqa: ANN001
    return ray.get([a.node_id.remote() for a in shards.actors])


def test_replay_shards_go_to_nodes_other_than_the_learner_s_and_come_back_after_a_node_dies(three_nodes) -> None:
    """Two shards (0 CPUs each) on a head (the driver's, the learner's) and two worker nodes: neither on the head.
    The node of one dies: its shard comes back (empty, counted) on a node that is alive, the other keeps its
    records, and adds and samples go on."""
    import ray.cloudpickle

    from rlrun.execution.ray_executor import RayExecutor

    ray.cloudpickle.register_pickle_by_value(__import__(__name__))
    executor = RayExecutor(OmegaConf.structured(RayExecutorConfig(num_workers=1)), cartpole(), seed=0)
    try:
        shards = executor.replay_shards(make_memory, 2)
        head = ray.get_runtime_context().get_node_id()
        before = shard_nodes(shards)
        assert head not in before and len(set(before)) == 2  # one on each worker node
        for i in range(4):
            shards.add({"records": {"x": np.full((3, 2), i, np.float32)}, "priorities": None}, shard=i % 2)
        shards.flush()
        assert shards.shard_sizes() == [6, 6]
        victim = next(n for n in three_nodes.worker_nodes if n.node_id == before[0])
        three_nodes.remove_node(victim, allow_graceful=False)
        deadline = time.monotonic() + 30
        while any(n["NodeID"] == victim.node_id and n["Alive"] for n in ray.nodes()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        shards.shard_pids()  # a call to every shard: the dead one is found and replaced
        after = shard_nodes(shards)
        assert executor.replay_restarts == 1 and victim.node_id not in after and after[1] == before[1]
        shards.add({"records": {"x": np.zeros((3, 2), np.float32)}, "priorities": None}, shard=1)
        shards.flush()
        assert shards.shard_sizes() == [0, 9]
        samples, shard = shards.sample(4)  # only shard 1 has records
        assert shard == 1 and samples is not None
    finally:
        executor.stop()


@pytest.fixture
def head_and_one_node():  # noqa: ANN201
    """A head node (the driver's) and one worker node, 1 CPU each, with Ray's default health checks: a node that
    is gone still looks alive for seconds, as on a real cluster."""
    yield from one_cpu_nodes(1)


def test_shards_of_a_node_that_is_going_come_back_on_the_driver_s_node(head_and_one_node) -> None:
    """Both shards on the only worker node; the node killed and the shards called at once, while Ray still lists
    it as alive: each replacement avoids the node its shard died on and, no other node being left, starts on the
    driver's node (pinned to the dying node, it was cancelled: ActorDiedError, the run's end)."""
    import ray.cloudpickle

    from rlrun.execution.ray_executor import RayExecutor

    ray.cloudpickle.register_pickle_by_value(__import__(__name__))
    executor = RayExecutor(OmegaConf.structured(RayExecutorConfig(num_workers=1)), cartpole(), seed=0)
    try:
        shards = executor.replay_shards(make_memory, 2)
        head = ray.get_runtime_context().get_node_id()
        (victim,) = head_and_one_node.worker_nodes
        assert shard_nodes(shards) == [victim.node_id, victim.node_id]
        head_and_one_node.remove_node(victim, allow_graceful=False)
        deadline = time.monotonic() + 60
        for actor in shards.actors:  # until the shards' processes have gone with their raylet
            while True:
                try:
                    ray.get(actor.pid.remote(), timeout=10)
                except ray.exceptions.RayActorError:
                    break
                assert time.monotonic() < deadline, "a shard outlived its node's raylet by a minute"
        assert any(n["NodeID"] == victim.node_id and n["Alive"] for n in ray.nodes())  # not noticed yet
        shards.shard_pids()  # a call to every shard: both dead, both replaced
        assert shard_nodes(shards) == [head, head] and executor.replay_restarts == 2
        shards.add({"records": {"x": np.zeros((3, 2), np.float32)}, "priorities": None}, shard=0)
        shards.flush()
        assert shards.shard_sizes() == [3, 0]
    finally:
        executor.stop()


def slow_memory(markers: str, shard_index: int):  # noqa: ANN201
    """make_memory, after saying the shard's process has started (a file named by its pid in ``markers``) and
    waiting there, so the test can take the node away while the shard is still being built; once ``markers/done``
    exists (the replacements) it is quick."""
    import os
    from pathlib import Path

    if not (Path(markers) / "done").exists():
        (Path(markers) / f"{os.getpid()}").touch()
        time.sleep(20)
    return make_memory(shard_index)


@pytest.fixture
def head_and_one_node_fast():  # noqa: ANN201
    """head_and_one_node, with a node's death noticed within ~1.5 s."""
    yield from one_cpu_nodes(1, _system_config=FAST_HEALTH_CHECKS)


def test_shards_whose_node_is_lost_while_they_start_come_back_on_the_driver_s_node(head_and_one_node_fast,
                                                                                   tmp_path) -> None:
    """Both shards start on the only worker node and are still being built when that node is removed: the shard
    set does not fail ("a replay shard could not start") but replaces both, counted, on the driver's node."""
    import functools
    import threading

    import ray.cloudpickle

    from rlrun.execution.ray_executor import RayExecutor

    ray.cloudpickle.register_pickle_by_value(__import__(__name__))
    markers = tmp_path / "markers"  # the nodes are processes of this machine: they see the test's tmp_path
    markers.mkdir()
    executor = RayExecutor(OmegaConf.structured(RayExecutorConfig(num_workers=1)), cartpole(), seed=0)
    (victim,) = head_and_one_node_fast.worker_nodes

    def remove_once_building() -> None:
        deadline = time.monotonic() + 60
        while len(list(markers.glob("[0-9]*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        (markers / "done").touch()  # replacements build at once
        head_and_one_node_fast.remove_node(victim, allow_graceful=False)

    remover = threading.Thread(target=remove_once_building)
    remover.start()
    try:
        shards = executor.replay_shards(functools.partial(slow_memory, str(markers)), 2)
        remover.join()
        head = ray.get_runtime_context().get_node_id()
        assert len(list(markers.glob("[0-9]*"))) == 2  # both were being built on the node when it went
        assert shard_nodes(shards) == [head, head] and executor.replay_restarts == 2
        shards.add({"records": {"x": np.zeros((3, 2), np.float32)}, "priorities": None}, shard=1)
        shards.flush()
        assert shards.shard_sizes() == [0, 3]
    finally:
        remover.join()
        executor.stop()


# ---------------------------------------------------------------------------------------------------- weights


class BigUniform(Uniform):
    """Uniform, with 4 MiB of weights (above INLINE_WEIGHTS_BYTES: they travel as one object in the store)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1024, 1024))


def store_bytes(node_id: str) -> int:
    """Bytes in use in that node's object store, from its raylet (what `ray memory --stats-only` sums)."""
    from ray._private.internal_api import node_stats

    node = next(n for n in ray.nodes() if n["NodeID"] == node_id)
    return int(node_stats(node["NodeManagerAddress"], node["NodeManagerPort"], False).store_stats
               .object_store_bytes_used)


def test_weights_reach_a_node_once_however_many_of_its_workers_read_them() -> None:
    """A head with no CPUs (the driver's) and a 2-CPU node: both workers land there. One weight update of 4 MiB
    read by both workers adds one copy to that node's object store (Ray pulls an object to a node once; the workers
    map it), not one per worker: measured as the node's store bytes, 1.0 x the weights."""
    import ray.cloudpickle
    from ray.cluster_utils import Cluster

    from rlrun.execution.ray_executor import RayExecutor

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    node = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    try:
        ray.cloudpickle.register_pickle_by_value(__import__(__name__))
        cfg = OmegaConf.structured(RayExecutorConfig(num_workers=2, num_envs_per_worker=1))
        executor = RayExecutor(cfg, cartpole(), seed=0)
        try:
            policy = BigUniform()
            ws = executor.worker_set(policy)
            assert set(ray.get([a.node_id.remote() for a in ws.actors])) == {node.node_id}
            ws.sample(4)  # the first weights, and the workers warmed up
            first = list(ws._weights)  # held, so their copy is not freed while the next one arrives
            assert all(isinstance(w, ray.ObjectRef) for w in first) and len({w.hex() for w in first}) == 1
            before = store_bytes(node.node_id)
            with torch.no_grad():
                policy.w.add_(1.0)  # a new version: sent again
            ws.sync_weights()
            ws.sample(4)
            added = store_bytes(node.node_id) - before
            del first
            weights_bytes = 1024 * 1024 * 4
            print(f"node store bytes added by one 4 MiB update read by 2 workers: {added} "
                  f"({added / weights_bytes:.2f} x the weights)")
            assert 0.9 * weights_bytes <= added <= 1.5 * weights_bytes, added
        finally:
            executor.stop()
    finally:
        ray.shutdown()
        cluster.shutdown()
