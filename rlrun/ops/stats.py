"""Statistics of learner outputs, reported as metrics.

Pure functions of tensors; they keep no state and take no gradient.
"""

from __future__ import annotations

import torch

__all__ = ["explained_variance"]


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    r"""How much of the target's variance a value prediction explains.

    .. math::

        \mathrm{ev} = 1 - \frac{\mathrm{Var}[y - \hat y]}{\mathrm{Var}[y]}

    1: a perfect fit; 0: no better than a constant; negative: worse than a constant; nan where the target does
    not vary (a single item, or all equal). As OpenAI Baselines' ``explained_variance``
    (``baselines/common/math_util.py``) and CleanRL's ``ppo.py`` report it as ``value/explained_variance``.
    Both variances are torch's unbiased ones; the ratio does not depend on that choice.

    Args:
        predicted: the predictions :math:`\hat y` (e.g. ``V(s_t)``), any shape.
        target: the targets :math:`y` (e.g. the returns), the same number of items.

    Returns:
        A Python float.
    """
    var = float(target.var()) if target.numel() > 1 else 0.0
    return float("nan") if var == 0.0 else 1.0 - float((target - predicted).var()) / var
