"""The Ray executor on a cluster of several nodes on this machine, as Ray's own tests make one
(``ray.cluster_utils.Cluster``: a head and a worker node, each its own raylet and object store on 127.0.0.1):
where ``executor.placement`` puts the workers, and which of their rollouts take the shared-memory path."""

from __future__ import annotations

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
