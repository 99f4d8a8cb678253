"""Where the Ray executor's actors go, and what happens when a node goes: the scheduling strategies of the rollout
workers and replay shards (``executor.placement``), the errors that mean an actor's work was lost with its process
or its node, and the wait for a replacement to find a node with room (``executor.restart_timeout_s``).

- **Workers** (``worker_strategy``): ``pack`` puts them on the driver's node while it has room (a soft node
  affinity: their rollouts take the shared-memory path), then elsewhere; ``spread`` round-robins them over the nodes
  (Ray's ``SPREAD``). Through Ray Client (``ray://``) the driver is on no node of the cluster: ``pack`` leaves the
  choice to Ray, and every rollout comes through the object store.
- **Replay shards** (``shard_strategy``): on the nodes other than the learner's in turn (a node affinity each),
  so the learner's node keeps its cores for the learner and its workers, as the Ape-X paper puts replay on
  machines of its own; on one node they share it.
- **A lost actor** (``lost_errors``): its process died (``RayActorError``, its node's death included) or a result
  it had finished lived in the object store of a node that died (``ObjectLostError``). The worker set and the shard
  set replace it, away from the node it died on when the failure says that node may be gone
  (``node_may_be_gone``: Ray may list a lost node as alive for seconds, and an actor placed there is cancelled);
  ``await_placement`` waits for the replacement to start, and when no node can host it within
  ``executor.restart_timeout_s`` raises :class:`~rlrun.errors.PlacementError`, which ``rlrun run`` answers with a
  final checkpoint (the learner's state; no worker state, no replay) and ``stop_reason: error``.
"""

from __future__ import annotations

from typing import Any

from rlrun.errors import PlacementError


def through_client() -> bool:
    """Whether this process reaches its cluster through Ray Client (``ray://``): the driver and the learner are on
    no node of the cluster, so no actor shares their node (no shared-memory path, nothing to pack next to)."""
    import ray

    return bool(ray.util.client.ray.is_connected())


NODE_ID_LABEL = "ray.io/node-id"  # the label Ray gives every node: its id


def worker_strategy(cfg: Any, avoid: frozenset[str] = frozenset()) -> Any:
    """Ray's scheduling strategy for the rollout workers from ``executor.placement`` (see the module docstring). A
    replacement, with ``avoid`` (nodes its predecessors' failures point at): any node but those (a hard label
    constraint), the driver's preferred under ``pack``; it waits for room elsewhere rather than go there."""
    import ray
    from ray.util.scheduling_strategies import In, NodeAffinitySchedulingStrategy, NodeLabelSchedulingStrategy, NotIn

    spread = str(cfg.get("placement", "pack")) == "spread"
    if avoid:
        soft = None if spread or through_client() else {NODE_ID_LABEL: In(ray.get_runtime_context().get_node_id())}
        return NodeLabelSchedulingStrategy(hard={NODE_ID_LABEL: NotIn(*sorted(avoid))}, soft=soft)
    if spread:
        return "SPREAD"
    if through_client():
        return "DEFAULT"
    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=True)


def shard_strategy(index: int, cpus: float, avoid: frozenset[str] = frozenset()) -> Any:
    """Ray's scheduling strategy for replay shard ``index`` needing ``cpus`` CPUs: the live nodes other than the
    driver's (the learner's) in turn; the driver's node on a cluster of one node. A shard that needs no CPUs fits on
    any node, so it is pinned there (a hard node affinity: Ray's soft affinity was seen to fall back to the driver's
    node while the driver's raylet had not yet heard of the others' resources); one that needs CPUs asks softly (a
    node without room: Ray places it elsewhere). Asked again for a replacement, with ``avoid``: the nodes its
    predecessors died on, which Ray may still list as alive for seconds after they went (a replacement pinned to
    one is cancelled); when no other node is left, the driver's, which lives as long as the run."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = None if through_client() else ray.get_runtime_context().get_node_id()
    others = sorted(n["NodeID"] for n in ray.nodes()
                    if n.get("Alive") and n["NodeID"] != here and n["NodeID"] not in avoid)
    if here is None and not others:
        return "DEFAULT"
    return NodeAffinitySchedulingStrategy(node_id=others[int(index) % len(others)] if others else here,
                                          soft=float(cpus) > 0)


def node_may_be_gone(error: BaseException) -> bool:
    """Whether an actor's failure points at its node rather than its process: the call could not reach it (no
    raylet reported a death: ``ActorUnavailableError``), a result was lost with a node's object store, or the GCS
    says the node died. A process that died on a live node is reported by its raylet (``ActorDiedError``), and its
    node may host the replacement."""
    from ray.exceptions import ActorUnavailableError, ObjectLostError

    return isinstance(error, (ActorUnavailableError, ObjectLostError)) or "its node has died" in str(error)


def lost_errors() -> tuple[type[BaseException], ...]:
    """The exceptions of ``ray.get`` that mean the actor's work is lost and the actor must be replaced."""
    from ray.exceptions import ObjectLostError, RayActorError

    return RayActorError, ObjectLostError


def await_placement(ready_ref: Any, what: str, cpus: float, timeout_s: float, again: bool = True) -> Any:
    """Wait until a replacement actor answers ``ready_ref`` (its first method call) and return the answer.
    Past ``timeout_s`` the cluster has no node with room for it (its node is gone and the others are full): a
    :class:`PlacementError` naming what the actor needs and what the cluster has left. An actor that fails while
    starting raises that failure. ``again``: a replacement (the message says "started again"), else a first
    start."""
    import ray

    ready, _ = ray.wait([ready_ref], timeout=float(timeout_s))
    if ready:
        return ray.get(ready[0])
    alive = [n for n in ray.nodes() if n.get("Alive")]
    free = ray.available_resources().get("CPU", 0.0)
    total = ray.cluster_resources().get("CPU", 0.0)
    within = f"executor.restart_timeout_s={timeout_s:g}" if again else f"{timeout_s:g} s"
    raise PlacementError(f"{what} could not be started{' again' if again else ''} within {within}: it "
                         f"needs {cpus:g} CPU(s) and the cluster has {free:g} free of {total:g} on {len(alive)} "
                         f"live node(s). Add a node (or let the autoscaler), or run with fewer "
                         f"executor.num_workers / replay shards.")

