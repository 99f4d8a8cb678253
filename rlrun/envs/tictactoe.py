"""Tic-tac-toe against a uniformly random opponent, as a single-agent gymnasium env: the small real task with
invalid actions that shows rlrun's action masks (docs/action-masks.md).

The game is PettingZoo's ``pettingzoo.classic.tictactoe_v3``; the agent is ``player_1`` (it moves first) and the
opponent, ``player_2``, answers each move with a legal move drawn from the env's own generator (seeded by
``reset(seed=...)``). Reward at the game's end: +1 win, -1 loss, 0 draw; 0 before. A uniformly random first player
scores about +0.3 on average against it (it wins about 58% of games and loses about 29%).

Observation: ``mask_in="observation"`` (default, PettingZoo's form): ``{"observation": int8 [3, 3, 2] (the agent's
marks, the opponent's), "action_mask": int8 [9] (1 = empty square)}``; ``mask_in="info"``: the board alone, and
the mask in ``info["action_mask"]`` at every reset and step (rlrun's env factory moves it into the observation,
rlrun/envs/action_masks.py). ``illegal``: what a move onto a taken square does: ``lose`` (the game ends, reward -1)
or ``raise`` (an :class:`IllegalActionError`: a run that finishes has taken none; the proof of the masks).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlrun import spaces as sp
from rlrun.spaces import MASK_KEY

AGENT, OPPONENT = "player_1", "player_2"
MASK_PLACES = ("observation", "info")
ILLEGAL_RULES = ("lose", "raise")


class IllegalActionError(RuntimeError):
    """A move onto a taken square under ``illegal="raise"``."""


class TicTacToeVsRandom(gym.Env):
    """PettingZoo's tic-tac-toe, the agent first against a random player (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, mask_in: str = "observation", illegal: str = "lose") -> None:
        if mask_in not in MASK_PLACES or illegal not in ILLEGAL_RULES:
            raise ValueError(f"mask_in must be one of {MASK_PLACES} and illegal one of {ILLEGAL_RULES}; got "
                             f"{mask_in!r}, {illegal!r}")
        from pettingzoo.classic.tictactoe.tictactoe import raw_env  # a dependency of rlrun, imported where used

        self.game = raw_env()  # without the wrappers that check what this class checks itself
        self.mask_in, self.illegal = mask_in, illegal
        board = sp.Box(0, 1, (3, 3, 2), np.int8)
        self.action_space = sp.Discrete(9)
        self.observation_space = (sp.Dict({"observation": board, MASK_KEY: sp.Box(0, 1, (9,), np.int8)})
                                  if mask_in == "observation" else board)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.game_seed = int(self.np_random.integers(2**31))
        self.moves: list[int] = []  # both players' moves of the game so far: its whole state (checkpoint_state)
        self.game.reset(seed=self.game_seed)
        return self._observe()

    def checkpoint_state(self) -> dict[str, Any]:
        """The game as plain data for a checkpoint (rlrun.envs.env_state): PettingZoo's game object is not."""
        return {"game_seed": self.game_seed, "moves": list(self.moves)}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        self.game_seed, self.moves = int(state["game_seed"]), [int(m) for m in state["moves"]]
        self.game.reset(seed=self.game_seed)
        for move in self.moves:
            self.game.step(move)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        action = int(action)
        if not self.game.observe(AGENT)[MASK_KEY][action]:
            if self.illegal == "raise":
                raise IllegalActionError(f"square {action} is taken: the policy chose an illegal action")
            obs, info = self._observe()
            return obs, -1.0, True, False, info
        self.game.step(action)
        self.moves.append(action)
        if not self._over():
            legal = np.flatnonzero(self.game.observe(OPPONENT)[MASK_KEY])
            self.moves.append(int(self.np_random.choice(legal)))
            self.game.step(self.moves[-1])
        obs, info = self._observe()
        over = self._over()
        return obs, float(self.game.rewards[AGENT]) if over else 0.0, over, False, info

    def _over(self) -> bool:
        return bool(self.game.terminations[AGENT] or self.game.truncations[AGENT])

    def _observe(self) -> tuple[Any, dict]:
        seen = self.game.observe(AGENT)
        board, mask = seen["observation"].astype(np.int8), seen[MASK_KEY].astype(np.int8)
        info = {MASK_KEY: mask}
        return ({"observation": board, MASK_KEY: mask} if self.mask_in == "observation" else board), info

    def close(self) -> None:
        self.game.close()
