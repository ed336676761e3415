"""Listwise losses over a whole (variable-length, masked) slate, on signed continuous targets.

* :class:`ListNetLoss` (Cao et al. 2007, top-one probabilities): cross-entropy between the target
  distribution ``P_t = softmax(t / tau)`` and the model's ``P_s = softmax(s)`` over the real slots,
  ``L_q = -sum_i P_t(i) log P_s(i)``. Signed utilities are valid softmax inputs: a harmful
  passage (``u < 0``) simply gets less target mass than a neutral one; nothing is clamped.
* :class:`ListMLELoss` (Xia et al. 2008): negative Plackett-Luce log-likelihood of the target
  order ``pi`` (real slots sorted by descending target, padding excluded),
  ``L_q = sum_{r=1}^{n} [log sum_{l >= r} exp(s_{pi(l)}) - s_{pi(r)}]``.
* :class:`LambdaUDCGLoss` (LambdaLoss framework, Wang et al. 2018, with UDCG deltas): a pairwise
  logistic loss ``sum_{t_i > t_j} |Delta UDCG@k_ij| log(1 + exp(-sigma (s_i - s_j)))`` where
  ``|Delta UDCG@k_ij|`` is the change of UDCG@k (Eq. 4) of the *current* top-k (by score) when
  ``i`` and ``j`` swap places. UDCG is a set function of the top k, so a swap changes it only when
  exactly one of ``i, j`` is in the top k: with ``g(u) = u+ + gamma u-`` and ``z`` the current
  logit ``(1/k) sum_{top k} g(u)``, swapping ``i`` (in) for ``j`` (out) gives
  ``z' = z + (g(u_j) - g(u_i)) / k`` and ``|Delta| = |sigmoid(z') - sigmoid(z)|``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from udcg_ltr.losses.base import NEG_LARGE, RankingLoss, masked_mean_over_queries, pair_mask
from udcg_ltr.metrics.torch_ops import DEFAULT_GAMMA, top_k_mask_torch, udcg_logit_torch


def masked_log_softmax(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``log softmax`` over real slots; padding gets 0 (it is multiplied by a zero weight anyway)."""
    logp = torch.log_softmax(torch.where(mask, x, torch.full_like(x, NEG_LARGE)), dim=-1)
    return torch.where(mask, logp, torch.zeros_like(logp))


class ListNetLoss(RankingLoss):
    """ListNet with target distribution ``softmax(t / tau)`` over the real slots (no clamping)."""

    target = "utility"

    def __init__(self, tau: float = 0.1):
        super().__init__()
        if tau <= 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        self.tau = tau

    def compute(self, scores, targets, mask):
        p_t = torch.where(mask, torch.softmax(torch.where(mask, targets / self.tau,
                                                          torch.full_like(targets, NEG_LARGE)), dim=-1), 0.0)
        per_query = -(p_t * masked_log_softmax(scores, mask)).sum(-1)
        return masked_mean_over_queries(per_query, mask.sum(-1) >= 2, scores)


class ListMLELoss(RankingLoss):
    """Plackett-Luce negative log-likelihood of the target order over the real slots.

    ``ties="stable"`` orders equal targets by column (deterministic); ``ties="random"`` breaks them
    with a fresh random permutation per call (the usual ListMLE practice with graded labels).
    ``normalize=True`` divides each query's sum by its number of real slots.
    """

    target = "utility"

    def __init__(self, ties: str = "stable", normalize: bool = False):
        super().__init__()
        if ties not in ("stable", "random"):
            raise ValueError(f"ties must be 'stable' or 'random', got {ties!r}")
        self.ties, self.normalize = ties, normalize

    def compute(self, scores, targets, mask):
        n = scores.shape[1]
        if self.ties == "random":
            perm = torch.randperm(n, device=scores.device)
            scores, targets, mask = scores[:, perm], targets[:, perm], mask[:, perm]
        key = torch.where(mask, targets, torch.full_like(targets, float("-inf")))
        order = torch.sort(key, dim=-1, descending=True, stable=True).indices  # padding last
        s = torch.gather(scores, 1, order)
        m = torch.gather(mask, 1, order)
        s_masked = torch.where(m, s, torch.full_like(s, NEG_LARGE))
        # log sum_{l >= r} exp(s_l): a reversed cumulative logsumexp over the sorted slate.
        tail = torch.flip(torch.logcumsumexp(torch.flip(s_masked, [1]), dim=1), [1])
        per_pos = torch.where(m, tail - s, torch.zeros_like(s))
        per_query = per_pos.sum(-1)
        count = m.sum(-1)
        if self.normalize:
            per_query = per_query / count.clamp(min=1)
        return masked_mean_over_queries(per_query, count >= 2, scores)


def udcg_swap_deltas(scores: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, k: int,
                     gamma: float = DEFAULT_GAMMA) -> torch.Tensor:
    """``[Q, n, n]``: ``|UDCG@k(after swapping i and j) - UDCG@k(now)|`` for the ranking by ``scores``
    (module doc; no gradient; ties broken by column, as :func:`udcg_ltr.metrics.rank_by_scores`)."""
    with torch.no_grad():
        in_top = top_k_mask_torch(scores, mask, k)
        k_eff = in_top.sum(-1).clamp(min=1).to(scores.dtype)
        g = torch.clamp(targets, min=0.0) + gamma * torch.clamp(targets, max=0.0)  # g(u), module doc
        z = udcg_logit_torch(targets, in_top, gamma=gamma, validate=False)
        # Delta z of swapping i and j: (in_i - in_j) * (g_j - g_i) / k
        flag = in_top[:, :, None].to(scores.dtype) - in_top[:, None, :].to(scores.dtype)
        dz = flag * (g[:, None, :] - g[:, :, None]) / k_eff[:, None, None]
        base = torch.sigmoid(z)[:, None, None]
        return (torch.sigmoid(z[:, None, None] + dz) - base).abs()


class LambdaUDCGLoss(RankingLoss):
    """LambdaLoss with ``|Delta UDCG@k|`` pair weights (module doc). ``min_weight`` floors every pair's
    weight (default 0: pairs that cannot change the top-k set carry no gradient, as the metric sees it)."""

    target = "utility"

    def __init__(self, k: int = 5, gamma: float = DEFAULT_GAMMA, sigma: float = 1.0, min_weight: float = 0.0,
                 normalize: bool = False):
        super().__init__()
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k, self.gamma, self.sigma, self.min_weight, self.normalize = k, gamma, sigma, min_weight, normalize

    def compute(self, scores, targets, mask):
        pairs = pair_mask(targets, mask)
        delta = udcg_swap_deltas(scores, targets, mask, self.k, self.gamma)
        if self.min_weight > 0:
            delta = delta.clamp(min=self.min_weight)
        w = torch.where(pairs, delta, torch.zeros_like(delta))
        sdiff = scores[:, :, None] - scores[:, None, :]
        per_query = (w * F.softplus(-self.sigma * sdiff)).sum(dim=(1, 2))
        if self.normalize:
            # Scale-free across slates: divide by the weight mass (LambdaLoss leaves it to the lr).
            per_query = per_query / w.sum(dim=(1, 2)).clamp(min=1e-12)
        return masked_mean_over_queries(per_query, pairs.any(-1).any(-1), scores)
