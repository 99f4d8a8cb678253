"""The Ray executor: rollout workers as Ray actors, the learner (the plan) in the driver process.

``executor=ray`` starts a new local Ray cluster (``ray.init(address="local", num_cpus=executor.num_cpus,
include_dashboard=False)``: even when ``ray start`` made one on this machine, which joining needs asking for)
unless Ray is running in this process already (a test's cluster) or ``executor.address`` names one (``auto``: the
cluster ``ray start`` made on this machine; ``ray://host:10001``: Ray Client). It shuts down only a cluster it
started. The worker-set contract is in ``rlrun/execution/worker_set.py``; here is how this executor keeps it, in
three files by job: this one (the cluster's lifetime and the executor's settings, :class:`RayExecutor`),
``ray_worker_set.py`` (requests, weights, slots and faults: :class:`~rlrun.execution.ray_worker_set.RayWorkerSet`)
and ``ray_actor.py`` (the worker process and a batch's way to the driver); replay shards in ``replay_shards.py``.

- **Workers.** ``num_workers`` actors (``ray_actor.RemoteRolloutWorker``, ``cpus_per_worker`` CPUs each), each a
  :class:`~rlrun.execution.rollout_worker.RolloutWorker` with ``num_envs_per_worker`` env copies and one torch
  thread (``worker_torch_threads``), acting with the policy its ``policy_factory(worker_index)`` builds.
- **Transfer.** A rollout comes back through Ray's object store in the form it was made in
  (``rlrun/execution/sample_batch.py``: each observation once, ``[T + 1, B]``, plus the final observations of
  the episodes that ended; there is no ``next_obs`` to drop or rebuild; 100 x 4 x 84 x 84 uint8 is 2.7 MiB:
  ~3 ms through the object store on this machine class). The driver copies the arrays out of the object store
  (``ray_actor.owned``: writable, and the object is freed at once).
  ``observation_transfer=shared_memory`` (default) keeps a worker's observations out of the object store when it
  runs on the driver's node: each request carries a shared-memory slot the driver lends it, the worker writes the
  observations there, and the driver copies them out and lends the slot again
  (``rlrun/execution/shared_memory_transfer.py``; rollouts under 256 KiB of observations, workers on other nodes
  and ``object_store`` use the store).
- **Start-up.** A local cluster this executor starts has its workers import ``executor.preload_modules`` (torch
  and the worker code) as soon as Ray starts them, during ``ray.init``, so the imports overlap the driver's own
  set-up instead of delaying the first rollout.
- **Weights** ride on a worker's next sample request (no extra round trip): inline when small, otherwise put in
  the object store once and read by every worker.
- **Bounded in-flight requests and object lifetimes.** ``sample_async`` keeps at most
  ``max_in_flight_per_worker`` requests per worker; the driver holds no reference to a rollout after handing it to
  the plan, and at most one weights object per worker (the last one sent, re-sent to a restarted worker), so the
  object store holds O(num_workers x max_in_flight_per_worker) rollouts whatever the run's length.
  ``object_store_memory`` caps the store of a cluster this executor starts.
- **Fault handling.** A worker whose process dies (``RayActorError``) is replaced by a new actor (fresh env
  copies, seeded past every seed used so far, so it does not replay the same episodes; the last weights sent to
  it), its lost request is sent again, the run goes on and ``executor/worker_restarts`` counts it; more than
  ``max_worker_restarts`` restarts end the run with an error.
- **Replay shards** (``replay_shards()``, algo=apex; ``rlrun/execution/replay_shards.py``): one actor per shard
  (``cpus_per_replay_shard`` CPUs), fed straight from the workers' object refs (``info_by_reference``: the worker's
  sample task returns those info entries as objects of their own), at most ``replay_max_in_flight`` sample requests
  and ``replay_max_pending_ops`` unfinished adds/updates per shard; a dead shard is replaced empty and counted in
  ``executor/replay_shard_restarts`` (``max_replay_shard_restarts``).
- **Timing** (``metrics()``): ``time/env_step_s`` and ``time/inference_s`` summed over workers (they run in
  parallel, so the sum may exceed the wall time), ``time/transfer_s`` (the driver's share of moving rollouts and
  weights: getting, copying out, putting), ``time/wait_s`` (the driver blocked until a rollout was ready), and the
  plan's own ``learn``/``replay``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Sequence

import torch

from rlrun.errors import CheckpointError, ConfigError, RlrunError, one_line
from rlrun.execution.ray_worker_set import RayWorkerSet
from rlrun.execution.replay_shards import RayReplayShardSet
from rlrun.execution.rollout_worker import EnvFactory, Policy
from rlrun.execution.timing import StageTimer
from rlrun.execution.worker_set import PolicyFactory
from rlrun.metric_names import LOST_ENV_STEPS, REPLAY_SHARD_RESTARTS, WORKER_RESTARTS

log = logging.getLogger(__name__)


class RayExecutor:
    """Builds :class:`RayWorkerSet` s on a Ray cluster; see the module docstring."""

    def __init__(self, cfg: Any, env_factory: EnvFactory, seed: int) -> None:
        _validate(cfg)
        self.cfg, self.env_factory, self.seed = cfg, env_factory, seed
        self.timer = StageTimer()
        self.restarts = 0
        self.lost_env_steps = 0  # env steps of rollouts lost with a dead worker (rlrun/execution/ray_worker_set.py)
        self.replay_restarts = 0  # replay shard actors replaced (rlrun/execution/replay_shards.py)
        self._worker_sets: list[RayWorkerSet] = []
        self._replay_shard_sets: list[Any] = []
        start = time.perf_counter()
        self._started_ray = connect(cfg)
        self.init_seconds = time.perf_counter() - start
        try:
            check_capacity(cfg)
        except ConfigError:
            self.stop()
            raise

    @property
    def num_workers(self) -> int:
        """Rollout workers (actors) of every worker set this executor builds."""
        return int(self.cfg.num_workers)

    @property
    def num_envs_per_worker(self) -> int:
        return int(self.cfg.num_envs_per_worker)

    def worker_set(self, policy: Policy, device: torch.device | str = "cpu",
                   policy_factory: PolicyFactory | None = None, own_policies: bool = False,
                   info_by_reference: Sequence[str] = ()) -> RayWorkerSet:
        """``num_workers`` remote workers; each acts with ``policy_factory(worker_index)`` (default: a copy of
        ``policy``) and gets the learner's weights through ``sync_weights``. ``device`` is the learner's; the
        workers act on ``executor.worker_device``. ``own_policies``: remote workers always have their own (the
        flag is for the local executor). ``info_by_reference``: those ``SampleBatch.info`` entries stay in the
        object store and the batch holds their object refs (to hand to replay shards unread)."""
        import ray

        free = ray.available_resources().get("CPU", 0.0)
        need = int(self.cfg.num_workers) * float(self.cfg.cpus_per_worker)
        if need > free + 1e-9:
            raise ConfigError(f"executor=ray: {self.cfg.num_workers} workers x {self.cfg.cpus_per_worker} CPUs need "
                              f"{need:g} free CPUs but the Ray cluster has {free:g} free (other actors hold the rest): "
                              f"the workers would wait forever. Lower executor.cpus_per_worker or num_workers.")
        if policy_factory is None and torch.device(device).type != "cpu":
            raise ConfigError(f"executor=ray with the learner on {device}: the plan must pass a policy_factory to "
                              f"worker_set() (a copy of a {device} policy cannot be unpickled in a CPU worker).")
        ws = RayWorkerSet(self, policy, policy_factory, info_by_reference)
        self._worker_sets.append(ws)
        return ws

    def replay_shards(self, factory: Any, num_shards: int) -> Any:
        """``num_shards`` replay shard actors, ``factory(i)`` each (``rlrun/execution/replay_shards.py``), with
        ``executor.cpus_per_replay_shard`` CPUs each."""
        shards = RayReplayShardSet(self, factory, num_shards)
        self._replay_shard_sets.append(shards)
        return shards

    def metrics(self) -> dict[str, float]:
        """``time/<stage>_s`` since the last call, and ``executor/worker_restarts`` (since the run started); with
        replay shards also ``executor/replay_shard_restarts``."""
        out = {**self.timer.report(), WORKER_RESTARTS: self.restarts,
               LOST_ENV_STEPS: self.lost_env_steps}
        if self._replay_shard_sets:
            out[REPLAY_SHARD_RESTARTS] = self.replay_restarts
        return out

    def state_dict(self) -> dict[str, Any]:
        """Every remote worker's state (as the local executor's, read in the workers). Exact for synchronous
        sampling; rollouts in flight (``sample_async``) are not in it."""
        states = [ws.get_states() for ws in self._worker_sets]
        return {"worker_sets": [[s["worker"] for s in ss] for ss in states],
                "worker_rngs": [[s["rng"] for s in ss] for ss in states]}

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        saved, rngs = state.get("worker_sets", []), state.get("worker_rngs")
        if [len(s) for s in saved] != [ws.num_workers for ws in self._worker_sets] or rngs is None:
            raise CheckpointError(f"the checkpoint holds {[len(s) for s in saved]} workers per worker set but the run "
                                  f"has {[ws.num_workers for ws in self._worker_sets]}")
        exact = True
        for ws, ws_state, ws_rngs in zip(self._worker_sets, saved, rngs, strict=True):
            exact = ws.set_states([{"worker": s, "rng": r} for s, r in zip(ws_state, ws_rngs, strict=True)]) and exact
        return exact

    def stop(self) -> None:
        for ws in self._worker_sets:
            ws.stop()
        self._worker_sets.clear()
        for shards in self._replay_shard_sets:
            shards.stop()
        self._replay_shard_sets.clear()
        if self._started_ray:
            import ray

            ray.shutdown()
            self._started_ray = False


def _validate(cfg: Any) -> None:
    # each key's range and choices are declared on RayExecutorConfig (rlrun.schema); here only what spans keys
    if cfg.address and cfg.num_cpus is not None:
        log.warning("executor.num_cpus=%s is ignored: executor.address=%s names an existing cluster",
                    cfg.num_cpus, cfg.address)


def connect(cfg: Any) -> bool:
    """Start or join the Ray cluster ``cfg`` names (see the module docstring) unless Ray is running in this process
    already; True when this call started a new local cluster (the executor shuts down only that). A cluster whose
    Ray or Python differs from this process's is bad input (ConfigError naming both); any other failure to start
    or reach one is an RlrunError."""
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING, "log_to_driver": True}
    address = cfg.address or os.environ.get("RAY_ADDRESS")  # ray.init() itself would connect there
    if address:
        kwargs["address"] = str(address)
    else:
        # A new cluster of our own, always: ray.init() without an address would join a cluster `ray start` left on
        # this machine (its /tmp/ray/ray_current_cluster, even a dead one's) and then refuse num_cpus. Joining one
        # is the user's choice: executor.address=auto.
        kwargs["address"] = "local"
        kwargs["num_cpus"] = int(cfg.num_cpus) if cfg.num_cpus is not None else os.cpu_count()
        if cfg.object_store_memory is not None:
            kwargs["object_store_memory"] = int(cfg.object_store_memory)
        kwargs["_system_config"] = {"worker_niceness": int(cfg.worker_niceness)}
        if cfg.get("preload_modules"):  # imported by the workers Ray starts ahead, while the driver works
            kwargs["_system_config"]["preload_python_modules"] = [str(m) for m in cfg.preload_modules]
    try:
        _init(ray, kwargs)
    except Exception as e:  # noqa: BLE001 - e.g. no cluster at executor.address
        mismatch = version_mismatch(str(e))
        if mismatch:
            raise ConfigError(f"executor.address={address}: {mismatch}") from None
        raise RlrunError(f"executor=ray: cannot start or reach a Ray cluster "
                         f"(address={address or 'a new local cluster'}): {one_line(e)}") from None
    return not address


CLIENT_INIT_TRIES = 3


def _init(ray: Any, kwargs: dict[str, Any]) -> None:
    """``ray.init``, tried again when Ray Client's server failed to start this client's session: its proxier
    starts one server process per client and reports "Initialization failure from server" when that process dies
    at start (seen on a loaded 2-core machine, the process gone within milliseconds and its log empty); a new
    connection gets a new server process."""
    for attempt in range(1, CLIENT_INIT_TRIES + 1):
        try:
            ray.init(**kwargs)
            return
        except ConnectionError as e:
            if not (str(kwargs.get("address", "")).startswith("ray://") and "Initialization failure from server"
                    in str(e) and attempt < CLIENT_INIT_TRIES):
                raise
            logging.getLogger(__name__).warning("Ray Client: the cluster's client server failed to start a session "
                                                "for this driver (attempt %d of %d); trying again", attempt,
                                                CLIENT_INIT_TRIES)
            if ray.is_initialized():
                ray.shutdown()
            time.sleep(2.0 * attempt)


def version_mismatch(message: str) -> str | None:
    """The one-line form of Ray's "Version mismatch" error (a driver must run the cluster's Ray and Python
    versions), or None for any other message."""
    import re

    if "Version mismatch" not in message:
        return None
    found = re.findall(r"Ray: (\S+)\s+Python: (\S+)", message)
    if len(found) != 2:
        return f"the cluster runs other Ray or Python versions than this process ({one_line(Exception(message))})."
    (cluster_ray, cluster_py), (own_ray, own_py) = found
    return (f"the cluster runs Ray {cluster_ray} on Python {cluster_py} but this process has Ray {own_ray} on "
            f"Python {own_py}; a driver must match both: install ray=={cluster_ray} in a Python {cluster_py} "
            f"environment here (or run rlrun on the cluster's head node).")


def check_capacity(cfg: Any) -> None:
    """The connected cluster has the CPUs the workers ask for, or a ConfigError: they would wait forever."""
    import ray

    cpus = ray.cluster_resources().get("CPU", 0.0)
    need = int(cfg.num_workers) * float(cfg.cpus_per_worker)
    if need > cpus:
        raise ConfigError(f"executor.num_workers={cfg.num_workers} x executor.cpus_per_worker="
                          f"{cfg.cpus_per_worker} needs {need:g} CPUs but the Ray cluster has {cpus:g}: the "
                          f"workers would wait forever. Lower them, or raise executor.num_cpus.")


PROBE_TIMEOUT_S = 5.0


def check_reachable(cfg: Any) -> None:
    """Before anything is written: a cluster named by ``executor.address`` (or ``RAY_ADDRESS``) answers on its port,
    or a ConfigError (exit 2) naming the address and the fix; Ray's own connect would wait minutes and then fail
    with a run directory already made. ``auto`` needs a cluster ``ray start`` made on this machine. Nothing to check
    without an address (a new local cluster) or with Ray already running in this process."""
    import socket

    import ray

    address = cfg.address or os.environ.get("RAY_ADDRESS")
    if not address or ray.is_initialized():
        return
    address = str(address)
    where = f"executor.address={cfg.address}" if cfg.address else f"RAY_ADDRESS={address}"
    target = address[len("ray://"):] if address.startswith("ray://") else address
    if target == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address  # what ray.init reads for "auto"

            target = canonicalize_bootstrap_address("auto") or ""
        except Exception:  # noqa: BLE001 - no cluster recorded on this machine
            target = ""
        if not target:
            raise ConfigError(f"{where}: no Ray cluster was started on this machine with `ray start` (auto joins "
                              f"the last one). Start one (ray start --head), give its address, or leave "
                              f"executor.address unset for a cluster of this run's own.")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"{where}: not an address; write host:port (a cluster's GCS, e.g. 10.0.0.5:6379), "
                          f"ray://host:10001 (Ray Client) or auto.")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ConfigError(f"{where}: no Ray cluster answers at {host}:{port} ({reason} within "
                          f"{PROBE_TIMEOUT_S:g} s). Start one there (ray start --head --port={port}), check the "
                          f"address, or leave executor.address unset for a cluster of this run's own.") from None
