"""UDCG_theta weight sets: the learned positional weights of Eq. 3, saved, reloaded and plotted.

``UDCG_theta(q, C) = sigmoid(sum_i alpha_i u_i+ + sum_i beta_i u_i-)`` for a context of ``k`` passages in
prompt order; ``meta["variant"]`` tells how utilities become features (:mod:`udcg_ltr.fit.pairs`). Files are
JSON (``{"format": "udcg_ltr.udcg_theta/1", "weights": [...]}``), written atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.fit.pairs import FEATURE_VARIANTS
from udcg_ltr.io import atomic_write_json, json_safe, open_text
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, udcg_equivalent_weights, udcg_theta
from udcg_ltr.report import new_figure, save_figure

FORMAT = "udcg_ltr.udcg_theta/1"
#: Display name of each feature variant's weight set (also the correlation study's row labels).
VARIANT_NAMES = {"full": "UDCG_theta", "relevance_only": "UDCG_theta (rel-only)", "binary": "UDCG_theta (binary)"}


@dataclass
class UDCGThetaWeights:
    """Positional weights of UDCG_theta (Eq. 3) for contexts of ``k`` passages."""

    k: int
    alpha: np.ndarray
    beta: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.alpha = np.asarray(self.alpha, dtype=np.float64).ravel()
        self.beta = np.asarray(self.beta, dtype=np.float64).ravel()
        if self.alpha.shape != (self.k,) or self.beta.shape != (self.k,):
            raise ValueError(f"alpha and beta must have length k={self.k}, got {self.alpha.shape}, {self.beta.shape}")
        if self.variant not in FEATURE_VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}")

    @property
    def variant(self) -> str:
        return self.meta.get("variant", "full")

    @property
    def name(self) -> str:
        return self.meta.get("name") or VARIANT_NAMES[self.variant]

    @property
    def vector(self) -> np.ndarray:
        """``w = [alpha, beta]``: the linear model over ``[u+, u-]`` features."""
        return np.concatenate([self.alpha, self.beta])

    def _inputs(self, utilities, relevant):
        u = np.asarray(utilities, dtype=np.float64)
        if self.variant != "binary":
            return u
        # Binary ablation: a relevant passage contributes alpha_i * 1, an irrelevant one beta_i * u-.
        rel = (u > 0) if relevant is None else np.asarray(relevant, dtype=bool)
        return np.where(rel, 1.0, np.minimum(u, 0.0))

    def score(self, utilities, mask=None, *, relevant=None, k: int | None = None) -> np.ndarray:
        """UDCG_theta (Eq. 3) of each context, ``[n]``: ``utilities`` ``[n, <=k]`` in prompt order (Eq. 2);
        ``relevant`` (binary variant only) gives the relevance labels, default ``u > 0``."""
        return udcg_theta(self._inputs(utilities, relevant), self.alpha, self.beta, mask, k=k)

    def logit(self, utilities, mask=None, *, relevant=None) -> np.ndarray:
        """``sum alpha_i u_i+ + sum beta_i u_i-`` (the argument of the sigmoid; same order as :meth:`score`)."""
        u = self._inputs(utilities, relevant)
        u = u if mask is None else np.where(np.asarray(mask, bool), u, 0.0)
        n = u.shape[-1]
        return (self.alpha[:n] * np.maximum(u, 0.0) + self.beta[:n] * np.minimum(u, 0.0)).sum(axis=-1)

    @classmethod
    def from_vector(cls, w: np.ndarray, k: int, *, variant: str = "full", meta: dict | None = None) -> UDCGThetaWeights:
        """From the SVM weight vector over the variant's features (``[2k]``, or ``[k]`` for ``relevance_only``)."""
        w = np.asarray(w, dtype=np.float64).ravel()
        n = k if variant == "relevance_only" else 2 * k
        if w.shape != (n,):
            raise ValueError(f"variant {variant!r} expects {n} weights for k={k}, got {w.shape}")
        alpha, beta = (w, np.zeros(k)) if n == k else (w[:k], w[k:])
        return cls(k=k, alpha=alpha, beta=beta, meta={**(meta or {}), "variant": variant})

    @classmethod
    def udcg_equivalent(cls, k: int, gamma: float = DEFAULT_GAMMA) -> UDCGThetaWeights:
        """The weights that make Eq. 3 equal Eq. 4 (``alpha_i = 1/k``, ``beta_i = gamma/k``)."""
        a, b = udcg_equivalent_weights(k, gamma)
        return cls(k=k, alpha=a, beta=b, meta={"variant": "full", "name": f"UDCG (gamma={gamma:.3g})", "gamma": gamma})

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "alpha": self.alpha.tolist(), "beta": self.beta.tolist(), "meta": json_safe(self.meta)}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> UDCGThetaWeights:
        for key in ("k", "alpha", "beta"):
            if key not in obj:
                raise ValueError(f"weight entry lacks {key!r}")
        return cls(k=int(obj["k"]), alpha=np.asarray(obj["alpha"], dtype=np.float64),
                   beta=np.asarray(obj["beta"], dtype=np.float64), meta=dict(obj.get("meta", {})))


def save_weights(path: str | os.PathLike, weights: UDCGThetaWeights | Iterable[UDCGThetaWeights]) -> Path:
    """Write one or several weight sets to a JSON file, atomically."""
    items = [weights] if isinstance(weights, UDCGThetaWeights) else list(weights)
    atomic_write_json(path, {"format": FORMAT, "weights": [w.to_dict() for w in items]})
    return Path(path)


def load_weights(path: str | os.PathLike) -> list[UDCGThetaWeights]:
    with open_text(path) as f:
        obj = json.load(f)
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise ValueError(f"{path}: not a UDCG_theta weight file (format {obj.get('format') if isinstance(obj, dict) else None!r})")
    return [UDCGThetaWeights.from_dict(w) for w in obj["weights"]]


def load_weight(path: str | os.PathLike, *, k: int | None = None, variant: str | None = None) -> UDCGThetaWeights:
    """The single weight set of ``path`` matching ``k`` / ``variant`` (error when none or several match)."""
    found = [w for w in load_weights(path) if (k is None or w.k == k) and (variant is None or w.variant == variant)]
    if len(found) != 1:
        raise KeyError(f"{path}: {len(found)} weight sets match k={k}, variant={variant}")
    return found[0]


def plot_weights(weights: Sequence[UDCGThetaWeights] | UDCGThetaWeights, path: str | os.PathLike, *,
                 title: str | None = None, reference: UDCGThetaWeights | None = None, normalize: bool = False) -> Path:
    """PNG of ``alpha_i`` and ``beta_i`` by prompt position, one line per weight set, ``reference`` dashed;
    ``normalize`` divides each set by its ``sum(alpha)`` (UDCG_theta's ranking ignores a positive scale)."""
    items = [weights] if isinstance(weights, UDCGThetaWeights) else list(weights)
    fig, axes = new_figure(ncols=2, figsize=(10, 4))
    for w, style in [(w, "-o") for w in items] + ([(reference, "--")] if reference is not None else []):
        scale = 1.0 / w.alpha.sum() if normalize and w.alpha.sum() != 0 else 1.0
        pos = np.arange(1, w.k + 1)
        axes[0].plot(pos, w.alpha * scale, style, label=w.name)
        axes[1].plot(pos, w.beta * scale, style, label=w.name)
    for ax, sym, what in ((axes[0], "alpha", "useful (u+)"), (axes[1], "beta", "harmful (u-)")):
        ax.set(xlabel="position in the prompt", ylabel=f"{sym}_i" + (" / sum(alpha)" if normalize else ""),
               title=f"{sym}: weight of {what} passages")
        ax.axhline(0.0, color="grey", lw=0.5)
        ax.grid(alpha=0.3)
        if items:
            ax.set_xticks(np.arange(1, max(w.k for w in items) + 1))
    axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)
