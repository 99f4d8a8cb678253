"""On-policy rollout storage, time-major ``[T, B, ...]``, preallocated from the record space.

The rollout of A2C/PPO (Mnih et al. 2016, Algorithm S3; Schulman et al. 2017, Algorithm 1: "run policy in
environment for T timesteps" on each of N actors) and of IMPALA's actors (Espeholt et al. 2018): T agent steps of
B env copies, kept time-major so that :mod:`rlrun.ops` (GAE, V-trace, discounted returns) reads it directly.
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun import spaces as sp
from rlrun.components.base import Component, api


class RolloutBuffer(Component):
    """Holds ``num_steps`` time steps of ``num_envs`` env copies: one ``[T, B, *leaf_shape]`` tensor per leaf.

    Built from the space of one record (a Dict space, e.g. obs, action, reward, terminated, value, log_prob).
    ``insert`` writes one time step (leading rank B) at the next time index; once ``full()``, ``get()`` returns
    the ``[T, B, ...]`` nest (a copy by default, so that the buffer can be refilled while the learner, or a queue,
    still holds the last rollout) and ``reset()`` starts the next rollout. Inserting into a full buffer is an
    error, never a silent overwrite.

    Args:
        num_steps: T, agent steps per rollout (per env copy).
        num_envs: B, number of env copies stepped together.
        name: component name (default ``"rollout_buffer"``).
    """

    def __init__(self, num_steps: int, num_envs: int, name: str | None = None) -> None:
        super().__init__(name)
        if num_steps <= 0 or num_envs <= 0:
            raise ValueError(f"num_steps and num_envs must be positive, got {num_steps} and {num_envs}")
        self.num_steps = int(num_steps)
        self.num_envs = int(num_envs)

    def _build(self, records: sp.Space) -> None:
        self.require("records", records, kinds=(sp.Dict,))
        self._leaves = sp.flatten_space(records)
        for key, leaf in self._leaves.items():
            self.register_buffer(self._buf(key), torch.zeros((self.num_steps, self.num_envs, *sp.shape(leaf)),
                                                             dtype=sp.dtype(leaf)))
        self.register_buffer("step", torch.zeros((), dtype=torch.int64))  # time steps written so far
        self.output_spaces["get"] = records  # with two leading ranks, [T, B]

    @staticmethod
    def _buf(key: str) -> str:
        return "store_" + key.replace("/", "__")

    @api
    def insert(self, records: Any) -> None:
        """Write one time step of every env copy (``[B, ...]`` per leaf) at time index ``step``."""
        t = int(self.step)
        if t >= self.num_steps:
            raise RuntimeError(f"{self.name} is full ({self.num_steps} steps of {self.num_envs} envs): call get() "
                               f"and reset() before inserting the next rollout")
        flat = {key: torch.as_tensor(value)
                for key, value in sp.flatten(self.input_spaces["records"], records).items()}
        for key, value in flat.items():  # check every leaf before writing any
            want = tuple(getattr(self, self._buf(key)).shape[1:])
            if tuple(value.shape) != want:
                name = f"records[{key}]" if key else "records"
                raise ValueError(f"{self.name}.insert: {name} has shape {tuple(value.shape)}, expected {want} "
                                 f"(one time step of {self.num_envs} envs)")
        for key, value in flat.items():
            buf = getattr(self, self._buf(key))
            buf[t] = value.to(device=buf.device, dtype=buf.dtype)
        self.step += 1

    @api
    def full(self) -> bool:
        """True once ``num_steps`` time steps were inserted."""
        return int(self.step) >= self.num_steps

    @api
    def get(self, copy: bool = True) -> Any:
        """The rollout as a nest of ``[T, B, ...]`` tensors, in insertion order along T.

        Args:
            copy: return copies (default); ``False`` returns views of the storage, valid until the next insert.
        """
        if not self.full():
            raise RuntimeError(f"{self.name} holds {int(self.step)} of {self.num_steps} steps; get() needs a full "
                               f"rollout (check full())")
        return sp.unflatten(self.input_spaces["records"],
                            {key: (getattr(self, self._buf(key)).clone() if copy else getattr(self, self._buf(key)))
                             for key in self._leaves})

    @api
    def reset(self) -> None:
        """Start the next rollout (the storage is overwritten by the next inserts)."""
        self.step.zero_()

    @api
    def size(self) -> int:
        """Time steps inserted so far."""
        return int(self.step)
