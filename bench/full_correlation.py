"""Metric / end-to-end accuracy correlation on the full annotated SQuAD set (10,570 questions), test split.

A thin wrapper over the named Hydra experiment ``evaluate.py experiment=full_correlation``
(:func:`udcg_ltr.jobs.evaluate_job.mode_correlation` -> :func:`udcg_ltr.studies.correlation.run_correlation_study`),
which does the study itself: every question's 10 end-to-end contexts of 5 passages (the demo LLM's answers,
graded correct 2 > abstained 1 > wrong 0 by ``annotate.grading``), every metric on every context, and per query
Spearman's rho and Kendall's tau-b between the metric and the outcome over the query's 10 contexts (NA where
either side is constant). UDCG_theta (Eq. 3, SVM-rank, C = 1, the three feature variants) and the calibrated
gamma of UDCG (gamma*) are fitted on the **train** split's contexts only (``correlation.fit_splits=[train]``:
all of them, 6,468 questions x 10 = 64,680 contexts, no subsample), and reported on the **test** split
(1,643 questions, disjoint articles). With ``--k-sweep`` the job also truncates every context to its first
k' = 1..5 passages and refits UDCG_theta per k' (metric@k' against the full context's outcome).

What this script adds to the job's tables (``<out>/job/correlation/``): each metric's **paired difference to
nDCG** (per query, on the queries where both are defined) with its bootstrap 95% CI and paired bootstrap
p-value (:func:`udcg_ltr.stats.bootstrap.paired_bootstrap_test`, the job pairs everything with UDCG), for
Spearman and Kendall; a diagnostics table of the readings that differ only in which queries are averaged (the
NA policy: each metric over its own defined queries, over the queries where both are defined, NA counted as 0);
the k sweep; a PNG (means and differences with CIs).

Run: ``.venv/bin/python bench/full_correlation.py`` (about 2 minutes on the 2-core CPU; ``--max-queries 90`` for a
seconds-long check on a seeded subsample, ``--data-dir`` for another copy of the shared data).

Last line (machine-read), test-split means of the per-query Spearman and the paired difference UDCG_theta - nDCG::

    spearman_test_full: udcg=A udcg_theta=B ndcg=C erag=E diff_theta_vs_ndcg=D [lo, hi]
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)

ROOT = _offline.ROOT

import numpy as np  # noqa: E402
from _full_data import add_data_args, parse_and_prepare, run_job  # noqa: E402

from udcg_ltr.io import atomic_write_json, atomic_write_text  # noqa: E402
from udcg_ltr.report import (  # noqa: E402
    Column,
    fmt_ci,
    fmt_float,
    fmt_p,
    markdown_table,
    new_figure,
    read_csv,
    save_figure,
    write_csv,
)
from udcg_ltr.stats.bootstrap import bootstrap_ci, paired_bootstrap_test  # noqa: E402
from udcg_ltr.studies.correlation import row_label  # noqa: E402

BASELINE = "ndcg"
#: The metrics of the headline table, in order (the study's row keys, udcg_ltr.studies.correlation; tables and
#: the figure show their row_label); answer_prob is left out: the shared set holds no ``answer_logprob``
#: annotations (the job's own tables show it as NA).
METRICS = ("udcg", "udcg_theta", "udcg_gamma_star", "ndcg", "mrr", "map", "precision", "hits", "erag", "ra_nwg",
           "udcg_theta_relevance_only", "udcg_theta_binary", "random")
#: The metrics of the last line, under their own keys.
LINE_METRICS = ("udcg", "udcg_theta", "ndcg", "erag")
METHODS = ("spearman", "kendall")
SWEEP_SHOWN = ("udcg", "udcg_gamma_star", "udcg_theta", "ndcg", "precision", "erag")


def job_command(data_root: Path, run_dir: Path, args) -> list[str]:
    """The Hydra job this bench wraps (printed, and stored in ``summary.json``)."""
    sweep = "null" if args.k_sweep in ("", "none") else "[" + args.k_sweep + "]"
    return [sys.executable, str(ROOT / "evaluate.py"), "experiment=full_correlation", f"paths.data_dir={data_root}",
            f"correlation.C={args.C}", f"correlation.n_bootstrap={args.n_bootstrap}", f"correlation.k_sweep={sweep}",
            f"seed={args.seed}", "logger=none", f"force={'false' if args.reuse else 'true'}",
            f"hydra.run.dir={run_dir}"]


def _float(cell: str | None) -> float:
    return float(cell) if cell not in (None, "") else float("nan")


def per_query_values(rows: list[dict[str, str]], split: str) -> tuple[list[str], dict[str, dict[str, np.ndarray]],
                                                                       np.ndarray]:
    """``(qids, {method: {metric: [n_queries]}}, outcome_constant)`` of the ``split`` rows of ``per_query.csv``."""
    chosen = [r for r in rows if r["split"] == split]
    if not chosen:
        raise SystemExit(f"per_query.csv has no {split!r} query")
    values = {m: {name: np.array([_float(r.get(f"{name}|{m}")) for r in chosen]) for name in METRICS
                  if f"{name}|{m}" in chosen[0]} for m in METHODS}
    constant = np.array([r["outcome_constant"] in ("True", "true", "1") for r in chosen])
    return [r["qid"] for r in chosen], values, constant


def metric_rows(values: dict[str, dict[str, np.ndarray]], n_bootstrap: int, seed: int) -> list[dict]:
    """Per metric: mean, bootstrap CI, n / NA of each method, and the paired test against nDCG."""
    rows = []
    for name in METRICS:
        if name not in values["spearman"]:
            continue
        row: dict = {"metric": name}
        for m in METHODS:
            v, base = values[m][name], values[m][BASELINE]
            ok = ~np.isnan(v)
            row[m] = float(v[ok].mean()) if ok.any() else float("nan")
            row[f"{m}_lo"], row[f"{m}_hi"] = bootstrap_ci(v, n_bootstrap, seed)
            row[f"{m}_n"], row[f"{m}_na"] = int(ok.sum()), int((~ok).sum())
            test = paired_bootstrap_test(v, base, n_bootstrap, seed)  # this metric minus nDCG
            same = name == BASELINE
            row[f"{m}_diff_vs_ndcg"] = float("nan") if same else test.mean_diff
            row[f"{m}_diff_lo"] = float("nan") if same else test.lo
            row[f"{m}_diff_hi"] = float("nan") if same else test.hi
            row[f"{m}_p_vs_ndcg"] = float("nan") if same else test.p_value
            row[f"{m}_paired_n"] = test.n
        rows.append(row)
    return rows


def check_against_job(rows: list[dict], summary: dict) -> None:
    """The job's own test-split means must equal ours (same per-query values, same bootstrap code and seed)."""
    job = {r["metric"]: r for r in summary["summary"]["report"]}
    for row in rows:
        ref = job.get(row["metric"])
        if ref is None:
            continue
        for m in METHODS:
            a, b = row[m], ref[m] if ref[m] is not None else float("nan")
            if not (math.isclose(a, b, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))):
                raise SystemExit(f"per_query.csv and summary.json disagree on {row['metric']} {m}: {a} vs {b}")


def diagnostics(values: dict[str, np.ndarray], outcome_constant: np.ndarray, n_bootstrap: int, seed: int,
                pairs=(("udcg", "ndcg"), ("udcg_theta", "ndcg"), ("udcg_gamma_star", "ndcg"))) -> list[dict]:
    """Spearman means of metric pairs under the NA policies a reading can take (module doc)."""
    rows = []
    for a_name, b_name in pairs:
        if a_name not in values or b_name not in values:
            continue
        a, b = values[a_name], values[b_name]
        both = ~np.isnan(a) & ~np.isnan(b)
        varying = ~outcome_constant
        readings = {
            "each metric over its own defined queries (the study)": (a, b),
            "queries where both are defined": (np.where(both, a, np.nan), np.where(both, b, np.nan)),
            "NA -> 0 where the outcome varies (metric constant)": (np.where(varying, np.nan_to_num(a), np.nan),
                                                                   np.where(varying, np.nan_to_num(b), np.nan)),
            "NA -> 0 on every test question": (np.nan_to_num(a), np.nan_to_num(b)),
        }
        for reading, (x, y) in readings.items():
            test = paired_bootstrap_test(x, y, n_bootstrap, seed)
            rows.append({"first": a_name, "second": b_name, "reading": reading,
                         "a": float(np.nanmean(x)) if (~np.isnan(x)).any() else float("nan"),
                         "a_n": int((~np.isnan(x)).sum()),
                         "b": float(np.nanmean(y)) if (~np.isnan(y)).any() else float("nan"),
                         "b_n": int((~np.isnan(y)).sum()),
                         "paired_diff": test.mean_diff, "diff_lo": test.lo, "diff_hi": test.hi, "p": test.p_value,
                         "paired_n": test.n})
    return rows


def render_table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        cells = {"metric": row_label(r["metric"])}
        for m in METHODS:
            cells[m] = fmt_ci(r[m], r[f"{m}_lo"], r[f"{m}_hi"])
            cells[f"{m}_diff"] = ("-" if r["metric"] == BASELINE else
                                  f"{r[f'{m}_diff_vs_ndcg']:+.3f} [{r[f'{m}_diff_lo']:+.3f}, {r[f'{m}_diff_hi']:+.3f}]")
            cells[f"{m}_p"] = "-" if r["metric"] == BASELINE else fmt_p(r[f"{m}_p_vs_ndcg"])
        cells["n"] = f"{r['spearman_n']} ({r['spearman_na']})"
        out.append(cells)
    return markdown_table(out, [Column("metric", "Metric"), Column("spearman", "Spearman [95% CI]"),
                                Column("spearman_diff", f"- {row_label(BASELINE)} (paired) [95% CI]"), Column("spearman_p", "p"),
                                Column("kendall", "Kendall tau-b [95% CI]"),
                                Column("kendall_diff", f"- {row_label(BASELINE)} (paired) [95% CI]"), Column("kendall_p", "p"),
                                Column("n", "queries (NA)")])


def render_diagnostics(rows: list[dict]) -> str:
    out = [{"pair": f"{row_label(r['first'])} vs {row_label(r['second'])}", "reading": r["reading"], "a": f"{fmt_float(r['a'])} ({r['a_n']})",
            "b": f"{fmt_float(r['b'])} ({r['b_n']})",
            "diff": f"{r['paired_diff']:+.4f} [{r['diff_lo']:+.4f}, {r['diff_hi']:+.4f}]", "p": fmt_p(r["p"])}
           for r in rows]
    return markdown_table(out, [Column("pair"), Column("reading"), Column("a", "first (queries)"),
                                Column("b", "second (queries)"), Column("diff", "paired difference [95% CI]"),
                                Column("p")], align="llrrrr")


def sweep_table(path: Path) -> tuple[str, list[dict]]:
    if not path.is_file():
        return "", []
    rows = read_csv(path)
    ks = sorted({int(r["k"]) for r in rows})
    out = []
    for name in SWEEP_SHOWN:
        by_k = {int(r["k"]): r for r in rows if r["metric"] == name}
        if by_k:
            out.append({"metric": row_label(name), **{f"k={k}": fmt_float(_float(by_k[k]["spearman"])) if k in by_k else "NA"
                                           for k in ks}})
    return markdown_table(out, ["metric", *[f"k={k}" for k in ks]]), rows


def plot(rows: list[dict], path: Path, title: str) -> Path:
    """Left: mean per-query Spearman with its CI; right: the paired difference to nDCG with its CI."""
    fig, (left, right) = new_figure(1, 2, figsize=(11.0, 0.38 * len(rows) + 1.6))
    labels = [row_label(r["metric"]) for r in rows]
    y = np.arange(len(rows))[::-1]
    colors = ["tab:orange" if r["metric"] in ("udcg", "udcg_theta") else "tab:blue" for r in rows]
    for ax, key, lo_key, hi_key, xlabel in (
            (left, "spearman", "spearman_lo", "spearman_hi", "mean per-query Spearman (95% CI)"),
            (right, "spearman_diff_vs_ndcg", "spearman_diff_lo", "spearman_diff_hi",
             "paired difference to nDCG (95% CI)")):
        v = np.array([r[key] for r in rows], float)
        lo, hi = np.array([r[lo_key] for r in rows], float), np.array([r[hi_key] for r in rows], float)
        ok = ~np.isnan(v)
        err = np.nan_to_num(np.clip(np.vstack([v - lo, hi - v]), 0, None))[:, ok]
        ax.barh(y[ok], v[ok], xerr=err, capsize=3, color=[c for c, o in zip(colors, ok) if o])
        ax.set_yticks(y)
        ax.set_yticklabels(labels)
        ax.axvline(0.0, color="grey", lw=0.6)
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_args(ap, ROOT / "outputs" / "bench" / "full_correlation")
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0, help="bootstrap and subsample seed")
    ap.add_argument("--C", default="1.0", help="SVM-rank C of UDCG_theta, or 'cv' (query-grouped CV on train)")
    ap.add_argument("--k-sweep", default="1,2,3,4,5",
                    help="context sizes k' of the truncation sweep (UDCG_theta refitted per k'); 'none' to skip")
    t0 = time.perf_counter()
    parsed = parse_and_prepare(ap, argv)
    if parsed is None:
        return 2
    args, data_root, out = parsed

    run_dir = out / "job"
    cmd = job_command(data_root, run_dir, args)
    job_s = run_job(cmd, run_dir)

    study = run_dir / "correlation"
    summary = json.loads((study / "summary.json").read_text(encoding="utf-8"))
    meta = summary["meta"]
    qids, values, outcome_constant = per_query_values(read_csv(study / "per_query.csv"), "test")
    rows = metric_rows(values, args.n_bootstrap, args.seed)
    check_against_job(rows, summary)
    diag = diagnostics(values["spearman"], outcome_constant, args.n_bootstrap, args.seed)
    sweep_md, sweep_rows = sweep_table(study / "k_sweep.csv")
    theta = summary.get("weights", {}).get("full", {})
    theta_meta = theta.get("meta", {})
    fit_note = (f"UDCG_theta (full) fitted on {theta_meta.get('n_contexts')} train contexts of "
                f"{theta_meta.get('n_queries')} questions ({theta_meta.get('n_pairs')} pairs; all of them, no "
                f"subsample), C = {theta_meta.get('C')}; calibrated gamma* = {meta.get('gamma_calibrated')}")

    title = (f"Full annotated SQuAD, test split: {len(qids)} questions "
             f"({int(outcome_constant.sum())} with a constant outcome: NA for every metric)")
    table_md = render_table(rows)
    diag_md = render_diagnostics(diag)
    o = meta["outcomes"]
    md = "\n".join([
        f"# {title}", "",
        f"Data: `{data_root}/annotated_full` ({meta['n_queries']} questions, {meta['n_contexts']} contexts: correct "
        f"{o.get('correct', 0)}, abstained {o.get('abstained', 0)}, wrong {o.get('wrong', 0)}); LLM `{meta['llm']}`.",
        f"Fit split: {'+'.join(meta['fit_splits'])} ({meta['n_fit_queries']} questions); report split: test. "
        f"{fit_note}.",
        f"Bootstrap: {args.n_bootstrap} resamples of test questions, seed {args.seed}. Job: `{' '.join(cmd[1:])}`.",
        "", "## Per-query correlation with the end-to-end outcome, and the paired difference to nDCG", "",
        table_md,
        "Difference: the metric minus nDCG per query, on the queries where both are defined; p: paired bootstrap "
        "(centred, two-sided).", "",
        "## Which queries are averaged (NA policy)", "", diag_md,
        "A query whose 10 outcomes are equal is NA for every metric; a metric constant over a query's contexts "
        "(nDCG, Precision, HITS often are: same relevance pattern) is NA for that metric only, so the study's "
        "means average slightly different query sets. The paired differences use the common queries.", "",
        *(["## k sweep (contexts truncated to k' passages, UDCG_theta refitted per k'; outcome of the full context)",
           "", sweep_md] if sweep_md else []),
    ]) + "\n"
    atomic_write_text(out / "table.md", md)
    write_csv(out / "table.csv", rows)
    write_csv(out / "diagnostics.csv", diag)
    png = plot(rows, out / "correlation_vs_ndcg.png", title)
    total_s = time.perf_counter() - t0
    atomic_write_json(out / "summary.json", {"command": " ".join(shlex.quote(c) for c in sys.argv),
                                             "job_command": cmd, "args": {k: str(v) for k, v in vars(args).items()},
                                             "job_seconds": job_s, "total_seconds": total_s, "fit": fit_note,
                                             "rows": rows, "diagnostics": diag, "k_sweep": sweep_rows,
                                             "meta": meta})
    print("\n" + md)
    print(f"files in {out}: table.md table.csv diagnostics.csv {png.name} summary.json job/ ({total_s:.0f} s)")
    by = {r["metric"]: r for r in rows}
    theta_row = by["udcg_theta"]
    print("spearman_test_full: " + " ".join(f"{key}={by[key]['spearman']:.3f}" for key in LINE_METRICS)
          + f" diff_theta_vs_ndcg={theta_row['spearman_diff_vs_ndcg']:+.3f} "
            f"[{theta_row['spearman_diff_lo']:+.3f}, {theta_row['spearman_diff_hi']:+.3f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
