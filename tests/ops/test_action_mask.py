"""Action masks (PettingZoo classic games' ``action_mask``) against values worked by hand, and the components that
apply them: actor-critic logits, Q-values, epsilon-greedy exploration."""

from __future__ import annotations

import numpy as np
import torch
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.actor_critic import ActorCritic
from rlrun.components.distributions import make_distribution
from rlrun.components.exploration import EpsilonGreedy
from rlrun.components.q_network import QNetwork
from rlrun.ops import apply_action_mask
from rlrun.ops.action_mask import MASKED, legal_of

OBS = sp.Dict({"observation": sp.Box(0, 1, (3, 3, 2), np.int8), "action_mask": sp.Box(0, 1, (9,), np.int8)})


def test_illegal_scores_are_masked_and_rows_without_a_mask_or_without_legal_actions_are_kept() -> None:
    scores = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    mask = torch.tensor([[1, 0, 1], [0, 0, 0], [0, 1, 0]], dtype=torch.int8)
    out = apply_action_mask(scores, {"observation": scores, "action_mask": mask})
    assert_close(out, torch.tensor([[1.0, MASKED, 3.0], [4.0, 5.0, 6.0], [MASKED, 8.0, MASKED]]))
    assert apply_action_mask(scores, scores) is scores  # no mask: unchanged
    assert legal_of(out).tolist() == [[True, False, True], [True, True, True], [False, True, False]]


def masked_obs(n: int) -> dict[str, torch.Tensor]:
    obs = sp.to_torch(OBS, sp.sample(OBS, (n,), seed=0))
    mask = torch.zeros(n, 9, dtype=torch.int8)
    mask[:, [2, 5]] = 1  # only squares 2 and 5 are free
    return {**obs, "action_mask": mask}


def test_actor_critic_gives_illegal_actions_no_probability() -> None:
    torch.manual_seed(0)
    net = ActorCritic("mlp", [16], "tanh", shared_torso=True).build(obs=OBS, actions=sp.Discrete(9))
    obs = masked_obs(64)
    dist = make_distribution(sp.Discrete(9), net.get_policy(obs))
    probs = dist.probs if hasattr(dist, "probs") else torch.softmax(net.get_policy(obs), -1)
    assert float(probs[:, [0, 1, 3, 4, 6, 7, 8]].sum()) == 0.0
    assert_close(probs[:, [2, 5]].sum(-1), torch.ones(64))
    assert set(dist.sample().tolist()) == {2, 5}
    assert torch.isfinite(dist.entropy()).all() and torch.isfinite(dist.log_prob(torch.full((64,), 2))).all()
    params, _ = net(obs)
    assert_close(params, net.get_policy(obs))


def test_q_network_and_epsilon_greedy_choose_only_legal_actions() -> None:
    torch.manual_seed(0)
    q = QNetwork("mlp", [16], "relu", dueling=False).build(obs=OBS, actions=sp.Discrete(9))
    values = q(masked_obs(200))
    assert set(values.argmax(-1).tolist()) <= {2, 5}
    q_space = sp.Box(-np.inf, np.inf, (9,), np.float32)
    explore = EpsilonGreedy(1.0, 1.0, 1).build(q=q_space, action_mask=OBS["action_mask"])
    actions = explore.get_actions(values, explore=True)  # epsilon 1: every action random, among the legal ones
    assert set(actions.tolist()) == {2, 5}
    assert len(set(explore.get_actions(torch.zeros(200, 9), explore=True).tolist())) == 9  # rows without a mask
    unmasked = EpsilonGreedy(1.0, 1.0, 1).build(q=q_space)  # built without a mask input: no row is checked
    assert len(set(unmasked.get_actions(values, explore=True).tolist())) == 9


def test_dqn_explores_among_legal_actions_where_the_observations_carry_a_mask() -> None:
    """The DQN agent builds its exploration with the mask leaf of a masked observation space and without one
    otherwise (the check per step is then skipped)."""
    from rlrun.algos.dqn import DQNAgent
    from rlrun.algos.dqn_config import DQNConfig

    cfg = DQNConfig(hidden_sizes=[16], epsilon_start=1.0, epsilon_end=1.0)
    masked = DQNAgent(cfg).build(obs=OBS, actions=sp.Discrete(9))
    assert masked.exploration.masked
    assert set(masked.get_actions(masked_obs(200), explore=True).tolist()) == {2, 5}
    plain = DQNAgent(cfg).build(obs=sp.Box(-1, 1, (4,), np.float32), actions=sp.Discrete(2))
    assert not plain.exploration.masked


def test_an_action_mask_space_must_have_one_entry_per_action() -> None:
    import pytest

    from rlrun.components.base import ComponentBuildError

    with pytest.raises(ComponentBuildError, match=r"exploration.action_mask expects one entry per action \(9\)"):
        EpsilonGreedy().build(q=sp.Box(-np.inf, np.inf, (9,), np.float32), action_mask=sp.Box(0, 1, (7,), np.int8))


def test_masked_entropy_counts_the_legal_actions_only() -> None:
    """Logits [0, 0, ln 2, 5, 5] with actions 3 and 4 masked: the legal probabilities are softmax(0, 0, ln 2) =
    (1/4, 1/4, 1/2), so H = -(2 * 1/4 ln 1/4 + 1/2 ln 1/2) = 1.5 ln 2 = 1.0397 nats; the illegal actions add
    exactly 0 (their probability underflows to 0 and p ln p is taken as 0), and the 5s they held do not count.
    Uniform over 2 legal of 5 actions: ln 2."""
    logits = torch.tensor([[0.0, 0.0, float(np.log(2.0)), 5.0, 5.0], [3.0, -1.0, 7.0, 0.5, 0.5]])
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 0, 1, 0]], dtype=torch.int8)
    masked = apply_action_mask(logits, {"action_mask": mask})
    dist = make_distribution(sp.Discrete(5), masked)
    entropy = dist.entropy()
    assert_close(entropy[0], torch.tensor(1.5 * np.log(2.0), dtype=torch.float32))
    # row 2: legal logits -1 and 0.5 -> p = (1/(1+e^1.5), e^1.5/(1+e^1.5))
    p = 1.0 / (1.0 + np.exp(1.5))
    assert_close(entropy[1], torch.tensor(-(p * np.log(p) + (1 - p) * np.log(1 - p)), dtype=torch.float32))
    uniform = make_distribution(sp.Discrete(5), apply_action_mask(torch.zeros(1, 5), {"action_mask": mask[1:]}))
    assert_close(uniform.entropy(), torch.tensor([np.log(2.0)], dtype=torch.float32))
    assert torch.isfinite(dist.log_prob(torch.tensor([2, 3]))).all()


def test_a_mask_of_the_wrong_size_is_one_line_naming_both_sizes() -> None:
    from rlrun.errors import ConfigError
    from rlrun.ops.action_mask import mask_space_of

    obs = sp.Dict({"observation": sp.Box(0, 1, (4,), np.float32), "action_mask": sp.Box(0, 1, (5,), np.int8)})
    for build in (lambda: ActorCritic("mlp", [8]).build(obs=obs, actions=sp.Discrete(4)),
                  lambda: QNetwork("mlp", [8]).build(obs=obs, actions=sp.Discrete(4)),
                  lambda: mask_space_of(obs, sp.Discrete(4), "algo.action_mask=auto")):
        try:
            build()
        except ConfigError as e:
            assert "\n" not in str(e) and "(5,)" in str(e) and "4 actions" in str(e), str(e)
        else:
            raise AssertionError("a 5-entry mask for 4 actions was accepted")
    assert mask_space_of(obs, sp.Discrete(5), "x") is obs["action_mask"]
    assert ActorCritic("mlp", [8], action_mask="off").build(obs=obs, actions=sp.Discrete(4)).masked is False


def test_action_mask_off_leaves_the_scores_unmasked() -> None:
    torch.manual_seed(0)
    on = QNetwork("mlp", [16], "relu").build(obs=OBS, actions=sp.Discrete(9))
    off = QNetwork("mlp", [16], "relu", action_mask="off").build(obs=OBS, actions=sp.Discrete(9))
    off.load_state_dict(on.state_dict())
    obs = masked_obs(32)
    assert (on(obs)[:, 0] == MASKED).all() and (off(obs) > MASKED / 2).all()
    # the mask is not a torso input: the unmasked scores do not depend on it
    assert_close(off(obs), off({**obs, "action_mask": torch.ones(32, 9, dtype=torch.int8)}))
