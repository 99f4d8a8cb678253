"""TRPO (rlrun/algos/trpo.py): the surrogate and the KL against hand-worked numbers, one update worked out by hand,
the actor/critic split of the parameters, weights and checkpoints, determinism, learning CartPole-v1, and the CLI
on the local and Ray executors."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import only_summary, rollout_form, run_rlrun

from rlrun import spaces as sp
from rlrun.algos.trpo import TRPO, TRPOAgent, mean_kl, trpo_surrogate_loss
from rlrun.algos.trpo_config import TRPOConfig
from rlrun.app.run import run_experiment
from rlrun.components.distributions import Categorical, DiagGaussian, make_distribution
from rlrun.components.optimizers import TRPOStep
from rlrun.components.optimizers.adam import Adam
from rlrun.components.testing import ComponentTest
from rlrun.config import compose
from rlrun.errors import ConfigError
from rlrun.execution.rollout import Rollout
from rlrun.registry import registry

from .test_ppo import (
    CARTPOLE_OBS,
    PENDULUM,
    _random_rollout,
    _random_steps,
    _tiny_agent,
    _tiny_rollout,
    assert_same_state,
    build_algo,
    params_of,
)

SMALL = ["algo=trpo", "executor.num_envs=2", "algo.rollout_steps=32", "algo.hidden_sizes=[16]", "algo.vf_epochs=2",
         "algo.vf_minibatch_size=32"]

# ---------------------------------------------------------------------------------------------- the math


def test_surrogate_hand_worked():
    """log pi = ln[0.5, 0.25], log pi_old = ln[0.25, 0.5], A = [2, -1]: ratios [2, 0.5], per item
    -[2 * 2, 0.5 * (-1)] = [-4, 0.5]; mean -1.75, sum -3.5. At pi = pi_old (ratios 1) the gradient with respect to
    log pi is the policy gradient -A / n = [-1, 0.5]; the advantages and old log-probabilities get none."""
    logp = torch.log(torch.tensor([0.5, 0.25]))
    old = torch.log(torch.tensor([0.25, 0.5]))
    adv = torch.tensor([2.0, -1.0])
    torch.testing.assert_close(trpo_surrogate_loss(logp, old, adv, "none"), torch.tensor([-4.0, 0.5]))
    assert float(trpo_surrogate_loss(logp, old, adv)) == pytest.approx(-1.75)
    assert float(trpo_surrogate_loss(logp, old, adv, "sum")) == pytest.approx(-3.5)
    at_old = old.clone().requires_grad_(True)
    adv_leaf, old_leaf = adv.clone().requires_grad_(True), old.clone().requires_grad_(True)
    trpo_surrogate_loss(at_old, old_leaf, adv_leaf).backward()
    torch.testing.assert_close(at_old.grad, torch.tensor([-1.0, 0.5]))
    assert old_leaf.grad is None and adv_leaf.grad is None
    with pytest.raises(ValueError, match="one shape"):
        trpo_surrogate_loss(logp, old, adv[:1])


def test_mean_kl_hand_worked():
    """Categorical, 2 states: old [1/4, 3/4] vs new [1/2, 1/2]: KL = 0.25 ln(0.25 / 0.5) + 0.75 ln(0.75 / 0.5)
    = -0.1732868 + 0.3040988 = 0.1308120; in the second state old = new: 0. Mean 0.0654060 (the direction matters:
    KL(new || old) = 0.5 ln 2 + 0.5 ln(2/3) = 0.1438410).
    Gaussian, one 2-D state: old N([0, 0], I), new N([1, 0], diag(e^2, 1)) (log-std [1, 0]):
    dim 0: ln(e / 1) + (1 + 1) / (2 e^2) - 1/2 = 1 + 1 / e^2 - 0.5 = 0.6353353; dim 1: 0. Sum 0.6353353."""
    half, quarter = math.log(0.5), torch.log(torch.tensor([0.25, 0.75]))
    old = Categorical(torch.stack([quarter, quarter]))
    new = Categorical(torch.stack([torch.tensor([half, half]), quarter]))
    assert float(mean_kl(old, new)) == pytest.approx(0.1308120 / 2, abs=1e-6)
    assert float(mean_kl(new, old)) == pytest.approx(0.1438410 / 2, abs=1e-6)
    g_old = DiagGaussian(torch.zeros(1, 2), torch.zeros(1, 2))
    g_new = DiagGaussian(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]]))
    assert float(mean_kl(g_old, g_new)) == pytest.approx(0.5 + math.exp(-2.0), abs=1e-6)


TINY = dict(hidden_sizes=[2], orthogonal_init=False, gamma=0.5, gae_lambda=0.5, normalize_advantage=False,
            cg_damping=0.0, max_kl=0.01, vf_epochs=1, vf_minibatch_size=2, lr=1e-3)


@pytest.mark.parametrize("likely", [1, 0], ids=["full-step", "one-backtrack"])
def test_trpo_update_hand_worked(likely):
    """The tiny batch of test_ppo: every torso weight zero (features 0), V = 1; actions [1, 0], A = [0.25, -1],
    R = [1.25, 0] (gamma = lambda = 0.5). Policy softmax(b): ``likely`` = 1: b = [0, ln 3], p = [1/4, 3/4];
    ``likely`` = 0: b = [ln 3, 0], p = [3/4, 1/4]. Damping 0, max_kl 0.01, backtrack ratio 0.8.

    Surrogate before (ratios 1): -mean(A) = 0.375; entropy -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.5623351.
    Only b moves (the features are 0). With e_a - p = [-p0, p0] (a = 1) and [p1, -p1] (a = 0), the gradient is
        g = -1/2 [0.25 (e_1 - p) - (e_0 - p)] = c [1, -1],   c = (0.25 p0 + p1) / 2 = 13/32 resp. 7/32.
    Fisher in b (both states alike): F = diag(p) - p p^T = 3/16 [[1, -1], [-1, 1]]; g is an eigenvector (eigenvalue
    3/8), so CG solves F x = g in one iteration: x = 8/3 g. Scaled so 0.5 s^T F s = 0.01:
    |s| = sqrt(0.02 / (3/8)) = 0.2309401 along [-1, 1] / sqrt 2, i.e. b += f * 0.1632993 * [-1, 1] at fraction f;
    predicted improvement -g . s = c sqrt 2 * 0.2309401 = 0.1326807 resp. 0.0714435.

    likely = 1, f = 1: p' = [0.1938460, 0.8061540], true KL(p || p') = 0.25 ln(0.25 / p'0) + 0.75 ln(0.75 / p'1)
        = 0.0094480 <= 0.01; surrogate -1/2 [p'1 / 0.75 * 0.25 - p'0 / 0.25] = 0.2533329, improvement 0.1216671
        >= 0.1 * 0.1326807: accepted at once.
    likely = 0, f = 1: p' = [0.6839563, 0.3160437], KL = 0.0105295 > 0.01: rejected (the quadratic model of the KL
        undershoots here); f = 0.8: b moves by 0.1306395, p' = [0.6979033, 0.3020967], KL = 0.0066729, surrogate
        0.3142205, improvement 0.0607795 >= 0.1 * 0.8 * 0.0714435: accepted after one backtrack.
    Value: one Adam step (minibatch 2) on 0.5 mean (V - R)^2 = 0.5 ((1 - 1.25)^2 + 1^2) / 2 = 0.265625; its gradient
    in the value bias is mean(V - R) = 0.375 > 0, so Adam's first step, lr * g / (|g| + eps), lowers it by
    lr * 0.375 / (0.375 + 1e-5) = 0.99997 lr (to float32 precision around 1: 1e-7).
    """
    agent = _tiny_agent(TRPOAgent, TRPOConfig(**TINY))
    if likely == 0:
        with torch.no_grad():
            agent.network.head.policy.bias.copy_(torch.tensor([math.log(3.0), 0.0]))
    before = params_of(agent.network)
    info = agent.update(_tiny_rollout())
    fraction, expected, kl, improvement = ((1.0, 0.1326807, 0.0094480, 0.1216671) if likely == 1
                                           else (0.8, 0.0714435, 0.0066729, 0.0607795))
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert info["loss/policy"] == pytest.approx(0.375, abs=1e-6)
    assert info["policy/entropy"] == pytest.approx(entropy, abs=1e-6)
    assert info["policy/expected_improvement"] == pytest.approx(expected, abs=1e-5)
    assert info["policy/surrogate_improvement"] == pytest.approx(improvement, abs=1e-5)
    assert info["policy/kl"] == pytest.approx(kl, abs=1e-6)
    assert info["policy/step_fraction"] == pytest.approx(fraction) and info["policy/line_search_accepted"] == 1.0
    assert info["policy/line_search_backtracks"] == (0.0 if likely == 1 else 1.0)
    assert info["loss/value"] == pytest.approx(0.265625, abs=1e-6)
    assert info["gradient_steps"] == 2  # one value step + the policy step
    after = params_of(agent.network)
    torch.testing.assert_close(after["head.policy.bias"] - before["head.policy.bias"],
                               fraction * torch.tensor([-0.1632993, 0.1632993]), atol=1e-5, rtol=0)
    assert float(before["head.value.bias"] - after["head.value.bias"]) == pytest.approx(1e-3 * 0.375 / (0.375 + 1e-5),
                                                                                        abs=1e-7)
    for name in before:  # nothing else moves: the features are zero, so their weights get no gradient
        if name not in ("head.policy.bias", "head.value.bias"):
            assert torch.equal(before[name], after[name]), name


def test_policy_unchanged_when_the_line_search_accepts_nothing():
    """The one-backtrack case above with a single try (line_search_max_backtracks = 1): the full step's KL 0.0105295
    exceeds max_kl 0.01, so nothing is accepted: the policy keeps its parameters (fraction 0, KL 0, surrogate
    improvement 0), while the value function still takes its Adam step."""
    agent = _tiny_agent(TRPOAgent, TRPOConfig(**{**TINY, "line_search_max_backtracks": 1}))
    with torch.no_grad():
        agent.network.head.policy.bias.copy_(torch.tensor([math.log(3.0), 0.0]))
    before = params_of(agent.network)
    info = agent.update(_tiny_rollout())
    assert info["policy/line_search_accepted"] == 0.0 and info["policy/step_fraction"] == 0.0
    assert info["policy/kl"] == 0.0 and info["policy/surrogate_improvement"] == 0.0
    after = params_of(agent.network)
    assert torch.equal(after["head.policy.bias"], before["head.policy.bias"])
    assert float(after["head.value.bias"]) < float(before["head.value.bias"])


# ------------------------------------------------------------------------- the policy's module, from config


@pytest.mark.parametrize("name", ["trpo", "natural_gradient", "multi_step", "evolution_strategies"])
def test_policy_update_is_the_registry_module_the_config_names(name):
    """``algo.policy_update`` names an optimizer module of the registry: the agent's ``policy_optimizer`` is an
    instance of exactly that entry, attached to the actor's parameters only (a policy step never moves the
    critic), and it declares the inputs its ``step`` takes."""
    agent = _tiny_agent(TRPOAgent, TRPOConfig(**{**TINY, "policy_update": name}))
    module = agent.policy_optimizer
    assert type(module) is registry.get("optimizer", name)
    assert set(module.step_inputs) <= {"loss_fn", "kl_fn", "batch"}
    before = params_of(agent.network)
    agent.update(_tiny_rollout())
    after = params_of(agent.network)
    assert not torch.equal(before["head.policy.bias"], after["head.policy.bias"]), name
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    actor = {n for n, p in agent.network.named_parameters() if any(p is q for q in agent.actor_parameters())}
    if name == "evolution_strategies":  # gradient-free: its noise moves every actor parameter
        assert moved - {"head.value.bias", "head.value.weight"} - set(actor) == set()
    else:  # zero features: only b gets a gradient (and the critic's value bias its Adam step)
        assert moved == {"head.policy.bias", "head.value.bias"}, moved


def test_natural_gradient_takes_the_full_step_the_line_search_would_shorten():
    """The hand-worked batch above, ``likely`` = 0: TRPO's full step overshoots the KL (0.0105295 > 0.01) and its
    line search backtracks to 0.8; ``policy_update=natural_gradient`` (TNPG) takes the full step regardless:
    b += 0.1632993 [-1, 1], p' = [0.6839563, 0.3160437], KL 0.0105295, predicted improvement 0.0714435, and no
    line-search metrics."""
    agent = _tiny_agent(TRPOAgent, TRPOConfig(**{**TINY, "policy_update": "natural_gradient"}))
    with torch.no_grad():
        agent.network.head.policy.bias.copy_(torch.tensor([math.log(3.0), 0.0]))
    before = params_of(agent.network)
    info = agent.update(_tiny_rollout())
    after = params_of(agent.network)
    torch.testing.assert_close(after["head.policy.bias"] - before["head.policy.bias"],
                               torch.tensor([-0.1632993, 0.1632993]), atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.softmax(after["head.policy.bias"], 0), torch.tensor([0.6839563, 0.3160437]),
                               atol=1e-6, rtol=0)
    assert info["policy/kl"] == pytest.approx(0.0105295, abs=1e-6)
    assert info["policy/expected_improvement"] == pytest.approx(0.0714435, abs=1e-5)
    assert info["loss/policy"] == pytest.approx(0.375, abs=1e-6)
    assert "policy/step_fraction" not in info and "policy/line_search_accepted" not in info
    assert info["gradient_steps"] == 2


def test_multi_step_one_epoch_over_the_rollout_is_one_adam_step_of_the_policy_gradient():
    """``policy_update=multi_step`` with one epoch over the whole rollout (VPG): one Adam step of ``policy_lr`` on
    the surrogate. Its gradient in b is c [1, -1] (c = 13/32, ``likely`` = 1 above), so Adam's first step,
    lr * g / (|g| + eps), moves b by lr * [-1, 1] (to 1e-4 relative: eps 1e-5 against |g| 0.41); the surrogate
    before is -mean(A) = 0.375."""
    lr = 0.05
    agent = _tiny_agent(TRPOAgent, TRPOConfig(**{**TINY, "policy_update": "multi_step", "policy_lr": lr}))
    before = params_of(agent.network)
    info = agent.update(_tiny_rollout())
    after = params_of(agent.network)
    torch.testing.assert_close(after["head.policy.bias"] - before["head.policy.bias"], torch.tensor([-lr, lr]),
                               atol=lr * 1e-4, rtol=0)
    assert info["loss/policy"] == pytest.approx(0.375, abs=1e-6)
    assert info["policy/surrogate_improvement"] > 0 and info["policy/kl"] > 0
    assert info["gradient_steps"] == 2  # one value step + one policy step


def test_evolution_strategies_improves_the_surrogate_without_gradients():
    """``policy_update=evolution_strategies``: the policy moves by rank-weighted noise, no gradient reaches the
    actor's parameters (their ``.grad`` stays None), and over five updates on the same rollout (the old policy
    re-taken each time) each step lowers the surrogate it started from, as the hand-worked batch's only signal
    (b) asks: p(a = 1) rises."""
    agent = _tiny_agent(TRPOAgent, TRPOConfig(**{**TINY, "policy_update": "evolution_strategies", "es_sigma": 0.1,
                                                 "es_lr": 0.1}))
    p1 = []
    for _ in range(5):
        info = agent.update(_tiny_rollout())
        assert info["policy/surrogate_improvement"] > 0, info
        p1.append(float(torch.softmax(agent.network.head.policy.bias.detach(), 0)[1]))
    assert p1 == sorted(p1) and p1[0] > 0.5
    assert all(p.grad is None for p in agent.actor_parameters())


@pytest.mark.parametrize("name, extra", [("natural_gradient", []), ("evolution_strategies", []),
                                         ("multi_step", ["algo.policy_lr=0.01"])])
def test_each_policy_update_learns_cartpole(tmp_path: Path, name: str, extra: list[str]):
    """Seeded, as test_learns_cartpole: mean return >= 195 within 60k env steps (measured: TNPG 14.3k, ES on the
    surrogate 26.6k, VPG with Adam 0.01 14.3k env steps; TRPO's default 12.3k)."""
    cfg = compose(["algo=trpo", f"algo.policy_update={name}", *extra, "executor.num_envs=8", "seed=0",
                   "stop.env_steps=60000", "stop.episode_return_mean=195", "logger=none", "export.formats=[]",
                   "checkpoint.at_end=false"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary


# ---------------------------------------------------------------------------------------------- the agent


def _flat_policy(agent: TRPOAgent, obs: torch.Tensor):  # noqa: ANN202 - a distribution
    """The agent's policy on ``obs`` now, as a distribution over frozen copies of its parameters."""
    with torch.no_grad():  # copies: a Gaussian's log-std is a view of the parameter the update changes in place
        params = agent.network.get_policy(obs)
        params = tuple(p.clone() for p in params) if isinstance(params, tuple) else params.clone()
    return make_distribution(agent.action_space, params)


@pytest.mark.parametrize("actions", [sp.Discrete(2), sp.Box(-2.0, 2.0, (1,), np.float32)], ids=["discrete", "box"])
def test_update_built_alone_stays_in_the_trust_region(actions):
    """The agent built alone from spaces, its update run under ComponentTest's trace (it calls only its own
    sub-components). The policy step moves the actor's parameters (Box: the log-std too), the Adam state covers the
    critic's only; the KL it reports is the true mean KL(pi_old || pi_new) on the rollout, within max_kl; the
    surrogate improved; gradient steps = vf_epochs * ceil(T * B / vf_minibatch_size) + 1 = 3 * 2 + 1."""
    cfg = TRPOConfig(hidden_sizes=[8], vf_epochs=3, vf_minibatch_size=32, max_kl=0.02)
    agent = TRPOAgent(cfg)
    obs_space = CARTPOLE_OBS if isinstance(actions, sp.Discrete) else PENDULUM.observation_space
    test = ComponentTest(agent, {"obs": obs_space, "actions": actions})
    assert isinstance(agent.policy_optimizer, TRPOStep) and isinstance(agent.value_optimizer, Adam)
    actor, critic = agent.actor_parameters(), agent.critic_parameters()
    assert {id(p) for p in actor} | {id(p) for p in critic} == {id(p) for p in agent.network.parameters()}
    if isinstance(actions, sp.Box):
        assert id(agent.network.head.log_std) in {id(p) for p in actor}
    rollout = _rollout_for(agent, obs_space, T=16, B=4)
    obs = rollout.obs.reshape(64, -1)
    old = _flat_policy(agent, obs)
    info = test.call("update", batch=rollout, check_output=False)
    assert {c.callee for c in test.calls} >= {"trpo_agent", "network", "policy_optimizer"}
    kl = float(mean_kl(old, _flat_policy(agent, obs)))
    assert info["policy/kl"] == pytest.approx(kl, rel=1e-4) and 0 < kl <= cfg.max_kl
    assert info["policy/line_search_accepted"] == 1.0 and info["policy/surrogate_improvement"] > 0
    assert info["gradient_steps"] == 3 * 2 + 1
    adam = agent.torch_optimizer()
    assert {id(p) for p in adam.state} == {id(p) for p in critic}
    assert all(int(s["step"]) == 6 for s in adam.state.values())


def _rollout_for(agent: TRPOAgent, obs_space: sp.Space, T: int, B: int, seed: int = 0) -> Rollout:
    """A rollout of random observations and actions sampled from the agent (CartPole: test_ppo's, rewards 1;
    otherwise standard-normal rewards and a few truncations)."""
    if obs_space is CARTPOLE_OBS:
        return _random_rollout(agent, T=T, B=B, seed=seed)
    rng = np.random.default_rng(seed)
    obs = torch.as_tensor(sp.sample(obs_space, (T + 1, B), rng))
    with torch.no_grad():
        actions, extras = agent.get_actions(obs[:-1].reshape(T * B, -1))
    return rollout_form({"obs": obs[:-1], "next_obs": obs[1:], "actions": actions.reshape(T, B, -1),
                         "raw_action": extras["raw_action"].reshape(T, B, -1),
                         "rewards": torch.as_tensor(rng.normal(size=(T, B))),
                         "terminated": torch.zeros(T, B, dtype=torch.bool),
                         "truncated": torch.as_tensor(rng.random((T, B)) < 0.1),
                         "log_prob": extras["log_prob"].reshape(T, B)})


def test_value_steps_never_move_the_policy():
    """Two copies of one agent, updated on one rollout with 1 and with 6 value epochs: the actor's parameters end
    equal (the policy step comes first and the value steps touch only the critic), the critic's differ."""
    torch.manual_seed(0)
    a = TRPOAgent(TRPOConfig(hidden_sizes=[8], vf_epochs=1)).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))
    b = TRPOAgent(TRPOConfig(hidden_sizes=[8], vf_epochs=6)).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))
    b.load_state_dict(a.state_dict())
    rollout = _random_rollout(a, T=8, B=4)
    before = [p.detach().clone() for p in a.actor_parameters()]
    a.update(rollout)
    b.update(rollout)
    assert any(not torch.equal(p, q) for p, q in zip(a.actor_parameters(), before, strict=True))
    for p, q in zip(a.actor_parameters(), b.actor_parameters(), strict=True):
        assert torch.equal(p, q)
    assert any(not torch.equal(p, q) for p, q in zip(a.critic_parameters(), b.critic_parameters(), strict=True))


def test_observe_then_update_equals_update_on_the_batch():
    torch.manual_seed(0)
    a = TRPOAgent(TRPOConfig(hidden_sizes=[8])).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))
    b = TRPOAgent(TRPOConfig(hidden_sizes=[8])).build(obs=CARTPOLE_OBS, actions=sp.Discrete(2))
    b.load_state_dict(a.state_dict())
    rollout = _random_steps(a, T=5, B=3)
    for t in range(5):
        a.observe(rollout["obs"][t].numpy(), rollout["actions"][t], rollout["rewards"][t].numpy(),
                  rollout["next_obs"][t].numpy(), rollout["terminated"][t].numpy(), rollout["truncated"][t].numpy(),
                  {"log_prob": rollout["log_prob"][t]})
    a.update()
    b.update(rollout_form(rollout))
    assert_same_state(params_of(a.network), params_of(b.network))


def test_rejects_other_action_spaces():
    from gymnasium.spaces import MultiDiscrete

    from rlrun.envs.gym_env import EnvSpec

    with pytest.raises(ConfigError, match="algo=trpo needs a Discrete or Box"):
        TRPO.make_agent(TRPOConfig(), EnvSpec("Fake-v0", CARTPOLE_OBS, MultiDiscrete([2, 3])), 0)


# ---------------------------------------------------------------------------------------------- plan, state


def test_state_dict_round_trip_continues_identically(tmp_path: Path):
    """2 updates, save (weights-only torch file, as checkpoints are), load into an algorithm built with another
    seed: same parameters, counters, Adam moments and minibatch generator, so one more update on one rollout gives
    identical states. 2 updates of 32 x 2 = 64 env steps, each 2 value epochs of 2 minibatches + 1 policy step."""
    a, b = build_algo(SMALL, seed=0), build_algo(SMALL, seed=5)
    try:
        for _ in range(2):
            a.training_step()
        torch.save(a.state_dict(), tmp_path / "state.pt")
        b.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
        assert (b.env_steps, b.updates, b.gradient_steps) == (128, 2, 2 * (2 * 2 + 1))
        rollout = _random_rollout(a.agent, T=32, B=2, seed=7)
        for x in (a, b):
            x.agent.update(rollout)
        assert_same_state(a.state_dict(), b.state_dict())
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_same_seed_same_parameters(env_id):
    """executor=local, the same seed and config twice: identical parameters after K = 3 updates (Discrete and Box
    actions); another seed gives other parameters."""
    runs = []
    for seed in (0, 0, 1):
        algo = build_algo([*SMALL, f"env.id={env_id}"], seed=seed)
        try:
            for _ in range(3):
                algo.training_step()
            runs.append(params_of(algo.agent.network))
        finally:
            algo.stop()
    assert_same_state(runs[0], runs[1])
    assert any(not torch.equal(runs[0][k], runs[2][k]) for k in runs[0])


def test_policy_factory_pickles_and_builds_an_acting_policy():
    algo = build_algo(SMALL)
    try:
        policy = pickle.loads(pickle.dumps(algo.policy_factory))(1)
        assert isinstance(policy, TRPOAgent) and policy.built
        policy.set_weights(algo.agent.get_weights())
        obs = torch.as_tensor(sp.sample(CARTPOLE_OBS, (4,), 0))
        torch.testing.assert_close(policy.get_actions(obs, explore=False), algo.agent.get_actions(obs, explore=False))
    finally:
        algo.stop()




def test_graph(capsys):
    from rlrun.app.graph import main

    main(["algo=trpo"])
    out = capsys.readouterr().out
    assert out.startswith("# trpo on CartPole-v1")
    for line in ("trpo_agent [TRPOAgent]", "policy_optimizer [TRPOStep]", "natural_gradient [NaturalGradient]",
                 "line_search [LineSearch]", "critic_torso [MLP]"):
        assert line in out, line


# ---------------------------------------------------------------------------------------------- learning, CLI


def test_learns_cartpole(tmp_path: Path):
    """Seeded: mean return >= 195 over the last 20 episodes within 40k env steps with 8 env copies (the run stops
    as soon as it gets there: 12.3k env steps, ~2 s; seeds 0-9 took 11.3k-24.6k env steps, 1.3-2.6 s)."""
    cfg = compose(["algo=trpo", "executor.num_envs=8", "seed=0", "stop.env_steps=40000",
                   "stop.episode_return_mean=195", "logger=none", "export.formats=[]", "checkpoint.at_end=false"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["stop_reason"] == "episode_return_mean", summary
    assert summary["episode_return_mean"] >= 195


def test_cli_local_run_writes_summary_and_exports(workdir: Path):
    proc = run_rlrun(["algo=trpo", "stop.env_steps=1024", "executor.num_envs=4", "algo.rollout_steps=64",
                      "logger=none"], workdir, check=True)
    summary = only_summary(workdir)
    assert summary["algo"] == "trpo" and summary["stop_reason"] == "env_steps", proc.stderr
    assert summary["env_steps"] == 1024 and summary["error"] is None and summary["episodes"] > 0
    assert Path(summary["checkpoint"]).exists()
    policy = torch.jit.load(summary["export"][0])
    assert policy(torch.as_tensor(sp.sample(CARTPOLE_OBS, (3,), 0))).shape == (3,)


def test_cli_ray_run_writes_summary(workdir: Path):
    """executor=ray: 2 worker actors of 2 env copies, 4 updates of 64 x 4 env steps; the run starts and shuts down
    its own Ray cluster."""
    proc = run_rlrun(["algo=trpo", "executor=ray", "executor.num_workers=2", "executor.num_envs_per_worker=2",
                      "executor.num_cpus=2", "stop.env_steps=1024", "algo.rollout_steps=64", "logger=none",
                      "export.formats=[]"], workdir, check=True)
    summary = only_summary(workdir)
    assert summary["algo"] == "trpo" and summary["stop_reason"] == "env_steps", proc.stderr
    assert summary["env_steps"] == 1024 and summary["error"] is None and summary["episodes"] > 0
    assert "Traceback" not in proc.stderr
