"""Pairwise losses on utility differences.

For every real pair ``(i, j)`` of a slate with ``t_i > t_j + min_gap`` (``t``: signed utility, Eq. 2),
passage ``i`` should score above ``j``. ``weighted=True`` weighs a pair by ``w_ij = |t_i - t_j|`` (a
useful passage vs a harmful distractor matters more than two near-neutral ones), else ``w_ij = 1``.
Per query ``L_q = sum_ij w_ij l_ij / sum_ij w_ij``, averaged over queries with at least one pair.

* :class:`RankNetLoss` (Burges et al. 2005): ``l_ij = log(1 + exp(-sigma (s_i - s_j)))``;
* :class:`PairwiseHingeLoss` (SVM-rank / margin ranking loss): ``l_ij = max(0, m_ij - (s_i - s_j))``
  with ``m_ij = margin`` or, with ``margin_mode="difference"``, ``m_ij = margin * |t_i - t_j|``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from udcg_ltr.losses.base import RankingLoss, masked_mean_over_queries, pair_mask


class _PairwiseLoss(RankingLoss):
    """``L_q`` of the module doc; subclasses give ``l_ij`` from ``s_i - s_j`` and ``|t_i - t_j|``."""

    def compute(self, scores, targets, mask):
        pairs = pair_mask(targets, mask, min_gap=self.min_gap)
        tdiff = (targets[:, :, None] - targets[:, None, :]).abs()
        per_pair = self.pair_loss(scores[:, :, None] - scores[:, None, :], tdiff)
        w = torch.where(pairs, tdiff, 0.0) if self.weighted else pairs.to(tdiff.dtype)
        total = w.sum(dim=(1, 2))
        return masked_mean_over_queries((w * per_pair).sum(dim=(1, 2)) / total.clamp(min=1e-12), total > 0, scores)


class RankNetLoss(_PairwiseLoss):
    """RankNet: logistic loss on score differences of correctly-ordered target pairs."""

    def __init__(self, sigma: float = 1.0, weighted: bool = False, min_gap: float = 0.0):
        super().__init__()
        self.sigma, self.weighted, self.min_gap = sigma, weighted, min_gap

    def pair_loss(self, sdiff, tdiff):
        return F.softplus(-self.sigma * sdiff)


class PairwiseHingeLoss(_PairwiseLoss):
    """Margin ranking loss ``max(0, m_ij - (s_i - s_j))`` over pairs with ``t_i > t_j``."""

    def __init__(self, margin: float = 1.0, margin_mode: str = "constant", weighted: bool = False,
                 min_gap: float = 0.0):
        super().__init__()
        if margin_mode not in ("constant", "difference"):
            raise ValueError(f"margin_mode must be 'constant' or 'difference', got {margin_mode!r}")
        self.margin, self.margin_mode, self.weighted, self.min_gap = margin, margin_mode, weighted, min_gap

    def pair_loss(self, sdiff, tdiff):
        return torch.relu((self.margin * tdiff if self.margin_mode == "difference" else self.margin) - sdiff)
