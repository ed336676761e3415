"""End to end on the full annotated SQuAD set: does the best reranker's top-5 make the LLM answer better?

A thin wrapper over the named Hydra experiment ``evaluate.py experiment=full_end_to_end`` (mode ``reranker``):
for a seeded draw of ``--questions`` test questions (1,643 in the split; articles disjoint from train and val),
the demo LLM (fast CPU mode: bf16 linears, P(NO-RESPONSE) within ~0.01 of float32; through the annotation
cache, so a killed run resumes) answers three contexts of 5 passages per question, each graded against the gold
answers (correct > abstained > wrong; whole-token containment):

* ``retriever@5``: the MiniLM retriever's top 5;
* ``reranker@5``: the top 5 of the reranker ``bench/full_rerankers.py`` found best on val (its ``summary.json``;
  ``--reranker-run`` to name another), seed 0, fused with the retriever by its saved weight;
* ``oracle_utility@5``: the top 5 by the shared utilities (Eq. 2), the ceiling of any ranking by utility.

Why a subset: each context is a new prompt (about 2 s on this 2-core CPU), the annotation file holds the LLM's
answers for single passages and for 10 random contexts per question, not for these. 200 questions (600
prompts) fit in about 25 minutes; a GPU answers all 1,643 in minutes (``--questions 0``).

What this script adds (over the job's ``per_query.csv``): each system's rates of correct, abstained and wrong
answers with bootstrap 95% CIs, and paired bootstrap tests of the reranker against the retriever (and of the
oracle against the reranker) on the correct and wrong rates and on UDCG@5 of the same questions; table.md,
table.csv, outcomes.png and summary.json in ``--out``.

Run: ``.venv/bin/python bench/full_end_to_end.py`` (``--questions 10`` for a minutes-long check).

Last line (machine-read)::

    end_to_end_test_subset: n=N retriever=A reranker=B oracle=C diff_reranker_vs_retriever=D [lo, hi] p=P
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)

ROOT = _offline.ROOT

import numpy as np  # noqa: E402
from _full_data import add_data_args, best_reranker_run, parse_and_prepare, run_job  # noqa: E402

from udcg_ltr.data.contexts import OUTCOMES  # noqa: E402
from udcg_ltr.io import atomic_write_json, atomic_write_text  # noqa: E402
from udcg_ltr.report import fmt_p, markdown_table, plot_bars, read_csv, write_csv  # noqa: E402
from udcg_ltr.stats.bootstrap import paired_bootstrap_test, rate_ci  # noqa: E402

K = 5
SYSTEMS = {"retriever": f"retriever@{K}", "reranker": f"reranker@{K}", "oracle": f"oracle_utility@{K}"}
PAIRS = (("reranker", "retriever"), ("oracle", "reranker"))


def job_command(data_root: Path, run_dir: Path, reranker_run: Path, args) -> list[str]:
    """The Hydra job this bench wraps (printed, and stored in ``summary.json``)."""
    return [sys.executable, str(ROOT / "evaluate.py"), "experiment=full_end_to_end", f"paths.data_dir={data_root}",
            f"reranker.path={reranker_run / 'cross_encoder' / 'model'}",
            f"reranker.max_questions={args.questions or 'null'}", f"seed={args.seed}", "logger=none",
            f"force={'false' if args.reuse else 'true'}", f"hydra.run.dir={run_dir}"]


def per_query_values(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """``{system: {"correct" | "abstained" | "wrong" | "udcg@5": [Q]}}`` from the job's ``per_query.csv``, every
    system over the same questions in the same order."""
    rows = read_csv(path)
    out, qids = {}, None
    for name, system in SYSTEMS.items():
        mine = [r for r in rows if r["system"] == system]
        if not mine or any(r.get("outcome") not in OUTCOMES for r in mine):
            raise SystemExit(f"{path}: {system} has no end-to-end outcome for every question")
        if qids is not None and [r["qid"] for r in mine] != qids:
            raise SystemExit(f"{path}: the systems answered different questions")
        qids = [r["qid"] for r in mine]
        out[name] = {o: np.array([r["outcome"] == o for r in mine], dtype=np.float64) for o in OUTCOMES}
        out[name][f"udcg@{K}"] = np.array([float(r[f"udcg@{K}"]) for r in mine])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_args(ap, ROOT / "outputs" / "bench" / "full_end_to_end")
    ap.add_argument("--questions", type=int, default=200,
                    help="a seeded draw of this many test questions (0: all 1,643); three prompts each")
    ap.add_argument("--reranker-run", type=Path, default=None,
                    help="a run folder of bench/full_rerankers.py (default: the seed-0 run of the system it names "
                         "best on val)")
    ap.add_argument("--n-bootstrap", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0, help="question draw and bootstrap seed")
    t0 = time.perf_counter()
    parsed = parse_and_prepare(ap, argv)
    if parsed is None:
        return 2
    args, data_root, out = parsed
    reranker_run = args.reranker_run or best_reranker_run()
    print(f"reranker: {reranker_run}", flush=True)
    run_dir = out / "job"
    cmd = job_command(data_root, run_dir, reranker_run, args)
    job_s = run_job(cmd, run_dir)

    values = per_query_values(run_dir / "per_query.csv")
    n = len(values["retriever"]["correct"])
    rows = []
    for name, v in values.items():
        row = {"system": name}
        for metric in (*OUTCOMES, f"udcg@{K}"):
            row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = rate_ci(v[metric], args.n_bootstrap, args.seed)
        rows.append(row)
    paired = []
    for a, b in PAIRS:
        for metric in ("correct", "wrong", f"udcg@{K}"):
            t = paired_bootstrap_test(values[a][metric], values[b][metric], args.n_bootstrap, args.seed)
            paired.append({"comparison": f"{a} - {b}", "metric": metric, "diff": t.mean_diff, "lo": t.lo,
                           "hi": t.hi, "p": t.p_value, "n": t.n})

    def cell(row, metric, digits=3):
        return f"{row[metric]:.{digits}f} [{row[f'{metric}_lo']:.{digits}f}, {row[f'{metric}_hi']:.{digits}f}]"

    table = markdown_table([{"system": r["system"], **{m: cell(r, m) for m in OUTCOMES},
                             f"udcg@{K}": cell(r, f"udcg@{K}", 4)} for r in rows],
                           ["system", *OUTCOMES, f"udcg@{K}"])
    diffs = markdown_table([{**r, "diff": f"{r['diff']:+.4f} [{r['lo']:+.4f}, {r['hi']:+.4f}]", "p": fmt_p(r["p"])}
                            for r in paired], ["comparison", "metric", "diff", "p", "n"])
    title = f"End to end, full annotated SQuAD: {n} test questions (seeded draw), demo LLM (fast CPU mode), k = {K}"
    md = "\n".join([
        f"# {title}", "", f"Reranker: `{reranker_run}`. Job: `{' '.join(cmd[1:])}`.", "",
        "Rates of the LLM's answers to each system's top-5 context (graded against the gold answers) and UDCG@5 "
        f"of the same contexts; 95% bootstrap CIs over questions ({args.n_bootstrap} resamples, seed {args.seed}).",
        "", table, "", "## Paired differences (per question; bootstrap 95% CI and two-sided p)", "", diffs]) + "\n"
    atomic_write_text(out / "table.md", md)
    write_csv(out / "table.csv", rows)
    png = plot_bars([f"{r['comparison']}: {r['metric']}" for r in paired], [r["diff"] for r in paired],
                    out / "outcomes.png", lo=[r["lo"] for r in paired], hi=[r["hi"] for r in paired], digits=3,
                    title=title, ylabel="paired difference per question (95% CI)")
    total_s = time.perf_counter() - t0
    atomic_write_json(out / "summary.json", {
        "command": " ".join(shlex.quote(c) for c in sys.argv), "job_command": cmd, "reranker_run": str(reranker_run),
        "args": {k: str(v) for k, v in vars(args).items()}, "rows": rows, "paired": paired, "job_seconds": job_s,
        "total_seconds": total_s})
    print("\n" + md)
    print(f"files in {out}: table.md table.csv {png.name} summary.json job/ ({total_s / 60:.1f} min)")
    by = {r["system"]: r for r in rows}
    head = next(r for r in paired if r["comparison"] == "reranker - retriever" and r["metric"] == "correct")
    print(f"end_to_end_test_subset: n={n} " + " ".join(f"{s}={by[s]['correct']:.4f}" for s in SYSTEMS)
          + f" diff_reranker_vs_retriever={head['diff']:+.4f} [{head['lo']:+.4f}, {head['hi']:+.4f}]"
          f" p={head['p']:.4g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
