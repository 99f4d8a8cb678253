"""Trust-region steps: the conjugate-gradient natural-gradient step under a KL constraint (:class:`NaturalGradient`),
a backtracking :class:`LineSearch`, and the two composed as TRPO's update (:class:`TRPOStep`, Schulman et al. 2015),
with the linear algebra they share (conjugate gradient, Fisher-vector products)."""

from __future__ import annotations

import math
from typing import Callable, ClassVar, Iterable

import torch
from torch import nn

from rlrun.components.base import Component, api
from rlrun.components.optimizers.flat_params import flat, flat_grad, set_flat


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


class NaturalGradient(Component):
    """Natural-gradient step under a KL trust region (Kakade 2001; Schulman et al. 2015, Sec. 6 and Appendix C).

    Solves ``F x = g`` by conjugate gradient, where ``g`` is the gradient of the loss and ``F v`` the (damped)
    Fisher-vector product of :func:`fisher_vector_product`, then scales the descent direction ``-x`` so that the
    quadratic model of the KL meets the trust region: ``step = -beta * x`` with ``0.5 * step^T F step = max_kl``,
    i.e. ``beta = sqrt(2 * max_kl / (x^T F x))``. ``expected_improvement = beta * g^T x`` is the decrease of the
    loss predicted by its linear model.
    """

    step_inputs: ClassVar[tuple[str, ...]] = ("loss_fn", "kl_fn")
    """What ``step`` takes, declared (as by every optimizer module) so an owner can drive a module chosen by name
    from config: ``loss_fn() -> (loss, info)`` and ``kl_fn() -> mean KL`` from the old policy."""

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
        loss, info = loss_fn()
        g = flat_grad(loss, self._params).detach()
        fvp = fisher_vector_product_fn(kl_fn, self._params, self.damping)
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
        set_flat(self._params, flat(p.detach() for p in self._params) + step)
        info["expected_improvement"] = expected
        return info


class LineSearch(Component):
    """Backtracking line search along a proposed step (Armijo; TRPO's ``linesearch``, Schulman et al. 2015).

    Tries ``theta + f * step`` for ``f = 1, r, r^2, ...`` (``r`` = ``backtrack_ratio``, at most ``max_backtracks``
    tries) and keeps the first that improves the loss by at least ``accept_ratio`` times the improvement the
    linear model predicts (``actual >= accept_ratio * f * expected_improvement``) and, when a ``kl_fn`` is given,
    keeps the KL within ``max_kl``. If no fraction is accepted the parameters are restored.
    """

    step_inputs: ClassVar[tuple[str, ...]] = ("loss_fn", "full_step", "expected_improvement", "kl_fn", "max_kl",
                                             "loss_before")
    """What ``step`` takes, declared (as by every optimizer module) so an owner can drive a module chosen by name
    from config: the loss, the proposed step and its predicted improvement, optionally a KL bound."""

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
        theta = flat(p.detach() for p in self._params).clone()
        before = float(loss_fn()[0]) if loss_before is None else float(loss_before)
        expected = float(expected_improvement)
        fraction = 1.0
        for tries in range(self.max_backtracks):
            set_flat(self._params, theta + fraction * full_step)
            after = float(loss_fn()[0])
            kl = float(kl_fn()) if kl_fn is not None else None
            improvement = before - after
            if (math.isfinite(after) and expected > 0 and improvement >= self.accept_ratio * fraction * expected
                    and (kl is None or kl <= max_kl)):
                info = {"accepted": True, "step_fraction": fraction, "backtracks": tries, "loss": before,
                        "loss_after": after}
                if kl is not None:
                    info["kl"] = kl
                return info
            fraction *= self.backtrack_ratio
        set_flat(self._params, theta)
        info = {"accepted": False, "step_fraction": 0.0, "backtracks": self.max_backtracks, "loss": before,
                "loss_after": before}
        if kl_fn is not None:
            info["kl"] = float(kl_fn())
        return info


class TRPOStep(Component):
    """TRPO's update (Schulman et al. 2015, Sec. 6 and Appendix C): a :class:`NaturalGradient` proposal scaled to
    the KL trust region, then a :class:`LineSearch` that keeps the surrogate improving and the KL within ``max_kl``.

    ``step(loss_fn, kl_fn)``: ``loss_fn() -> (loss, info)`` is the surrogate loss to minimise, e.g.
    ``-mean(exp(logp - logp_old) * A)``; ``kl_fn() -> KL`` the mean KL from the old policy (fixed, detached) to the
    current one.
    """

    step_inputs: ClassVar[tuple[str, ...]] = ("loss_fn", "kl_fn")
    """What ``step`` takes, declared (as by every optimizer module) so an owner can drive a module chosen by name
    from config: ``loss_fn() -> (loss, info)`` and ``kl_fn() -> mean KL`` from the old policy."""

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
        full_step, expected, info = self.natural_gradient.propose(loss_fn, kl_fn)
        search = self.line_search.step(loss_fn, full_step, expected, kl_fn, self.natural_gradient.max_kl,
                                       loss_before=info["loss"])
        info.update(search)
        info["expected_improvement"] = expected
        return info
