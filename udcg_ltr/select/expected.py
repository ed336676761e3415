"""The expected-UDCG selector: predict each passage's utility, keep the prefix with the best expected UDCG.

A plug-in Bayes rule: a shared network ``h`` maps the features ``x_i`` of the passage at rank ``i`` to
``pi_i = P(R_i = +1 | x_i)`` and the magnitude ``m_i = E[|u_i| | x_i] = 1 - P(NO-RESPONSE)`` (Eq. 2), trained
on ``BCE(pi, [u > 0]) + (m - |u|)^2``: proper scoring rules, so ``pi`` is calibrated on the training
distribution. With the signs independent given the features (Eq. 4, ``s_i = +1`` w.p. ``pi_i``)::

    E[UDCG(top-k)] = sum_{s in {+1,-1}^k} prod_i P(s_i) * sigmoid( (1/k) sum_i m_i (s_i > 0 ? 1 : -gamma) )

over the ``2^k`` sign patterns (``k <= max_k <=`` :data:`MAX_EXACT_K`), ``E[UDCG({})] = 0.5``; the selector
keeps ``argmax_k`` (smallest on ties): the oracle for perfect ``pi`` and ``m``. For ``k in {0, 1}`` it keeps
the top passage iff ``pi_1 sigmoid(m_1) + (1 - pi_1) sigmoid(-gamma m_1) >= 0.5``, i.e. ``pi_1 >= ~0.25``
for ``gamma = 1/3``: a relevant passage gains about three times what a distractor costs.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.nn import LearnedSelector, SelectorModule, SelectorOptim, mlp

#: Largest prefix whose expected UDCG is enumerated exactly (2^k sign patterns).
MAX_EXACT_K = 10


def sign_patterns(k: int, *, dtype=torch.float32) -> torch.Tensor:
    """``[2^k, k]`` 0/1 matrix of every relevance pattern of ``k`` passages (1 = relevant)."""
    return ((torch.arange(2 ** k)[:, None] >> torch.arange(k)[None, :]) & 1).to(dtype)


def expected_prefix_udcg(relevance_prob: torch.Tensor, magnitude: torch.Tensor, mask: torch.Tensor, *,
                         max_k: int, gamma: float = DEFAULT_GAMMA) -> torch.Tensor:
    """``[Q, max_k + 1]``: column ``k`` is ``E[UDCG(top-k)]`` (module doc), column 0 is 0.5, from ``[Q, W]``
    ``relevance_prob`` and ``magnitude`` in rank order; callers mask the columns past a row's passages."""
    if max_k > MAX_EXACT_K:
        raise ValueError(f"exact enumeration is limited to k <= {MAX_EXACT_K}, got max_k={max_k}")
    q, w = relevance_prob.shape
    mask = mask.to(torch.bool)
    pi = torch.where(mask, relevance_prob, torch.zeros_like(relevance_prob))
    m = torch.where(mask, magnitude, torch.zeros_like(magnitude))
    cols = [torch.full((q,), 0.5, dtype=pi.dtype, device=pi.device)]
    for k in range(1, max_k + 1):
        if k > w:
            cols.append(cols[-1])
            continue
        s = sign_patterns(k, dtype=pi.dtype).to(pi.device)  # [P, k]
        p_k, m_k = pi[:, :k], m[:, :k]
        log_p = (s[None] * torch.log(p_k[:, None].clamp(min=1e-12))
                 + (1 - s[None]) * torch.log((1 - p_k[:, None]).clamp(min=1e-12))).sum(-1)  # [Q, P]
        logit = (m_k[:, None] * (s[None] - gamma * (1 - s[None]))).sum(-1) / k  # [Q, P]
        cols.append((torch.exp(log_p) * torch.sigmoid(logit)).sum(-1))
    return torch.stack(cols, dim=-1)


class UtilityModelModule(SelectorModule):
    """Per-passage relevance probability and utility magnitude (module doc)."""

    def __init__(self, n_features: int, *, hidden: int = 0, n_layers: int = 1, dropout: float = 0.0,
                 gamma: float = DEFAULT_GAMMA, max_k: int = MAX_EXACT_K, magnitude_weight: float = 1.0,
                 optim: SelectorOptim | None = None):
        super().__init__(optim)
        if not 1 <= int(max_k) <= MAX_EXACT_K:
            raise ValueError(f"max_k must be in 1..{MAX_EXACT_K}, got {max_k}")
        self.net = mlp(n_features, 2, hidden=hidden, n_layers=n_layers, dropout=dropout)
        self.gamma, self.max_k, self.magnitude_weight = float(gamma), int(max_k), float(magnitude_weight)

    def predictions(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Relevance logits and magnitudes ``m`` in (0, 1), both ``[Q, W]``."""
        out = self.net(x)
        return out[..., 0], torch.sigmoid(out[..., 1])

    def objective(self, batch) -> torch.Tensor:
        """Per query: minus the mean over real passages of ``BCE(pi, [u > 0]) + w (m - |u|)^2``."""
        mask = batch["mask"].to(torch.bool)
        logit, m = self.predictions(batch["x"])
        u = batch["utility"]
        bce = F.binary_cross_entropy_with_logits(logit, (u > 0).to(logit.dtype), reduction="none")
        loss = bce + self.magnitude_weight * (m - u.abs()) ** 2
        return -torch.where(mask, loss, torch.zeros_like(loss)).sum(-1) / mask.sum(-1).clamp(min=1)

    def soft_output(self, batch) -> torch.Tensor:
        logit, m = self.predictions(batch["x"])
        return expected_prefix_udcg(torch.sigmoid(logit), m, batch["mask"], max_k=self.max_k, gamma=self.gamma)

    def k_from_soft(self, soft, batch) -> torch.Tensor:
        valid = torch.arange(soft.shape[1], device=soft.device) <= batch["mask"].sum(-1, keepdim=True)
        return torch.where(valid, soft, torch.full_like(soft, -1.0)).argmax(-1)  # first maximum: the smallest k


class ExpectedUtilitySelector(LearnedSelector):
    """Expected-UDCG selector (module doc): :class:`UtilityModelModule`'s hyper-parameters and those of
    :class:`~udcg_ltr.select.nn.LearnedSelector` (``max_k``: at most :data:`MAX_EXACT_K`, default
    ``min(width, 10)``)."""

    kind = "expected_utility"
    module_class = UtilityModelModule

    def __init__(self, *, hidden: int = 0, n_layers: int = 1, dropout: float = 0.0, magnitude_weight: float = 1.0,
                 **kwargs: Any):
        super().__init__(**kwargs)
        if self.max_k is not None and not 1 <= self.max_k <= MAX_EXACT_K:
            raise ValueError(f"max_k must be in 1..{MAX_EXACT_K}, got {self.max_k}")
        self.hidden, self.n_layers, self.dropout = int(hidden), int(n_layers), float(dropout)
        self.magnitude_weight = float(magnitude_weight)

    def fit(self, ranked, *, gamma=None, val=None):
        if self.max_k is None:
            self.max_k = min(ranked.width, MAX_EXACT_K)
        return super().fit(ranked, gamma=gamma, val=val)
