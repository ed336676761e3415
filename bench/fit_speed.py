"""Speed and agreement of our UDCG_theta fit against scikit-learn's LinearSVC on the same pairs.

Workload: ``--queries`` (default 1,200) queries x 10 balanced contexts of k = 5 passages, from the
seeded generative model of :mod:`udcg_ltr.fit.synthetic` (single-passage utilities from Beta laws
per relevance, per-query distractor strength; outcomes correct / abstained / wrong from an ordinal
logit of a hidden U-shaped positional-weighted utility score). Features ``[u+, u-]`` (2k = 10) and
every within-query pair of contexts with different outcomes (about 33k pairs), built once outside
the timed region.

Both sides minimise the same objective ``0.5 ||w||^2 + C sum_p max(0, 1 - w . d_p)`` with the same C:

* ours: :func:`udcg_ltr.fit.svmrank.fit_pairwise_svm`, the LightningModule driven by a
  ``pl.Trainer`` (damped Newton on the softplus-smoothed hinge with continuation, full batch);
  the timing includes building the module, the DataLoader and the Trainer;
* scikit-learn: ``LinearSVC(loss="hinge", fit_intercept=False, dual=True)`` on the symmetrised pairs
  (``d_p`` labelled +1 and ``-d_p`` labelled -1, so ``C_sk = C / 2`` gives the identical objective),
  with scikit-learn's default ``tol=1e-4`` and ``max_iter=1000`` (it converges here); the timing
  includes building the symmetrised arrays.

Both are warmed up on a small problem first (imports, first-call costs); each timing is the median
of ``--repeats`` interleaved runs. The last two lines are machine-read:
``speedup_vs_sklearn`` = sklearn seconds / ours, ``weight_cosine`` = cosine of the two weight vectors.

Run: ``.venv/bin/python bench/fit_speed.py`` (about 20 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

import numpy as np

os.environ.setdefault("WANDB_MODE", "offline")

from udcg_ltr.fit.pairs import build_context_table, build_pairs, table_features  # noqa: E402
from udcg_ltr.fit.reference import cosine, fit_reference_sklearn, primal_objective  # noqa: E402
from udcg_ltr.fit.svmrank import fit_pairwise_svm  # noqa: E402
from udcg_ltr.fit.synthetic import SYNTHETIC_LLM, synthetic_study_data, true_weights  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=1200)
    ap.add_argument("--contexts", type=int, default=10)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")

    t0 = time.perf_counter()
    records, runs = synthetic_study_data(args.queries, n_contexts=args.contexts, k=args.k, seed=args.seed)
    table = build_context_table(records, runs, SYNTHETIC_LLM, k=args.k)
    t_pairs = time.perf_counter()
    pairs = build_pairs(table_features(table), table.qids, table.outcome)
    t_pairs = time.perf_counter() - t_pairs
    outcomes = {o: int((table.outcome == s).sum()) for o, s in (("correct", 2), ("abstained", 1), ("wrong", 0))}
    print(f"data: {args.queries} queries x {args.contexts} contexts, k={args.k}: {len(table)} contexts {outcomes}, "
          f"{len(pairs)} pairs from {pairs.n_queries} queries (generated in {time.perf_counter() - t0:.2f} s; "
          f"pair construction {t_pairs * 1000:.1f} ms)")

    # Warm-up: imports, Lightning / liblinear first-call costs.
    fit_pairwise_svm(pairs.diffs[:200], C=args.C)
    fit_reference_sklearn(pairs.diffs[:200], C=args.C, tol=1e-4, max_iter=1000)

    t_ours, t_sk = [], []
    w_ours = w_sk = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        for _ in range(args.repeats):
            t = time.perf_counter()
            w_ours = fit_pairwise_svm(pairs.diffs, C=args.C)
            t_ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            w_sk = fit_reference_sklearn(pairs.diffs, C=args.C, tol=1e-4, max_iter=1000)
            t_sk.append(time.perf_counter() - t)
    if any("did not converge" in str(w.message) for w in caught):
        print("note: LinearSVC stopped at its default max_iter=1000 before tol=1e-4 (compare the objectives below)")
    ours, sk = statistics.median(t_ours), statistics.median(t_sk)
    k = args.k
    np.set_printoptions(precision=4, suppress=True)
    print(f"ours (LightningModule, Newton, C={args.C}): median {ours:.4f} s over {args.repeats} "
          f"(all: {', '.join(f'{x:.3f}' for x in t_ours)})")
    print(f"  alpha = {w_ours[:k]}")
    print(f"  beta  = {w_ours[k:]}")
    print(f"  primal objective = {primal_objective(w_ours, pairs.diffs, C=args.C):.6f}")
    print(f"sklearn LinearSVC(hinge, C/2 on symmetrised pairs): median {sk:.4f} s "
          f"(all: {', '.join(f'{x:.3f}' for x in t_sk)})")
    print(f"  alpha = {w_sk[:k]}")
    print(f"  beta  = {w_sk[k:]}")
    print(f"  primal objective = {primal_objective(w_sk, pairs.diffs, C=args.C):.6f}")
    a0, b0 = true_weights(k)
    print(f"hidden generating weights (shape only; scale differs): alpha = {a0}, beta = {b0}")
    print(f"cosine(ours, hidden) = {cosine(w_ours, np.concatenate([a0, b0])):.4f}")
    print(f"speedup_vs_sklearn: {sk / ours:.2f}")
    print(f"weight_cosine: {cosine(w_ours, w_sk):.6f}")


if __name__ == "__main__":
    main()
