"""Atari envs (rlrun/envs/atari.py, rlrun/envs/envpool_env.py): the DeepMind frame pipeline checked frame by frame
against gymnasium's AtariPreprocessing (the naive reference), life-loss episodes that leave the game running, the raw
game score of whole games read from a real vector env's infos, seeding, checkpointed state, bad input, and the
envpool backend against the gymnasium backend.

Real emulators, no mocks. The ALE runs ~10k frames/s here; each test steps at most a few thousand frames.
"""

from __future__ import annotations

import io
import os

import ale_py
import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
from omegaconf import OmegaConf

from rlrun.config import AtariEnvConfig, compose
from rlrun.envs import env_state
from rlrun.envs.atari import AtariEnvFactory, game_scores_from_infos, games_from_infos, resolve_game
from rlrun.errors import ConfigError

try:
    import envpool  # noqa: F401

    HAS_ENVPOOL = True
except ImportError:
    HAS_ENVPOOL = False
gym.register_envs(ale_py)
needs_envpool = pytest.mark.skipif(not HAS_ENVPOOL, reason="envpool is an optional extra: pip install 'rlrun[envpool]'")


def factory(game: str = "Pong", **overrides) -> AtariEnvFactory:
    return AtariEnvFactory(OmegaConf.structured(AtariEnvConfig(game=game, **overrides)))


def actions(n: int, num_actions: int, seed: int = 0, batch: int | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, num_actions, size=n if batch is None else (n, batch))


# ---------------------------------------------------------------------------------------------------- frames


@pytest.mark.parametrize("frame_skip,grayscale,noop_max", [(4, True, 30), (2, True, 30), (4, False, 5), (3, True, 0)])
def test_frames_match_gymnasium_atari_preprocessing(frame_skip: int, grayscale: bool, noop_max: int) -> None:
    """rlrun's AtariFrames + FrameStack drive the emulator directly; gymnasium's AtariPreprocessing +
    FrameStackObservation step AtariEnv frame by frame. Same seed (so the same no-op count from the env's
    np_random), same actions: the observations and rewards must be identical, bit for bit (RGB stacks are laid out
    channel-first as [stack*3, 84, 84] by rlrun and [stack, 84, 84, 3] by gymnasium)."""
    ref = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
    ref = FrameStackObservation(AtariPreprocessing(ref, noop_max=noop_max, frame_skip=frame_skip, screen_size=84,
                                                   grayscale_obs=grayscale), 4)
    env = factory(frame_skip=frame_skip, grayscale=grayscale, noop_max=noop_max, terminal_on_life_loss=False,
                  clip_rewards=False).make()

    def as_rlrun(obs: np.ndarray) -> np.ndarray:
        return obs if grayscale else obs.transpose(0, 3, 1, 2).reshape(12, 84, 84)

    a, _ = env.reset(seed=7)
    b, _ = ref.reset(seed=7)
    assert a.shape == ((4, 84, 84) if grayscale else (12, 84, 84)) and a.dtype == np.uint8
    assert np.array_equal(a, as_rlrun(b))
    changed = 0
    for step, action in enumerate(actions(60, 6)):
        a, ra, ta, _, _ = env.step(action)
        b, rb, tb, _, _ = ref.step(action)
        assert np.array_equal(a, as_rlrun(b)), f"observation differs at step {step}"
        assert (ra, ta) == (rb, tb)
        changed += int(not np.array_equal(a[-1], a[-2]))
    assert changed > 10, "the frames should move"
    env.close()
    ref.close()


@pytest.mark.parametrize("overrides,shape,num_actions", [
    ({}, (4, 84, 84), 6),
    ({"full_action_space": True}, (4, 84, 84), 18),
    ({"screen_size": 64, "frame_stack": 2, "grayscale": False}, (6, 64, 64), 6),
])
def test_spec_spaces_and_frame_skip(overrides: dict, shape: tuple, num_actions: int) -> None:
    f = factory("Pong", **overrides)
    assert f.spec.id == "ALE/Pong-v5"
    assert f.spec.observation_space.shape == shape and f.spec.observation_space.dtype == np.uint8
    assert f.spec.action_space.n == num_actions
    assert f.spec.frame_skip == 4, "frames/s is counted as agent steps x frame_skip"
    env = f.make()
    obs, _ = env.reset(seed=0)
    assert f.spec.observation_space.contains(obs)
    env.close()


def test_max_pool_takes_the_brighter_of_the_last_two_frames() -> None:
    """With max_pool the observed frame is max(frame t-1, frame t) pixel-wise, so it is >= the frame without pooling
    everywhere, and brighter somewhere in Pong (the moving ball and paddles leave both positions visible)."""
    pooled, plain = factory(max_pool=True, noop_max=0).make(), factory(max_pool=False, noop_max=0).make()
    pooled.reset(seed=0)
    plain.reset(seed=0)
    brighter = 0
    for action in actions(40, 6):
        a = pooled.step(action)[0][-1].astype(int)
        b = plain.step(action)[0][-1].astype(int)
        assert (a >= b).all()
        brighter += int((a > b).any())
    assert brighter > 5


# -------------------------------------------------------------------------------------------- episodes and scores


def run_until_game_end(envs: gym.vector.VectorEnv, acts: np.ndarray) -> dict:
    """Step a 1-copy vector env until its first whole game ends; record per-step data."""
    rec: dict = {"obs": [], "rewards": [], "terminated": [], "final_obs": [], "lives": [], "games": []}
    obs, _ = envs.reset(seed=[3])
    for action in acts:
        nxt, reward, terminated, truncated, info = envs.step(np.array([action]))
        done = terminated | truncated
        rec["obs"].append(obs[0])
        rec["rewards"].append(float(reward[0]))
        rec["terminated"].append(bool(done[0]))
        rec["final_obs"].append(info["final_obs"][0] if done[0] else None)
        rec["lives"].append(int(info["final_info"]["lives"][0] if done[0] else info["lives"][0]))
        games = games_from_infos(info, done)
        rec["games"] += games
        obs = nxt
        if games:
            rec["next_obs"] = obs[0]
            break
    return rec


def test_game_score_spans_lives_and_is_unclipped() -> None:
    """Q*bert (rewards of 25+ per cube, 4 lives), a whole game with random actions. The training env (life loss
    terminal, sign-clipped rewards) and the evaluation env (neither) see the same game: same seed, same actions.

    Expected: the training env ends several episodes (lost lives) before the game ends; its rewards are the signs of
    the raw rewards; the game score read from the vector env's final_info equals the sum of all raw rewards of the
    game, and the game length its agent steps; the clipped training return is smaller."""
    f = factory("Qbert")
    acts = actions(1000, f.spec.action_space.n)
    train = run_until_game_end(f.make_vector(1), acts)
    evaluation = run_until_game_end(gym.vector.SyncVectorEnv([lambda: f.make(evaluation=True)],
                                                             autoreset_mode=gym.vector.AutoresetMode.SAME_STEP), acts)
    assert len(train["games"]) == 1 and len(evaluation["games"]) == 1
    score, length = train["games"][0]
    raw = evaluation["rewards"]
    assert length == len(raw) == len(train["rewards"]) == evaluation["games"][0][1]
    assert score == sum(raw) == evaluation["games"][0][0]
    assert train["rewards"] == [float(np.sign(r)) for r in raw]
    assert max(raw) > 1 and sum(train["rewards"]) < score, "Q*bert's rewards are larger than 1: clipping shows"
    assert sum(train["terminated"]) >= 3, "each lost life ends a training episode"
    assert sum(evaluation["terminated"]) == 1, "without life loss the episode is the game"


def test_lost_life_ends_the_episode_but_not_the_game() -> None:
    """Breakout: at a lost life the training episode ends (terminated), the SAME_STEP autoreset returns the final
    observation itself (the game and the frame stack go on: no emulator reset, no extra action) and the lives count
    goes on down; without terminal_on_life_loss the same step is not terminal."""
    for life_loss in (True, False):
        f = factory("Breakout", terminal_on_life_loss=life_loss)
        envs = f.make_vector(1)
        obs, info = envs.reset(seed=[0])
        lives = int(info["lives"][0])
        for action in actions(300, 4):
            obs, _, terminated, truncated, info = envs.step(np.array([action]))
            done = bool(terminated[0] or truncated[0])
            now = int(info["final_info"]["lives"][0]) if done else int(info["lives"][0])
            if now < lives:
                break
        else:
            pytest.fail("no life was lost in 300 steps")
        assert now == lives - 1 and now > 0
        assert done == life_loss
        if life_loss:
            assert np.array_equal(obs[0], info["final_obs"][0])
            assert int(info["lives"][0]) == now, "the game was not reset"
            assert game_scores_from_infos(info, terminated | truncated) == [], "the game goes on: no game score"
        envs.close()


def test_a_real_game_over_resets_the_game_and_reports_its_score() -> None:
    """Breakout played to game over (all 5 lives): the last episode ends with the game score in final_info, the
    returned observation is a fresh game's (5 lives again), and the score equals the raw rewards since the start."""
    f = factory("Breakout", clip_rewards=False)
    envs = f.make_vector(2)
    envs.reset(seed=[0, 1])
    total = np.zeros(2)
    scores: list[list[float]] = [[], []]
    for action in actions(600, 4, batch=2):
        _, reward, terminated, truncated, info = envs.step(action)
        total += reward
        done = terminated | truncated
        for i, (score, length) in zip(np.flatnonzero(done & info.get("final_info", {}).get("_game_score", False)),
                                      games_from_infos(info, done), strict=True):
            assert score == total[i] and length > 0
            assert info["lives"][i] == 5 and info["final_info"]["lives"][i] == 0
            scores[i].append(score)
            total[i] = 0.0
        if all(scores):
            break
    assert all(scores), "both games should end within 600 agent steps of random play"
    envs.close()


def test_game_cut_off_by_max_episode_frames() -> None:
    """max_episode_frames=400: the ALE truncates the game at frame 400, counted from the reset with the no-op frames
    (noop_max=0 here), i.e. at agent step 400 / 4 = 100; a cut-off is a game end: its score (the raw rewards so far,
    clip_rewards=False) and length (100) are reported."""
    f = factory("Pong", max_episode_frames=400, noop_max=0, clip_rewards=False)
    envs = f.make_vector(1)
    envs.reset(seed=[0])
    total, steps = 0.0, 0
    for action in actions(150, 6):
        _, reward, terminated, truncated, info = envs.step(np.array([action]))
        total += float(reward[0])
        steps += 1
        if truncated[0] or terminated[0]:
            break
    assert (steps, bool(truncated[0]), bool(terminated[0])) == (100, True, False)
    assert games_from_infos(info, terminated | truncated) == [(total, 100)]
    envs.close()


def test_game_scores_from_infos_reads_only_finished_games() -> None:
    """A real SyncVectorEnv step info where nothing finished: no scores; and the helpers accept infos without
    final_info (the CartPole kind) too."""
    envs = factory("Pong").make_vector(2)
    envs.reset(seed=[0, 1])
    _, _, terminated, truncated, info = envs.step(np.array([0, 0]))
    assert "final_info" not in info
    assert game_scores_from_infos(info, terminated | truncated) == []
    envs.close()
    cart = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    cart.reset(seed=0)
    for _ in range(100):
        _, _, te, tr, info = cart.step(np.array([0, 0]))
        if (te | tr).any():
            assert game_scores_from_infos(info, te | tr) == []
            break
    else:
        pytest.fail("CartPole with a constant action should fall within 100 steps")
    cart.close()


# ---------------------------------------------------------------------------------------------------- seeding


def rollout(envs: gym.vector.VectorEnv, seeds: list[int], acts: np.ndarray) -> tuple[list[np.ndarray], int]:
    obs, _ = envs.reset(seed=seeds)
    seq, ends = [obs.copy()], 0
    for action in acts:
        obs, _, terminated, truncated, _ = envs.step(action)
        seq.append(obs.copy())
        ends += int((terminated | truncated).sum())
    return seq, ends


def test_same_seeds_same_observations_across_episode_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Breakout vector envs (2 copies, copy i seeded seed + i as RolloutWorker does), the same actions: identical
    observations at every step, across life-loss episode ends; os.urandom is never read once seeded. Other seeds
    give other no-op counts, hence other observations (so this test can fail)."""
    f = factory("Breakout")
    acts = actions(120, 4, batch=2)
    first, ends = rollout(f.make_vector(2), [5, 6], acts)

    def no_urandom(n: int) -> bytes:
        raise AssertionError("os.urandom was read")

    envs = f.make_vector(2)
    monkeypatch.setattr(os, "urandom", no_urandom)
    second, _ = rollout(envs, [5, 6], acts)
    monkeypatch.undo()
    assert ends >= 2, "the rollout should cross episode ends"
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    env = f.make()
    noops = []
    for s in range(3):
        env.reset(seed=s)
        noops.append(env.unwrapped.ale.getEpisodeFrameNumber())
    assert len(set(noops)) > 1, f"no-op counts should depend on the seed: {noops}"
    env.close()


def test_async_vector_env_matches_sync() -> None:
    """The factory's env copies also run in subprocesses (gymnasium AsyncVectorEnv, spawn: the factory is pickled and
    registers the ALE ids there): same seed and actions, same observations as in-process. One copy (one process)."""
    f = factory("Pong")
    acts = actions(20, 6, batch=1)
    sync, _ = rollout(f.make_vector(1, "sync"), [3], acts)
    envs = f.make_vector(1, "async")
    try:
        asynchronous, _ = rollout(envs, [3], acts)
    finally:
        envs.close()
    assert all(np.array_equal(a, b) for a, b in zip(sync, asynchronous, strict=True))


def test_env_copy_state_is_checkpointed_exactly() -> None:
    """rlrun.checkpoint snapshots every wrapper's attributes (frame stack, lives, game score) and the emulator: a
    vector env restored from a snapshot continues with the same observations, rewards and game scores."""
    f = factory("Breakout")
    envs = f.make_vector(2)
    envs.reset(seed=[0, 1])
    for action in actions(30, 4, batch=2):
        envs.step(action)
    buf = io.BytesIO()
    torch.save(env_state.vector_env_state(envs), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    later = actions(200, 4, seed=1, batch=2)

    def cont() -> list:
        out = []
        for action in later:
            obs, reward, terminated, truncated, info = envs.step(action)
            out.append((obs.copy(), reward.copy(), terminated.copy(), games_from_infos(info, terminated | truncated)))
        return out

    first = cont()
    env_state.set_vector_env_state(envs, state)
    second = cont()
    for (o1, r1, t1, g1), (o2, r2, t2, g2) in zip(first, second, strict=True):
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2) and np.array_equal(t1, t2) and g1 == g2
    envs.close()


# ---------------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("name,expected", [("Pong", "Pong"), ("pong", "Pong"), ("ms_pacman", "MsPacman"),
                                           ("SPACEINVADERS", "SpaceInvaders")])
def test_game_names_in_any_case(name: str, expected: str) -> None:
    assert resolve_game(name) == expected


@pytest.mark.parametrize("game,suggestion", [("Pongg", "Pong"), ("Breakuot", "Breakout"), ("MsPackman", "MsPacman")])
def test_unknown_game_lists_close_matches(game: str, suggestion: str) -> None:
    with pytest.raises(ConfigError, match=rf"env.game={game}: not an ALE game. Did you mean {suggestion}\b"):
        factory(game)


@pytest.mark.parametrize("key,value", [("frame_skip", 0), ("noop_max", -1), ("repeat_action_probability", 1.0),
                                       ("backend", "pygame"), ("frame_stack", 0), ("max_episode_frames", 0),
                                       ("screen_size", 4)])
def test_bad_values_fail_when_the_factory_is_built(key: str, value) -> None:
    with pytest.raises(ConfigError, match=rf"^env\.{key}={value}: "):
        factory("Pong", **{key: value})


def test_kwargs_cannot_override_the_protocol() -> None:
    with pytest.raises(ConfigError, match=r"env.kwargs.frameskip: set by the protocol; use env.frame_skip instead"):
        factory("Pong", kwargs={"frameskip": 2})
    assert factory("Pong", kwargs={"mode": 1}).make().unwrapped._game_mode == 1


@pytest.mark.parametrize("overrides,game,env_id", [
    (["env=pong"], "Pong", "Pong"),
    (["env=breakout"], "Breakout", "Breakout"),
    (["env=atari", "env.game=MsPacman"], "MsPacman", "MsPacman"),
])
def test_config_options_compose_and_build(overrides: list[str], game: str, env_id: str) -> None:
    """The conf/env options compose (schema-checked) into a factory with the DeepMind defaults."""
    cfg = compose([*overrides, "logger=none"])
    assert (cfg.env.name, cfg.env.game, cfg.env.id, cfg.env.frame_skip, cfg.env.repeat_action_probability) == \
        ("atari", game, env_id, 4, 0.0)
    from rlrun.registry import registry

    f = registry.build("env", cfg.env.name, cfg.env)
    assert f.spec.observation_space.shape == (4, 84, 84)
    assert cfg.run_name == f"dqn-{env_id}-seed0"


# ---------------------------------------------------------------------------------------------------- envpool


@needs_envpool
def test_envpool_backend_matches_gymnasium_backend() -> None:
    """Breakout, 2 copies, noop_max=1 (the one setting where both backends' no-op RNGs agree), life loss and
    clipping on, random actions until both copies' games are over: observations, rewards, terminations,
    truncations, final observations and game scores are identical."""
    gym_envs = factory("Breakout", noop_max=1).make_vector(2)
    pool_envs = factory("Breakout", noop_max=1, backend="envpool").make_vector(2)
    a, _ = gym_envs.reset(seed=[3, 4])
    b, _ = pool_envs.reset(seed=[3, 4])
    assert np.array_equal(a, b)
    games: dict[str, list] = {"gym": [], "pool": []}
    life_losses = 0
    for step, action in enumerate(actions(500, 4, batch=2)):
        ra, rb = gym_envs.step(action), pool_envs.step(action)
        for x, y in zip(ra[:4], rb[:4], strict=True):
            assert np.array_equal(x, y), f"step {step}"
        done = ra[2] | ra[3]
        for i in np.flatnonzero(done):
            assert np.array_equal(ra[4]["final_obs"][i], rb[4]["final_obs"][i])
        games["gym"] += games_from_infos(ra[4], done)
        games["pool"] += games_from_infos(rb[4], done)
        life_losses += int(done.sum())
        if len(games["gym"]) >= 2:
            break
    assert len(games["gym"]) >= 2 and games["gym"] == games["pool"]
    assert life_losses > len(games["gym"])
    gym_envs.close()
    pool_envs.close()


@needs_envpool
def test_envpool_refuses_what_it_cannot_do() -> None:
    for overrides, key in [({"max_pool": False}, "max_pool"), ({"noop_max": 0}, "noop_max"),
                           ({"kwargs": {"mode": 1}}, "kwargs")]:
        with pytest.raises(ConfigError, match=rf"env\.{key}"):
            factory("Pong", backend="envpool", **overrides)
