"""What SAC, TD3 and DDPG share, said once: Box actions acted in ``[-1, 1]`` and rescaled to the env's bounds,
transitions observed into a uniform replay memory, a uniform-random warm-up, the acting copy's weights, and the
plan (sample, store, then gradient steps at a fixed replay ratio). Each algorithm's module (``sac.py``, ``td3.py``,
``ddpg.py``) adds its networks, its losses and its ``update``.

Read top to bottom: the pure functions TD3 and DDPG share (the deterministic actor's loss, Gaussian exploration
noise, the critics' regression loss), the agent base, the deterministic-policy agent base of TD3 and DDPG, then the
plan.

Actions: the policy acts in ``[-1, 1]^d``; ``get_actions`` rescales to the Box bounds for the env
(``low + (a + 1) (high - low) / 2``, CleanRL's ``action_scale`` / ``action_bias``) and ``observe`` maps them back,
so replay and the critics see normalised actions.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any, ClassVar, Iterator

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.algos.base import CONTINUOUS, IterationResult, ReplayPlan, check_action_space
from rlrun.components.base import Component, api
from rlrun.components.continuous_networks import DeterministicActor
from rlrun.components.memories import ReplayMemory
from rlrun.components.optimizers import Synchronization, optimizer_step
from rlrun.components.optimizers.adam import Adam
from rlrun.errors import ConfigError
from rlrun.metric_names import LOSS_ACTOR

# ---------------------------------------------------------------------------------------------------- losses


def deterministic_actor_loss(q: torch.Tensor) -> torch.Tensor:
    r"""The deterministic policy gradient's objective as a loss (Silver et al. 2014; DDPG, Lillicrap et al. 2016,
    Algorithm 1; TD3, Fujimoto et al. 2018, Algorithm 1, on the first critic):
    :math:`J = -E_s[Q_1(s, \mu(s))]`, whose gradient in the actor's parameters is
    :math:`-E[\nabla_a Q_1(s, a)|_{a=\mu(s)} \nabla \mu(s)]`. ``q`` ``[B]``: the critic at the actor's actions."""
    return -q.mean()


def gaussian_exploration(actions: torch.Tensor, noise: torch.Tensor, scale: float) -> torch.Tensor:
    r"""Acting actions of a deterministic policy: :math:`\mathrm{clip}(\mu(s) + \sigma \epsilon, -1, 1)` with
    :math:`\epsilon \sim N(0, I)` given as ``noise`` (TD3's exploration, Fujimoto et al. 2018, Sec. 6.1; CleanRL's
    ``exploration_noise``, whose ``N(0, action_scale sigma)`` in env units is this in normalised units). Clipping
    keeps every action inside the bounds."""
    return (actions + scale * noise).clamp(-1.0, 1.0)


def critic_regression_loss(target: torch.Tensor, *qs: torch.Tensor) -> torch.Tensor:
    r"""The critics' TD regression as CleanRL's TD3 and DDPG take it: :math:`\sum_i E[(Q_i(s, a) - y)^2]` over one
    or more critics ``[B]`` (each minimises its own squared error; the sum lets one optimizer step all of them).
    ``target`` is detached."""
    target = target.detach()
    return sum(((q - target).pow(2).mean() for q in qs), torch.zeros((), device=target.device))


# ---------------------------------------------------------------------------------------------------- agent base


class ContinuousOffPolicyAgent(Component):
    """The agent API every off-policy continuous-action agent shares: acting in the Box bounds (uniform random
    during the warm-up of ``learning_starts`` env steps), ``observe`` into replay, the acting copy's weights (the
    actor and the env-step count), the optimizers' state in checkpoints. A subclass builds its networks and
    optimizers in ``_build_networks`` and names its optimizers in ``_optimizers``; it has its own ``get_actions``
    past the warm-up and its own ``update``."""

    learns_from = "observe"

    def __init__(self, cfg: Any, seed: int = 0, name: str | None = None) -> None:
        super().__init__(name)
        self.cfg = cfg
        self.memory = ReplayMemory(cfg.buffer_size, seed=seed)
        self.target_sync = Synchronization(every=1, tau=cfg.tau)
        # env steps observed: acting is uniform random until cfg.learning_starts (synced to remote workers)
        self.register_buffer("env_steps", torch.zeros((), dtype=torch.int64))

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        check_action_space(self.cfg.name, CONTINUOUS, actions)
        low, high = np.asarray(actions.low, np.float64), np.asarray(actions.high, np.float64)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ConfigError(f"algo={self.cfg.name} squashes actions into the Box bounds, so they must be finite; "
                              f"got {sp.describe(actions)}.")
        self.action_shape = tuple(int(d) for d in actions.shape)
        # a_env = bias + scale * a, a in [-1, 1] (CleanRL's action_scale / action_bias)
        self.register_buffer("action_scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("action_bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))
        unit = sp.Box(-1.0, 1.0, self.action_shape, np.float32)
        self._build_networks(obs, unit)
        scalar = sp.Box(-np.inf, np.inf, (), np.float32)
        self.build_child(self.memory, records=sp.Dict({"obs": obs, "action": unit, "reward": scalar,
                                                       "next_obs": obs, "discount": scalar}))
        self.output_spaces["get_actions"] = actions

    def _build_networks(self, obs: sp.Space, unit: sp.Box) -> None:
        """Build the networks from the observation space and the normalised action space; create the optimizers.
        An abstract hook: SAC's agent and :class:`DeterministicPolicyAgent` (TD3's, DDPG's) define it."""
        raise NotImplementedError

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """The optimizers by name (their state goes into checkpoints). An abstract hook, as ``_build_networks``."""
        raise NotImplementedError

    def get_extra_state(self) -> Any:
        return {name: opt.state_dict() for name, opt in self._optimizers().items()}

    def set_extra_state(self, state: Any) -> None:
        # a deep copy: torch's Optimizer.load_state_dict would share another agent's live moment tensors
        for name, opt in self._optimizers().items():
            opt.load_state_dict(copy.deepcopy(state[name]))

    # ------------------------------------------------------------------ acting

    def _warming_up(self, explore: bool) -> bool:
        return explore and int(self.env_steps) < self.cfg.learning_starts

    def _uniform_actions(self, obs: Any) -> torch.Tensor:
        """Uniform random actions in ``[-1, 1]`` for a batch of observations (the warm-up's; the torch generator of
        the acting worker drives them)."""
        batch = next(iter(sp.flatten(self.input_spaces["obs"], obs).values())).shape[0]
        return torch.rand((batch, *self.action_shape), device=self.action_scale.device) * 2.0 - 1.0

    def _to_env(self, a: torch.Tensor) -> torch.Tensor:
        """``[-1, 1]`` -> the Box bounds (clamped: float rounding must not step outside them)."""
        env = self.action_bias + self.action_scale * a
        return torch.maximum(torch.minimum(env, self.action_bias + self.action_scale),
                             self.action_bias - self.action_scale)

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


@contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """``module``'s parameters need no gradient inside the block: an actor's step needs dQ/da, not the critic's
    weight gradients."""
    params = [p for p in module.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


# ---------------------------------------------------------------------------------------------------- TD3, DDPG


class DeterministicPolicyAgent(ContinuousOffPolicyAgent):
    """TD3's and DDPG's shared half: a deterministic tanh actor with a target copy, acting with clipped Gaussian
    noise (``exploration_noise``), and the delayed step of the actor on :func:`deterministic_actor_loss` followed by
    the Polyak averaging of both target networks, once every ``policy_delay`` critic steps. A subclass gives the
    critic (``make_critic``), the first critic's value (``q1``) and the critic's step (``update``)."""

    def __init__(self, cfg: Any, seed: int = 0, name: str | None = None) -> None:
        super().__init__(cfg, seed, name)
        hidden, act = list(cfg.hidden_sizes), cfg.activation
        self.actor = DeterministicActor(hidden, act, name="actor")
        self.target_actor = DeterministicActor(hidden, act, name="target_actor")
        self.critic = self.make_critic(hidden, act, "critic")
        self.target_critic = self.make_critic(hidden, act, "target_critic")
        # critic steps taken: the actor steps on every policy_delay-th (checkpointed, so a resume keeps the phase)
        self.register_buffer("critic_steps", torch.zeros((), dtype=torch.int64))

    def make_critic(self, hidden_sizes: list[int], activation: str, name: str) -> Component:
        """The critic (and, called again, its target copy). An abstract hook: TD3's twin critics, DDPG's one."""
        raise NotImplementedError

    def q1(self, obs: Any, actions: torch.Tensor) -> torch.Tensor:
        """The (first) critic's ``Q(s, a)`` ``[B]``: what the actor ascends. An abstract hook, as ``make_critic``."""
        raise NotImplementedError

    def _build_networks(self, obs: sp.Space, unit: sp.Box) -> None:
        for online, target in ((self.actor, self.target_actor), (self.critic, self.target_critic)):
            self.build_child(online, obs=obs, actions=unit)
            self.build_target_copy(target, online, obs=obs, actions=unit)
        cfg = self.cfg
        self.actor_optimizer = Adam(self.actor.parameters(), lr=cfg.actor_lr, fused=True)
        self.critic_optimizer = Adam(self.critic.parameters(), lr=cfg.critic_lr, fused=True)

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer}

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        """Env actions ``[B, *S]`` in the Box bounds. ``explore=False``: ``mu(s)`` (evaluation, export).
        ``explore=True``: uniform random actions while fewer than ``learning_starts`` env steps were observed, then
        ``mu(s)`` plus Gaussian noise, clipped to the bounds (:func:`gaussian_exploration`)."""
        if self._warming_up(explore):
            return self._to_env(self._uniform_actions(obs))
        a = self.actor(obs)
        if explore:
            a = gaussian_exploration(a, torch.randn_like(a), self.cfg.exploration_noise)
        return self._to_env(a)

    def delayed_actor_step(self, obs: Any) -> dict[str, torch.Tensor]:
        """Count one critic step; on every ``policy_delay``-th, one actor step on
        :func:`deterministic_actor_loss` (the critic frozen) and the Polyak averaging of the target actor and
        critic (TD3's delayed policy updates, Fujimoto et al. 2018, Sec. 5.2; CleanRL's DDPG delays them too).
        Returns ``{loss/actor: ...}`` when the actor stepped, else nothing."""
        self.critic_steps += 1
        if int(self.critic_steps) % self.cfg.policy_delay:
            return {}
        with frozen(self.critic):
            loss = deterministic_actor_loss(self.q1(obs, self.actor(obs)))
            actor_loss = optimizer_step(self.actor_optimizer, loss, self.cfg.max_grad_norm)["loss"]
        self.target_sync.step(self.actor, self.target_actor)
        self.target_sync.step(self.critic, self.target_critic)
        return {LOSS_ACTOR: actor_loss}


# ---------------------------------------------------------------------------------------------------- plan


class ContinuousOffPolicy(ReplayPlan):
    """The plan (:class:`~rlrun.algos.base.ReplayPlan`, as DQN's): sample ``rollout_steps`` agent steps of every env
    copy, store them, then take ``gradient_steps`` gradient steps per ``train_every`` env steps once
    ``learning_starts`` env steps are stored. A subclass names its ``agent_class``."""

    takes_actions = CONTINUOUS
    agent_class: ClassVar[type[ContinuousOffPolicyAgent]]

    def updates_owed(self, env_steps: int) -> float:
        return env_steps * self.cfg.gradient_steps / self.cfg.train_every

    def report(self, result: IterationResult, infos: list[dict[str, Any]]) -> None:
        # each metric's mean over the steps that report it (TD3's and DDPG's actor loss: the delayed steps only)
        for key in dict.fromkeys(k for info in infos for k in info):
            if key != "loss":
                result.metrics[key] = float(torch.stack([i[key] for i in infos if key in i]).mean())
