"""What a training run's workers collect, kept as whole episodes for a Minari dataset (``record_dataset.id=<id>``):
the data the run saw, of mixed quality as its policy improved. D4RL's "replay" datasets are this (every transition
of a training run up to some point); an offline algorithm then learns from it (``data=minari data.id=<id>``).

The executor hands every rollout a worker returns to :meth:`EpisodeRecorder.add` with the worker's index. Each env
copy's steps are appended to its open episode; an episode that ends (terminated or truncated) is closed with its
real final observation and kept. With ``env_steps``, only episodes that began within the run's first ``env_steps``
env steps are kept (each whole). Episodes still open when the run stops are not whole and are left out.

Kept episodes leave memory for the run directory at each checkpoint (:meth:`state_dict` writes them as a numbered
``.npz`` part and returns the open episodes and the part count; :meth:`load_state_dict` deletes the parts a later,
unsaved state wrote), so a resumed run records exactly what an uninterrupted one would. :meth:`episodes` reads the
parts back in order for the writer (``rlrun/execution/dataset.py``'s :func:`write_minari`). The parts stay in the
run directory after the dataset is written: a resumed run goes on recording, and writes its longer dataset under a
new id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np

from rlrun.execution.sample_batch import SampleBatch
from rlrun.plain_data import decode, encode

FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")


class EpisodeRecorder:
    """Whole episodes of every env copy of every worker, from the rollouts they return (module docstring)."""

    def __init__(self, folder: Path, env_steps: int | None = None, action_low: Any = None,
                 action_high: Any = None) -> None:
        self.folder = Path(folder)
        self.env_steps = env_steps
        self.action_bounds = None if action_low is None else (np.asarray(action_low), np.asarray(action_high))
        self.seen = 0  # env steps recorded so far (every copy's steps)
        self.parts = 0  # parts written to the folder
        self._open: dict[tuple[int, int], dict[str, list]] = {}  # (worker, copy) -> the episode so far
        self._closed: list[dict[str, np.ndarray]] = []  # whole episodes not yet in a part

    def add(self, batch: SampleBatch, worker: int) -> None:
        """The ``T x B`` steps of one rollout of ``worker`` (its copies' episodes continue from its previous one)."""
        t_len, b_len = batch.rewards.shape
        actions = batch.actions
        if self.action_bounds is not None:  # what a bounded env applies: the dataset's actions lie in its space
            actions = np.clip(actions, *self.action_bounds)
        ends = {int(i): k for k, i in enumerate(batch.final_index())}
        for b in range(b_len):
            for t in range(t_len):
                episode = self._open.get((worker, b))
                if episode is None:
                    if self.env_steps is not None and self.seen + t * b_len + b >= self.env_steps:
                        continue  # the budget of recorded starts is spent: nothing new opens
                    episode = self._open[(worker, b)] = {f: [] for f in FIELDS}
                    episode["observations"].append(np.array(batch.obs[t, b]))
                episode["actions"].append(np.array(actions[t, b]))
                episode["rewards"].append(float(batch.rewards[t, b]))
                episode["terminations"].append(bool(batch.terminated[t, b]))
                episode["truncations"].append(bool(batch.truncated[t, b]))
                k = ends.get(t * b_len + b)
                if k is None:
                    episode["observations"].append(np.array(batch.obs[t + 1, b]))
                else:
                    episode["observations"].append(np.array(batch.final_obs[k]))
                    self._closed.append({f: np.asarray(v) for f, v in episode.items()})
                    del self._open[(worker, b)]
        self.seen += t_len * b_len

    # ------------------------------------------------------------------ checkpoints and the writer

    def _part(self, index: int) -> Path:
        return self.folder / f"part-{index:05d}.npz"

    def state_dict(self) -> dict[str, Any]:
        """Write the episodes kept since the last part as a new part; the rest of the state, to restore."""
        if self._closed:
            self.folder.mkdir(parents=True, exist_ok=True)
            arrays = {f"{i}/{f}": ep[f] for i, ep in enumerate(self._closed) for f in FIELDS}
            np.savez(self._part(self.parts), **arrays)
            self.parts += 1
            self._closed = []
        return {"seen": self.seen, "parts": self.parts,
                "open": {f"{w}/{b}": {f: encode(np.asarray(v)) for f, v in ep.items()}
                         for (w, b), ep in self._open.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.seen, self.parts = int(state["seen"]), int(state["parts"])
        for path in self.folder.glob("part-*.npz"):  # written after the checkpoint: those episodes come again
            if int(path.stem.removeprefix("part-")) >= self.parts:
                path.unlink()
        self._open = {tuple(int(x) for x in key.split("/")): {f: list(decode(v)) for f, v in ep.items()}
                      for key, ep in state["open"].items()}
        self._closed = []

    def episodes(self) -> Iterator[dict[str, np.ndarray]]:
        """Every whole episode, rollout by rollout and within one env copy by copy: the parts', then memory's."""
        for index in range(self.parts):
            with np.load(self._part(index)) as part:
                count = len({name.split("/")[0] for name in part.files})
                for i in range(count):
                    yield {f: part[f"{i}/{f}"] for f in FIELDS}
        yield from self._closed
