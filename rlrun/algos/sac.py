"""SAC: soft actor-critic with twin Q-networks and a learned temperature (Haarnoja et al. 2018, "Soft Actor-Critic
Algorithms and Applications", Algorithm 1; as Stable-Baselines3's SAC and CleanRL's sac_continuous_action.py).
Continuous (Box) actions only.

Read top to bottom: the losses (pure functions), the networks (squashed-Gaussian actor, twin Q), the temperature,
the agent (root component: act, observe, update, weights), then the plan. Its config schema is
``rlrun.algos.sac_config.SACConfig`` (each key documented there and in conf/algo/sac.yaml).

Actions: the policy acts in ``[-1, 1]^d`` (``tanh`` of a Gaussian sample, ``rlrun.components.squashed_gaussian``);
``get_actions`` rescales to the Box bounds for the env (``low + (a + 1) (high - low) / 2``) and ``observe`` maps
them back, so replay and the Q-networks see normalised actions.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import replace
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.algos.base import CONTINUOUS, Algorithm, IterationResult, check_action_space
from rlrun.algos.sac_config import SACConfig
from rlrun.components.base import Component, api
from rlrun.components.memories import ReplayMemory
from rlrun.components.networks import MLP, FlattenObservation
from rlrun.components.optimizers import Synchronization, optimizer_step
from rlrun.components.squashed_gaussian import SquashedDiagGaussian, SquashedGaussianHead
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError
from rlrun.metric_names import (
    ALPHA,
    ENTROPY,
    GRADIENT_STEPS,
    LOSS_ACTOR,
    LOSS_CRITIC,
    LOSS_TEMPERATURE,
    Q_MEAN,
    REPLAY_SIZE,
)

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


class QFunction(Component):
    """``Q(s, a)``: the flattened observation and the (normalised) action concatenated, an MLP, a linear output.
    obs ``[B, ...]``, actions ``[B, *S]`` -> ``[B]``."""

    def __init__(self, hidden_sizes: list[int], activation: str, name: str = "q") -> None:
        super().__init__(name)
        self.flatten = FlattenObservation("flatten")
        self.torso = MLP(hidden_sizes, activation, name="torso")

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.require("actions", actions, kinds=(sp.Box,), floating=True)
        self.build_child(self.flatten, obs=obs)
        width = int(self.flatten.output_spaces["forward"].shape[0]) + sp.flat_dim(actions)
        self._action_rank = len(actions.shape)
        self.build_child(self.torso, obs=sp.Box(-np.inf, np.inf, (width,), np.float32))
        self.out = nn.Linear(int(self.torso.output_spaces["forward"].shape[0]), 1)
        self.output_spaces["forward"] = sp.Box(-np.inf, np.inf, (), np.float32)

    @api
    def forward(self, obs: Any, actions: torch.Tensor) -> torch.Tensor:
        a = actions.reshape(*actions.shape[: actions.dim() - self._action_rank], -1).to(torch.float32)
        return self.out(self.torso(torch.cat([self.flatten(obs), a], dim=-1))).squeeze(-1)


class TwinQ(Component):
    """Two independent Q-networks (clipped double Q; Fujimoto et al. 2018, used by SAC's Algorithm 1):
    ``forward(obs, actions) -> (Q1, Q2)``, each ``[B]``."""

    def __init__(self, hidden_sizes: list[int], activation: str, name: str = "critic") -> None:
        super().__init__(name)
        self.q1 = QFunction(hidden_sizes, activation, name="q1")
        self.q2 = QFunction(hidden_sizes, activation, name="q2")

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        self.build_child(self.q1, obs=obs, actions=actions)
        self.build_child(self.q2, obs=obs, actions=actions)
        q = self.q1.output_spaces["forward"]
        self.output_spaces["forward"] = sp.Tuple((q, q))

    @api
    def forward(self, obs: Any, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.q1(obs, actions), self.q2(obs, actions)


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


class SACAgent(Component):
    """The SAC agent API: get_actions (uniform random during warm-up, then policy samples; the squashed mean when
    not exploring), observe (store transitions), update (one critic, actor and temperature step and a target sync),
    weights."""

    learns_from = "observe"

    def __init__(self, cfg: SACConfig, seed: int = 0, name: str = "sac_agent") -> None:
        super().__init__(name)
        self.cfg = cfg
        hidden, act = list(cfg.hidden_sizes), cfg.activation
        self.actor = Actor(hidden, act, cfg.log_std_min, cfg.log_std_max, name="actor")
        self.critic = TwinQ(hidden, act, name="critic")
        self.target_critic = TwinQ(hidden, act, name="target_critic")
        self.temperature = Temperature(cfg.init_alpha, cfg.learn_alpha, cfg.target_entropy)
        self.memory = ReplayMemory(cfg.buffer_size, seed=seed)
        self.target_sync = Synchronization(every=1, tau=cfg.tau)
        # env steps observed: acting is uniform random until cfg.learning_starts (synced to remote workers)
        self.register_buffer("env_steps", torch.zeros((), dtype=torch.int64))

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        check_action_space(self.cfg.name, CONTINUOUS, actions)
        low, high = np.asarray(actions.low, np.float64), np.asarray(actions.high, np.float64)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ConfigError(f"algo=sac squashes actions into the Box bounds, so they must be finite; got "
                              f"{sp.describe(actions)}.")
        self.action_shape = tuple(int(d) for d in actions.shape)
        # a_env = bias + scale * a, a in [-1, 1] (CleanRL's action_scale / action_bias)
        self.register_buffer("action_scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("action_bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))
        unit = sp.Box(-1.0, 1.0, self.action_shape, np.float32)
        self.build_child(self.actor, obs=obs, actions=unit)
        self.build_child(self.critic, obs=obs, actions=unit)
        self.build_child(self.target_critic, obs=obs, actions=unit)
        self.target_critic.load_state_dict(self.critic.state_dict())
        self.target_critic.requires_grad_(False)
        self.build_child(self.temperature, actions=unit)
        scalar = sp.Box(-np.inf, np.inf, (), np.float32)
        self.build_child(self.memory, records=sp.Dict({"obs": obs, "action": unit, "reward": scalar,
                                                       "next_obs": obs, "discount": scalar}))
        # fused=True: one Adam kernel per optimizer instead of ~10 small ops per parameter tensor (the same update
        # rule; DQN does the same)
        cfg = self.cfg
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_lr, fused=True)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr, fused=True)
        self.alpha_optimizer = (torch.optim.Adam(self.temperature.parameters(), lr=cfg.alpha_lr, fused=True)
                                if cfg.learn_alpha else None)
        self._critic_params = list(self.critic.parameters())
        self.output_spaces["get_actions"] = actions

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        named = {"actor": self.actor_optimizer, "critic": self.critic_optimizer, "alpha": self.alpha_optimizer}
        return {k: v for k, v in named.items() if v is not None}

    def get_extra_state(self) -> Any:
        return {name: opt.state_dict() for name, opt in self._optimizers().items()}

    def set_extra_state(self, state: Any) -> None:
        # a deep copy: torch's Optimizer.load_state_dict would share another agent's live moment tensors
        for name, opt in self._optimizers().items():
            opt.load_state_dict(copy.deepcopy(state[name]))

    # ------------------------------------------------------------------ acting

    def _to_env(self, a: torch.Tensor) -> torch.Tensor:
        """``[-1, 1]`` -> the Box bounds (clamped: float rounding must not step outside them)."""
        env = self.action_bias + self.action_scale * a
        return torch.maximum(torch.minimum(env, self.action_bias + self.action_scale),
                             self.action_bias - self.action_scale)

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        """Env actions ``[B, *S]`` in the Box bounds. ``explore=False``: the squashed mean ``tanh(mu(s))``
        (evaluation, export). ``explore=True``: uniform random actions while fewer than ``learning_starts`` env
        steps were observed, then samples of the policy (the torch generator of the acting worker drives both)."""
        if explore and int(self.env_steps) < self.cfg.learning_starts:
            batch = next(iter(sp.flatten(self.input_spaces["obs"], obs).values())).shape[0]
            a = torch.rand((batch, *self.action_shape), device=self.action_scale.device) * 2.0 - 1.0
            return self._to_env(a)
        dist = SquashedDiagGaussian(*self.actor(obs), event_rank=len(self.action_shape))
        return self._to_env(dist.sample() if explore else dist.deterministic())

    @api
    def observe(self, obs: Any, actions: Any, rewards: Any, next_obs: Any, terminated: Any,
                truncated: Any = None) -> None:
        """Store transitions (rows ``[N]``, ``SampleBatch.transitions``): env actions
        are mapped back to ``[-1, 1]``; ``terminated`` steps get discount 0, time-limit ``truncated`` ones
        bootstrap from ``next_obs`` (the real final observation), so ``truncated`` is not needed beyond that."""
        a = (torch.as_tensor(np.asarray(actions), dtype=torch.float32, device=self.action_scale.device)
             - self.action_bias) / self.action_scale
        discount = self.cfg.gamma * (1.0 - np.asarray(terminated, dtype=np.float32))
        self.memory.insert({"obs": obs, "action": a.clamp(-1.0, 1.0), "reward": rewards, "next_obs": next_obs,
                            "discount": discount})
        self.env_steps += len(rewards)

    # ------------------------------------------------------------------ learning

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

        _requires_grad(self._critic_params, False)  # the actor's step needs dQ/da, not the critic's weight gradients
        try:
            q1, q2 = self.critic(obs, a_pi)
            actor_loss = optimizer_step(self.actor_optimizer, sac_actor_loss(logp_pi, q1, q2, alpha), max_norm)["loss"]
        finally:
            _requires_grad(self._critic_params, True)
        out = {"loss": critic_loss, LOSS_CRITIC: critic_loss, LOSS_ACTOR: actor_loss, Q_MEAN: q_mean,
               ALPHA: alpha, ENTROPY: -logp_pi.detach().mean()}
        if self.alpha_optimizer is not None:
            out[LOSS_TEMPERATURE] = optimizer_step(self.alpha_optimizer,
                                                     self.temperature.loss(logp_pi.detach()))["loss"]
        self.target_sync.step(self.critic, self.target_critic)
        return out

    # ------------------------------------------------------------------ weights

    @api
    def get_weights(self) -> dict[str, torch.Tensor]:
        """What an acting copy needs: the actor and the env-step count (which ends the uniform warm-up)."""
        weights = {f"actor.{k}": v.detach().clone() for k, v in self.actor.state_dict().items()}
        weights["env_steps"] = self.env_steps.detach().clone()
        return weights

    @api
    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        weights = dict(weights)
        env_steps = weights.pop("env_steps", None)
        self.actor.load_state_dict({k.removeprefix("actor."): v for k, v in weights.items()})
        if env_steps is not None:
            self.env_steps.copy_(env_steps)


def _requires_grad(params: list[nn.Parameter], flag: bool) -> None:
    for p in params:
        p.requires_grad_(flag)


def _cat(a: Any, b: Any) -> Any:
    """Concatenate two (nested) batches along the batch rank."""
    if isinstance(a, dict):
        return {k: _cat(a[k], b[k]) for k in a}
    if isinstance(a, (tuple, list)):
        return type(a)(_cat(x, y) for x, y in zip(a, b, strict=True))
    return torch.cat([a, b], dim=0)


# ---------------------------------------------------------------------------------------------------- plan


class SAC(Algorithm):
    """The plan (as DQN's): sample ``rollout_steps`` agent steps of every env copy, store them, then take
    ``gradient_steps`` gradient steps per ``train_every`` env steps once ``learning_starts`` env steps are stored."""

    agent_class = SACAgent
    takes_actions = CONTINUOUS

    @classmethod
    def make_agent(cls, cfg: SACConfig, spec: EnvSpec, seed: int) -> SACAgent:
        cls.check_env_actions(cfg, spec)
        return SACAgent(cfg, seed).build(obs=spec.observation_space, actions=spec.action_space)

    def __init__(self, cfg: SACConfig, spec: EnvSpec, executor: Any, device: torch.device, seed: int) -> None:
        super().__init__(cfg, spec, executor, device, seed)
        self.agent = self.make_agent(cfg, spec, seed).to(device)
        # Remote workers build an acting copy without replay storage; weights arrive by sync_weights.
        self.policy_factory: Callable[[int], Component] = functools.partial(
            type(self).make_agent, replace(cfg, buffer_size=1), spec)
        self.workers = executor.worker_set(self.agent, device, policy_factory=self.policy_factory)
        self.timer = executor.timer
        self.env_steps = 0
        self.gradient_steps = 0
        self.update_budget = 0.0  # gradient steps owed (fractional carry-over)

    def training_step(self) -> IterationResult:
        result = IterationResult()
        for batch in self.workers.sample(self.cfg.rollout_steps):
            with self.timer("replay"):
                self.agent.observe(*batch.transitions())
            result.add_batch(batch)
        self.env_steps += result.env_steps
        if self.env_steps < self.cfg.learning_starts:
            return result
        self.update_budget += result.env_steps * self.cfg.gradient_steps / self.cfg.train_every
        infos = []
        with self.timer("learn"):
            while self.update_budget >= 1.0:
                infos.append(self.agent.update())
                self.update_budget -= 1.0
        self.gradient_steps += len(infos)
        if infos:
            for key in infos[0]:
                if key != "loss":
                    result.metrics[key] = float(torch.stack([i[key] for i in infos]).mean())
        result.metrics[REPLAY_SIZE] = self.agent.memory.size()
        result.metrics[GRADIENT_STEPS] = self.gradient_steps
        return result

    def state_dict(self) -> dict[str, Any]:
        return {"agent": self.agent.state_dict(), "env_steps": self.env_steps,
                "gradient_steps": self.gradient_steps, "update_budget": self.update_budget}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.env_steps = int(state["env_steps"])
        self.gradient_steps = int(state["gradient_steps"])
        self.update_budget = float(state["update_budget"])
