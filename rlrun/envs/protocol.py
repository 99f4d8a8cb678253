"""The env protocol card: what a reader needs to compare a score with another paper's or run's.

Two Atari scores are only comparable when they were measured under the same protocol: sticky actions or not,
full or minimal action set, how many frames per agent step, when an episode is cut off, whether a lost life ends an
episode, whether rewards were clipped, and which emulator version ran the game (Machado et al., 2018, "Revisiting
the Arcade Learning Environment", Sec. 5). Every env factory exposes ``protocol_card()``, a plain JSON-able dict
built from its config; a run writes it to ``<run dir>/protocol.json`` and to MLflow.

Keys every card has:

- ``env_id``: the gymnasium id the env copies are made from (``ALE/Pong-v5``, ``CartPole-v1``);
- ``env_factory``: the registry name of the factory (``gym``, ``atari``);
- ``backend``: what steps the env copies (``gymnasium``, ``envpool``);
- ``versions``: installed versions of the packages that simulate the env (gymnasium, ale-py, envpool);
- ``frame_skip``: emulator frames per agent step (1 outside Atari); frames = agent steps x frame_skip;
- ``max_episode_steps``: the time limit in agent steps (null: none); for Atari ``ceil(max_episode_frames /
  frame_skip)`` (the ALE counts the no-op frames at reset too, so a game may end a few steps earlier);
- ``units``: the step units used in the card.

Cards of gymnasium ids (``gym_card``) add ``vectorization``: ``copies`` (one env object per copy) or
``vector_entry_point`` (the id's own batched vector env: same dynamics, one random generator for the copies, so other
trajectories for a seed), ``env_kwargs`` and ``registered`` (the id's registry entry: entry point, vector entry
point, time limit, reward threshold, kwargs).

Atari cards (``atari_card``) add ``game``, ``max_pool``, ``sticky_action_probability``, ``action_set``
(``full`` | ``minimal``), ``num_actions``, ``max_episode_frames``, ``life_loss``, ``reward_clipping``,
``noop_max``, ``frame_size``, ``grayscale``, ``frame_stack``, ``observation`` and ``score`` (what the reported
game score is).
"""

from __future__ import annotations

from typing import Any

from rlrun.fingerprint import package_versions

UNITS = ("agent step = one action in one env copy = frame_skip emulator frames (frames = agent steps x frame_skip); "
         "max_episode_steps in agent steps, max_episode_frames in frames")

ATARI_SCORE = ("game_score: sum of unclipped rewards over a whole game (all lives, from reset to game over or "
               "the max_episode_frames cut-off), the figure papers report; episode/return is the training "
               "return (clipped rewards, episodes ending on a lost life when life_loss is terminal)")


def versions(*packages: str) -> dict[str, str | None]:
    """Installed version of each distribution (None when absent)."""
    return package_versions(tuple(packages))


def _plain(value: Any) -> Any:
    """A value as JSON-able plain data (config nodes, tuples and odd objects become dicts, lists and strings)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and hasattr(value, "__len__")):
        return [_plain(v) for v in value]
    return str(value)


def gym_card(cfg: Any, max_episode_steps: int | None, registered_id: str | None = None,
             vectorization: str | None = None) -> dict[str, Any]:
    """The card of a plain gymnasium env (``env=gym``, e.g. CartPole): its id, time limit and make() kwargs.

    ``max_episode_steps`` is the limit the env copies really have (the config's override or the registered one);
    ``registered_id`` the id in gymnasium's registry (``cfg.id`` less a ``module:`` prefix); ``vectorization`` what
    steps the copies (``env.vectorization=auto`` resolved; default: the config's value).
    """
    import gymnasium as gym

    card: dict[str, Any] = {
        "env_id": str(cfg.id), "env_factory": "gym", "backend": "gymnasium",
        "vectorization": vectorization or str(getattr(cfg, "vectorization", None) or "copies"),
        "versions": versions("gymnasium"), "frame_skip": int(cfg.frame_skip),
        "max_episode_steps": max_episode_steps, "env_kwargs": _plain(cfg.kwargs or {}), "units": UNITS,
    }
    spec = gym.registry.get(registered_id or str(cfg.id))
    if spec is not None:
        card["registered"] = {"entry_point": str(spec.entry_point),
                              "vector_entry_point": None if spec.vector_entry_point is None
                              else str(spec.vector_entry_point),
                              "max_episode_steps": spec.max_episode_steps,
                              "reward_threshold": spec.reward_threshold, "nondeterministic": spec.nondeterministic,
                              "kwargs": _plain(spec.kwargs)}
    return card


def atari_card(cfg: Any, env_id: str, game: str, num_actions: int,
               observation_shape: tuple[int, ...]) -> dict[str, Any]:
    """The card of an Atari env (``env=atari|pong|breakout``) under the protocol its config sets."""
    frame_skip = int(cfg.frame_skip)
    max_frames = None if cfg.max_episode_frames is None else int(cfg.max_episode_frames)
    backend = str(cfg.backend)
    packages = ("gymnasium", "ale-py") + (("envpool",) if backend == "envpool" else ())
    return {
        "env_id": env_id, "env_factory": str(cfg.name), "backend": backend, "game": game,
        "versions": versions(*packages),
        "frame_skip": frame_skip,
        "max_pool": bool(cfg.max_pool) and frame_skip > 1,
        "sticky_action_probability": float(cfg.repeat_action_probability),
        "action_set": "full" if cfg.full_action_space else "minimal",
        "num_actions": int(num_actions),
        "max_episode_frames": max_frames,
        "max_episode_steps": None if max_frames is None else -(-max_frames // frame_skip),
        "life_loss": ("terminal for training (the game goes on; the next episode starts where it stopped)"
                      if cfg.terminal_on_life_loss else "not terminal"),
        "reward_clipping": "sign" if cfg.clip_rewards else "none",
        "noop_max": int(cfg.noop_max),
        "frame_size": [int(cfg.screen_size), int(cfg.screen_size)],
        "grayscale": bool(cfg.grayscale),
        "frame_stack": int(cfg.frame_stack),
        "observation": {"shape": list(observation_shape), "dtype": "uint8", "layout": "channel-first, oldest first"},
        "score": ATARI_SCORE,
        "units": UNITS,
    }
