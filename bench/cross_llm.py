"""Cross-LLM rerankers (issue 29): does a reranker trained on one LLM's utilities give the *other* LLM better
contexts than one trained on that LLM's own utilities?

A thin wrapper over two Hydra recipes, on the questions both LLMs annotated (dataset ``squad_coder15b``: the
SQuAD x Qwen2.5-Coder-1.5B cell joined to annotated_full's 0.5B annotations; 800 train questions, a seeded
quarter of their articles as val, 600 test questions):

    train.py experiment=cross_llm llm=<T> hydra.run.dir=<out>/train_<T> ...          # one reranker per LLM T
    evaluate.py experiment=cross_llm_eval llm=<E> reranker.path=<out>/train_<T>/cross_encoder/model
        hydra.run.dir=<out>/eval_<T>_on_<E> (dots dropped)                                          # each under each LLM E

A reranker whose train job finished is not retrained (``--force`` retrains); each model scores the test questions
once (``reranker.scores_cache``), and both LLMs' evaluations reuse those scores. What this script adds: for each
evaluating LLM E, the paired bootstrap (10,000 resamples, seed 0) of test UDCG@5 of the reranker trained on E's
own utilities minus the one trained on the other LLM's, and each against the retriever; ``table.md``,
``summary.json`` in ``--out``. No LLM is called: every utility is in the committed annotations.

Run: ``.venv/bin/python bench/cross_llm.py [--train-questions 300 --val-questions 100]`` (on the 2-core CPU about
7 min a reranker at 300 questions and 5-13 min to score the 6,000 test pairs with each).

One line per evaluating LLM, then a last line (machine-read)::

    cross_llm: eval_llm=E own=.. other=.. retriever=.. diff_own_vs_other=D [lo, hi] p=..
    cross_llm: own_better_for=N/2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)

ROOT = _offline.ROOT

from _full_data import run_job  # noqa: E402

from udcg_ltr.io import atomic_write_json, atomic_write_text, read_json_dict  # noqa: E402
from udcg_ltr.report import markdown_table, read_csv  # noqa: E402
from udcg_ltr.stats.bootstrap import paired_bootstrap_test  # noqa: E402

K = 5
METRIC = f"udcg@{K}"
#: conf/llm stem -> the annotation key it writes (the name in its YAML).
LLMS = {"demo": "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b": "qwen2.5-coder-1.5b-instruct"}


def slug(llm: str) -> str:
    return llm.replace(".", "")


def model_dir(out: Path, llm: str) -> Path:
    return out / f"train_{llm}" / "cross_encoder" / "model"


def train(out: Path, llm: str, args) -> None:
    """The reranker trained on ``llm``'s utilities, unless its job finished (a killed job resumes: its finished
    model is reused and the retriever-fusion weight is still chosen on val, as every reranker here is deployed)."""
    run_dir = out / f"train_{llm}"
    if (read_json_dict(run_dir / "job_result.json") or {}).get("status") == "finished" and not args.force:
        print(f"reranker on {llm}'s utilities: {model_dir(out, llm)} finished, not retrained", flush=True)
        return
    cmd = [sys.executable, str(ROOT / "train.py"), "experiment=cross_llm", f"llm={llm}", "logger=csv",
           f"model.cross_encoder.train_questions={args.train_questions or 'null'}",
           f"model.cross_encoder.val_questions={args.val_questions or 'null'}", f"hydra.run.dir={run_dir}"]
    run_job(cmd + (["force=true"] if args.force else []), run_dir)


def evaluate(out: Path, trained_on: str, eval_llm: str) -> dict[str, dict[str, float]]:
    """``{system: {qid: UDCG@k}}`` of one reranker's test contexts under ``eval_llm``'s utilities."""
    run_dir = out / f"eval_{slug(trained_on)}_on_{slug(eval_llm)}"  # no dot: the job's log is <run_dir>.log
    cmd = [sys.executable, str(ROOT / "evaluate.py"), "experiment=cross_llm_eval", f"llm={eval_llm}",
           f"reranker.path={model_dir(out, trained_on)}", f"reranker.scores_cache={out / f'scores_{trained_on}.json'}",
           "logger=csv", f"hydra.run.dir={run_dir}"]
    run_job(cmd, run_dir)
    by_system: dict[str, dict[str, float]] = {}
    for row in read_csv(run_dir / "per_query.csv"):
        by_system.setdefault(row["system"], {})[row["qid"]] = float(row[METRIC])
    return by_system


def compare(own: dict[str, float], other: dict[str, float]):
    qids = sorted(own)
    if sorted(other) != qids:
        raise SystemExit("the two evaluations scored different questions")
    return qids, paired_bootstrap_test([own[q] for q in qids], [other[q] for q in qids], n_bootstrap=10_000)


def cell_row(eval_llm: str, runs: dict[str, dict[str, dict[str, float]]]) -> dict:
    """One evaluating LLM: both rerankers' and the retriever's mean UDCG@k and the paired differences."""
    other_llm = next(name for name in LLMS if name != eval_llm)
    own, other = runs[eval_llm][f"reranker@{K}"], runs[other_llm][f"reranker@{K}"]
    retriever = runs[eval_llm][f"retriever@{K}"]
    qids, diff = compare(own, other)
    _, own_vs_retriever = compare(own, retriever)
    mean = lambda values: sum(values[q] for q in qids) / len(qids)  # noqa: E731
    return {"eval_llm": eval_llm, "n": len(qids), "own": mean(own), "other": mean(other),
            "retriever": mean(retriever), "diff_own_vs_other": diff.mean_diff, "lo": diff.lo, "hi": diff.hi,
            "p": diff.p_value, "own_vs_retriever": own_vs_retriever.mean_diff,
            "own_vs_retriever_lo": own_vs_retriever.lo, "own_vs_retriever_hi": own_vs_retriever.hi}


def report_row(r: dict) -> dict[str, str]:
    ci = lambda d, lo, hi: f"{r[d]:+.4f} [{r[lo]:+.4f}, {r[hi]:+.4f}]"  # noqa: E731
    return {"evaluating LLM": r["eval_llm"], "n": str(r["n"]), "own reranker": f"{r['own']:.4f}",
            "other reranker": f"{r['other']:.4f}", "retriever": f"{r['retriever']:.4f}",
            "own - other [95% CI]": ci("diff_own_vs_other", "lo", "hi"), "p": f"{r['p']:.3f}",
            "own - retriever [95% CI]": ci("own_vs_retriever", "own_vs_retriever_lo", "own_vs_retriever_hi")}


def write_report(out: Path, rows: list[dict], args) -> None:
    atomic_write_text(out / "table.md", f"Test UDCG@{K} (fused reranker as deployed), squad_coder15b test split; "
                      f"rerankers trained on {args.train_questions or 'all'} train questions.\n\n"
                      + markdown_table([report_row(r) for r in rows]) + "\n")
    atomic_write_json(out / "summary.json", {"rows": rows, "train_questions": args.train_questions,
                                             "val_questions": args.val_questions})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "outputs" / "cross_llm")
    ap.add_argument("--train-questions", type=int, default=300, help="0: every train question")
    ap.add_argument("--val-questions", type=int, default=100, help="0: every val question")
    ap.add_argument("--force", action="store_true", help="retrain the rerankers")
    args = ap.parse_args(argv)
    for llm in LLMS:
        train(args.out, llm, args)
    runs = {eval_llm: {trained_on: evaluate(args.out, trained_on, eval_llm) for trained_on in LLMS}
            for eval_llm in LLMS}
    rows = [cell_row(eval_llm, {t: runs[eval_llm][t] for t in LLMS}) for eval_llm in LLMS]
    write_report(args.out, rows, args)
    for r in rows:
        print(f"cross_llm: eval_llm={r['eval_llm']} own={r['own']:.4f} other={r['other']:.4f} "
              f"retriever={r['retriever']:.4f} diff_own_vs_other={r['diff_own_vs_other']:+.4f} "
              f"[{r['lo']:+.4f}, {r['hi']:+.4f}] p={r['p']:.3f}")
    print(f"cross_llm: own_better_for={sum(r['lo'] > 0 for r in rows)}/{len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
