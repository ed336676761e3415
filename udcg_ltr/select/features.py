"""Labels-free list features of a ranked candidate list, the inputs of the learned selectors.

With ``s_1 >= ... >= s_n`` the ``n`` real scores of a row of padded width ``W``, passage ``i`` has:
``score`` ``s_i``; ``gap_top`` ``s_i - s_1``; ``rank`` ``(i - 1) / (W - 1)``; ``inv_rank`` ``1 / i``;
``diff_prev`` ``s_{i-1} - s_i`` (0 at rank 1); ``diff_next`` ``s_i - s_{i+1}`` (0 at rank n); ``minmax``
``(s_i - s_n) / (s_1 - s_n)`` (1 on a constant row); ``softmax`` ``exp((s_i - s_1) / T)`` normalised over
the real passages; ``cum_softmax`` ``sum_{j <= i} softmax_j``; ``sigmoid`` ``sigmoid(s_i / T)``;
``zscore`` ``(s_i - mean) / std`` (0 when std = 0); row-level ``top_margin`` ``s_1 - s_2`` and ``n_real``
``n / W``. Each extra array (e.g. the retriever's score) adds ``{name}``, ``{name}_gap_top``
(``v_i - max_j v_j``) and ``{name}_minmax``. Padding gets 0; ``T`` is the ``temperature`` (score units).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from udcg_ltr.metrics.udcg import sigmoid
from udcg_ltr.select.base import RankedSlates

PASSAGE_FEATURES = ("score", "gap_top", "rank", "inv_rank", "diff_prev", "diff_next", "minmax", "softmax",
                    "cum_softmax", "sigmoid", "zscore", "top_margin", "n_real")


def feature_names(features: Sequence[str] = PASSAGE_FEATURES, extra_features: Sequence[str] = ()) -> list[str]:
    """Column names of :func:`passage_features` (per-passage features, then each extra array's three)."""
    unknown = [f for f in features if f not in PASSAGE_FEATURES]
    if unknown:
        raise ValueError(f"unknown features {unknown} (choose from {PASSAGE_FEATURES})")
    return list(features) + [f"{name}{suffix}" for name in extra_features for suffix in ("", "_gap_top", "_minmax")]


def _tiny(scale: np.ndarray) -> np.ndarray:
    """Spreads below this are rounding noise of the scores' magnitude: treated as a constant row."""
    return 1e-9 * np.maximum(np.abs(scale), 1.0)


def row_minmax(v: np.ndarray, m: np.ndarray) -> np.ndarray:
    hi = np.where(m, v, -np.inf).max(axis=1, initial=-np.inf)[:, None]
    lo = np.where(m, v, np.inf).min(axis=1, initial=np.inf)[:, None]
    spread = hi - lo
    ok = spread > _tiny(np.where(np.isfinite(hi), hi, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(m, np.where(ok, (v - lo) / np.where(ok, spread, 1.0), 1.0), 0.0)


def passage_features(ranked: RankedSlates, features: Sequence[str] = PASSAGE_FEATURES, *,
                     extra_features: Sequence[str] = (), temperature: float = 1.0) -> np.ndarray:
    """``[Q, W, F]`` float64 features of every ranked passage (see the module table); padding is 0."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    names = feature_names(features, extra_features)
    s, m = ranked.scores, ranked.mask
    q, w = s.shape
    n = m.sum(axis=1)
    top = s[:, :1] if w else np.zeros((q, 1))
    idx = np.arange(w)[None, :]
    real_next = np.concatenate([m[:, 1:], np.zeros((q, min(w, 1)), bool)], axis=1)
    nxt = np.concatenate([s[:, 1:], s[:, -1:]], axis=1) if w else s
    e = np.where(m, np.exp((s - top) / temperature), 0.0)
    softmax = e / np.maximum(e.sum(axis=1, keepdims=True), 1e-300)
    mean = np.where(m, s, 0.0).sum(axis=1, keepdims=True) / np.maximum(n, 1)[:, None]
    std = np.sqrt(np.where(m, (s - mean) ** 2, 0.0).sum(axis=1, keepdims=True) / np.maximum(n, 1)[:, None])
    margin = np.where(n >= 2, s[:, 0] - s[:, 1], 0.0) if w >= 2 else np.zeros(q)
    ok = std > _tiny(mean)

    def full(a):
        return np.broadcast_to(a, s.shape)

    cols = {
        "score": s, "gap_top": s - top, "rank": full(idx / max(w - 1, 1)), "inv_rank": full(1 / (idx + 1.0)),
        "diff_prev": np.concatenate([np.zeros((q, min(w, 1))), s[:, :-1] - s[:, 1:]], axis=1),
        "diff_next": np.where(real_next, s - nxt, 0.0), "minmax": row_minmax(s, m), "softmax": softmax,
        "cum_softmax": np.where(m, np.cumsum(softmax, axis=1), 0.0), "sigmoid": sigmoid(s / temperature),
        "zscore": np.where(ok, (s - mean) / np.where(ok, std, 1.0), 0.0),
        "top_margin": full(margin[:, None]), "n_real": full((n / max(w, 1))[:, None])}
    for name in extra_features:
        if name not in ranked.extra:
            raise ValueError(f"extra feature {name!r} is not in the ranked slates (have {sorted(ranked.extra)})")
        v = ranked.extra[name]
        hi = np.where(m, v, -np.inf).max(axis=1, initial=-np.inf)[:, None]
        cols[name] = v
        cols[f"{name}_gap_top"] = np.where(m, v - np.where(np.isfinite(hi), hi, 0.0), 0.0)
        cols[f"{name}_minmax"] = row_minmax(v, m)
    x = np.stack([np.asarray(cols[c], dtype=np.float64) for c in names], axis=-1) if names else np.zeros((q, w, 0))
    return np.where(m[:, :, None], x, 0.0)


class FeatureScaler:
    """Per-feature standardisation (mean 0, std 1) fitted on the real passages of the training rows."""

    def __init__(self, mean=None, std=None):
        self.mean = None if mean is None else np.asarray(mean, dtype=np.float64)
        self.std = None if std is None else np.asarray(std, dtype=np.float64)

    def fit(self, x: np.ndarray, mask: np.ndarray) -> FeatureScaler:
        real = x[mask]
        if real.shape[0] == 0:
            raise ValueError("no real passage to fit the feature scaler on")
        self.mean = real.mean(axis=0)
        std = real.std(axis=0)
        self.std = np.where(std > 1e-12, std, 1.0)  # a constant feature stays constant (0 after centring)
        return self

    def transform(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self.mean is None:
            raise RuntimeError("FeatureScaler is not fitted")
        if x.shape[-1] != self.mean.shape[0]:
            raise ValueError(f"expected {self.mean.shape[0]} features, got {x.shape[-1]}")
        return np.where(mask[:, :, None], (x - self.mean) / self.std, 0.0)

