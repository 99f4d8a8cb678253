"""PPO: clipped surrogate objective on GAE advantages, several epochs of minibatch steps per rollout
(Schulman et al. 2017, "Proximal Policy Optimization Algorithms", Algorithm 1; with the implementation details of
OpenAI Baselines' ppo2 as CleanRL's ppo.py keeps them: advantage normalisation per minibatch, value clipping,
global gradient clipping, linear learning-rate annealing, orthogonal initialisation).

Read top to bottom: the actor-critic network, the advantage estimator (GAE with time-limit truncation handled),
the agent (root component: act, observe, update, weights), then the plan. Its config schema is
``rlrun.algos.ppo_config.PPOConfig`` (each key documented there). ``rlrun.algos.a2c`` reuses the network and the
advantage estimator.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from rlrun import spaces as sp
from rlrun.algos.base import Algorithm, IterationResult
from rlrun.algos.ppo_config import PPOConfig
from rlrun.components.base import Component, api
from rlrun.components.distributions import make_distribution
from rlrun.components.heads import PolicyValueHead
from rlrun.components.networks import MLP, ImpalaResNet, NatureCNN
from rlrun.components.normalizers import ObservationNormalizer, RewardScaler
from rlrun.components.optimizers import GradientStep, MultiStep
from rlrun.components.policy_losses import ppo_loss
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError
from rlrun.ops import gae

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------------- network


def make_torso(network: str, obs: sp.Space, hidden_sizes: list[int], activation: str, name: str) -> Component:
    """The torso named by ``network``: mlp | nature_cnn | impala_resnet | auto (an image Box [C, H, W] of uint8
    -> nature_cnn, anything else -> mlp)."""
    if network == "auto":
        image = isinstance(obs, sp.Box) and len(obs.shape) == 3 and np.dtype(obs.dtype) == np.uint8
        network = "nature_cnn" if image else "mlp"
    if network == "mlp":
        return MLP(hidden_sizes, activation, name=name)
    if network == "nature_cnn":
        return NatureCNN(name=name)
    if network == "impala_resnet":
        return ImpalaResNet(name=name)
    raise ConfigError(f"algo.network={network}: not one of auto, mlp, nature_cnn, impala_resnet.")


class ActorCritic(Component):
    """obs -> (policy parameters, V(obs)): a torso (or one for the actor and one for the critic) and a
    ``PolicyValueHead`` (logits for Discrete actions, (mean, log_std) of a diagonal Gaussian for Box actions).

    With ``shared_torso=False`` the actor and the critic have torsos of the same architecture and their own
    weights (CleanRL's ppo.py for classic control); the head's policy layer reads the actor's features and its
    value layer the critic's. ``shared_torso=True`` is CleanRL's Atari layout (one torso, two linear layers).
    """

    def __init__(self, network: str = "auto", hidden_sizes: list[int] | tuple[int, ...] = (64, 64),
                 activation: str = "tanh", shared_torso: bool = False, orthogonal_init: bool = True,
                 init_log_std: float = 0.0, normalize_obs: bool = False, obs_clip: float = 10.0,
                 name: str = "actor_critic") -> None:
        """``network``: torso kind (see :func:`make_torso`); ``hidden_sizes``/``activation``: MLP torso layout;
        ``shared_torso``: one torso for policy and value; ``orthogonal_init``: orthogonal weights (gain sqrt(2)
        in the torso, 0.01 policy layer, 1 value layer), zero biases, as in CleanRL / Baselines;
        ``init_log_std``: initial log-std of a Gaussian policy (natural log; Box actions only);
        ``normalize_obs``: observations pass through an :class:`ObservationNormalizer` (running mean/std, clipped
        to ``obs_clip``) before the torsos; its statistics are buffers of this network, so they travel with its
        weights and are part of an exported policy."""
        super().__init__(name)
        self.network, self.hidden_sizes, self.activation = network, list(hidden_sizes), activation
        self.shared_torso, self.orthogonal_init = bool(shared_torso), bool(orthogonal_init)
        self.head = PolicyValueHead(init_log_std, orthogonal_init, name="head")
        self.obs_normalizer = ObservationNormalizer(obs_clip, name="obs_normalizer") if normalize_obs else None

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        if self.obs_normalizer is not None:
            self.build_child(self.obs_normalizer, obs=obs)
            obs = self.obs_normalizer.output_spaces["forward"]
        self.torso = make_torso(self.network, obs, self.hidden_sizes, self.activation, "torso")
        self.build_child(self.torso, obs=obs)
        self.critic_torso = None
        if not self.shared_torso:
            self.critic_torso = make_torso(self.network, obs, self.hidden_sizes, self.activation, "critic_torso")
            self.build_child(self.critic_torso, obs=obs)
        self.build_child(self.head, x=self.torso.output("forward"), actions=actions)
        if self.critic_torso is not None:  # the value layer reads the critic's features (same width)
            self.build_child(self.head, x=self.critic_torso.output("forward"))
        if self.orthogonal_init:
            for torso in (self.torso, self.critic_torso):
                for m in torso.modules() if torso is not None else ():
                    if isinstance(m, (nn.Linear, nn.Conv2d)):
                        nn.init.orthogonal_(m.weight, math.sqrt(2.0))
                        nn.init.zeros_(m.bias)
        self.output_spaces["get_policy"] = self.head.output_spaces["get_policy"]
        self.output_spaces["get_value"] = self.head.output_spaces["get_value"]
        self.output_spaces["forward"] = self.head.output_spaces["forward"]

    @api
    def get_policy(self, obs: Any) -> Any:
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        return self.head.get_policy(self.torso(obs))

    @api
    def get_value(self, obs: Any) -> torch.Tensor:
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        torso = self.torso if self.critic_torso is None else self.critic_torso
        return self.head.get_value(torso(obs))

    @api
    def update_obs_statistics(self, obs: Any) -> None:
        """Fold raw observations ``[N, ...]`` into the observation normaliser's statistics (no-op without one)."""
        if self.obs_normalizer is not None:
            self.obs_normalizer.update(obs)

    @api
    def forward(self, obs: Any) -> tuple[Any, torch.Tensor]:
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer(obs)
        if self.critic_torso is None:
            return self.head(self.torso(obs))
        return self.head.get_policy(self.torso(obs)), self.head.get_value(self.critic_torso(obs))


# ---------------------------------------------------------------------------------------------------- advantages


def truncation_aware_gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
                         terminated: torch.Tensor, truncated: torch.Tensor, gamma: float,
                         lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""GAE (Schulman et al. 2016, Eq. 16) over a rollout that may cross episode ends of both kinds.

    .. math::

        \delta_t = r_t + \gamma (1 - \mathrm{term}_t) V(s'_t) - V(s_t), \qquad
        \hat A_t = \delta_t + \gamma\lambda (1 - \mathrm{done}_t) \hat A_{t+1}, \quad \hat A_T = 0

    where :math:`s'_t` is the *real* observation after step ``t`` (the final observation of an episode that
    ended at ``t``, not the reset one) and ``done = terminated | truncated``. A termination is a true end
    (nothing follows: no bootstrap); a time-limit truncation is not (the state still has value
    :math:`V(s'_t)`), but the trace is cut at both because the next row of the rollout is a new episode.

    Computed with :func:`rlrun.ops.gae` (which bootstraps from ``values[t+1]`` under a per-step discount) by
    folding the truncation bootstrap into the reward: ``r'_t = r_t + gamma V(s'_t)`` at truncations,
    ``discount_t = gamma (1 - done_t)``, and ``bootstrap_value = V(s'_{T-1})`` (for a copy that did not finish,
    ``s'_{T-1}`` is the observation the next rollout starts from).

    Args:
        rewards: ``[T, B]`` reward of step ``t``.
        values: ``[T, B]`` :math:`V(s_t)` of the observation the step-``t`` action was taken in.
        next_values: ``[T, B]`` :math:`V(s'_t)` of the real observation after step ``t``. Where the episode goes
            on, :math:`s'_t` is :math:`s_{t+1}`, so only the entries at episode ends and at the last step are read
            (``values[t + 1]`` is used elsewhere).
        terminated: ``[T, B]`` bool, the episode ended at step ``t`` (no bootstrap).
        truncated: ``[T, B]`` bool, the episode was cut at step ``t`` by a time limit (bootstrap from
            :math:`V(s'_t)`); where both flags are set, termination wins.
        gamma: discount per agent step.
        lam: GAE :math:`\lambda \in [0, 1]` (1: discounted returns minus V; 0: one-step TD errors).

    Returns:
        ``(advantages, returns)``, both ``[T, B]``; ``returns = advantages + values`` (the TD(lambda) target).
    """
    terminated, truncated = terminated.to(rewards.dtype), truncated.to(rewards.dtype)
    done = torch.clamp(terminated + truncated, max=1.0)
    truncated_only = truncated * (1.0 - terminated)
    rewards = rewards + gamma * truncated_only * next_values
    return gae(rewards, values, next_values[-1], gamma * (1.0 - done), lam)


def rollout_from_samples(batches: list[Any], obs_space: sp.Space, device: torch.device) -> dict[str, Any]:
    """The sample batches of a worker set as one time-major rollout ``[T, B_total, ...]`` of torch tensors on
    ``device`` (workers side by side along B; they must share T): obs, actions, rewards, next_obs, terminated,
    truncated, and the extras the policy recorded while acting (log_prob, raw_action)."""

    def time_major(get: Callable[[Any], Any], space: sp.Space | None = None) -> Any:
        parts = [b.time_major(get(b)) for b in batches]
        if space is None or not sp.is_nested(space):
            joined = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
            return torch.as_tensor(joined).to(device) if space is None else sp.to_torch(space, joined, device)
        flats = [sp.flatten(space, p) for p in parts]
        joined = sp.unflatten(space, {k: np.concatenate([f[k] for f in flats], axis=1) for k in flats[0]})
        return sp.to_torch(space, joined, device)

    out = {"obs": time_major(lambda b: b.obs, obs_space), "next_obs": time_major(lambda b: b.next_obs, obs_space),
           "actions": time_major(lambda b: b.actions), "rewards": time_major(lambda b: b.rewards),
           "terminated": time_major(lambda b: b.terminated), "truncated": time_major(lambda b: b.truncated)}
    for key in batches[0].extras:
        out[key] = time_major(lambda b, k=key: b.extras[k])
    return out


def _take_rows(x: Any, rows: torch.Tensor) -> Any:
    """Rows ``rows`` of ``[N, ...]`` leafwise (dicts and tuples of tensors)."""
    if isinstance(x, dict):
        return {k: _take_rows(v, rows) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_take_rows(v, rows) for v in x)
    return x.index_select(0, rows.to(x.device))


def _flatten_time(x: Any) -> Any:
    """``[T, B, ...]`` -> ``[T * B, ...]`` leafwise (dicts and tuples of tensors)."""
    if isinstance(x, dict):
        return {k: _flatten_time(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_flatten_time(v) for v in x)
    return x.reshape(-1, *x.shape[2:])


# ---------------------------------------------------------------------------------------------------- agent


def build_actor_critic(agent: Component, obs: sp.Space, actions: sp.Space) -> None:
    """The build of an actor-critic agent (PPO, A2C, IMPALA, APPO) with ``agent.network`` and ``agent.optimizer``:
    Discrete or Box actions only, the network built from the spaces and attached to the optimizer, and for Box
    actions the bounds samples are clipped to for the env (the learner uses the raw sample)."""
    if not isinstance(actions, (sp.Discrete, sp.Box)):
        raise ConfigError(f"algo={agent.cfg.name} needs a Discrete or Box action space, got {sp.describe(actions)}.")
    agent.action_space = actions
    agent.continuous = isinstance(actions, sp.Box)
    agent.build_child(agent.network, obs=obs, actions=actions)
    agent.optimizer.attach(agent.network.parameters())
    if agent.continuous:
        agent.register_buffer("action_low", torch.as_tensor(actions.low, dtype=torch.float32))
        agent.register_buffer("action_high", torch.as_tensor(actions.high, dtype=torch.float32))
    agent.output_spaces["get_actions"] = actions


def make_reward_scaler(cfg: Any) -> RewardScaler | None:
    """The agent's reward scaler when ``algo.normalize_reward`` (discounted with ``algo.gamma``), else None."""
    if not getattr(cfg, "normalize_reward", False):
        return None
    return RewardScaler(cfg.gamma, cfg.reward_clip, name="reward_scaler")


def clip_to_bounds(agent: Component, actions: torch.Tensor) -> torch.Tensor:
    """Box actions clipped to the bounds :func:`build_actor_critic` registered; Discrete ones as they are."""
    if not agent.continuous:
        return actions
    return torch.maximum(torch.minimum(actions, agent.action_high), agent.action_low)


class PPOAgent(Component):
    """The PPO agent API: get_actions (with the log-probability the learner needs), observe (collect a rollout
    step by step from an application's loop), update (GAE + epochs of clipped-surrogate minibatch steps), weights.
    """

    def __init__(self, cfg: PPOConfig, seed: int = 0, name: str = "ppo_agent") -> None:
        super().__init__(name)
        self.cfg = cfg
        self.network = ActorCritic(cfg.network, list(cfg.hidden_sizes), cfg.activation, cfg.shared_torso,
                                   cfg.orthogonal_init, cfg.init_log_std, cfg.normalize_obs, cfg.obs_clip,
                                   name="network")
        self.reward_scaler = make_reward_scaler(cfg)
        self.optimizer = self._make_optimizer(cfg, seed)
        self.register_buffer("env_steps", torch.zeros((), dtype=torch.int64))  # env steps trained on (LR schedule)
        self._steps: list[dict[str, Any]] = []  # observe()'d time steps not yet used by update()
        self._lr_warned = False

    @property
    def update_strategy(self) -> Any:
        """The device strategy's update (``device=replicas``, ``device.precision``; rlrun/devices.py sets it): each
        minibatch step runs through it. With ``normalize_advantage`` each replica normalises its own shard's
        advantages (as RLlib's multi-GPU towers do), so the update equals one replica's only without it."""
        return self.optimizer.strategy

    @update_strategy.setter
    def update_strategy(self, strategy: Any) -> None:
        self.optimizer.strategy = strategy

    @staticmethod
    def _make_optimizer(cfg: PPOConfig, seed: int) -> Component:
        """Epochs of shuffled minibatch Adam steps; ``torch_optimizer`` (below) reaches the Adam inside.
        ``fused=True``: one fused Adam kernel over all parameters (the same update rule, fewer small ops)."""
        step = GradientStep("adam", lr=cfg.lr, max_grad_norm=cfg.max_grad_norm, eps=cfg.adam_eps, fused=True)
        return MultiStep(step, cfg.num_epochs, cfg.minibatch_size, seed=seed)

    def torch_optimizer(self) -> torch.optim.Optimizer:
        return self.optimizer.optimizer.optimizer  # MultiStep -> GradientStep -> torch.optim.Adam

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        build_actor_critic(self, obs, actions)
        if self.reward_scaler is not None:
            self.build_child(self.reward_scaler)

    # ------------------------------------------------------------------ acting

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> Any:
        """``explore=False``: the mode of the policy (clipped to a Box's bounds). ``explore=True``: a sample, as
        ``(actions, {"log_prob": [B]})`` (plus ``"raw_action"``, the unclipped sample, for Box actions); a rollout
        worker records these extras per step."""
        dist = make_distribution(self.action_space, self.network.get_policy(obs))
        if not explore:
            return self._clip(dist.deterministic())
        sample = dist.sample()
        extras = {"log_prob": dist.log_prob(sample)}
        if self.continuous:
            extras["raw_action"] = sample
        return self._clip(sample), extras

    def _clip(self, actions: torch.Tensor) -> torch.Tensor:
        return clip_to_bounds(self, actions)

    @api
    def observe(self, obs: Any, actions: Any, rewards: Any, next_obs: Any, terminated: Any, truncated: Any,
                extras: dict[str, Any]) -> None:
        """Collect one time step of ``B`` env copies (``[B, ...]`` each; ``next_obs``: the real next observation,
        the final one where an episode ended; ``extras``: what ``get_actions`` returned with the actions); the
        next ``update()`` without a batch learns on the steps collected since the last one."""
        self._steps.append({"obs": obs, "next_obs": next_obs, "actions": actions, "rewards": rewards,
                            "terminated": terminated, "truncated": truncated, **extras})

    def _collected(self) -> dict[str, Any]:
        """The ``observe()``'d steps as a time-major rollout ``[T, B, ...]`` of torch tensors."""
        if not self._steps:
            raise RuntimeError(f"{self.name}.update(): no batch given and no steps observe()'d since the last update")
        steps, self._steps = self._steps, []
        obs_space = self.input_spaces["obs"]

        def stack(key: str) -> Any:
            if key in ("obs", "next_obs"):
                flats = [sp.flatten(obs_space, s[key]) for s in steps]
                leaves = {k: np.stack([_numpy(f[k]) for f in flats]) for k in flats[0]}
                return sp.to_torch(obs_space, sp.unflatten(obs_space, leaves), self.device)
            return torch.as_tensor(np.stack([_numpy(s[key]) for s in steps]), device=self.device)

        return {key: stack(key) for key in steps[0]}

    # ------------------------------------------------------------------ learning

    def advantages(self, rollout: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(values, advantages, returns)`` ``[T, B]`` of a time-major rollout under the current weights."""
        T, B = rollout["rewards"].shape
        with torch.no_grad():
            values = self.network.get_value(_flatten_time(rollout["obs"])).reshape(T, B)
            next_values = self.bootstrap_values(rollout)
            adv, ret = truncation_aware_gae(rollout["rewards"].float(), values, next_values, rollout["terminated"],
                                            rollout["truncated"], self.cfg.gamma, self.cfg.gae_lambda)
        return values, adv, ret

    def bootstrap_values(self, rollout: dict[str, Any]) -> torch.Tensor:
        """``V(s'_t)`` ``[T, B]`` where :func:`truncation_aware_gae` reads it: after a time-limit truncation and at
        the last step; 0 elsewhere (never read: there ``s'_t`` is ``s_{t+1}``, whose value is ``values[t + 1]``).
        One value pass over those rows only, instead of over every ``next_obs`` (which doubled the update's value
        forward work: benchmarks/learner_throughput.py)."""
        T, B = rollout["rewards"].shape
        needed = rollout["truncated"].bool() & ~rollout["terminated"].bool()
        needed[-1] = True
        rows = needed.reshape(-1).nonzero().squeeze(1)
        out = torch.zeros(T * B, device=rows.device)
        out[rows] = self.network.get_value(_take_rows(_flatten_time(rollout["next_obs"]), rows)).float()
        return out.reshape(T, B).to(rollout["rewards"].device)

    def normalize_rollout(self, rollout: dict[str, Any]) -> dict[str, Any]:
        """The first step of every update: fold the rollout's raw observations into the observation normaliser
        (``algo.normalize_obs``) and scale its rewards by the running std of the discounted return
        (``algo.normalize_reward``); returns the rollout with the scaled rewards. The statistics change once per
        update, before advantages are computed, so values, advantages and the loss all see the same ones (the
        behaviour log-probabilities were recorded under the previous ones, as in Brax's PPO)."""
        self.network.update_obs_statistics(_flatten_time(rollout["obs"]))  # a no-op without normalize_obs
        if self.reward_scaler is not None:
            scaled = self.reward_scaler.scale(rollout["rewards"], rollout["terminated"], rollout["truncated"])
            rollout = {**rollout, "rewards": scaled}
        return rollout

    def remaining(self) -> float:
        """The share of the schedule still ahead: ``1 - env_steps / total_env_steps``, at least 0 (1 without a
        horizon)."""
        if not self.cfg.total_env_steps:
            return 1.0
        return max(0.0, 1.0 - int(self.env_steps) / float(self.cfg.total_env_steps))

    def learning_rate(self) -> float:
        """The learning rate now: ``lr * remaining()`` when annealing, else ``lr``."""
        return float(self.cfg.lr) * (self.remaining() if self.cfg.anneal_lr else 1.0)

    def set_learning_rate(self) -> float:
        """Put :meth:`learning_rate` into the optimizer (before each update); returns it."""
        lr = self.learning_rate()
        if lr == 0.0 and float(self.cfg.lr) > 0.0 and not self._lr_warned:
            self._lr_warned = True
            log.warning("%s: the learning rate has annealed to 0 at env step %d (algo.total_env_steps=%s), so the "
                        "agent no longer learns. A run resumed with a larger stop.env_steps keeps the schedule of "
                        "its first budget; start a new run with algo.total_env_steps set to train longer.",
                        self.name, int(self.env_steps), self.cfg.total_env_steps)
        for group in self.torch_optimizer().param_groups:
            group["lr"] = lr
        return lr

    @api
    def update(self, batch: dict[str, Any] | None = None) -> dict[str, Any]:
        """Learn on one time-major rollout ``[T, B, ...]`` (default: the steps ``observe()``'d since the last
        update): keys obs, actions, rewards, next_obs, terminated, truncated, log_prob (and raw_action for Box
        actions). GAE advantages and returns under the current weights, then ``num_epochs`` epochs of shuffled
        minibatch steps on the PPO loss. Returns the mean loss terms over the gradient steps."""
        rollout = self.normalize_rollout(batch if batch is not None else self._collected())
        values, adv, ret = self.advantages(rollout)
        lr = self.set_learning_rate()
        actions = rollout["raw_action"] if self.continuous else rollout["actions"]
        data = _flatten_time({"obs": rollout["obs"], "actions": actions, "old_log_prob": rollout["log_prob"],
                              "advantages": adv, "returns": ret, "old_values": values})
        cfg = self.cfg
        clip_eps = cfg.clip_eps * (self.remaining() if cfg.anneal_clip else 1.0)

        def loss_fn(mb: dict[str, Any]) -> tuple[torch.Tensor, dict]:
            params, v = self.network(mb["obs"])
            dist = make_distribution(self.action_space, params)
            t = ppo_loss(dist.log_prob(mb["actions"]), mb["old_log_prob"], mb["advantages"], v, mb["returns"],
                         dist.entropy(), mb["old_values"], clip_eps=clip_eps, vf_clip_eps=cfg.vf_clip_eps,
                         vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef, normalize_advantage=cfg.normalize_advantage)
            return t.total, {"loss/policy": t.policy.detach(), "loss/value": t.value.detach(),
                             "policy/entropy": t.entropy.detach(), "policy/clip_fraction": t.clip_fraction,
                             "policy/approx_kl": t.approx_kl}

        info = self.optimizer.step(loss_fn, data)
        self.env_steps += int(ret.numel())
        info["learn/lr"] = lr
        info["policy/clip_eps"] = clip_eps
        info["value/explained_variance"] = explained_variance(values.flatten(), ret.flatten())
        return info

    # ------------------------------------------------------------------ weights

    @api
    def get_weights(self) -> dict[str, torch.Tensor]:
        """The acting policy's weights (the actor-critic network), detached copies."""
        return {k: v.detach().clone() for k, v in self.network.state_dict().items()}

    @api
    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.network.load_state_dict(weights)


def _numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """``1 - Var[target - predicted] / Var[target]`` (1: perfect value fit, 0: no better than a constant; nan
    where the target does not vary), as Baselines and CleanRL report it."""
    var = float(target.var()) if target.numel() > 1 else 0.0
    return float("nan") if var == 0.0 else 1.0 - float((target - predicted).var()) / var


def rmsprop_or_adam(cfg: Any, **rmsprop_kwargs: Any) -> GradientStep:
    """One gradient step by ``algo.optimizer``: RMSProp (``algo.rmsprop_alpha``, ``algo.optimizer_eps`` and
    ``rmsprop_kwargs``) or Adam (``algo.optimizer_eps``), ``algo.lr`` and ``algo.max_grad_norm``; A2C's and IMPALA's
    optimizer."""
    # the schemas declare the choices (rmsprop | adam)
    if cfg.optimizer == "rmsprop":
        kwargs = {"alpha": cfg.rmsprop_alpha, "eps": cfg.optimizer_eps, **rmsprop_kwargs}
    else:
        kwargs = {"eps": cfg.optimizer_eps}
    return GradientStep(cfg.optimizer, lr=cfg.lr, max_grad_norm=cfg.max_grad_norm, **kwargs)


def policy_factory(algo_cls: Any, cfg: Any, spec: EnvSpec) -> Callable[[int], Component]:
    """A picklable ``worker_index -> acting policy`` for executors whose workers build their own copy (Ray): the
    algorithm's agent built from ``cfg`` and ``spec`` (seeded by the worker index); weights arrive by
    ``sync_weights``."""
    return functools.partial(algo_cls.make_worker_policy, cfg, spec)


# ---------------------------------------------------------------------------------------------------- plan


class ActorCriticPlan(Algorithm):
    """What the PPO family (PPO, A2C, TRPO) and the IMPALA family (IMPALA, APPO) build alike: the learner's agent of
    ``agent_class`` from the env spec, and the same agent, seeded by the worker index, as a worker's policy."""

    agent_class: type[Component]

    @classmethod
    def make_agent(cls, cfg: Any, spec: EnvSpec, seed: int) -> Component:
        if not isinstance(spec.action_space, (sp.Discrete, sp.Box)):
            raise ConfigError(f"algo={cfg.name} needs a Discrete or Box action space, but env {spec.id} has "
                              f"{sp.describe(spec.action_space)}.")
        return cls.agent_class(cfg, seed).build(obs=spec.observation_space, actions=spec.action_space)

    @classmethod
    def make_worker_policy(cls, cfg: Any, spec: EnvSpec, worker_index: int) -> Component:
        """What a remote (or, with several local workers, an in-process) rollout worker acts with: by default the
        agent itself, seeded by the worker index (through :func:`policy_factory`)."""
        return cls.make_agent(cfg, spec, worker_index)


class PPO(ActorCriticPlan):
    """The plan: sample ``rollout_steps`` agent steps of every env copy, learn on them (one PPO update), broadcast
    the new weights."""

    agent_class: type[Component] = PPOAgent

    def __init__(self, cfg: PPOConfig, spec: EnvSpec, executor: Any, device: torch.device, seed: int) -> None:
        super().__init__(cfg, spec, executor, device, seed)
        self.agent = self.make_agent(cfg, spec, seed).to(device)
        self.policy_factory = policy_factory(type(self), cfg, spec)
        self.workers = executor.worker_set(self.agent, device, policy_factory=self.policy_factory)
        self.timer = executor.timer
        self.env_steps = 0
        self.updates = 0  # training_step() calls, one update (a rollout learnt on) each
        self.gradient_steps = 0

    def training_step(self) -> IterationResult:
        batches = self.workers.sample(self.cfg.rollout_steps)
        result = IterationResult()
        for b in batches:
            result.add_batch(b)  # env steps, episodes, and Atari's whole-game scores
        self.env_steps += result.env_steps
        with self.timer("learn"):
            rollout = rollout_from_samples(batches, self.spec.observation_space, self.device)
            info = self.agent.update(rollout)
        self.workers.sync_weights(self.agent.get_weights())
        self.updates += 1
        self.gradient_steps += int(info.pop("gradient_steps", 1))
        renamed = {"loss": "loss/total", "grad_norm": "learn/grad_norm"}
        result.metrics.update({renamed.get(k, k): float(v) for k, v in info.items()})
        result.metrics["learn/updates"] = self.updates
        result.metrics["learn/gradient_steps"] = self.gradient_steps
        return result

    def state_dict(self) -> dict[str, Any]:
        return {"agent": self.agent.state_dict(), "env_steps": self.env_steps, "updates": self.updates,
                "gradient_steps": self.gradient_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.env_steps = int(state["env_steps"])
        self.updates = int(state["updates"])
        self.gradient_steps = int(state["gradient_steps"])
