"""Speed of our metric library against ranx (0.3.x) on a large binary run, in one process.

Workload: 100,000 queries x 100 candidates each; random retriever scores without ties; binary
qrels with a few relevant documents per query, some of which are NOT retrieved (so the ideal of
nDCG and the R of AP must come from the qrels, not from the run). Metrics: nDCG@10, MRR@10 and
MAP@100, plus our UDCG@10 over random signed utilities of the same candidates.

What is timed, on both sides, is what a user with data already in memory pays per evaluation:

* ranx: ``ranx.evaluate(qrels, run, metric)`` with the ``Qrels``/``Run`` objects built beforehand
  (outside the timed region, as a user would already have them), after a warm-up ``evaluate`` on
  a small run with ids of the same string lengths so that numba's compilation (which depends on
  the id dtype) is excluded. ranx runs its numba kernels on every core available (2 here).
* ours: from the raw ``[Q, 100]`` score matrix, :func:`rank_by_scores` (the score sort, top-k when
  ``k`` < 100) + :func:`take_ranked` + the metric; the padded arrays themselves (labels, number
  of relevant qrels, utilities) are built outside the timed region, like ranx's objects. Single
  threaded numpy.

Each timing is the best of a few repeats. Both sides' per-query values are compared
(max abs diff must be <= 1e-9). The last two lines are machine-read:
``speedup_vs_ranx`` = ranx's total seconds over the three metrics / ours, and
``udcg_over_ndcg_time`` = our UDCG@10 time / our nDCG@10 time (both including the score sort).

Run: ``.venv/bin/python bench/metrics_speed.py`` (about 1.5 min, 4 GB; set ``--queries`` lower
for a quick look).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from udcg_ltr.metrics import average_precision, ndcg, rank_by_scores, reciprocal_rank, take_ranked, udcg

METRICS = ("ndcg@10", "mrr@10", "map@100")


def make_data(n_queries: int, width: int, seed: int):
    rng = np.random.default_rng(seed)
    # distinct integer parts per row make ties impossible; the fraction keeps the values irregular
    ranks = rng.permuted(np.tile(np.arange(width, dtype=np.float64), (n_queries, 1)), axis=1)
    scores = (ranks + 0.5 * rng.random((n_queries, width))) / width
    relevant = rng.random((n_queries, width)) < 0.04  # retrieved relevant documents
    unretrieved = rng.integers(0, 3, size=n_queries)  # relevant documents the retriever missed
    unretrieved[relevant.sum(axis=1) + unretrieved == 0] = 1  # every query has >= 1 relevant qrel
    utilities = np.where(relevant, rng.random((n_queries, width)), -rng.random((n_queries, width)))
    return scores, relevant, unretrieved, utilities


def build_ranx(scores, relevant, unretrieved):
    from ranx import Qrels, Run

    n_queries, width = scores.shape
    qids = [f"q{i:07d}" for i in range(n_queries)]
    docs = [f"d{j:04d}" for j in range(width)]
    run = Run({q: dict(zip(docs, row)) for q, row in zip(qids, scores.tolist())})
    qrels = {}
    for i, q in enumerate(qids):
        rel = {docs[j]: 1 for j in np.flatnonzero(relevant[i])}
        rel.update({f"x{j:04d}": 1 for j in range(unretrieved[i])})
        qrels[q] = rel
    return qids, Qrels(qrels), run


def warm_up_ranx():
    from ranx import Qrels, Run, evaluate

    qrels = Qrels({"q0000000": {"d0000": 1, "x0000": 1}, "q0000001": {"d0001": 1}})
    run = Run({"q0000000": {"d0000": 0.9, "d0001": 0.5}, "q0000001": {"d0000": 0.7, "d0001": 0.1}})
    for m in METRICS:
        evaluate(qrels, run, m)
    evaluate(qrels, run, list(METRICS))


def best_time(fn, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--candidates", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="repeats of our timings (ranx: max(2, repeats - 1))")
    args = ap.parse_args()

    from ranx import evaluate

    scores, relevant, unretrieved, utilities = make_data(args.queries, args.candidates, args.seed)
    n_relevant = (relevant.sum(axis=1) + unretrieved).astype(np.float64)
    print(f"queries: {args.queries}, candidates: {args.candidates}, relevant qrels per query: "
          f"{n_relevant.mean():.2f} on average, {unretrieved.sum() / n_relevant.sum():.1%} of them not retrieved")

    # ---- untimed preparation: ranx objects, our padded arrays ---------------------------------
    t0 = time.perf_counter()
    qids, qrels, run = build_ranx(scores, relevant, unretrieved)
    print(f"ranx Qrels/Run construction (untimed): {time.perf_counter() - t0:.1f} s")
    warm_up_ranx()
    ideal_width = int(min(10, n_relevant.max()))
    ideal_mask = np.arange(ideal_width)[None, :] < n_relevant[:, None]  # binary qrels: R ones
    ideal_gains = ideal_mask.astype(np.float64)

    # ---- ours --------------------------------------------------------------------------------
    def ours_ndcg():
        order = rank_by_scores(scores, k=10)
        return ndcg(take_ranked(relevant, order), k=10, ideal_gains=ideal_gains, ideal_mask=ideal_mask)

    def ours_mrr():
        return reciprocal_rank(take_ranked(relevant, rank_by_scores(scores, k=10)), k=10)

    def ours_map():
        return average_precision(take_ranked(relevant, rank_by_scores(scores, k=100)), k=100, n_relevant=n_relevant)

    def ours_udcg():
        return udcg(take_ranked(utilities, rank_by_scores(scores, k=10)), k=10)

    ours = {}
    for name, fn in (("ndcg@10", ours_ndcg), ("mrr@10", ours_mrr), ("map@100", ours_map), ("udcg@10", ours_udcg)):
        ours[name] = best_time(fn, args.repeats)

    # ---- ranx --------------------------------------------------------------------------------
    ranx_rep = max(2, args.repeats - 1)
    theirs = {m: best_time(lambda m=m: evaluate(qrels, run, m), ranx_rep) for m in METRICS}
    combined, _ = best_time(lambda: evaluate(qrels, run, list(METRICS)), ranx_rep)
    per_query = {m: np.array([run.scores[m][q] for q in qids]) for m in METRICS}

    # ---- report ------------------------------------------------------------------------------
    worst = 0.0
    for m in METRICS:
        t_ours, v_ours = ours[m]
        t_ranx, mean_ranx = theirs[m]
        diff = float(np.max(np.abs(v_ours - per_query[m])))
        worst = max(worst, diff)
        print(f"{m}: ours {t_ours:.3f} s, ranx {t_ranx:.3f} s, mean ours {v_ours.mean():.6f} ranx {mean_ranx:.6f}, "
              f"max_abs_diff {diff:.3e}")
    t_udcg, v_udcg = ours["udcg@10"]
    print(f"udcg@10: ours {t_udcg:.3f} s, mean {v_udcg.mean():.6f}")
    print(f"ranx one evaluate() call with all three metrics: {combined:.3f} s (informational)")
    assert worst <= 1e-9, f"our values differ from ranx by {worst:.3e}"
    total_ours = sum(ours[m][0] for m in METRICS)
    total_ranx = sum(theirs[m][0] for m in METRICS)
    print(f"total: ours {total_ours:.3f} s, ranx {total_ranx:.3f} s")
    print(f"speedup_vs_ranx: {total_ranx / total_ours:.2f}")
    print(f"udcg_over_ndcg_time: {t_udcg / ours['ndcg@10'][0]:.2f}")


if __name__ == "__main__":
    main()
