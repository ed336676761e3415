"""Direct, differentiable UDCG@k: relax "the top k passages by score" and maximise UDCG of that set.

UDCG@k is Eq. 4 on the top-k set, whose membership is piecewise constant in the scores: it becomes
smooth inclusion weights ``w_i in [0, 1]`` with ``sum_i w_i = k`` (or close), a soft mask of
:mod:`udcg_ltr.metrics.torch_ops`. Two relaxations with a temperature ``tau`` (``tau -> 0``: the hard
top-k; a slate of at most ``k`` real passages keeps them all, ``w = mask``):

* ``relaxation="neuralsort"`` (Grover et al., ICLR 2019, Eq. 8): the relaxed permutation matrix
  ``P_hat[r, :] = softmax(((n + 1 - 2r) s - A_s 1) / tau)``, ``A_s[j, l] = |s_j - s_l|`` (``n``: the real slots), row
  ``r`` a soft one-hot of the passage at rank ``r``, made doubly stochastic by Sinkhorn scaling (``sinkhorn_iters``, as
  in NeuralNDCG) so that ``w = sum_{r <= k} P_hat[r, :]`` lies in [0, 1] and sums to k. Its rows are soft *positions*,
  hence UDCG_theta (Eq. 3): ``z = sum_{r<=k} alpha_r (P_hat u+)_r + beta_r (P_hat u-)_r``.
* ``relaxation="sigmoid"``: ``w_i = sigmoid((s_i - theta_k) / tau)``, ``theta_k`` halfway between the
  k-th and (k+1)-th largest real score, held constant in the backward pass (the gradient moves scores
  across the boundary rather than the boundary).

``objective``, per query: ``"udcg"`` (loss ``-UDCG``), ``"log_udcg"`` (``-log UDCG = softplus(-z)``,
steeper on bad contexts) or ``"logit"`` (``-z``). ``tau_end`` anneals the temperature geometrically,
``tau_t = tau * (tau_end / tau) ** progress`` (:meth:`DirectUDCGLoss.anneal`, called with the progress).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from udcg_ltr.losses.base import NEG_LARGE, RankingLoss, masked_mean_over_queries
from udcg_ltr.metrics.torch_ops import DEFAULT_GAMMA, udcg_logit_torch


def neuralsort(scores: torch.Tensor, mask: torch.Tensor | None = None, *, tau: float = 1.0,
               rows: int | None = None, sinkhorn_iters: int = 0) -> torch.Tensor:
    """NeuralSort relaxed sort (Grover et al. 2019, Eq. 8) over the real slots: ``[Q, rows, n]``, row ``r``
    (0-based) a distribution over slots for "the passage at rank r + 1" (padding slots and rows past a
    query's real count: 0). ``sinkhorn_iters > 0`` makes the real block doubly stochastic (NeuralNDCG,
    Pobrotyn & Bialobrzeski 2021): built on all rows, then cut."""
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    q, n = scores.shape
    rows = n if rows is None else min(rows, n)
    built = n if sinkhorn_iters > 0 else rows
    m = mask.sum(-1, keepdim=True).to(scores.dtype)  # [Q, 1] real slots per query
    s = torch.where(mask, scores, torch.zeros_like(scores))
    pair = mask[:, :, None] & mask[:, None, :]
    b = torch.where(pair, (s[:, :, None] - s[:, None, :]).abs(), torch.zeros((), dtype=s.dtype)).sum(-1)  # A_s 1
    r = torch.arange(1, built + 1, device=scores.device, dtype=scores.dtype)  # 1-based ranks
    coef = (m + 1.0 - 2.0 * r[None, :])  # [Q, rows]
    logits = (coef[:, :, None] * s[:, None, :] - b[:, None, :]) / tau
    p = torch.softmax(torch.where(mask[:, None, :], logits, NEG_LARGE), dim=-1)
    row_ok = (r[None, :] <= m)  # [Q, rows]
    p = p * (row_ok[:, :, None] & mask[:, None, :])
    if sinkhorn_iters > 0:
        p = sinkhorn(p, row_ok, mask, iters=sinkhorn_iters)
    return p[:, :rows]


def sinkhorn(p: torch.Tensor, row_ok: torch.Tensor, col_ok: torch.Tensor, *, iters: int = 50) -> torch.Tensor:
    """Alternate column and row normalisation of the real ``m x m`` block of each ``[n, n]`` matrix. Rows go
    last, so the soft top-k mass is exactly k; after 50 iterations columns sum to 1 within ~2e-3 on
    SQuAD-like slates (tau 0.5). No convergence test: reading the error back would sync the GPU each time."""
    valid = (row_ok[:, :, None] & col_ok[:, None, :]).to(p.dtype)
    p = p * valid
    for _ in range(iters):
        p = p / p.sum(-2, keepdim=True).clamp(min=1e-12) * valid
        p = p / p.sum(-1, keepdim=True).clamp(min=1e-12) * valid
    return p


def soft_topk_weights(scores: torch.Tensor, mask: torch.Tensor | None, k: int, *, tau: float = 1.0,
                      relaxation: str = "neuralsort", sinkhorn_iters: int = 50) -> torch.Tensor:
    """Smooth top-k inclusion weights ``[Q, n]`` in [0, 1] (see the module docstring)."""
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    if relaxation == "neuralsort":
        # Sinkhorn: each passage's mass over the first k ranks is in [0, 1] and the masses sum to k
        w = neuralsort(scores, mask, tau=tau, rows=k, sinkhorn_iters=sinkhorn_iters).sum(1)
        return torch.where(mask, w, torch.zeros_like(w))
    if relaxation == "sigmoid":
        if scores.shape[1] <= k:
            return mask.to(scores.dtype)
        key = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
        top = torch.sort(key.detach(), dim=-1, descending=True).values
        full = mask.sum(-1) <= k  # every real passage fits in the context (and the threshold is -inf or NaN)
        thr = torch.where(full, 0.0, 0.5 * (top[:, k - 1] + top[:, k]))
        w = torch.where(full[:, None], 1.0, torch.sigmoid((scores - thr[:, None]) / tau))
        return torch.where(mask, w, 0.0)
    raise ValueError(f"unknown relaxation {relaxation!r} (use 'neuralsort' or 'sigmoid')")


#: Per-query loss of each ``objective`` from the (relaxed) logit ``z`` (module doc).
OBJECTIVES = {"udcg": lambda z: -torch.sigmoid(z), "log_udcg": lambda z: F.softplus(-z), "logit": lambda z: -z}


class DirectUDCGLoss(RankingLoss):
    """Loss ``-UDCG@k`` (or ``-log UDCG@k``, ``-logit``) of a smooth top-k selection (module doc); ``tau`` in
    score units; ``alpha``/``beta`` (length ``k``) switch to UDCG_theta (Eq. 3, NeuralSort only);
    ``sinkhorn_iters=0`` keeps plain NeuralSort rows, whose column sums may exceed 1."""

    def __init__(self, k: int = 5, tau: float = 1.0, relaxation: str = "neuralsort",
                 gamma: float = DEFAULT_GAMMA, objective: str = "udcg", tau_end: float | None = None,
                 alpha: Sequence[float] | None = None, beta: Sequence[float] | None = None, sinkhorn_iters: int = 50):
        super().__init__()
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if tau <= 0 or (tau_end is not None and tau_end <= 0):
            raise ValueError("temperatures must be > 0")
        if relaxation not in ("neuralsort", "sigmoid"):
            raise ValueError(f"unknown relaxation {relaxation!r} (use 'neuralsort' or 'sigmoid')")
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be 'udcg', 'log_udcg' or 'logit', got {objective!r}")
        if (alpha is None) != (beta is None):
            raise ValueError("give both alpha and beta (UDCG_theta) or neither (UDCG)")
        if alpha is not None:
            if relaxation != "neuralsort":
                raise ValueError("UDCG_theta needs soft positions: use relaxation='neuralsort'")
            if len(alpha) < k or len(beta) < k:
                raise ValueError(f"UDCG_theta needs >= k={k} positional weights")
            self.register_buffer("alpha", torch.tensor(list(alpha)[:k], dtype=torch.float32), persistent=False)
            self.register_buffer("beta", torch.tensor(list(beta)[:k], dtype=torch.float32), persistent=False)
        else:
            self.alpha = self.beta = None
        self.k, self.tau0, self.tau, self.relaxation = k, tau, tau, relaxation
        self.gamma, self.objective, self.tau_end, self.sinkhorn_iters = gamma, objective, tau_end, sinkhorn_iters

    def anneal(self, progress: float) -> float:
        """Set the temperature for training progress in [0, 1]; returns it."""
        if self.tau_end is not None:
            self.tau = self.tau0 * math.exp(min(max(float(progress), 0.0), 1.0) * math.log(self.tau_end / self.tau0))
        return self.tau

    def soft_logit(self, scores: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The relaxed UDCG (or UDCG_theta) logit ``z`` per query."""
        if self.alpha is None:
            w = soft_topk_weights(scores, mask, self.k, tau=self.tau, relaxation=self.relaxation,
                                  sinkhorn_iters=self.sinkhorn_iters)
            return udcg_logit_torch(targets, w, gamma=self.gamma, validate=False)  # targets checked in build_slates
        p = neuralsort(scores, mask, tau=self.tau, rows=self.k, sinkhorn_iters=self.sinkhorn_iters)  # [Q, r, n]
        soft = p @ torch.stack([targets.clamp(min=0.0), targets.clamp(max=0.0)], -1)  # [Q, r, 2]: P u+, P u-
        r = p.shape[1]
        return (soft[..., 0] * self.alpha[:r] + soft[..., 1] * self.beta[:r]).sum(-1)

    def compute(self, scores, targets, mask):
        per_query = OBJECTIVES[self.objective](self.soft_logit(scores, targets, mask))
        return masked_mean_over_queries(per_query, mask.any(-1), scores)
