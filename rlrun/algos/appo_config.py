"""The config schema of APPO (``algo=appo``, rlrun/algos/appo.py): each key's default, declared range and
docstring, said once here. ``conf/algo/appo.yaml`` selects it; the registry names it
(``registry.schema("algo", "appo")``). No heavy imports: the CLI loads every schema at start-up."""

from __future__ import annotations

from dataclasses import dataclass

from rlrun.algos.impala_config import IMPALAConfig
from rlrun.schema import key


@dataclass
class APPOConfig(IMPALAConfig):
    """APPO: IMPALA's plan with PPO's clipped surrogate on V-trace advantages (RLlib's APPO; rlrun/algos/appo.py).

    Every IMPALA key, plus the surrogate's; its defaults said here only, each with its source.
    """

    name: str = "appo"
    clip_eps: float = key(0.4, "(0, inf)")
    """Clip range of the probability ratio to the behaviour policy (dimensionless; RLlib APPO clip_param)."""
    num_epochs: int = key(4, "[1, inf)")
    """Gradient steps on each learner batch (RLlib's num_sgd_iter). Default: tuned here (RLlib APPO num_sgd_iter 1,
    cartpole-appo 6)."""
    use_kl_loss: bool = False
    """Add kl_coef * KL(behaviour || current policy) to the loss. Default: RLlib APPO use_kl_loss."""
    kl_coef: float = key(1.0, "[0, inf)")
    """Weight of the KL penalty (use_kl_loss only). Default: RLlib APPO kl_coeff."""
