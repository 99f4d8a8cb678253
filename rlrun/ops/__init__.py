"""Pure tensor ops for RL: return/advantage estimators, V-trace, reshapes of time-major rollouts and statistics.

All functions are time-major (``[T, B]``) and use the done convention
``discounts[t] = gamma * (1 - done_t)``, with ``done_t`` the flag returned by
the step that produced ``rewards[t]`` (see :mod:`rlrun.ops.returns`).
"""

from rlrun.ops.action_mask import apply_action_mask
from rlrun.ops.returns import discounted_returns, gae, nstep_returns, q_lambda_returns, truncation_aware_gae
from rlrun.ops.stats import explained_variance
from rlrun.ops.time_major import flatten_time, map_nest, next_obs_rows
from rlrun.ops.vtrace import VTraceReturns, vtrace

__all__ = ["VTraceReturns", "apply_action_mask", "discounted_returns", "explained_variance", "flatten_time", "gae",
           "map_nest", "next_obs_rows", "nstep_returns", "q_lambda_returns", "truncation_aware_gae",
           "vtrace"]
