"""Config key -> kernel wiring: each config key that changes an algorithm's arithmetic reaches the kernel it names.

The kernels themselves (TD error, GAE, the PPO loss, the SAC losses, ...) have worked examples in their own tests;
these tests check the road between a key and the kernel, which those cannot see. Every agent is built the way a
user builds one, ``rlrun.make_agent(algo, obs_space, action_space, **config_keys)``; its weights are then set by
hand so that every network output is a number written below, and one fixed small batch goes through the agent's
own ``update``. Each key is tested both ways: the hand-worked result with the key on, and a different hand-worked
result with it off, so a key that is dropped on the way (a hard-coded argument, a wrong variable) fails here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import rollout_form

import rlrun
from rlrun import spaces as sp
from rlrun.execution.rollout import Rollout

# ---------------------------------------------------------------------------------------------------- DQN
# Observations are one-hot vectors e_0..e_3 of Box(4,); the Q-network is a one-layer MLP (hidden_sizes=[4], relu)
# set to the identity, so its features are the observation itself and Q(e_i, a) is entry [i, a] of the head's
# table. Two actions.

DQN_OBS = sp.Box(0.0, 1.0, (4,), np.float32)
E = np.eye(4, dtype=np.float32)


def dqn_agent(**keys):  # noqa: ANN003, ANN201 - the Agent of rlrun.make_agent
    keys = {"hidden_sizes": [4], "activation": "relu", "batch_size": 2, "learning_starts": 0, **keys}
    return rlrun.make_agent("dqn", DQN_OBS, sp.Discrete(2), seed=0, **keys)


def set_identity_torso(q: torch.nn.Module) -> None:
    """The MLP torso's one Linear layer (4 -> 4) the identity: its relu features are the one-hot observation."""
    (linear,) = [m for m in q.torso.modules() if isinstance(m, torch.nn.Linear)]
    linear.weight.copy_(torch.eye(4))
    linear.bias.zero_()


def set_q_table(q: torch.nn.Module, table: list[list[float]]) -> None:
    """Q(e_i, a) = table[i][a]: the torso's one Linear layer the identity, the plain head's Linear the table."""
    with torch.no_grad():
        set_identity_torso(q)
        q.head.linear.weight.copy_(torch.tensor(table).T)
        q.head.linear.bias.zero_()


# Online and target tables: at the next observations e_2, e_3 the two networks prefer different actions, so
# selecting the bootstrap action with the online network (double Q) gives another target than with the target one.
ONLINE = [[1.0, 2.0], [3.0, 4.0], [5.0, 0.0], [7.0, 1.0]]
TARGET = [[0.0, 0.0], [0.0, 0.0], [10.0, 20.0], [30.0, 40.0]]


def dqn_batch(discount: list[float]) -> dict[str, torch.Tensor]:
    """Two transitions e_0 -a=0-> e_2 and e_1 -a=1-> e_3 with rewards [1, 0.5]."""
    return {"obs": torch.tensor(E[[0, 1]]), "action": torch.tensor([0, 1]), "reward": torch.tensor([1.0, 0.5]),
            "next_obs": torch.tensor(E[[2, 3]]), "discount": torch.tensor(discount)}


@pytest.mark.parametrize("double_q,expected", [(True, [9.0, -3.5]), (False, [18.0, -3.5])])
def test_dqn_double_q_selects_the_bootstrap_action_with_the_online_network(double_q, expected):
    """Q(s, a) = [Q(e_0, 0), Q(e_1, 1)] = [1, 4]; discounts [0.9, 0] (the second transition terminal).

    double_q=true: a' = argmax of the online Q at e_2 ([5, 0]) = 0 and at e_3 ([7, 1]) = 0, so the bootstrap is
    Q_target(e_2, 0) = 10 and Q_target(e_3, 0) = 30: y = [1 + 0.9 * 10, 0.5 + 0] = [10, 0.5], TD = y - Q = [9, -3.5].
    double_q=false: a' = argmax of the target Q ([10, 20], [30, 40]) = 1: y = [1 + 0.9 * 20, 0.5] = [19, 0.5],
    TD = [18, -3.5]. (The agent's ``update`` returns the TD errors of the batch, before its gradient step.)
    """
    agent = dqn_agent(double_q=double_q)
    set_q_table(agent.component.q, ONLINE)
    set_q_table(agent.component.target_q, TARGET)
    info = agent.component.update(dqn_batch([0.9, 0.0]))
    torch.testing.assert_close(info["td_error"], torch.tensor(expected))


@pytest.mark.parametrize("huber_delta,expected", [(1.0, 5.75), (None, 23.3125)])
def test_dqn_huber_delta_chooses_the_loss_of_the_td_errors(huber_delta, expected):
    """The double-Q batch above, TD errors [9, -3.5]. huber_delta=1: the Huber loss, |td| - 0.5 beyond 1:
    mean(8.5, 3.0) = 5.75. huber_delta=null: the squared loss 0.5 td^2: mean(40.5, 6.125) = 23.3125."""
    agent = dqn_agent(huber_delta=huber_delta)
    set_q_table(agent.component.q, ONLINE)
    set_q_table(agent.component.target_q, TARGET)
    info = agent.component.update(dqn_batch([0.9, 0.0]))
    assert float(info["loss"]) == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("dueling", [True, False])
def test_dqn_dueling_head_combines_value_and_advantages(dueling):
    """dueling=true: Q(s, a) = V(s) + A(s, a) - mean_a A(s, a) (Wang et al. 2016, Eq. 9). With the features e_i,
    V(e_i) = v_i and A(e_i, .) = the table row: V = [1, 2, 0, 0], A(e_0) = [1, 3] (mean 2), A(e_1) = [4, 0] (mean 2)
    -> Q(e_0) = 1 + [1, 3] - 2 = [0, 2], Q(e_1) = 2 + [4, 0] - 2 = [4, 0].
    dueling=false: the plain head's table, the same numbers read as Q: Q(e_0) = [1, 3], Q(e_1) = [4, 0]."""
    agent = dqn_agent(dueling=dueling)
    q = agent.component.q
    advantages = [[1.0, 3.0], [4.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
    if dueling:
        assert not hasattr(q.head, "linear")
        with torch.no_grad():
            set_identity_torso(q)
            q.head.value.weight.copy_(torch.tensor([[1.0, 2.0, 0.0, 0.0]]))
            q.head.value.bias.zero_()
            q.head.advantage.weight.copy_(torch.tensor(advantages).T)
            q.head.advantage.bias.zero_()
        expected = [[0.0, 2.0], [4.0, 0.0]]
    else:
        set_q_table(q, advantages)
        expected = [[1.0, 3.0], [4.0, 0.0]]
    with torch.no_grad():
        torch.testing.assert_close(q(torch.tensor(E[[0, 1]])), torch.tensor(expected))


def stored_discounts(memory) -> dict[int, float]:  # noqa: ANN001 - a ReplayMemory
    """The discount stored with each transition, keyed by its observation's index i (obs = e_i): a sample of
    64 from two records draws both (the chance of missing one is 2 * 2^-64)."""
    records = memory.sample(64)
    index = records["obs"].argmax(dim=1)
    return {int(i): float(d) for i, d in zip(index, records["discount"], strict=True)}


def test_dqn_one_step_discount_is_zero_at_a_termination_and_gamma_at_a_truncation():
    """observe() two transitions (gamma = 0.5): e_0 -> e_2 *terminated*, e_1 -> e_3 *truncated* (a time limit:
    the state e_3 still has value). Stored discounts: gamma * (1 - terminated) = [0, 0.5].

    Through the update (double Q, online = target = ONLINE, actions [0, 0], rewards [1, 1]):
    e_0: y = 1 + 0 * ... = 1, TD = 1 - Q(e_0, 0) = 1 - 1 = 0;
    e_1: a' = argmax Q(e_3) = argmax [7, 1] = 0, y = 1 + 0.5 * 7 = 4.5, TD = 4.5 - Q(e_1, 0) = 4.5 - 3 = 1.5.
    (Discounting the terminated step by gamma would give TD = 1 + 0.5 * 5 - 1 = 2.5 there; cutting the truncated
    one would give 1 - 3 = -2.)"""
    agent = dqn_agent(gamma=0.5)
    set_q_table(agent.component.q, ONLINE)
    set_q_table(agent.component.target_q, ONLINE)
    agent.observe(E[[0, 1]], np.array([0, 0]), np.array([1.0, 1.0]), E[[2, 3]], np.array([True, False]),
                  np.array([False, True]))
    memory = agent.component.memory
    assert stored_discounts(memory) == {0: 0.0, 1: 0.5}
    batch = memory.sample(64)
    info = agent.component.update(batch)
    expected = torch.where(batch["obs"].argmax(dim=1) == 0, 0.0, 1.5)
    torch.testing.assert_close(info["td_error"], expected)


@pytest.mark.parametrize("n_step", [1, 3])
def test_dqn_n_step_stores_n_step_rewards_and_discounts(n_step):
    """One env copy, gamma = 0.5, rewards 1, 2, 4 on steps e_0 -> e_1 -> e_2 -> e_3, the episode terminating at the
    third step.

    n_step=3: the window from e_0 holds all three steps and ends in the termination: reward 1 + 0.5 * 2 + 0.25 * 4
    = 3, discount 0 (no bootstrap). The windows from e_1 (2 + 0.5 * 4 = 4) and e_2 (4) also end there, discount 0.
    n_step=1: one record per step, rewards [1, 2, 4], discounts [0.5, 0.5, 0] (only the last step terminated).
    """
    agent = dqn_agent(gamma=0.5, n_step=n_step)
    rewards = [1.0, 2.0, 4.0]
    for t in range(3):
        agent.observe(E[[t]], np.array([0]), np.array([rewards[t]]), E[[t + 1]], np.array([t == 2]),
                      np.array([False]))
    records = agent.component.memory.sample(64)
    by_obs = {int(i): (float(r), float(d)) for i, r, d in
              zip(records["obs"].argmax(dim=1), records["reward"], records["discount"], strict=True)}
    if n_step == 3:
        assert by_obs == {0: (3.0, 0.0), 1: (4.0, 0.0), 2: (4.0, 0.0)}
    else:
        assert by_obs == {0: (1.0, 0.5), 1: (2.0, 0.5), 2: (4.0, 0.0)}


@pytest.mark.parametrize("tau,every", [(1.0, 2), (0.25, 1000)])
def test_dqn_target_network_sync_follows_tau_and_target_update_every(tau, every):
    """tau=1, target_update_every=2: hard copies; after the first gradient step the target is still the initial
    TARGET table, after the second it equals the online network.
    tau=0.25: Polyak averaging after every step, target' = 0.75 * target + 0.25 * online (target_update_every is
    ignored): with the target TARGET and the online head weights W after the step, the head's weight is
    0.75 * TARGET^T + 0.25 * W."""
    agent = dqn_agent(tau=tau, target_update_every=every, lr=0.1)
    dqn = agent.component
    set_q_table(dqn.q, ONLINE)
    set_q_table(dqn.target_q, TARGET)
    target = torch.tensor(TARGET).T
    dqn.update(dqn_batch([0.9, 0.0]))
    online = dqn.q.head.linear.weight.detach()
    assert not torch.equal(online, torch.tensor(ONLINE).T)  # the step moved the online network
    if tau == 1.0:
        torch.testing.assert_close(dqn.target_q.head.linear.weight, target)
        dqn.update(dqn_batch([0.9, 0.0]))
        assert dqn.target_q.state_dict().keys() == dqn.q.state_dict().keys()
        for key, value in dqn.q.state_dict().items():
            torch.testing.assert_close(dqn.target_q.state_dict()[key], value, rtol=0, atol=0)
    else:
        torch.testing.assert_close(dqn.target_q.head.linear.weight, 0.75 * target + 0.25 * online)


# ---------------------------------------------------------------------------------------------------- PPO
# Box(1,) observations, two actions. Every weight is zeroed, so both torsos output 0 and the network is its head
# biases: pi = softmax(policy bias), V = value bias for every observation. The agent's update recomputes the values
# and GAE under these weights; with num_epochs=1 and a minibatch of the whole rollout, the reported losses are those
# of the one gradient step, at these weights.


def ppo_agent(value: float, logits: tuple[float, float] = (0.0, 0.0), **keys):  # noqa: ANN003, ANN201
    keys = {"num_epochs": 1, "minibatch_size": 2, "clip_eps": 0.2, **keys}
    return on_policy_agent("ppo", value, logits, **keys)


def on_policy_agent(algo: str, value: float, logits: tuple[float, float], **keys):  # noqa: ANN003, ANN201
    keys = {"hidden_sizes": [2], "anneal_lr": False, "normalize_advantage": False, "ent_coef": 0.0, "vf_coef": 0.5,
            **keys}
    agent = rlrun.make_agent(algo, sp.Box(-1.0, 1.0, (1,), np.float32), sp.Discrete(2), seed=0, **keys)
    set_head_biases(agent.component.network, value, logits)
    return agent


def set_head_biases(network: torch.nn.Module, value: float, logits: tuple[float, float]) -> None:
    """Every weight zero, so the actor-critic network is its head biases: pi = softmax(logits), V = value."""
    with torch.no_grad():
        for p in network.parameters():
            p.zero_()
        network.head.policy.bias.copy_(torch.tensor(logits))
        network.head.value.bias.fill_(value)


def ppo_rollout(rewards, terminated, truncated, actions=None) -> Rollout:  # noqa: ANN001
    """A time-major ``[T, B]`` rollout with these rewards and flags, taken by a uniform behaviour policy
    (log-prob ln 1/2); the observations do not matter (V is the same for all)."""
    rewards = torch.tensor(rewards, dtype=torch.float32)
    T, B = rewards.shape
    actions = torch.zeros(T, B, dtype=torch.int64) if actions is None else torch.tensor(actions)
    obs = torch.arange(T * B + B, dtype=torch.float32).reshape(T + 1, B, 1) / 10.0
    return rollout_form({"obs": obs[:-1], "next_obs": obs[1:], "actions": actions, "rewards": rewards,
                         "terminated": torch.tensor(terminated), "truncated": torch.tensor(truncated),
                         "log_prob": torch.full((T, B), math.log(0.5))})


@pytest.mark.parametrize("vf_clip_eps,expected", [(0.2, 2.31), (None, 1.75)])
def test_ppo_value_clipping_is_around_the_rollouts_values(vf_clip_eps, expected):
    """Two epochs on one minibatch of T = 2 terminal steps (rewards [1, 3]), V = 0: returns R = [1, 3]. Adam
    (lr 1, no gradient clipping) moves each parameter with a gradient by lr on its first step, and only the value
    bias has a value-loss gradient (the torso's features are 0), dL/dV = 0.5 * mean(V - R) = -1 < 0: V becomes 1
    (to 1e-5, Adam's eps).

    Epoch 1, V = 0 = V_old: L_value = 0.5 * mean((0 - 1)^2, (0 - 3)^2) = 2.5, clipped or not.
    Epoch 2, V = 1: unclipped 0.5 * mean(0^2, 2^2) = 1.0. Clipped around the rollout's values V_old = 0 with
    eps = 0.2: V_clip = 0.2, 0.5 * mean(max(0, 0.64), max(4, 7.84)) = 0.5 * 4.24 = 2.12.
    Reported (mean of the two steps): clipped (2.5 + 2.12) / 2 = 2.31; unclipped (2.5 + 1) / 2 = 1.75.
    (Clipping around the returns instead, V_clip = R + clamp(V - R, -0.2, 0.2), never exceeds the unclipped
    loss: 1.75 again.)"""
    agent = ppo_agent(0.0, num_epochs=2, lr=1.0, max_grad_norm=None, vf_clip_eps=vf_clip_eps)
    info = agent.component.update(ppo_rollout([[1.0], [3.0]], [[True], [True]], [[False], [False]]))
    assert info["gradient_steps"] == 2
    assert float(info["loss/value"]) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("normalize,expected", [(True, math.sqrt(2) / 4), (False, -1.35)])
def test_ppo_advantage_normalisation(normalize, expected):
    """pi = softmax([0, ln 3]) = [1/4, 3/4]; actions [1, 0] by a uniform behaviour policy: ratios [1.5, 0.5].
    Two terminal steps, rewards [1, 3], V = 0: A = [1, 3].

    normalize_advantage=false: surrogates min(1.5 * 1, 1.2 * 1) = 1.2 and min(0.5 * 3, 0.8 * 3) = 1.5;
    L_policy = -(1.2 + 1.5) / 2 = -1.35.
    normalize_advantage=true: A = (A - 2) / std (unbiased std sqrt 2) = [-1/sqrt 2, 1/sqrt 2]:
    min(1.5 * -0.7071, 1.2 * -0.7071) = -1.0607 and min(0.5 * 0.7071, 0.8 * 0.7071) = 0.3536;
    L_policy = -(-1.0607 + 0.3536) / 2 = 0.3536 = sqrt(2) / 4."""
    agent = ppo_agent(0.0, (0.0, math.log(3.0)), normalize_advantage=normalize)
    info = agent.component.update(ppo_rollout([[1.0], [3.0]], [[True], [True]], [[False], [False]], [[1], [0]]))
    assert float(info["loss/policy"]) == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("bootstrap,expected_value,expected_policy",
                         [(True, 0.111328125, -0.40625), (False, 0.0625, -0.25)])
def test_ppo_truncation_bootstrapping(bootstrap, expected_value, expected_policy):
    """T = 2 steps of B = 2 copies, rewards 1, V = 1 everywhere, gamma = 0.5, lambda = 0.5, pi = the uniform
    behaviour policy (ratios 1, so L_policy = -mean A). Copy 0 is *truncated* at step 1; copy 1 is both
    terminated and truncated there (termination wins: no bootstrap, whatever bootstrap_truncated says).

    bootstrap_truncated=true, copy 0: delta_1 = 1 + 0.5 * V(s'_1) - 1 = 0.5, delta_0 = 1 + 0.5 * 1 - 1 = 0.5,
    A = [0.5 + 0.25 * 0.5, 0.5] = [0.625, 0.5], R = A + V = [1.625, 1.5].
    Copy 1 (and copy 0 with bootstrap_truncated=false): delta_1 = 1 - 1 = 0, A = [0.5, 0], R = [1.5, 1].
    L_value = 0.5 * mean (V - R)^2: on: 0.5 * (0.390625 + 0.25 + 0.25 + 0) / 4 = 0.111328125;
    off: 0.5 * (0.25 + 0 + 0.25 + 0) / 4 = 0.0625. L_policy: on -(0.625 + 0.5 + 0.5 + 0) / 4 = -0.40625;
    off -(0.5 + 0 + 0.5 + 0) / 4 = -0.25.
    """
    agent = ppo_agent(1.0, gamma=0.5, gae_lambda=0.5, minibatch_size=4, bootstrap_truncated=bootstrap)
    info = agent.component.update(ppo_rollout([[1.0, 1.0], [1.0, 1.0]], [[False, False], [False, True]],
                                              [[False, False], [True, True]]))
    assert float(info["loss/value"]) == pytest.approx(expected_value, abs=1e-6)
    assert float(info["loss/policy"]) == pytest.approx(expected_policy, abs=1e-6)


# ---------------------------------------------------------------------------------------------------- A2C
# A2C computes its advantages in its own one-pass loss (rlrun/algos/a2c.py), apart from PPO's: the same keys again.
# Its policy loss is -mean(log pi(a) * A), one gradient step per update.


@pytest.mark.parametrize("normalize,expected", [(True, math.log(3.0) / (2 * math.sqrt(2))),
                                                (False, -(math.log(0.75) + 3 * math.log(0.25)) / 2)])
def test_a2c_advantage_normalisation(normalize, expected):
    """pi = [1/4, 3/4], actions [1, 0]: log pi = [ln 0.75, ln 0.25]. Two terminal steps, rewards [1, 3], V = 0:
    A = [1, 3]. normalize_advantage=false: L_policy = -(ln 0.75 * 1 + ln 0.25 * 3) / 2 = 2.2233.
    normalize_advantage=true: A = [-1/sqrt 2, 1/sqrt 2]: L_policy = (ln 0.75 - ln 0.25) / (2 sqrt 2) = 0.3884."""
    agent = on_policy_agent("a2c", 0.0, (0.0, math.log(3.0)), normalize_advantage=normalize)
    info = agent.component.update(ppo_rollout([[1.0], [3.0]], [[True], [True]], [[False], [False]], [[1], [0]]))
    assert float(info["loss/policy"]) == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("bootstrap,expected_value,expected_policy",
                         [(True, 0.111328125, math.log(2) * 0.40625), (False, 0.0625, math.log(2) * 0.25)])
def test_a2c_truncation_bootstrapping_and_gae_lambda(bootstrap, expected_value, expected_policy):
    """PPO's truncation case above (gamma = 0.5, lambda = 0.5; copy 0 truncated, copy 1 terminated and truncated):
    the same advantages and returns, so the same value loss; uniform pi, so L_policy = ln 2 * mean A:
    ln 2 * 0.40625 with bootstrap_truncated, ln 2 * 0.25 without. (lambda = 1, A2C's default, would give
    A_0 = 0.5 + 0.5 * 0.5 = 0.75 on copy 0.)"""
    agent = on_policy_agent("a2c", 1.0, (0.0, 0.0), gamma=0.5, gae_lambda=0.5, bootstrap_truncated=bootstrap)
    info = agent.component.update(ppo_rollout([[1.0, 1.0], [1.0, 1.0]], [[False, False], [False, True]],
                                              [[False, False], [True, True]]))
    assert float(info["loss/value"]) == pytest.approx(expected_value, abs=1e-6)
    assert float(info["loss/policy"]) == pytest.approx(expected_policy, abs=1e-6)


# ---------------------------------------------------------------------------------------------------- TRPO


@pytest.mark.parametrize("normalize,expected", [(True, 0.0), (False, -2.0)])
def test_trpo_advantage_normalisation(normalize, expected):
    """TRPO normalises the advantages itself before its surrogate -mean(ratio * A), reported at the old policy
    (ratio 1): two terminal steps, rewards [1, 3], V = 0, A = [1, 3]. normalize_advantage=false: -(1 + 3) / 2 = -2;
    true: A = [-1/sqrt 2, 1/sqrt 2], mean 0."""
    agent = rlrun.make_agent("trpo", sp.Box(-1.0, 1.0, (1,), np.float32), sp.Discrete(2), seed=0, hidden_sizes=[2],
                             normalize_advantage=normalize)
    set_head_biases(agent.component.network, 0.0, (0.0, math.log(3.0)))
    info = agent.component.update(ppo_rollout([[1.0], [3.0]], [[True], [True]], [[False], [False]], [[1], [0]]))
    assert float(info["loss/policy"]) == pytest.approx(expected, abs=1e-6)


# ---------------------------------------------------------------------------------------------------- IMPALA, APPO
# IMPALA folds the truncation bootstrap into V-trace's rewards in its own targets_inputs (rlrun/algos/impala.py),
# which APPO shares. The rollout is on-policy (the behaviour log-prob is the current uniform policy's, so every
# importance ratio is 1) and V-trace's targets are then the lambda = 1 returns.


def vtrace_agent(algo: str, logits: tuple[float, float] = (0.0, 0.0), **keys):  # noqa: ANN003, ANN201
    agent = rlrun.make_agent(algo, sp.Box(-1.0, 1.0, (1,), np.float32), sp.Discrete(2), seed=0,
                             **{"hidden_sizes": [2], "gamma": 0.5, "ent_coef": 0.0, "vf_coef": 0.5, **keys})
    set_head_biases(agent.component.network, 1.0, logits)
    return agent


@pytest.mark.parametrize("algo,keys", [("impala", {}), ("appo", {"num_epochs": 1})])
def test_vtrace_targets_bootstrap_a_truncation_but_not_a_termination(algo, keys):
    """T = 2 steps of B = 2 copies, rewards 1, V = 1 everywhere, gamma = 0.5, ratios 1. Copy 0 is truncated at
    step 1, copy 1 both terminated and truncated there (termination wins).

    Copy 0: vs_1 = 1 + 0.5 * V(s'_1) = 1.5 (the truncation bootstraps, the trace is cut); vs_0 = 1 + 0.5 * 1.5 =
    1.75. Copy 1: vs_1 = 1, vs_0 = 1 + 0.5 * 1 = 1.5. Mean vs = (1.75 + 1.5 + 1.5 + 1) / 4 = 1.4375 (bootstrapping
    copy 1 as well would give 1.625, cutting copy 0's bootstrap 1.4375 - 0.125 = 1.3125). (APPO: one epoch, so
    the targets are those at these weights.)"""
    agent = vtrace_agent(algo, **keys)
    rollout = ppo_rollout([[1.0, 1.0], [1.0, 1.0]], [[False, False], [False, True]], [[False, False], [True, True]])
    info = agent.component.update(rollout)
    assert float(info["vtrace/vs_mean"]) == pytest.approx(1.4375, abs=1e-6)


@pytest.mark.parametrize("use_kl_loss,expected_kl", [(True, 0.5 * math.log(4.0 / 3.0)), (False, 0.0)])
def test_appo_kl_loss_adds_the_behaviour_kl(use_kl_loss, expected_kl):
    """Behaviour logits [0, 0] (uniform), current pi = softmax([0, ln 3]) = [1/4, 3/4]:
    KL(behaviour || pi) = 0.5 ln(0.5 / 0.25) + 0.5 ln(0.5 / 0.75) = 0.5 ln(4/3) = 0.1438. With use_kl_loss and
    kl_coef = 1 it is added to the loss: loss = L_policy + 0.5 L_value + KL (ent_coef 0); without, loss =
    L_policy + 0.5 L_value."""
    agent = vtrace_agent("appo", (0.0, math.log(3.0)), use_kl_loss=use_kl_loss, kl_coef=1.0, num_epochs=1)
    rollout = ppo_rollout([[1.0], [3.0]], [[True], [True]], [[False], [False]], [[1], [0]])
    rollout.extras["behaviour_logits"] = torch.zeros(2, 1, 2)
    info = agent.component.update(rollout)
    assert info["loss"] - info["loss/policy"] - 0.5 * info["loss/value"] == pytest.approx(expected_kl, abs=1e-6)
    if use_kl_loss:
        assert info["policy/kl"] == pytest.approx(expected_kl, abs=1e-6)


# ---------------------------------------------------------------------------------------------------- SAC
# Box(1,) observations and actions; the agent's update is one critic, actor and temperature step, then the target
# critic's Polyak step. A batch of 8 transitions with fixed numbers is enough: which numbers the networks give
# does not matter for these keys.

SAC_SPACE = sp.Box(-1.0, 1.0, (1,), np.float32)


def sac_agent(**keys):  # noqa: ANN003, ANN201
    keys = {"hidden_sizes": [8], "batch_size": 8, "learning_starts": 0, **keys}
    return rlrun.make_agent("sac", SAC_SPACE, SAC_SPACE, seed=0, **keys)


def sac_batch() -> dict[str, torch.Tensor]:
    x = torch.linspace(-1.0, 1.0, 8).unsqueeze(1)
    return {"obs": x, "action": x.flip(0) * 0.5, "reward": torch.ones(8), "next_obs": x.roll(1, 0),
            "discount": torch.full((8,), 0.99)}


@pytest.mark.parametrize("learn_alpha,target_entropy,expected_log_alpha",
                         [(True, 10.0, math.log(0.5) + 0.1), (True, -10.0, math.log(0.5) - 0.1),
                          (False, 10.0, math.log(0.5))])
def test_sac_entropy_tuning_moves_alpha_towards_the_target_entropy(learn_alpha, target_entropy, expected_log_alpha):
    """init_alpha = 0.5, alpha_lr = 0.1. The temperature loss' gradient in log alpha is -alpha (E[log pi] + H):
    a one-dimensional tanh-squashed Gaussian has an entropy below ln 2, so with the target H = 10 the gradient is
    negative and with H = -10 positive (|E[log pi]| is far below 10 for the initial policy, std about 1). Adam's first
    step moves log alpha by lr against the gradient's sign: ln 0.5 + 0.1 and ln 0.5 - 0.1.
    learn_alpha=false: alpha stays init_alpha = 0.5 and there is no temperature loss."""
    agent = sac_agent(init_alpha=0.5, alpha_lr=0.1, learn_alpha=learn_alpha, target_entropy=target_entropy)
    sac = agent.component
    info = sac.update(sac_batch())
    assert float(info["policy/alpha"]) == pytest.approx(0.5)
    assert ("loss/temperature" in info) == learn_alpha
    assert float(sac.temperature.log_alpha.detach()) == pytest.approx(expected_log_alpha, abs=1e-5)
    assert float(sac.update(sac_batch())["policy/alpha"]) == pytest.approx(math.exp(expected_log_alpha), abs=1e-5)


@pytest.mark.parametrize("tau", [1.0, 0.25])
def test_sac_target_critic_is_polyak_averaged_with_tau(tau):
    """After one update: target' = (1 - tau) * target + tau * critic', critic' the critic after its step (the
    target starts as a copy of the critic, so with tau = 1 it is the new critic, with 0.25 a quarter of the way)."""
    agent = sac_agent(tau=tau)
    sac = agent.component
    before = {k: v.clone() for k, v in sac.target_critic.state_dict().items()}
    sac.update(sac_batch())
    after = sac.critic.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the critic's step moved it
    for key, value in sac.target_critic.state_dict().items():
        torch.testing.assert_close(value, (1 - tau) * before[key] + tau * after[key])


def test_sac_one_step_discount_is_zero_at_a_termination_and_gamma_at_a_truncation():
    """observe() two transitions with gamma = 0.5: the first terminated, the second truncated (a time limit: its
    final observation still has value). Stored discounts gamma * (1 - terminated) = [0, 0.5], told apart by their
    observations (-0.5 and 0.5)."""
    agent = sac_agent(gamma=0.5)
    agent.observe(np.array([[-0.5], [0.5]], np.float32), np.zeros((2, 1), np.float32), np.array([1.0, 1.0]),
                  np.zeros((2, 1), np.float32), np.array([True, False]), np.array([False, True]))
    records = agent.component.memory.sample(64)
    by_obs = {float(o): float(d) for o, d in zip(records["obs"][:, 0], records["discount"], strict=True)}
    assert by_obs == {-0.5: 0.0, 0.5: 0.5}
