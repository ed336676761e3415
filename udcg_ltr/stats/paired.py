"""Tests on paired per-query outcomes (the same queries under two or more conditions): Wilcoxon signed-rank,
McNemar's exact test and Cochran's Q. scipy is imported inside the functions (about 2 s to import).
"""

from __future__ import annotations

import numpy as np


def wilcoxon_paired(a, b) -> dict[str, float]:
    """Wilcoxon signed-rank test of paired per-query values (``scipy.stats.wilcoxon``, two-sided); zero differences
    dropped (``n_nonzero`` pairs remain). When none differ the test is undefined: ``p = 1``, ``statistic = NaN``."""
    from scipy.stats import wilcoxon

    a, b = (np.asarray(x, dtype=np.float64) for x in (a, b))
    nonzero = int(np.count_nonzero(a - b))
    if nonzero == 0:
        return {"statistic": float("nan"), "p": 1.0, "n_nonzero": 0}
    res = wilcoxon(a, b, zero_method="wilcox", alternative="two-sided")
    return {"statistic": float(res.statistic), "p": float(res.pvalue), "n_nonzero": nonzero}


def mcnemar_exact(a, b) -> dict[str, float]:
    """McNemar's exact test on paired binary outcomes: ``b01`` = a true and b false, ``b10`` the reverse;
    two-sided binomial test of ``b01`` among the discordant pairs at p = 0.5 (p = 1 without discordance)."""
    from scipy.stats import binomtest

    a, b = (np.asarray(x, dtype=bool) for x in (a, b))
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    n = only_a + only_b
    p = 1.0 if n == 0 else float(binomtest(only_a, n, 0.5, alternative="two-sided").pvalue)
    return {"only_a": only_a, "only_b": only_b, "p": p}


def cochran_q(matrix) -> dict[str, float]:
    """Cochran's Q test that ``k`` related binary samples (columns of ``[n, k]``) share one success rate.

    ``Q = (k - 1) (k sum_j C_j^2 - N^2) / (k N - sum_i R_i^2)`` with column sums ``C_j``, row sums ``R_i`` and ``N`` the
    total; ``p`` from chi-square with ``k - 1`` degrees of freedom. Undefined (NaN, p = 1) when every row is constant.
    """
    from scipy.stats import chi2

    x = np.asarray(matrix, dtype=np.float64)
    n, k = x.shape
    col, row = x.sum(axis=0), x.sum(axis=1)
    total = row.sum()
    denom = k * total - (row ** 2).sum()
    if k < 2 or denom <= 0:
        return {"Q": float("nan"), "df": k - 1, "p": 1.0}
    q = (k - 1) * (k * (col ** 2).sum() - total ** 2) / denom
    return {"Q": float(q), "df": k - 1, "p": float(chi2.sf(q, k - 1))}
