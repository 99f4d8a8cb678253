"""EpisodeRecorder (rlrun/execution/dataset_recorder.py) alone, on hand-made rollouts: whole episodes assembled per
env copy across rollouts, closed with their real final observations; the env-step budget of recorded starts;
actions kept in the Box bounds; its checkpoint state (parts written, later parts deleted on load)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlrun.execution.dataset_recorder import EpisodeRecorder
from rlrun.execution.sample_batch import SampleBatch


def rollout(obs: list[list[float]], actions: list[list[float]], rewards: list[list[float]],
            terminated: list[list[bool]], truncated: list[list[bool]], finals: list[float]) -> SampleBatch:
    """A ``T x B`` rollout of scalar observations (``obs`` is ``[T + 1][B]``); ``finals``: the final observations
    of the episodes that ended, in t-major order."""
    o = np.asarray(obs, np.float32)[..., None]
    return SampleBatch(o, np.asarray(actions, np.float32)[..., None], np.asarray(rewards, np.float32),
                       np.asarray(terminated), np.asarray(truncated),
                       np.asarray(finals, np.float32).reshape(-1, 1))


# Copy 0: an episode 0 -> 1 -> terminated at step 1 (final obs 2.5); reset to 10, then 10 -> 11 (open).
# Copy 1: 20 -> 21 -> 22 -> truncated at step 2 (final obs 23.5); reset to 30.
FIRST = rollout(obs=[[0, 20], [1, 21], [10, 22], [11, 30]],
                actions=[[0.1, 0.5], [0.2, 0.6], [0.3, 0.7]],
                rewards=[[1, 5], [2, 6], [3, 7]],
                terminated=[[False, False], [True, False], [False, False]],
                truncated=[[False, False], [False, False], [False, True]],
                finals=[2.5, 23.5])
# Copy 0 goes on 11 -> 12, terminated at step 1 of this rollout (final obs 13.5); copy 1: 30 -> 31 -> 32 (open).
SECOND = rollout(obs=[[11, 30], [12, 31], [40, 32]],
                 actions=[[0.4, 0.8], [0.5, 0.9]],
                 rewards=[[4, 8], [5, 9]],
                 terminated=[[False, False], [True, False]],
                 truncated=[[False, False], [False, False]],
                 finals=[13.5])


def flat(episode: dict[str, np.ndarray]) -> dict[str, list]:
    """An episode's fields as lists (float32 values rounded to 6 decimals, to compare with the literals here)."""
    return {k: [round(x, 6) if isinstance(x, float) else x for x in np.asarray(v).reshape(-1).tolist()]
            for k, v in episode.items()}


def test_episodes_are_whole_per_copy_across_rollouts_with_their_final_observations(tmp_path: Path) -> None:
    rec = EpisodeRecorder(tmp_path / "parts")
    rec.add(FIRST, worker=0)
    rec.add(SECOND, worker=0)
    got = [flat(ep) for ep in rec.episodes()]
    assert got == [
        {"observations": [0.0, 1.0, 2.5], "actions": [0.1, 0.2], "rewards": [1.0, 2.0],
         "terminations": [False, True], "truncations": [False, False]},
        {"observations": [20.0, 21.0, 22.0, 23.5], "actions": [0.5, 0.6, 0.7], "rewards": [5.0, 6.0, 7.0],
         "terminations": [False, False, False], "truncations": [False, False, True]},
        {"observations": [10.0, 11.0, 12.0, 13.5], "actions": [0.3, 0.4, 0.5], "rewards": [3.0, 4.0, 5.0],
         "terminations": [False, False, True], "truncations": [False, False, False]},
    ]  # rollout by rollout, copy by copy; copy 1's episode from 30 is still open, so not written
    assert rec.seen == 10


def test_workers_keep_episodes_of_their_own(tmp_path: Path) -> None:
    rec = EpisodeRecorder(tmp_path / "parts")
    rec.add(FIRST, worker=0)
    rec.add(FIRST, worker=1)  # another worker's copies: their own episodes, not worker 0's continued
    assert len(list(rec.episodes())) == 4


def test_only_episodes_begun_within_the_budget_are_recorded(tmp_path: Path) -> None:
    # env steps are counted t-major over the copies: (t, b) is step seen + t * B + b
    rec = EpisodeRecorder(tmp_path / "parts", env_steps=4)
    rec.add(FIRST, worker=0)  # both copies' first episodes began at steps 0 and 1; copy 0's second at step 4
    rec.add(SECOND, worker=0)
    assert [flat(ep)["observations"][0] for ep in rec.episodes()] == [0.0, 20.0]
    rec = EpisodeRecorder(tmp_path / "parts5", env_steps=5)  # copy 0's second episode began at step 4: kept
    rec.add(FIRST, worker=0)
    rec.add(SECOND, worker=0)
    assert [flat(ep)["observations"][0] for ep in rec.episodes()] == [0.0, 20.0, 10.0]


def test_actions_are_kept_in_the_box_bounds(tmp_path: Path) -> None:
    rec = EpisodeRecorder(tmp_path / "parts", action_low=np.array([0.15]), action_high=np.array([0.55]))
    rec.add(FIRST, worker=0)
    assert [flat(ep)["actions"] for ep in rec.episodes()] == [[0.15, 0.2], [0.5, 0.55, 0.55]]


def test_a_restored_recorder_records_what_an_uninterrupted_one_does(tmp_path: Path) -> None:
    whole = EpisodeRecorder(tmp_path / "whole")
    whole.add(FIRST, worker=0)
    whole.add(SECOND, worker=0)

    rec = EpisodeRecorder(tmp_path / "run")
    rec.add(FIRST, worker=0)
    state = rec.state_dict()  # a checkpoint: the two ended episodes become part 0, copy 0's open one is in state
    assert state["parts"] == 1 and sorted(p.name for p in (tmp_path / "run").iterdir()) == ["part-00000.npz"]
    rec.add(SECOND, worker=0)
    rec.state_dict()  # an unsaved later state (an evaluation's candidate): part 1
    assert (tmp_path / "run" / "part-00001.npz").exists()

    resumed = EpisodeRecorder(tmp_path / "run")
    resumed.load_state_dict(state)  # the run resumes from the checkpoint: part 1's episode comes again
    assert not (tmp_path / "run" / "part-00001.npz").exists() and resumed.seen == 6
    resumed.add(SECOND, worker=0)
    assert [flat(ep) for ep in resumed.episodes()] == [flat(ep) for ep in whole.episodes()]
