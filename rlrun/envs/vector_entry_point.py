"""``env.vectorization=vector_entry_point``: a worker's env copies stepped by the env's own numpy-batched vector env,
the one gymnasium registers as the id's ``vector_entry_point`` (``gym.make_vec(id, n,
vectorization_mode="vector_entry_point")``), instead of one Python env object per copy in gymnasium's
``SyncVectorEnv``. On CartPole x8 a vector step takes about a third of the time (docs/environments.md has the
figures).

Those batched envs autoreset NEXT_STEP style (a finished copy is reset by the *next* ``step``, which ignores its
action and returns reward 0); rollout workers need SAME_STEP autoreset, as the other vector envs of rlrun give it
(rlrun/envs/envpool_env.py, gymnasium's ``SyncVectorEnv(autoreset_mode=SAME_STEP)``): at the step where copy i's
episode ends, the returned observation is copy i's *reset* observation, its real last observation is in
``info["final_obs"][i]`` (an object array, mask ``info["_final_obs"]``) and its final info in ``info["final_info"]``
(mask ``info["_final_info"]``); those keys are present only at steps where some copy ended, and ``{}`` is the info
of every other step. An adapter per batched env class (:data:`ADAPTERS`) does that: it steps the batched env's
state (CartPole: :class:`CartPoleSameStep`, the batched env's own arithmetic), then resets the finished copies'
entries of that state at once, as the env's own reset does (same bounds, the env's own ``np_random``), so no copy
is ever left finished for a next step to reset.

What stays as in the sync path: the dynamics (the batched env's arithmetic), the time-limit truncation at the env's
``max_episode_steps`` (the config's ``env.max_episode_steps`` override, else the registered limit; truncated and
terminated may both be true at the limit, as with ``TimeLimit``), the dtypes (observations as the single env's
space, rewards float64, terminated/truncated bool, as ``SyncVectorEnv`` returns them).

What differs from the sync path: one random generator for the batch instead of one per copy, so the same seed gives
other (equally deterministic) trajectories: ``reset(seed=[s0, s1, ...])`` (a rollout worker's per-copy seeds) seeds
it with numpy's ``SeedSequence([s0, s1, ...])``, ``reset(seed=s)`` as gymnasium does (``SeedSequence(s)``). The
copies live in this process, so only ``executor.vector_mode=sync`` (and ``serial``) can step them; their whole state
(batched arrays, step counters, the generator) is in this object and the env it wraps, so checkpoints hold it
(rlrun/envs/env_state.py) and a resumed run continues them exactly.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlrun.errors import ConfigError


class SameStepAutoreset(gym.vector.VectorWrapper):
    """A batched vector env with NEXT_STEP autoreset, stepped with SAME_STEP autoreset (module docstring). A subclass
    says how to reset some copies of its env class: :meth:`reset_copies`."""

    wraps: ClassVar[str] = ""
    """The ``vector_entry_point`` (``module:Class``) of the batched env class this adapter knows."""
    holds_copies_state: ClassVar[bool] = True
    """Every copy's state is in this object's and the wrapped env's attributes, in this process
    (rlrun/envs/env_state.py saves it from there)."""

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        self.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}

    def reset(self, *, seed: int | list[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every copy. ``seed``: an int (as gymnasium seeds the batched env), a list (one generator from
        numpy's ``SeedSequence(seed)``) or None (the generator goes on)."""
        if isinstance(seed, (list, tuple, np.ndarray)):
            seeds = [int(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ValueError(f"reset: {len(seeds)} seeds for {self.num_envs} env copies")
            self.env.np_random = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seeds)))
            seed = None
        return self.env.reset(seed=seed, options=options)

    def reset_copies(self, done: np.ndarray) -> np.ndarray:
        """Reset the copies where ``done`` is true (bool ``[num_envs]``) in the wrapped env's state and return their
        new observations, ``[done.sum(), *obs_shape]``."""
        raise NotImplementedError


class CartPoleSameStep(SameStepAutoreset):
    """gymnasium's ``CartPoleVectorEnv`` (CartPole-v0/v1): state ``[4, num_envs]`` float64 (x, x_dot, theta,
    theta_dot), step counters ``steps``, reset bounds ``low``/``high``; its ``prev_done`` (the copies its own next
    step would reset) stays all false, as its reset leaves it.

    :meth:`step` is ``CartPoleVectorEnv.step``'s arithmetic, term for term (so the same float64 state and actions
    give bit-identical states; tests/envs/test_vector_entry_point.py checks it against gymnasium's step and against
    ``CartPoleEnv``), without what SAME_STEP makes dead weight there: the NEXT_STEP resets of the previous step's
    finished copies and the ``action_space.contains`` assertion (together ~40% of its time on 8 copies). Actions are
    not validated: anything but 1 pushes left, as ``CartPoleVectorEnv``'s ``sign(action - 0.5)`` does for 0.
    """

    wraps = "gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv"

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        env = self.env
        assert env.state is not None, "Call reset before using step method."
        x, x_dot, theta, theta_dot = env.state
        force = np.sign(np.asarray(actions) - 0.5) * env.force_mag
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        temp = (force + env.polemass_length * np.square(theta_dot) * sintheta) / env.total_mass
        thetaacc = (env.gravity * sintheta - costheta * temp) / (
            env.length * (4.0 / 3.0 - env.masspole * np.square(costheta) / env.total_mass))
        xacc = temp - env.polemass_length * thetaacc * costheta / env.total_mass
        if env.kinematics_integrator == "euler":
            x = x + env.tau * x_dot
            x_dot = x_dot + env.tau * xacc
            theta = theta + env.tau * theta_dot
            theta_dot = theta_dot + env.tau * thetaacc
        else:  # semi-implicit euler
            x_dot = x_dot + env.tau * xacc
            x = x + env.tau * x_dot
            theta_dot = theta_dot + env.tau * thetaacc
            theta = theta + env.tau * theta_dot
        env.state = np.stack((x, x_dot, theta, theta_dot))
        terminated = ((x < -env.x_threshold) | (x > env.x_threshold) | (theta < -env.theta_threshold_radians)
                      | (theta > env.theta_threshold_radians))
        env.steps += 1
        truncated = env.steps >= env.max_episode_steps
        # SyncVectorEnv's reward dtype (float64); CartPoleVectorEnv's values
        rewards = -terminated.astype(np.float64) if env._sutton_barto_reward else np.ones(len(x))
        obs = env.state.T.astype(np.float32, order="C")
        done = terminated | truncated
        if not done.any():
            return obs, rewards, terminated, truncated, {}
        final_obs = np.full(self.num_envs, None, dtype=object)
        for i in np.flatnonzero(done):
            final_obs[i] = obs[i].copy()
        obs[done] = self.reset_copies(done)
        info = {"final_obs": final_obs, "_final_obs": done, "final_info": {}, "_final_info": done.copy()}
        return obs, rewards, terminated, truncated, info

    def reset_copies(self, done: np.ndarray) -> np.ndarray:
        env = self.env  # as CartPoleVectorEnv.step resets its prev_done copies (and its reset() all of them)
        env.state[:, done] = env.np_random.uniform(low=env.low, high=env.high, size=(4, int(done.sum())))
        env.steps[done] = 0
        return env.state[:, done].T.astype(np.float32)


ADAPTERS: dict[str, type[SameStepAutoreset]] = {CartPoleSameStep.wraps: CartPoleSameStep}
"""Batched vector env classes (their ``vector_entry_point``) that rlrun can step with SAME_STEP autoreset."""


def can_adapt(env_id: str) -> bool:
    """True when registered id ``env_id`` has a vector entry point with an adapter here (``env.vectorization=auto``
    steps it then)."""
    return str(gym.registry[env_id].vector_entry_point) in ADAPTERS


def adaptable_ids() -> list[str]:
    """Registered gymnasium ids whose vector entry point has an adapter here (CartPole-v0, CartPole-v1)."""
    return [k for k in gym.registry if can_adapt(k)]


def adapter_for(env_id: str) -> type[SameStepAutoreset]:
    """The adapter of registered id ``env_id``'s vector entry point; a ConfigError when it has none that rlrun
    can adapt."""
    entry = gym.registry[env_id].vector_entry_point
    ids = ", ".join(adaptable_ids())
    if entry is None:
        raise ConfigError(f"env.vectorization=vector_entry_point: {env_id} registers no vector entry point in "
                          f"gymnasium {gym.__version__} (ids that do: {ids}); use env.vectorization=copies.")
    adapter = ADAPTERS.get(str(entry))
    if adapter is None:
        raise ConfigError(f"env.vectorization=vector_entry_point: {env_id}'s vector entry point {entry} cannot be "
                          f"reset per copy within a step by rlrun (ids it can: {ids}); use env.vectorization=copies.")
    return adapter


def make_same_step(env_id: str, registered: str, num_envs: int, kwargs: dict[str, Any]) -> SameStepAutoreset:
    """``num_envs`` copies of ``env_id`` (``registered``: its id in gymnasium's registry, less a ``module:``
    prefix) in its own batched vector env, with SAME_STEP autoreset. ``kwargs``: the batched env's constructor
    arguments (``max_episode_steps`` among them; its registered limit otherwise)."""
    try:  # first: with a module:Id id, this imports the module (which registers the id) in this process too
        env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)
    except TypeError as e:
        raise ConfigError(f"env.kwargs: {registered}'s vector entry point does not accept these arguments "
                          f"({e}).") from None
    return adapter_for(registered)(env)
