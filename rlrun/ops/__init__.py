"""Pure tensor ops for RL: return/advantage estimators and V-trace.

All functions are time-major (``[T, B]``) and use the done convention
``discounts[t] = gamma * (1 - done_t)``, with ``done_t`` the flag returned by
the step that produced ``rewards[t]`` (see :mod:`rlrun.ops.returns`).
"""

from rlrun.ops.returns import discounted_returns, gae, nstep_returns
from rlrun.ops.vtrace import VTraceReturns, vtrace

__all__ = ["VTraceReturns", "discounted_returns", "gae", "nstep_returns", "vtrace"]
