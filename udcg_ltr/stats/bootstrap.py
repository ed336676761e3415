"""Bootstrap over queries: percentile confidence intervals and paired significance tests.

Queries are the unit of resampling; NaN ("NA") queries are left out first. Intervals are Efron's percentile
method over ``B`` seeded resamples with replacement (vectorised: a ``[B, n]`` index matrix). The paired test
resamples the *centred* differences ``d_q - mean(d)`` of the queries where both sides are defined (the shift
method): two-sided ``p = (1 + #{|mean(d*) - mean(d)| >= |mean(d)|}) / (B + 1)``, never exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _clean(values) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).ravel()
    return v[~np.isnan(v)]


def resample_index(n: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """``[B, n]`` indices of ``B`` seeded resamples of ``n`` queries with replacement."""
    return np.random.default_rng(seed).integers(0, n, size=(n_bootstrap, n))


def percentile_interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap ``samples`` (percentile method)."""
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(samples, [tail, 1.0 - tail])
    return float(lo), float(hi)


def bootstrap_means(values, n_bootstrap: int = 1000, seed: int = 0) -> np.ndarray:
    """``B`` bootstrap means of the defined values (empty array when none are defined)."""
    v = _clean(values)
    return np.zeros(0) if v.size == 0 or n_bootstrap <= 0 else v[resample_index(v.size, n_bootstrap, seed)].mean(axis=1)


def bootstrap_ci(values, n_bootstrap: int = 1000, seed: int = 0, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean over queries; ``(nan, nan)`` with no defined value."""
    means = bootstrap_means(values, n_bootstrap, seed)
    return percentile_interval(means, confidence) if means.size else (float("nan"), float("nan"))


def rate_ci(values, n_bootstrap: int, seed: int) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: the mean over queries (NaN left out) with its bootstrap percentile 95% interval."""
    v = _clean(values)
    return (float(v.mean()) if v.size else float("nan"), *bootstrap_ci(v, n_bootstrap, seed))


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
    a, b = (np.asarray(x, dtype=np.float64).ravel() for x in (a, b))
    if a.shape != b.shape:
        raise ValueError(f"paired values must align: {a.shape} vs {b.shape}")
    both = ~np.isnan(a) & ~np.isnan(b)
    d = a[both] - b[both]
    n = int(d.size)
    if n == 0:
        return PairedTest(float("nan"), float("nan"), float("nan"), float("nan"), 0)
    observed = float(d.mean())
    means = d[resample_index(n, n_bootstrap, seed)].mean(axis=1)
    lo, hi = percentile_interval(means, confidence)
    # Null: the centred differences; count resampled deviations at least as extreme as observed.
    extreme = np.abs(means - observed) >= abs(observed) - 1e-15
    p = (1.0 + float(extreme.sum())) / (n_bootstrap + 1.0)
    return PairedTest(mean_diff=observed, lo=lo, hi=hi, p_value=min(1.0, p), n=n)


def paired_difference(a, b, n_bootstrap: int, seed: int) -> dict[str, float]:
    """:func:`paired_bootstrap_test` as the row a study reports: ``{"diff", "lo", "hi", "p_bootstrap", "n"}``."""
    t = paired_bootstrap_test(a, b, n_bootstrap, seed)
    return {"diff": t.mean_diff, "lo": t.lo, "hi": t.hi, "p_bootstrap": t.p_value, "n": t.n}


def paired_ratio_ci(a, b, n_bootstrap: int, seed: int, confidence: float = 0.95) -> tuple[float, float, float]:
    """``mean(a) / mean(b)`` with a percentile CI from resampling the same queries for both
    (``(nan, nan, nan)`` when ``mean(b) = 0``; resamples with a zero denominator are dropped)."""
    a, b = (np.asarray(x, dtype=np.float64) for x in (a, b))
    if a.size == 0 or b.mean() == 0:
        return float("nan"), float("nan"), float("nan")
    idx = resample_index(a.size, n_bootstrap, seed)
    num, den = a[idx].mean(axis=1), b[idx].mean(axis=1)
    ok = den > 0
    lo, hi = percentile_interval(num[ok] / den[ok], confidence) if ok.any() else (float("nan"), float("nan"))
    return float(a.mean() / b.mean()), lo, hi


def gap_closed_bootstrap(selected, fixed, oracle, n_bootstrap: int = 1000, seed: int = 0,
                         confidence: float = 0.95) -> tuple[float, float, float]:
    """The share of the oracle's gain over a baseline that a selector closes, ``G = mean(s - f) / mean(o - f)`` over
    per-query values, with its paired percentile CI (:func:`paired_ratio_ci`: the three arrays resampled with the same
    queries; a resample with no oracle gain is dropped; NaN when the oracle gains nothing)."""
    selected, fixed, oracle = (np.asarray(a, dtype=np.float64) for a in (selected, fixed, oracle))
    if not selected.shape == fixed.shape == oracle.shape:
        raise ValueError(f"arrays must align: {selected.shape}, {fixed.shape}, {oracle.shape}")
    return paired_ratio_ci(selected - fixed, oracle - fixed, n_bootstrap, seed, confidence)
