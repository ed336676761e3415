"""Bootstrap over queries: percentile confidence intervals and a paired significance test.

Queries are the unit of resampling (the per-query correlations are the observations); NaN ("NA")
queries are left out before resampling, and every function reports how many remained.

* :func:`bootstrap_ci`: percentile interval of the mean, ``B`` resamples of the ``n`` defined values
  with replacement (Efron's percentile method);
* :func:`paired_bootstrap_test`: for two metrics on the same queries (those where *both* are
  defined), the differences ``d_q = a_q - b_q``; the null distribution of the mean difference is
  obtained by resampling the *centred* differences ``d_q - mean(d)`` (the shift method), and the
  two-sided p-value is ``(1 + #{|mean(d*) - mean(d)| >= |mean(d)|}) / (B + 1)`` (never exactly 0).
  It also returns the percentile CI of the mean difference.

All resampling is vectorised (a ``[B, n]`` index matrix) and seeded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _clean(values) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).ravel()
    return v[~np.isnan(v)]


def bootstrap_means(values, n_bootstrap: int = 1000, seed: int = 0) -> np.ndarray:
    """``B`` bootstrap means of the defined values (empty array when none are defined)."""
    v = _clean(values)
    if v.size == 0 or n_bootstrap <= 0:
        return np.zeros(0)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, v.size, size=(n_bootstrap, v.size))
    return v[idx].mean(axis=1)


def bootstrap_ci(values, n_bootstrap: int = 1000, seed: int = 0, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean over queries; ``(nan, nan)`` with no defined value."""
    means = bootstrap_means(values, n_bootstrap, seed)
    if means.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class PairedTest:
    """Result of :func:`paired_bootstrap_test` (``a`` minus ``b`` over the queries where both are defined)."""

    mean_diff: float
    lo: float
    hi: float
    p_value: float
    n: int


def paired_bootstrap_test(a, b, n_bootstrap: int = 1000, seed: int = 0, confidence: float = 0.95) -> PairedTest:
    """Two-sided paired bootstrap test of ``mean(a - b) = 0`` (see the module docstring)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired values must align: {a.shape} vs {b.shape}")
    both = ~np.isnan(a) & ~np.isnan(b)
    d = a[both] - b[both]
    n = int(d.size)
    if n == 0:
        return PairedTest(float("nan"), float("nan"), float("nan"), float("nan"), 0)
    observed = float(d.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_bootstrap, n))
    means = d[idx].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    # Null: the centred differences; count resampled deviations at least as extreme as observed.
    extreme = np.abs(means - observed) >= abs(observed) - 1e-15
    p = (1.0 + float(extreme.sum())) / (n_bootstrap + 1.0)
    return PairedTest(mean_diff=observed, lo=float(lo), hi=float(hi), p_value=min(1.0, p), n=n)
