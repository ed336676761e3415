"""Differentiable torch versions of the metrics the losses optimise: UDCG (Eq. 4), UDCG_theta (Eq. 3), DCG.

They mirror :mod:`udcg_ltr.metrics.udcg` and :mod:`udcg_ltr.metrics.classic` on ``[n_queries, k]``
tensors and agree with them to float precision on hard masks. ``mask`` may also be *soft* (a
float inclusion weight in [0, 1] per passage, e.g. a relaxed top-k selection): the sums become
weighted sums and the context size ``k`` becomes ``sum(mask)``, which is what a smooth UDCG@k
objective differentiates through.
"""

from __future__ import annotations

import torch

DEFAULT_GAMMA = 1.0 / 3.0


def _mask(u: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return torch.ones_like(u)
    return mask.to(u.dtype)


def udcg_logit_torch(utilities: torch.Tensor, mask: torch.Tensor | None = None, *,
                     gamma: float = DEFAULT_GAMMA, eps: float = 1e-8) -> torch.Tensor:
    """Argument of Eq. 4's sigmoid: ``(sum w u+ + gamma sum w u-) / sum w`` (0 for an empty context)."""
    w = _mask(utilities, mask)
    u = utilities * w
    pos = torch.clamp(u, min=0.0).sum(-1)  # u+ part; u- stays signed below
    neg = torch.clamp(u, max=0.0).sum(-1)
    n = w.sum(-1)
    return (pos + gamma * neg) / torch.clamp(n, min=eps)


def udcg_torch(utilities: torch.Tensor, mask: torch.Tensor | None = None, *,
               gamma: float = DEFAULT_GAMMA) -> torch.Tensor:
    """UDCG, Eq. 4, per query: ``sigmoid((1/k) sum u+ + (gamma/k) sum u-)``."""
    return torch.sigmoid(udcg_logit_torch(utilities, mask, gamma=gamma))


def udcg_theta_torch(utilities: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor,
                     mask: torch.Tensor | None = None) -> torch.Tensor:
    """UDCG_theta, Eq. 3, per query: ``sigmoid(sum_i alpha_i u_i+ + sum_i beta_i u_i-)``.

    Entries are taken in column order (column ``i`` is position ``i``); pass contexts left-aligned.
    ``alpha``/``beta`` broadcast against ``[n_queries, k]`` (a ``[k]`` vector of positional weights).
    """
    w = _mask(utilities, mask)
    k = utilities.shape[-1]
    u = utilities * w
    z = (alpha[..., :k] * torch.clamp(u, min=0.0) + beta[..., :k] * torch.clamp(u, max=0.0)).sum(-1)
    return torch.sigmoid(z)


def log2_discounts_torch(n: int, *, dtype=torch.float32, device=None) -> torch.Tensor:
    return 1.0 / torch.log2(torch.arange(2, n + 2, dtype=dtype, device=device))


def dcg_torch(gains: torch.Tensor, mask: torch.Tensor | None = None, *, k: int | None = None) -> torch.Tensor:
    """DCG@k with signed gains in ranked (column) order and log2 discount, per query."""
    w = _mask(gains, mask)
    n = gains.shape[-1]
    disc = log2_discounts_torch(n, dtype=gains.dtype, device=gains.device)
    if k is not None:
        disc = torch.where(torch.arange(n, device=gains.device) < k, disc, torch.zeros_like(disc))
    return (gains * w * disc).sum(-1)
