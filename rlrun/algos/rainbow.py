"""Rainbow (Hessel, Modayil, van Hasselt, Schaul, Ostrovski, Dabney, Horgan, Piot, Azar & Silver, "Rainbow:
Combining Improvements in Deep Reinforcement Learning", AAAI 2018): C51 (rlrun/algos/c51.py) with noisy nets, a
dueling head, double Q, prioritised replay and n-step returns. Every part is a switch of C51's agent, so Rainbow is
C51's agent and DQN's plan with its own config schema, ``rlrun.algos.rainbow_config.RainbowConfig``, whose defaults
turn the parts on; ``algo=c51 algo.noisy=true ...`` composes the same agent part by part (an ablation).
"""

from __future__ import annotations

from rlrun.algos.c51 import C51


class Rainbow(C51):
    """C51's plan and agent; the parts are on in :class:`~rlrun.algos.rainbow_config.RainbowConfig`."""
