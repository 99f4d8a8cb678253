"""The config schema of IMPALA (``algo=impala``, rlrun/algos/impala.py): each key's default, declared range and
docstring, said once here. ``conf/algo/impala.yaml`` selects it; the registry names it
(``registry.schema("algo", "impala")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rlrun.algos.recurrent_config import RecurrentKeys
from rlrun.schema import key


@dataclass
class IMPALAConfig(RecurrentKeys):
    """IMPALA (Espeholt et al. 2018): asynchronous actors, a V-trace actor-critic learner (rlrun/algos/impala.py).

    The defaults are said here only, each with its source (conf/algo/impala.yaml selects this schema): RLlib's IMPALA
    defaults and its CartPole tuned example, tuned where marked. The Atari values of the paper are in
    conf/algo_env/impala_atari.yaml.
    """

    key_prefix: ClassVar[str] = "algo"

    name: str = "impala"
    learner: str = key("sync", choices=('sync', 'thread'))
    """sync: one learner update per training step, in it (deterministic on the local executor) | thread: the
    learner on its own thread fed by a bounded queue of unroll batches (IMPALA/TorchBeast: actors keep acting while
    it learns; the Atari presets)."""
    learner_queue: int = key(2, "[1, inf)")
    """Thread mode: learner batches queued (bounded: when full the plan waits, IMPALA's backpressure)."""
    lr: float = key(5e-4, "(0, inf)")
    """Learning rate at env step 0 (annealed linearly to 0 over total_env_steps when anneal_lr). Default: RLlib IMPALA
    lr."""
    optimizer: str = key("adam", choices=('adam', 'rmsprop'))
    """adam | rmsprop (Espeholt et al. 2018). Default: RLlib IMPALA opt_type (the paper: rmsprop)."""
    rmsprop_alpha: float = key(0.99, "[0, 1)")
    """RMSProp smoothing constant (the paper's "decay"; rmsprop only). Default: Espeholt et al. 2018 Table G.1."""
    rmsprop_momentum: float = key(0.0, "[0, 1)")
    """RMSProp momentum (rmsprop only). Default: Espeholt et al. 2018 Table G.1."""
    optimizer_eps: float = key(1e-8, "(0, inf)")
    """The optimizer's epsilon (paper's RMSProp: 0.01). Default: torch Adam default, as RLlib's torch IMPALA (paper's
    RMSProp: 0.01)."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over total_env_steps (the paper's Atari schedule). Default: RLlib IMPALA:
    constant."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps of the LR schedule; the YAML default is the run's budget ${stop.env_steps}; null: constant LR."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: RLlib / Espeholt et al. 2018."""
    unroll_length: int = key(20, "[1, inf)")
    """Agent steps per env copy in one unroll (T); a worker's sample is T x its env copies. Default: Espeholt et al.
    2018 Table G.1 (RLlib: 50)."""
    batch_size: int = key(8, "[1, inf)")
    """Env-copy unrolls per learner update (B; rounded up to whole worker samples of num_envs unrolls each). Default:
    tuned here (paper: 32, RLlib: 500 steps)."""
    vf_coef: float = key(0.5, "[0, inf)")
    """Weight of the baseline (value) loss 0.5 (v_s - V)^2. Default: Espeholt et al. 2018 / RLlib vf_loss_coeff."""
    ent_coef: float = key(0.01, "[0, inf)")
    """Weight of the entropy bonus (nats). Default: Espeholt et al. 2018 / RLlib entropy_coeff."""
    clip_rho_threshold: Optional[float] = key(1.0, "(0, inf)")
    """V-trace rho-bar: clip of the importance weight in the value targets; null: no clipping. Default: Espeholt et al.
    2018 Sec. 4 / RLlib vtrace_clip_rho_threshold."""
    clip_pg_rho_threshold: Optional[float] = key(1.0, "(0, inf)")
    """V-trace rho-bar of the policy-gradient advantage (IMPALA only; APPO's ratio replaces it); null: no clip.
    Default: RLlib vtrace_clip_pg_rho_threshold."""
    loss_reduction: str = key("mean", choices=('mean', 'sum'))
    """mean | sum of the loss over the T x B items (the paper's and TorchBeast's code sum). Default: RLlib's torch
    IMPALA: mean (paper / TorchBeast: sum)."""
    max_grad_norm: Optional[float] = key(40.0, "(0, inf)")
    """Global gradient-norm clip per gradient step; null disables. Default: Espeholt et al. 2018 Table G.1 / RLlib
    grad_clip."""
    network: str = "auto"
    """Torso: auto (nature_cnn for uint8 images [C, H, W], else mlp) | mlp | nature_cnn | impala_resnet."""
    action_mask: str = key("auto", choices=("auto", "off"))
    """Invalid-action masks (Discrete actions): auto (when the observation carries an ``action_mask`` entry, or the
    env's info dict does, illegal actions are never chosen and get no probability, in acting and in learning) | off
    (the mask is ignored). See docs/action-masks.md."""
    hidden_sizes: list[int] = key(factory=lambda: [256, 256], items="[1, inf)")
    """Hidden layer widths of an MLP torso (shared by policy and value). Default: RLlib fcnet_hiddens default."""
    activation: str = key("tanh", choices=('relu', 'tanh', 'elu'))
    """MLP torso activation: relu | tanh | elu. Default: RLlib fcnet_activation default."""
    shared_torso: bool = False
    """One torso (and recurrent core) for policy and value (IMPALA's layout); false: the critic has its own.
    Default: tuned here: a shared one learns CartPole slower."""
    orthogonal_init: bool = True
    """Orthogonal init (gain sqrt 2 torso, 0.01 policy layer, 1 value layer), zero biases. Default: CleanRL /
    Baselines."""
