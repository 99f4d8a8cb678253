"""Learner throughput: samples/s through each algorithm's ``agent.update(batch)`` against a hand-written PyTorch
update of the same network, loss and optimizer settings, timed call by call in alternation
(benchmarks.common.alternating_ratios) in this process; the median over rounds of each round's ratio. Goal (issues
5 and 7): ratio >= 0.9. Each call is timed on the wall clock (``samples_per_s``, what a run sees) and on the
thread's CPU clock (``samples_per_cpu_s``: other work on the shared cores barely moves it, so CI compares this
ratio). A *sample* is one transition of the batch given to ``update()`` (a rollout of T x B agent steps, or a
replay batch), whatever the number of epochs the update makes over it.

Both sides start from the same weights (the agent's, copied into the hand-written networks) and the same optimizer
state, are given the same batch, and the first two updates' losses (and, per algorithm, other outputs such as
TRPO's KL and step fraction) are checked to be equal before anything is timed, so the two sides compute the same
thing. Batches are fed directly: sampling and replay are not timed on either side. One torch thread (rlrun's
default, ``device.torch_threads=1``).

Cases (``--cases``; DQN's two keep their names of the first version):

- ``atari_nature_cnn`` / ``cartpole_mlp``: DQN (:func:`bare_dqn_step`): Nature CNN on uint8 4x84x84 frames, 6
  actions, batch 32 (Mnih et al. 2015) / MLP [64, 64] on CartPole, batch 256; double-DQN Huber loss, Adam
  (``fused=True``, as the agent), clip 10, Polyak tau 0.02 (the agent is built with :data:`AGENT_SETTINGS`).
- The others build the agent as the run does: the config composed by Hydra for ``algo=<algo> env=pong`` (so the
  Atari preset of ``conf/algo_env`` applies where there is one) plus the small overrides listed in
  :data:`ALGO_CASES`, then ``<Algo>.make_agent(cfg, spec, seed)`` with Pong's env spec (uint8 4x84x84, 6 actions):

  - ``ppo_atari_nature_cnn``: PPO (no Atari preset: ``network=auto`` -> Nature CNN, separate actor and critic
    torsos as conf/algo/ppo.yaml) on a rollout of 8 x 8 steps, 1 epoch of 2 minibatches of 32
    (:func:`bare_ppo_update`: the value pass for GAE, then the clipped-surrogate minibatch steps);
  - ``a2c_atari_nature_cnn``: A2C (Nature CNN, separate torsos, RMSProp) on 5 x 8 steps, one gradient step;
  - ``trpo_atari_nature_cnn``: TRPO (Nature CNN actor and critic) on 4 x 4 steps: conjugate gradient (10
    iterations) on Fisher-vector products, line search, then 1 epoch of 1 value minibatch;
  - ``impala_atari_impala_resnet``: IMPALA with its Atari preset (IMPALA ResNet, shared torso, RMSProp, summed
    loss) on unrolls of 5 steps x 4, one V-trace step;
  - ``appo_atari_impala_resnet``: APPO with its Atari preset (IMPALA ResNet, shared torso, Adam, 2 epochs) on
    unrolls of 5 steps x 4;
  - ``apex_atari_nature_cnn``: Ape-X's learner (there is no apex Atari preset: ``algo.network=nature_cnn``;
    dueling double-Q, squared TD loss with importance weights, Adam fused, hard target sync) on a batch of 32
    n-step transitions;
  - ``sac_pendulum_mlp``: SAC is continuous-action, so not on Atari: ``algo=sac env=pendulum`` as the run builds
    it (MLP [256, 256], batch 256): critic, actor and temperature steps and the Polyak update.

Algorithms of the registry without a case are listed as ``unavailable/<algo>`` with the reason.

On a GPU (``--device cuda``) both sides update there, each call timed to the device's end of its work; with
``--compiled atari_nature_cnn`` the DQN case is also timed against its hand-written step under ``torch.compile``
with CUDA graphs (LeanRL's method): how close rlrun's learner comes to the device's own limit.

    python -m benchmarks.learner_throughput [--quick] [--rounds N] [--min-time S] [--cases a,b] [--threads T]
                                            [--device cuda] [--compiled atari_nature_cnn]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.common import alternating_ratios, load_average, publish
from benchmarks.dqn_networks import (
    ATARI_OBS,
    CARTPOLE_OBS,
    bare_copy_of,
    bare_input,
    bare_torso,
    copy_weights,
    dqn_agent,
    torso_width,
)
from rlrun import spaces as sp
from rlrun.execution.rollout import Rollout

SEED = 0
CPU = torch.device("cpu")


def to_device(tensors: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """A batch's tensors on ``device`` (where a run's plan puts a batch before the agent's update)."""
    return {k: v.to(device) for k, v in tensors.items()}

# ---------------------------------------------------------------------------------------------------- DQN

# case -> (observation space, number of actions, network, batch size)
CASES: dict[str, tuple[sp.Box, int, str, int]] = {
    "atari_nature_cnn": (ATARI_OBS, 6, "nature_cnn", 32),
    "cartpole_mlp": (CARTPOLE_OBS, 2, "mlp", 256),
}
AGENT_SETTINGS = {"huber_delta": 1.0, "double_q": True, "max_grad_norm": 10.0, "tau": 0.02, "lr": 2.5e-4}


def make_batch(obs_space: sp.Box, num_actions: int, batch_size: int, seed: int = 0,
               device: torch.device = CPU) -> dict[str, torch.Tensor]:
    """A replay batch as the agent's memory returns it (obs, action, reward, next_obs, discount), on ``device``."""
    rng = np.random.default_rng(seed)
    obs = sp.to_torch(obs_space, sp.sample(obs_space, (batch_size,), seed=seed))
    next_obs = sp.to_torch(obs_space, sp.sample(obs_space, (batch_size,), seed=seed + 1))
    if obs_space.dtype != np.uint8:  # CartPole's Box is unbounded: keep the samples in a sane range
        obs, next_obs = obs.clamp(-3, 3), next_obs.clamp(-3, 3)
    return to_device({"obs": obs, "next_obs": next_obs,
                      "action": torch.as_tensor(rng.integers(0, num_actions, batch_size), dtype=torch.int64),
                      "reward": torch.as_tensor(rng.standard_normal(batch_size), dtype=torch.float32),
                      "discount": torch.as_tensor(0.99 * (rng.random(batch_size) > 0.05), dtype=torch.float32)},
                     device)


def bare_dqn_step(online: torch.nn.Module, target: torch.nn.Module, optimizer: torch.optim.Optimizer,
                  batch: dict[str, torch.Tensor], network: str, huber_delta: float, max_grad_norm: float,
                  tau: float) -> torch.Tensor:
    """One double-DQN gradient step in plain PyTorch; returns the loss before the step."""
    obs, next_obs = bare_input(batch["obs"], network), bare_input(batch["next_obs"], network)
    q_taken = online(obs).gather(1, batch["action"].unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        next_action = online(next_obs).argmax(dim=1, keepdim=True)
        next_value = target(next_obs).gather(1, next_action).squeeze(1)
        y = batch["reward"] + batch["discount"] * next_value
    loss = F.huber_loss(q_taken, y, delta=huber_delta)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(online.parameters(), max_grad_norm)
    optimizer.step()
    with torch.no_grad():
        for t, s in zip(target.parameters(), online.parameters(), strict=True):
            t.lerp_(s, tau)
    return loss.detach()


@dataclass
class Pair:
    """The two sides of one case: ``agent()`` calls the agent's ``update`` on the fixed batch, ``bare()`` runs the
    hand-written update on the same batch; both return a dict holding (at least) the ``checked`` outputs."""

    agent: Callable[[], dict[str, Any]]
    bare: Callable[[], dict[str, Any]]
    samples: int
    """Transitions per update (the batch or rollout size)."""
    checked: tuple[str, ...] = ("loss",)
    """Outputs that must agree on the first two updates (relative tolerance ``rtol``)."""
    rtol: float = 1e-4


def dqn_pair(name: str, device: torch.device = CPU) -> Pair:
    obs_space, num_actions, network, batch_size = CASES[name]
    torch.manual_seed(SEED)  # the networks' initial weights
    agent = dqn_agent(obs_space, sp.Discrete(num_actions), network, **AGENT_SETTINGS)
    online, target = bare_copy_of(agent, obs_space, num_actions, network)
    agent, online, target = agent.to(device), online.to(device), target.to(device)
    optimizer = torch.optim.Adam(online.parameters(), lr=AGENT_SETTINGS["lr"], fused=True)
    batch = make_batch(obs_space, num_actions, batch_size, device=device)

    def bare() -> dict[str, Any]:
        return {"loss": bare_dqn_step(online, target, optimizer, batch, network, AGENT_SETTINGS["huber_delta"],
                                      AGENT_SETTINGS["max_grad_norm"], AGENT_SETTINGS["tau"])}

    return Pair(lambda: agent.update(batch), bare, batch_size)


def dqn_case(name: str, rounds: int, min_time_s: float, device: torch.device = CPU) -> dict[str, Any]:
    return measure(name, dqn_pair(name, device), rounds, min_time_s)


# ---------------------------------------------------------------------------------------------------- shared


def measure(name: str, pair: Pair, rounds: int, min_time_s: float) -> dict[str, Any]:
    """Check that both sides compute the same outputs on their first two updates, then time them alternately."""
    for step in range(2):  # same weights, same batch, same random draws: the same outputs
        torch.manual_seed(1000 + step)
        ours = pair.agent()
        torch.manual_seed(1000 + step)
        theirs = pair.bare()
        for key in pair.checked:
            a, b = float(ours[key]), float(theirs[key])
            if not np.isclose(a, b, rtol=pair.rtol, atol=1e-6):
                raise AssertionError(f"{name}: update {step}: the agent's {key} {a} != the bare update's {b}: the "
                                     f"hand-written reference no longer computes what the agent does")
    figures: dict[str, Any] = {f"batch_size/{name}": pair.samples}
    device = _device_of(ours)
    agent_side, bare_side = synced(pair.agent, device), synced(pair.bare, device)
    for clock, (t_agent, t_bare, ratio) in alternating_ratios(agent_side, bare_side, rounds, min_time_s).items():
        unit = "samples_per_s" if clock == "wall" else "samples_per_cpu_s"
        figures[f"{unit}/{name}/rlrun"] = round(pair.samples / t_agent, 1)
        figures[f"{unit}/{name}/bare"] = round(pair.samples / t_bare, 1)
        figures[f"ratio/{unit}/{name}/rlrun_vs_bare"] = round(1.0 / ratio, 4)
    return figures


def _device_of(outputs: dict[str, Any]) -> torch.device:
    """The device an update ran on, read off its outputs' tensors."""
    return next((v.device for v in outputs.values() if isinstance(v, torch.Tensor)), CPU)


_SPECS: dict[str, Any] = {}


def run_config(algo: str, overrides: tuple[str, ...]) -> tuple[Any, Any]:
    """``(algo config object, env spec)`` as ``rlrun algo=<algo> <overrides>`` composes and builds them."""
    from omegaconf import OmegaConf

    from rlrun.config import compose
    from rlrun.registry import registry

    cfg = compose([f"algo={algo}", *overrides])
    key = str(OmegaConf.to_container(cfg.env, resolve=True))
    if key not in _SPECS:
        _SPECS[key] = registry.build("env", cfg.env.name, cfg.env).spec
    return OmegaConf.to_object(cfg.algo), _SPECS[key]


def remaining(env_steps: int, total: int | None) -> float:
    """Share of a linear schedule still ahead after ``env_steps`` (1 without a horizon), as the agents compute it."""
    return 1.0 if not total else max(0.0, 1.0 - env_steps / float(total))


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def torso_kind(torso: Any) -> str:
    """The ``network`` name of an agent's torso component (``auto`` resolved)."""
    from rlrun.components.networks import MLP, ImpalaResNet, NatureCNN

    for cls, kind in ((NatureCNN, "nature_cnn"), (ImpalaResNet, "impala_resnet"), (MLP, "mlp")):
        if isinstance(torso, cls):
            return kind
    raise TypeError(f"no hand-written torso for {type(torso).__name__}")


def log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """Normalised log-probabilities, as ``torch.distributions.Categorical(logits=...)`` computes them."""
    return logits - logits.logsumexp(dim=-1, keepdim=True)


class BareActorCritic(nn.Module):
    """Torso (and a critic torso, or the shared one) -> policy logits and V(s), written by hand."""

    def __init__(self, torso: nn.Sequential, critic_torso: nn.Sequential | None, num_actions: int,
                 network: str) -> None:
        super().__init__()
        self.network = network
        self.torso, self.critic_torso = torso, critic_torso
        self.policy = nn.Linear(torso_width(torso), num_actions)
        self.value = nn.Linear(torso_width(torso), 1)

    def actor_logits(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy(self.torso(bare_input(obs, self.network)))

    def value_of(self, obs: torch.Tensor) -> torch.Tensor:
        torso = self.torso if self.critic_torso is None else self.critic_torso
        return self.value(torso(bare_input(obs, self.network))).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = bare_input(obs, self.network)
        features = self.torso(x)
        critic = features if self.critic_torso is None else self.critic_torso(x)
        return self.policy(features), self.value(critic).squeeze(-1)


def bare_actor_critic(network: Any, obs_space: sp.Box, num_actions: int) -> BareActorCritic:
    """The hand-written twin of an agent's ``ActorCritic`` / ``RecurrentActorCritic`` (no core), with its weights."""
    if getattr(network, "core", None) is not None:
        raise ValueError("no hand-written reference for the LSTM core")
    kind = torso_kind(network.torso)
    # An MLP torso's widths and activation are the agent's.
    shape = (network.torso.hidden_sizes, network.torso.activation) if kind == "mlp" else ()
    critic = None if network.critic_torso is None else bare_torso(obs_space, kind, *shape)
    net = BareActorCritic(bare_torso(obs_space, kind, *shape), critic, num_actions, kind)
    copy_weights(network.torso, net.torso)
    if critic is not None:
        copy_weights(network.critic_torso, net.critic_torso)
    copy_weights(network.head.policy, net.policy)
    copy_weights(network.head.value, net.value)
    return net


def atari_rollout(policy: Callable[[torch.Tensor], torch.Tensor], obs_space: sp.Box, num_actions: int, T: int,
                  B: int, seed: int = 0, device: torch.device = CPU) -> dict[str, torch.Tensor]:
    """A time-major rollout ``[T, B, ...]`` in the bare baselines' form (every step's ``next_obs`` stored; rlrun's
    agents take it as :func:`as_rollout` makes it): random frames, actions drawn
    uniformly, behaviour log-probabilities = the current policy's plus noise (sd 0.1: a little policy lag, so
    ratios and V-trace weights are not all 1), rewards in {-1, 0, 1} (clipped Atari rewards, mostly 0), one
    termination and one time-limit truncation (so both code paths of the advantage estimators run). On
    ``device``, the policy's."""
    rng = np.random.default_rng(seed)
    frames = sp.to_torch(obs_space, sp.sample(obs_space, (T + 1, B), seed=seed)).to(device)
    actions = torch.as_tensor(rng.integers(0, num_actions, (T, B)), dtype=torch.int64)
    with torch.no_grad():
        logits = log_softmax(policy(frames[:T]).reshape(T, B, num_actions)).to(device)
    actions = actions.to(device)
    log_prob = logits.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    log_prob = log_prob + torch.as_tensor(0.1 * rng.standard_normal((T, B)), dtype=torch.float32, device=device)
    terminated = torch.zeros(T, B, dtype=torch.bool, device=device)
    truncated = torch.zeros(T, B, dtype=torch.bool, device=device)
    terminated[T // 3, 0] = True
    truncated[T // 2, B - 1] = True
    rewards = torch.as_tensor(rng.choice([-1.0, 0.0, 1.0], size=(T, B), p=[0.05, 0.9, 0.05]), dtype=torch.float32,
                              device=device)
    return {"obs": frames[:T], "actions": actions, "rewards": rewards, "terminated": terminated,
            "truncated": truncated, "log_prob": log_prob, "behaviour_logits": logits, "next_obs": frames[1:]}


def as_rollout(steps: dict[str, torch.Tensor]) -> Rollout:
    """:func:`atari_rollout`'s steps as rlrun's learners take them (rlrun/execution/rollout.py): where each copy goes
    on from after step T - 1 and the final observations where episodes ended (here the random frames after those
    steps) instead of every step's next observation."""
    next_obs, (T, B) = steps["next_obs"], steps["rewards"].shape
    done_at = (steps["terminated"] | steps["truncated"]).reshape(-1).nonzero().squeeze(1)
    final_obs = next_obs.reshape(T * B, *next_obs.shape[2:])[done_at]
    return Rollout(obs=steps["obs"], last_obs=next_obs[-1], final_obs=final_obs, final_index=done_at,
                   actions=steps["actions"], rewards=steps["rewards"], terminated=steps["terminated"],
                   truncated=steps["truncated"],
                   extras={"log_prob": steps["log_prob"], "behaviour_logits": steps["behaviour_logits"]})


def bare_gae(value_of: Callable[[torch.Tensor], torch.Tensor], rollout: dict[str, torch.Tensor], gamma: float,
             lam: float, values: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(values, advantages, returns)`` ``[T, B]``: GAE (Schulman et al. 2016, Eq. 16) with a time-limit
    truncation bootstrapping from V of the episode's real final observation. One value pass over the observations
    acted in (unless their ``values`` are given) plus the next observations that are read: the rollout's last ones
    and those at truncations."""
    obs, next_obs, rewards = rollout["obs"], rollout["next_obs"], rollout["rewards"]
    T, B = rewards.shape
    term = rollout["terminated"].float()
    trunc_only = rollout["truncated"].float() * (1.0 - term)
    done = torch.clamp(term + rollout["truncated"].float(), max=1.0)
    needed = trunc_only.bool()
    needed[-1] = True
    with torch.no_grad():
        if values is None:
            v = value_of(torch.cat([obs.reshape(T * B, *obs.shape[2:]), next_obs[needed]]))
            values, v_next = v[:T * B].reshape(T, B), v[T * B:]
        else:
            values, v_next = values.detach().reshape(T, B), value_of(next_obs[needed])
        next_values = torch.zeros(T, B, device=rewards.device)
        next_values[needed] = v_next
        rewards = rewards + gamma * trunc_only * next_values
        discounts = gamma * (1.0 - done)
        advantages = torch.empty(T, B, device=rewards.device)
        acc = torch.zeros(B, device=rewards.device)
        for t in range(T - 1, -1, -1):
            following = values[t + 1] if t + 1 < T else next_values[T - 1]
            acc = rewards[t] + discounts[t] * following - values[t] + discounts[t] * lam * acc
            advantages[t] = acc
    return values, advantages, advantages + values


def flat_time(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, *x.shape[2:])


# ---------------------------------------------------------------------------------------------------- PPO, A2C


def bare_ppo_update(net: BareActorCritic, optimizer: torch.optim.Optimizer, generator: torch.Generator,
                    rollout: dict[str, torch.Tensor], cfg: Any, clip_eps: float) -> torch.Tensor:
    """PPO's update (Schulman et al. 2017, Algorithm 1; CleanRL's ppo_atari.py): GAE under the current weights,
    then ``num_epochs`` epochs of shuffled minibatch steps on the clipped surrogate (Eq. 7) + ``vf_coef`` x
    0.5 (R - V)^2 (clipped when ``vf_clip_eps``) - ``ent_coef`` x entropy, advantages normalised per minibatch,
    gradient-norm clip. Returns the mean loss over the steps (each before its step)."""
    values, adv, ret = bare_gae(net.value_of, rollout, cfg.gamma, cfg.gae_lambda)
    obs, actions = flat_time(rollout["obs"]), flat_time(rollout["actions"])
    old_log_prob = flat_time(rollout["log_prob"])
    values, adv, ret = flat_time(values), flat_time(adv), flat_time(ret)
    losses = []
    for _ in range(cfg.num_epochs):
        for idx in torch.randperm(adv.shape[0], generator=generator).split(cfg.minibatch_size):
            logits, v = net(obs[idx])
            log_p = log_softmax(logits)
            log_prob = log_p.gather(1, actions[idx].unsqueeze(1)).squeeze(1)
            entropy = -(log_p.exp() * log_p).sum(-1)
            a = adv[idx]
            if cfg.normalize_advantage:
                a = (a - a.mean()) / (a.std() + 1e-8)
            ratio = torch.exp(log_prob - old_log_prob[idx])
            policy_loss = -torch.min(ratio * a, ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * a)
            if cfg.vf_clip_eps is None:
                value_loss = 0.5 * (ret[idx] - v).pow(2)
            else:
                clipped = values[idx] + (v - values[idx]).clamp(-cfg.vf_clip_eps, cfg.vf_clip_eps)
                value_loss = 0.5 * torch.max((v - ret[idx]).pow(2), (clipped - ret[idx]).pow(2))
            loss = (policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
            optimizer.step()
            losses.append(loss.detach())
    return torch.stack(losses).mean()


def ppo_pair(agent: Any, cfg: Any, spec: Any, T: int, B: int, device: torch.device = CPU) -> Pair:
    obs_space, n = spec.observation_space, int(spec.action_space.n)
    net = bare_actor_critic(agent.network, obs_space, n).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=True)
    generator = torch.Generator().manual_seed(SEED)  # the agent's MultiStep shuffles with this seed
    rollout = atari_rollout(net.actor_logits, obs_space, n, T, B, device=device)
    state = {"env_steps": 0}

    def bare() -> dict[str, Any]:
        left = remaining(state["env_steps"], cfg.total_env_steps)
        set_lr(optimizer, cfg.lr * (left if cfg.anneal_lr else 1.0))
        loss = bare_ppo_update(net, optimizer, generator, rollout, cfg, cfg.clip_eps * (left if cfg.anneal_clip
                                                                                        else 1.0))
        state["env_steps"] += T * B
        return {"loss": loss}

    batch = as_rollout(rollout)
    return Pair(lambda: agent.update(batch), bare, T * B)


def a2c_pair(agent: Any, cfg: Any, spec: Any, T: int, B: int, device: torch.device = CPU) -> Pair:
    """A2C (Mnih et al. 2016, Algorithm S3, synchronous): one step on -log pi(a|s) A + vf_coef 0.5 (R - V)^2 -
    ent_coef H over the rollout, with n-step / GAE advantages from the values of that step's own forward pass (the
    weights are those of the step: the same values as a separate pass) and a no-gradient pass over the next
    observations that are read."""
    obs_space, n = spec.observation_space, int(spec.action_space.n)
    net = bare_actor_critic(agent.network, obs_space, n).to(device)
    if cfg.optimizer == "rmsprop":
        optimizer: torch.optim.Optimizer = torch.optim.RMSprop(net.parameters(), lr=cfg.lr, alpha=cfg.rmsprop_alpha,
                                                               eps=cfg.optimizer_eps)
    else:
        optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.optimizer_eps)
    rollout = atari_rollout(net.actor_logits, obs_space, n, T, B, device=device)
    obs, actions = flat_time(rollout["obs"]), flat_time(rollout["actions"])
    state = {"env_steps": 0}

    def bare() -> dict[str, Any]:
        set_lr(optimizer, cfg.lr * (remaining(state["env_steps"], cfg.total_env_steps) if cfg.anneal_lr else 1.0))
        logits, v = net(obs)  # one step at these weights: its values serve the advantages too
        _, adv, ret = bare_gae(net.value_of, rollout, cfg.gamma, cfg.gae_lambda, values=v)
        adv, ret = flat_time(adv), flat_time(ret)
        if cfg.normalize_advantage:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        log_p = log_softmax(logits)
        log_prob = log_p.gather(1, actions.unsqueeze(1)).squeeze(1)
        entropy = -(log_p.exp() * log_p).sum(-1)
        loss = (-log_prob * adv + cfg.vf_coef * 0.5 * (ret - v).pow(2) - cfg.ent_coef * entropy).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
        optimizer.step()
        state["env_steps"] += T * B
        return {"loss": loss.detach()}

    batch = as_rollout(rollout)
    return Pair(lambda: agent.update(batch), bare, T * B)


# ---------------------------------------------------------------------------------------------------- TRPO


def _flat(tensors: Any) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def trpo_pair(agent: Any, cfg: Any, spec: Any, T: int, B: int, device: torch.device = CPU) -> Pair:
    """TRPO (Schulman et al. 2015, Sec. 6 and App. C; as Spinning Up / SB3-contrib): one natural-gradient step of
    the actor in a KL trust region (conjugate gradient on Fisher-vector products by double back-propagation, a
    backtracking line search), then Adam minibatch epochs on the critic's 0.5 (R - V)^2."""
    obs_space, n = spec.observation_space, int(spec.action_space.n)
    net = bare_actor_critic(agent.network, obs_space, n).to(device)
    actor = [*net.torso.parameters(), *net.policy.parameters()]
    critic = [*net.critic_torso.parameters(), *net.value.parameters()]
    value_optimizer = torch.optim.Adam(critic, lr=cfg.lr, eps=cfg.adam_eps)
    generator = torch.Generator().manual_seed(SEED)
    rollout = atari_rollout(net.actor_logits, obs_space, n, T, B, device=device)
    obs, actions = flat_time(rollout["obs"]), flat_time(rollout["actions"]).unsqueeze(1)
    state = {"env_steps": 0}

    def set_actor(flat: torch.Tensor) -> None:
        offset = 0
        with torch.no_grad():
            for p in actor:
                p.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()

    def bare() -> dict[str, Any]:
        set_lr(value_optimizer, cfg.lr * (remaining(state["env_steps"], cfg.total_env_steps) if cfg.anneal_lr
                                          else 1.0))
        _, adv, ret = bare_gae(net.value_of, rollout, cfg.gamma, cfg.gae_lambda)
        adv, ret = flat_time(adv), flat_time(ret)
        if cfg.normalize_advantage:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        # One actor pass: the old policy (detached), the surrogate and the KL, all at theta_old.
        log_p = log_softmax(net.actor_logits(obs))
        old_log_p = log_p.detach()
        old_p, old_log_prob = old_log_p.exp(), old_log_p.gather(1, actions).squeeze(1)

        def surrogate(log_p: torch.Tensor) -> torch.Tensor:
            return -(torch.exp(log_p.gather(1, actions).squeeze(1) - old_log_prob) * adv).mean()

        def kl(log_p: torch.Tensor) -> torch.Tensor:
            return (old_p * (old_log_p - log_p)).sum(-1).mean()

        loss = surrogate(log_p)
        g = _flat(torch.autograd.grad(loss, actor, retain_graph=True))
        kl_grad = _flat(torch.autograd.grad(kl(log_p), actor, create_graph=True))

        def fvp(v: torch.Tensor) -> torch.Tensor:
            return _flat(torch.autograd.grad(kl_grad.dot(v), actor, retain_graph=True)) + cfg.cg_damping * v

        x, r, d = torch.zeros_like(g), g.clone(), g.clone()  # conjugate gradient on F x = g
        r_dot_r = r.dot(r)
        for _ in range(cfg.cg_iters):
            if float(r_dot_r) < 1e-10:
                break
            fd = fvp(d)
            alpha = r_dot_r / d.dot(fd)
            x, r = x + alpha * d, r - alpha * fd
            new_r_dot_r = r.dot(r)
            d = r + (new_r_dot_r / r_dot_r) * d
            r_dot_r = new_r_dot_r
        x_f_x = x.dot(fvp(x))
        beta = torch.sqrt(2.0 * cfg.max_kl / x_f_x) if float(x_f_x) > 0 else torch.zeros((), device=g.device)
        step, expected = -beta * x, float(beta * g.dot(x))
        theta = _flat(w.detach() for w in actor).clone()
        before, fraction, accepted = float(loss.detach()), 1.0, False
        with torch.no_grad():  # backtracking line search: one actor pass per try
            for _ in range(cfg.line_search_max_backtracks):
                set_actor(theta + fraction * step)
                log_p = log_softmax(net.actor_logits(obs))
                after, kl_now = float(surrogate(log_p)), float(kl(log_p))
                if (math.isfinite(after) and expected > 0 and before - after
                        >= cfg.line_search_accept_ratio * fraction * expected and kl_now <= cfg.max_kl):
                    accepted = True
                    break
                fraction *= cfg.line_search_backtrack_ratio
            if not accepted:
                set_actor(theta)
                kl_now, fraction = float(kl(log_softmax(net.actor_logits(obs)))), 0.0
        value_losses = []
        for _ in range(cfg.vf_epochs):
            for idx in torch.randperm(ret.shape[0], generator=generator).split(cfg.vf_minibatch_size):
                value_loss = (0.5 * (ret[idx] - net.value_of(obs[idx])).pow(2)).mean()
                value_optimizer.zero_grad(set_to_none=True)
                value_loss.backward()
                value_optimizer.step()
                value_losses.append(float(value_loss.detach()))
        state["env_steps"] += T * B
        return {"loss/value": sum(value_losses) / len(value_losses), "policy/kl": kl_now,
                "policy/step_fraction": fraction}

    batch = as_rollout(rollout)
    return Pair(lambda: agent.update(batch), bare, T * B, ("loss/value", "policy/kl", "policy/step_fraction"),
                rtol=1e-3)


# ---------------------------------------------------------------------------------------------------- IMPALA, APPO


def bare_vtrace(log_rhos: torch.Tensor, discounts: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor,
                bootstrap: torch.Tensor, rho_bar: float | None, pg_rho_bar: float | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace targets and policy-gradient advantages (Espeholt et al. 2018, Eq. 1 and Sec. 4.2; TorchBeast's
    vtrace.py), ``[T, B]``, no gradient."""
    with torch.no_grad():
        rhos = torch.exp(log_rhos)
        clipped = rhos if rho_bar is None else rhos.clamp(max=rho_bar)
        cs = rhos.clamp(max=1.0)
        values_t1 = torch.cat([values[1:], bootstrap.unsqueeze(0)])
        deltas = clipped * (rewards + discounts * values_t1 - values)
        acc, out = torch.zeros_like(bootstrap), torch.empty_like(values)
        for t in range(values.shape[0] - 1, -1, -1):
            acc = deltas[t] + discounts[t] * cs[t] * acc
            out[t] = acc
        vs = out + values
        vs_t1 = torch.cat([vs[1:], bootstrap.unsqueeze(0)])
        pg_rhos = rhos if pg_rho_bar is None else rhos.clamp(max=pg_rho_bar)
        return vs, pg_rhos * (rewards + discounts * vs_t1 - values)


def bare_vtrace_inputs(net: BareActorCritic, rollout: dict[str, torch.Tensor], gamma: float
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(rewards, discounts, bootstrap)``: V of the last next observations (the bootstrap) and of those at
    time-limit truncations (folded into the reward) in one pass without gradient; discounts gamma (1 - done)."""
    next_obs, rewards = rollout["next_obs"], rollout["rewards"]
    T, B = rewards.shape
    term = rollout["terminated"].float()
    trunc_only = rollout["truncated"].float() * (1.0 - term)
    done = torch.clamp(term + rollout["truncated"].float(), max=1.0)
    mid = trunc_only[:T - 1].bool()
    with torch.no_grad():
        v = net.value_of(torch.cat([next_obs[T - 1], next_obs[:T - 1][mid]]))
        next_values = torch.zeros(T, B, device=rewards.device)
        next_values[T - 1] = v[:B]
        next_values[:T - 1][mid] = v[B:]
    return rewards + gamma * trunc_only * next_values, gamma * (1.0 - done), v[:B]


def _impala_optimizer(net: nn.Module, cfg: Any) -> torch.optim.Optimizer:
    if cfg.optimizer == "rmsprop":
        return torch.optim.RMSprop(net.parameters(), lr=cfg.lr, alpha=cfg.rmsprop_alpha, eps=cfg.optimizer_eps,
                                   momentum=cfg.rmsprop_momentum)
    return torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.optimizer_eps)


def _reduce(x: torch.Tensor, reduction: str) -> torch.Tensor:
    return x.sum() if reduction == "sum" else x.mean()


def impala_pair(agent: Any, cfg: Any, spec: Any, T: int, B: int, device: torch.device = CPU) -> Pair:
    """IMPALA's learner step (Espeholt et al. 2018; TorchBeast's learn()): one forward over the unrolls, V-trace
    targets, -log pi A^pg + vf_coef 0.5 (v_s - V)^2 - ent_coef H (summed or averaged), clip, RMSProp/Adam."""
    obs_space, n = spec.observation_space, int(spec.action_space.n)
    net = bare_actor_critic(agent.network, obs_space, n).to(device)
    optimizer = _impala_optimizer(net, cfg)
    rollout = atari_rollout(net.actor_logits, obs_space, n, T, B, device=device)
    obs, actions = rollout["obs"], rollout["actions"].unsqueeze(-1)
    state = {"env_steps": 0}

    def bare() -> dict[str, Any]:
        set_lr(optimizer, cfg.lr * (remaining(state["env_steps"], cfg.total_env_steps) if cfg.anneal_lr else 1.0))
        logits, v = net(obs)
        log_p, values = log_softmax(logits).reshape(T, B, n), v.reshape(T, B)
        log_prob = log_p.gather(-1, actions).squeeze(-1)
        entropy = -(log_p.exp() * log_p).sum(-1)
        rewards, discounts, bootstrap = bare_vtrace_inputs(net, rollout, cfg.gamma)
        vs, pg_adv = bare_vtrace(log_prob.detach() - rollout["log_prob"], discounts, rewards, values.detach(),
                                 bootstrap, cfg.clip_rho_threshold, cfg.clip_pg_rho_threshold)
        per_step = -log_prob * pg_adv + cfg.vf_coef * 0.5 * (vs - values).pow(2) - cfg.ent_coef * entropy
        loss = _reduce(per_step, cfg.loss_reduction)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
        optimizer.step()
        state["env_steps"] += T * B
        return {"loss": loss.detach()}

    batch = as_rollout(rollout)
    return Pair(lambda: agent.update(batch), bare, T * B)


def appo_pair(agent: Any, cfg: Any, spec: Any, T: int, B: int, device: torch.device = CPU) -> Pair:
    """APPO (RLlib's): ``num_epochs`` full-batch steps, each with V-trace targets recomputed under the current
    weights and PPO's clipped surrogate on A = r + gamma v_{s+1} - V(x_s) with the ratio to the behaviour policy."""
    if cfg.use_kl_loss:
        raise ValueError("appo_pair: no hand-written KL penalty (the preset has use_kl_loss=false)")
    obs_space, n = spec.observation_space, int(spec.action_space.n)
    net = bare_actor_critic(agent.network, obs_space, n).to(device)
    optimizer = _impala_optimizer(net, cfg)
    rollout = atari_rollout(net.actor_logits, obs_space, n, T, B, device=device)
    obs, actions, behaviour = rollout["obs"], rollout["actions"].unsqueeze(-1), rollout["log_prob"]
    state = {"env_steps": 0}

    def bare() -> dict[str, Any]:
        set_lr(optimizer, cfg.lr * (remaining(state["env_steps"], cfg.total_env_steps) if cfg.anneal_lr else 1.0))
        total = 0.0
        for _ in range(cfg.num_epochs):
            logits, v = net(obs)
            log_p, values = log_softmax(logits).reshape(T, B, n), v.reshape(T, B)
            log_prob = log_p.gather(-1, actions).squeeze(-1)
            entropy = -(log_p.exp() * log_p).sum(-1)
            rewards, discounts, bootstrap = bare_vtrace_inputs(net, rollout, cfg.gamma)
            vs, _ = bare_vtrace(log_prob.detach() - behaviour, discounts, rewards, values.detach(), bootstrap,
                                cfg.clip_rho_threshold, None)
            adv = rewards + discounts * torch.cat([vs[1:], bootstrap.unsqueeze(0)]) - values.detach()
            ratio = torch.exp(log_prob - behaviour)
            policy_loss = -torch.min(ratio * adv, ratio.clamp(1.0 - cfg.clip_eps, 1.0 + cfg.clip_eps) * adv)
            per_step = policy_loss + cfg.vf_coef * 0.5 * (vs - values).pow(2) - cfg.ent_coef * entropy
            loss = _reduce(per_step, cfg.loss_reduction)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
            optimizer.step()
            total += float(loss.detach())
        state["env_steps"] += T * B
        return {"loss": total / cfg.num_epochs}

    batch = as_rollout(rollout)
    return Pair(lambda: agent.update(batch), bare, T * B)


# ---------------------------------------------------------------------------------------------------- Ape-X


class BareQ(nn.Module):
    """Torso -> Q(s, .): a linear head, or the dueling one (Wang et al. 2016, Eq. 9: V + A - mean A)."""

    def __init__(self, torso: nn.Sequential, num_actions: int, dueling: bool, network: str) -> None:
        super().__init__()
        self.torso, self.network, self.dueling = torso, network, dueling
        width = torso_width(torso)
        if dueling:
            self.value, self.advantage = nn.Linear(width, 1), nn.Linear(width, num_actions)
        else:
            self.linear = nn.Linear(width, num_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.torso(bare_input(obs, self.network))
        if not self.dueling:
            return self.linear(x)
        a = self.advantage(x)
        return self.value(x) + a - a.mean(dim=-1, keepdim=True)


def bare_q_of(q: Any, obs_space: sp.Box, num_actions: int, cfg: Any) -> BareQ:
    kind = torso_kind(q.torso)
    bare = BareQ(bare_torso(obs_space, kind, cfg.hidden_sizes, cfg.activation), num_actions, cfg.dueling, kind)
    copy_weights(q.torso, bare.torso)
    if cfg.dueling:
        copy_weights(q.head.value, bare.value)
        copy_weights(q.head.advantage, bare.advantage)
    else:
        copy_weights(q.head.linear, bare.linear)
    return bare


def apex_pair(agent: Any, cfg: Any, spec: Any, batch_size: int, device: torch.device = CPU) -> Pair:
    """Ape-X's learner step (Horgan et al. 2018): double-Q n-step TD error, importance-weighted squared (or
    Huber) loss, clip, Adam (fused, as the learner), then the target sync (hard every ``target_update_every``
    steps, or Polyak ``tau``). The sampled transitions' new priorities are the |TD errors| both sides return."""
    obs_space, n = spec.observation_space, int(spec.action_space.n)
    online = bare_q_of(agent.q, obs_space, n, cfg).to(device)
    target = bare_q_of(agent.target_q, obs_space, n, cfg).requires_grad_(False).to(device)
    optimizer = torch.optim.Adam(online.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=True)
    batch = make_batch(obs_space, n, batch_size, device=device)
    batch["discount"] = batch["discount"] * cfg.gamma ** (cfg.n_step - 1)  # gamma^n * (1 - terminated)
    weights = torch.as_tensor(np.random.default_rng(1).uniform(0.2, 1.0, batch_size), dtype=torch.float32,
                              device=device)
    state = {"calls": 0}

    def bare() -> dict[str, Any]:
        q_taken = online(batch["obs"]).gather(1, batch["action"].unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            q_next_target = target(batch["next_obs"])
            select = online(batch["next_obs"]) if cfg.double_q else q_next_target
            bootstrap = q_next_target.gather(1, select.argmax(dim=1, keepdim=True)).squeeze(1)
            y = batch["reward"] + batch["discount"] * bootstrap
        td = y - q_taken
        if cfg.huber_delta is None:
            per_item = 0.5 * td.pow(2)
        else:
            per_item = F.huber_loss(td, torch.zeros_like(td), reduction="none", delta=cfg.huber_delta)
        loss = (per_item * weights).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(online.parameters(), cfg.max_grad_norm)
        optimizer.step()
        state["calls"] += 1
        with torch.no_grad():
            if cfg.tau < 1.0:
                for t, s in zip(target.parameters(), online.parameters(), strict=True):
                    t.lerp_(s, cfg.tau)
            elif state["calls"] % cfg.target_update_every == 0:
                target.load_state_dict(online.state_dict())
        return {"loss": loss.detach(), "td_error": td.detach()}

    def through_agent() -> dict[str, Any]:
        info = agent.update(batch, weights)
        return {**info, "td_abs_sum": info["td_error"].abs().sum()}

    def bare_with_sum() -> dict[str, Any]:
        info = bare()
        return {**info, "td_abs_sum": info["td_error"].abs().sum()}

    return Pair(through_agent, bare_with_sum, batch_size, ("loss", "td_abs_sum"))


# ---------------------------------------------------------------------------------------------------- SAC


class BareSACActor(nn.Module):
    """MLP -> (mean, log_std) of the Gaussian before tanh; log_std bounded by min + (max - min) (tanh(raw) + 1)/2."""

    def __init__(self, torso: nn.Sequential, action_dim: int, log_std_min: float, log_std_max: float) -> None:
        super().__init__()
        self.torso = torso
        self.mean, self.log_std = nn.Linear(torso_width(torso), action_dim), nn.Linear(torso_width(torso), action_dim)
        self.low, self.high = log_std_min, log_std_max

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.torso(obs)
        return self.mean(x), self.low + 0.5 * (self.high - self.low) * (torch.tanh(self.log_std(x)) + 1.0)


class BareSACQ(nn.Module):
    """Q(s, a): an MLP on [obs, action], then a linear output."""

    def __init__(self, torso: nn.Sequential) -> None:
        super().__init__()
        self.torso, self.out = torso, nn.Linear(torso_width(torso), 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.out(self.torso(torch.cat([obs, action], dim=-1))).squeeze(-1)


def sac_pair(agent: Any, cfg: Any, spec: Any, batch_size: int, device: torch.device = CPU) -> Pair:
    """SAC's update (Haarnoja et al. 2018, Algorithm 1; CleanRL's sac_continuous_action.py): one actor pass over
    [obs; next_obs] for the reparameterised tanh-Gaussian samples, the critic step on the soft Bellman target
    (target twin Q, min, - alpha log pi), the actor step (critic weights frozen), the temperature step, Polyak."""
    obs_space, action_dim = spec.observation_space, int(np.prod(spec.action_space.shape))
    obs_dim = int(np.prod(obs_space.shape))

    def mlp(width: int) -> nn.Sequential:
        return bare_torso(sp.Box(-np.inf, np.inf, (width,), np.float32), "mlp", cfg.hidden_sizes, cfg.activation)

    actor = BareSACActor(mlp(obs_dim), action_dim, cfg.log_std_min, cfg.log_std_max)
    copy_weights(agent.actor.torso, actor.torso)
    copy_weights(agent.actor.head.mean, actor.mean)
    copy_weights(agent.actor.head.log_std, actor.log_std)
    qs, targets = [], []
    for source, ours in ((agent.critic, qs), (agent.target_critic, targets)):
        for q in (source.q1, source.q2):
            bare = BareSACQ(mlp(obs_dim + action_dim))
            copy_weights(q.torso, bare.torso)
            copy_weights(q.out, bare.out)
            ours.append(bare)
    for t in targets:
        t.requires_grad_(False)
    actor = actor.to(device)
    qs, targets = [q.to(device) for q in qs], [t.to(device) for t in targets]
    critic_params = [p for q in qs for p in q.parameters()]
    log_alpha = nn.Parameter(torch.tensor(float(np.log(cfg.init_alpha)), device=device))
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=cfg.actor_lr, fused=True)
    critic_optimizer = torch.optim.Adam(critic_params, lr=cfg.critic_lr, fused=True)
    alpha_optimizer = torch.optim.Adam([log_alpha], lr=cfg.alpha_lr, fused=True)
    target_entropy = -float(action_dim) if cfg.target_entropy is None else float(cfg.target_entropy)
    rng = np.random.default_rng(0)
    batch = {"obs": sp.to_torch(obs_space, sp.sample(obs_space, (batch_size,), seed=0)),
             "next_obs": sp.to_torch(obs_space, sp.sample(obs_space, (batch_size,), seed=1)),
             "action": torch.as_tensor(rng.uniform(-1, 1, (batch_size, action_dim)), dtype=torch.float32),
             "reward": torch.as_tensor(rng.uniform(-16.3, 0.0, batch_size), dtype=torch.float32),
             "discount": torch.full((batch_size,), cfg.gamma)}
    batch = to_device(batch, device)
    obs, next_obs = batch["obs"], batch["next_obs"]

    def bare() -> dict[str, Any]:
        alpha = log_alpha.detach().exp()
        mean, log_std = actor(torch.cat([obs, next_obs]))
        u = mean + log_std.exp() * torch.randn_like(mean)
        a = torch.tanh(u)
        log_prob = ((-0.5 * ((u - mean) * torch.exp(-log_std)).pow(2) - log_std - 0.5 * math.log(2 * math.pi))
                    - 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
        with torch.no_grad():
            next_q = torch.minimum(targets[0](next_obs, a[batch_size:]), targets[1](next_obs, a[batch_size:]))
            y = batch["reward"] + batch["discount"] * (next_q - alpha * log_prob[batch_size:])
        critic_loss = 0.5 * ((qs[0](obs, batch["action"]) - y).pow(2).mean()
                             + (qs[1](obs, batch["action"]) - y).pow(2).mean())
        critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        critic_optimizer.step()
        for p in critic_params:
            p.requires_grad_(False)
        a_pi, log_pi = a[:batch_size], log_prob[:batch_size]
        actor_loss = (alpha * log_pi - torch.minimum(qs[0](obs, a_pi), qs[1](obs, a_pi))).mean()
        actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        actor_optimizer.step()
        for p in critic_params:
            p.requires_grad_(True)
        alpha_loss = -(log_alpha.exp() * (log_pi.detach() + target_entropy)).mean()
        alpha_optimizer.zero_grad(set_to_none=True)
        alpha_loss.backward()
        alpha_optimizer.step()
        with torch.no_grad():
            for q, t in zip(qs, targets, strict=True):
                for tp, sp_ in zip(t.parameters(), q.parameters(), strict=True):
                    tp.lerp_(sp_, cfg.tau)
        return {"loss/critic": critic_loss.detach(), "loss/actor": actor_loss.detach(),
                "loss/temperature": alpha_loss.detach()}

    if not cfg.learn_alpha:
        raise ValueError("sac_pair: the hand-written update learns the temperature (the run's default)")
    return Pair(lambda: agent.update(batch), bare, batch_size, ("loss/critic", "loss/actor", "loss/temperature"))


# ---------------------------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class AlgoCase:
    algo: str
    overrides: tuple[str, ...]
    """Config overrides after ``algo=<algo>``, as on rlrun's command line."""
    pair: Callable[..., Pair]
    size: tuple[int, ...]
    """(T, B) of the rollout (on-policy) or (batch size,) (replay)."""


ALGO_CASES: dict[str, AlgoCase] = {
    "ppo_atari_nature_cnn": AlgoCase("ppo", ("env=pong", "algo.rollout_steps=8", "algo.num_epochs=1",
                                             "algo.minibatch_size=32"), ppo_pair, (8, 8)),
    "a2c_atari_nature_cnn": AlgoCase("a2c", ("env=pong",), a2c_pair, (5, 8)),
    "trpo_atari_nature_cnn": AlgoCase("trpo", ("env=pong", "algo.rollout_steps=4", "algo.vf_epochs=1",
                                               "algo.vf_minibatch_size=16"), trpo_pair, (4, 4)),
    "impala_atari_impala_resnet": AlgoCase("impala", ("env=pong", "algo.unroll_length=5", "algo.batch_size=4"),
                                           impala_pair, (5, 4)),
    "appo_atari_impala_resnet": AlgoCase("appo", ("env=pong", "algo.unroll_length=5", "algo.batch_size=4"),
                                         appo_pair, (5, 4)),
    "apex_atari_nature_cnn": AlgoCase("apex", ("env=pong", "algo.network=nature_cnn", "algo.batch_size=32"),
                                      apex_pair, (32,)),
    "sac_pendulum_mlp": AlgoCase("sac", ("env=pendulum",), sac_pair, (256,)),
}


def algo_pair(name: str, device: torch.device = CPU) -> Pair:
    """Case ``name``'s two sides, built as the run builds the agent (then moved to ``device``, as the run does)."""
    from rlrun.registry import registry

    case = ALGO_CASES[name]
    cfg, spec = run_config(case.algo, case.overrides)
    torch.manual_seed(SEED)
    agent = registry.get("algo", case.algo).make_agent(cfg, spec, SEED)
    pair = case.pair(agent, cfg, spec, *case.size, device=device)  # the hand-written side copies the weights here
    agent.to(device)
    return pair


def make_pair(name: str, device: torch.device = CPU) -> Pair:
    """Any case's two sides on ``device`` (the CUDA tests compare the agent's update there with the CPU's)."""
    return dqn_pair(name, device) if name in CASES else algo_pair(name, device)


def algo_case(name: str, rounds: int, min_time_s: float, device: torch.device = CPU) -> dict[str, Any]:
    case = ALGO_CASES[name]
    figures = measure(name, make_pair(name, device), rounds, min_time_s)
    size = "x".join(map(str, case.size))
    figures[f"settings/{name}"] = f"rlrun algo={case.algo} {' '.join(case.overrides)}; batch {size}"
    return figures


# algo -> its cases
ALGOS: dict[str, tuple[str, ...]] = {"dqn": tuple(CASES)}
for _name, _case in ALGO_CASES.items():
    ALGOS.setdefault(_case.algo, ())
    ALGOS[_case.algo] += (_name,)
ALL_CASES = (*CASES, *ALGO_CASES)


def run_case(name: str, rounds: int, min_time_s: float, device: torch.device = CPU) -> dict[str, Any]:
    return (dqn_case if name in CASES else algo_case)(name, rounds, min_time_s, device)


def compiled_case(name: str, rounds: int, min_time_s: float, device: torch.device) -> dict[str, Any]:
    """The device's own limit for a DQN case (LeanRL's method): the hand-written step under ``torch.compile``, with
    CUDA graphs on a GPU (``mode="reduce-overhead"``, the optimizer's state on the device: ``capturable=True``),
    timed against the agent's update. Its first two losses must equal the eager step's."""
    obs_space, num_actions, network, batch_size = CASES[name]
    on_gpu = device.type == "cuda"
    pair = dqn_pair(name, device)
    torch.manual_seed(SEED)  # the pair's agent's initial weights
    agent = dqn_agent(obs_space, sp.Discrete(num_actions), network, **AGENT_SETTINGS)
    online, target = (m.to(device) for m in bare_copy_of(agent, obs_space, num_actions, network))
    optimizer = torch.optim.Adam(online.parameters(), lr=torch.tensor(AGENT_SETTINGS["lr"], device=device)
                                 if on_gpu else AGENT_SETTINGS["lr"], capturable=on_gpu)
    batch = make_batch(obs_space, num_actions, batch_size, device=device)
    settings = AGENT_SETTINGS["huber_delta"], AGENT_SETTINGS["max_grad_norm"], AGENT_SETTINGS["tau"]
    # A CPU has no CUDA graphs: there the path is checked with the eager backend (no C++ build in a dry run).
    step = torch.compile(bare_dqn_step, mode="reduce-overhead") if on_gpu else torch.compile(bare_dqn_step,
                                                                                             backend="eager")

    def compiled() -> dict[str, Any]:
        return {"loss": step(online, target, optimizer, batch, network, *settings).clone()}

    return measure(f"{name}/compiled", Pair(pair.agent, synced(compiled, device), batch_size, rtol=1e-3),
                   rounds, min_time_s)


def synced(fn: Callable[[], dict[str, Any]], device: torch.device) -> Callable[[], dict[str, Any]]:
    """``fn`` waiting for the device at its end (a GPU's kernels run after the call returns)."""
    if device.type != "cuda":
        return fn

    def call() -> dict[str, Any]:
        out = fn()
        torch.cuda.synchronize(device)
        return out

    return call


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CI settings: 7 rounds of 0.4 s")
    parser.add_argument("--rounds", type=int, help="timed rounds (default 9; --quick 7)")
    parser.add_argument("--min-time", type=float, help="seconds per round, both sides (default 1.0; --quick 0.4)")
    parser.add_argument("--cases", default=",".join(ALL_CASES), help=f"comma-separated, of {', '.join(ALL_CASES)}")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (rlrun's default: 1)")
    parser.add_argument("--device", default="cpu", help="where both sides update: cpu | cuda (the GPU learner)")
    parser.add_argument("--compiled", default="", help="DQN cases also timed against the hand-written step under "
                                                       "torch.compile (CUDA graphs on a GPU), e.g. atari_nature_cnn")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    rounds = args.rounds or (7 if args.quick else 9)
    min_time = args.min_time or (0.4 if args.quick else 1.0)
    torch.set_num_threads(args.threads)
    figures: dict[str, Any] = {"torch_threads": args.threads, "rounds": rounds, "device": str(device),
                               "load_average_before": load_average()}
    cases = [c for c in args.cases.split(",") if c]
    compiled = [c for c in args.compiled.split(",") if c]
    for case in cases:
        if case not in ALL_CASES:
            parser.error(f"unknown case {case}; cases: {', '.join(ALL_CASES)}")
    for case in compiled:
        if case not in CASES:
            parser.error(f"--compiled {case}: only the DQN cases ({', '.join(CASES)})")
    for case in cases:
        figures.update(run_case(case, rounds, min_time, device))
    for case in compiled:
        try:
            figures.update(compiled_case(case, rounds, min_time, device))
        except Exception as e:  # noqa: BLE001 - a figure that cannot be had is reported, the others stand
            figures[f"unavailable/{case}/compiled"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    from rlrun.registry import registry

    for algo in registry.names("algo"):
        if algo not in ALGOS:
            figures[f"unavailable/{algo}"] = f"no hand-written reference update for algo={algo} yet"
    figures["load_average_after"] = load_average()
    command = "python -m benchmarks.learner_throughput " + " ".join(sys.argv[1:] if argv is None else argv)
    publish("learner_throughput", figures, command)
    return figures


if __name__ == "__main__":
    main()
