"""rlrun without the CLI: an agent for an application's own loop (TensorForce's act / observe / update style).

::

    import gymnasium as gym
    import rlrun

    envs = gym.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    agent = rlrun.make_agent("ppo", envs.single_observation_space, envs.single_action_space, seed=0,
                             torch_threads=1, total_env_steps=100_000)  # config keys as keyword overrides
    obs, _ = envs.reset(seed=0)
    for step in range(10_000):
        actions = agent.get_actions(obs)                      # numpy in, numpy out; batch of 8
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        final = agent.final_obs(next_obs, terminated, truncated, info)  # the real next observations
        agent.observe(obs, actions, rewards, final, terminated, truncated)
        if (step + 1) % agent.config.rollout_steps == 0:
            agent.update()                                    # metrics: a dict of floats
        obs = next_obs
    agent.export_model("policy.pt")                           # TorchScript of the greedy policy

:func:`make_agent` builds the algorithm's agent component, the very object the CLI's plans train (the root of its
component graph), from the two spaces and the algorithm's config defaults (its schema,
``rlrun/algos/<name>_config.py``, as ``conf/algo/<name>.yaml`` selects it) with keyword overrides.
:class:`Agent` wraps it for plain numpy loops: it converts arrays, remembers what
``get_actions`` returned besides the actions (PPO's log-probabilities) and hands it to ``observe``, and exports.
``agent.component`` is the component itself (``get_weights``, ``state_dict``, its sub-components).

``observe`` takes one time step of the ``B`` env copies (rows ``[B, ...]``); ``next_obs`` must be the real next
observation, the final one where an episode ended (gymnasium's vector envs with SAME_STEP autoreset put it in
``info["final_obs"]``; :meth:`Agent.final_obs` puts it in place), so that time-limit truncations bootstrap
correctly. When to call ``update`` is the application's choice: replay-based
agents (DQN, SAC) learn from their memory on every call once it holds a batch; on-policy agents (PPO, A2C, TRPO,
IMPALA, APPO) learn on the steps observed since the previous update. Ape-X's learner needs its plan's actors and
replay shards: ``make_agent("apex", ...)`` says so.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlrun import spaces as sp
from rlrun.checkpoint import read_plain_data
from rlrun.envs.gym_env import EnvSpec
from rlrun.errors import ConfigError
from rlrun.execution.rollout import Rollout
from rlrun.export import export_onnx, export_torchscript
from rlrun.registry import registry


def make_agent(algo: str, observation_space: sp.Space, action_space: sp.Space, seed: int = 0,
               device: str | torch.device = "cpu", torch_threads: int | None = None, **overrides: Any) -> "Agent":
    """The agent of algorithm ``algo`` (a registered name: ``dqn``, ``ppo``, ``a2c``, ...) for these spaces.

    ``overrides``: config keys of the algorithm (``rlrun keys algo=<name>`` lists them, each with its default,
    range and docstring from ``rlrun/algos/<name>_config.py``), e.g. ``lr=3e-4, hidden_sizes=[128, 128]``; an
    unknown key is a :class:`~rlrun.errors.ConfigError` naming the close matches. ``seed`` seeds the initial
    weights (and the agent's own random streams); ``device`` is where its parameters live; ``torch_threads``: if given,
    ``torch.set_num_threads`` for this process (the CLI's ``device.torch_threads``, default 1: torch's default of
    one thread per core made a PPO update of a small MLP ~13x slower on a busy 2-core machine; None leaves it)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    algo_cls = registry.get("algo", algo)
    schema = registry.schema("algo", algo)
    if schema is None:
        raise ConfigError(f"algo={algo} has no config schema: make_agent needs one (registry.register(..., schema=)).")
    valid = [f.name for f in dataclasses.fields(schema)]
    for key in overrides:
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else f" Valid keys: {', '.join(valid)}."
            raise ConfigError(f"make_agent({algo!r}): {key!r} is not a config key of algo={algo}.{hint}")
    try:
        node = OmegaConf.merge(OmegaConf.structured(schema), overrides)
        cfg = OmegaConf.to_object(node)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or getattr(e, "key", None)
        where = f"{key}: " if key else ""
        raise ConfigError(f"make_agent({algo!r}): {where}{str(e).splitlines()[0]}") from None
    if torch_threads is not None:
        torch.set_num_threads(max(int(torch_threads), 1))
    torch.manual_seed(seed)
    spec = EnvSpec(id="application", observation_space=observation_space, action_space=action_space)
    component = algo_cls.make_agent(cfg, spec, seed)
    if component is None:
        raise ConfigError(f"algo={algo} is not built from components (its make_agent gives nothing): it can only "
                          f"run through the CLI's plan.")
    if getattr(cfg, "offline", False):
        raise ConfigError(f"algo={algo} learns from a dataset, on batches its plan draws: train it with the CLI "
                          f"(rlrun algo={algo} data=minari data.id=<dataset>), then rlrun export <run dir> gives its "
                          f"policy as a standalone model.")
    if component.learns_from is None:
        raise ConfigError(f"algo={algo}'s agent learns from its plan's distributed parts (e.g. Ape-X: actors and "
                          f"replay shards), not from one application loop: run it with the CLI, or use an agent "
                          f"with observe() (algo=dqn has Ape-X's switches: dueling, prioritized_replay, n_step).")
    return Agent(component.to(torch.device(device)), cfg, spec)


class Agent:
    """An algorithm's agent component behind a numpy-friendly act / observe / update interface (module docstring).
    """

    def __init__(self, component: Any, config: Any, spec: Any) -> None:
        self.component = component
        self.config = config
        self.spec = spec
        self.observation_space, self.action_space = spec.observation_space, spec.action_space
        self._extras: dict[str, torch.Tensor] = {}
        # An agent without observe() learns from time-major rollouts given to update() (IMPALA, APPO): this
        # wrapper collects the observed steps, with the extras get_actions returned, and hands them over.
        self._steps: list[dict[str, Any]] | None = None if component.learns_from == "observe" else []
        params = inspect.signature(component.observe).parameters if self._steps is None else {}
        self._observe_takes_extras = "extras" in params or self._steps is not None  # acting log-probs etc.

    @property
    def device(self) -> torch.device:
        p = next(self.component.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def _batched(self, obs: Any) -> tuple[Any, bool]:
        """``obs`` as a batch, and whether it was a single unbatched observation (then the answer is unbatched)."""
        space = self.observation_space
        if not sp.is_nested(space):
            arr = np.asarray(obs)
            if arr.shape == tuple(space.shape):
                return arr[None], True
            return arr, False
        return obs, False

    def get_actions(self, obs: Any, explore: bool = True) -> np.ndarray:
        """Actions for a batch of observations ``[B, ...]`` (or for one observation, unbatched), as numpy.
        ``explore=False``: the greedy / deterministic action (what ``export_model`` exports)."""
        batch, single = self._batched(obs)
        with torch.inference_mode():
            out = self.component.get_actions(sp.to_torch(self.observation_space, batch, self.device), explore=explore)
        if isinstance(out, tuple):
            out, self._extras = out
        else:
            self._extras = {}
        actions = out.cpu().numpy()
        return actions[0] if single else actions

    def final_obs(self, next_obs: Any, terminated: Any, truncated: Any, info: dict) -> Any:
        """``next_obs`` of a gymnasium vector env step (SAME_STEP autoreset) with each finished copy's row replaced
        by its real final observation from ``info["final_obs"]``: what :meth:`observe` needs."""
        done = np.asarray(terminated) | np.asarray(truncated)
        return _with_final_obs(self.observation_space, next_obs, info, done) if done.any() else next_obs

    def observe(self, obs: Any, actions: Any, rewards: Any, next_obs: Any, terminated: Any, truncated: Any) -> None:
        """Record one time step of the ``B`` env copies the last :meth:`get_actions` acted for (``[B, ...]`` each,
        or one unbatched step): ``next_obs`` is the real next observation (the final one where an episode ended)."""
        obs, single = self._batched(obs)
        if single:
            next_obs = self._batched(next_obs)[0]
            actions, rewards, terminated, truncated = (np.asarray(x)[None] for x in
                                                       (actions, rewards, terminated, truncated))
        rewards = np.asarray(rewards, dtype=np.float32)
        terminated, truncated = np.asarray(terminated, dtype=bool), np.asarray(truncated, dtype=bool)
        actions = np.asarray(actions)
        if self._observe_takes_extras:
            extras = {k: v.clone() for k, v in self._extras.items()}
            n = len(rewards)
            if any(v.shape[0] != n for v in extras.values()):
                raise ValueError(f"observe(): {n} rows, but the last get_actions() acted for "
                                 f"{next(iter(extras.values())).shape[0]}: call get_actions on the same batch first.")
            if "raw_action" not in extras and isinstance(self.action_space, sp.Box):
                extras["raw_action"] = torch.as_tensor(actions, dtype=torch.float32)
            if self._steps is not None:
                self._steps.append({"obs": obs, "next_obs": next_obs, "actions": actions, "rewards": rewards,
                                    "terminated": terminated, "truncated": truncated, **extras})
            else:
                self.component.observe(obs, actions, rewards, next_obs, terminated, truncated, extras)
        else:
            self.component.observe(obs, actions, rewards, next_obs, terminated, truncated)
        reset = getattr(self.component, "reset_episodes", None)  # a recurrent agent's state ends with the episode
        if callable(reset):
            reset(terminated | truncated)

    def update(self) -> dict[str, float]:
        """One update of the algorithm (DQN: a gradient step on a replay batch; PPO/A2C: on the steps observed since
        the previous update); its metrics as floats."""
        if self._steps is None:
            info = self.component.update()
        else:
            if not self._steps:
                raise RuntimeError("update(): no steps observe()'d since the last update")
            steps, self._steps = self._steps, []
            info = self.component.update(Rollout.from_steps(steps, self.observation_space, self.device))
        return {k: float(v) for k, v in info.items() if _is_scalar(v)}

    def get_weights(self) -> Any:
        return self.component.get_weights()

    def set_weights(self, weights: Any) -> None:
        self.component.set_weights(weights)

    def save(self, path: str | Path) -> Path:
        """Everything to continue training (weights, optimizer state, replay, schedules) to ``path``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(self.component.state_dict(), tmp)
        tmp.replace(path)
        return path

    def load(self, path: str | Path) -> None:
        """Restore what :meth:`save` wrote (an agent made with the same algorithm, spaces and config). The file is
        read as plain data (``torch.load(weights_only=True)``, as checkpoints are): one holding other Python
        objects, which could run code while loading, is refused with a :class:`~rlrun.errors.CheckpointError`."""
        self.component.load_state_dict(read_plain_data(Path(path), map_location=self.device))

    def export_model(self, path: str | Path, format: str = "torchscript") -> Path:  # noqa: A002 - the CLI's word
        """The greedy policy (observations -> actions) as TorchScript (``torch.jit.load``) or ONNX (needs the
        ``export`` extra) at ``path``."""
        if format not in ("torchscript", "onnx"):
            raise ConfigError(f"export_model format={format!r}: not one of torchscript, onnx.")
        exporter = export_torchscript if format == "torchscript" else export_onnx
        return exporter(self.component, self.observation_space, Path(path))


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float)) or (isinstance(v, torch.Tensor) and v.numel() == 1)


def _with_final_obs(space: sp.Space, next_obs: Any, info: dict, done: np.ndarray) -> Any:
    """next_obs with each finished copy's row replaced by its real final observation."""
    final = info["final_obs"]
    flat_next = sp.flatten(space, next_obs)
    out = {k: v.copy() for k, v in flat_next.items()}
    for i in np.flatnonzero(done):
        for k, v in sp.flatten(space, final[i]).items():
            out[k][i] = v
    return sp.unflatten(space, out)
