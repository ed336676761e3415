"""The k-classifier: choose ``k in 0..K`` as a softmax over ``K + 1`` classes from the list features.

``arch``: ``"linear"`` (``logits = W [x_1; ...; x_K; real flags] + b``), ``"mlp"`` (the same input through
an MLP) or ``"cumulative"`` (``logit_k = b_k + sum_{i<=k} h(x_i)`` with a shared per-passage MLP ``h``: the
evidence for reading ``k`` passages accumulates; a linear ``h`` got stuck near "always k = 1" on a
synthetic task). Classes ``k > n_q`` are masked out. ``objective``: ``"expected"``,
``E[UDCG] = sum_k p(k) UDCG(top-k)`` (Eq. 4), or ``"cross_entropy"`` to the oracle ``k``.

The expected objective is flat once ``p`` saturates on one class (gradient ``p_k (UDCG_k - E)``), as early
training does on ``k = 1``; a bonus ``entropy * H(p)`` fixes it: the optimum of ``E_p[UDCG] + beta H(p)``
is ``p(k) ∝ exp(UDCG(top-k) / beta)``, whose argmax is the best ``k`` (``beta = entropy``, 0.02: UDCG gaps
between candidate k are a few hundredths). Inference: ``argmax_k p(k)``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.nn import LearnedSelector, SelectorModule, SelectorOptim, mlp

NEG = -1e4


class KClassifierModule(SelectorModule):
    """``K + 1``-way classifier over the first ``K`` ranked passages (module doc)."""

    def __init__(self, n_features: int, max_k: int, *, arch: str = "cumulative", hidden: int = 0, n_layers: int = 1,
                 dropout: float = 0.0, objective: str = "expected", label_smoothing: float = 0.0,
                 gamma: float = DEFAULT_GAMMA, entropy: float = 0.02, optim: SelectorOptim | None = None):
        super().__init__(optim)
        if arch not in ("linear", "mlp", "cumulative"):
            raise ValueError(f"arch must be 'linear', 'mlp' or 'cumulative', got {arch!r}")
        if objective not in ("expected", "cross_entropy"):
            raise ValueError(f"objective must be 'expected' or 'cross_entropy', got {objective!r}")
        self.max_k, self.arch, self.objective_name = int(max_k), arch, objective
        self.label_smoothing, self.gamma, self.entropy = float(label_smoothing), float(gamma), float(entropy)
        k = self.max_k
        if arch == "cumulative":
            self.net = mlp(n_features, 1, hidden=hidden, n_layers=n_layers, dropout=dropout)
            self.bias = torch.nn.Parameter(torch.zeros(k + 1))
        else:
            self.net = mlp(k * n_features + k, k + 1, hidden=hidden if arch == "mlp" else 0, n_layers=n_layers,
                           dropout=dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Class logits ``[Q, K + 1]`` with impossible classes (``k > n_q``) at a large negative value."""
        k = self.max_k
        x, mask = x[:, :k], mask[:, :k].to(torch.bool)
        if self.arch == "cumulative":
            h = torch.where(mask, self.net(x).squeeze(-1), torch.zeros(x.shape[:2], dtype=x.dtype, device=x.device))
            logits = F.pad(torch.cumsum(h, -1), (1, 0)) + self.bias
        else:
            logits = self.net(torch.cat([x.reshape(x.shape[0], -1), mask.to(x.dtype)], -1))
        valid = torch.arange(k + 1, device=x.device)[None, :] <= mask.sum(-1, keepdim=True)
        return torch.where(valid, logits, torch.full_like(logits, NEG))

    def objective(self, batch) -> torch.Tensor:
        logits = self(batch["x"], batch["mask"])
        if self.objective_name == "expected":
            p = torch.softmax(logits, -1)
            value = (p * batch["table"][:, :p.shape[1]]).sum(-1)
            if self.entropy > 0 and self.training:
                value = value - self.entropy * (p * torch.log_softmax(logits, -1)).sum(-1)
            return value
        target = batch["oracle_k"].clamp(max=self.max_k)
        return -F.cross_entropy(logits, target, reduction="none", label_smoothing=self.label_smoothing)

    def soft_output(self, batch) -> torch.Tensor:
        return torch.softmax(self(batch["x"], batch["mask"]), -1)

    def k_from_soft(self, soft, batch) -> torch.Tensor:
        return soft.argmax(-1)


class KClassifierSelector(LearnedSelector):
    """k-classifier selector (module doc): :class:`KClassifierModule`'s hyper-parameters and those of
    :class:`~udcg_ltr.select.nn.LearnedSelector`; ``max_k`` defaults to the training width."""

    kind = "kclassifier"
    module_class = KClassifierModule
    fixed_width = True

    def __init__(self, *, arch: str = "cumulative", hidden: int = 16, n_layers: int = 1, dropout: float = 0.0,
                 objective: str = "expected", label_smoothing: float = 0.0, entropy: float = 0.02, **kwargs: Any):
        super().__init__(**kwargs)
        self.arch, self.hidden, self.n_layers, self.dropout = arch, int(hidden), int(n_layers), float(dropout)
        self.objective, self.label_smoothing, self.entropy = objective, float(label_smoothing), float(entropy)
        KClassifierModule(1, 1, arch=arch, objective=objective)  # validates the choices
