"""Pairwise losses on utility differences.

For every real pair ``(i, j)`` of a slate with ``t_i > t_j + min_gap`` (``t`` = signed utility,
Eq. 2), passage ``i`` should score above ``j``. With ``weighted=True`` a pair counts with weight
``w_ij = |t_i - t_j|`` (a useful passage vs a harmful distractor matters more than two
near-neutral ones); otherwise ``w_ij = 1``. Per query ``L_q = sum_ij w_ij l_ij / sum_ij w_ij``,
averaged over queries with at least one pair.

* :class:`RankNetLoss` (Burges et al. 2005): ``l_ij = log(1 + exp(-sigma (s_i - s_j)))``;
* :class:`PairwiseHingeLoss` (the SVM-rank / margin ranking loss):
  ``l_ij = max(0, m_ij - (s_i - s_j))`` with ``m_ij = margin`` or, with
  ``margin_mode="difference"``, ``m_ij = margin * |t_i - t_j|``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from udcg_ltr.losses.base import RankingLoss, masked_mean_over_queries, pair_mask


def _pairwise_reduce(per_pair, targets, pairs, weighted: bool, anchor):
    diff = (targets[:, :, None] - targets[:, None, :]).abs()
    w = torch.where(pairs, diff if weighted else torch.ones_like(diff), torch.zeros_like(diff))
    total = w.sum(dim=(1, 2))
    per_query = (w * per_pair).sum(dim=(1, 2)) / total.clamp(min=1e-12)
    return masked_mean_over_queries(per_query, total > 0, anchor)


class RankNetLoss(RankingLoss):
    """RankNet: logistic loss on score differences of correctly-ordered target pairs."""

    target = "utility"

    def __init__(self, sigma: float = 1.0, weighted: bool = False, min_gap: float = 0.0):
        super().__init__()
        self.sigma, self.weighted, self.min_gap = sigma, weighted, min_gap

    def compute(self, scores, targets, mask):
        pairs = pair_mask(targets, mask, min_gap=self.min_gap)
        sdiff = scores[:, :, None] - scores[:, None, :]
        per_pair = F.softplus(-self.sigma * sdiff)
        return _pairwise_reduce(per_pair, targets, pairs, self.weighted, scores)


class PairwiseHingeLoss(RankingLoss):
    """Margin ranking loss ``max(0, m_ij - (s_i - s_j))`` over pairs with ``t_i > t_j``."""

    target = "utility"

    def __init__(self, margin: float = 1.0, margin_mode: str = "constant", weighted: bool = False,
                 min_gap: float = 0.0):
        super().__init__()
        if margin_mode not in ("constant", "difference"):
            raise ValueError(f"margin_mode must be 'constant' or 'difference', got {margin_mode!r}")
        self.margin, self.margin_mode, self.weighted, self.min_gap = margin, margin_mode, weighted, min_gap

    def compute(self, scores, targets, mask):
        pairs = pair_mask(targets, mask, min_gap=self.min_gap)
        sdiff = scores[:, :, None] - scores[:, None, :]
        margin = self.margin
        if self.margin_mode == "difference":
            margin = self.margin * (targets[:, :, None] - targets[:, None, :]).abs()
        per_pair = torch.relu(margin - sdiff)
        return _pairwise_reduce(per_pair, targets, pairs, self.weighted, scores)
