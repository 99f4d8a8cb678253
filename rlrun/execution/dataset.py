"""Logged transitions read as a batch source: a Minari dataset (Farama's standard format for offline RL) on this
machine, loaded once into flat arrays that an offline plan samples as an online one samples its replay memory.

Datasets live under a local root: ``data.root``, else ``$MINARI_DATASETS_PATH``, else ``~/.minari/datasets``
(Minari's own default). Nothing is downloaded. ``rlrun collect`` writes datasets there (``rlrun/app/collect.py``).
"""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.errors import ConfigError

DEFAULT_ROOT = Path("~/.minari/datasets")


def datasets_root(root: str | None = None) -> Path:
    """The folder of local datasets: ``root``, else ``$MINARI_DATASETS_PATH``, else ``~/.minari/datasets``."""
    chosen = root or os.environ.get("MINARI_DATASETS_PATH") or str(DEFAULT_ROOT)
    return Path(chosen).expanduser().absolute()


@contextmanager
def minari_root(root: str | None) -> Iterator[Path]:
    """Minari reads its root from ``$MINARI_DATASETS_PATH`` at each call: point it at :func:`datasets_root` inside
    the block, and put the caller's value back after."""
    path = datasets_root(root)
    before = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(path)
    try:
        yield path
    finally:
        if before is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = before


def local_dataset_ids(root: str | None = None) -> list[str]:
    """The ids of the datasets under the root (sorted)."""
    import minari

    with minari_root(root):
        return sorted(minari.list_local_datasets())


def check_new_id(dataset_id: str, root: str | None, key_name: str = "dataset.id") -> Path:
    """The root a new dataset ``dataset_id`` goes to; a :class:`ConfigError` if one of that id is there already."""
    import minari

    with minari_root(root) as folder:
        if folder.is_dir() and dataset_id in minari.list_local_datasets():  # Minari would make a missing folder
            raise ConfigError(f"{key_name}={dataset_id}: a dataset of that id exists under {folder}; choose another "
                              f"id (a new version, e.g. -v1) or delete it (minari delete {dataset_id}).")
        return folder


def write_minari(dataset_id: str, root: str | None, episodes: Iterable[dict[str, np.ndarray]], env_spec: Any,
                 algorithm: str, author: str, description: str, provenance: dict[str, Any]) -> Any:
    """Write ``episodes`` as the Minari dataset ``dataset_id`` under ``root``: each episode's ``observations``
    ``[T + 1]``, ``actions``, ``rewards``, ``terminations``, ``truncations`` ``[T]`` (and optionally the ``seed`` of
    its reset), with ``env_spec``, and ``provenance`` in its metadata as ``rlrun.<key>`` (:data:`PROVENANCE_KEYS`).
    Written from arrays (Minari's own step-by-step DataCollector needs jax). Returns the dataset."""
    import minari
    from minari.data_collector import EpisodeBuffer

    buffers = [EpisodeBuffer(id=i, **{k: v if k == "seed" else np.asarray(v) for k, v in ep.items()})
               for i, ep in enumerate(episodes)]
    if not buffers:
        raise ConfigError(f"dataset {dataset_id}: no whole episode to write (a run shorter than its first episode, "
                          f"or record_dataset.env_steps before the first one ended); record a longer run.")
    with minari_root(root), warnings.catch_warnings():
        # Minari asks for an author e-mail and a code link: rlrun has none
        warnings.filterwarnings("ignore", message=r".*(author_email|code_permalink)` is set to None")
        dataset = minari.create_dataset_from_buffers(
            dataset_id=dataset_id, buffer=buffers, env=env_spec, eval_env=env_spec, algorithm_name=algorithm,
            author=author, description=description)
        dataset.storage.update_metadata({f"rlrun.{k}": v for k, v in provenance.items()})
    return dataset


@dataclass
class TransitionDataset:
    """Transitions ``[N, ...]`` in numpy arrays: ``obs``, ``action`` (in the env's units), ``reward``, ``next_obs``
    (the real next observation, the final one at a time limit too), ``terminated``; the dataset's episode returns
    and its metadata (``rlrun collect`` puts the provenance there)."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    episode_returns: list[float] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.reward.shape[0])

    @classmethod
    def from_episodes(cls, episodes: Any, metadata: dict[str, Any] | None = None) -> "TransitionDataset":
        """From Minari episodes (``observations`` ``[T + 1]``, ``actions``, ``rewards``, ``terminations`` ``[T]``):
        each step's next observation is the one after it in its episode."""
        parts: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "action", "reward", "next_obs", "terminated")}
        returns = []
        for ep in episodes:
            observations = np.asarray(ep.observations)
            parts["obs"].append(observations[:-1])
            parts["next_obs"].append(observations[1:])
            parts["action"].append(np.asarray(ep.actions))
            parts["reward"].append(np.asarray(ep.rewards, dtype=np.float32).reshape(-1))
            parts["terminated"].append(np.asarray(ep.terminations, dtype=bool).reshape(-1))
            returns.append(float(parts["reward"][-1].sum()))
        if not returns:
            raise ConfigError("the dataset holds no episodes; collect some with rlrun collect <run dir> "
                              "dataset.episodes=N.")
        return cls(**{k: np.concatenate(v) for k, v in parts.items()}, episode_returns=returns,
                   metadata=dict(metadata or {}))

    def return_range_scale(self, span: float = 1000.0) -> float:
        """``span / (max - min)`` of the episodes' returns: the factor that stretches the dataset's returns over
        ``span`` (IQL's reward normalisation of D4RL's MuJoCo datasets, Kostrikov et al. 2021, ``normalize`` in the
        reference ``train_offline.py``, whose beta = 3 assumes it). Episodes of equal returns leave it undefined:
        a :class:`ConfigError` asking for a number instead."""
        low, high = min(self.episode_returns), max(self.episode_returns)
        if not high > low:
            raise ConfigError(f"algo.reward_scale=null scales rewards by {span:g} / (max - min episode return), but "
                              f"every episode of the dataset returns {high:g}; give a number "
                              f"(algo.reward_scale=1 keeps the rewards as they are).")
        return float(span / (high - low))

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device | str = "cpu") -> dict:
        """``batch_size`` transitions drawn uniformly with replacement (``generator`` draws the indices, so a plan
        that checkpoints it resumes the same draws), as torch tensors on ``device``."""
        index = torch.randint(len(self), (batch_size,), generator=generator).numpy()
        return {k: torch.as_tensor(getattr(self, k)[index], device=device)
                for k in ("obs", "action", "reward", "next_obs", "terminated")}


def load_minari(data_cfg: Any, spec: Any) -> TransitionDataset:
    """The dataset ``data.id`` under ``data.root`` as transitions, checked against the env (:func:`open_minari`)."""
    with minari_root(data_cfg.get("root")):
        dataset = open_minari(data_cfg, spec)
        return TransitionDataset.from_episodes(dataset.iterate_episodes(), dict(dataset.storage.metadata))


def open_minari(data_cfg: Any, spec: Any) -> Any:
    """The Minari dataset ``data.id`` under ``data.root`` (its metadata read, its episodes not yet), checked against
    the env: its observation and action spaces must be the env's (``spec``). A missing dataset or a mismatch is a
    :class:`ConfigError` (one line, exit 2). The command line calls it before the run directory exists."""
    import minari

    with minari_root(data_cfg.get("root")) as root:
        ids = sorted(minari.list_local_datasets()) if root.is_dir() else []  # Minari would make the folder
        if data_cfg.id not in ids:
            have = ", ".join(ids[:10]) if ids else "none"
            raise ConfigError(f"data.id={data_cfg.id}: no such dataset under {root} (local datasets: {have}). "
                              f"Write one with rlrun collect <run dir> dataset.id={data_cfg.id}, or point "
                              f"data.root (or $MINARI_DATASETS_PATH) at the folder that holds it.")
        dataset = minari.load_dataset(data_cfg.id)
        for what, theirs, ours in (("observation", dataset.observation_space, spec.observation_space),
                                   ("action", dataset.action_space, spec.action_space)):
            if not isinstance(theirs, (sp.Box, sp.Discrete)):
                raise ConfigError(f"data.id={data_cfg.id}: its {what} space is {sp.describe(theirs)}; offline "
                                  f"algorithms read Box or Discrete spaces in this version.")
            if theirs != ours:
                raise ConfigError(f"data.id={data_cfg.id}: its {what} space {sp.describe(theirs)} is not env "
                                  f"{spec.id}'s {sp.describe(ours)}; choose the env the dataset was collected on "
                                  f"(its env spec: {_env_id(dataset)}).")
        return dataset


def _env_id(dataset: Any) -> str:
    spec = getattr(dataset, "spec", None)
    env_spec = getattr(spec, "env_spec", None)
    return getattr(env_spec, "id", None) or "unknown"


PROVENANCE_KEYS = ("run_dir", "checkpoint", "checkpoint_env_steps", "algo", "env", "epsilon", "explore", "episodes",
                   "return_mean", "recorded_env_steps")
"""What ``rlrun collect`` and a recording run (``record_dataset.id``) write into a dataset's metadata under
``rlrun.<key>``, and a run logs of its dataset."""


def dataset_params(data: TransitionDataset) -> dict[str, Any]:
    """The dataset's provenance as run params (``data.provenance.<key>``) and its size."""
    meta = data.metadata
    out: dict[str, Any] = {"data.transitions": len(data), "data.episodes": len(data.episode_returns)}
    for key in PROVENANCE_KEYS:
        if f"rlrun.{key}" in meta:
            out[f"data.provenance.{key}"] = meta[f"rlrun.{key}"]
    return out
