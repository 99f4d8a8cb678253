"""CQL: conservative Q-learning (Kumar, Zhou, Tucker and Levine 2020, "Conservative Q-Learning for Offline
Reinforcement Learning"), CQL(H) on SAC (as the paper's MuJoCo experiments and CORL's ``cql.py``, Tarasov et al.
2022). Box actions; learns from a dataset.

SAC learning from a fixed dataset overestimates Q on actions the dataset never took, and its policy chases those
errors. CQL adds to each critic's loss :math:`\\alpha_{cql} (\\log\\sum_a \\exp Q(s, a) - Q(s, a_{data}))`: Q is
pushed down where the soft maximum over all actions puts it and up on the dataset's actions (the paper's Eq. 4).
The logsumexp over a continuous action is estimated by importance sampling (the paper's Appendix F): actions drawn
uniformly, from the policy at s and from the policy at s', each Q divided by its proposal's density.

Read top to bottom: the regulariser (a pure function), the agent (SAC's, with its own update), the plan. CQL is a
true subclass of SAC's agent (its networks, temperature, acting and weights); the shared offline plan is
``rlrun/algos/offline.py``. Its config schema is ``rlrun.algos.cql_config.CQLConfig``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from rlrun import spaces as sp
from rlrun.algos.base import CONTINUOUS
from rlrun.algos.cql_config import CQLConfig
from rlrun.algos.off_policy_continuous import frozen
from rlrun.algos.offline import OfflinePlan, learning_batch, obs_normalizer
from rlrun.algos.sac import SACAgent, sac_actor_loss, sac_critic_loss, sac_critic_target
from rlrun.components.base import api
from rlrun.components.optimizers import optimizer_step
from rlrun.components.squashed_gaussian import SquashedDiagGaussian
from rlrun.metric_names import ALPHA, ENTROPY, LOSS_ACTOR, LOSS_CQL, LOSS_CRITIC, LOSS_TEMPERATURE, Q_MEAN

# ---------------------------------------------------------------------------------------------------- regulariser


def cql_regularizer(q_proposed: torch.Tensor, log_density: torch.Tensor, q_data: torch.Tensor,
                    temperature: float = 1.0) -> torch.Tensor:
    r"""CQL(H)'s conservative term for one critic (Kumar et al. 2020, Eq. 4, with Appendix F's importance-sampled
    logsumexp):

    .. math:: E_s\Big[T \log \sum_{k} \exp\big((Q(s, a_k) - \log \mu(a_k|s)) / T\big) - Q(s, a_{data})\Big]

    ``q_proposed`` ``[B, K]``: Q at ``K`` proposed actions per state; ``log_density`` ``[B, K]``: the log density of
    the proposal each was drawn from (detached); ``q_data`` ``[B]``: Q at the dataset's action; ``temperature``
    :math:`T`. The constant ``-log K`` of the sample mean is left out, as in the reference implementation."""
    soft_max = temperature * torch.logsumexp((q_proposed - log_density.detach()) / temperature, dim=1)
    return (soft_max - q_data).mean()


# ---------------------------------------------------------------------------------------------------- agent


class CQLAgent(SACAgent):
    """SAC's agent (twin critics with targets, squashed-Gaussian actor, learned temperature) whose critic step adds
    :func:`cql_regularizer` on both critics; it learns from dataset batches (:meth:`learning_batch`)."""

    def __init__(self, cfg: CQLConfig, seed: int = 0, name: str = "cql_agent") -> None:
        super().__init__(cfg, seed, name)
        self.obs_normalizer = obs_normalizer(cfg)

    def _build_networks(self, obs: sp.Space, unit: sp.Box) -> None:
        if self.obs_normalizer is not None:
            self.build_child(self.obs_normalizer, obs=obs)
        super()._build_networks(obs, unit)

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        """SAC's acting, on observations standardised with ``algo.normalize_obs``."""
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        return super().get_actions(obs, explore)

    def learning_batch(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A dataset batch with the discount and the action in ``[-1, 1]``."""
        return learning_batch(batch, self.cfg.gamma, self.action_scale, self.action_bias)

    def _policy(self, obs: torch.Tensor) -> SquashedDiagGaussian:
        return SquashedDiagGaussian(*self.actor(obs), event_rank=len(self.action_shape))

    def _proposed_q(self, obs: torch.Tensor, next_obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Both critics at ``cql_n_actions`` actions per state from each proposal (uniform in ``[-1, 1]^d``, the
        policy at s, the policy at s'; sampled without gradient), ``[B, 3K]`` each, and the log densities."""
        k, n = self.cfg.cql_n_actions, obs.shape[0]
        obs_k, next_k = obs.repeat_interleave(k, dim=0), next_obs.repeat_interleave(k, dim=0)
        with torch.no_grad():
            a_now, logp_now = self._policy(obs_k).rsample_with_log_prob()
            a_next, logp_next = self._policy(next_k).rsample_with_log_prob()
        a_uniform = torch.rand_like(a_now) * 2.0 - 1.0
        log_uniform = torch.full_like(logp_now, -math.log(2.0) * math.prod(self.action_shape))  # density 2^-d
        actions = torch.cat([a_uniform, a_now, a_next])
        q1, q2 = self.critic(torch.cat([obs_k, obs_k, obs_k]), actions)  # every proposal is Q at s

        def per_state(x: torch.Tensor) -> torch.Tensor:  # [3 B K] -> [B, 3 K]
            return torch.cat([part.reshape(n, k) for part in x.chunk(3)], dim=1)

        return per_state(q1), per_state(q2), per_state(torch.cat([log_uniform, logp_now, logp_next]))

    @api
    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One CQL gradient step on a :meth:`learning_batch`:

        1. the critics on :func:`~rlrun.algos.sac.sac_critic_loss` towards ``r + discount min Q'(s', a')``, ``a' ~
           pi(s')``, without the entropy bonus in the target (CORL's ``backup_entropy=False``), plus ``cql_alpha``
           times :func:`cql_regularizer` of each critic;
        2. the actor on :func:`~rlrun.algos.sac.sac_actor_loss` (the critics frozen), and the temperature as SAC;
        3. Polyak-average the target critics.

        Returns detached metrics: ``loss`` (the critics' total), ``loss/critic`` (the TD part), ``loss/cql``,
        ``loss/actor``, ``loss/temperature``, ``policy/alpha``, ``policy/entropy``, ``q/mean``."""
        obs, next_obs, cfg = batch["obs"], batch["next_obs"], self.cfg
        alpha = self.temperature.alpha()
        with torch.no_grad():
            next_a, next_logp = self._policy(next_obs).rsample_with_log_prob()
            target = sac_critic_target(batch["reward"], batch["discount"], *self.target_critic(next_obs, next_a),
                                       next_logp, 0.0)
        q1, q2 = self.critic(obs, batch["action"])
        td_loss = sac_critic_loss(q1, q2, target)
        p1, p2, log_density = self._proposed_q(obs, next_obs)
        conservative = cfg.cql_alpha * (cql_regularizer(p1, log_density, q1, cfg.cql_temperature)
                                        + cql_regularizer(p2, log_density, q2, cfg.cql_temperature))
        critic_loss = optimizer_step(self.critic_optimizer, td_loss + conservative, cfg.max_grad_norm)["loss"]

        a_pi, logp_pi = self._policy(obs).rsample_with_log_prob()
        with frozen(self.critic):  # the actor's step needs dQ/da, not the critic's weight gradients
            loss = sac_actor_loss(logp_pi, *self.critic(obs, a_pi), alpha)
            actor_loss = optimizer_step(self.actor_optimizer, loss, cfg.max_grad_norm)["loss"]
        out = {"loss": critic_loss, LOSS_CRITIC: td_loss.detach(), LOSS_CQL: conservative.detach(),
               LOSS_ACTOR: actor_loss, Q_MEAN: 0.5 * (q1 + q2).detach().mean(), ALPHA: alpha,
               ENTROPY: -logp_pi.detach().mean()}
        if self.alpha_optimizer is not None:
            out[LOSS_TEMPERATURE] = optimizer_step(self.alpha_optimizer,
                                                     self.temperature.loss(logp_pi.detach()))["loss"]
        self.target_sync.step(self.critic, self.target_critic)
        return out


# ---------------------------------------------------------------------------------------------------- plan


class CQL(OfflinePlan):
    """The shared offline plan (:class:`OfflinePlan`) with the CQL agent; Box actions only."""

    takes_actions = CONTINUOUS
    agent_class = CQLAgent
