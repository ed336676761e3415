"""Differentiable torch twins of :mod:`udcg_ltr.metrics.udcg` and :mod:`~udcg_ltr.metrics.classic` for
the losses: UDCG (Eq. 4), UDCG_theta (Eq. 3), DCG; equal to float precision on hard masks.

``mask`` may also be *soft* (an inclusion weight in [0, 1] per passage, e.g. a relaxed top-k selection): sums become
weighted sums and the context size ``k`` becomes ``sum(mask)``. NaN follows the numpy rule (a soft weight > 0 is real;
padding is zeroed before any product, so its NaN reaches neither value nor gradient). The check reads one boolean back
from the device: the losses pass ``validate=False`` (a training step must never wait for the GPU) because
:func:`udcg_ltr.models.datamodule.build_slates` checked their targets on the host.
"""

from __future__ import annotations

import torch

from udcg_ltr.metrics.udcg import DEFAULT_GAMMA


def _checked(values: torch.Tensor, mask: torch.Tensor | None, what: str = "values",
             validate: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values with padding set to 0, inclusion weights)``; ``ValueError`` on NaN at a real entry (if ``validate``)."""
    w = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    real = None if mask is None else (mask if mask.dtype == torch.bool else w > 0)
    if validate:
        if mask is not None and mask.dtype != torch.bool and bool(torch.isnan(w).any()):
            raise ValueError("mask: NaN weight (a soft mask must lie in [0, 1])")
        nan = torch.isnan(values) if real is None else torch.isnan(values) & real
        if bool(nan.any()):
            where = [int(i) for i in torch.nonzero(nan)[0].tolist()]
            raise ValueError(f"{what}: NaN at a real entry (index {where}; {int(nan.sum())} in all). NaN is not a "
                             "label, gain, utility or score: mask the entry out or fix its source")
    return (values if real is None else torch.where(real, values, torch.zeros_like(values))), w


def udcg_logit_torch(utilities: torch.Tensor, mask: torch.Tensor | None = None, *,
                     gamma: float = DEFAULT_GAMMA, eps: float = 1e-8, validate: bool = True) -> torch.Tensor:
    """Argument of Eq. 4's sigmoid: ``(sum w u+ + gamma sum w u-) / sum w`` (0 for an empty context)."""
    u, w = _checked(utilities, mask, "utilities", validate)
    u = u * w  # u- stays signed
    return (u.clamp(min=0.0).sum(-1) + gamma * u.clamp(max=0.0).sum(-1)) / w.sum(-1).clamp(min=eps)


def udcg_torch(utilities: torch.Tensor, mask: torch.Tensor | None = None, *,
               gamma: float = DEFAULT_GAMMA, validate: bool = True) -> torch.Tensor:
    """UDCG, Eq. 4, per query: ``sigmoid((1/k) sum u+ + (gamma/k) sum u-)``."""
    return torch.sigmoid(udcg_logit_torch(utilities, mask, gamma=gamma, validate=validate))


def top_k_mask_torch(scores: torch.Tensor, mask: torch.Tensor | None, k: int) -> torch.Tensor:
    """``[Q, n]`` boolean: the real entries among the top ``k`` by descending score (ties: earlier column
    first, as :func:`udcg_ltr.metrics.rank_by_scores`); the hard top-k set of Eq. 4's UDCG@k."""
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    key = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    order = torch.sort(key, dim=-1, descending=True, stable=True).indices
    pos = torch.empty_like(order)  # each column's rank: one scatter (a second sort would cost more)
    pos.scatter_(1, order, torch.arange(scores.shape[1], device=scores.device).expand_as(order))
    return (pos < k) & mask


def _positions(values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """0-based rank of each entry: among the real entries for a boolean mask, else the column index."""
    if mask is None or mask.dtype != torch.bool:
        return torch.arange(values.shape[-1], device=values.device).expand(values.shape)
    return torch.clamp(torch.cumsum(mask.to(torch.long), dim=-1) - 1, min=0)


def _positional(weights: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Positional weights (``[k]`` or ``[Q, k]``) picked at each entry's rank."""
    return torch.gather(weights.expand(*pos.shape[:-1], weights.shape[-1]), -1, pos)


def udcg_theta_torch(utilities: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor,
                     mask: torch.Tensor | None = None) -> torch.Tensor:
    """UDCG_theta, Eq. 3, per query: ``sigmoid(sum_i alpha_i u_i+ + sum_i beta_i u_i-)``; ``alpha``/``beta``
    ``[k]`` or ``[n_queries, k]``. With a boolean mask, weight ``i`` goes to the ``i``-th real passage (as
    :func:`udcg_ltr.metrics.udcg.udcg_theta`); with a soft or no mask, column ``i`` is position ``i``."""
    u, w = _checked(utilities, mask, "utilities")
    for name, weights in (("alpha", alpha), ("beta", beta)):
        if bool(torch.isnan(weights).any()):
            raise ValueError(f"{name}: NaN positional weight")
    pos = _positions(utilities, mask)
    a = _positional(alpha.to(utilities.dtype), pos)
    b = _positional(beta.to(utilities.dtype), pos)
    u = u * w
    return torch.sigmoid((a * torch.clamp(u, min=0.0) + b * torch.clamp(u, max=0.0)).sum(-1))


def dcg_torch(gains: torch.Tensor, mask: torch.Tensor | None = None, *, k: int | None = None) -> torch.Tensor:
    """DCG@k with signed gains and log2 discount, per query: ``sum_{i<=k} g_i / log2(i + 1)``. With a boolean mask,
    ranks count real entries only (as :func:`udcg_ltr.metrics.classic.dcg`), else column ``i`` is rank ``i + 1``."""
    g, w = _checked(gains, mask, "gains")
    pos = _positions(gains, mask)
    d = 1.0 / torch.log2(pos.to(gains.dtype) + 2.0)  # 1 / log2(i + 1) at rank i = pos + 1
    if k is not None:
        d = torch.where(pos < k, d, 0.0)
    return (g * w * d).sum(-1)
