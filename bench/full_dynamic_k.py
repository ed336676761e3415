"""Dynamic-k selectors on the full annotated SQuAD set (10,570 questions), retriever or reranker order, test split.

How many of the MiniLM retriever's top-10 passages should the demo LLM read? Every selector of
:mod:`udcg_ltr.select` picks a per-question ``k in 0..10`` (the kept set is the top-k prefix of the
retriever's order; k = 0 means no passage, UDCG 0.5) and is scored by the UDCG (Eq. 4, gamma = 1/3) of the
kept set per test question (1,643 questions, articles disjoint from train and val):

* ``best_fixed``: the fixed k with the best mean UDCG on train + val; ``score_threshold``,
  ``relative_threshold`` and ``cumulative_utility`` (labels-free rules) with their knobs searched on
  train + val;
* learned selectors (Lightning; :mod:`udcg_ltr.select.gate`, ``kclassifier``, ``expected``, ``calibrated``):
  the configuration grid of ``bench/dynamic_k_squad.py`` (:func:`dynamic_k_squad.learned_candidates`: the
  retriever score's list features; plus lexical coverage; plus the reader probes of
  :mod:`udcg_ltr.data.probes`, which are label-free but cost one LLM call per candidate at inference),
  trained on the **train** split (6,468 questions, or ``--max-train``) with the best epoch and the
  configuration chosen on **val** (2,459); the training budget is scaled to the larger set (``--batch-size``,
  ``--max-epochs``, ``--patience``, ``--n-seeds``; defaults below). ``learned`` is the configuration with the
  best val UDCG of all, ``learned_no_llm`` the best without reader probes; each kind's best is listed too;
* ``oracle``: the per-question best k from the gold utilities (upper bound).

The retriever is not trained on these questions, so its train scores are used as they are (no
cross-fitting). Statistics over test questions (queries resampled, :mod:`udcg_ltr.stats.bootstrap`):
mean UDCG with its bootstrap 95% CI; each selector's paired difference to ``best_fixed`` (CI and paired
bootstrap p-value); the **gap closed** ``G = (learned - best_fixed) / (oracle - best_fixed)`` with a paired
bootstrap CI (the three per-question arrays resampled together, :func:`gap_closed_bootstrap`).

Reranker order (``--order reranker``): the kept set is the top-k prefix of a trained cross-encoder's order, the
model of ``bench/full_rerankers.py`` (``--reranker-run``, default its direct-UDCG seed-0 run) with its saved
retriever-fusion weight. That model was trained on a subsample of train and chose its epoch and fusion weight on
a subsample of val: those questions are left out here, so every train / val score the selectors learn from is
held out for the reranker (no cross-fitting needed). Its scores are cached in the run folder
(``scores_dk_<split>.json``; the test scores are the reranker bench's own ``scores_test.json``). The learned
selectors also see the retriever's score as a feature. On this CPU the reranker must score every question the
selectors use (~10 pairs a question), so ``--max-train`` / ``--max-val`` bound the cost. Results go to
``<out>/reranker_order/`` and the last line is ``udcg_test_full_reranker_order: ...``.

Run: ``.venv/bin/python bench/full_dynamic_k.py`` (about 30 minutes on the 2-core CPU; ``--max-queries 60
--grid quick --max-epochs 2`` for a seconds-long check of the plumbing on a seeded subsample).

Last line (machine-read)::

    udcg_test_full: best_fixed=A relative_threshold=B learned=C oracle=D gap_closed=G p=P
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from functools import partial
from pathlib import Path

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)

ROOT = _offline.ROOT

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _full_data import FOLDER, RECORDS, SPLITS, add_data_args, prepare_data  # noqa: E402
from dynamic_k_squad import learned_candidates, uses_probes  # noqa: E402
from reranker_squad import scores_of, subsample  # noqa: E402

from udcg_ltr.data.lexical import records_idf  # noqa: E402
from udcg_ltr.data.padded import pad_records  # noqa: E402
from udcg_ltr.data.readers.annotated import ANNOTATED_LLM, read_annotated_squad  # noqa: E402
from udcg_ltr.io import atomic_write_json, atomic_write_text  # noqa: E402
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA  # noqa: E402
from udcg_ltr.models import Reranker  # noqa: E402
from udcg_ltr.models.fusion import fuse_scores  # noqa: E402
from udcg_ltr.report import new_figure, save_figure  # noqa: E402
from udcg_ltr.select import (  # noqa: E402
    OracleK,
    evaluate_selectors,
    fit_best_selector,
    fit_selector,
    format_rows_markdown,
    write_rows_csv,
)
from udcg_ltr.select.base import pad_scores, udcg_of_kept  # noqa: E402
from udcg_ltr.select.training import LEARNED_KINDS, rank_split  # noqa: E402
from udcg_ltr.stats.bootstrap import bootstrap_ci, paired_bootstrap_test  # noqa: E402

#: Rule baselines: selector name -> (kind, knobs); knobs left None are searched on train + val.
RULES = {"best_fixed": ("fixed_k", {}), "score_threshold": ("score_threshold", {}),
         "relative_threshold": ("relative_threshold", {"normalize": None}),
         "cumulative_utility": ("cumulative_utility", {})}
HEADLINE = ("best_fixed", "relative_threshold", "learned", "oracle")


def gap_closed_bootstrap(learned: np.ndarray, fixed: np.ndarray, oracle: np.ndarray, n_bootstrap: int = 1000,
                         seed: int = 0, confidence: float = 0.95) -> dict[str, float]:
    """``G = (mean(l) - mean(f)) / (mean(o) - mean(f))`` and its paired percentile bootstrap CI.

    The three per-query arrays are resampled with the same query indices (a ``[B, n]`` index matrix, as
    :func:`udcg_ltr.stats.bootstrap.paired_bootstrap_test`); a resample whose oracle gap is not positive
    has no defined ratio and is left out (counted in ``n_undefined``).
    """
    learned, fixed, oracle = (np.asarray(a, dtype=np.float64) for a in (learned, fixed, oracle))
    if not learned.shape == fixed.shape == oracle.shape:
        raise ValueError(f"arrays must align: {learned.shape}, {fixed.shape}, {oracle.shape}")
    gap = oracle.mean() - fixed.mean()
    value = float((learned.mean() - fixed.mean()) / gap) if gap > 0 else float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, learned.size, size=(n_bootstrap, learned.size))
    num = (learned[idx] - fixed[idx]).mean(axis=1)
    den = (oracle[idx] - fixed[idx]).mean(axis=1)
    ok = den > 0
    ratios = num[ok] / den[ok]
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail]) if ratios.size else (float("nan"), float("nan"))
    return {"gap_closed": value, "lo": float(lo), "hi": float(hi), "n_undefined": int((~ok).sum())}


def budgeted_candidates(args) -> list[tuple[str, dict]]:
    """The grid of ``dynamic_k_squad.learned_candidates`` with this bench's training budget (reranker order: the
    retriever's score is one more feature)."""
    budget = {"batch_size": args.batch_size, "max_epochs": args.max_epochs, "patience": args.patience,
              "n_seeds": args.n_seeds}
    extra = ["retrieval_score"] if args.order == "reranker" else []
    return [(kind, {**hp, **budget}) for kind, hp in learned_candidates(extra, args.grid == "quick", probes=args.probes)]


def reranker_order(split: dict[str, list], args) -> tuple[dict[str, list], dict[str, list[np.ndarray]], str]:
    """Held-out questions and the fused reranker scores of ``--reranker-run`` (module docstring, reranker order).

    Drops the reranker's own train / val questions (the seeded subsamples of ``reranker_squad.py``, read from the
    run's ``bench_recipe.json``), then draws ``--max-train`` / ``--max-val`` of the rest (seeded); returns the
    splits, the per-question fused scores and a note for the table.
    """
    run = Path(args.reranker_run)
    recipe = json.loads((run / "bench_recipe.json").read_text())
    used = {s: {r.qid for r in subsample(split[s], recipe[f"{s}_questions"], seed=seed)}
            for s, seed in (("train", 1234), ("val", 4321))}
    held = {s: [r for r in split[s] if r.qid not in used.get(s, ())] for s in SPLITS}
    for s, n in (("train", args.max_train), ("val", args.max_val)):
        held[s] = subsample(held[s], n, seed=args.seed)
    reranker = Reranker.from_pretrained(run / "model", batch_size=64)
    weight = reranker.retriever_fusion
    scores = {}
    for s in SPLITS:
        t0 = time.perf_counter()
        alone = scores_of(run, s if s == "test" else f"dk_{s}", held[s], partial(reranker.score_records, fuse=False))
        scores[s] = fuse_scores(held[s], alone, weight)
        print(f"reranker scores, {s}: {len(held[s])} questions in {time.perf_counter() - t0:.0f} s", flush=True)
    note = (f"reranker order ({run}, retriever-fusion weight {weight:g}); its {len(used['train'])} train and "
            f"{len(used['val'])} val questions left out")
    return held, scores, note


def fit_learned(train, val, args) -> tuple[dict, list[dict], dict]:
    """Best configuration per (kind, reader probes or not), by val UDCG; returns (selectors, grid rows, choice)."""
    cands = budgeted_candidates(args)
    best, grid = {}, []
    for kind in LEARNED_KINDS:
        for probes in (False, True):  # plain groups first: ties go to the configuration without the LLM
            group = [c for c in cands if c[0] == kind and uses_probes(c[1]) == probes]
            if not group:
                continue
            t0 = time.perf_counter()
            sel, rows = fit_best_selector(group, *train, *val, progress=args.progress, seed=args.seed)
            best[(kind, probes)] = (sel, max(r["val/udcg"] for r in rows))
            grid += rows
            print(f"  {kind}{' + reader probes' if probes else ''}: {len(group)} configurations in "
                  f"{time.perf_counter() - t0:.0f} s, best val UDCG {best[(kind, probes)][1]:.4f}", flush=True)

    def first_best(keys):
        return max(keys, key=lambda key: best[key][1])  # max keeps the first of equal values

    selectors = {kind: best[first_best([key for key in best if key[0] == kind])][0]
                 for kind in LEARNED_KINDS if any(key[0] == kind for key in best)}
    learned_key = first_best(list(best))
    selectors["learned"] = best[learned_key][0]
    choice = {"learned": {"kind": learned_key[0], "uses_probes": learned_key[1],
                          "config": selectors["learned"].get_config()}}
    plain = [key for key in best if not key[1]]
    if plain:
        plain_key = first_best(plain)
        selectors["learned_no_llm"] = best[plain_key][0]
        choice["learned_no_llm"] = {"kind": plain_key[0], "config": selectors["learned_no_llm"].get_config()}
    return selectors, grid, choice


def plot(rows: list[dict], gap: dict, path: Path, title: str) -> Path:
    """Mean test UDCG per selector with its 95% CI; best fixed k and the oracle as vertical lines."""
    fig, ax = new_figure(figsize=(7.5, 0.4 * len(rows) + 1.6))
    y = np.arange(len(rows))[::-1]
    v = np.array([r["udcg"] for r in rows])
    err = np.vstack([v - np.array([r["udcg_lo"] for r in rows]), np.array([r["udcg_hi"] for r in rows]) - v])
    colors = ["tab:orange" if r["selector"] == "learned" else "tab:blue" for r in rows]
    ax.barh(y, v, xerr=np.clip(err, 0, None), capsize=3, color=colors)
    by = {r["selector"]: r["udcg"] for r in rows}
    for name, style in (("best_fixed", "--"), ("oracle", ":")):
        ax.axvline(by[name], color="grey", ls=style, lw=0.8, label=name)
    ax.set_yticks(y)
    ax.set_yticklabels([r["selector"] for r in rows])
    lo = min(r["udcg_lo"] for r in rows)
    ax.set_xlim(max(0.0, lo - 0.02), max(r["udcg_hi"] for r in rows) + 0.01)
    ax.set_xlabel("mean UDCG of the kept set, test (95% CI)")
    ax.set_title(f"{title}\ngap closed by learned: {gap['gap_closed']:.3f} [{gap['lo']:.3f}, {gap['hi']:.3f}]",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_args(ap, ROOT / "outputs" / "bench" / "full_dynamic_k")
    ap.add_argument("--max-train", type=int, default=None,
                    help="train the learned selectors on a seeded subsample of this many train questions "
                         "(default: all); val and test stay whole")
    ap.add_argument("--max-val", type=int, default=None,
                    help="reranker order: a seeded subsample of this many held-out val questions (default: all)")
    ap.add_argument("--order", choices=("retriever", "reranker"), default="retriever",
                    help="whose top-k prefix the selectors cut: the retriever's or a trained reranker's")
    ap.add_argument("--reranker-run", type=Path, default=ROOT / "outputs" / "bench" / "full_rerankers" / "udcg_seed0",
                    help="with --order reranker: a run folder of bench/full_rerankers.py (model/, bench_recipe.json)")
    ap.add_argument("--grid", choices=("full", "quick"), default="full",
                    help="learned configurations: dynamic_k_squad.learned_candidates' full grid or its quick one")
    ap.add_argument("--probes", action=argparse.BooleanOptionalAction, default=True,
                    help="also offer the learned selectors the reader probes (label-free, an LLM call per candidate)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--patience", type=int, default=8)
    ap.add_argument("--n-seeds", type=int, default=1, help="modules averaged per learned selector")
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0, help="selector, subsample and bootstrap seed")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()

    prepared = prepare_data(args)
    if prepared is None:
        return 2
    data_root, out = prepared
    if args.order == "reranker":
        out = out / "reranker_order"
        out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    records = read_annotated_squad(data_root / FOLDER / RECORDS)
    idf = records_idf(records)  # one corpus (every pooled passage) for the lexical features of all splits
    split = {s: [r for r in records if r.split == s] for s in SPLITS}
    train_note = f"all {len(split['train'])} train questions"
    if args.order == "reranker":
        split, fused, order_note = reranker_order(split, args)
        train_note = f"{len(split['train'])} held-out train questions; {order_note}"
    elif args.max_train and args.max_train < len(split["train"]):
        keep = np.sort(np.random.default_rng(args.seed).choice(len(split["train"]), args.max_train, replace=False))
        split["train"] = [split["train"][i] for i in keep]
        train_note = f"a seeded subsample of {args.max_train} train questions (--max-train)"
    if any(not v for v in split.values()):
        raise SystemExit(f"every split needs questions: {({s: len(v) for s, v in split.items()})}")
    print("questions: " + " ".join(f"{s}={len(v)}" for s, v in split.items()) + f" ({train_note})", flush=True)
    slates = {s: pad_records(v, llm=ANNOTATED_LLM, order="given", idf=idf) for s, v in split.items()}
    if args.order == "reranker":
        data = {s: (pad_scores(fused[s], width=slates[s].mask.shape[1])[0], slates[s]) for s in SPLITS}
    else:
        data = {s: (slates[s].retrieval_score, slates[s]) for s in SPLITS}
    print(f"data ready in {time.perf_counter() - t0:.0f} s", flush=True)

    selectors, fits = {}, {}
    for name, (kind, knobs) in RULES.items():
        sel, metrics = fit_selector(kind, *data["train"], *data["val"], fit_on="train+val", **knobs)
        selectors[name] = sel
        fits[name] = {"config": sel.get_config(), **metrics}
    t1 = time.perf_counter()
    print(f"learned selectors ({args.grid} grid, batch {args.batch_size}, <= {args.max_epochs} epochs, patience "
          f"{args.patience}, {args.n_seeds} seed(s)):", flush=True)
    learned, grid, choice = fit_learned(data["train"], data["val"], args)
    learned_s = time.perf_counter() - t1
    selectors.update(learned)
    selectors["oracle"] = OracleK()

    chosen: dict[str, np.ndarray] = {}
    val_rows = {r["selector"]: r for r in evaluate_selectors(selectors, *data["val"], split="val")}
    rows = evaluate_selectors(selectors, *data["test"], split="test", ks=chosen, plot_path=out / "k_hist_test.png",
                              title=f"chosen k on test, {args.order} order")
    ranked = rank_split(*data["test"])
    per_query = {name: udcg_of_kept(ranked.utility, ranked.mask, chosen[name], gamma=DEFAULT_GAMMA)
                 for name in selectors}
    fixed = per_query["best_fixed"]
    for row in rows:
        name = row["selector"]
        v = per_query[name]
        if not np.isclose(v.mean(), row["udcg"], atol=1e-12):
            raise SystemExit(f"per-query UDCG of {name} disagrees with evaluate_selectors")
        row["udcg_lo"], row["udcg_hi"] = bootstrap_ci(v, args.n_bootstrap, args.seed)
        test = paired_bootstrap_test(v, fixed, args.n_bootstrap, args.seed)
        row["diff_vs_best_fixed"], row["diff_lo"], row["diff_hi"] = test.mean_diff, test.lo, test.hi
        row["p_vs_best_fixed"] = test.p_value if name != "best_fixed" else float("nan")
        row["val_udcg"] = val_rows[name]["udcg"]
        sel = selectors[name]
        if getattr(sel, "fits_on_val", False):  # learned from val: its cross-fitted val UDCG compares fairly
            row["val_udcg"] = sel.crossfit_metrics["val/udcg"]
    gaps = {name: gap_closed_bootstrap(per_query[name], fixed, per_query["oracle"], args.n_bootstrap, args.seed)
            for name in selectors if name not in ("oracle", "best_fixed")}
    for row in rows:
        g = gaps.get(row["selector"])
        row["gap_closed"], row["gap_lo"], row["gap_hi"] = ((g["gap_closed"], g["lo"], g["hi"]) if g else
                                                           (float("nan"),) * 3)
    by = {r["selector"]: r for r in rows}
    gap = gaps["learned"]
    p_learned = by["learned"]["p_vs_best_fixed"]

    cols = ["selector", "val_udcg", "udcg", "udcg_lo", "udcg_hi", "diff_vs_best_fixed", "p_vs_best_fixed",
            "gap_closed", "gap_lo", "gap_hi", "mean_k", "k0_rate", "k_hist"]
    table = format_rows_markdown(rows, cols)
    best_k = selectors["best_fixed"].get_config()
    md = "\n".join([
        f"# Dynamic-k selectors, full annotated SQuAD, {args.order} order (test split)", "",
        f"Questions: {', '.join(f'{s} {len(v)}' for s, v in split.items())}; learned selectors trained on "
        f"{train_note}, configuration and epoch chosen on val; rule knobs searched on train + val "
        f"(best fixed k: {best_k}).",
        f"Learned grid: {args.grid} ({len(grid)} configurations; batch {args.batch_size}, <= {args.max_epochs} epochs, "
        f"patience {args.patience}, {args.n_seeds} seed(s)); `learned` = {choice['learned']['kind']}"
        f"{' with reader probes' if choice['learned']['uses_probes'] else ''}"
        + (f"; `learned_no_llm` = {choice['learned_no_llm']['kind']}" if "learned_no_llm" in choice else "") + ".",
        f"UDCG (Eq. 4, gamma = 1/3) of the kept top-k per test question; CIs: {args.n_bootstrap} bootstrap resamples "
        f"of test questions, seed {args.seed}; differences and p paired with best_fixed.", "",
        table, "",
        f"Gap closed by `learned`: G = (learned - best_fixed) / (oracle - best_fixed) = {gap['gap_closed']:.3f} "
        f"[{gap['lo']:.3f}, {gap['hi']:.3f}] (paired bootstrap); learned - best_fixed = "
        f"{by['learned']['diff_vs_best_fixed']:+.4f} "
        f"[{by['learned']['diff_lo']:+.4f}, {by['learned']['diff_hi']:+.4f}], "
        f"p = {p_learned:.4g}"
        + (f" (the smallest p a {args.n_bootstrap}-resample bootstrap can give)"
           if p_learned <= 1.0 / (args.n_bootstrap + 1) + 1e-12 else "") + ".", ""]) + "\n"
    atomic_write_text(out / "table.md", md)
    write_rows_csv(rows, out / "selectors_test.csv")
    write_rows_csv([{k: (str(v) if isinstance(v, (dict, list)) else v) for k, v in r.items()} for r in grid],
                   out / "learned_grid.csv")
    png = plot(rows, gap, out / "udcg_test.png", f"{args.order} order, {len(split['test'])} test questions")
    total_s = time.perf_counter() - t0
    atomic_write_json(out / "results.json", {"command": " ".join(shlex.quote(c) for c in sys.argv),
                                             "args": {k: str(v) for k, v in vars(args).items()},
                                             "train": train_note, "rows": rows, "gap_closed": gaps, "choice": choice,
                                             "rules": fits, "learned_seconds": learned_s, "total_seconds": total_s})
    print("\n" + md)
    print(f"files in {out}: table.md selectors_test.csv learned_grid.csv {png.name} k_hist_test.png results.json "
          f"(learned selectors {learned_s / 60:.1f} min, total {total_s / 60:.1f} min)")
    print(f"udcg_test_full{'_reranker_order' if args.order == 'reranker' else ''}: " + " ".join(f"{name}={by[name]['udcg']:.4f}" for name in HEADLINE)
          + f" gap_closed={gap['gap_closed']:.3f} p={p_learned:.4g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
