"""``rlrun collect <run dir or checkpoint> dataset.id=<id> [dataset.episodes=N] [dataset.epsilon=E]
[dataset.explore=true] [dataset.seed=S] [dataset.root=DIR]``: play a run's policy on its env and write the episodes
as a Minari dataset, the data an offline algorithm learns from (``rlrun algo=iql data=minari data.id=<id>``).

The policy is the checkpoint's acting policy without exploration (as ``rlrun eval`` builds it), or with
``dataset.explore`` its exploration as in training (a Gaussian policy's sampled actions: the varied actions of a
stochastic policy that D4RL's datasets hold); with ``dataset.epsilon`` each action is a uniform random one with
that probability: mixed-quality data. Box actions are kept in the action space's bounds (what a bounded env
applies). The dataset holds the env spec (Minari records it), and its metadata the provenance under ``rlrun.*``:
the run directory, the checkpoint, its env steps, the algorithm, the env, epsilon, explore, the episodes and their
mean return. It is written under
``dataset.root``, else ``$MINARI_DATASETS_PATH``, else ``~/.minari/datasets``; nothing is downloaded.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Optional, Sequence

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.app.evaluate import batch_of_one, make_env
from rlrun.errors import ConfigError, did_you_mean
from rlrun.execution.dataset import check_new_id, write_minari
from rlrun.export import restore
from rlrun.schema import Declared, check_declared, key


@dataclass
class CollectConfig(Declared):
    """The settings of ``rlrun collect`` (``dataset.<key>=value``)."""

    key_prefix: ClassVar[str] = "dataset"

    id: str = ""
    """The new dataset's id, Minari's syntax: ``[namespace/]name-v<version>`` (e.g. ``pendulum/expert-v0``)."""
    episodes: int = key(100, "[1, inf)")
    """Whole episodes to play and write."""
    epsilon: float = key(0.0, "[0, 1]")
    """Probability of a uniform random action instead of the policy's at each step (mixed-quality data)."""
    explore: bool = False
    """Act with the policy's exploration, as in training (a stochastic policy's sampled actions), instead of
    greedily."""
    seed: Optional[int] = key(None, "[0, inf)")
    """Seed of the first episode's reset and of the random actions; null: the run's seed + 2000."""
    root: Optional[str] = None
    """The folder of local datasets; null: $MINARI_DATASETS_PATH, else ~/.minari/datasets."""


COLLECT_SEED_OFFSET = 2000  # default seed = run seed + this: neither the training run's episodes nor rlrun eval's


def collect(target: str, settings: CollectConfig, allow_imports: Sequence[str] = ()) -> dict[str, Any]:
    """Write the dataset ``settings`` describe from the policy of ``target``; its id, root, size and returns."""
    if not settings.id:
        raise ConfigError("rlrun collect: give the new dataset's id, e.g. dataset.id=pendulum/expert-v0.")
    root = check_new_id(settings.id, settings.root)
    restored = restore(target, allow_imports=allow_imports)
    try:
        seed = int(restored.cfg.seed) + COLLECT_SEED_OFFSET if settings.seed is None else int(settings.seed)
        env = make_env(restored.cfg.env, None)
        try:
            episodes = _play(restored, env, settings.episodes, settings.epsilon, seed, settings.explore)
            returns = [float(np.sum(ep["rewards"])) for ep in episodes]
            provenance = {"run_dir": str(restored.run_dir.resolve()), "checkpoint": str(restored.checkpoint.resolve()),
                          "checkpoint_env_steps": restored.env_steps, "algo": str(restored.cfg.algo.name),
                          "env": str(restored.cfg.env.id), "epsilon": float(settings.epsilon),
                          "explore": bool(settings.explore), "episodes": len(returns),
                          "return_mean": float(np.mean(returns))}
            dataset = write_minari(settings.id, settings.root, episodes, env.spec,
                                   f"rlrun {restored.cfg.algo.name}", "rlrun collect",
                                   f"{len(returns)} episodes of the {restored.cfg.algo.name} policy of "
                                   f"{provenance['run_dir']} (env step {restored.env_steps}), epsilon "
                                   f"{settings.epsilon}, explore {settings.explore}", provenance)
        finally:
            env.close()
    finally:
        restored.close()
    return {"id": settings.id, "root": str(root), "transitions": int(dataset.total_steps), "returns": returns,
            **provenance}


def _play(restored: Any, env: Any, episodes: int, epsilon: float, seed: int,
          explore: bool = False) -> list[dict[str, np.ndarray]]:
    """Play ``episodes`` whole episodes of the restored policy (greedy, or exploring as in training with
    ``explore``; uniform with probability ``epsilon``); each as arrays: observations ``[T + 1]``, actions, rewards,
    terminations, truncations ``[T]``, and the seed of its reset (the first episode's; None after). The policy's
    own draws come from torch's generator, seeded with ``seed`` for the call and put back after."""
    policy, space = restored.policy(), restored.spec.observation_space
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)
    bounds = (env.action_space.low, env.action_space.high) if isinstance(env.action_space, sp.Box) else None
    out = []
    with torch.inference_mode(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed if episode == 0 else None)
            steps: dict[str, list] = {"observations": [obs], "actions": [], "rewards": [], "terminations": [],
                                      "truncations": []}
            done = False
            while not done:
                if epsilon > 0 and rng.random() < epsilon:
                    action = env.action_space.sample()
                else:
                    action = policy.get_actions(batch_of_one(space, obs, torch.device("cpu")), explore=explore)
                    if isinstance(action, tuple):  # an on-policy agent's sample comes with its rollout extras
                        action = action[0]
                    action = action.cpu().numpy()[0]
                    if bounds is not None:
                        action = np.clip(action, *bounds)
                obs, reward, terminated, truncated, _ = env.step(action)
                for name, value in (("observations", obs), ("actions", action), ("rewards", float(reward)),
                                    ("terminations", bool(terminated)), ("truncations", bool(truncated))):
                    steps[name].append(value)
                done = bool(terminated or truncated)
            out.append({**{k: np.asarray(v) for k, v in steps.items()}, "seed": seed if episode == 0 else None})
    return out


def main(argv: Sequence[str]) -> None:
    target, values, allow = None, {}, []
    for a in argv:
        name, eq, value = a.partition("=")
        if eq and name.startswith("dataset."):
            values[name.removeprefix("dataset.")] = value
        elif eq and name == "allow_import":
            allow.append(value)
        elif not eq and target is None:
            target = a
        else:
            raise ConfigError(f"rlrun collect: unknown argument {a!r}; usage: rlrun collect <run dir or checkpoint> "
                              f"dataset.id=<id> [dataset.episodes=N] [dataset.epsilon=E] [dataset.seed=S] "
                              f"[dataset.root=DIR] [allow_import=MODULE].")
    if target is None:
        raise ConfigError("rlrun collect: give a run directory or checkpoint, e.g. rlrun collect outputs/<date>/<run> "
                          "dataset.id=pendulum/expert-v0.")
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    parsed = {k: _yaml_value(v) for k, v in values.items()}
    valid = [f.name for f in fields(CollectConfig)]
    for name in parsed:
        if name not in valid:
            raise ConfigError(f"dataset.{name}: unknown setting of rlrun collect.{did_you_mean(name, valid)} "
                              f"Valid: {', '.join('dataset.' + v for v in valid)}.")
    try:
        settings = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(CollectConfig), parsed))
    except OmegaConfBaseException as e:
        raise ConfigError(f"dataset.{getattr(e, 'full_key', '') or ''}: {str(e).strip().splitlines()[0]}") from None
    check_declared(CollectConfig, parsed, "dataset")
    found = collect(target, settings, allow)
    sys.stdout.write(f"collect: wrote dataset {found['id']} ({found['episodes']} episodes, {found['transitions']} "
                     f"transitions, return mean {found['return_mean']:.1f}) under {found['root']}\n")


def _yaml_value(text: str) -> Any:
    """A command-line value as Hydra reads one (``null``, numbers, text)."""
    import yaml

    value = yaml.safe_load(text)
    return str(value) if isinstance(value, (dict, list)) else value
