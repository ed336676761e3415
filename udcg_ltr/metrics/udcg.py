"""UDCG and UDCG_theta (UDCG paper, Eqs. 3 and 4), vectorised over padded ``[n_queries, k]`` contexts.

UDCG is a set function of a context ``C`` of ``k`` passages:

* Eq. 4, training-free: ``UDCG(q, C) = sigmoid((1/k) * sum_i u_i+  +  (gamma/k) * sum_i u_i-)``
  with ``gamma = 1/3`` by default. It does not depend on passage order.
* Eq. 3, learned: ``UDCG_theta(q, C) = sigmoid(sum_i alpha_i u_i+  +  sum_i beta_i u_i-)`` with
  ``2k`` positional weights (``alpha`` for useful passages, ``beta`` for harmful ones) fitted per
  context size ``k`` (see :mod:`udcg_ltr.fit`).

``k`` is the number of real passages in the context (after an optional cutoff). An empty context
scores ``sigmoid(0) = 0.5``: no evidence either way, which sits between helpful (> 0.5) and
harmful (< 0.5) contexts, as an abstention sits between a correct and a wrong answer.
"""

from __future__ import annotations

import numpy as np

from udcg_ltr.metrics._common import as_padded, cutoff_mask, positions

DEFAULT_GAMMA = 1.0 / 3.0


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))  # overflow-free logistic


def udcg_logit(utilities, mask=None, *, k: int | None = None, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """The argument of the sigmoid in Eq. 4, per query."""
    u, mask = as_padded(utilities, mask)
    mask = cutoff_mask(mask, k)
    u = np.where(mask, u, 0.0)
    n = mask.sum(axis=1)
    pos = np.where(u > 0, u, 0.0).sum(axis=1)
    neg = np.where(u < 0, u, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (pos + gamma * neg) / n
    return np.where(n > 0, z, 0.0)


def udcg(utilities, mask=None, *, k: int | None = None, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """UDCG, Eq. 4: ``sigmoid((1/k) sum u+ + (gamma/k) sum u-)`` per query, in (0, 1)."""
    return sigmoid(udcg_logit(utilities, mask, k=k, gamma=gamma))


def udcg_theta(utilities, alpha, beta, mask=None, *, k: int | None = None) -> np.ndarray:
    """UDCG_theta, Eq. 3: ``sigmoid(sum_i alpha_i u_i+ + sum_i beta_i u_i-)`` per query.

    ``alpha`` and ``beta`` are positional weights of length >= the context size (``[k]``) or
    per-query ``[n_queries, k]`` arrays; position ``i`` is the rank of the ``i``-th real passage.
    """
    u, mask = as_padded(utilities, mask)
    mask = cutoff_mask(mask, k)
    pos_idx = positions(mask)
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    n_max = int(pos_idx.max(initial=-1)) + 1
    if alpha.ndim == 1:
        if alpha.shape[0] < n_max or beta.shape[0] < n_max:
            raise ValueError(f"need >= {n_max} positional weights, got alpha {alpha.shape}, beta {beta.shape}")
        safe = np.clip(pos_idx, 0, None)
        a, b = alpha[safe], beta[safe]
    else:
        a, b = alpha, beta
    u = np.where(mask, u, 0.0)
    z = (a * np.where(u > 0, u, 0.0) + b * np.where(u < 0, u, 0.0)).sum(axis=1)
    return sigmoid(z)


def udcg_equivalent_weights(k: int, gamma: float = DEFAULT_GAMMA) -> tuple[np.ndarray, np.ndarray]:
    """The UDCG_theta weights that reproduce Eq. 4: ``alpha_i = 1/k``, ``beta_i = gamma/k``."""
    return np.full(k, 1.0 / k), np.full(k, gamma / k)
