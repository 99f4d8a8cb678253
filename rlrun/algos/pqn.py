"""PQN: parallelised Q-learning (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning", Algorithm 1,
as CleanRL's pqn.py keeps it): vectorised env copies act epsilon-greedily in a Q-network with LayerNorm; every
update turns the rollout into Peng's Q(lambda) targets and takes epochs of shuffled minibatch steps on the squared
error to them. No replay memory, no target network: the LayerNorm is what keeps the bootstrapped targets stable
(the paper's Section 4).

Every update, read top to bottom (:meth:`PQNAgent.update`):

1. ``max_a Q(s'_t, a)`` for every step under the current weights (one pass over the rollout's observations, and one
   over the real next observations at episode ends and the last step: :meth:`PQNAgent.next_max_q`);
2. the targets :func:`rlrun.ops.q_lambda_returns` (terminations end the return, truncations bootstrap);
3. ``num_epochs`` x ``num_minibatches`` gradient steps (RAdam) on ``(Q(s_t, a_t) - G_t)^2``;
4. the epsilon and learning-rate schedules advance by the rollout's env steps.

What PQN shares with the PPO family is its plan and the rollout machinery (:mod:`rlrun.algos.on_policy`:
sample ``rollout_steps`` of every env copy, learn, broadcast; observing, the learning-rate schedule, the optimizer's
state); its network is DQN's Q-network component (:class:`rlrun.components.q_network.QNetwork`) with the torso's
LayerNorm on, and its exploration DQN's :class:`~rlrun.components.exploration.EpsilonGreedy`. Its config schema is
``rlrun.algos.pqn_config.PQNConfig`` (each key documented there).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from rlrun import spaces as sp
from rlrun.algos.base import DISCRETE, check_action_space
from rlrun.algos.on_policy import OnPolicyAgent, OnPolicyPlan
from rlrun.algos.pqn_config import PQNConfig
from rlrun.components.base import Component, api
from rlrun.components.exploration import EpsilonGreedy
from rlrun.components.networks import orthogonal_init_torsos
from rlrun.components.optimizers import mean_scalars, minibatches, optimizer_step
from rlrun.components.q_network import QNetwork
from rlrun.execution.rollout import Rollout
from rlrun.metric_names import EPSILON, LOSS_TD, LR
from rlrun.ops import flatten_time, q_lambda_returns
from rlrun.ops.action_mask import MASK_KEY

# ---------------------------------------------------------------------------------------------------- agent


class PQNAgent(OnPolicyAgent):
    """The PQN agent API: get_actions (epsilon-greedy in Q), observe (collect a rollout step by step from an
    application's loop), update (Q(lambda) targets + epochs of minibatch steps), weights (the Q-network and the
    epsilon schedule's step). ``network`` is a :class:`QNetwork`."""

    routes_updates = True

    def __init__(self, cfg: PQNConfig, seed: int = 0, name: str = "pqn_agent") -> None:
        super().__init__(cfg, seed, name)
        self.exploration = EpsilonGreedy(cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_decay_steps)

    def _make_network(self, cfg: PQNConfig) -> QNetwork:
        return QNetwork(cfg.network, cfg.hidden_sizes, cfg.activation, name="network", layer_norm=cfg.layer_norm,
                        action_mask=cfg.action_mask)

    def _make_optimizers(self, cfg: PQNConfig, seed: int) -> None:
        """``optimizer``: RAdam (Liu et al. 2020), as CleanRL's pqn.py."""
        self.optimizer = torch.optim.RAdam(self.network.parameters(), lr=cfg.lr)

    def _build(self, obs: sp.Space, actions: sp.Space) -> None:
        check_action_space(self.cfg.name, DISCRETE, actions)
        self.action_space = actions
        self.build_child(self.network, obs=obs, actions=actions)
        if self.network.masked:  # explore among the legal actions only
            self.build_child(self.exploration, q=self.network.output("forward"), action_mask=obs[MASK_KEY])
        else:
            self.build_child(self.exploration, q=self.network.output("forward"))
        if self.cfg.orthogonal_init:  # every Linear and Conv2d, the Q layer too (CleanRL's layer_init, std sqrt 2)
            orthogonal_init_torsos(self.network)
        self.output_spaces["get_actions"] = actions
        self._make_optimizers(self.cfg, self.seed)

    @api
    def get_actions(self, obs: Any, explore: bool = True) -> torch.Tensor:
        """Epsilon-greedy actions in Q (``explore=False``: greedy)."""
        return self.exploration.get_actions(self.network(obs), explore)

    # ------------------------------------------------------------------ learning

    def next_max_q(self, rollout: Rollout) -> torch.Tensor:
        """``max_a Q(s'_t, a)`` ``[T, B]`` under the current weights, ``s'_t`` the real observation after step t:
        ``obs[t + 1]`` within an episode, the final observation at an episode's end, what the copy goes on from after
        the last step (:meth:`Rollout.next_obs`, asked only for those rows)."""
        T, B = rollout.rewards.shape
        max_q = self.network(flatten_time(rollout.obs)).amax(-1).float().reshape(T, B)
        out = torch.empty_like(max_q)
        out[:-1] = max_q[1:]
        needed = rollout.done.clone()
        needed[-1] = True
        rows = rollout.rows(needed)
        out.view(-1)[rows.to(out.device)] = self.network(rollout.next_obs(rows)).amax(-1).float().to(out.device)
        return out

    @api
    def update(self, batch: Rollout | None = None) -> dict[str, Any]:
        """Learn on one time-major rollout ``[T, B, ...]`` (default: the steps ``observe()``'d since the last
        update): Q(lambda) targets under the current weights, then ``num_epochs`` epochs of ``num_minibatches``
        shuffled minibatch steps on the squared TD error. Returns the mean loss over the gradient steps.

        With the device strategy's ``update_strategy`` (``device=replicas``, ``device.precision``) each minibatch
        step runs through it."""
        rollout = batch if batch is not None else self._collected()
        cfg = self.cfg
        with torch.no_grad():
            targets = q_lambda_returns(rollout.rewards.float(), self.next_max_q(rollout), self.terminations(rollout),
                                       rollout.truncated, cfg.gamma, cfg.q_lambda)
        lr = self.set_learning_rate()
        data = flatten_time({"obs": rollout.obs, "actions": rollout.actions, "targets": targets})
        n = targets.numel()

        def loss_fn(mb: dict[str, Any]) -> tuple[torch.Tensor, dict]:
            q = self.network(mb["obs"]).gather(-1, mb["actions"].long().unsqueeze(-1)).squeeze(-1)
            return F.mse_loss(q.float(), mb["targets"]), {}

        steps = []
        for _ in range(cfg.num_epochs):
            for mb in minibatches(data, -(-n // cfg.num_minibatches), self.generator):
                if self.update_strategy is None:
                    loss, step = loss_fn(mb)
                    step.update(optimizer_step(self.optimizer, loss, cfg.max_grad_norm))
                else:
                    step = self.update_strategy.step(self.optimizer, loss_fn, mb, cfg.max_grad_norm)
                steps.append(step)
        info = mean_scalars(steps)
        info[LOSS_TD] = info.pop("loss")
        self.env_steps += n
        self.exploration.advance(n)  # the next rollout acts with the epsilon of the env steps so far
        info[LR] = lr
        info[EPSILON] = self.exploration.epsilon()
        return info

    # ------------------------------------------------------------------ weights

    @api
    def get_weights(self) -> dict[str, torch.Tensor]:
        """The Q-network and the epsilon schedule's step (a remote worker explores with the learner's epsilon)."""
        return self.exploration.with_step(super().get_weights())

    @api
    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        super().set_weights(self.exploration.take_step(weights))


# ---------------------------------------------------------------------------------------------------- plan


class PQN(OnPolicyPlan):
    """The PPO family's plan (:class:`OnPolicyPlan`): sample ``rollout_steps`` agent steps of every env copy, one
    PQN update, broadcast the new weights (and epsilon). Discrete actions only."""

    agent_class: type[Component] = PQNAgent
    takes_actions = DISCRETE
