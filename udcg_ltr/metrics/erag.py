"""eRAG (Salemi and Zamani, SIGIR 2024, "Evaluating Retrieval Quality in Retrieval-Augmented
Generation"): each retrieved document is given to the RAG system's LLM *alone*, its answer is scored
against the gold answers with the downstream metric, and that score is the document's relevance label
``G_q[d] = E_M(M(q, {d}), y)``. Any set or rank metric over those labels is the eRAG score of the list.

With continuous labels (F1, ROUGE-L) the authors' released code only admits ``P`` (the label sum over the top k divided
by k, as trec_eval; :func:`graded_precision`) and ``success`` (the best label in the top k; :func:`max_label`); binary
labels (EM, contains) work with every metric. :func:`erag_score`'s default is **our choice** (the paper names none):
exact-match labels (its downstream metric for NQ, TriviaQA and HotpotQA, as in KILT) with Precision@k (which the
released code supports for every label). As in the released code, the judged pool of a query is its retrieved list:
recall- or ideal-normalised metrics (Recall, MAP, nDCG) normalise by the labels of the list itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from udcg_ltr import text
from udcg_ltr.metrics import classic
from udcg_ltr.metrics._common import _as_2d, _as_mask, masked, over_cutoff, prepare

SCORERS: dict[str, Callable[[str, Sequence[str]], float]] = {"em": text.exact_match, "f1": text.token_f1,
                                                              "rouge_l": text.rouge_l, "contains": text.contains_answer}


def erag_labels(answers_alone: Sequence[Sequence[str | None]], gold: Sequence[Sequence[str] | str],
                scorer: str | Callable[[str, Sequence[str]], float] = "em", *, width: int | None = None) -> np.ndarray:
    """Downstream score of each single-passage answer (``answers_alone[q][j]``: the LLM's answer given query
    ``q`` and its ``j``-th passage alone; ``gold[q]``: a gold answer or a list of them), padded to
    ``[n_queries, width]`` float64. Padding and None answers (not annotated) are NaN, read as "absent"."""
    if len(answers_alone) != len(gold):
        raise ValueError(f"{len(answers_alone)} answer lists but {len(gold)} gold lists")
    fn = SCORERS.get(scorer) if isinstance(scorer, str) else scorer
    if fn is None:
        raise ValueError(f"unknown scorer {scorer!r} (use one of {sorted(SCORERS)} or a callable)")
    w = width if width is not None else max((len(a) for a in answers_alone), default=0)
    out = np.full((len(answers_alone), w), np.nan)
    for i, (answers, golds) in enumerate(zip(answers_alone, gold)):
        golds = [golds] if isinstance(golds, str) else list(golds)
        for j, answer in enumerate(list(answers)[:w]):
            if answer is not None:
                score = float(fn(answer, golds))
                if not 0.0 <= score <= 1.0:
                    raise ValueError(f"scorer returned {score} outside [0, 1] for query {i}, passage {j}")
                out[i, j] = score
    return out


def erag_mask(labels) -> np.ndarray:
    """Real entries of eRAG labels: the non-NaN ones."""
    return ~np.isnan(_as_2d(labels, np.float64))


def erag(metric_fn: Callable[..., np.ndarray], downstream_scores, mask=None, **kw) -> np.ndarray:
    """eRAG score per query: ``metric_fn(labels, mask, **kw)`` with the downstream scores (in [0, 1]) as
    labels, e.g. ``erag(classic.ndcg, labels, k=5)``; ``mask=None`` takes the non-NaN entries as real."""
    scores = _as_2d(downstream_scores, np.float64)
    m = erag_mask(scores) if mask is None else _as_mask(mask, scores.shape)
    real = scores[m]
    if real.size and (np.isnan(real).any() or (real < 0).any() or (real > 1).any()):
        raise ValueError("eRAG downstream scores of real entries must lie in [0, 1]")
    return metric_fn(np.where(m, scores, 0.0), m, **kw)


def graded_precision(labels, mask=None, *, k: int | None = None) -> np.ndarray:
    """eRAG's ``P@k`` for graded labels: ``sum_{i<=k} G_q[d_i] / k`` (``k=None``: over the real entries)."""
    g, m = prepare(labels, mask, k, dtype=np.float64)
    return over_cutoff(masked(g, m).sum(axis=1), k, g, m)


def max_label(labels, mask=None, *, k: int | None = None) -> np.ndarray:
    """eRAG's ``success@k`` for graded labels: the best downstream score in the top k (0 when empty)."""
    g, m = prepare(labels, mask, k, dtype=np.float64)
    if g.shape[1] == 0:
        return np.zeros(g.shape[0])
    return np.where(m, g, -np.inf).max(axis=1).clip(0.0) if m is not None else g.max(axis=1)


#: Metric names accepted by :func:`erag_score`.
METRICS: dict[str, Callable[..., np.ndarray]] = {
    "precision": graded_precision, "success": max_label, "mrr": classic.reciprocal_rank,
    "map": classic.average_precision, "ndcg": classic.ndcg, "recall": classic.recall, "hits": classic.hits}
_GRADED_OK = {"precision", "success", "ndcg"}


def erag_score(answers_alone=None, gold=None, *, labels=None, mask=None, k: int | None = None, scorer="em",
               metric: str = "precision") -> np.ndarray:
    """eRAG per query: single-passage answers (or ready ``labels``) scored with ``scorer``, aggregated by
    ``metric`` (:data:`METRICS`; ``mrr``, ``map``, ``recall`` and ``hits`` need binary labels, as eRAG's)."""
    if labels is None:
        if answers_alone is None or gold is None:
            raise ValueError("give answers_alone and gold, or labels")
        labels = erag_labels(answers_alone, gold, scorer)
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (use one of {sorted(METRICS)})")
    lab = _as_2d(labels, np.float64)
    if metric not in _GRADED_OK:
        real = lab[erag_mask(lab) if mask is None else _as_mask(mask, lab.shape)]
        if ((real != 0) & (real != 1)).any():
            raise ValueError(f"metric {metric!r} needs binary labels (use 'precision', 'success' or 'ndcg')")
    return erag(METRICS[metric], lab, mask, k=k)
