"""Atari 2600 games of the Arcade Learning Environment (ale-py ships the ROMs) under the DeepMind/IMPALA protocol.

``env=pong``, ``env=breakout`` or ``env=atari env.game=<Game>`` build an :class:`AtariEnvFactory`. One env copy is
``ALE/<Game>-v5`` made with ``frameskip=1`` (rlrun skips frames itself) and these wrappers, innermost first:

1. :class:`AtariFrames`: no-op reset (1..``noop_max`` no-ops drawn from the env's seeded ``np_random``), frame skip
   (the action repeated ``frame_skip`` frames, rewards summed) with a max-pool over the last two frames, grayscale,
   resize to ``screen_size`` (area interpolation). It drives the emulator (``ale.act``) directly: the same frames as
   gymnasium's ``AtariPreprocessing`` (tests/envs/test_atari.py checks it frame by frame) at a lower Python cost.
2. :class:`FrameStack`: the last ``frame_stack`` frames, channel-first ``[frame_stack * C, H, W]`` uint8 (C = 1 for
   grayscale), oldest first; rlrun's NatureCNN takes it as it is. A new game fills the stack with its first frame.
3. :class:`GameScore`: sees the unclipped rewards and the real game over (see below).
4. :class:`TerminalOnLifeLoss` (``terminal_on_life_loss``): a lost life ends the *training* episode; the game is
   not reset (unlike ``AtariPreprocessing(terminal_on_life_loss=True)``, which restarts the game and so never lets
   an agent reach its later lives): the next episode starts from the current observation (frame stack included),
   with no extra action. The envpool backend does the same, so both backends give the same observations.
5. :class:`SignReward` (``clip_rewards``): training reward = sign(reward).

Sticky actions (``repeat_action_probability``, 0 by default as in the DQN/IMPALA papers), the full or minimal action
set and the game cut-off (``max_episode_frames``, 108,000 frames = 27,000 agent steps) are the ALE's own settings.

**Game score.** The training reward is clipped and a training episode may end at a lost life, but the figure papers
report is the raw score of a whole game. At the step where a whole game ends (game over, or the
``max_episode_frames`` cut-off), the env's ``info`` has:

- ``info["game_score"]``: the sum of the unclipped rewards over the whole game (all lives), a float;
- ``info["game_length"]``: the agent steps of that game, an int.

In a gymnasium vector env with SAME_STEP autoreset (what the factories make), a finished copy's info is under
``info["final_info"]`` (with the mask ``info["final_info"]["_game_score"]``); :func:`game_scores_from_infos` and
:func:`games_from_infos` read them out. The envpool backend (``rlrun/envs/envpool_env.py``) reports the same keys
the same way.

Seeding: ``envs.reset(seed=[seed + i for i in range(n)])`` (what ``RolloutWorker`` does) seeds copy i's emulator and
its ``np_random`` (the no-op counts) from ``seed + i``; nothing reads ``os.urandom`` after that.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box

from rlrun.envs.gym_env import EnvSpec
from rlrun.envs.protocol import atari_card
from rlrun.errors import ConfigError

BACKENDS = ("gymnasium", "envpool")
VECTOR_MODES = ("sync", "async")
NOOP = 0  # ale_py.Action.NOOP; both ALE action sets start with it


# ---------------------------------------------------------------------------------------------------- wrappers


class AtariFrames(gym.Wrapper):
    """No-op reset, frame skip with max-pool over the last two frames, grayscale/RGB, resize: the frame pipeline of
    Mnih et al. 2015 (Methods, "preprocessing") on an ``AtariEnv`` made with ``frameskip=1``.

    Observation: one frame, channel-first ``[C, screen_size, screen_size]`` uint8, C = 1 (grayscale) or 3 (RGB).
    ``info["lives"]``: the lives left. The frames are exactly those of gymnasium's ``AtariPreprocessing`` and of
    envpool with the same settings (tests/envs/test_atari.py), quirk included: a game that ends inside a skip shows
    the frame of the step before (the final observation of a finished game is never bootstrapped from). It is faster
    than ``AtariPreprocessing`` because it calls the emulator directly instead of ``AtariEnv.step`` once per frame.
    """

    def __init__(self, env: gym.Env, frame_skip: int = 4, max_pool: bool = True, noop_max: int = 30,
                 screen_size: int = 84, grayscale: bool = True) -> None:
        """``frame_skip``: frames per agent step; ``max_pool``: max over the last two frames of a skip;
        ``noop_max``: most no-op frames at reset (0: none); ``screen_size``: output height/width in pixels;
        ``grayscale``: one luminance channel instead of RGB."""
        super().__init__(env)
        unwrapped = env.unwrapped
        if getattr(unwrapped, "_frameskip", None) != 1:
            raise ValueError("AtariFrames skips frames itself: make the ALE env with frameskip=1")
        self.frame_skip, self.max_pool, self.noop_max = int(frame_skip), bool(max_pool), int(noop_max)
        self.screen_size, self.grayscale = int(screen_size), bool(grayscale)
        self._ale = unwrapped.ale
        self._actions = [int(a.value) for a in unwrapped._action_set]
        h, w = self._ale.getScreenDims()
        self._buffer = np.zeros((2, h, w) if grayscale else (2, h, w, 3), dtype=np.uint8)
        channels = 1 if grayscale else 3
        self.observation_space = Box(0, 255, (channels, self.screen_size, self.screen_size), np.uint8)

    def _grab(self, slot: int) -> None:
        if self.grayscale:
            self._ale.getScreenGrayscale(self._buffer[slot])
        else:
            self._ale.getScreenRGB(self._buffer[slot])

    def _observation(self) -> np.ndarray:
        import cv2

        frame = self._buffer[0]
        if self.max_pool and self.frame_skip > 1:
            np.maximum(self._buffer[0], self._buffer[1], out=frame)
        frame = cv2.resize(frame, (self.screen_size, self.screen_size), interpolation=cv2.INTER_AREA)
        return frame[None] if self.grayscale else np.ascontiguousarray(frame.transpose(2, 0, 1))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        _, info = self.env.reset(seed=seed, options=options)
        ale = self._ale
        noops = int(self.env.unwrapped.np_random.integers(1, self.noop_max + 1)) if self.noop_max > 0 else 0
        for _ in range(noops):
            ale.act(NOOP)
            if ale.game_over():
                _, info = self.env.reset()
        self._grab(0)
        self._buffer[1].fill(0)
        return self._observation(), {"lives": ale.lives()}

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict]:
        ale, skip = self._ale, self.frame_skip
        a = self._actions[int(action)]
        reward = 0
        for t in range(skip):
            reward += ale.act(a)
            if ale.game_over():  # ended inside the skip (game over or cut-off): keep the buffers, as gymnasium does
                break
            if t == skip - 2:
                self._grab(1)
            elif t == skip - 1:
                self._grab(0)
        terminated = ale.game_over(with_truncation=False)
        truncated = ale.game_truncated() and not terminated
        return self._observation(), float(reward), terminated, truncated, {"lives": ale.lives()}


class GameScore(gym.Wrapper):
    """Adds ``info["game_score"]`` (unclipped return of the whole game) and ``info["game_length"]`` (its agent steps)
    at the step where a game really ends (game over or cut-off). Wrap it inside the life-loss and clipping wrappers,
    so that it sees the game's own rewards and ends."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.game_score = 0.0
        self.game_length = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        self.game_score, self.game_length = 0.0, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_score += float(reward)
        self.game_length += 1
        if terminated or truncated:
            info = {**info, "game_score": self.game_score, "game_length": self.game_length}
        return obs, reward, terminated, truncated, info


class TerminalOnLifeLoss(gym.Wrapper):
    """A lost life ends the training episode (``terminated=True``) while the game goes on.

    The following ``reset()`` (a vector env's autoreset) returns the current observation without touching the emulator,
    unless the game itself is over (or a seed/options are given), in which case it resets the game. Needs
    ``info["lives"]`` from the env below (:class:`AtariFrames`). Mnih et al. 2015 (Methods: "for games where there
    is a life counter, the Atari 2600 emulator also sends the number of lives left in the game, which is then used
    to mark the end of an episode during training"); no extra no-op step after the loss, as in Dopamine.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.game_over = True
        self.last_obs: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        if self.game_over or self.last_obs is None or seed is not None or options:
            obs, info = self.env.reset(seed=seed, options=options)
            self.game_over = False
            self.lives = int(info["lives"])
        else:
            obs, info = self.last_obs, {"lives": self.lives}
        self.last_obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = bool(terminated or truncated)
        lives = int(info["lives"])
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        self.last_obs = obs
        return obs, reward, terminated, truncated, info


class SignReward(gym.RewardWrapper):
    """Training reward = sign(reward) in {-1, 0, 1} (Mnih et al. 2015, Methods: reward clipping)."""

    def reward(self, reward: SupportsFloat) -> float:
        return float(np.sign(reward))


class FrameStack(gym.Wrapper):
    """The last ``num_stack`` observations ``[C, H, W]`` concatenated channel-first: ``[num_stack * C, H, W]``, oldest
    first. A reset fills the stack with the reset observation (gymnasium's ``FrameStackObservation`` with its
    default padding does the same, in a ``[num_stack, ...]`` layout and with a deep copy per step). Wrap it inside
    :class:`TerminalOnLifeLoss`, so that the stack carries on across a lost life as the game does."""

    def __init__(self, env: gym.Env, num_stack: int) -> None:
        """``num_stack``: observations stacked (4 in the DQN paper)."""
        super().__init__(env)
        c, h, w = env.observation_space.shape
        self.num_stack, self._channels = int(num_stack), c
        self.frames = np.zeros((self.num_stack * c, h, w), dtype=np.uint8)
        self.observation_space = Box(0, 255, self.frames.shape, np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.frames.reshape(self.num_stack, *obs.shape)[:] = obs
        return self.frames.copy(), info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        c = self._channels
        self.frames[:-c] = self.frames[c:]
        self.frames[-c:] = obs
        return self.frames.copy(), reward, terminated, truncated, info


# ---------------------------------------------------------------------------------------------------- game scores


def games_from_infos(infos: dict[str, Any], done_mask: np.ndarray) -> list[tuple[float, int]]:
    """(game score, game length) of every env copy whose whole game ended at this step of a SAME_STEP vector env.

    ``infos``: the info dict of ``VectorEnv.step``; ``done_mask``: ``terminated | truncated`` of that step. A done
    copy whose game goes on (a lost life) has no entry. Order: by env copy index.
    """
    final = infos.get("final_info")
    if not isinstance(final, dict) or "game_score" not in final:
        return []
    mask = np.asarray(final.get("_game_score", np.ones(len(done_mask), dtype=bool)), dtype=bool)
    lengths = final.get("game_length")
    out = []
    for i in np.flatnonzero(np.asarray(done_mask, dtype=bool) & mask):
        out.append((float(final["game_score"][i]), int(lengths[i]) if lengths is not None else -1))
    return out


def game_scores_from_infos(infos: dict[str, Any], done_mask: np.ndarray) -> list[float]:
    """The raw (unclipped, all-lives) scores of the games that ended at this vector-env step; see games_from_infos."""
    return [score for score, _ in games_from_infos(infos, done_mask)]


# ---------------------------------------------------------------------------------------------------- games


def ale_games() -> list[str]:
    """The ALE games gymnasium knows as ``ALE/<Game>-v5`` (ale-py registers them on import), sorted."""
    _register_ale()
    return sorted(k[len("ALE/"):-len("-v5")] for k in gym.registry if k.startswith("ALE/") and k.endswith("-v5"))


def resolve_game(name: str) -> str:
    """The ALE game's name as in ``ALE/<Game>-v5`` for ``name`` in any case, CamelCase or snake_case
    (``pong``, ``ms_pacman`` -> ``Pong``, ``MsPacman``); ConfigError naming close matches otherwise."""
    games = ale_games()
    key = _game_key(name)
    by_key = {_game_key(g): g for g in games}
    if key in by_key:
        return by_key[key]
    close = difflib.get_close_matches(key, list(by_key), n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(by_key[c] for c in close)}?" if close else ""
    raise ConfigError(f"env.game={name}: not an ALE game.{hint} ale-py ships {len(games)} games: "
                      f"{', '.join(games)}.")


def _game_key(name: str) -> str:
    return "".join(ch for ch in str(name).lower() if ch.isalnum())


def _register_ale() -> None:
    if "ALE/Pong-v5" not in gym.registry:
        import ale_py

        gym.register_envs(ale_py)


# ---------------------------------------------------------------------------------------------------- factory


def validate(cfg: Any) -> None:
    """Range checks of an AtariEnvConfig node (types are Hydra's business); ConfigError names the key."""
    checks = [
        ("backend", cfg.backend in BACKENDS, f"must be one of {', '.join(BACKENDS)}"),
        ("frame_skip", int(cfg.frame_skip) >= 1, "must be at least 1 frame"),
        ("noop_max", int(cfg.noop_max) >= 0, "must be 0 (off) or more no-op frames"),
        ("screen_size", int(cfg.screen_size) >= 8, "must be at least 8 pixels"),
        ("frame_stack", int(cfg.frame_stack) >= 1, "must be at least 1 frame"),
        ("repeat_action_probability", 0.0 <= float(cfg.repeat_action_probability) < 1.0, "must be in [0, 1)"),
        ("max_episode_frames", cfg.max_episode_frames is None or int(cfg.max_episode_frames) > 0,
         "must be positive (frames), or null for no cut-off"),
    ]
    for key, ok, why in checks:
        if not ok:
            raise ConfigError(f"env.{key}={getattr(cfg, key)}: {why}.")
    owned = {"frameskip": "frame_skip", "repeat_action_probability": "repeat_action_probability",
             "full_action_space": "full_action_space", "max_num_frames_per_episode": "max_episode_frames"}
    for key in cfg.kwargs or {}:
        if key in owned:
            raise ConfigError(f"env.kwargs.{key}: set by the protocol; use env.{owned[key]} instead.")


class AtariEnvFactory:
    """Makes env copies of one ALE game under the protocol of an ``AtariEnvConfig``; see the module docstring.

    ``spec``: the spaces an algorithm builds from (observation ``[frame_stack*C, H, W]`` uint8, Discrete actions)
    and ``frame_skip`` (so frames/s is counted in emulator frames). Built from a config node (Hydra's DictConfig)
    or an ``AtariEnvConfig``; a bad value raises ConfigError here, before anything starts.
    """

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        validate(cfg)
        self.game = resolve_game(cfg.game)
        self.env_id = f"ALE/{self.game}-v5"
        if cfg.backend == "envpool":
            from rlrun.envs.envpool_env import check_envpool  # envpool is an optional extra: only when chosen

            check_envpool(self)
        probe = self.make()
        self.spec = EnvSpec(self.env_id, probe.observation_space, probe.action_space, int(cfg.frame_skip))
        probe.close()

    # ------------------------------------------------------------ env copies

    def ale_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``gym.make("ALE/<Game>-v5", ...)``: the ALE's own share of the protocol."""
        kwargs = dict(self.cfg.kwargs or {})
        kwargs.update(frameskip=1, repeat_action_probability=float(self.cfg.repeat_action_probability),
                      full_action_space=bool(self.cfg.full_action_space),
                      max_num_frames_per_episode=(None if self.cfg.max_episode_frames is None
                                                  else int(self.cfg.max_episode_frames)))
        kwargs.setdefault("obs_type", "grayscale" if self.cfg.grayscale else "rgb")
        return kwargs

    def make(self, evaluation: bool = False) -> gym.Env:
        """One env copy with the gymnasium backend. ``evaluation=True``: no reward clipping and no life-loss
        episodes, so an episode's return is the game score."""
        cfg = self.cfg
        _register_ale()  # also in a subprocess of an AsyncVectorEnv, which unpickles this factory
        try:
            env = gym.make(self.env_id, disable_env_checker=True, **self.ale_kwargs())
        except TypeError as e:
            raise ConfigError(f"env.kwargs: {self.env_id} does not accept these arguments ({e}).") from None
        env = AtariFrames(env, int(cfg.frame_skip), bool(cfg.max_pool), int(cfg.noop_max), int(cfg.screen_size),
                          bool(cfg.grayscale))
        env = GameScore(FrameStack(env, int(cfg.frame_stack)))
        if cfg.terminal_on_life_loss and not evaluation:
            env = TerminalOnLifeLoss(env)
        if cfg.clip_rewards and not evaluation:
            env = SignReward(env)
        return env

    def make_vector(self, num_envs: int, mode: str = "sync") -> gym.vector.VectorEnv:
        """``num_envs`` env copies stepped together, SAME_STEP autoreset (a finished copy's real last observation is
        in ``info["final_obs"]``, its info with the game score in ``info["final_info"]``).

        ``mode``: sync (all copies in this process) | async (one subprocess per copy; gymnasium AsyncVectorEnv).
        The envpool backend steps the copies in its own C++ threads whatever the mode.
        """
        if mode not in VECTOR_MODES:
            raise ConfigError(f"executor.vector_mode={mode}: must be sync or async.")
        if self.cfg.backend == "envpool":
            from rlrun.envs.envpool_env import EnvPoolVectorEnv  # the optional extra, only when chosen

            return EnvPoolVectorEnv(self, num_envs)
        fns: list[Callable[[], gym.Env]] = [self.make for _ in range(num_envs)]
        autoreset = gym.vector.AutoresetMode.SAME_STEP
        if mode == "sync":
            return gym.vector.SyncVectorEnv(fns, autoreset_mode=autoreset)
        return gym.vector.AsyncVectorEnv(fns, autoreset_mode=autoreset, context="spawn")

    # ------------------------------------------------------------ the protocol

    def protocol_card(self) -> dict[str, Any]:
        """The env protocol card (rlrun/envs/protocol.py) of this config."""
        n = int(self.spec.action_space.n)
        return atari_card(self.cfg, self.env_id, self.game, n, tuple(self.spec.observation_space.shape))
