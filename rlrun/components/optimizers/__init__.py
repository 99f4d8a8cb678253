"""Optimizer modules (TensorForce 0.3's idea): an optimization strategy is a component, and the loss is a callable.

An agent whose update is a plain gradient step holds its optimizer itself (Adam: :class:`adam.Adam`, torch.optim.Adam's
update without importing ``torch._dynamo``, see its module; others: ``torch.optim``) and steps it with
:func:`optimizer_step` (zero_grad, backward, clip, step), over the minibatches of :func:`minibatches` where it takes
several; the modules here are for where the strategy *is* the choice (TRPO's ``algo.policy_update``: trust region,
natural gradient, evolution strategies, minibatch gradient steps).

``GradientStep.step(loss_fn)`` calls ``loss_fn()`` -> ``(loss, info)`` and takes :func:`optimizer_step` on a
``torch.optim`` optimizer over the parameters it was given at build time. Its state (the torch optimizer's moments
and step counts) is part of the component's ``state_dict`` and so of every checkpoint.

``Synchronization`` keeps a target copy of a module in step with its source: a hard copy every ``every`` calls, or
Polyak averaging with coefficient ``tau`` on every call.

The other strategies wrap or replace the gradient step:

- ``MultiStep(GradientStep, num_epochs, minibatch_size)``: several epochs of shuffled minibatch steps over one
  batch (TRPO's ``policy_update=multi_step``: VPG).
- ``NaturalGradient`` (conjugate-gradient natural-gradient step under a KL trust region), ``LineSearch``
  (backtracking line search) and ``TRPOStep`` (the two composed: TRPO's update, Schulman et al. 2015).
- ``EvolutionStrategies``: OpenAI-ES (Salimans et al. 2017), a gradient-free step that drives any loss callable.

Callbacks: the callables handed to ``step`` (``loss_fn``, ``kl_fn``) belong to the caller: an API trace
(``rlrun.components.base.trace``) records the calls they make (e.g. to the agent's networks) as the caller's, not
as calls of the optimizer module, whose sub-components the networks are not.

Vocabulary: one *gradient step* (TensorForce's "optimizer step") is one update of the parameters; ``info["loss"]``
is always the loss at the parameters *before* the step.

Files: ``gradient_step.py`` (``optimizer_step``, GradientStep, Synchronization), ``multi_step.py`` (MultiStep,
``minibatches``, ``mean_scalars``), ``trust_region.py``
(NaturalGradient, LineSearch, TRPOStep, conjugate gradient, Fisher-vector products), ``evolution_strategies.py``,
``flat_params.py`` (parameters as one flat vector), ``lr_schedule.py`` (the linear learning-rate decay).
"""

from rlrun.components.optimizers.evolution_strategies import EvolutionStrategies, centered_ranks
from rlrun.components.optimizers.flat_params import flat_grad
from rlrun.components.optimizers.gradient_step import OPTIMIZERS, GradientStep, Synchronization, optimizer_step
from rlrun.components.optimizers.multi_step import MultiStep, mean_scalars, minibatches
from rlrun.components.optimizers.trust_region import (
    LineSearch,
    NaturalGradient,
    TRPOStep,
    conjugate_gradient,
    fisher_vector_product,
    fisher_vector_product_fn,
)

__all__ = ["OPTIMIZERS", "EvolutionStrategies", "GradientStep", "LineSearch", "MultiStep", "NaturalGradient",
           "Synchronization", "TRPOStep", "centered_ranks", "conjugate_gradient", "flat_grad",
           "fisher_vector_product", "fisher_vector_product_fn", "mean_scalars", "minibatches", "optimizer_step"]
