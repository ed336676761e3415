"""Listwise losses over a whole (variable-length, masked) slate, on signed continuous targets.

* :class:`ListNetLoss` (Cao et al. 2007, top-one probabilities): cross-entropy
  ``L_q = -sum_i P_t(i) log P_s(i)`` of ``P_t = softmax(t / tau)`` and ``P_s = softmax(s)`` over the
  real slots. A harmful passage (``u < 0``) simply gets less target mass than a neutral one.
* :class:`ListMLELoss` (Xia et al. 2008): negative Plackett-Luce log-likelihood of the target order ``pi``
  (real slots by descending target), ``L_q = sum_{r=1}^{n} [log sum_{l >= r} exp(s_{pi(l)}) - s_{pi(r)}]``.
* :class:`LambdaUDCGLoss` (LambdaLoss framework, Wang et al. 2018, with UDCG deltas): a pairwise
  logistic loss ``sum_{t_i > t_j} |Delta UDCG@k_ij| log(1 + exp(-sigma (s_i - s_j)))``, the delta being
  the change of UDCG@k (Eq. 4) of the *current* top-k (by score) when ``i`` and ``j`` swap places. A
  swap changes this set function only when exactly one of ``i, j`` is in the top k: with
  ``g(u) = u+ + gamma u-`` and ``z = (1/k) sum_{top k} g(u)`` the current logit, swapping ``i`` (in)
  for ``j`` (out) gives ``z' = z + (g(u_j) - g(u_i)) / k`` and ``|Delta| = |sigmoid(z') - sigmoid(z)|``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from udcg_ltr.losses.base import NEG_LARGE, RankingLoss, masked_mean_over_queries, pair_mask
from udcg_ltr.metrics.torch_ops import DEFAULT_GAMMA, top_k_mask_torch, udcg_logit_torch


class ListNetLoss(RankingLoss):
    """ListNet with target distribution ``softmax(t / tau)`` over the real slots (no clamping)."""

    def __init__(self, tau: float = 0.1):
        super().__init__()
        if tau <= 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        self.tau = tau

    def compute(self, scores, targets, mask):
        p_t = torch.softmax(torch.where(mask, targets / self.tau, NEG_LARGE), dim=-1)
        log_p_s = torch.log_softmax(torch.where(mask, scores, NEG_LARGE), dim=-1)
        return masked_mean_over_queries(-torch.where(mask, p_t * log_p_s, 0.0).sum(-1), mask.sum(-1) >= 2, scores)


class ListMLELoss(RankingLoss):
    """Plackett-Luce negative log-likelihood of the target order over the real slots; equal targets in column
    order (``ties="stable"``) or a fresh random permutation per call (``"random"``, the usual practice).
    ``normalize=True`` divides each query's sum by its number of real slots."""

    def __init__(self, ties: str = "stable", normalize: bool = False):
        super().__init__()
        if ties not in ("stable", "random"):
            raise ValueError(f"ties must be 'stable' or 'random', got {ties!r}")
        self.ties, self.normalize = ties, normalize

    def compute(self, scores, targets, mask):
        if self.ties == "random":
            perm = torch.randperm(scores.shape[1], device=scores.device)
            scores, targets, mask = scores[:, perm], targets[:, perm], mask[:, perm]
        key = torch.where(mask, targets, torch.full_like(targets, float("-inf")))
        order = torch.sort(key, dim=-1, descending=True, stable=True).indices  # padding last
        s = torch.gather(scores, 1, order)
        m = torch.gather(mask, 1, order)
        # log sum_{l >= r} exp(s_l): a reversed cumulative logsumexp over the sorted slate.
        tail = torch.flip(torch.logcumsumexp(torch.flip(torch.where(m, s, NEG_LARGE), [1]), dim=1), [1])
        per_query = torch.where(m, tail - s, 0.0).sum(-1)
        count = m.sum(-1)
        if self.normalize:
            per_query = per_query / count.clamp(min=1)
        return masked_mean_over_queries(per_query, count >= 2, scores)


def udcg_swap_deltas(scores: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, k: int,
                     gamma: float = DEFAULT_GAMMA) -> torch.Tensor:
    """``[Q, n, n]``: ``|UDCG@k(after swapping i and j) - UDCG@k(now)|`` for the ranking by ``scores``
    (module doc; no gradient; ties broken by column, as :func:`udcg_ltr.metrics.rank_by_scores`)."""
    with torch.no_grad():
        in_top = top_k_mask_torch(scores, mask, k, validate=False)  # no read-back in a training step
        k_eff = in_top.sum(-1).clamp(min=1).to(scores.dtype)
        g = torch.clamp(targets, min=0.0) + gamma * torch.clamp(targets, max=0.0)  # g(u), module doc
        z = udcg_logit_torch(targets, in_top, gamma=gamma, validate=False)
        # Delta z of swapping i and j: (in_i - in_j) * (g_j - g_i) / k
        flag = in_top[:, :, None].to(scores.dtype) - in_top[:, None, :].to(scores.dtype)
        dz = flag * (g[:, None, :] - g[:, :, None]) / k_eff[:, None, None]
        return (torch.sigmoid(z[:, None, None] + dz) - torch.sigmoid(z)[:, None, None]).abs()


class LambdaUDCGLoss(RankingLoss):
    """LambdaLoss with ``|Delta UDCG@k|`` pair weights (module doc). ``min_weight`` floors every pair's
    weight (default 0: pairs that cannot change the top-k set carry no gradient, as the metric sees it)."""

    def __init__(self, k: int = 5, gamma: float = DEFAULT_GAMMA, sigma: float = 1.0, min_weight: float = 0.0,
                 normalize: bool = False):
        super().__init__()
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k, self.gamma, self.sigma, self.min_weight, self.normalize = k, gamma, sigma, min_weight, normalize

    def compute(self, scores, targets, mask):
        pairs = pair_mask(targets, mask)
        delta = udcg_swap_deltas(scores, targets, mask, self.k, self.gamma)
        if self.min_weight > 0:  # the deltas are >= 0: a floor of 0 (the default) would only copy [Q, n, n]
            delta = delta.clamp(min=self.min_weight)
        w = torch.where(pairs, delta, torch.zeros_like(delta))
        per_query = (w * F.softplus(-self.sigma * (scores[:, :, None] - scores[:, None, :]))).sum(dim=(1, 2))
        if self.normalize:
            # Scale-free across slates: divide by the weight mass (LambdaLoss leaves it to the lr).
            per_query = per_query / w.sum(dim=(1, 2)).clamp(min=1e-12)
        return masked_mean_over_queries(per_query, pairs.any(-1).any(-1), scores)
