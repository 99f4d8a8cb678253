"""The run-level schemas (env, device, executor, logger, stop, checkpoint, eval, export, sweep, the run), the Hydra
config source that serves them with every algorithm's schema (each beside its algorithm,
``rlrun/algos/<name>_config.py``, found through the registry as a plugin's is), and the validation of a composed
config. Each key declares its range where it is declared (:mod:`rlrun.schema`).

Step units, used exactly throughout rlrun (docs/tracking.md, "Step units"):
- *agent step*: one action chosen by the agent in one environment copy;
- *env step*: the same count, summed over all environment copies and workers (``stop.env_steps`` counts these);
- *frame*: an agent step times the environment's frame skip (1 for non-Atari environments);
- *gradient step*: one optimizer update.

Each YAML option of a group starts its defaults list with ``/schema/<group>/<schema name>@_here_``, so the
option is typed by its schema when composed. Hydra still lets ``+algo.extra=1`` add a key to a typed node, so
``validate()`` re-checks every group against its schema once the config is composed, before anything starts.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Sequence

from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlrun import hydra_search_path
from rlrun.errors import ConfigError, did_you_mean
from rlrun.registry import RegistryError, registry
from rlrun.reporting import no_recurrent_core
from rlrun.schema import Declared, check_declared, key

# ---------------------------------------------------------------- env

VECTORIZATIONS = ("copies", "vector_entry_point", "auto")
VECTOR_ENTRY_MODES = ("sync", "serial")  # the executor.vector_modes that can step env.vectorization=vector_entry_point


@dataclass
class GymEnvConfig(Declared):
    key_prefix: ClassVar[str] = "env"

    name: str = "gym"
    id: str = MISSING
    """A registered gymnasium id, e.g. CartPole-v1."""
    max_episode_steps: Optional[int] = key(None, "[1, inf)")
    """Override the id's time limit (agent steps); null keeps the registered one."""
    frame_skip: int = key(1, "[1, inf)")
    """Frames per agent step, for the frames/s figure (1 for non-Atari environments)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for gymnasium.make."""
    solved_return: Optional[float] = key(None, "any")
    """The env's "solved" mean return (CartPole-v1: 475); the default for stop.episode_return_mean."""
    vectorization: str = key("copies", choices=VECTORIZATIONS)
    """How a worker's env copies are stepped together: copies (one env object per copy, in gymnasium's
    SyncVectorEnv or AsyncVectorEnv as executor.vector_mode says) | vector_entry_point (the id's own numpy-batched
    vector env that gymnasium registers, CartPole-v0/v1's CartPoleVectorEnv; ~2.5x faster per step, same
    dynamics and time limit, same-step autoreset; executor.vector_mode=sync or serial only; one random generator
    for all copies, so the same seed gives other trajectories than copies) | auto (vector_entry_point where the
    id has one rlrun steps and executor.vector_mode is sync or serial, copies otherwise; PPO's CartPole preset)."""


def check_vectorization(vectorization: str, vector_mode: str | None) -> None:
    """env.vectorization=vector_entry_point steps a worker's copies as one object in the worker's own process, so
    executor.vector_mode must be one that keeps them there (sync, serial); ConfigError otherwise. ``validate`` calls
    it for a composed config, ``GymEnvFactory.make_vector`` for the mode a worker asks for."""
    if vectorization != "vector_entry_point" or vector_mode is None:
        return  # auto steps copies where the mode cannot step the batched env (GymEnvFactory.vectorization_for)
    if vector_mode not in VECTOR_ENTRY_MODES:
        raise ConfigError(f"env.vectorization=vector_entry_point with executor.vector_mode={vector_mode}: the env's "
                          f"own vectorised implementation steps all of a worker's copies in the worker's process; "
                          f"use executor.vector_mode={' or '.join(VECTOR_ENTRY_MODES)}, or env.vectorization=copies.")


@dataclass
class PettingZooEnvConfig(Declared):
    """A PettingZoo multi-agent environment (rlrun/envs/pettingzoo_env.py); its agents are mapped to policies by
    algo=multiagent (rlrun/algos/multiagent_config.py)."""

    key_prefix: ClassVar[str] = "env"
    open_maps: ClassVar[tuple[str, ...]] = ("kwargs",)  # env.kwargs.N=2 from the command line, without +

    name: str = "pettingzoo"
    id: str = "mpe2.simple_spread_v3"
    """The env module: mpe2.simple_spread_v3, pettingzoo.butterfly.pistonball_v6, ... (its parallel_env() is
    used); a bare name (simple_spread_v3) is looked up in mpe2 and PettingZoo's families."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the module's parallel_env() (MPE: N, max_cycles, continuous_actions, ...)."""
    frame_skip: int = key(1, "[1, inf)")
    """Frames per agent step, for the frames/s figure."""
    solved_return: Optional[float] = key(None, "any")
    """A mean per-agent return that counts as solved: the default for stop.episode_return_mean (null: none)."""


@dataclass
class AtariEnvConfig(Declared):
    """An Atari 2600 game of the ALE (ale-py ships the ROMs) under the DeepMind/IMPALA protocol by default
    (Mnih et al. 2015, Methods; Espeholt et al. 2018); rlrun/envs/atari.py builds it, protocol.json records it."""

    key_prefix: ClassVar[str] = "env"

    name: str = "atari"
    game: str = MISSING
    """ALE game as in its gymnasium id ALE/<Game>-v5: Pong, Breakout, MsPacman (ms_pacman is accepted too)."""
    id: str = "${.game}"
    """The env's name in run names, summaries and tags (default: the game); the gymnasium id is ALE/<Game>-v5."""
    backend: str = key("gymnasium", choices=('gymnasium', 'envpool'))
    """gymnasium: rlrun's wrappers on ale-py, vectorised by gymnasium (sync/async) | envpool: C++ pool (extra)."""
    envpool_threads: int = key(0, "[0, inf)")
    """envpool backend only: C++ threads stepping a worker's env copies; 0 = one per CPU core, at most num_envs."""
    frame_skip: int = key(4, "[1, inf)")
    """Emulator frames per agent step (the action is repeated); frames = agent steps x frame_skip. Default: Mnih et
    al. 2015."""
    max_pool: bool = True
    """Observe the pixel-wise max of the last two frames of a skip (removes Atari sprite flicker). Default: Mnih et
    al. 2015."""
    noop_max: int = key(30, "[0, inf)")
    """At a game's reset, take a uniform random 1..noop_max no-op frames (0 disables), from the env's seeded RNG.
    Default: Mnih et al. 2015 ("no-op condition")."""
    screen_size: int = key(84, "[1, inf)")
    """Observed frame height and width, pixels (resized with area interpolation). Default: Mnih et al. 2015."""
    grayscale: bool = True
    """Grayscale frames (1 channel) instead of RGB (3 channels per stacked frame). Default: Mnih et al. 2015."""
    frame_stack: int = key(4, "[1, inf)")
    """Last frames stacked channel-first: observation [frame_stack x channels, screen_size, screen_size] uint8.
    Default: Mnih et al. 2015."""
    terminal_on_life_loss: bool = True
    """Training episodes end when a life is lost (the game itself goes on); the game score still spans all lives.
    Default: Mnih et al. 2015."""
    clip_rewards: bool = True
    """Training reward = sign(game reward); the game score stays unclipped. Default: Mnih et al. 2015."""
    repeat_action_probability: float = key(0.0, "[0, 1]")
    """Sticky actions: chance per frame that the emulator repeats the previous action (Machado et al. use 0.25).
    Default: 0, as DQN and IMPALA."""
    full_action_space: bool = False
    """All 18 joystick actions instead of the game's minimal set."""
    max_episode_frames: Optional[int] = key(108_000, "[1, inf)")
    """Game cut-off in frames (skipped and no-op frames count): 108k = 30 min at 60 Hz = 27k agent steps; null: none.
    Default: the ALE v5 default, as in Rainbow (Hessel et al. 2018)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for gymnasium.make("ALE/<Game>-v5", ...), e.g. mode, difficulty, render_mode."""


MINATAR_GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")


@dataclass
class MinAtarEnvConfig(Declared):
    """A MinAtar game (Young & Tian 2019, "MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible
    Reinforcement Learning Experiments"): 10x10 grids of 0/1 object channels, one frame an agent step. The defaults
    are MinAtar's own settings, those of the paper's experiments; rlrun/envs/minatar_env.py builds it."""

    key_prefix: ClassVar[str] = "env"

    name: str = "minatar"
    id: str = key("Breakout", choices=MINATAR_GAMES)
    """The game: Asterix | Breakout | Freeway | Seaquest | SpaceInvaders (gymnasium id MinAtar/<id>-v0, or -v1 with
    minimal_action_set)."""
    sticky_action_prob: float = key(0.1, "[0, 1]")
    """Chance per agent step that the game repeats the previous action instead. Default: MinAtar's, as in Young &
    Tian 2019."""
    difficulty_ramping: bool = True
    """Asterix, Seaquest and SpaceInvaders speed up as the agent progresses (Breakout and Freeway have no ramping).
    Default: MinAtar's, as in Young & Tian 2019."""
    minimal_action_set: bool = False
    """Only the game's meaningful actions (MinAtar/<id>-v1) instead of all 6 (-v0). Default: all 6, as in Young &
    Tian 2019."""
    max_episode_steps: Optional[int] = key(None, "[1, inf)")
    """A time limit in agent steps (truncation); null: none, as MinAtar registers its games."""
    frame_skip: int = key(1, "[1, 1]")
    """Frames per agent step: 1 (MinAtar has no frame skip; frames = agent steps)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for gymnasium.make("MinAtar/<id>-v0", ...)."""
    solved_return: Optional[float] = key(None, "any")
    """A mean return that counts as solved: the default for stop.episode_return_mean (null: none)."""


# ---------------------------------------------------------------- device


@dataclass
class DeviceConfig(Declared):
    key_prefix: ClassVar[str] = "device"

    name: str = "cpu"
    """cpu | cuda | auto (CUDA if present, else CPU) | replicas (synchronous data-parallel learner update)."""
    torch_threads: int = key(1, "[1, inf)")
    """torch intra-op threads in this process; 1 is fastest when env workers share the cores (MEASURED.md)."""
    map: dict[str, str] = field(default_factory=dict)
    """Per-component placement, component name (or dotted path, e.g. q.torso) -> torch device, e.g.
    {memory: cpu, q: cuda}; applied after the agent is built; unmapped components stay on their parent's device."""
    num_replicas: int = key(0, "[0, inf)")
    """device=replicas: replicas the update batch is split across (gradients averaged, one optimizer step);
    0 = one per visible CUDA device."""
    compile: bool = False
    """torch.compile the agent's networks (act and update paths); falls back to eager with a warning."""
    precision: str = key("fp32", choices=('fp32', 'bf16'))
    """fp32 | bf16: the update under bfloat16 autocast (the torsos' matrix products in bf16, heads and losses in
    float32; acting stays fp32; algo=dqn, ppo, a2c, apex, impala, appo); on CUDA, or a CPU with AVX512-BF16 or AMX
    (PPO's Pong update 1.7x faster than fp32 on a Xeon with AMX: docs/devices.md)."""
    cpu_memory: str = key("reuse", choices=('reuse', 'system'))
    """reuse | system: how this process's C allocator (glibc) treats large blocks. reuse: served from the heap and
    kept when freed, so a CPU update's per-minibatch tensors are not mapped and faulted in again each time (PPO
    Atari update -21%, peak memory +12-17%; rlrun/devices/cpu_memory.py); system: glibc's defaults."""


# ---------------------------------------------------------------- executor


@dataclass
class LocalExecutorConfig(Declared):
    key_prefix: ClassVar[str] = "executor"

    name: str = "local"
    num_envs: int = key(1, "[1, inf)")
    """Environment copies stepped together by each in-process worker."""
    num_workers: int = key(1, "[1, inf)")
    """In-process rollout workers, sampled one after another (as many as executor=ray's actors: same seeds, same
    per-worker policies, for debugging multi-worker plans such as Ape-X); worker w's copy i is seeded
    seed + w * num_envs + i."""
    vector_mode: str = key("sync", choices=('sync', 'async', 'serial', 'pipelined'))
    """sync: all env copies in this process | async: one subprocess per env copy (gymnasium AsyncVectorEnv) |
    serial: sync env copies and the policy called on one observation at a time (batch 1), for debugging |
    pipelined: the copies in two groups, one stepping (envpool threads or subprocesses) while the policy acts on the
    other (needs >= 2 copies; the fast setting for Atari with env.backend=envpool)."""


@dataclass
class RayExecutorConfig(Declared):
    """Rollout workers as Ray actors, the learner in the driver (rlrun/execution/ray_executor.py)."""

    key_prefix: ClassVar[str] = "executor"

    name: str = "ray"
    num_workers: int = key(2, "[1, inf)")
    """Rollout worker actors (processes)."""
    num_envs_per_worker: int = key(1, "[1, inf)")
    """Env copies per worker; worker w's copy i is seeded with seed + w * num_envs_per_worker + i."""
    vector_mode: str = key("sync", choices=('sync', 'async', 'serial', 'pipelined'))
    """How a worker steps its env copies: sync | async (a subprocess per copy) | serial (batch-1 inference) |
    pipelined (two groups of copies: one steps while the policy acts on the other; >= 2 copies)."""
    address: Optional[str] = None
    """null: start a new local Ray cluster (shut down at the end), even beside one `ray start` made | auto: join
    the cluster `ray start` made on this machine | ray://host:10001: a remote cluster through Ray Client."""
    num_cpus: Optional[int] = key(None, "[1, inf)")
    """CPUs of the local cluster this executor starts (null: every core); ignored with an address."""
    object_store_memory: Optional[int] = key(None, "[1, inf)")
    """Bytes of Ray's object store of the local cluster this executor starts (null: Ray's default, 30% of RAM)."""
    cpus_per_worker: float = key(1.0, "[0, inf)")
    """CPUs Ray reserves for each worker actor (num_workers x this must fit in the cluster)."""
    worker_niceness: int = key(0, "[-20, 19]")
    """Unix nice value of the Ray worker processes of a local cluster this executor starts (Ray's own default, 15,
    puts the rollout workers below every other process of the machine); ignored with an address."""
    placement: str = key("pack", choices=("pack", "spread"))
    """Where Ray puts the worker and replay-shard actors on a cluster of several nodes: pack (on the driver's node
    while it has room, where rollouts skip the object store; then elsewhere) | spread (round-robin over the nodes:
    Ray's SPREAD strategy)."""
    worker_device: str = "cpu"
    """Device the workers act on (the learner's is device.name)."""
    worker_torch_threads: int = key(1, "[1, inf)")
    """torch intra-op threads per worker process (1: workers share the cores; MEASURED.md)."""
    max_in_flight_per_worker: int = key(2, "[1, inf)")
    """Async sampling: sample requests pending per worker at most (bounds the object store's rollouts)."""
    rollouts_per_request: int = key(1, "[1, inf)")
    """Async sampling: rollouts a worker makes per request, one after the other, handed to the plan one at a time
    (a weight sync reaches the worker with its next request, up to this many rollouts later). A request costs ~1 ms
    of Ray's own CPU time on each side, as much as a 16-step rollout of 4 CartPole copies, so where rollouts are that
    cheap several per request share that cost. Not with a plan that keeps rollout info in the object store
    (Ape-X)."""
    max_worker_restarts: int = key(10, "[0, inf)")
    """A dead worker is replaced by a new one this many times per run at most; one more death ends the run."""
    restart_timeout_s: float = key(120.0, "(0, inf)")
    """How long a replacement worker or replay shard may wait for a node with room (its own died with its node, the
    others are full) before the run stops with an error, a final checkpoint and stop_reason: error. An autoscaler
    adding a node needs minutes."""
    sync_weights_on_sample: bool = True
    """A synchronous sample() first sends the learner's weights to the workers unless the plan synced since the
    previous sample (so a plan written for executor=local acts with current weights)."""
    cpus_per_replay_shard: float = key(0.0, "[0, inf)")
    """CPUs Ray reserves for each replay shard actor (algo=apex); 0: shards share the workers' cores."""
    replay_max_in_flight: int = key(2, "[1, inf)")
    """Replay sample requests pending over all shards at most (bounded prefetch for the learner; algo=apex)."""
    replay_max_pending_ops: int = key(4, "[1, inf)")
    """Adds and priority updates not yet finished per replay shard at most; the driver waits beyond (algo=apex)."""
    max_replay_shard_restarts: int = key(10, "[0, inf)")
    """A dead replay shard is replaced by an empty one this many times per run at most; one more ends the run."""
    observation_transfer: str = key("shared_memory", choices=('shared_memory', 'object_store'))
    """How rollout observations reach the driver: shared_memory (a segment the driver lends to each request, for
    workers on the driver's node; others use the object store) | object_store (Ray's object store always)."""
    preload_modules: list[str] = field(default_factory=lambda: ["torch", "rlrun.execution.ray_actor"])
    """Modules the workers of a local cluster this executor starts import before they get work (Ray's
    preload_python_modules): Ray starts workers during ray.init, so these imports overlap the driver's own set-up
    instead of delaying the first sample. [] turns it off; ignored with an address."""


# ---------------------------------------------------------------- logger


@dataclass
class TensorBoardConfig(Declared):
    key_prefix: ClassVar[str] = "logger.tensorboard"

    enabled: bool = True
    """Write TensorBoard event files to <run dir>/tensorboard."""
    flush_secs: int = key(10, "[1, inf)")
    """Seconds between flushes of the event files to disk."""


@dataclass
class MLflowConfig(Declared):
    key_prefix: ClassVar[str] = "logger.mlflow"

    enabled: bool = True
    """Log params, metrics, the summary and exported policies to MLflow."""
    tracking_uri: Optional[str] = None
    """null: a local sqlite store, sqlite:///<working directory>/mlflow.db (absolute). Any MLflow URI otherwise."""
    experiment: str = "rlrun"
    """MLflow experiment the run is logged under."""
    flush_interval_s: float = key(10.0, "[0, inf)")
    """Metrics are buffered and sent in one batch at most this often (and at the end)."""
    probe_timeout_s: float = key(3.0, "(0, inf)")
    """Seconds to wait for an http(s) tracking server to answer before using the local fallback store."""
    parent_run_id: Optional[str] = None
    """Make this run a child of that MLflow run (tag mlflow.parentRunId); a sweep sets it for each job."""
    run_id: Optional[str] = None
    """Log to this existing MLflow run instead of creating one (a resumed run continues its MLflow run)."""
    tags: dict[str, str] = field(default_factory=dict)
    """Extra MLflow tags for the run; a sweep sets rlrun.group, rlrun.sweep_dir, rlrun.job_num, rlrun.overrides."""


WANDB_MODES = ("online", "offline", "disabled")


@dataclass
class WandbConfig(Declared):
    key_prefix: ClassVar[str] = "logger.wandb"

    enabled: bool = False
    """Log params (as the run's config), metrics and the summary to Weights & Biases; needs the wandb extra
    (pip install 'rlrun[wandb]'). logger=wandb turns it on beside TensorBoard."""
    project: str = "rlrun"
    """W&B project the run is logged under."""
    entity: Optional[str] = None
    """W&B team or user; null: the account's default entity."""
    mode: str = key("online", choices=WANDB_MODES)
    """online (sync to the W&B server as the run goes) | offline (files in the W&B directory only: wandb sync
    uploads them later) | disabled (W&B's no-op run)."""
    dir: Optional[str] = None
    """Where W&B writes its files (a wandb/ folder in it); null: $WANDB_DIR if set, else the run directory."""
    init_timeout_s: float = key(30.0, "(0, inf)")
    """Seconds wandb.init may take (online: reaching the server) before the run goes on without W&B."""
    tags: list[str] = field(default_factory=list)
    """W&B tags of the run (short labels, e.g. [baseline, cartpole])."""
    run_id: Optional[str] = None
    """Log into this W&B run (continued where it stopped; a new run with this id if the project has none); null:
    a new run. rlrun resume=<dir> sets it to the run's own W&B run when the project is the same."""


@dataclass
class ConsoleConfig(Declared):
    key_prefix: ClassVar[str] = "logger.console"

    enabled: bool = True
    """Show progress on the console: a live bar on a terminal, plain lines otherwise."""
    interval_s: float = key(5.0, "(0, inf)")
    """Seconds between plain progress lines when the output is not a terminal."""


@dataclass
class LoggerConfig(Declared):
    key_prefix: ClassVar[str] = "logger"

    name: str = "default"
    tensorboard: TensorBoardConfig = field(default_factory=TensorBoardConfig)
    mlflow: MLflowConfig = field(default_factory=MLflowConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    report_interval_s: float = key(1.0, "[0, inf)")
    """Seconds between metric reports to every sink (0: after every training_step); the last one is always sent."""


# ---------------------------------------------------------------- run


@dataclass
class StopConfig(Declared):
    """The run stops at whichever condition comes first; null disables a condition."""

    key_prefix: ClassVar[str] = "stop"

    env_steps: Optional[int] = key(100_000, "[1, inf)")
    """Env steps (summed over env copies); 100k: the budget DQN's CartPole-v1 default is tuned for."""
    wall_time_s: Optional[float] = key(None, "(0, inf)")
    """Seconds since the run started."""
    episode_return_mean: Optional[float] = key("${oc.select:env.solved_return,null}", "any")  # type: ignore[assignment]
    """Stop once the mean return of the last `return_window` episodes reaches this; by default the env's
    `solved_return` (null where it has none)."""
    gradient_steps: Optional[int] = key(None, "[1, inf)")
    """Gradient steps (optimizer updates); the budget of an offline run (data=minari), which takes no env steps."""


@dataclass
class MinariDataConfig(Declared):
    """A Minari dataset read as the run's data (``data=minari``): an offline algorithm samples it as an online one
    samples its replay; the env is only evaluated on. ``rlrun collect`` writes such datasets."""

    key_prefix: ClassVar[str] = "data"

    name: str = "minari"
    id: str = MISSING
    """The dataset id (``pendulum/expert-v0``, as ``rlrun collect dataset.id=...`` wrote it) under ``root``."""
    root: Optional[str] = None
    """The folder of local datasets; null: $MINARI_DATASETS_PATH, else ~/.minari/datasets (Minari's own default).
    Nothing is downloaded."""


@dataclass
class CheckpointConfig(Declared):
    key_prefix: ClassVar[str] = "checkpoint"

    interval_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps between checkpoints; null: only the final one."""
    interval_minutes: Optional[float] = key(None, "(0, inf)")
    """Wall-clock minutes between checkpoints (whichever interval comes first); null: no time-based checkpoints."""
    at_end: bool = True
    """Write a checkpoint when the run ends (not after an error: the last good one is kept)."""
    replay: bool = True
    """Include the replay memory (can be large); false: a resumed run starts with an empty memory (not exact)."""
    keep_last: int = key(1, "[1, inf)")
    """Checkpoints kept: latest.pt always; with N > 1 also the last N - 1 before it as step-<env steps>.pt."""
    keep_best: bool = False
    """Keep the checkpoint of the best periodic evaluation (eval.interval_env_steps) as best.pt."""


@dataclass
class EvalConfig(Declared):
    """Greedy evaluation during training (rlrun/app/periodic_eval.py): eval/return_mean, eval/return_std."""

    key_prefix: ClassVar[str] = "eval"

    interval_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps between evaluations (at multiples of it); null: no evaluation during training."""
    episodes: int = key(10, "[1, inf)")
    """Greedy episodes per evaluation, on an env copy of its own."""
    seed: Optional[int] = key(None, "[0, inf)")
    """Seed of the first episode of every evaluation; null: the run seed + 1,000,003."""
    background: Optional[bool] = None
    """Play evaluations on a driver thread while training goes on; null: true for executor=ray, false for local
    (inline: deterministic)."""
    video: bool = False
    """Record every evaluation's episodes as mp4 into <run dir>/videos/eval-<env step>/ and log them to the
    trackers (TensorBoard, MLflow artifacts, W&B); needs the video extra (pip install 'rlrun[video]')."""


@dataclass
class ExportConfig(Declared):
    key_prefix: ClassVar[str] = "export"

    formats: list[str] = key(factory=lambda: ["torchscript"], choices=('torchscript', 'onnx'))
    """Export the greedy acting policy at the end of a run to <run dir>/export/ in these formats (torchscript ->
    policy.pt, onnx -> policy.onnx, needs the export extra); [] disables."""


@dataclass
class RecordDatasetConfig(Declared):
    """Record what the run's workers collect as a Minari dataset (``record_dataset.id=<id>``): every whole episode of
    the training run, written at its end under ``root`` (rlrun/execution/dataset_recorder.py). Local executor."""

    key_prefix: ClassVar[str] = "record_dataset"

    id: Optional[str] = None
    """The new dataset's id, Minari's syntax ``[namespace/]name-v<version>`` (e.g. ``hopper/replay-v0``); null: no
    recording."""
    env_steps: Optional[int] = key(None, "[1, inf)")
    """Keep only the episodes that began within the run's first N env steps (D4RL's "replay" data up to a point);
    null: the whole run."""
    root: Optional[str] = None
    """The folder of local datasets; null: $MINARI_DATASETS_PATH, else ~/.minari/datasets."""


@dataclass
class SweepConfig(Declared):
    """Settings of a sweep (``rlrun -m``); ignored by a single run. See rlrun/app/sweep.py."""

    key_prefix: ClassVar[str] = "sweep"

    resume: Optional[str] = None
    """A sweep directory to resume (rlrun -m <same overrides> sweep.resume=DIR): its completed jobs are skipped."""


@dataclass
class RunConfig(Declared):
    key_prefix: ClassVar[str] = ""

    algo: Any = MISSING
    env: Any = MISSING
    device: Any = MISSING
    executor: Any = MISSING
    logger: Any = MISSING
    seed: int = key(0, "[0, inf)")
    """Seeds torch, numpy, python and every env copy (env copy i gets seed + i)."""
    run_name: str = "${algo.name}-${env.id}-seed${seed}"
    """The run's name (run directory, MLflow run, summaries)."""
    stop: StopConfig = field(default_factory=StopConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    return_window: int = key(20, "[1, inf)")
    """Episodes in the `episode/return_mean` figure."""
    sweep: SweepConfig = field(default_factory=SweepConfig)
    resume: Optional[str] = None
    """A run directory (or checkpoint file) to continue from its last checkpoint: rlrun resume=<run dir>."""
    export: ExportConfig = field(default_factory=ExportConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    data: Any = None
    """The dataset an offline algorithm learns from (``data=minari data.id=...``); null: none (online learning)."""
    record_dataset: RecordDatasetConfig = field(default_factory=RecordDatasetConfig)


GROUPS = ("algo", "env", "device", "executor", "logger")
SCHEMA_GROUPS = (*GROUPS, "data")  # the groups whose options have a schema (schema/<group>/<name>)

# The schema of each built-in option; plugins add theirs through the registry (entry.schema).
_BUILTIN_SCHEMAS = {
    ("env", "gym"): GymEnvConfig,
    ("device", "device"): DeviceConfig,
    ("executor", "local"): LocalExecutorConfig,
    ("executor", "ray"): RayExecutorConfig,
    ("logger", "logger"): LoggerConfig,
    ("data", "minari"): MinariDataConfig,
}


class SchemaSource(ConfigSource):
    """The schemas as a Hydra config source: ``base_config`` (the run schema) and ``schema/<group>/<name>`` (each
    option's schema, which its YAML's defaults list names), each made a config node when a composition loads it.

    Why not Hydra's ConfigStore: storing makes every schema a node up front, importing every algorithm's config
    module, and each load deep-copies the stored node; a run composes six of them (twice: Hydra composes once for
    its run mode, once for the run). The names come from the registry's entries, which name a schema without
    importing it.
    """

    @staticmethod
    def scheme() -> str:
        return hydra_search_path.SCHEMA_SOURCE.split("://")[0]

    @staticmethod
    def _names(group: str) -> set[str]:
        """The options of ``schema/<group>``: the built-in schemas and the registry's entries that name one."""
        names = {name for (g, name) in _BUILTIN_SCHEMAS if g == group}
        if group in ("algo", "env", "executor"):
            names.update(name for name in registry.names(group) if registry.entry(group, name).schema is not None)
        return names

    def _schema(self, config_path: str) -> Any:
        """The schema class at ``config_path`` (``base_config.yaml``, ``schema/<group>/<name>.yaml``), else None."""
        path = config_path.removesuffix(".yaml")
        if path == "base_config":
            return RunConfig
        parts = path.split("/")
        if len(parts) != 3 or parts[0] != "schema" or parts[1] not in SCHEMA_GROUPS:
            return None
        group, name = parts[1], parts[2]
        if name not in self._names(group):
            return None
        return _BUILTIN_SCHEMAS.get((group, name)) or registry.schema(group, name)

    def load_config(self, config_path: str) -> ConfigResult:
        schema = self._schema(config_path)
        if schema is None:
            raise ConfigLoadError(f"Structured config not found {config_path}")
        # A copy per load: composition merges into what it loads. Copying a node costs a fifth of making it anew.
        node = copy.deepcopy(_schema_node(schema))
        return ConfigResult(config=node, path=hydra_search_path.SCHEMA_SOURCE, provider="rlrun",
                            header={"package": None})

    def available(self) -> bool:
        return True

    def is_group(self, config_path: str) -> bool:
        path = config_path.strip("/")
        return path in ("", "schema") or (path.startswith("schema/") and path[len("schema/"):] in SCHEMA_GROUPS)

    def is_config(self, config_path: str) -> bool:
        path = config_path.strip("/").removesuffix(".yaml")
        if path == "base_config":
            return True
        parts = path.split("/")
        return (len(parts) == 3 and parts[0] == "schema" and parts[1] in SCHEMA_GROUPS
                and parts[2] in self._names(parts[1]))

    def list(self, config_path: str, results_filter: Optional[ObjectType]) -> list[str]:
        path = config_path.strip("/")
        groups, configs = [], []
        if path == "":
            groups, configs = ["schema"], ["base_config"]
        elif path == "schema":
            groups = list(SCHEMA_GROUPS)
        elif self.is_group(path):
            configs = list(self._names(path.split("/")[1]))
        shown = (groups if results_filter in (None, ObjectType.GROUP) else []) + (
            configs if results_filter in (None, ObjectType.CONFIG) else [])
        return sorted(set(shown))


@functools.cache
def _schema_node(schema: Any) -> DictConfig:
    """The config node of a schema class, made once per process (keyed by the class itself)."""
    node = _open_maps(schema)
    return node if isinstance(node, DictConfig) else OmegaConf.structured(node)


def register_schemas() -> None:
    """Make the schemas reachable to Hydra: the config source :class:`SchemaSource` (its search-path entry is added by
    :mod:`rlrun.hydra_search_path`)."""
    from hydra.core.plugins import Plugins

    Plugins.instance().register(SchemaSource)


def _open_maps(schema: Any) -> Any:
    """The schema as a config node whose ``open_maps`` fields (user-named entries: algo=multiagent's policies and
    mapping) take new keys on the command line (``algo.policies={a:{algo:dqn}}``), where Hydra's struct mode would
    ask for ``+``; the schema class itself where it has none."""
    names = getattr(schema, "open_maps", ())
    if not names:
        return schema
    node = OmegaConf.structured(schema)
    for name in names:
        OmegaConf.set_struct(node[name], False)
    return node


def schema_for(group: str, node: DictConfig) -> Any:
    """The schema class that a composed group node must satisfy."""
    if group == "device":
        return DeviceConfig
    if group == "logger":
        return LoggerConfig
    name = node.get("name") if isinstance(node, DictConfig) else None
    if name is None:
        raise ConfigError(f"{group}: the config has no 'name' key, so rlrun cannot tell which {group} to build. "
                          f"Pick one with {group}=<option>.")
    try:
        return registry.schema(group, name)
    except RegistryError as e:
        raise ConfigError(f"{group}.name: {e}") from None


def compose(overrides: Sequence[str], check: bool = True):  # type: ignore[no-untyped-def]
    """The validated config for these overrides, composed as the CLI composes it (``check=False``: not validated,
    for showing an option whose mandatory keys are left to the user, as the config reference does)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    register_schemas()
    hydra_search_path.register()
    with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides))
    return validate(cfg) if check else cfg


def check_run_name(name: str) -> None:
    """Refuse a ``run_name`` that would put the run directory (``outputs/<date>/<time>-<run_name>``) elsewhere: an
    absolute path, a ``.`` or ``..`` part, a backslash or a control character. A ``/`` inside stays (the default
    name holds the env id, e.g. ``ALE/Pong-v5``: a directory below the time's)."""
    parts = name.split("/")
    bad = (name.startswith("/") or any(p in (".", "..") for p in parts) or "\\" in name
           or any(ord(c) < 32 or ord(c) == 127 for c in name))
    if bad:
        raise ConfigError(f"run_name={name!r}: it would place the run directory outside outputs/ (an absolute path, "
                          f"a . or .. part, a backslash or a control character); use letters, digits, _ . - "
                          f"(e.g. run_name=my-run).")


def validate(cfg: DictConfig) -> DictConfig:
    """Check every group against its schema (types, unknown keys, the declared ranges and choices of
    :mod:`rlrun.schema`) and the run settings that involve several keys; return cfg.

    Raises ConfigError naming the key, the bad value and what it may be.
    """
    for group in GROUPS:
        node = cfg.get(group)
        if not isinstance(node, DictConfig):
            raise ConfigError(f"{group}: missing; choose one with {group}=<option>.")
        schema = schema_for(group, node)
        _check_against(schema, node, prefix=group)
        check = getattr(schema, "check_config", None)  # a schema's checks across its own nested entries
        if check is not None:
            check(OmegaConf.to_container(node, resolve=True))
    top = {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k not in GROUPS and k != "hydra"}
    _check_against(RunConfig, OmegaConf.create(top), prefix="", skip=GROUPS)
    check_run_name(str(top.get("run_name", "")))
    stop = cfg.stop
    if (stop.env_steps is None and stop.wall_time_s is None and stop.episode_return_mean is None
            and stop.gradient_steps is None):
        raise ConfigError("stop: every stop condition is null, so the run would never end. Set at least one of "
                          "stop.env_steps, stop.wall_time_s, stop.episode_return_mean, stop.gradient_steps.")
    check_data(cfg)
    check_record_dataset(cfg)
    check_vectorization(cfg.env.get("vectorization"), cfg.executor.get("vector_mode"))
    multiagent = cfg.algo.name == "multiagent" or cfg.env.name == "pettingzoo"
    if multiagent and cfg.executor.name == "ray" and cfg.executor.num_workers != 1:
        raise ConfigError(f"executor.num_workers={cfg.executor.num_workers}: a multi-agent run on executor=ray has one "
                          f"sampler actor in this version; set executor.num_workers=1 (its env copies: "
                          f"executor.num_envs_per_worker).")
    if cfg.checkpoint.keep_best and cfg.eval.interval_env_steps is None:
        raise ConfigError("checkpoint.keep_best=true needs evaluations to rank checkpoints by: set "
                          "eval.interval_env_steps (e.g. eval.interval_env_steps=10000).")
    check_extras(cfg)
    return cfg


def check_data(cfg: DictConfig) -> None:
    """``data=...`` against the algorithm: an offline algorithm (its schema's ``offline``) needs a dataset and an
    online one takes none; an offline run takes no env steps, so its budget is gradient steps or time, and what is
    scheduled in env steps never comes."""
    data = cfg.get("data")
    offline = bool(getattr(schema_for("algo", cfg.algo), "offline", False))
    if data is not None:
        _check_against(MinariDataConfig, data, prefix="data")
        if not offline:
            raise ConfigError(f"data={data.name}: algo={cfg.algo.name} learns online from the env, not from a "
                              f"dataset; choose an offline algorithm (algo=bc, algo=iql, algo=cql) or drop data=.")
        if cfg.stop.gradient_steps is None and cfg.stop.wall_time_s is None:
            raise ConfigError("an offline run (data=...) takes no env steps, so stop.env_steps never comes: set "
                              "stop.gradient_steps (e.g. stop.gradient_steps=100000) or stop.wall_time_s.")
        for key_name in ("checkpoint.interval_env_steps", "eval.interval_env_steps"):
            group, _, leaf = key_name.partition(".")
            if cfg[group][leaf] is not None:
                raise ConfigError(f"{key_name}={cfg[group][leaf]}: an offline run (data=...) takes no env steps; "
                                  f"use checkpoint.interval_minutes, or evaluate with rlrun eval <run dir>.")
    elif offline:
        raise ConfigError(f"algo={cfg.algo.name} learns from a dataset: give one with data=minari "
                          f"data.id=<dataset id> (rlrun collect <run dir> dataset.id=<id> writes one).")


def check_record_dataset(cfg: DictConfig) -> None:
    """``record_dataset.id`` needs the workers' rollouts whole, in this process: an online run on the local executor
    whose workers return their observations (not Ape-X's, whose actors keep them; not a multi-agent sampler)."""
    record = cfg.get("record_dataset")
    if record is None or record.id is None:
        return
    where = f"record_dataset.id={record.id}"
    if cfg.get("data") is not None:
        raise ConfigError(f"{where}: an offline run (data=...) collects nothing to record; write a dataset from a "
                          f"run's policy with rlrun collect <run dir> dataset.id=<id>.")
    if cfg.executor.name != "local":
        raise ConfigError(f"{where}: recording runs on executor=local in this version, not executor="
                          f"{cfg.executor.name}; drop record_dataset.id or run with executor=local.")
    if cfg.algo.name in ("apex", "multiagent") or cfg.env.name == "pettingzoo":
        raise ConfigError(f"{where}: algo={cfg.algo.name} on env={cfg.env.name} does not hand its rollouts' "
                          f"observations to the executor, so nothing can be recorded; record a single-agent run "
                          f"of another algorithm (e.g. algo=dqn), or use rlrun collect <run dir> on its policy.")


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (wandb's import alone takes a second)."""
    import importlib.util
    import sys

    if module in sys.modules:
        return sys.modules[module] is not None  # None: a blocked import (how the tests take a package away)
    return importlib.util.find_spec(module) is not None


def check_extras(cfg: DictConfig) -> None:
    """Refuse, before anything starts, a setting whose optional extra is not installed: one line naming the key
    and the pip command (rather than a traceback minutes into the run, at the first evaluation or sink call)."""
    wandb = cfg.logger.get("wandb")
    if wandb is not None and wandb.get("enabled") and not installed("wandb"):
        raise ConfigError("logger.wandb.enabled=true (logger=wandb): the wandb package is not installed; "
                          "pip install 'rlrun[wandb]'.")
    if cfg.eval.get("video"):
        if cfg.eval.interval_env_steps is None:
            raise ConfigError("eval.video=true records the periodic evaluations: set eval.interval_env_steps "
                              "(e.g. eval.interval_env_steps=10000).")
        if cfg.algo.name == "multiagent" or cfg.env.name == "pettingzoo":
            raise ConfigError("eval.video=true: recording multi-agent runs is not there yet (as rlrun eval --video).")
        missing = [m for m in ("moviepy", "pygame") if not installed(m)]
        if missing:
            raise ConfigError(f"eval.video=true: {' and '.join(missing)} not installed (recording writes mp4 "
                              f"through moviepy; classic-control envs render with pygame); "
                              f"pip install 'rlrun[video]'.")


def _check_against(schema: Any, node: DictConfig, prefix: str, skip: tuple[str, ...] = ()) -> None:
    from dataclasses import fields

    valid = [f.name for f in fields(schema)]
    for name in node.keys():
        if name not in valid and name not in skip:
            where = f"{prefix}.{name}" if prefix else str(name)
            refusal = no_recurrent_core(where, schema.__name__)
            if refusal:
                raise ConfigError(refusal)
            raise ConfigError(f"{where}: unknown key for {schema.__name__}.{did_you_mean(str(name), valid)} "
                              f"Valid keys: {', '.join(valid)}.")
    try:
        typed = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.to_container(node, resolve=True))
    except OmegaConfBaseException as e:
        full = getattr(e, "full_key", "") or ""
        where = f"{prefix}.{full}" if prefix and full else (prefix or full)
        raise ConfigError(f"{where}: {_first_line(e)}") from None
    # the typed values (a float key given as 1 is 1.0 here): ranges and choices as the schema declares them
    values = OmegaConf.to_container(typed, resolve=True)
    check_declared(schema, {k: v for k, v in values.items() if k in node and k not in skip}, prefix)


def check_node(schema: Any, values: dict[str, Any], prefix: str) -> None:
    """Check plain ``values`` against ``schema`` as a config group's node is checked (unknown keys with the valid
    ones, types, declared ranges and choices), naming keys under ``prefix``."""
    _check_against(schema, OmegaConf.create({"name": getattr(schema, "name", None), **values}), prefix)


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
