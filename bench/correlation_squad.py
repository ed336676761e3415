"""The metric / end-to-end accuracy correlation study on the shared annotated SQuAD set (real data).

Data: ``annotated/squad_top10.jsonl.gz`` (400 questions, MiniLM top-10 pools, P(NO-RESPONSE) and
single-passage answers from the demo LLM, Qwen2.5-Coder-0.5B-Instruct) and
``annotated/squad_contexts.jsonl.gz`` (the same LLM's real answers to 8 contexts of 5 passages for
100 of those questions), graded correct / abstained / wrong by ``annotate.grading`` (containment,
correct only with a relevant passage in the context). Splits come from the file (by article):
UDCG_theta and gamma are fitted on the train + val queries, the headline table is the test split.

ANSWER_PROB needs ``answer_logprob`` annotations, which the shared file does not hold. They go through
the annotation cache (``cache_dir()/annotations/<llm>``): ``--answer-prob auto`` (default) reads them
from the cache and loads the demo LLM only for what the cache lacks -- on a fresh clone that is
every prompt (about 1,560 teacher-forced prompts of single passages, 15-30 CPU-minutes, once; later
runs take seconds); ``cached`` uses the cache only and stops with a clear message when a prompt is
missing; ``compute`` loads the LLM first; ``skip`` (the fast path: seconds, no LLM) leaves the
ANSWER_PROB row NA.

Outputs go to ``--out`` (tables in markdown + CSV, PNG figures, the weights JSON, study.md). The last
line is machine-read: ``spearman: udcg=A udcg_theta=B ndcg=C precision=D erag=E`` (test-split means).

The k sweep (context sizes 1..5, ``truncate`` mode: each metric at k' against the full context's
outcome; no LLM) goes to ``k_sweep.csv`` / ``k_sweep.png``.

Run: ``.venv/bin/python bench/correlation_squad.py`` (about 15 s once the ANSWER_PROB values are cached;
``--answer-prob skip`` on a fresh clone).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from udcg_ltr.annotate.end_to_end import load_shared_runs, run_summary  # noqa: E402
from udcg_ltr.data.readers.annotated import ANNOTATED_LLM, annotated_dir, read_annotated_squad  # noqa: E402
from udcg_ltr.paths import PROJECT_ROOT  # noqa: E402
from udcg_ltr.studies.correlation import StudySpec, SweepSpec, run_correlation_study  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=PROJECT_ROOT / "outputs" / "bench" / "correlation_squad")
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--C", default="1.0", help="SVM-rank C, or 'cv' (query-grouped CV on the fit split)")
    ap.add_argument("--answer-prob", choices=("auto", "cached", "compute", "skip"), default="auto",
                    help="auto: from the cache, the demo LLM computes what is missing; cached: cache only; "
                         "compute: load the LLM first; skip: no ANSWER_PROB row (fast path)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads for the LLM (compute only)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")

    if not (annotated_dir() / "squad_contexts.jsonl.gz").is_file():
        print(f"shared annotated SQuAD set not found under {annotated_dir()}", file=sys.stderr)
        return 2
    records = read_annotated_squad()
    runs = load_shared_runs(records)
    context_qids = {r.qid for r in runs}
    in_study = [r for r in records if r.qid in context_qids]
    print(f"runs: {run_summary(runs)}")

    if args.answer_prob != "skip":
        # ANSWER_PROB through the annotation cache (udcg_ltr.annotate): "cached" never loads the LLM.
        from udcg_ltr.annotate.annotator import (
            CacheMiss,
            CacheOnlyScorer,
            LazyScorer,
            annotate_records,
            with_cache,
        )
        from udcg_ltr.annotate.cache import open_cache
        from udcg_ltr.annotate.llms import load_llm

        def load():
            print("loading the demo LLM for the ANSWER_PROB prompts the cache lacks "
                  "(--answer-prob skip: no ANSWER_PROB row, no LLM)", flush=True)
            return load_llm("demo", num_threads=args.threads)

        if args.answer_prob == "compute":
            scorer = load_llm("demo", num_threads=args.threads)
        elif args.answer_prob == "auto":
            scorer = LazyScorer(ANNOTATED_LLM, load)
        else:
            scorer = CacheOnlyScorer(ANNOTATED_LLM)
        cached = with_cache(scorer, open_cache(True, ANNOTATED_LLM))
        try:
            stats = annotate_records(in_study, cached, fields=["answer_logprob"], progress=args.answer_prob != "cached")
        except CacheMiss as miss:
            print(f"{miss}: run with --answer-prob auto (computes them) or skip", file=sys.stderr)
            return 2
        n = sum("answer_logprob" in p.annotations.get(ANNOTATED_LLM, {}) for r in in_study for p in r.passages)
        print(f"answer_logprob annotations: {n} of {sum(len(r.passages) for r in in_study)} passages "
              f"({args.answer_prob}: {stats.computed} computed, {stats.cached} from the cache)")

    C = args.C if args.C == "cv" else float(args.C)
    spec = StudySpec(fit_splits=("train", "val"), report_split="test", C=C, n_bootstrap=args.n_bootstrap,
                     seed=args.seed)
    res = run_correlation_study(records, runs, llm=ANNOTATED_LLM, k=5, spec=spec, sweep=SweepSpec(range(1, 6)),
                                out_dir=args.out, title="Shared annotated SQuAD: metric vs end-to-end accuracy")
    md = res.markdown
    print(md[:md.index("## Definitions")])
    print(f"files in {args.out}: {', '.join(sorted(p.name for p in res.paths.values()))}")
    print(res.bench_line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
