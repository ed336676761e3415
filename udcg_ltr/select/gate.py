"""The per-passage gate: keep/drop each ranked passage from its list features, trained to maximise UDCG.

A small network ``h`` (linear or MLP, shared across positions) maps the standardised features
``x_i`` of the passage at rank ``i`` (:mod:`udcg_ltr.select.features`) to a gate probability
``g_i = sigmoid(h(x_i))``. The kept set must be a **prefix** of the ranking (the LLM reads the
reranker's top-k; a hole would drop a better passage and keep a worse one), so the gates are
turned into monotone inclusion weights ``w_1 >= w_2 >= ... >= w_n`` in one of two ways
(``prefix``):

* ``"cumprod"`` (default): ``w_i = prod_{j<=i} g_j``: a passage is kept only if it and every
  passage above it are gated in (a sequential "continue reading?" decision). ``w_i`` is the
  probability that the kept prefix reaches rank ``i``, and the prefix length ``K`` has
  ``P(K = k) = w_k (1 - g_{k+1})`` (``w_0 = 1``, ``g_{n+1} = 0``).
* ``"last"``: independent gates, keep the prefix up to the **last** gated-in passage:
  ``w_i = 1 - prod_{j>=i} (1 - g_j)`` (some passage at rank ``>= i`` is gated in), and
  ``P(K = k) = g_k prod_{j>k} (1 - g_j)``, ``P(K = 0) = prod_j (1 - g_j)``. Giving no passage
  needs *every* gate closed, and on a synthetic task where a third of the queries want ``k = 0``
  this variant never learned to abstain (both objectives) while ``"cumprod"`` did: prefer the latter.

Two training objectives (``objective``), both maximised:

* ``"soft_mask"``: the smooth relaxation of UDCG (Eq. 4) of the kept set: the inclusion weights
  go into ``udcg_torch``'s soft mask (:func:`udcg_ltr.select.nn.soft_udcg`:
  ``sigmoid((sum w u+ + gamma sum w u-) / max(sum w, 1))``), exact on hard 0/1 weights;
* ``"expected"``: the exact expected UDCG under the prefix-length distribution above,
  ``E[UDCG] = sum_k P(K = k) UDCG(top-k)``, with ``UDCG(top-k)`` from the utility targets.

Both are flat where the gates saturate (``g(1 - g) -> 0``): a gate pushed to 1 early (the
positional shortcut "keep rank 1") never learns to close for the queries whose top passage
hurts. Two remedies, both on by default: gates start undecided (``init_bias = 0``, ``g = 0.5``),
and the objective gets a small bonus ``entropy * mean_i H(g_i)`` (binary entropy of the real
gates), which keeps gradients alive and vanishes as ``entropy -> 0``.

Inference keeps ``k = #{i : w_i >= threshold}`` passages (``threshold = 0.5``: the median of the
prefix-length distribution), a prefix by construction.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.learned import LearnedSelector
from udcg_ltr.select.nn import SelectorModule, mlp, soft_udcg


def prefix_weights(logits: torch.Tensor, mask: torch.Tensor, prefix: str = "cumprod") -> torch.Tensor:
    """Monotone inclusion weights ``w [Q, W]`` from gate logits (module doc); padding gets 0."""
    mask = mask.to(torch.bool)
    if prefix == "cumprod":
        log_g = torch.where(mask, F.logsigmoid(logits), torch.full_like(logits, -1e4))
        return torch.exp(torch.cumsum(log_g, dim=-1)) * mask
    if prefix == "last":
        log_not = torch.where(mask, F.logsigmoid(-logits), torch.zeros_like(logits))  # log(1 - g); padding: log 1
        tail = torch.flip(torch.cumsum(torch.flip(log_not, [-1]), -1), [-1])  # sum_{j>=i} log(1 - g_j)
        return (1.0 - torch.exp(tail)) * mask
    raise ValueError(f"prefix must be 'cumprod' or 'last', got {prefix!r}")


def prefix_length_distribution(logits: torch.Tensor, mask: torch.Tensor, prefix: str = "cumprod") -> torch.Tensor:
    """``P(K = k)`` for ``k = 0..W`` (``[Q, W + 1]``) of the kept prefix length (module doc)."""
    mask = mask.to(torch.bool)
    q = logits.shape[0]
    zeros = torch.zeros(q, 1, dtype=logits.dtype, device=logits.device)
    if prefix == "cumprod":
        w = prefix_weights(logits, mask, "cumprod")  # P(K >= i), i = 1..W
        reach = torch.cat([torch.ones_like(zeros), w], dim=-1)  # P(K >= k), k = 0..W
        nxt = torch.cat([w, zeros], dim=-1)  # P(K >= k + 1)
        return (reach - nxt).clamp(min=0.0)
    if prefix == "last":
        log_not = torch.where(mask, F.logsigmoid(-logits), torch.zeros_like(logits))
        log_g = F.logsigmoid(logits)
        after = torch.flip(torch.cumsum(torch.flip(log_not, [-1]), -1), [-1]) - log_not  # sum_{j>i} log(1 - g_j)
        p_k = torch.where(mask, torch.exp(log_g + after), torch.zeros_like(logits))
        p_0 = torch.exp(log_not.sum(-1, keepdim=True))
        return torch.cat([p_0, p_k], dim=-1)
    raise ValueError(f"prefix must be 'cumprod' or 'last', got {prefix!r}")


class GateModule(SelectorModule):
    """Shared per-passage gate network with the objectives of the module docstring."""

    def __init__(self, n_features: int, *, hidden: int = 0, n_layers: int = 1, dropout: float = 0.0,
                 prefix: str = "cumprod", objective: str = "soft_mask", threshold: float = 0.5,
                 gamma: float = DEFAULT_GAMMA, max_k: int | None = None, lr: float = 1e-2,
                 weight_decay: float = 1e-3, init_bias: float = 0.0, entropy: float = 0.01):
        super().__init__(lr=lr, weight_decay=weight_decay)
        if prefix not in ("cumprod", "last"):
            raise ValueError(f"prefix must be 'cumprod' or 'last', got {prefix!r}")
        if objective not in ("soft_mask", "expected"):
            raise ValueError(f"objective must be 'soft_mask' or 'expected', got {objective!r}")
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        self.net = mlp(n_features, 1, hidden=hidden, n_layers=n_layers, dropout=dropout)
        with torch.no_grad():
            last = self.net if isinstance(self.net, torch.nn.Linear) else self.net[-1]
            last.bias.fill_(init_bias)
        self.prefix, self.objective_name, self.entropy = prefix, objective, float(entropy)
        self.threshold, self.gamma, self.max_k = float(threshold), float(gamma), max_k

    def logits(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        z = self.net(x).squeeze(-1)
        if self.max_k is not None and self.max_k < z.shape[1]:
            # positions past max_k are never kept
            cut = torch.arange(z.shape[1], device=z.device)[None, :] >= self.max_k
            z = torch.where(cut, torch.full_like(z, -30.0), z)
        return z

    def weights(self, batch) -> torch.Tensor:
        return prefix_weights(self.logits(batch["x"], batch["mask"]), batch["mask"], self.prefix)

    def objective(self, batch) -> torch.Tensor:
        """Per query: the UDCG objective plus ``entropy`` times the mean binary entropy of the gates."""
        z = self.logits(batch["x"], batch["mask"])
        mask = batch["mask"].to(torch.bool)
        if self.objective_name == "soft_mask":
            w = prefix_weights(z, mask, self.prefix)
            value = soft_udcg(batch["utility"], w, gamma=self.gamma)
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
        return self.weights(batch)

    def k_from_soft(self, soft, batch) -> torch.Tensor:
        return ((soft >= self.threshold) & batch["mask"].to(torch.bool)).sum(-1)


class GateSelector(LearnedSelector):
    """Per-passage gate selector (module doc). Hyper-parameters: ``hidden`` (0 = linear), ``n_layers``,
    ``dropout``, ``prefix``, ``objective``, ``threshold``, ``init_bias``, ``entropy`` and those of
    :class:`~udcg_ltr.select.learned.LearnedSelector` (features, optimisation)."""

    kind = "gate"

    def __init__(self, *, hidden: int = 0, n_layers: int = 1, dropout: float = 0.0, prefix: str = "cumprod",
                 objective: str = "soft_mask", threshold: float = 0.5, init_bias: float = 0.0, entropy: float = 0.01,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.hidden, self.n_layers, self.dropout = int(hidden), int(n_layers), float(dropout)
        self.prefix, self.objective, self.threshold, self.init_bias = prefix, objective, float(threshold), float(init_bias)
        self.entropy = float(entropy)
        GateModule(1, prefix=prefix, objective=objective, threshold=threshold)  # validates the choices

    def _build_module(self, n_features: int) -> GateModule:
        return GateModule(n_features, hidden=self.hidden, n_layers=self.n_layers, dropout=self.dropout,
                          prefix=self.prefix, objective=self.objective, threshold=self.threshold,
                          gamma=self.gamma, max_k=self.max_k, lr=self.lr, weight_decay=self.weight_decay,
                          init_bias=self.init_bias, entropy=self.entropy)

    def _module_config(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "n_layers": self.n_layers, "dropout": self.dropout, "prefix": self.prefix,
                "objective": self.objective, "threshold": self.threshold, "init_bias": self.init_bias, "entropy": self.entropy}



__all__ = ["GateModule", "GateSelector", "prefix_length_distribution", "prefix_weights"]
