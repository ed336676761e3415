"""Reference SVM-rank fit with scikit-learn (liblinear), to check :mod:`udcg_ltr.fit.svmrank`.

The pairwise SVM as a binary one: each pair difference ``d_p`` a positive example and ``-d_p`` a negative
one, fitted by ``LinearSVC(fit_intercept=False)``; each pair appears twice, so ``C_sk = C / 2`` makes the
objective identical to ours, ``0.5 ||w||^2 + C sum_p l(w . d_p)``, and the optima coincide.
"""

from __future__ import annotations

import warnings

import numpy as np


def symmetrise(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    diffs = np.asarray(diffs, dtype=np.float64)
    return np.concatenate([diffs, -diffs]), np.repeat([1.0, -1.0], len(diffs))


def fit_reference_sklearn(diffs: np.ndarray, *, C: float = 1.0, loss: str = "hinge", tol: float = 1e-6,
                          max_iter: int = 200_000, random_state: int = 0) -> np.ndarray:
    """``w`` minimising ``0.5 ||w||^2 + C sum_p l(w . d_p)`` via ``LinearSVC`` on the symmetrised pairs."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC

    diffs = np.asarray(diffs, dtype=np.float64)
    if len(diffs) == 0:
        return np.zeros(diffs.shape[1])
    X, y = symmetrise(diffs)
    model = LinearSVC(C=C / 2.0, loss=loss, fit_intercept=False, dual=True, tol=tol, max_iter=max_iter,
                      random_state=random_state)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X, y)
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):
        warnings.warn(f"LinearSVC did not converge in max_iter={max_iter} (tol={tol}); the reference is approximate",
                      RuntimeWarning, stacklevel=2)
    return model.coef_.ravel().copy()


def primal_objective(w: np.ndarray, diffs: np.ndarray, *, C: float = 1.0, loss: str = "hinge") -> float:
    """``0.5 ||w||^2 + C sum_p l(w . d_p)``: the quantity both fits minimise."""
    slack = np.maximum(0.0, 1.0 - np.asarray(diffs) @ np.asarray(w))
    if loss == "squared_hinge":
        slack = slack ** 2
    return float(0.5 * np.dot(w, w) + C * slack.sum())


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two weight vectors (NaN when one is zero)."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return float("nan")
    return float(a @ b / (na * nb))
