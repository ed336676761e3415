"""Fitting UDCG_theta (Eq. 3) per context size: Eq. 3 features of a ContextTable, within-query pairs of
contexts with different outcomes, the linear SVM-rank fit (:func:`udcg_ltr.fit.svmrank.fit_pairwise_svm`)
and a :class:`~udcg_ltr.fit.weights.UDCGThetaWeights` with the fit's provenance in ``meta``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.fit.pairs import ContextTable, build_context_table, build_pairs, table_features
from udcg_ltr.fit.svmrank import fit_pairwise_svm, pairwise_accuracy
from udcg_ltr.fit.weights import UDCGThetaWeights
from udcg_ltr.stats.correlation import per_query_correlations


def fit_udcg_theta(table: ContextTable, *, variant: str = "full", C: float = 1.0, loss: str = "hinge",
                   optimizer: str = "newton", meta: dict | None = None, **fit_kwargs) -> UDCGThetaWeights:
    """Fit UDCG_theta weights for the contexts of ``table`` with the SVM-rank objective; ungraded contexts
    (NaN outcome) take part in no pair. ``meta`` is merged into the weights' meta."""
    pairs = build_pairs(table_features(table, variant), table.qids, table.outcome)
    w = fit_pairwise_svm(pairs.diffs, C=C, loss=loss, optimizer=optimizer, **fit_kwargs)
    info = {"variant": variant, "C": C, "loss": loss, "optimizer": optimizer, "llm": table.llm,
            "n_contexts": int(len(table)), "n_queries": int(len(set(table.qids.tolist()))), "n_pairs": int(len(pairs)),
            "n_queries_with_pairs": int(pairs.n_queries), "train_pairwise_accuracy": pairwise_accuracy(w, pairs.diffs)}
    return UDCGThetaWeights.from_vector(w, table.k, variant=variant, meta={**info, **(meta or {})})


def fit_udcg_theta_per_k(records: Sequence[QueryRecord], runs: Sequence, llm: str, *,
                         variants: Sequence[str] = ("full",), relevance_threshold: int = 1,
                         **kwargs) -> dict[int, dict[str, UDCGThetaWeights]]:
    """One weight set per context size ``k`` present in ``runs`` (and per variant): ``{k: {variant: weights}}``;
    each k's context table is built once and shared by its variants."""
    by_k: dict[int, list] = {}
    for run in runs:
        by_k.setdefault(len(run.pids), []).append(run)
    out: dict[int, dict[str, UDCGThetaWeights]] = {}
    for k in sorted(by_k):
        table = build_context_table(records, by_k[k], llm, k=k, relevance_threshold=relevance_threshold)
        out[k] = {v: fit_udcg_theta(table, variant=v, **kwargs) for v in variants}
    return out


DEFAULT_C_GRID: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)


def select_C(table: ContextTable, *, variant: str = "full", grid: Sequence[float] = DEFAULT_C_GRID, n_folds: int = 5,
             seed: int = 0, **fit_kwargs) -> tuple[float, list[dict]]:
    """Choose C by query-grouped K-fold cross-validation on ``table`` (use the fit split only): each fold is
    scored by the mean per-query Spearman correlation of UDCG_theta with the outcomes on its held-out queries
    (NA left out). Returns the best C (ties: the smaller, more regularised) and one row per grid point."""
    queries = np.array(sorted(set(table.qids.tolist())), dtype=object)
    rng = np.random.default_rng(seed)
    fold_of = dict(zip(queries.tolist(), rng.permutation(len(queries)) % max(2, min(n_folds, len(queries)))))
    folds = np.array([fold_of[q] for q in table.qids.tolist()])
    rows = []
    for C in sorted(set(float(c) for c in grid)):
        held = []
        for f in np.unique(folds):
            w = fit_udcg_theta(table.subset(folds != f), variant=variant, C=C, **fit_kwargs)
            t = table.subset(folds == f)
            corr = per_query_correlations(t.qids, w.score(t.utility, t.mask, relevant=t.relevant), t.outcome).spearman
            held.extend(corr[~np.isnan(corr)].tolist())
        rows.append({"C": C, "cv_mean_spearman": float(np.mean(held)) if held else float("nan"),
                     "n_heldout_queries": len(held)})
    scores = np.array([r["cv_mean_spearman"] for r in rows])
    return (rows[int(np.nanargmax(scores))]["C"] if np.isfinite(scores).any() else 1.0), rows


def weights_rows(weights: Sequence[UDCGThetaWeights]) -> list[dict]:
    """Long-format rows (one per position) for tables / W&B: name, k, position, alpha, beta."""
    return [{"name": w.name, "variant": w.variant, "k": w.k, "position": i + 1, "alpha": float(w.alpha[i]),
             "beta": float(w.beta[i])} for w in weights for i in range(w.k)]
