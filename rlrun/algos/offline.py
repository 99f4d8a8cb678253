"""What the offline algorithms (BC, IQL, CQL) share, said once: the plan that learns from a dataset instead of env
workers, and the batch an agent learns on.

The plan: each ``training_step()`` takes ``updates_per_iteration`` gradient steps, each on ``batch_size``
transitions drawn uniformly from the dataset (``rlrun/execution/dataset.py``; the draws come from a generator the
plan checkpoints, so a resumed run draws what an uninterrupted one would), their rewards times the algorithm's
``reward_scale`` (fixed when the run starts, checkpointed too). It takes no env steps: the run's budget
is ``stop.gradient_steps``, and the policy is evaluated on the env with ``rlrun eval <run dir>``. Built without a
dataset (``rlrun eval``, ``rlrun export``), the plan is its agent alone.

With ``algo.normalize_obs`` the agent carries an :func:`obs_normalizer` whose statistics are the dataset's
observations' (CORL's ``normalize``): the plan sets them when a run starts and standardises each batch's ``obs``
and ``next_obs``; the agent applies it when acting, so evaluation and exports take the env's raw observations.
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algos.base import Algorithm, IterationResult
from rlrun.components.normalizers import ObservationNormalizer
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError
from rlrun.metric_names import GRADIENT_STEPS


def learning_batch(batch: dict[str, torch.Tensor], gamma: float, action_scale: torch.Tensor | None = None,
                   action_bias: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """A dataset batch (env units, ``terminated``) as the off-policy agents learn on it: ``discount = gamma (1 -
    terminated)`` (a time-limit truncation bootstraps from ``next_obs``) and, for a Box action with its agent's
    ``action_scale`` / ``action_bias``, the action in ``[-1, 1]`` (what the critics and the tanh actors see)."""
    out = {"obs": batch["obs"], "next_obs": batch["next_obs"], "reward": batch["reward"].float(),
           "discount": gamma * (1.0 - batch["terminated"].float()), "action": batch["action"]}
    if action_scale is not None:
        out["action"] = ((batch["action"].float() - action_bias) / action_scale).clamp(-1.0, 1.0)
    return out


def obs_normalizer(cfg: Any) -> ObservationNormalizer | None:
    """An offline agent's observation normaliser (``algo.normalize_obs``), None without; the plan folds the dataset's
    observations into its statistics, which nothing updates afterwards."""
    return ObservationNormalizer(name="obs_normalizer") if cfg.normalize_obs else None


class OfflinePlan(Algorithm):
    """The plan of an offline algorithm: ``updates_per_iteration`` gradient steps of its agent per
    ``training_step()``, on batches of the dataset. A subclass names its ``agent_class``, whose ``update(batch)``
    takes one gradient step on a :func:`learning_batch` and returns its metrics, and whose ``learning_batch(batch)``
    makes one from a dataset batch."""

    offline = True

    @classmethod
    def make_agent(cls, cfg: Any, spec: EnvSpec, seed: int) -> Any:
        cls.check_env_actions(cfg, spec)
        return cls.agent_class(cfg, seed).build(obs=spec.observation_space, actions=spec.action_space)

    def __init__(self, cfg: Any, spec: EnvSpec, executor: Any, device: torch.device, seed: int,
                 data: Any = None) -> None:
        super().__init__(cfg, spec, executor, device, seed)
        self.agent = self.make_agent(cfg, spec, seed).to(device)
        self.data = data
        self.timer = executor.timer
        self.generator = torch.Generator().manual_seed(seed)  # the dataset's draws (checkpointed)
        self.gradient_steps = 0
        # the factor on the dataset's rewards (null: from the dataset's returns; BC reads no rewards and has no
        # key), fixed at the start and checkpointed, so a resumed run scales as its first part did
        scale = getattr(cfg, "reward_scale", 1.0)
        if scale is None:
            scale = data.return_range_scale() if data is not None else 1.0  # no data: rlrun eval, nothing learnt
        self.reward_scale = float(scale)
        self.obs_normalizer = self.agent.obs_normalizer
        if self.obs_normalizer is not None and data is not None:  # a resumed run's checkpoint then restores the same
            self.obs_normalizer.update(torch.as_tensor(data.obs, device=device))

    def training_step(self) -> IterationResult:
        if self.data is None:
            raise ConfigError(f"algo={self.cfg.name} learns from a dataset: give one with data=minari data.id=<id>.")
        infos = []
        with self.timer("learn"):
            for _ in range(self.cfg.updates_per_iteration):
                infos.append(self.agent.update(self.agent.learning_batch(self.sample())))
        self.gradient_steps += len(infos)
        result = IterationResult()
        for key in dict.fromkeys(k for info in infos for k in info):
            if key != "loss":
                result.metrics[key] = float(torch.stack([i[key] for i in infos if key in i]).mean())
        result.metrics[GRADIENT_STEPS] = self.gradient_steps
        return result

    def sample(self) -> dict[str, torch.Tensor]:
        """``batch_size`` transitions of the dataset (the plan's generator draws them), rewards times
        ``reward_scale``, observations standardised with ``algo.normalize_obs``."""
        batch = self.data.sample(self.cfg.batch_size, self.generator, self.device)
        batch["reward"] = batch["reward"] * self.reward_scale
        if self.obs_normalizer is not None:
            batch["obs"], batch["next_obs"] = self.obs_normalizer(batch["obs"]), self.obs_normalizer(batch["next_obs"])
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"agent": self.agent.state_dict(), "gradient_steps": self.gradient_steps,
                "generator": self.generator.get_state(), "reward_scale": self.reward_scale}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.gradient_steps = int(state["gradient_steps"])
        self.generator.set_state(state["generator"])
        self.reward_scale = float(state.get("reward_scale", self.reward_scale))
