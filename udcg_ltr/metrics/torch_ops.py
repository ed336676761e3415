"""Differentiable torch twins of :mod:`udcg_ltr.metrics.udcg` and :mod:`~udcg_ltr.metrics.classic` for
the losses: UDCG (Eq. 4), UDCG_theta (Eq. 3), DCG; equal to float precision on hard masks.

``mask`` may also be *soft* (an inclusion weight in [0, 1] per passage, e.g. a relaxed top-k selection): sums become
weighted sums and the context size ``k`` becomes ``sum(mask)``. NaN follows the numpy rule (a soft weight > 0 is real;
padding is zeroed before any product, so its NaN reaches neither value nor gradient). The check reads one boolean back
from the device: the losses pass ``validate=False`` (a training step must never wait for the GPU) because
:func:`udcg_ltr.models.datamodule.build_slates` checked their targets on the host.

The twins refuse what numpy refuses, with the same error class (``ValueError``): a negative or non-integer
cutoff, a non-finite ``gamma``, a mask weight outside [0, 1] (numpy: outside {0, 1}), a mask or positional
weights of the wrong shape (checked before torch would raise a RuntimeError), NaN at a real entry.
``tests/test_strict_twins.py`` holds them to it on random valid and invalid inputs.
"""

from __future__ import annotations

import torch

from udcg_ltr.metrics._common import check_cutoff
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, check_gamma


def _check_shapes(values: torch.Tensor, mask: torch.Tensor | None, what: str) -> None:
    """Shape checks (free: no value read back from the device): a ``[n_queries, k]`` (or ``[k]``) tensor, as numpy's
    :func:`udcg_ltr.metrics._common.prepare` takes, and a mask of the same
    shape, as a ``ValueError`` naming the argument instead of torch's RuntimeError from a broadcast deep inside."""
    if not isinstance(values, torch.Tensor) or values.ndim not in (1, 2):
        raise ValueError(f"{what}: expected a [n_queries, k] tensor, got {getattr(values, 'shape', type(values))}")
    if mask is not None and (not isinstance(mask, torch.Tensor) or mask.shape != values.shape):
        raise ValueError(f"mask: shape {tuple(getattr(mask, 'shape', ()))} differs from {what} shape "
                         f"{tuple(values.shape)}")


def _check_weights(mask: torch.Tensor) -> None:
    """A soft mask's weights must lie in [0, 1] (0 = padding, 1 = real, between: a relaxed selection); 2.0 or
    -1.0 would scale a utility or flip its sign, and numpy's ``bool(2.0)`` reads it as real: both refuse."""
    if mask.dtype == torch.bool:
        return
    bad = torch.isnan(mask) | (mask < 0) | (mask > 1)
    if bool(bad.any()):
        where = [int(i) for i in torch.nonzero(bad)[0].tolist()]
        raise ValueError(f"mask: weights must lie in [0, 1], got {float(mask[tuple(where)])!r} at index {where}")


def _checked(values: torch.Tensor, mask: torch.Tensor | None, what: str = "values",
             validate: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values with padding set to 0, inclusion weights)``; shapes always checked, mask weights and NaN at a
    real entry (``ValueError``, as numpy) only if ``validate`` (those checks read a value back from the device)."""
    _check_shapes(values, mask, what)
    w = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    real = None if mask is None else (mask if mask.dtype == torch.bool else w > 0)
    if validate:
        if mask is not None:
            _check_weights(mask)
        nan = torch.isnan(values) if real is None else torch.isnan(values) & real
        if bool(nan.any()):
            where = [int(i) for i in torch.nonzero(nan)[0].tolist()]
            raise ValueError(f"{what}: NaN at a real entry (index {where}; {int(nan.sum())} in all). NaN is not a "
                             "label, gain, utility or score: mask the entry out or fix its source")
    return (values if real is None else torch.where(real, values, torch.zeros_like(values))), w


def udcg_logit_torch(utilities: torch.Tensor, mask: torch.Tensor | None = None, *,
                     gamma: float = DEFAULT_GAMMA, eps: float = 1e-8, validate: bool = True) -> torch.Tensor:
    """Argument of Eq. 4's sigmoid: ``(sum w u+ + gamma sum w u-) / sum w`` (0 for an empty context)."""
    if not isinstance(gamma, torch.Tensor):  # a tensor gamma is the caller's (reading it back would sync)
        check_gamma(gamma)
    u, w = _checked(utilities, mask, "utilities", validate)
    u = u * w  # u- stays signed
    return (u.clamp(min=0.0).sum(-1) + gamma * u.clamp(max=0.0).sum(-1)) / w.sum(-1).clamp(min=eps)


def udcg_torch(utilities: torch.Tensor, mask: torch.Tensor | None = None, *,
               gamma: float = DEFAULT_GAMMA, validate: bool = True) -> torch.Tensor:
    """UDCG, Eq. 4, per query: ``sigmoid((1/k) sum u+ + (gamma/k) sum u-)``."""
    return torch.sigmoid(udcg_logit_torch(utilities, mask, gamma=gamma, validate=validate))


def top_k_mask_torch(scores: torch.Tensor, mask: torch.Tensor | None, k: int, *,
                     validate: bool = True) -> torch.Tensor:
    """``[Q, n]`` boolean: the real entries among the top ``k`` by descending score (ties: earlier column
    first, as :func:`udcg_ltr.metrics.top_k_mask`); the hard top-k set of Eq. 4's UDCG@k. ``k >= 0`` and the
    shapes are always checked; a NaN score at a real entry (it would sort first) only if ``validate`` (the
    losses pass False: a training step must not read back from the device)."""
    check_cutoff(k)
    _check_shapes(scores, mask, "scores")
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    elif mask.dtype != torch.bool:
        if validate and bool((torch.isnan(mask) | ((mask != 0) & (mask != 1))).any()):
            raise ValueError("mask: a top-k selection needs a hard mask (weights 0 or 1)")
        mask = mask != 0
    if validate and bool((torch.isnan(scores) & mask).any()):
        raise ValueError("scores: NaN at a real entry (a NaN score has no rank)")
    key = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    order = torch.sort(key, dim=-1, descending=True, stable=True).indices
    pos = torch.empty_like(order)  # each column's rank: one scatter (a second sort would cost more)
    pos.scatter_(-1, order, torch.arange(scores.shape[-1], device=scores.device).expand_as(order))
    return (pos < k) & mask


def _positions(values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """0-based rank of each entry among the real ones (weight > 0; padding takes no rank, as numpy's
    :func:`udcg_ltr.metrics._common.column_positions`); without a mask the column index."""
    if mask is None:
        return torch.arange(values.shape[-1], device=values.device).expand(values.shape)
    real = mask if mask.dtype == torch.bool else mask > 0
    return torch.clamp(torch.cumsum(real.to(torch.long), dim=-1) - 1, min=0)


def _check_positional(name: str, weights: torch.Tensor, utilities: torch.Tensor, mask: torch.Tensor | None) -> None:
    """``alpha`` / ``beta``: ``[k]`` or ``[n_queries, k]``, one weight per real position, no NaN (numpy's
    :func:`udcg_ltr.metrics.udcg.udcg_theta` refuses the same), so that no gather fails with a RuntimeError."""
    if not isinstance(weights, torch.Tensor) or weights.ndim not in (1, 2):
        raise ValueError(f"{name}: expected [k] or [n_queries, k] positional weights, got "
                         f"{tuple(getattr(weights, 'shape', ()))}")
    if weights.ndim == 2 and (utilities.ndim != 2 or weights.shape[0] != utilities.shape[0]):
        raise ValueError(f"{name}: per-query weights need {utilities.shape[0]} rows, got {tuple(weights.shape)}")
    if mask is None:
        need = utilities.shape[-1]
    else:
        real = mask if mask.dtype == torch.bool else mask > 0
        need = int(real.sum(-1).max()) if real.numel() else 0
    if weights.shape[-1] < need:
        raise ValueError(f"{name}: need >= {need} positional weights, got {tuple(weights.shape)}")
    if bool(torch.isnan(weights).any()):
        raise ValueError(f"{name}: NaN positional weight")


def _positional(weights: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Positional weights (``[k]`` or ``[Q, k]``) picked at each entry's rank."""
    return torch.gather(weights.expand(*pos.shape[:-1], weights.shape[-1]), -1, pos)


def udcg_theta_torch(utilities: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor,
                     mask: torch.Tensor | None = None) -> torch.Tensor:
    """UDCG_theta, Eq. 3, per query: ``sigmoid(sum_i alpha_i u_i+ + sum_i beta_i u_i-)``; ``alpha``/``beta``
    ``[k]`` or ``[n_queries, k]``; weight ``i`` goes to the ``i``-th real passage (weight > 0), as
    :func:`udcg_ltr.metrics.udcg.udcg_theta`."""
    u, w = _checked(utilities, mask, "utilities")
    for name, weights in (("alpha", alpha), ("beta", beta)):
        _check_positional(name, weights, utilities, mask)
    pos = _positions(utilities, mask)
    a = _positional(alpha.to(utilities.dtype), pos)
    b = _positional(beta.to(utilities.dtype), pos)
    u = u * w
    return torch.sigmoid((a * torch.clamp(u, min=0.0) + b * torch.clamp(u, max=0.0)).sum(-1))


def dcg_torch(gains: torch.Tensor, mask: torch.Tensor | None = None, *, k: int | None = None) -> torch.Tensor:
    """DCG@k with signed gains and log2 discount, per query: ``sum_{i<=k} g_i / log2(i + 1)``; ranks count real
    entries only (weight > 0), as :func:`udcg_ltr.metrics.classic.dcg`."""
    check_cutoff(k)
    g, w = _checked(gains, mask, "gains")
    pos = _positions(gains, mask)
    d = 1.0 / torch.log2(pos.to(gains.dtype) + 2.0)  # 1 / log2(i + 1) at rank i = pos + 1
    if k is not None:
        d = torch.where(pos < k, d, 0.0)
    return (g * w * d).sum(-1)
