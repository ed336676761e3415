"""The per-passage gate: keep/drop each ranked passage from its list features, trained to maximise UDCG.

A shared network ``h`` gives each ranked passage a gate ``g_i = sigmoid(h(x_i))``; the kept set must be a
**prefix** (a hole would drop a better passage and keep a worse one), so the gates become monotone
inclusion weights ``w_1 >= ... >= w_n`` (``prefix``):

* ``"cumprod"`` (default): ``w_i = prod_{j<=i} g_j``, ``P(K = k) = w_k (1 - g_{k+1})`` (``w_0 = 1``,
  ``g_{n+1} = 0``): a sequential "continue reading?" decision.
* ``"last"``: up to the last gated-in passage, ``w_i = 1 - prod_{j>=i} (1 - g_j)``, ``P(K = k) = g_k
  prod_{j>k} (1 - g_j)``, ``P(K = 0) = prod_j (1 - g_j)``: no passage needs *every* gate closed (on a
  synthetic task where a third of the queries want ``k = 0`` it never learned to abstain; cumprod did).

Objectives: ``"soft_mask"``, UDCG (Eq. 4) of the soft kept set (:func:`udcg_ltr.select.nn.soft_udcg`), or
``"expected"``, ``sum_k P(K = k) UDCG(top-k)``. Both are flat where the gates saturate (a gate pushed to 1
early never learns to close), hence undecided gates at start (``init_bias = 0``) and a bonus ``entropy *
mean_i H(g_i)``. Inference keeps ``k = #{i : w_i >= threshold}`` passages (0.5: the median of ``K``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.nn import LearnedSelector, SelectorModule, SelectorOptim, mlp, soft_udcg


def _check_prefix(prefix: str) -> None:
    if prefix not in ("cumprod", "last"):
        raise ValueError(f"prefix must be 'cumprod' or 'last', got {prefix!r}")


def _log_not_gated(logits: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``log(1 - g_i)`` (0 on padding) and its suffix sums ``sum_{j>=i} log(1 - g_j)``."""
    log_not = torch.where(mask, F.logsigmoid(-logits), torch.zeros_like(logits))
    return log_not, torch.flip(torch.cumsum(torch.flip(log_not, [-1]), -1), [-1])


def prefix_weights(logits: torch.Tensor, mask: torch.Tensor, prefix: str = "cumprod") -> torch.Tensor:
    """Monotone inclusion weights ``w [Q, W]`` from gate logits (module doc); padding gets 0."""
    _check_prefix(prefix)
    mask = mask.to(torch.bool)
    if prefix == "cumprod":
        log_g = torch.where(mask, F.logsigmoid(logits), torch.full_like(logits, -1e4))
        return torch.exp(torch.cumsum(log_g, dim=-1)) * mask
    return (1.0 - torch.exp(_log_not_gated(logits, mask)[1])) * mask


def prefix_length_distribution(logits: torch.Tensor, mask: torch.Tensor, prefix: str = "cumprod") -> torch.Tensor:
    """``P(K = k)`` for ``k = 0..W`` (``[Q, W + 1]``) of the kept prefix length (module doc)."""
    _check_prefix(prefix)
    mask = mask.to(torch.bool)
    if prefix == "cumprod":
        w = prefix_weights(logits, mask, "cumprod")  # P(K >= i), i = 1..W
        return (F.pad(w, (1, 0), value=1.0) - F.pad(w, (0, 1))).clamp(min=0.0)
    log_not, tail = _log_not_gated(logits, mask)
    p_k = torch.where(mask, torch.exp(F.logsigmoid(logits) + (tail - log_not)), torch.zeros_like(logits))
    return torch.cat([torch.exp(log_not.sum(-1, keepdim=True)), p_k], dim=-1)


class GateModule(SelectorModule):
    """Shared per-passage gate network with the objectives of the module docstring."""

    def __init__(self, n_features: int, *, hidden: int = 0, n_layers: int = 1, dropout: float = 0.0,
                 prefix: str = "cumprod", objective: str = "soft_mask", threshold: float = 0.5,
                 gamma: float = DEFAULT_GAMMA, max_k: int | None = None, init_bias: float = 0.0,
                 entropy: float = 0.01, optim: SelectorOptim | None = None):
        super().__init__(optim)
        _check_prefix(prefix)
        if objective not in ("soft_mask", "expected"):
            raise ValueError(f"objective must be 'soft_mask' or 'expected', got {objective!r}")
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        self.net = mlp(n_features, 1, hidden=hidden, n_layers=n_layers, dropout=dropout)
        with torch.no_grad():
            (self.net if isinstance(self.net, torch.nn.Linear) else self.net[-1]).bias.fill_(init_bias)
        self.prefix, self.objective_name, self.entropy = prefix, objective, float(entropy)
        self.threshold, self.gamma, self.max_k = float(threshold), float(gamma), max_k

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        z = self.net(x).squeeze(-1)
        if self.max_k is not None and self.max_k < z.shape[1]:  # positions past max_k are never kept
            z = torch.cat([z[:, :self.max_k], torch.full_like(z[:, self.max_k:], -30.0)], dim=1)
        return z

    def objective(self, batch) -> torch.Tensor:
        """Per query: the UDCG objective plus ``entropy`` times the mean binary entropy of the gates."""
        z = self.logits(batch["x"])
        mask = batch["mask"].to(torch.bool)
        if self.objective_name == "soft_mask":
            value = soft_udcg(batch["utility"], prefix_weights(z, mask, self.prefix), gamma=self.gamma)
        else:
            p = prefix_length_distribution(z, mask, self.prefix)
            value = (p * batch["table"][:, :p.shape[1]]).sum(-1)
        if self.entropy > 0 and self.training:
            g = torch.sigmoid(z)
            h = -(g * F.logsigmoid(z) + (1.0 - g) * F.logsigmoid(-z))
            h = torch.where(mask, h, torch.zeros_like(h)).sum(-1) / mask.sum(-1).clamp(min=1)
            value = value + self.entropy * h
        return value

    def soft_output(self, batch) -> torch.Tensor:
        return prefix_weights(self.logits(batch["x"]), batch["mask"], self.prefix)

    def k_from_soft(self, soft, batch) -> torch.Tensor:
        return ((soft >= self.threshold) & batch["mask"].to(torch.bool)).sum(-1)


class GateSelector(LearnedSelector):
    """Per-passage gate selector (module doc): :class:`GateModule`'s hyper-parameters (``hidden=0``: linear)
    and those of :class:`~udcg_ltr.select.nn.LearnedSelector`."""

    kind = "gate"
    module_class = GateModule

    def __init__(self, *, hidden: int = 0, n_layers: int = 1, dropout: float = 0.0, prefix: str = "cumprod",
                 objective: str = "soft_mask", threshold: float = 0.5, init_bias: float = 0.0, entropy: float = 0.01,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.hidden, self.n_layers, self.dropout = int(hidden), int(n_layers), float(dropout)
        self.prefix, self.objective, self.threshold, self.init_bias = prefix, objective, float(threshold), float(init_bias)
        self.entropy = float(entropy)
        GateModule(1, prefix=prefix, objective=objective, threshold=threshold)  # validates the choices
