"""Optimizer modules (TensorForce 0.3's idea): an optimization strategy is a component, and the loss is a callable.

``GradientStep.step(loss_fn)`` calls ``loss_fn()`` -> ``(loss, info)``, back-propagates, clips and steps a
``torch.optim`` optimizer over the parameters it was given at build time. Its state (the torch optimizer's moments
and step counts) is part of the component's ``state_dict`` and so of every checkpoint.

``Synchronization`` keeps a target copy of a module in step with its source: a hard copy every ``every`` calls, or
Polyak averaging with coefficient ``tau`` on every call.

The other strategies wrap or replace the gradient step:

- ``MultiStep(GradientStep, num_epochs, minibatch_size)``: several epochs of shuffled minibatch steps over one
  batch (PPO's update).
- ``NaturalGradient`` (conjugate-gradient natural-gradient step under a KL trust region), ``LineSearch``
  (backtracking line search) and ``TRPOStep`` (the two composed: TRPO's update, Schulman et al. 2015).
- ``EvolutionStrategies``: OpenAI-ES (Salimans et al. 2017), a gradient-free step that drives any loss callable.

Callbacks: the callables handed to ``step`` (``loss_fn``, ``kl_fn``) belong to the caller; they run as the
caller's code, so API calls they make (e.g. to the agent's networks) are traced as the caller's, not as calls of
the optimizer module (which would be boundary violations, since the networks are not its sub-components).
A composite module (``MultiStep``, ``TRPOStep``) wraps the callables it passes to its children the same way.

Vocabulary: one *gradient step* (TensorForce's "optimizer step") is one update of the parameters; ``info["loss"]``
is always the loss at the parameters *before* the step.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import nn

from rlrun.components import base
from rlrun.components.base import Component, api

OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "rmsprop": torch.optim.RMSprop,
              "adamw": torch.optim.AdamW}


def _as_caller(module: Component, fn: Callable[..., Any], *args: Any) -> Any:
    """Run a callable handed to ``module`` by its caller as the caller's code.

    While an API trace is active, ``module`` (the innermost traced component, as it is running one of its API
    methods) is taken off the trace stack for the duration of ``fn``, so the API calls ``fn`` makes are
    attributed to whoever called ``module``. Without a trace this is just ``fn(*args)``.
    """
    t = base._TRACE
    if t is None or not t.stack or t.stack[-1] is not module:
        return fn(*args)
    t.stack.pop()
    try:
        return fn(*args)
    finally:
        t.stack.append(module)


class GradientStep(Component):
    """One gradient step of a ``torch.optim`` optimizer on the loss ``loss_fn()`` returns."""

    def __init__(self, optimizer: str = "adam", lr: float = 1e-3, max_grad_norm: float | None = None,
                 name: str | None = None, **optimizer_kwargs: Any) -> None:
        """``optimizer``: one of adam, sgd, rmsprop, adamw; ``lr``: learning rate (per gradient step);
        ``max_grad_norm``: clip the global L2 norm of the gradient to this (None = no clipping);
        ``optimizer_kwargs``: passed to the torch optimizer (e.g. ``eps``, ``betas``)."""
        super().__init__(name or "optimizer")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer '{optimizer}' is not one of {', '.join(OPTIMIZERS)}")
        self.optimizer_name, self.lr, self.max_grad_norm = optimizer, lr, max_grad_norm
        self.optimizer_kwargs = optimizer_kwargs
        self.optimizer: torch.optim.Optimizer | None = None
        self._params: list[nn.Parameter] = []

    def attach(self, parameters: Iterable[nn.Parameter]) -> "GradientStep":
        """Set the parameters this module optimises (called by the owner in its build step)."""
        self._params = [p for p in parameters if p.requires_grad]
        self.optimizer = OPTIMIZERS[self.optimizer_name](self._params, lr=self.lr, **self.optimizer_kwargs)
        self.built = True
        return self

    @api
    def step(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]]) -> dict:
        """Call ``loss_fn() -> (loss, info)``, back-propagate, clip, step; return ``info`` with ``"loss"`` (and
        ``"grad_norm"``, the norm before clipping, when ``max_grad_norm`` is set)."""
        if self.optimizer is None:
            raise RuntimeError(f"{self.name}: attach() the parameters before step()")
        loss, info = _as_caller(self, loss_fn)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm is not None:
            info["grad_norm"] = torch.nn.utils.clip_grad_norm_(self._params, self.max_grad_norm)
        self.optimizer.step()
        info["loss"] = loss.detach()
        return info

    @api
    def apply(self, gradients: Sequence[torch.Tensor]) -> dict:
        """One step with gradients computed elsewhere (an A3C worker's): ``gradients`` one per attached parameter,
        in ``attach`` order; clipped and stepped exactly as :meth:`step` does after its backward pass. Returns
        ``{"grad_norm": ...}`` (the norm before clipping) when ``max_grad_norm`` is set."""
        if self.optimizer is None:
            raise RuntimeError(f"{self.name}: attach() the parameters before apply()")
        if len(gradients) != len(self._params):
            raise ValueError(f"{self.name}.apply: {len(gradients)} gradients for {len(self._params)} parameters")
        for p, g in zip(self._params, gradients, strict=True):
            if g.shape != p.shape:
                raise ValueError(f"{self.name}.apply: a gradient of shape {tuple(g.shape)} for a parameter of shape "
                                 f"{tuple(p.shape)}")
            p.grad = g.to(device=p.device, dtype=p.dtype)
        info: dict = {}
        if self.max_grad_norm is not None:
            info["grad_norm"] = torch.nn.utils.clip_grad_norm_(self._params, self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return info

    def get_extra_state(self) -> Any:
        return {"optimizer": self.optimizer.state_dict() if self.optimizer is not None else None}

    def set_extra_state(self, state: Any) -> None:
        if state.get("optimizer") is not None and self.optimizer is not None:
            # A deep copy: torch's Optimizer.load_state_dict keeps same-device tensors as they are, so loading the
            # live state of another GradientStep (in memory, not from a file) would share its moment tensors.
            self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))


class Synchronization(Component):
    """Target-network sync: hard copy every ``every`` calls of ``step`` (tau = 1) or Polyak with ``tau`` < 1."""

    def __init__(self, every: int = 1, tau: float = 1.0, name: str | None = None) -> None:
        """``every``: calls of ``step`` between hard copies (used when ``tau`` = 1; the unit is whatever the caller
        calls ``step`` per, DQN: gradient steps); ``tau``: Polyak coefficient, the share of the source mixed into
        the target's parameters on every call (1 = hard copies); Polyak averages parameters and copies buffers."""
        super().__init__(name or "target_sync")
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {tau}")
        self.every, self.tau = max(int(every), 1), float(tau)
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.built = True
        # (source, target) -> their parameter and buffer lists: walking both modules on every Polyak call cost
        # ~10% of a small SAC update (benchmarks/learner_throughput.py). Parameters keep their identity through
        # .to(), load_state_dict and optimizer steps, so the lists stay valid; a changed count rebuilds them.
        self._tensors: dict[tuple[int, int], tuple[list, list, list, list]] = {}

    def _pairs(self, source: nn.Module, target: nn.Module) -> tuple[list, list, list, list]:
        key = (id(source), id(target))
        cached = self._tensors.get(key)
        if cached is None or len(cached[0]) != sum(1 for _ in source.parameters()):
            sp_, tp = list(source.parameters()), list(target.parameters())
            sb, tb = list(source.buffers()), list(target.buffers())
            if len(sp_) != len(tp) or len(sb) != len(tb):
                raise ValueError(f"{self.name}: source and target have different parameters or buffers")
            cached = self._tensors[key] = (sp_, tp, sb, tb)
        return cached

    @api
    @torch.no_grad()
    def step(self, source: nn.Module, target: nn.Module) -> bool:
        """Count one call; sync ``target`` from ``source`` when due. Returns whether it synced."""
        self.calls += 1
        if self.tau < 1.0:
            s_params, t_params, s_bufs, t_bufs = self._pairs(source, target)
            torch._foreach_lerp_(t_params, s_params, self.tau)
            for s, t in zip(s_bufs, t_bufs, strict=True):
                t.copy_(s)
            return True
        if int(self.calls) % self.every == 0:
            target.load_state_dict(source.state_dict())
            return True
        return False


# ---------------------------------------------------------------------------------------------------- helpers


def _batch_size(batch: Any) -> int:
    """Leading dimension shared by every tensor of a (nested) dict batch."""
    sizes: dict[str, int] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}/{k}" if path else str(k))
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                walk(v, f"{path}/{i}" if path else str(i))
        elif isinstance(value, torch.Tensor):
            if value.dim() == 0:
                raise ValueError(f"batch entry '{path}' is a scalar; every entry needs a leading batch dimension")
            sizes[path] = int(value.shape[0])
        else:
            raise TypeError(f"batch entry '{path}' is a {type(value).__name__}, not a tensor")

    walk(batch, "")
    if not sizes:
        raise ValueError("the batch holds no tensors")
    if len(set(sizes.values())) > 1:
        raise ValueError("batch entries disagree on the leading (batch) dimension: "
                         + ", ".join(f"{k}: {n}" for k, n in sizes.items()))
    return next(iter(sizes.values()))


def _index(batch: Any, idx: torch.Tensor) -> Any:
    """The items ``idx`` (a 1-D index tensor) of every tensor of a (nested) batch."""
    if isinstance(batch, dict):
        return {k: _index(v, idx) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_index(v, idx) for v in batch)
    return batch.index_select(0, idx.to(batch.device))


def _scalar(value: Any) -> float | None:
    """``value`` as a float if it is a number or a one-element tensor, else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach())
    return None


def _flat(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


@torch.no_grad()
def _set_flat(params: list[nn.Parameter], flat: torch.Tensor) -> None:
    """Write a flat vector into the parameters, in place (optimizers and views keep their references)."""
    offset = 0
    for p in params:
        n = p.numel()
        p.copy_(flat[offset:offset + n].view_as(p))
        offset += n


def flat_grad(output: torch.Tensor, params: list[nn.Parameter], create_graph: bool = False,
              retain_graph: bool | None = None) -> torch.Tensor:
    """Gradient of a scalar ``output`` with respect to ``params`` as one flat vector (zeros where unused)."""
    grads = torch.autograd.grad(output, params, create_graph=create_graph, retain_graph=retain_graph,
                                allow_unused=True)
    return _flat(torch.zeros_like(p) if g is None else g for g, p in zip(grads, params, strict=True))


def conjugate_gradient(matrix_vector_product: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor,
                       iters: int = 10, residual_tol: float = 1e-10) -> torch.Tensor:
    """Solve ``A x = b`` for a symmetric positive-definite ``A`` given only ``v -> A v`` (Hestenes & Stiefel 1952;
    Nocedal & Wright, "Numerical Optimization", Algorithm 5.2), starting from ``x = 0``.

    Args:
        matrix_vector_product: the function ``v -> A v`` on flat vectors.
        b: the right-hand side, a flat vector.
        iters: at most this many iterations (exact after ``len(b)`` in exact arithmetic; TRPO uses 10).
        residual_tol: stop once the squared residual norm ``|b - A x|^2`` falls below this.
    """
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    r_dot_r = r.dot(r)
    for _ in range(int(iters)):
        if float(r_dot_r) < residual_tol:
            break
        ap = matrix_vector_product(p)
        alpha = r_dot_r / p.dot(ap)
        x = x + alpha * p
        r = r - alpha * ap
        new_r_dot_r = r.dot(r)
        p = r + (new_r_dot_r / r_dot_r) * p
        r_dot_r = new_r_dot_r
    return x


def fisher_vector_product_fn(kl_fn: Callable[[], torch.Tensor], params: list[nn.Parameter],
                             damping: float = 0.0) -> Callable[[torch.Tensor], torch.Tensor]:
    """The map ``v -> (F + damping * I) v``, ``F`` the Hessian of the mean KL ``kl_fn()`` at the current parameters.

    At the parameters of the old policy, the Hessian of ``KL(pi_old || pi_theta)`` is the Fisher information matrix
    of the policy (Schulman et al. 2015, Appendix C); each product is computed by double back-propagation
    (Pearlmutter 1994), ``grad((grad KL) . v)``, never forming ``F``. ``kl_fn`` is evaluated once, when the map is
    made; the parameters must not change while it is used.

    Args:
        kl_fn: returns the mean KL divergence from the fixed (detached) old policy to the current one, a scalar.
        params: the parameters ``F`` is taken over.
        damping: added multiple of ``v`` (Tikhonov damping; dimensionless).
    """
    kl_grad = flat_grad(kl_fn(), params, create_graph=True)

    def product(vector: torch.Tensor) -> torch.Tensor:
        hvp = flat_grad(kl_grad.dot(vector.detach()), params, retain_graph=True)
        return hvp.detach() + damping * vector

    return product


def fisher_vector_product(kl_fn: Callable[[], torch.Tensor], params: list[nn.Parameter], vector: torch.Tensor,
                          damping: float = 0.0) -> torch.Tensor:
    """``(F + damping * I) v`` for one flat vector ``v``; see :func:`fisher_vector_product_fn`."""
    return fisher_vector_product_fn(kl_fn, params, damping)(vector)


# ---------------------------------------------------------------------------------------------------- multi-step


class MultiStep(Component):
    """Several epochs of gradient steps over shuffled minibatches of one batch (PPO's update; TensorForce's
    ``MultiStep`` + ``SubsamplingStep``).

    ``step(loss_fn, batch)``: ``batch`` is a (nested) dict of tensors sharing a leading dimension ``N``; each epoch
    draws a fresh permutation of the ``N`` items and cuts it into ``ceil(N / minibatch_size)`` minibatches (the last
    may be smaller), and for each calls ``optimizer.step(lambda: loss_fn(minibatch))`` — so every item is used
    exactly once per epoch, and there are ``num_epochs * ceil(N / minibatch_size)`` gradient steps in all.
    """

    def __init__(self, optimizer: GradientStep, num_epochs: int = 4, minibatch_size: int = 64, seed: int = 0,
                 name: str | None = None) -> None:
        """``optimizer``: the gradient step applied to each minibatch (a sub-component); ``num_epochs``: passes over
        the batch per call (CleanRL PPO: 4 for Atari, 10 for MuJoCo); ``minibatch_size``: items per gradient step;
        ``seed``: seed of the shuffling generator (its state is saved with the component)."""
        super().__init__(name or "multi_step")
        if int(num_epochs) < 1:
            raise ValueError(f"num_epochs must be >= 1, got {num_epochs}")
        if int(minibatch_size) < 1:
            raise ValueError(f"minibatch_size must be >= 1, got {minibatch_size}")
        self.optimizer = optimizer
        self.num_epochs, self.minibatch_size = int(num_epochs), int(minibatch_size)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.strategy: Any = None
        """The device strategy's update (``device=replicas`` / ``device.precision``, a
        ``rlrun.devices.replicas.ReplicatedUpdate``): each minibatch step is ``strategy.step(optimizer, loss_fn,
        minibatch)`` instead of ``optimizer.step``; None: the plain step."""

    def _build(self, batch: Any = None) -> None:
        """Optionally given the space of the batch (a Dict space); nothing to create."""

    def attach(self, parameters: Iterable[nn.Parameter]) -> "MultiStep":
        """Set the parameters the wrapped gradient step optimises."""
        self.optimizer.attach(parameters)
        return self

    @api
    def step(self, loss_fn: Callable[[Any], tuple[torch.Tensor, dict]], batch: Any) -> dict:
        """Run ``num_epochs`` epochs of minibatch steps; ``loss_fn(minibatch) -> (loss, info)``.

        Returns the mean over all gradient steps of every scalar entry of the steps' infos (``"loss"`` included;
        non-scalar entries are left out), plus ``"gradient_steps"``, the number of steps taken.
        """
        n = _batch_size(batch)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        steps = 0
        for _ in range(self.num_epochs):
            order = torch.randperm(n, generator=self.generator)
            for idx in order.split(self.minibatch_size):
                minibatch = _index(batch, idx)
                if self.strategy is None:
                    info = self.optimizer.step(lambda mb=minibatch: _as_caller(self, loss_fn, mb))
                else:
                    info = self.strategy.step(self.optimizer, lambda shard: _as_caller(self, loss_fn, shard),
                                              minibatch)
                steps += 1
                for key, value in info.items():
                    x = _scalar(value)
                    if x is not None:
                        sums[key] = sums.get(key, 0.0) + x
                        counts[key] = counts.get(key, 0) + 1
        out: dict[str, Any] = {k: torch.tensor(sums[k] / counts[k]) for k in sums}
        out["gradient_steps"] = steps
        return out

    def get_extra_state(self) -> Any:
        return {"generator": self.generator.get_state()}

    def set_extra_state(self, state: Any) -> None:
        if state.get("generator") is not None:
            self.generator.set_state(state["generator"])


# ---------------------------------------------------------------------------------------------------- TRPO


class NaturalGradient(Component):
    """Natural-gradient step under a KL trust region (Kakade 2001; Schulman et al. 2015, Sec. 6 and Appendix C).

    Solves ``F x = g`` by conjugate gradient, where ``g`` is the gradient of the loss and ``F v`` the (damped)
    Fisher-vector product of :func:`fisher_vector_product`, then scales the descent direction ``-x`` so that the
    quadratic model of the KL meets the trust region: ``step = -beta * x`` with ``0.5 * step^T F step = max_kl``,
    i.e. ``beta = sqrt(2 * max_kl / (x^T F x))``. ``expected_improvement = beta * g^T x`` is the decrease of the
    loss predicted by its linear model.
    """

    def __init__(self, max_kl: float = 0.01, cg_iters: int = 10, damping: float = 0.1,
                 cg_residual_tol: float = 1e-10, name: str | None = None) -> None:
        """``max_kl``: trust-region radius, the mean KL in nats allowed per step (TRPO: 0.01); ``cg_iters``:
        conjugate-gradient iterations (10); ``damping``: Tikhonov damping added to ``F`` (0.1, as OpenAI baselines;
        dimensionless); ``cg_residual_tol``: CG stops once the squared residual norm is below this."""
        super().__init__(name or "natural_gradient")
        if max_kl <= 0:
            raise ValueError(f"max_kl must be > 0, got {max_kl}")
        if damping < 0:
            raise ValueError(f"damping must be >= 0, got {damping}")
        self.max_kl, self.cg_iters, self.damping = float(max_kl), int(cg_iters), float(damping)
        self.cg_residual_tol = float(cg_residual_tol)
        self._params: list[nn.Parameter] = []

    def attach(self, parameters: Iterable[nn.Parameter]) -> "NaturalGradient":
        """Set the parameters the step moves (those with ``requires_grad``)."""
        self._params = [p for p in parameters if p.requires_grad]
        return self

    def _require_params(self) -> None:
        if not self._params:
            raise RuntimeError(f"{self.name}: attach() the parameters before step()")

    @api
    def propose(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]],
                kl_fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """``(step, expected_improvement, info)`` without moving the parameters; ``info`` has ``"loss"``
        (the loss before the step, detached) and the detached entries of ``loss_fn``'s info."""
        self._require_params()
        loss, info = _as_caller(self, loss_fn)
        g = flat_grad(loss, self._params).detach()
        fvp = fisher_vector_product_fn(lambda: _as_caller(self, kl_fn), self._params, self.damping)
        x = conjugate_gradient(fvp, g, self.cg_iters, self.cg_residual_tol)
        x_f_x = x.dot(fvp(x))
        if not float(x_f_x) > 0:  # zero gradient (or a non-positive curvature): no step
            beta = torch.zeros((), dtype=g.dtype)
        else:
            beta = torch.sqrt(2.0 * self.max_kl / x_f_x)
        step = -beta * x
        info = {k: (v.detach() if isinstance(v, torch.Tensor) else v) for k, v in info.items()}
        info["loss"] = loss.detach()
        return step, beta * g.dot(x), info

    @api
    def step(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]], kl_fn: Callable[[], torch.Tensor]) -> dict:
        """Take the full natural-gradient step (no line search); info: ``"loss"``, ``"expected_improvement"``."""
        step, expected, info = self.propose(loss_fn, kl_fn)
        _set_flat(self._params, _flat(p.detach() for p in self._params) + step)
        info["expected_improvement"] = expected
        return info


class LineSearch(Component):
    """Backtracking line search along a proposed step (Armijo; TRPO's ``linesearch``, Schulman et al. 2015).

    Tries ``theta + f * step`` for ``f = 1, r, r^2, ...`` (``r`` = ``backtrack_ratio``, at most ``max_backtracks``
    tries) and keeps the first that improves the loss by at least ``accept_ratio`` times the improvement the
    linear model predicts (``actual >= accept_ratio * f * expected_improvement``) and, when a ``kl_fn`` is given,
    keeps the KL within ``max_kl``. If no fraction is accepted the parameters are restored.
    """

    def __init__(self, max_backtracks: int = 10, accept_ratio: float = 0.1, backtrack_ratio: float = 0.5,
                 name: str | None = None) -> None:
        """``max_backtracks``: number of step fractions tried (TRPO: 10); ``accept_ratio``: share of the predicted
        improvement that must be realised (0.1); ``backtrack_ratio``: factor the fraction shrinks by per try (0.5)."""
        super().__init__(name or "line_search")
        if int(max_backtracks) < 1:
            raise ValueError(f"max_backtracks must be >= 1, got {max_backtracks}")
        if not 0.0 < backtrack_ratio < 1.0:
            raise ValueError(f"backtrack_ratio must be in (0, 1), got {backtrack_ratio}")
        self.max_backtracks, self.accept_ratio = int(max_backtracks), float(accept_ratio)
        self.backtrack_ratio = float(backtrack_ratio)
        self._params: list[nn.Parameter] = []

    def attach(self, parameters: Iterable[nn.Parameter]) -> "LineSearch":
        """Set the parameters the step moves (those with ``requires_grad``)."""
        self._params = [p for p in parameters if p.requires_grad]
        return self

    @api
    @torch.no_grad()
    def step(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]], full_step: torch.Tensor,
             expected_improvement: torch.Tensor | float, kl_fn: Callable[[], torch.Tensor] | None = None,
             max_kl: float = float("inf"), loss_before: torch.Tensor | float | None = None) -> dict:
        """Search along ``full_step`` (flat, as the parameters); returns info with ``"accepted"`` (bool),
        ``"step_fraction"`` (the accepted ``f``, 0 if none), ``"backtracks"`` (rejected tries), ``"loss"`` (before),
        ``"loss_after"`` and, with a ``kl_fn``, ``"kl"`` (at the final parameters).

        Args:
            loss_fn: ``() -> (loss, info)`` at the current parameters; evaluated without gradients.
            full_step: the proposed change of the flat parameter vector.
            expected_improvement: decrease of the loss the linear model predicts for the full step (> 0).
            kl_fn: ``() -> mean KL`` from the old policy to the current one (nats); None = no KL constraint.
            max_kl: largest accepted KL (nats).
            loss_before: the loss at the current parameters, if already known (saves one evaluation).
        """
        if not self._params:
            raise RuntimeError(f"{self.name}: attach() the parameters before step()")
        theta = _flat(p.detach() for p in self._params).clone()
        before = float(_as_caller(self, loss_fn)[0]) if loss_before is None else float(loss_before)
        expected = float(expected_improvement)
        fraction = 1.0
        for tries in range(self.max_backtracks):
            _set_flat(self._params, theta + fraction * full_step)
            after = float(_as_caller(self, loss_fn)[0])
            kl = float(_as_caller(self, kl_fn)) if kl_fn is not None else None
            improvement = before - after
            if (math.isfinite(after) and expected > 0 and improvement >= self.accept_ratio * fraction * expected
                    and (kl is None or kl <= max_kl)):
                info = {"accepted": True, "step_fraction": fraction, "backtracks": tries, "loss": before,
                        "loss_after": after}
                if kl is not None:
                    info["kl"] = kl
                return info
            fraction *= self.backtrack_ratio
        _set_flat(self._params, theta)
        info = {"accepted": False, "step_fraction": 0.0, "backtracks": self.max_backtracks, "loss": before,
                "loss_after": before}
        if kl_fn is not None:
            info["kl"] = float(_as_caller(self, kl_fn))
        return info


class TRPOStep(Component):
    """TRPO's update (Schulman et al. 2015, Sec. 6 and Appendix C): a :class:`NaturalGradient` proposal scaled to
    the KL trust region, then a :class:`LineSearch` that keeps the surrogate improving and the KL within ``max_kl``.

    ``step(loss_fn, kl_fn)``: ``loss_fn() -> (loss, info)`` is the surrogate loss to minimise, e.g.
    ``-mean(exp(logp - logp_old) * A)``; ``kl_fn() -> KL`` the mean KL from the old policy (fixed, detached) to the
    current one.
    """

    def __init__(self, max_kl: float = 0.01, cg_iters: int = 10, damping: float = 0.1, max_backtracks: int = 10,
                 accept_ratio: float = 0.1, backtrack_ratio: float = 0.5, name: str | None = None) -> None:
        """``max_kl``: trust region in nats of mean KL (0.01); ``cg_iters``, ``damping``: of the natural gradient
        (10, 0.1); ``max_backtracks``, ``accept_ratio``, ``backtrack_ratio``: of the line search (10, 0.1, 0.5)."""
        super().__init__(name or "trpo_step")
        self.natural_gradient = NaturalGradient(max_kl, cg_iters, damping)
        self.line_search = LineSearch(max_backtracks, accept_ratio, backtrack_ratio)

    def attach(self, parameters: Iterable[nn.Parameter]) -> "TRPOStep":
        """Set the parameters the update moves (those with ``requires_grad``)."""
        params = list(parameters)
        self.natural_gradient.attach(params)
        self.line_search.attach(params)
        return self

    @api
    def step(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]], kl_fn: Callable[[], torch.Tensor]) -> dict:
        """One TRPO update; info: ``"loss"``, ``"loss_after"``, ``"kl"``, ``"expected_improvement"``,
        ``"step_fraction"``, ``"accepted"`` and the entries of ``loss_fn``'s info at the old parameters."""
        own_loss = lambda: _as_caller(self, loss_fn)  # noqa: E731
        own_kl = lambda: _as_caller(self, kl_fn)  # noqa: E731
        full_step, expected, info = self.natural_gradient.propose(own_loss, own_kl)
        search = self.line_search.step(own_loss, full_step, expected, own_kl, self.natural_gradient.max_kl,
                                       loss_before=info["loss"])
        info.update(search)
        info["expected_improvement"] = expected
        return info


# ---------------------------------------------------------------------------------------------------- ES


def centered_ranks(x: torch.Tensor) -> torch.Tensor:
    """Ranks of ``x`` mapped linearly onto ``[-0.5, 0.5]`` (OpenAI-ES's fitness shaping; ties get distinct ranks
    in index order). A single value maps to 0."""
    n = x.numel()
    if n < 2:
        return torch.zeros_like(x, dtype=torch.float32)
    ranks = torch.empty(n, dtype=torch.float32)
    ranks[torch.argsort(x.reshape(-1), stable=True)] = torch.arange(n, dtype=torch.float32)
    return (ranks / (n - 1) - 0.5).reshape(x.shape)


class EvolutionStrategies(Component):
    """OpenAI evolution strategies (Salimans et al. 2017, "Evolution Strategies as a Scalable Alternative to RL",
    Algorithm 1 with antithetic sampling and fitness shaping), minimising any loss callable without gradients.

    Per step, with ``theta`` the flat parameters and ``P = population // 2`` noise vectors ``eps_i ~ N(0, I)``:
    evaluate ``F+_i = -loss(theta + sigma * eps_i)`` and ``F-_i = -loss(theta - sigma * eps_i)`` (antithetic,
    "mirrored" pairs), replace the ``2P`` fitnesses by their centred ranks ``R`` in ``[-0.5, 0.5]``, and take
    ``theta += lr / (2 P sigma) * sum_i (R+_i - R-_i) eps_i`` (plain gradient ascent on the smoothed fitness).
    Rank shaping makes the step invariant to monotone transformations of the loss.
    """

    def __init__(self, population: int = 32, sigma: float = 0.02, lr: float = 0.01, seed: int = 0,
                 name: str | None = None) -> None:
        """``population``: perturbed parameter vectors evaluated per step (even: ``population // 2`` antithetic
        pairs), i.e. ``loss_fn`` calls per step besides the one at the centre; ``sigma``: standard deviation of the
        parameter noise (in parameter units; paper: 0.02); ``lr``: step size of the update (paper: 0.01 with Adam;
        here plain SGD); ``seed``: seed of the noise generator (its state is saved with the component)."""
        super().__init__(name or "evolution_strategies")
        if int(population) < 2 or int(population) % 2:
            raise ValueError(f"population must be an even number >= 2 (antithetic pairs), got {population}")
        if sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        self.population, self.sigma, self.lr = int(population), float(sigma), float(lr)
        self.generator = torch.Generator().manual_seed(int(seed))
        self._params: list[nn.Parameter] = []

    def attach(self, parameters: Iterable[nn.Parameter]) -> "EvolutionStrategies":
        """Set the parameters the search moves (those with ``requires_grad``; no gradients are computed)."""
        self._params = [p for p in parameters if p.requires_grad]
        return self

    def _loss(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]]) -> tuple[float, dict]:
        loss, info = _as_caller(self, loss_fn)
        return float(loss), info

    @api
    @torch.no_grad()
    def step(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]]) -> dict:
        """One ES update; ``loss_fn() -> (loss, info)`` is evaluated ``population + 1`` times, without gradients.
        Returns ``loss_fn``'s info at the centre with ``"loss"`` (before the step), ``"population/loss_mean"``,
        ``"population/loss_min"``."""
        if not self._params:
            raise RuntimeError(f"{self.name}: attach() the parameters before step()")
        theta = _flat(p.detach() for p in self._params).clone()
        loss, info = self._loss(loss_fn)
        pairs = self.population // 2
        noise = torch.randn((pairs, theta.numel()), generator=self.generator, dtype=torch.float32)
        noise = noise.to(device=theta.device, dtype=theta.dtype)
        losses = torch.empty(pairs, 2)
        for i in range(pairs):
            for j, sign in enumerate((1.0, -1.0)):
                _set_flat(self._params, theta + sign * self.sigma * noise[i])
                losses[i, j] = self._loss(loss_fn)[0]
        ranks = centered_ranks(-losses)  # fitness = -loss
        weights = (ranks[:, 0] - ranks[:, 1]).to(device=theta.device, dtype=theta.dtype)
        ascent = weights @ noise / (2 * pairs * self.sigma)
        _set_flat(self._params, theta + self.lr * ascent)
        info = {k: (v.detach() if isinstance(v, torch.Tensor) else v) for k, v in info.items()}
        info.update({"loss": torch.tensor(loss), "population/loss_mean": losses.mean(),
                     "population/loss_min": losses.min()})
        return info

    def get_extra_state(self) -> Any:
        return {"generator": self.generator.get_state()}

    def set_extra_state(self, state: Any) -> None:
        if state.get("generator") is not None:
            self.generator.set_state(state["generator"])
