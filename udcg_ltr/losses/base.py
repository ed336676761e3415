"""What every ranking loss of :mod:`udcg_ltr.losses` shares: the call ``loss(scores, targets, mask)``.

All three are ``[Q, n]``: the model's logits for each query's slate; signed utilities in ``[-1, 1]`` (UDCG paper Eq. 2)
or binary relevance, as :attr:`RankingLoss.target` says; real slots (``True``) vs padding (``None``: all real). Padding
never enters a sum, a softmax or a pair (a 0 utility means "neutral passage", not "absent"). A loss is the mean over the
queries where it is defined; where it is defined nowhere it is a zero that still carries the graph.
"""

from __future__ import annotations

import torch
from torch import nn

#: Finite stand-in for minus infinity in masked score tensors: exp() of it is exactly 0 in float32
#: and, unlike -inf, it never produces ``0 * inf = NaN`` in a gradient.
NEG_LARGE = -1e9


class RankingLoss(nn.Module):
    """Base class. Subclasses implement :meth:`compute` on prepared float tensors."""

    #: Which target the data module should feed: ``"utility"`` (signed, Eq. 2) or ``"relevance"`` (0/1).
    target: str = "utility"
    #: Version stamp: raise it in the same change as anything that changes what the loss computes. It enters the
    #: training fingerprint (``udcg_ltr.models.training.fit_fingerprint``), so a finished training retrains.
    VERSION: int = 1

    def forward(self, scores: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        scores, targets, mask = prepare(scores, targets, mask)
        return self.compute(scores, targets, mask)

    def compute(self, scores: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def plain_fields(self) -> dict:
        """The loss's scalar settings (``k``, ``tau`` ...): its repr and sentence-transformers' model card."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_") and k != "training"
                and isinstance(v, (int, float, str, bool, type(None)))}

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.plain_fields().items())


def prepare(scores: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Check shapes; return float32 scores and targets (zeros at padding) and a bool mask (float32 even
    under bf16 autocast: softmaxes and pair sums over a slate lose too much in 8 mantissa bits)."""
    if scores.dim() == 1:
        scores, targets = scores[None], targets[None]
        mask = mask[None] if mask is not None else None
    if scores.dim() != 2 or targets.shape != scores.shape:
        raise ValueError(f"expected scores and targets of one [Q, n] shape, got {tuple(scores.shape)} "
                         f"and {tuple(targets.shape)}")
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    elif mask.shape != scores.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} differs from scores shape {tuple(scores.shape)}")
    mask = mask.to(torch.bool)
    return scores.float(), torch.where(mask, targets.float(), 0.0), mask


def masked_mean_over_queries(per_query: torch.Tensor, defined: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
    """Mean of ``per_query[defined]``; a graph-carrying zero (``0 * anchor.sum()``) when nothing is defined.
    No data-dependent branching or boolean indexing, so it never waits for a GPU."""
    weight = defined.to(per_query.dtype)
    total = torch.where(defined, per_query, torch.zeros((), dtype=per_query.dtype, device=per_query.device)).sum()
    return total / weight.sum().clamp(min=1.0) + anchor.sum() * 0.0


def pair_mask(targets: torch.Tensor, mask: torch.Tensor, *, min_gap: float = 0.0) -> torch.Tensor:
    """``[Q, n, n]`` bool: real pairs ``(i, j)`` with ``t_i > t_j + min_gap`` (i should rank above j)."""
    return mask[:, :, None] & mask[:, None, :] & (targets[:, :, None] - targets[:, None, :] > min_gap)
