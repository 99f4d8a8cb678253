"""SAC: soft actor-critic with twin Q-networks and a learned temperature (Haarnoja et al. 2018, "Soft Actor-Critic
Algorithms and Applications", Algorithm 1; as Stable-Baselines3's SAC and CleanRL's sac_continuous_action.py).
Continuous (Box) actions only.

Read top to bottom: the losses (pure functions), the squashed-Gaussian actor, the temperature, the agent (its
networks, acting and update), then the plan. What SAC shares with TD3 and DDPG (acting in the Box bounds, replay,
the uniform warm-up, observe, the weights, the plan) is ``rlrun/algos/off_policy_continuous.py``; the twin
Q-networks are ``rlrun/components/continuous_networks.py``. Its config schema is
``rlrun.algos.sac_config.SACConfig`` (each key documented there and in conf/algo/sac.yaml).

The policy acts in ``[-1, 1]^d`` (``tanh`` of a Gaussian sample, ``rlrun.components.squashed_gaussian``); the
shared agent base rescales to the Box bounds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.algos.off_policy_continuous import ContinuousOffPolicy, ContinuousOffPolicyAgent, frozen
from rlrun.algos.sac_config import SACConfig
from rlrun.components.base import Component, api
from rlrun.components.continuous_networks import QFunction, TwinQ
from rlrun.components.networks import MLP
from rlrun.components.optimizers import optimizer_step
from rlrun.components.optimizers.adam import Adam
from rlrun.components.squashed_gaussian import SquashedDiagGaussian, SquashedGaussianHead
from rlrun.metric_names import ALPHA, ENTROPY, LOSS_ACTOR, LOSS_CRITIC, LOSS_TEMPERATURE, Q_MEAN

__all__ = ["SAC", "Actor", "QFunction", "SACAgent", "Temperature", "TwinQ", "sac_actor_loss", "sac_critic_loss",
           "sac_critic_target", "sac_temperature_loss"]  # QFunction, TwinQ: the shared critics, named here too

# ---------------------------------------------------------------------------------------------------- losses


def sac_critic_target(rewards: torch.Tensor, discounts: torch.Tensor, next_q1: torch.Tensor, next_q2: torch.Tensor,
                      next_log_prob: torch.Tensor, alpha: torch.Tensor | float) -> torch.Tensor:
    r"""The soft Bellman target of both Q-networks (Haarnoja et al. 2018b, Sec. 4.2: the target of the soft Bellman
    residual :math:`J_Q`, with the soft value :math:`V(s') = E_{a'}[Q(s', a') - \alpha \log\pi(a'|s')]` of the
    target networks, and the minimum of two Q-functions, as in SAC's Algorithm 1 and Fujimoto et al. 2018):

    .. math:: y = r + d \big(\min(Q'_1(s', a'), Q'_2(s', a')) - \alpha \log\pi(a'|s')\big), \; a' \sim \pi(\cdot|s')

    with ``d = gamma * (1 - terminated)``: a termination ends the return, a time-limit truncation bootstraps from the
    real final observation. All arguments ``[B]`` (``alpha`` a scalar); no gradient flows through the target.
    """
    return rewards + discounts * (torch.minimum(next_q1, next_q2) - alpha * next_log_prob)


def sac_critic_loss(q1: torch.Tensor, q2: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    r"""Soft Q-function loss of both networks (Haarnoja et al. 2018b, Sec. 4.2, :math:`J_Q`; one per network,
    summed, as Stable-Baselines3):
    :math:`J_Q = \tfrac12 E[(Q_1(s,a) - y)^2] + \tfrac12 E[(Q_2(s,a) - y)^2]` over a batch ``[B]``; ``target`` is
    detached."""
    target = target.detach()
    return 0.5 * ((q1 - target).pow(2).mean() + (q2 - target).pow(2).mean())


def sac_actor_loss(log_prob: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor,
                   alpha: torch.Tensor | float) -> torch.Tensor:
    r"""Policy loss (Haarnoja et al. 2018b, Sec. 4.2, :math:`J_\pi` with the reparameterised action):
    :math:`J_\pi = E_s[\alpha \log\pi(a|s) - \min(Q_1(s,a), Q_2(s,a))]`, ``a = tanh(mu + sigma eps)`` a
    differentiable sample of the current policy; ``[B]`` each, ``alpha`` a detached scalar."""
    return (alpha * log_prob - torch.minimum(q1, q2)).mean()


def sac_temperature_loss(log_alpha: torch.Tensor, log_prob: torch.Tensor, target_entropy: float) -> torch.Tensor:
    r"""Temperature loss (Haarnoja et al. 2018b, Sec. 5):
    :math:`J(\alpha) = E_a[-\alpha \log\pi(a|s) - \alpha \bar H] = -E[\alpha (\log\pi(a|s) + \bar H)]`
    with :math:`\alpha = e^{\log\alpha}` (optimised in log space, as CleanRL; ``log_prob`` ``[B]`` detached).
    Its gradient in :math:`\log\alpha` is :math:`-\alpha (E[\log\pi] + \bar H)`: alpha grows while the entropy
    estimate :math:`-E[\log\pi]` is below the target :math:`\bar H`, and shrinks while it is above."""
    return -(log_alpha.exp() * (log_prob.detach() + target_entropy)).mean()


# ---------------------------------------------------------------------------------------------------- networks


class Actor(Component):
    """obs -> ``(mean, log_std)`` of the squashed Gaussian policy: an MLP torso and a :class:`SquashedGaussianHead`."""

    def __init__(self, hidden_sizes: list[int], activation: str, log_std_min: float, log_std_max: float,
                 name: str = "actor") -> None:
        super().__init__(name)
        self.torso = MLP(hidden_sizes, activation, name="torso")
        self.head = SquashedGaussianHead(log_std_min, log_std_max, name="head")

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.build_child(self.torso, obs=obs)
        self.build_child(self.head, x=self.torso.output("forward"), actions=actions)
        self.output_spaces["forward"] = self.head.output_spaces["get_policy"]

    @api
    def forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head.get_policy(self.torso(obs))


class Temperature(Component):
    """The entropy temperature alpha, held as ``log_alpha`` (a parameter when learnt, a buffer when fixed), with its
    entropy target (default ``-|A|``, Haarnoja et al. 2018b, Sec. 5 / Table 1)."""

    def __init__(self, init_alpha: float = 1.0, learn: bool = True, target_entropy: float | None = None,
                 name: str = "temperature") -> None:
        """``init_alpha``: alpha at the start (> 0); ``learn``: a learnt parameter (else fixed); ``target_entropy``:
        the entropy target in nats (None: minus the number of action dimensions)."""
        super().__init__(name)
        if not init_alpha > 0:
            raise ValueError(f"init_alpha must be > 0, got {init_alpha}")
        self.init_alpha, self.learn, self._target = float(init_alpha), bool(learn), target_entropy

    def _build(self, actions: sp.Space) -> None:
        self.require("actions", actions, kinds=(sp.Box,))
        self.target_entropy = (-float(sp.flat_dim(actions)) if self._target is None else float(self._target))
        value = torch.tensor(float(np.log(self.init_alpha)), dtype=torch.float32)
        if self.learn:
            self.log_alpha = nn.Parameter(value)
        else:
            self.register_buffer("log_alpha", value)
        self.output_spaces["alpha"] = sp.Box(0.0, np.inf, (), np.float32)

    @api
    def alpha(self) -> torch.Tensor:
        """``exp(log_alpha)``, detached (a scalar)."""
        return self.log_alpha.detach().exp()

    @api
    def loss(self, log_prob: torch.Tensor) -> torch.Tensor:
        """:func:`sac_temperature_loss` of a batch of log-probabilities of fresh policy samples."""
        return sac_temperature_loss(self.log_alpha, log_prob, self.target_entropy)


# ---------------------------------------------------------------------------------------------------- agent


class SACAgent(ContinuousOffPolicyAgent):
    """The SAC agent: what :class:`ContinuousOffPolicyAgent` shares (acting in the Box bounds, the uniform warm-up,
    observe, weights) with a squashed-Gaussian actor, twin critics and a temperature; get_actions samples the
    policy (the squashed mean when not exploring); update is one critic, actor and temperature step and a target
    sync."""

    def __init__(self, cfg: SACConfig, seed: int = 0, name: str = "sac_agent") -> None:
        super().__init__(cfg, seed, name)
        hidden, act = list(cfg.hidden_sizes), cfg.activation
        self.actor = Actor(hidden, act, cfg.log_std_min, cfg.log_std_max, name="actor")
        self.critic = TwinQ(hidden, act, name="critic")
        self.target_critic = TwinQ(hidden, act, name="target_critic")
        self.temperature = Temperature(cfg.init_alpha, cfg.learn_alpha, cfg.target_entropy)

    def _build_networks(self, obs: sp.Space, unit: sp.Box) -> None:
        self.build_child(self.actor, obs=obs, actions=unit)
        self.build_child(self.critic, obs=obs, actions=unit)
        self.build_target_copy(self.target_critic, self.critic, obs=obs, actions=unit)
        self.build_child(self.temperature, actions=unit)
        # fused=True: one Adam kernel per optimizer instead of ~10 small ops per parameter tensor (the same update
        # rule; DQN does the same)
        cfg = self.cfg
        self.actor_optimizer = Adam(self.actor.parameters(), lr=cfg.actor_lr, fused=True)
        self.critic_optimizer = Adam(self.critic.parameters(), lr=cfg.critic_lr, fused=True)
        self.alpha_optimizer = (Adam(self.temperature.parameters(), lr=cfg.alpha_lr, fused=True)
                                if cfg.learn_alpha else None)

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        named = {"actor": self.actor_optimizer, "critic": self.critic_optimizer, "alpha": self.alpha_optimizer}
        return {k: v for k, v in named.items() if v is not None}

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        """Env actions ``[B, *S]`` in the Box bounds. ``explore=False``: the squashed mean ``tanh(mu(s))``
        (evaluation, export). ``explore=True``: uniform random actions while fewer than ``learning_starts`` env
        steps were observed, then samples of the policy (the torch generator of the acting worker drives both)."""
        if self._warming_up(explore):
            return self._to_env(self._uniform_actions(obs))
        dist = SquashedDiagGaussian(*self.actor(obs), event_rank=len(self.action_shape))
        return self._to_env(dist.sample() if explore else dist.deterministic())

    @api
    def update(self, batch: dict | None = None) -> dict[str, torch.Tensor]:
        """One SAC gradient step on ``batch`` (default: ``batch_size`` transitions sampled from replay; keys obs,
        action in [-1, 1], reward, next_obs, discount = gamma (1 - terminated)):

        1. one actor pass over ``[obs; next_obs]``: reparameterised samples and log-probabilities; the ``next_obs``
           half (detached) feeds the target, the ``obs`` half the actor and temperature losses (the actor's
           parameters do not change before step 3, so this equals CleanRL's two separate passes);
        2. critic step on :func:`sac_critic_loss` towards :func:`sac_critic_target` (target networks, current alpha);
        3. actor step on :func:`sac_actor_loss` with the just-updated critic (its parameters frozen meanwhile);
        4. temperature step on :func:`sac_temperature_loss` (when learnt);
        5. Polyak-average the target critic.

        Returns detached metrics: ``loss`` (the critic's), ``loss/critic``, ``loss/actor``, ``loss/temperature``,
        ``policy/alpha`` (before the step), ``policy/entropy`` (``-mean log pi`` of the samples), ``q/mean``.
        """
        if batch is None:
            batch = self.memory.sample(self.cfg.batch_size)
        obs, next_obs = batch["obs"], batch["next_obs"]
        n = batch["reward"].shape[0]
        alpha = self.temperature.alpha()
        dist = SquashedDiagGaussian(*self.actor(_cat(obs, next_obs)), event_rank=len(self.action_shape))
        a_all, logp_all = dist.rsample_with_log_prob()
        a_pi, logp_pi = a_all[:n], logp_all[:n]
        with torch.no_grad():
            next_q1, next_q2 = self.target_critic(next_obs, a_all[n:])
            target = sac_critic_target(batch["reward"].float(), batch["discount"].float(), next_q1, next_q2,
                                       logp_all[n:], alpha)

        max_norm = self.cfg.max_grad_norm
        q1, q2 = self.critic(obs, batch["action"])
        critic_loss = optimizer_step(self.critic_optimizer, sac_critic_loss(q1, q2, target), max_norm)["loss"]
        q_mean = 0.5 * (q1 + q2).detach().mean()

        with frozen(self.critic):  # the actor's step needs dQ/da, not the critic's weight gradients
            q1, q2 = self.critic(obs, a_pi)
            actor_loss = optimizer_step(self.actor_optimizer, sac_actor_loss(logp_pi, q1, q2, alpha), max_norm)["loss"]
        out = {"loss": critic_loss, LOSS_CRITIC: critic_loss, LOSS_ACTOR: actor_loss, Q_MEAN: q_mean,
               ALPHA: alpha, ENTROPY: -logp_pi.detach().mean()}
        if self.alpha_optimizer is not None:
            out[LOSS_TEMPERATURE] = optimizer_step(self.alpha_optimizer,
                                                     self.temperature.loss(logp_pi.detach()))["loss"]
        self.target_sync.step(self.critic, self.target_critic)
        return out


def _cat(a: Any, b: Any) -> Any:
    """Concatenate two (nested) batches along the batch rank."""
    if isinstance(a, dict):
        return {k: _cat(a[k], b[k]) for k in a}
    if isinstance(a, (tuple, list)):
        return type(a)(_cat(x, y) for x, y in zip(a, b, strict=True))
    return torch.cat([a, b], dim=0)


# ---------------------------------------------------------------------------------------------------- plan


class SAC(ContinuousOffPolicy):
    """The shared off-policy plan (:class:`ContinuousOffPolicy`: sample ``rollout_steps`` agent steps of every env
    copy, store them, then ``gradient_steps`` gradient steps per ``train_every`` env steps once ``learning_starts``
    env steps are stored) with the SAC agent."""

    agent_class = SACAgent
