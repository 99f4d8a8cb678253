"""A2C: synchronous advantage actor-critic (Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement
Learning", Algorithm S3, run synchronously over env copies as in OpenAI Baselines' a2c and SB3's A2C).

Every update: ``rollout_steps`` agent steps of every env copy, advantages from the n-step returns (``gae_lambda=1``,
the paper's estimator; ``< 1`` gives GAE), and *one* gradient step on

    L = -log pi(a_t|s_t) A_t + vf_coef * 1/2 (R_t - V(s_t))^2 - ent_coef * H(pi(.|s_t))

(:func:`rlrun.components.policy_losses.a2c_loss`) averaged over the rollout. It is PPO's plan with a different
update: the actor-critic network (:mod:`rlrun.components.actor_critic`), the truncation-aware advantage estimator
(:func:`rlrun.ops.truncation_aware_gae`), acting, observing, weights and the plan come from the PPO family's base,
:mod:`rlrun.algos.on_policy`; this file holds what differs (the optimizer and the loss). Its config schema is
``rlrun.algos.a2c_config.A2CConfig`` (each key documented there and in conf/algo/a2c.yaml).

``algo.mode=async`` is A3C as RLlib Flow writes it (``AsyncGradients`` -> ``ApplyGradients``): every rollout
worker acts with an :class:`A3CWorkerAgent`, which computes the gradient of the A2C loss on its own rollout in the
worker (the ``postprocess_batch`` hook of ``rlrun/execution/rollout_worker.py``) and sends it with the rollout in
``SampleBatch.info``; the learner applies each gradient as it arrives (``sample_async``, one optimizer step each)
and sends that worker the new weights before its next rollout. A gradient may thus be computed on weights a few
steps old (the paper's lock-free Hogwild updates have the same staleness). A worker that acts with the learner's
own agent (``executor=local`` with one worker) sends no gradient; the learner computes it, which makes a3c there
the same as a2c with one gradient step per rollout.
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algos.a2c_config import A2CConfig
from rlrun.algos.base import IterationResult, learner_metrics
from rlrun.algos.on_policy import OnPolicyAgent, OnPolicyPlan, rmsprop_or_adam
from rlrun.components.base import api
from rlrun.components.distributions import make_distribution
from rlrun.components.optimizers import optimizer_step
from rlrun.components.policy_losses import a2c_loss
from rlrun.envs.gym_env import EnvSpec
from rlrun.execution.rollout import Rollout
from rlrun.metric_names import ENTROPY, EXPLAINED_VARIANCE, GRADIENT_STEPS, LOSS_POLICY, LOSS_VALUE, LR, UPDATES
from rlrun.ops import explained_variance, flatten_time, truncation_aware_gae

MODES = ("sync", "async")


class A2CAgent(OnPolicyAgent):
    """The A2C agent: the PPO family's acting, observing, advantages and weights (:class:`OnPolicyAgent`); its
    update is one gradient step on the A2C loss."""

    routes_updates = True

    def __init__(self, cfg: A2CConfig, seed: int = 0, name: str = "a2c_agent") -> None:
        super().__init__(cfg, seed, name)

    def _make_optimizers(self, cfg: A2CConfig, seed: int) -> None:
        """``optimizer``: one RMSProp (Mnih et al. 2016; alpha 0.99) or Adam step per rollout."""
        self.optimizer = rmsprop_or_adam(cfg, self.network.parameters())

    def loss_fn(self, rollout: Rollout) -> tuple[Any, dict[str, Any], torch.Tensor, torch.Tensor]:
        """``(loss_fn, data, values, returns)`` for a time-major rollout: n-step / GAE advantages under the current
        weights, the flat ``data`` rows (obs, actions, advantages, returns) and ``loss_fn(rows) -> (loss, info)``,
        the A2C loss averaged over the rows."""
        values, adv, ret = self.advantages(rollout)
        actions = rollout.extras["raw_action"] if self.continuous else rollout.actions
        data = flatten_time({"obs": rollout.obs, "actions": actions, "advantages": adv, "returns": ret})
        cfg = self.cfg

        def loss_fn(rows: dict[str, Any]) -> tuple[torch.Tensor, dict]:
            params, v = self.network(rows["obs"])
            dist = make_distribution(self.action_space, params)
            t = a2c_loss(dist.log_prob(rows["actions"]), rows["advantages"], v, rows["returns"], dist.entropy(),
                         vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef, normalize_advantage=cfg.normalize_advantage)
            return t.total, {LOSS_POLICY: t.policy.detach(), LOSS_VALUE: t.value.detach(),
                             ENTROPY: t.entropy.detach()}

        return loss_fn, data, values, data["returns"]

    @api
    def update(self, batch: Rollout | None = None) -> dict[str, Any]:
        """Learn on one time-major rollout ``[T, B, ...]`` (default: the steps ``observe()``'d since the last
        update; with the extra raw_action for Box actions).
        n-step / GAE advantages under the current weights, then one gradient step on the A2C loss over all
        ``T * B`` steps (through the device strategy's update if set; with ``normalize_advantage`` each replica
        normalises its own shard's advantages)."""
        rollout = self.normalize_rollout(batch if batch is not None else self._collected())
        lr = self.set_learning_rate()
        if self.update_strategy is None or self.recurrent:  # a recurrent loss needs whole sequences: no shards
            loss, info, values, ret = self.one_pass_loss(rollout)
            info.update(optimizer_step(self.optimizer, loss, self.cfg.max_grad_norm))
        else:  # the strategy cuts the rows into shards: a loss of rows, after a separate value pass
            loss_fn, data, values, ret = self.loss_fn(rollout)
            info = self.update_strategy.step(self.optimizer, loss_fn, data, self.cfg.max_grad_norm)
        self.env_steps += int(ret.numel())
        info[LR] = lr
        info[EXPLAINED_VARIANCE] = explained_variance(values.flatten(), ret)
        return info

    def one_pass_loss(self, rollout: Rollout) -> tuple[torch.Tensor, dict, torch.Tensor, torch.Tensor]:
        """``(loss, info, values, returns)``: the A2C loss over the whole rollout with *one* forward pass, whose
        detached values feed the advantages (the same numbers as :meth:`loss_fn`'s separate value pass at these
        weights, at half the forward work); only the bootstrap observations get a value pass of their own."""
        T, B = rollout.rewards.shape
        actions = rollout.extras["raw_action"] if self.continuous else rollout.actions
        if self.recurrent:  # values (with their bootstraps) from one pass, then the whole rollout re-unrolled
            values, adv, ret = self.advantages(rollout)
            params, v = self.unroll_rollout(rollout)
            dist = make_distribution(self.action_space, params)
            log_prob, entropy, v = dist.log_prob(actions).reshape(-1), dist.entropy().reshape(-1), v.reshape(-1)
        else:
            params, v = self.network(flatten_time(rollout.obs))
            values = v.detach().reshape(T, B)
            with torch.no_grad():
                adv, ret = truncation_aware_gae(rollout.rewards.float(), values, self.bootstrap_values(rollout),
                                                self.terminations(rollout), rollout.truncated, self.cfg.gamma,
                                                self.cfg.gae_lambda)
            dist = make_distribution(self.action_space, params)
            log_prob, entropy = dist.log_prob(flatten_time(actions)), dist.entropy()
        cfg = self.cfg
        t = a2c_loss(log_prob, adv.reshape(-1), v, ret.reshape(-1), entropy,
                     vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef, normalize_advantage=cfg.normalize_advantage)
        info = {LOSS_POLICY: t.policy.detach(), LOSS_VALUE: t.value.detach(),
                ENTROPY: t.entropy.detach()}
        return t.total, info, values, ret.reshape(-1)

    def compute_gradients(self, rollout: Rollout) -> tuple[list[torch.Tensor], dict[str, Any]]:
        """The gradient of the A2C loss on ``rollout`` w.r.t. the network's parameters (in the optimizer's order),
        without a step: what an A3C worker sends; ``info`` as :meth:`update`'s, for the learner to log."""
        loss, info, values, ret = self.one_pass_loss(rollout)
        params = [p for p in self.network.parameters() if p.requires_grad]
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
        info["loss"] = loss.detach()
        info[EXPLAINED_VARIANCE] = explained_variance(values.flatten(), ret)
        return grads, info

    def apply_gradients(self, gradients: list[torch.Tensor], env_steps: int) -> dict[str, Any]:
        """One optimizer step with a worker's gradient (clipped as in :meth:`update`), at the learning rate of the
        schedule now; ``env_steps``: the env steps the gradient was computed on (the LR schedule's clock)."""
        lr = self.set_learning_rate()
        params = [p for p in self.network.parameters() if p.requires_grad]
        if len(gradients) != len(params):
            raise ValueError(f"{self.name}: {len(gradients)} gradients for {len(params)} parameters")
        for p, g in zip(params, gradients, strict=True):
            p.grad = g.to(device=p.device, dtype=p.dtype)
        info: dict[str, Any] = {}
        if self.cfg.max_grad_norm is not None:
            info["grad_norm"] = torch.nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.env_steps += int(env_steps)
        info[LR] = lr
        return info


class A3CWorkerAgent(A2CAgent):
    """An A3C rollout worker's agent: acts as :class:`A2CAgent` and, after every rollout, computes the gradient of
    the A2C loss on it in the worker (``postprocess_batch``), sent in ``batch.info``."""

    def postprocess_batch(self, batch: Any) -> Any:
        rollout = Rollout.from_samples([batch], self.input_spaces["obs"], self.device)
        grads, info = self.compute_gradients(rollout)
        batch.info["gradients"] = [g.detach() for g in grads]
        batch.info["learn_info"] = {k: float(v) for k, v in info.items()}
        return batch


class A2C(OnPolicyPlan):
    """``mode=sync``: the PPO family's plan (:class:`OnPolicyPlan`: sample ``rollout_steps`` agent steps of every
    env copy, one A2C update, broadcast). ``mode=async``: A3C (module docstring): apply each worker's gradient as
    it arrives."""

    agent_class = A2CAgent

    def __init__(self, cfg: A2CConfig, spec: EnvSpec, executor: Any, device: torch.device, seed: int) -> None:
        super().__init__(cfg, spec, executor, device, seed)

    @classmethod
    def make_worker_policy(cls, cfg: A2CConfig, spec: EnvSpec, worker_index: int) -> Any:
        """async: an :class:`A3CWorkerAgent` (computes its rollout's gradient); sync: the A2C agent."""
        if cfg.mode != "async":
            return super().make_worker_policy(cfg, spec, worker_index)
        return A3CWorkerAgent(cfg, worker_index).build(obs=spec.observation_space, actions=spec.action_space)

    def training_step(self) -> IterationResult:
        if self.cfg.mode == "sync":
            return super().training_step()
        result = IterationResult()
        stats: dict[str, list[float]] = {}
        for batch, w in self.workers.sample_async(self.cfg.rollout_steps):
            result.add_batch(batch)
            with self.timer("learn"):
                grads = batch.info.get("gradients")
                if grads is None:  # the worker acts with the learner's own agent: compute the gradient here
                    rollout = Rollout.from_samples([batch], self.spec.observation_space, self.device)
                    grads, learn_info = self.agent.compute_gradients(rollout)
                    learn_info = {k: float(v) for k, v in learn_info.items()}
                else:
                    learn_info = dict(batch.info["learn_info"])
                learn_info.update({k: float(v) for k, v in self.agent.apply_gradients(grads, batch.env_steps).items()})
            self.workers.sync_weights(worker_ids=[w])  # the new weights reach w before its next rollout
            self.updates += 1
            self.gradient_steps += 1
            for k, v in learn_info.items():
                stats.setdefault(k, []).append(v)
        self.env_steps += result.env_steps
        result.metrics.update(learner_metrics({k: sum(v) / len(v) for k, v in stats.items()}))
        result.metrics[UPDATES] = self.updates
        result.metrics[GRADIENT_STEPS] = self.gradient_steps
        return result
