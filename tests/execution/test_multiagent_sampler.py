"""The joint multi-agent sampler alone, on a PettingZoo ParallelEnv whose every number is known in advance: columns
per (copy, agent), agents that leave early and appear late, final observations, obs[T], episodes and counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces as gs
from pettingzoo import ParallelEnv

from rlrun.envs.pettingzoo_env import MultiAgentSpec
from rlrun.execution.multiagent_sampler import MultiAgentSampler, RandomPolicy


class Countdown(ParallelEnv):
    """Agents a and b from the reset, c from step 2; a terminates after its 3rd step, b and c are truncated at step 5
    (the episode's end). Observation of agent i at step t: [t, i] (t counts env steps of the episode, the reset is
    0); reward of an action: action + 0.1 * i."""

    metadata = {"name": "countdown_v0"}
    possible_agents = ["a", "b", "c"]

    def observation_space(self, agent):  # noqa: ANN001, ANN201
        return gs.Box(-100, 100, (2,), np.float32)

    def action_space(self, agent):  # noqa: ANN001, ANN201
        return gs.Discrete(2)

    def reset(self, seed=None, options=None):  # noqa: ANN001, ANN201
        self.t = 0
        self.agents = ["a", "b"]
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([self.t, self.possible_agents.index(agent)], np.float32)

    def step(self, actions):  # noqa: ANN001, ANN201
        self.t += 1
        rewards = {a: float(actions[a]) + 0.1 * self.possible_agents.index(a) for a in actions}
        term = {a: a == "a" and self.t == 3 for a in actions}
        trunc = {a: self.t == 5 for a in actions}
        obs = {a: self._obs(a) for a in actions}
        if self.t == 2:
            obs["c"] = self._obs("c")  # c appears: it acts from the next step
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        if self.t == 2:
            self.agents.append("c")
        return obs, rewards, term, trunc, {a: {} for a in obs}


class Factory:
    spec = MultiAgentSpec("countdown_v0", ("a", "b", "c"), {a: gs.Box(-100, 100, (2,), np.float32) for a in "abc"},
                          {a: gs.Discrete(2) for a in "abc"})

    def make(self) -> Countdown:
        return Countdown()


class Ones:
    """Always action 1, and records a per-row extra (its observation's t) as an on-policy learner would."""

    def get_actions(self, obs: torch.Tensor, explore: bool = True):  # noqa: ANN201
        return torch.ones(obs.shape[0], dtype=torch.int64), {"log_prob": obs[:, 0].clone()}


def rounded(episodes: list[tuple[str, float, int, str]], pid: str) -> list[tuple[float, int]]:
    """The episodes of policy ``pid``, returns rounded, sorted."""
    return sorted((round(r, 6), n) for p, r, n, _ in episodes if p == pid)


def sampler(mapping: dict[str, str], collect: set[str], num_envs: int = 1) -> MultiAgentSampler:
    policies = {pid: Ones() for pid in set(mapping.values())}
    space = Factory.spec.observation_spaces["a"]
    return MultiAgentSampler(Factory(), num_envs, 0, policies, mapping, {p: space for p in policies}, collect)


def test_one_policy_for_all_agents_gets_a_column_per_copy_and_agent_advancing_only_when_its_agent_acts() -> None:
    s = sampler({"a": "p", "b": "p", "c": "p"}, {"p"}, num_envs=2)
    assert s.columns["p"] == [(0, "a"), (0, "b"), (0, "c"), (1, "a"), (1, "b"), (1, "c")]
    batch = s.sample("p", 3)
    assert batch.obs.shape == (4, 6, 2) and batch.actions.shape == (3, 6)
    # a acts at env steps 0, 1, 2 (terminated at its 3rd); b at 0..4; c from env step 2 (its reset obs is [2, 2]).
    # Three steps of every column needed five env steps (c's third step is env step 4).
    np.testing.assert_array_equal(batch.obs[:3, 0, 0], [0, 1, 2])  # a: t of the obs it acted on
    np.testing.assert_array_equal(batch.obs[:3, 2], [[2, 2], [3, 2], [4, 2]])  # c: from its appearance
    np.testing.assert_array_equal(batch.terminated[:, 0], [False, False, True])  # a ends at its 3rd step
    np.testing.assert_array_equal(batch.truncated[:, 2], [False, False, True])  # c is truncated at env step 5
    np.testing.assert_allclose(batch.rewards[:, 1], [1.1, 1.1, 1.1])  # b: action 1 + 0.1 * 1
    np.testing.assert_allclose(batch.rewards[:, 2], [1.2, 1.2, 1.2])
    # Final observations, t-major then column: step 2 of a ([3, 0]) in copy 0, then copy 1; c's at step 2 ([5, 2]).
    assert list(batch.final_index()) == [2 * 6 + 0, 2 * 6 + 2, 2 * 6 + 3, 2 * 6 + 5]
    np.testing.assert_array_equal(batch.final_obs, [[3, 0], [5, 2], [3, 0], [5, 2]])
    # obs[T]: the next step's observation where a column goes on (b: env step 3), a reset observation where its
    # copy restarted (c: the episode ended at env step 5 and the copies reset)
    np.testing.assert_array_equal(batch.obs[3, 1], [3, 1])
    np.testing.assert_array_equal(batch.obs[3, 0], [0, 0])  # a: the copy restarted after env step 5
    np.testing.assert_array_equal(batch.extras["log_prob"][:, 0], [0, 1, 2])  # the extras follow the column
    # b's 4th and 5th steps (env steps 3, 4) wait in its queue; a and c start the next episode's columns
    assert len(s.queues[(0, "b")]) == 2 and len(s.queues[(0, "a")]) == 0
    assert s.take_env_steps() == 2 * (3 + 5 + 3)  # agent steps of both copies
    episodes = s.take_episodes()
    assert rounded(episodes, "p") == sorted([(3.0, 3), (5.5, 5), (3.6, 3)] * 2)  # b: 5 steps of 1.1


def test_queued_steps_of_another_policy_wait_for_its_own_request() -> None:
    s = sampler({"a": "p", "b": "q", "c": "q"}, {"p", "q"})
    first = s.sample("p", 2)  # two env steps: b stepped twice, c not yet there
    assert first.obs.shape == (3, 1, 2) and s.queued("q") == 0 and len(s.queues[(0, "b")]) == 2
    batch = s.sample("q", 2)  # c needs two steps of its own: env steps 2 and 3
    np.testing.assert_array_equal(batch.obs[:2, 0, 0], [0, 1])  # b: its first two steps, kept from before
    np.testing.assert_array_equal(batch.obs[:2, 1, 0], [2, 3])
    np.testing.assert_array_equal(batch.obs[2, 0], [2, 1])  # b goes on from its third step's observation
    assert s.queued("q") == 0 and len(s.queues[(0, "b")]) == 2


def test_untrained_policies_act_and_count_episodes_but_keep_no_steps() -> None:
    s = sampler({"a": "p", "b": "r", "c": "r"}, {"p"})
    s.sample("p", 4)  # a's 3 steps end its episode at env step 3; its 4th step is in the second episode
    assert all(len(s.queues[k]) == 0 for k in [(0, "b"), (0, "c")])
    episodes = s.take_episodes()
    assert rounded(episodes, "p") == [(3.0, 3)] and rounded(episodes, "r") == [(3.6, 3), (5.5, 5)]
    assert [(p, a) for p, _, _, a in episodes] == [("p", "a"), ("r", "b"), ("r", "c")]  # in the order they ended


def test_random_policy_draws_valid_actions_from_its_own_seeded_stream() -> None:
    a, b = RandomPolicy(gs.Discrete(3), seed=7), RandomPolicy(gs.Discrete(3), seed=7)
    obs = torch.zeros(50, 4)
    x, y = a.get_actions(obs), b.get_actions(obs)
    assert torch.equal(x, y) and x.shape == (50,) and set(x.tolist()) == {0, 1, 2}


@pytest.mark.parametrize("num_steps", [1, 4])
def test_sampling_is_deterministic_for_a_seed(num_steps: int) -> None:
    runs = []
    for _ in range(2):
        policies = {"p": RandomPolicy(gs.Discrete(2), seed=3)}
        space = Factory.spec.observation_spaces["a"]
        s = MultiAgentSampler(Factory(), 2, 5, policies, dict.fromkeys("abc", "p"), {"p": space}, {"p"})
        runs.append([s.sample("p", num_steps) for _ in range(3)])
    for x, y in zip(*runs, strict=True):
        np.testing.assert_array_equal(x.actions, y.actions)
        np.testing.assert_array_equal(x.obs, y.obs)



class FirstLegal:
    """The first legal square of a tic-tac-toe board (its action mask)."""

    def get_actions(self, obs: dict, explore: bool = True) -> torch.Tensor:
        return obs["action_mask"].to(torch.int64).argmax(-1)


def test_turn_based_game_completes_each_step_at_the_agents_next_turn_with_the_reward_gathered() -> None:
    """tic-tac-toe, both players taking the first free square: player_1 plays 0, 2, 4, 6 and wins on the diagonal
    2-4-6 at its 4th move; player_2 plays 1, 3, 5. Each player's last step ends its episode with +1 / -1, the
    reward arriving (for player_2) at the other player's move."""
    from rlrun.config import PettingZooEnvConfig
    from rlrun.envs.pettingzoo_env import PettingZooEnvFactory

    factory = PettingZooEnvFactory(PettingZooEnvConfig(id="pettingzoo.classic.tictactoe_v3"))
    assert factory.api == "aec" and factory.spec.agents == ("player_1", "player_2")
    space = factory.spec.observation_spaces["player_1"]
    s = MultiAgentSampler(factory, 1, 0, {"x": FirstLegal(), "o": FirstLegal()},
                          {"player_1": "x", "player_2": "o"}, {"x": space, "o": space}, {"x", "o"})
    x = s.sample("x", 4)
    np.testing.assert_array_equal(x.actions[:, 0], [0, 2, 4, 6])
    np.testing.assert_array_equal(x.rewards[:, 0], [0, 0, 0, 1])
    np.testing.assert_array_equal(x.terminated[:, 0], [False, False, False, True])
    assert list(x.final_index()) == [3]
    np.testing.assert_array_equal(x.final_obs["action_mask"][0], [0, 0, 0, 0, 0, 0, 0, 1, 1])  # squares 7, 8 free
    np.testing.assert_array_equal(x.obs["action_mask"][0, 0], np.ones(9))  # its first turn: an empty board
    o = s.sample("o", 3)
    np.testing.assert_array_equal(o.actions[:, 0], [1, 3, 5])
    np.testing.assert_array_equal(o.rewards[:, 0], [0, 0, -1])
    np.testing.assert_array_equal(o.terminated[:, 0], [False, False, True])
    assert s.take_env_steps() == 7  # the game's 7 moves: the end completed both players' last steps at once
    assert rounded(s.take_episodes(), "x") == [(1.0, 4)]


def test_agents_that_die_mid_episode_end_their_own_columns() -> None:
    """Knights-archers-zombies (PettingZoo butterfly): knights and archers killed by zombies leave the env before
    its episode ends; their columns end with a termination and wait for the next episode, the others go on."""
    from rlrun.config import PettingZooEnvConfig
    from rlrun.envs.pettingzoo_env import PettingZooEnvFactory

    factory = PettingZooEnvFactory(PettingZooEnvConfig(id="pettingzoo.butterfly.knights_archers_zombies_v11",
                                                       kwargs={"max_cycles": 150}))
    agents = list(factory.spec.agents)
    space = factory.spec.observation_spaces[agents[0]]
    s = MultiAgentSampler(factory, 2, 0, {"p": RandomPolicy(factory.spec.action_spaces[agents[0]], 1)},
                          dict.fromkeys(agents, "p"), {"p": space}, {"p"})
    batches = [s.sample("p", 50) for _ in range(8)]
    episodes = s.take_episodes()
    lengths = {n for _, _, n, _ in episodes}
    assert min(lengths) < 150 and 150 in lengths  # some agents died before the time limit, some lived to it
    died = [n for _, _, n, _ in episodes if n < 150]
    assert sum(int(b.terminated.sum()) for b in batches) >= len(died)  # each death ends its column's episode
    for b in batches:
        assert b.obs.shape == (51, 2 * len(agents), *space.shape)
        assert len(b.final_index()) == int(b.done.sum()) == len(b.final_obs)
