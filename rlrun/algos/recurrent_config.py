"""Keys of the algorithms that can carry a recurrent core (PPO, A2C, IMPALA, APPO): ``algo.recurrent`` and
``algo.recurrent_size``. A mixin of their schemas; the network is rlrun/components/recurrent_actor_critic.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rlrun.schema import Declared, key

RECURRENT_ALGOS = ("ppo", "a2c", "impala", "appo")
"""The algorithms whose schemas have these keys (the message that refuses ``algo.recurrent`` elsewhere names them)."""


@dataclass
class RecurrentKeys(Declared):
    """A recurrent core between torso and heads: torso -> core -> policy and value heads."""

    key_prefix: ClassVar[str] = "algo"

    recurrent: str = key("none", choices=("none", "lstm", "gru"))
    """none | lstm | gru: a recurrent core between torso and heads. The acting policy keeps a state per env copy
    (zeroed where an episode starts), records it at each rollout's first step, and the learner re-unrolls every
    sequence from it. Default: none (feed-forward)."""
    recurrent_size: int = key(256, "[1, inf)")
    """Units of the recurrent core (hidden state width; with recurrent=lstm|gru). Default: Espeholt et al. 2018 /
    RLlib lstm_cell_size."""
