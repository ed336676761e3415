"""UDCG and UDCG_theta (UDCG paper, Eqs. 3 and 4), vectorised over padded ``[n_queries, k]`` contexts.

* Eq. 4, training-free: ``UDCG(q, C) = sigmoid((1/k) * sum_i u_i+  +  (gamma/k) * sum_i u_i-)``
  with ``gamma = 1/3`` by default. It does not depend on passage order.
* Eq. 3, learned: ``UDCG_theta(q, C) = sigmoid(sum_i alpha_i u_i+  +  sum_i beta_i u_i-)`` with
  ``2k`` positional weights fitted per context size ``k`` (see :mod:`udcg_ltr.fit`).

``k`` is the number of real passages in the context (after an optional cutoff). An empty context scores
``sigmoid(0) = 0.5``: no evidence either way, as an abstention sits between a correct and a wrong answer.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from udcg_ltr.metrics._common import check_not_nan, column_positions, masked, n_real, prepare, ratio

DEFAULT_GAMMA = 1.0 / 3.0


def sigmoid(x):
    """The logistic function ``1 / (1 + exp(-x))`` of Eqs. 3-4, computed as ``(1 + tanh(x/2)) / 2``."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))  # overflow-free logistic


def check_gamma(gamma) -> None:
    """``gamma`` (Eq. 4's weight of the negative utilities) must be a finite number: with NaN every UDCG becomes
    NA and :func:`udcg_ltr.metrics.mean` would silently drop them all."""
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not math.isfinite(gamma):
        raise ValueError(f"gamma must be a finite number, got {gamma!r}")


def udcg_logit(utilities, mask=None, *, k: int | None = None, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """The argument of the sigmoid in Eq. 4, per query: ``(sum u+ + gamma * sum u-) / k`` (0 when empty)."""
    check_gamma(gamma)
    u, m = prepare(utilities, mask, k, dtype=np.float64)
    u = masked(u, m)
    n = n_real(u, m)
    pos = np.where(u > 0, u, 0.0).sum(axis=1)
    neg = np.where(u < 0, u, 0.0).sum(axis=1)
    return ratio(pos + gamma * neg, n)


def udcg(utilities, mask=None, *, k: int | None = None, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """UDCG, Eq. 4: ``sigmoid((1/k) sum u+ + (gamma/k) sum u-)`` per query, in (0, 1)."""
    return sigmoid(udcg_logit(utilities, mask, k=k, gamma=gamma))


def udcg_theta(utilities, alpha, beta, mask=None, *, k: int | None = None) -> np.ndarray:
    """UDCG_theta, Eq. 3: ``sigmoid(sum_i alpha_i u_i+ + sum_i beta_i u_i-)`` per query; ``alpha``/``beta``
    ``[k]`` or ``[n_queries, k]``, weight ``i`` for the ``i``-th real passage of the row."""
    u, m = prepare(utilities, mask, k, dtype=np.float64)
    u = masked(u, m)
    n_max = int(n_real(u, m).max(initial=0))
    alpha, beta = np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    for name, w in (("alpha", alpha), ("beta", beta)):
        if w.ndim not in (1, 2):
            raise ValueError(f"{name}: expected [k] or [n_queries, k] positional weights, got {w.shape}")
        check_not_nan(w, None, name)
    if alpha.shape[-1] < n_max or beta.shape[-1] < n_max:
        raise ValueError(f"need >= {n_max} positional weights, got alpha {alpha.shape}, beta {beta.shape}")
    if alpha.ndim > 1 and (alpha.shape[0] != u.shape[0] or beta.shape[0] != u.shape[0]):
        raise ValueError(f"per-query weights need {u.shape[0]} rows, got alpha {alpha.shape}, beta {beta.shape}")
    rank = np.clip(column_positions(u, m), 0, None)  # padding: any weight, its utility is 0

    def at_rank(w: np.ndarray) -> np.ndarray:
        return np.take_along_axis(np.broadcast_to(w, (u.shape[0], w.shape[-1])), rank, axis=1)

    return sigmoid((at_rank(alpha) * np.where(u > 0, u, 0.0) + at_rank(beta) * np.where(u < 0, u, 0.0)).sum(axis=1))


def udcg_equivalent_weights(k: int, gamma: float = DEFAULT_GAMMA) -> tuple[np.ndarray, np.ndarray]:
    """The UDCG_theta weights that reproduce Eq. 4: ``alpha_i = 1/k``, ``beta_i = gamma/k``."""
    return np.full(k, 1.0 / k), np.full(k, gamma / k)
