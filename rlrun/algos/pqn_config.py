"""The config schema of PQN (``algo=pqn``, rlrun/algos/pqn.py): each key's default, declared range and docstring,
said once here. ``conf/algo/pqn.yaml`` selects it; the registry names it (``registry.schema("algo", "pqn")``). No
heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rlrun.schema import Declared, key


@dataclass
class PQNConfig(Declared):
    """PQN, parallelised Q-learning (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning"): epsilon-
    greedy rollouts of vectorised env copies, Q(lambda) targets, epochs of minibatch steps on a LayerNorm Q-network;
    no replay, no target network.

    The defaults are CleanRL's pqn.py (its Args, for CartPole-v1), said here only (conf/algo/pqn.yaml selects this
    schema). One rollout is rollout_steps x executor.num_envs env steps: run it with several env copies (CleanRL: 4).
    """

    key_prefix: ClassVar[str] = "algo"

    name: str = "pqn"
    lr: float = key(2.5e-4, "(0, inf)")
    """RAdam learning rate at env step 0 (annealed linearly to 0 over total_env_steps when anneal_lr). Default:
    CleanRL pqn.py learning_rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over total_env_steps. Default: CleanRL pqn.py anneal_lr."""
    total_env_steps: Optional[int] = key(None, "[1, inf)")
    """Env steps of the LR schedule; the YAML default is the run's budget ${stop.env_steps}; null: constant LR."""
    gamma: float = key(0.99, "(0, 1]")
    """Discount factor per agent step. Default: CleanRL pqn.py."""
    q_lambda: float = key(0.65, "[0, 1]")
    """lambda of the Q(lambda) targets: 0 = one-step Q-learning targets, 1 = returns bootstrapped at the rollout's
    end. Default: CleanRL pqn.py q_lambda."""
    rollout_steps: int = key(128, "[1, inf)")
    """Agent steps per env copy per update (T). Default: CleanRL pqn.py num_steps."""
    num_epochs: int = key(4, "[1, inf)")
    """Passes over the rollout per update. Default: CleanRL pqn.py update_epochs."""
    num_minibatches: int = key(4, "[1, inf)")
    """Minibatches per epoch: each is (rollout_steps x env copies) / num_minibatches steps. Default: CleanRL pqn.py
    num_minibatches."""
    max_grad_norm: Optional[float] = key(10.0, "(0, inf)")
    """Global gradient-norm clip per gradient step; null disables. Default: CleanRL pqn.py."""
    epsilon_start: float = key(1.0, "[0, 1]")
    """Epsilon-greedy exploration at env step 0. Default: CleanRL pqn.py start_e."""
    epsilon_end: float = key(0.05, "[0, 1]")
    """Epsilon after the schedule. Default: CleanRL pqn.py end_e."""
    epsilon_decay_steps: int = key(250_000, "[1, inf)")
    """Env steps (summed over env copies) of the linear decay from epsilon_start to epsilon_end; epsilon is set
    once per rollout. Default: CleanRL pqn.py, exploration_fraction 0.5 of its 500k total_timesteps."""
    bootstrap_truncated: bool = True
    """At a time-limit truncation, bootstrap the target from max Q of the episode's real final observation (Pardo et
    al. 2018). false: treat it as a termination, as CleanRL's pqn.py does (done = terminated or truncated): for
    comparing with it. Default: bootstrap, as rlrun's other algorithms."""
    network: str = "auto"
    """Torso: auto (nature_cnn for uint8 images [C, H, W], minatar_cnn for MinAtar's bool ones, else mlp) | mlp |
    minatar_cnn | nature_cnn | impala_resnet (layer_norm: mlp and minatar_cnn only)."""
    action_mask: str = key("auto", choices=("auto", "off"))
    """Invalid-action masks (Discrete actions): auto (when the observation carries an ``action_mask`` entry, or the
    env's info dict does, illegal actions are never chosen and get no probability, in acting and in learning) | off
    (the mask is ignored). See docs/action-masks.md."""
    hidden_sizes: list[int] = key(factory=lambda: [120, 84], items="[1, inf)")
    """Hidden layer widths of an MLP torso. Default: CleanRL pqn.py QNetwork."""
    activation: str = key("relu", choices=('relu', 'tanh', 'elu'))
    """Torso activation: relu | tanh | elu. Default: CleanRL pqn.py."""
    layer_norm: bool = True
    """A LayerNorm before each hidden activation: what keeps PQN's off-policy TD stable without a target network
    (Gallici et al. 2024, Section 4). Default: CleanRL pqn.py."""
    orthogonal_init: bool = True
    """Orthogonal weights (gain sqrt 2, every layer, the Q layer too) and zero biases. Default: CleanRL pqn.py
    layer_init."""
