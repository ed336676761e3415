"""trec_eval (through pytrec_eval) and ranx as references for :func:`udcg_ltr.metrics.table.trec_table`.

Imported on demand: it needs ``pytrec_eval`` (package ``pytrec_eval-terrier``) or ``ranx``. Both take
``qrels = {qid: {docid: grade}}`` and ``run = {qid: {docid: score}}`` and return ``{qid: {column:
value}}`` under the table's column names, over the queries the reference evaluates (trec_eval: those of
the run that the qrels judge). trec_eval sorts by score as a 32-bit C ``float``, ties by docid descending
(:func:`~udcg_ltr.data.readers.trec.trec_order`); ranx orders ties in no defined order, so
:func:`ranx_table` gives it scores that encode that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from udcg_ltr.data.readers.trec import trec_order
from udcg_ltr.metrics.table import trec_measure

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]


def pytrec_eval_table(qrels: Qrels, run: Run, columns: Sequence[str], threshold: int = 1) -> dict[str, dict[str, float]]:
    """Per-query values of ``columns`` from trec_eval with ``-l threshold`` (binary measures)."""
    import pytrec_eval

    measures = {trec_measure(c) for c in columns}
    cut_rr = sorted({int(m.split("@")[1]) for m in measures if m.startswith("recip_rank@")})
    plain: set[str] = set()
    cuts: dict[str, list[int]] = {}
    for m in measures - {f"recip_rank@{c}" for c in cut_rr}:
        base, _, cut = m.rpartition("_")
        if cut.isdigit():  # one spec per measure (ndcg_cut.5,10): pytrec_eval keeps one set of cutoffs each
            cuts.setdefault(base, []).append(int(cut))
        else:
            plain.add(m)
    plain |= {f"{base}.{','.join(map(str, sorted(c)))}" for base, c in cuts.items()} | {"recip_rank"}
    qrels = {q: {d: int(g) for d, g in j.items()} for q, j in qrels.items()}
    run = {q: {d: float(s) for d, s in r.items()} for q, r in run.items()}
    res = pytrec_eval.RelevanceEvaluator(qrels, plain, relevance_level=threshold).evaluate(run)
    for c in cut_rr:
        cut = {q: {d: s[d] for d in trec_order(s)[:c]} for q, s in run.items()}
        rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=threshold).evaluate(cut)
        for q, v in rr.items():
            res.setdefault(q, {})[f"recip_rank@{c}"] = v["recip_rank"]
    return {q: {c: float(v[trec_measure(c)]) for c in columns} for q, v in res.items()}


_RANX = {"ndcg", "map", "precision", "recall", "mrr"}  # our keys are ranx's metric names


def ranx_table(qrels: Qrels, run: Run, columns: Sequence[str], threshold: int = 1) -> dict[str, dict[str, float]]:
    """Per-query values of ``columns`` from ranx (binary measures at relevance level ``threshold``)."""
    import ranx

    judged = {q: {d: int(g) for d, g in j.items()} for q, j in qrels.items() if q in run and j}
    ordered = {q: {d: float(len(s) - i) for i, d in enumerate(trec_order(s))} for q, s in run.items() if q in judged}
    out: dict[str, dict[str, float]] = {q: {} for q in ordered}
    for c in columns:
        base, _, cut = c.partition("@")
        if base not in _RANX or (base == "precision" and not cut):
            raise KeyError(f"no ranx measure for {c!r}")
        metric = c + ("" if base == "ndcg" else f"-l{threshold}")
        ranked = ranx.Run(ordered)
        ranx.evaluate(ranx.Qrels(judged), ranked, metric)
        for q, v in ranked.scores[metric].items():
            out[q][c] = float(v)
    return out


def max_abs_diff(ours: Mapping[str, np.ndarray], qids: Sequence[str], reference: Mapping[str, Mapping[str, float]]
                 ) -> dict[str, float]:
    """Per column, the largest ``|ours - reference|`` over the reference's queries; ``inf`` where a query
    the reference drops is not NA in ours, or a query it evaluates is NA in ours."""
    out = {}
    for name, values in ours.items():
        worst = 0.0
        for q, v in zip(qids, np.asarray(values, dtype=np.float64)):
            if q not in reference:
                worst = worst if np.isnan(v) else np.inf
            else:
                worst = max(worst, abs(float(v) - reference[q][name])) if np.isfinite(v) else np.inf
        out[name] = worst
    return out
