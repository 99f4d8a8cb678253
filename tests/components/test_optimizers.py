"""Tests of rlrun.components.optimizers: GradientStep and Synchronization (as DQN uses them), MultiStep, the TRPO
pieces (conjugate gradient, Fisher-vector products, NaturalGradient, LineSearch, TRPOStep) and EvolutionStrategies.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.losses import dqn_loss, dqn_td_error
from rlrun.components.networks import MLP
from rlrun.components.optimizers import (
    EvolutionStrategies,
    GradientStep,
    LineSearch,
    MultiStep,
    NaturalGradient,
    Synchronization,
    TRPOStep,
    centered_ranks,
    conjugate_gradient,
    fisher_vector_product,
    minibatches,
    optimizer_step,
)
from rlrun.components.testing import ComponentTest

T64 = dict(dtype=torch.float64)


def _categorical_kl(old_logits: torch.Tensor, new_logits: torch.Tensor) -> torch.Tensor:
    """Mean over states of KL(p_old || p_new) = sum_a p_old(a) (log p_old(a) - log p_new(a))."""
    old_logp, new_logp = torch.log_softmax(old_logits, -1), torch.log_softmax(new_logits, -1)
    return (old_logp.exp() * (old_logp - new_logp)).sum(-1).mean()


# ---------------------------------------------------------------------------------------------- GradientStep


@pytest.mark.parametrize("max_grad_norm, w_after", [(None, 0.8), (0.5, 0.95)])
def test_gradient_step_hand_worked(max_grad_norm, w_after):
    """SGD, lr 0.1, loss = w^2 at w = 1: grad 2; unclipped w <- 1 - 0.1 * 2 = 0.8; with max_grad_norm 0.5 the gradient
    is scaled to 0.5, w <- 1 - 0.05 = 0.95 and info["grad_norm"] is the norm before clipping, 2. info["loss"] = 1."""
    w = nn.Parameter(torch.tensor([1.0]))
    opt = GradientStep("sgd", lr=0.1, max_grad_norm=max_grad_norm).attach([w])
    info = ComponentTest(opt).call("step", lambda: ((w ** 2).sum(), {"extra": 7}))
    assert_close(w.detach(), torch.tensor([w_after]))
    assert_close(info["loss"], torch.tensor(1.0))
    assert info["extra"] == 7
    assert ("grad_norm" in info) == (max_grad_norm is not None)
    if max_grad_norm is not None:
        assert_close(info["grad_norm"], torch.tensor(2.0))


@pytest.mark.parametrize("max_grad_norm, w_after", [(None, 0.8), (0.5, 0.95)])
def test_optimizer_step_hand_worked(max_grad_norm, w_after):
    """optimizer_step on a plain torch.optim.SGD (what an agent holding its optimizer takes): lr 0.1, loss = w^2 at
    w = 1, grad 2: w <- 0.8, or with max_grad_norm 0.5 the gradient scaled to 0.5, w <- 0.95 and "grad_norm" 2
    (before clipping). A stale gradient from before is dropped, not added."""
    w = nn.Parameter(torch.tensor([1.0]))
    w.grad = torch.tensor([100.0])
    info = optimizer_step(torch.optim.SGD([w], lr=0.1), (w ** 2).sum(), max_grad_norm)
    assert_close(w.detach(), torch.tensor([w_after]))
    assert_close(info["loss"], torch.tensor(1.0))
    assert not info["loss"].requires_grad
    assert ("grad_norm" in info) == (max_grad_norm is not None)
    if max_grad_norm is not None:
        assert_close(info["grad_norm"], torch.tensor(2.0))


@pytest.mark.parametrize("n, size", [(10, 4), (6, None), (5, 16)])
def test_minibatches_partition_the_batch_and_follow_the_generator(n, size):
    """One epoch: ceil(N / size) minibatches (None: one) whose rows partition the N items, in an order the
    generator's seed and state decide."""
    batch = {"i": torch.arange(n), "nested": {"x": torch.arange(n) * 10}}
    first = list(minibatches(batch, size, torch.Generator().manual_seed(0)))
    assert len(first) == math.ceil(n / (size or n))
    assert sorted(torch.cat([mb["i"] for mb in first]).tolist()) == list(range(n))
    assert all(torch.equal(mb["nested"]["x"], mb["i"] * 10) for mb in first)
    again = list(minibatches(batch, size, torch.Generator().manual_seed(0)))
    assert all(torch.equal(a["i"], b["i"]) for a, b in zip(first, again, strict=True))


def test_gradient_step_state_round_trip():
    """Adam's moments travel in the state_dict: a copy loaded from it takes the identical next step."""
    torch.manual_seed(0)
    a, b = nn.Linear(2, 1), nn.Linear(2, 1)
    b.load_state_dict(a.state_dict())
    opt_a, opt_b = GradientStep("adam", lr=0.1).attach(a.parameters()), GradientStep("adam", lr=0.1).attach(
        b.parameters())
    x = torch.randn(4, 2)
    for _ in range(3):
        opt_a.step(lambda: (a(x).pow(2).mean(), {}))
    b.load_state_dict(a.state_dict())
    opt_b.load_state_dict(opt_a.state_dict())
    opt_a.step(lambda: (a(x).pow(2).mean(), {}))
    opt_b.step(lambda: (b(x).pow(2).mean(), {}))
    assert_close(a.weight, b.weight)


def test_synchronization_hard_and_polyak():
    """every = 2, tau = 1: target copied on calls 2 and 4 only. tau = 0.25: t <- t + 0.25 (s - t) each call,
    from t = 0, s = 1: 0.25, then 0.25 + 0.25 * 0.75 = 0.4375."""
    source, target = nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False)
    nn.init.ones_(source.weight)
    nn.init.zeros_(target.weight)
    hard = ComponentTest(Synchronization(every=2))
    assert [hard.call("step", source, target) for _ in range(4)] == [False, True, False, True]
    assert_close(target.weight, source.weight)
    nn.init.zeros_(target.weight)
    soft = Synchronization(tau=0.25)
    soft.step(source, target)
    assert_close(target.weight, torch.tensor([[0.25]]))
    soft.step(source, target)
    assert_close(target.weight, torch.tensor([[0.4375]]))


# ---------------------------------------------------------------------------------------------- callbacks


def _mlp() -> MLP:
    torch.manual_seed(0)
    return MLP([2], "tanh").build(obs=sp.Box(-1, 1, (3,), np.float32))


def _module_with(mlp: MLP, kind: str):
    if kind == "gradient_step":
        return GradientStep("sgd", lr=0.01).attach(mlp.parameters()), ()
    if kind == "multi_step":
        return MultiStep(GradientStep("sgd", lr=0.01), 1, 2).attach(mlp.parameters()), ({"x": torch.ones(3, 3)},)
    if kind == "trpo":
        return TRPOStep(max_kl=0.01).attach(mlp.parameters()), ()
    return EvolutionStrategies(population=2).attach(mlp.parameters()), ()


@pytest.mark.parametrize("kind", ["gradient_step", "multi_step", "trpo", "es"])
def test_callbacks_run_as_the_callers_code(kind):
    """A loss callable that calls another component's API is the caller's code: under a trace its calls are made by
    the caller (here the user), not by the optimizer module (which would be a boundary violation: the network is
    not the optimizer's sub-component). ComponentTest fails on any violation."""
    mlp = _mlp()
    module, extra = _module_with(mlp, kind)
    obs = torch.linspace(-1, 1, 6).reshape(2, 3)
    old = mlp(obs).detach()

    def loss_fn(*_):
        return mlp(obs).pow(2).mean(), {}

    def kl_fn():
        return _categorical_kl(old, mlp(obs))

    args = (loss_fn, kl_fn) if kind == "trpo" else (loss_fn, *extra)
    test = ComponentTest(module)
    test.call("step", *args)
    to_mlp = [c for c in test.calls if c.callee == "mlp"]
    assert to_mlp and all(c.caller == "<user>" for c in to_mlp)


# ---------------------------------------------------------------------------------------------- MultiStep


@pytest.mark.parametrize("n, minibatch, epochs", [(10, 4, 3), (8, 8, 1), (7, 1, 2), (5, 16, 2)])
def test_multi_step_uses_every_item_once_per_epoch(n, minibatch, epochs):
    """N items, minibatch size m, E epochs: E * ceil(N / m) gradient steps (e.g. 10, 4, 3 -> 3 * 3 = 9), each
    epoch's minibatches partition the N items, and the returned info is the mean over the steps."""
    net = nn.Linear(2, 1)
    module = MultiStep(GradientStep("adam", lr=1e-3), num_epochs=epochs, minibatch_size=minibatch, seed=3)
    module.attach(net.parameters())
    space = sp.Dict({"obs": sp.Box(-1, 1, (2,), np.float32), "target": sp.Box(-1, 1, (), np.float32)})
    test = ComponentTest(module, {"batch": space}, batch_shape=(n,))
    batch = test.sample("batch")
    batch["index"] = torch.arange(n)
    seen: list[torch.Tensor] = []
    losses: list[float] = []

    def loss_fn(mb):
        seen.append(mb["index"])
        loss = (net(mb["obs"]).squeeze(-1) - mb["target"]).pow(2).mean()
        losses.append(float(loss.detach()))
        return loss, {"size": float(len(mb["index"]))}

    info = test.call("step", loss_fn, batch=batch)
    per_epoch = math.ceil(n / minibatch)
    assert info["gradient_steps"] == epochs * per_epoch == len(seen)
    adam_state = module.optimizer.optimizer.state[net.weight]
    assert int(adam_state["step"]) == epochs * per_epoch
    for e in range(epochs):
        epoch = torch.cat(seen[e * per_epoch:(e + 1) * per_epoch])
        assert sorted(epoch.tolist()) == list(range(n))
    assert all(len(s) <= minibatch for s in seen)
    assert_close(info["loss"], torch.tensor(float(np.mean(losses))))
    assert_close(info["size"], torch.tensor(n * epochs / len(seen)))


def test_multi_step_shuffles_reproducibly():
    """The order depends on the seed and on the generator state, which the state_dict carries."""

    def orders(module, n=12):
        seen = []
        w = nn.Parameter(torch.zeros(()))
        module.attach([w])
        module.step(lambda mb: (seen.append(mb["i"].tolist()) or w * 0.0, {}), {"i": torch.arange(n)})
        return seen

    a, b, c = (MultiStep(GradientStep("sgd", lr=0.1), 2, 4, seed=s) for s in (0, 0, 1))
    assert orders(a) == orders(b) != orders(c)
    state = a.state_dict()
    first = orders(a)
    a.load_state_dict(state)
    assert orders(a) == first


def test_multi_step_refuses_ragged_batches():
    module = MultiStep(GradientStep("sgd"), 1, 2).attach([nn.Parameter(torch.zeros(1))])
    with pytest.raises(ValueError, match="disagree on the leading"):
        module.step(lambda mb: (torch.zeros(()), {}), {"a": torch.zeros(3), "b": torch.zeros(4)})


# ---------------------------------------------------------------------------------------------- CG and Fisher


@pytest.mark.parametrize("n", [1, 3, 6])
def test_conjugate_gradient_solves_spd_system(n):
    """A = M M^T + n I (symmetric positive definite), float64: n CG iterations solve A x = b (exact in exact
    arithmetic after n steps) like torch.linalg.solve; fewer iterations leave a larger residual (for n > 2)."""
    g = torch.Generator().manual_seed(n)
    m = torch.randn(n, n, generator=g, **T64)
    a = m @ m.T + n * torch.eye(n, **T64)
    b = torch.randn(n, generator=g, **T64)
    x = conjugate_gradient(lambda v: a @ v, b, iters=n, residual_tol=0.0)
    assert_close(x, torch.linalg.solve(a, b), rtol=1e-8, atol=1e-10)
    if n > 2:
        x2 = conjugate_gradient(lambda v: a @ v, b, iters=2, residual_tol=0.0)
        assert (a @ x2 - b).norm() > 1e3 * (a @ x - b).norm()


def test_conjugate_gradient_two_by_two_hand_worked():
    """A = [[4, 1], [1, 3]], b = [1, 2] (Wikipedia's CG example): x = A^-1 b = [1/11, 7/11] = [0.0909, 0.6364].
    Step 1: r0 = p0 = b, alpha0 = r0.r0 / p0.A p0 = 5 / 20 = 0.25, x1 = [0.25, 0.5]; step 2 lands on the solution."""
    a = torch.tensor([[4.0, 1.0], [1.0, 3.0]], **T64)
    b = torch.tensor([1.0, 2.0], **T64)
    assert_close(conjugate_gradient(lambda v: a @ v, b, iters=1), torch.tensor([0.25, 0.5], **T64))
    assert_close(conjugate_gradient(lambda v: a @ v, b, iters=2), torch.tensor([1 / 11, 7 / 11], **T64))


def _linear_policy(seed: int = 0, obs_dim: int = 2, actions: int = 3, n: int = 5):
    g = torch.Generator().manual_seed(seed)
    policy = nn.Linear(obs_dim, actions).double()
    with torch.no_grad():
        for p in policy.parameters():
            p.copy_(torch.randn(p.shape, generator=g, **T64))
    obs = torch.randn(n, obs_dim, generator=g, **T64)
    return policy, obs


@pytest.mark.parametrize("damping", [0.0, 0.1])
def test_fisher_vector_product_equals_hessian_of_kl_and_fisher(damping):
    """Linear softmax policy z = W s + b (W 3x2, b 3: 9 parameters), 5 states, KL(pi_old || pi_theta) with pi_old
    the policy at the current parameters. The Fisher-vector product must equal H v + damping v, with H the Hessian
    of the mean KL from torch.autograd.functional.hessian, and H must equal the explicit Fisher information
    F = mean_s J_s^T (diag(p_s) - p_s p_s^T) J_s, J_s = dz/dtheta = [I_3 (x) s^T, I_3] (rows of W, then b)."""
    policy, obs = _linear_policy()
    params = list(policy.parameters())
    theta0 = torch.cat([p.detach().reshape(-1) for p in params])
    old_logits = policy(obs).detach()

    def kl_of(theta):
        w, b = theta[:6].reshape(3, 2), theta[6:]
        return _categorical_kl(old_logits, obs @ w.T + b)

    hessian = torch.autograd.functional.hessian(kl_of, theta0)
    fisher = torch.zeros(9, 9, **T64)
    for s, z in zip(obs, old_logits, strict=True):
        p = torch.softmax(z, -1)
        jac = torch.cat([torch.kron(torch.eye(3, **T64), s[None, :]), torch.eye(3, **T64)], dim=1)
        fisher += jac.T @ (torch.diag(p) - torch.outer(p, p)) @ jac / len(obs)
    assert_close(hessian, fisher)
    v = torch.randn(9, generator=torch.Generator().manual_seed(1), **T64)
    fvp = fisher_vector_product(lambda: _categorical_kl(old_logits, policy(obs)), params, v, damping)
    assert_close(fvp, hessian @ v + damping * v)


def test_natural_gradient_step_meets_the_trust_region():
    """The proposed step Delta = -beta x, x = (F + lambda I)^-1 g, is scaled so 0.5 Delta^T (F + lambda I) Delta
    = max_kl, and it points downhill: expected improvement = -g . Delta > 0. NaturalGradient.step applies it."""
    policy, obs = _linear_policy(seed=2)
    params = list(policy.parameters())
    actions, adv = torch.tensor([0, 1, 2, 1, 0]), torch.tensor([1.0, -0.5, 2.0, 0.3, -1.0], **T64)
    old_logits = policy(obs).detach()
    old_logp = torch.log_softmax(old_logits, -1).gather(1, actions[:, None]).squeeze(1)

    def loss_fn():
        logp = torch.log_softmax(policy(obs), -1).gather(1, actions[:, None]).squeeze(1)
        return -(torch.exp(logp - old_logp) * adv).mean(), {}

    kl_fn = lambda: _categorical_kl(old_logits, policy(obs))  # noqa: E731
    module = NaturalGradient(max_kl=0.02, cg_iters=20, damping=0.1).attach(params)
    step, expected, info = ComponentTest(module).call("propose", loss_fn, kl_fn)
    quad = 0.5 * step.dot(fisher_vector_product(kl_fn, params, step, damping=0.1))
    assert_close(quad, torch.tensor(0.02, **T64))
    g = torch.autograd.grad(loss_fn()[0], params)
    g = torch.cat([x.reshape(-1) for x in g])
    assert_close(expected, -g.dot(step))
    assert expected > 0
    theta0 = torch.cat([p.detach().reshape(-1) for p in params])
    module.step(loss_fn, kl_fn)
    assert_close(torch.cat([p.detach().reshape(-1) for p in params]), theta0 + step)


# ---------------------------------------------------------------------------------------------- line search


def _quadratic(theta0=(1.0, 1.0)):
    theta = nn.Parameter(torch.tensor(theta0, **T64))
    return theta, (lambda: (0.5 * theta.pow(2).sum(), {}))


@pytest.mark.parametrize("scale, fraction, backtracks", [(1.0, 1.0, 0), (4.0, 0.25, 2)])
def test_line_search_on_a_quadratic(scale, fraction, backtracks):
    """L(theta) = 0.5 |theta|^2 at theta0 = [1, 1]: L = 1, g = theta0, full step = -scale * theta0,
    expected improvement of the full step = -g . step = 2 * scale; accept when actual >= 0.1 * f * expected.

    scale 1: f = 1 -> theta = 0, L = 0, actual 1 >= 0.1 * 2 = 0.2: accepted at once (0 backtracks).
    scale 4 (overshoots): f = 1 -> theta = -3 theta0, L = 9, actual -8: rejected;
        f = 0.5 -> theta = -theta0, L = 1, actual 0 < 0.1 * 0.5 * 8 = 0.4: rejected;
        f = 0.25 -> theta = 0, L = 0, actual 1 >= 0.1 * 0.25 * 8 = 0.2: accepted (2 backtracks).
    Either way the search ends at theta = 0.
    """
    theta, loss_fn = _quadratic()
    search = LineSearch(max_backtracks=10, accept_ratio=0.1, backtrack_ratio=0.5).attach([theta])
    step = -scale * theta.detach().clone()
    info = ComponentTest(search).call("step", loss_fn, step, 2.0 * scale)
    assert info["accepted"] and info["step_fraction"] == fraction and info["backtracks"] == backtracks
    assert info["loss"] == 1.0 and info["loss_after"] == 0.0
    assert_close(theta.detach(), torch.zeros(2, **T64))


def test_line_search_respects_the_kl_limit():
    """Same quadratic, full step -theta0, with KL(theta) := 0.5 |theta - theta0|^2 and max_kl = 0.3:
    f = 1: KL = 0.5 * 2 = 1.0 > 0.3, rejected although the loss improves;
    f = 0.5: KL = 0.5 * 2 * 0.25 = 0.25 <= 0.3 and L = 0.25, actual 0.75 >= 0.1 * 0.5 * 2 = 0.1: accepted."""
    theta, loss_fn = _quadratic()
    theta0 = theta.detach().clone()
    search = LineSearch().attach([theta])
    info = search.step(loss_fn, -theta0, 2.0, kl_fn=lambda: 0.5 * (theta - theta0).pow(2).sum(), max_kl=0.3)
    assert info["accepted"] and info["step_fraction"] == 0.5 and info["kl"] == 0.25
    assert_close(theta.detach(), 0.5 * theta0)


def test_line_search_restores_parameters_when_nothing_is_accepted():
    """A step uphill (+theta0; the caller wrongly claims an expected improvement of 2) never improves the loss:
    after max_backtracks = 3 tries the parameters are back at theta0."""
    theta, loss_fn = _quadratic()
    theta0 = theta.detach().clone()
    info = LineSearch(max_backtracks=3).attach([theta]).step(loss_fn, theta0.clone(), 2.0)
    assert not info["accepted"] and info["backtracks"] == 3 and info["step_fraction"] == 0.0
    assert_close(theta.detach(), theta0)


# ---------------------------------------------------------------------------------------------- TRPO


@pytest.mark.parametrize("max_kl", [0.001, 0.01, 0.05])
def test_trpo_step_improves_surrogate_within_kl(max_kl):
    """Linear softmax policy over 3 actions, 8 states, fixed actions and advantages. Surrogate
    L = -mean(exp(logp - logp_old) * A) is -mean(A) before the step (ratio 1); after one TRPO step it is lower and
    the mean KL(pi_old || pi_new) is within max_kl (and not negligible: the step uses the trust region)."""
    policy, obs = _linear_policy(seed=4, n=8)
    g = torch.Generator().manual_seed(5)
    actions = torch.randint(0, 3, (8,), generator=g)
    adv = torch.randn(8, generator=g, **T64)
    old_logits = policy(obs).detach()
    old_logp = torch.log_softmax(old_logits, -1).gather(1, actions[:, None]).squeeze(1)

    def loss_fn():
        logp = torch.log_softmax(policy(obs), -1).gather(1, actions[:, None]).squeeze(1)
        return -(torch.exp(logp - old_logp) * adv).mean(), {}

    kl_fn = lambda: _categorical_kl(old_logits, policy(obs))  # noqa: E731
    module = TRPOStep(max_kl=max_kl).attach(policy.parameters())
    before = float(loss_fn()[0].detach())
    assert before == pytest.approx(-float(adv.mean()))
    info = ComponentTest(module).call("step", loss_fn, kl_fn)
    after, kl = float(loss_fn()[0].detach()), float(kl_fn().detach())
    assert info["accepted"] and after < before
    assert info["loss_after"] == pytest.approx(after) and info["kl"] == pytest.approx(kl)
    assert 0.1 * max_kl < kl <= max_kl


# ---------------------------------------------------------------------------------------------- ES


def test_centered_ranks_hand_worked():
    """[3, 1, 2] has ranks [2, 0, 1]; / (n - 1) - 0.5 -> [0.5, -0.5, 0.0]."""
    assert_close(centered_ranks(torch.tensor([3.0, 1.0, 2.0])), torch.tensor([0.5, -0.5, 0.0]))


def test_es_single_pair_hand_worked():
    """One antithetic pair (population 2), 1-D theta = 0, loss (theta - 1)^2, sigma 0.1, lr 0.3, noise eps drawn
    from torch.Generator().manual_seed(7). If eps > 0, theta + sigma eps is nearer 1: its fitness ranks +0.5, the
    mirror -0.5, weight = 0.5 - (-0.5) = 1; if eps < 0 the weight is -1. Update:
    theta = lr * weight * eps / (2 * P * sigma) = 0.3 * |eps| / 0.2 = 1.5 |eps| (always towards 1)."""
    eps = float(torch.randn((1, 1), generator=torch.Generator().manual_seed(7)))
    theta = nn.Parameter(torch.zeros(1))
    es = EvolutionStrategies(population=2, sigma=0.1, lr=0.3, seed=7).attach([theta])
    info = es.step(lambda: ((theta - 1.0).pow(2).sum(), {}))
    assert_close(theta.detach(), torch.tensor([1.5 * abs(eps)]))
    assert_close(info["loss"], torch.tensor(1.0))


def _run_es(seed: int, steps: int = 25):
    theta = nn.Parameter(torch.zeros(5))
    target = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0])
    loss_fn = lambda: ((theta - target).pow(2).sum(), {})  # noqa: E731
    es = EvolutionStrategies(population=16, sigma=0.1, lr=0.2, seed=seed).attach([theta])
    test = ComponentTest(es)
    losses = [float(test.call("step", loss_fn)["loss"]) for _ in range(steps)]
    return theta.detach().clone(), losses + [float(loss_fn()[0].detach())]


def test_es_decreases_a_quadratic_deterministically():
    """|theta - target|^2 from theta = 0 (loss 15.25) falls below a tenth in 25 steps; same seed -> same path,
    another seed -> another path."""
    theta_a, losses = _run_es(0)
    theta_b, _ = _run_es(0)
    theta_c, _ = _run_es(1)
    assert losses[0] == pytest.approx(15.25)
    assert losses[-1] < 0.1 * losses[0]
    assert torch.equal(theta_a, theta_b) and not torch.equal(theta_a, theta_c)


def test_es_drives_a_dqn_td_loss():
    """A tiny Q-network (3 -> 8 -> 2) on a fixed batch of 32 transitions, frozen target network, double-DQN Huber TD
    loss from rlrun.components.losses; ES (no gradients) lowers the loss by a third within 40 steps."""
    torch.manual_seed(0)
    q = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    target = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    target.load_state_dict(q.state_dict())
    target.requires_grad_(False)
    g = torch.Generator().manual_seed(1)
    obs, next_obs = torch.randn(32, 3, generator=g), torch.randn(32, 3, generator=g)
    actions = torch.randint(0, 2, (32,), generator=g)
    rewards = torch.randn(32, generator=g) + 1.0
    discounts = torch.full((32,), 0.9)

    def loss_fn():
        td = dqn_td_error(q(obs), actions, rewards, discounts, target(next_obs), q(next_obs))
        return dqn_loss(td), {}

    es = EvolutionStrategies(population=20, sigma=0.05, lr=0.05, seed=0).attach(q.parameters())
    before = float(loss_fn()[0].detach())
    for _ in range(40):
        es.step(loss_fn)
    assert float(loss_fn()[0].detach()) < 0.67 * before
    assert all(not p.requires_grad or p.grad is None for p in q.parameters())


def test_es_refuses_odd_population():
    with pytest.raises(ValueError, match="even"):
        EvolutionStrategies(population=3)
