"""The UDCG paper's analyses on the shared annotated SQuAD set with the demo LLM (real data).

Studies (:mod:`udcg_ltr.studies`), all with the demo LLM (Qwen2.5-Coder-0.5B-Instruct, float32) and
the file's single-passage annotations (``p_no_response``, ``answer_alone``) -- only the new
end-to-end answers cost LLM time, and they go through the annotation cache
(``cache_dir()/annotations/qwen2.5-coder-0.5b-instruct``):

* ``distractors`` (Table 1): up to 150 queries with a relevant passage (test, then val, then train
  split, file order), k = 5, weak DE < 0.2 vs hard DE > 0.8 with adaptive thresholds;
* ``position`` (Figure 1): 60 queries (test, then val), k = 5, the relevant passage at positions
  1..5 among the 4 best-ranked irrelevant passages; UDCG_theta alpha from a k=5 fit on the shared
  end-to-end runs of the train + val queries;
* ``oracle`` (Table 2): 100 queries (test, then val), k = 5 and k = 3;
* ``context_size`` (Figure 2): correlation with accuracy vs k on the shared 5-passage runs
  (``truncate`` mode: metric@k against the full-context outcome; no LLM).

Default: every answer the annotation cache holds is reused, and the demo LLM is loaded only for the
contexts it lacks: a rerun reproduces every table in seconds without a model, and a fresh clone
computes what is missing (hours on 2 busy cores: about 1,200 prompts of 3-5 passages; the smaller
``--n-distractors 60 --n-position 48 --n-oracle 80 --oracle-ks 5`` of the README take about an hour;
``--studies context_size`` needs no LLM at all). ``--cache-only`` never loads a model (a missing
answer is an error naming the study); ``--compute`` loads the LLM up front. Tables go to
``--out/<study>/`` and are printed; the last lines are machine-read ``name: value`` pairs.

Run: ``.venv/bin/python bench/studies_squad.py [--threads 1] [--studies distractors,oracle]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from udcg_ltr.annotate.annotator import CacheMiss, CacheOnlyScorer, LazyScorer  # noqa: E402
from udcg_ltr.annotate.cache import open_cache  # noqa: E402
from udcg_ltr.annotate.end_to_end import load_shared_runs  # noqa: E402
from udcg_ltr.data.readers.annotated import ANNOTATED_LLM, annotated_dir, read_annotated_squad  # noqa: E402
from udcg_ltr.paths import PROJECT_ROOT  # noqa: E402

ALL = ("distractors", "position", "oracle", "context_size")


def fit_theta(records, out: Path):
    """UDCG_theta (k=5, full) fitted on the shared runs of the train + val queries; saved next to the tables."""
    from udcg_ltr.fit.pairs import build_context_table
    from udcg_ltr.fit.theta import fit_udcg_theta
    from udcg_ltr.fit.weights import save_weights

    runs = load_shared_runs(records)
    split = {r.qid: r.split for r in records}
    fit_runs = [r for r in runs if split[r.qid] in ("train", "val")]
    table = build_context_table(records, fit_runs, ANNOTATED_LLM, k=5)
    w = fit_udcg_theta(table, variant="full", C=1.0,
                       meta={"fit_splits": ["train", "val"], "source": "shared squad_contexts"})
    out.mkdir(parents=True, exist_ok=True)
    return save_weights(out / "udcg_theta_k5.json", [w]), w


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=PROJECT_ROOT / "outputs" / "bench" / "studies_squad")
    ap.add_argument("--studies", default=",".join(ALL), help=f"comma-separated subset of {ALL}, run in that order")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--compute", action="store_true", help="load the demo LLM up front (default: on the first "
                                                            "answer the cache lacks)")
    how.add_argument("--cache-only", action="store_true", help="never load a model: a missing answer is an error")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the LLM (--compute)")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--oracle-ks", default="5,3")
    ap.add_argument("--n-distractors", type=int, default=150)
    ap.add_argument("--n-position", type=int, default=60)
    ap.add_argument("--n-oracle", type=int, default=100)
    ap.add_argument("--n-bootstrap", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    studies = [s.strip() for s in args.studies.split(",") if s.strip()]
    unknown = set(studies) - set(ALL)
    if unknown:
        ap.error(f"unknown studies {sorted(unknown)}")
    if not (annotated_dir() / "squad_top10.jsonl.gz").is_file():
        print(f"shared annotated SQuAD set not found under {annotated_dir()}", file=sys.stderr)
        return 2

    records = read_annotated_squad()
    cache = open_cache(True, ANNOTATED_LLM)
    print(f"annotation cache {cache.root}: {len(cache)} entries")
    from udcg_ltr.annotate.llms import load_llm

    def load():
        print("loading the demo LLM for the answers the cache lacks (--cache-only never loads it)", flush=True)
        return load_llm("demo", batch_size=args.batch_size, num_threads=args.threads)

    if args.compute:
        scorer = load()
        assert scorer.name == ANNOTATED_LLM, scorer.name
    elif args.cache_only:
        scorer = CacheOnlyScorer(ANNOTATED_LLM)
    else:
        scorer = LazyScorer(ANNOTATED_LLM, load)
    common = {"llm": ANNOTATED_LLM, "cache": cache, "n_bootstrap": args.n_bootstrap, "seed": args.seed}
    try:
        lines = run_studies(studies, records, scorer, common, args)
    except CacheMiss as miss:
        print(f"{miss} (--cache-only); run without it to compute the missing answers", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


def run_studies(studies, records, scorer, common, args) -> list[str]:
    """Run each study in order, print its report; returns the machine-read lines."""
    lines: list[str] = []
    for study in studies:
        t0 = time.perf_counter()
        out = args.out / study
        if study == "distractors":
            from udcg_ltr.studies import run_distractor_sensitivity

            rep = run_distractor_sensitivity(records, scorer, out_dir=out, k=5, splits=("test", "val", "train"),
                                             max_queries=args.n_distractors, **common)
            w, h, d = rep.rows
            lines += [f"distractors_queries: {rep.n_queries}",
                      f"distractors_acc: weak={w['correct']:.3f} hard={h['correct']:.3f} diff={d['correct']:.3f} "
                      f"diff_lo={d['correct_lo']:.3f} diff_hi={d['correct_hi']:.3f} p_wilcoxon={d['p_wilcoxon']:.4g}",
                      f"distractors_adapted: weak={rep.meta['n_weak_adapted']} hard={rep.meta['n_hard_adapted']}"]
        elif study == "position":
            from udcg_ltr.studies import run_positional_bias

            wpath, _ = fit_theta(records, out)
            rep = run_positional_bias(records, scorer, out_dir=out, k=5, splits=("test", "val"),
                                      max_queries=args.n_position, weights=wpath, **common)
            lines += [f"position_queries: {rep.n_queries}",
                      "position_acc: " + " ".join(f"p{r['position']}={r['correct']:.3f}" for r in rep.rows),
                      f"position_cochran_p: {rep.meta['tests']['cochran_q']['p']:.4g}"]
        elif study == "oracle":
            from udcg_ltr.studies import run_oracle_contexts

            ks = tuple(int(k) for k in args.oracle_ks.split(","))
            rep = run_oracle_contexts(records, scorer, out_dir=out, ks=ks, splits=("test", "val"),
                                      max_queries=args.n_oracle, **common)
            lines.append(f"oracle_queries: {rep.n_queries}")
            for k in ks:
                rows = {r["schema"]: r for r in rep.rows if r["k"] == k and r["subset"] == "all"}
                lines.append(f"oracle_k{k}: " + " ".join(
                    f"{s}=c{r['correct']:.3f}/a{r['abstained']:.3f}/w{r['wrong']:.3f}" for s, r in rows.items()))
        else:
            from udcg_ltr.studies import run_context_size

            runs = load_shared_runs(records)
            rep = run_context_size(records, runs, out_dir=out, llm=ANNOTATED_LLM, n_bootstrap=args.n_bootstrap,
                                   seed=args.seed)
            lines.append(f"context_size_queries: {rep.n_queries}")
            for r in rep.rows:
                lines.append(f"context_size_{r['metric']}: " + " ".join(
                    f"k{k}={r.get(f'k={k}', float('nan')):.3f}" for k in rep.meta["k_values"]))
        md = rep.markdown
        print(md[:md.index("## Files")] if "## Files" in md else md)
        print(f"[{study}: {time.perf_counter() - t0:.1f}s, files in {out}]\n")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
