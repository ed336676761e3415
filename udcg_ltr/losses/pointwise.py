"""Pointwise losses: each (question, passage) pair on its own.

* :class:`MSELoss`: regression of the signed utility (Eq. 2), ``L = mean_{real i} (f(s_i) - u_i)^2``
  with ``f`` the identity (default) or ``tanh`` (which maps logits onto the utility range ``[-1, 1]``);
* :class:`BCELoss`: the standard reranker baseline, binary cross-entropy against relevance ``y_i``,
  ``L = -mean_{real i} [w_+ y_i log sigmoid(s_i) + (1 - y_i) log(1 - sigmoid(s_i))]``; signed
  utilities become ``y = [u > 0]`` (Eq. 2: the sign of ``u`` is ``R``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from udcg_ltr.losses.base import RankingLoss


class MSELoss(RankingLoss):
    """Mean squared error on signed utilities over real slots: ``mean (f(s_i) - u_i)^2``."""

    def __init__(self, activation: str = "identity"):
        super().__init__()
        if activation not in ("identity", "tanh"):
            raise ValueError(f"activation must be 'identity' or 'tanh', got {activation!r}")
        self.activation = activation

    def compute(self, scores, targets, mask):
        pred = torch.tanh(scores) if self.activation == "tanh" else scores
        return ((pred - targets) ** 2 * mask).sum() / mask.sum().clamp(min=1)


class BCELoss(RankingLoss):
    """Binary cross-entropy with logits on relevance labels (the usual cross-encoder objective)."""

    target = "relevance"

    def __init__(self, pos_weight: float | None = None):
        super().__init__()
        self.pos_weight = pos_weight

    def compute(self, scores, targets, mask):
        if bool((targets < 0).any()):
            y = (targets > 0).float()
        elif bool((targets > 1).any()):
            raise ValueError("BCELoss needs labels in [0, 1] (binarise graded relevance first)")
        else:
            y = targets
        pw = None if self.pos_weight is None else torch.tensor(self.pos_weight, device=scores.device)
        per = F.binary_cross_entropy_with_logits(scores, y, pos_weight=pw, reduction="none")
        return (per * mask).sum() / mask.sum().clamp(min=1)
