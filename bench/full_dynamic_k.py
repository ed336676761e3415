"""Dynamic-k selectors on the full annotated SQuAD set (10,570 questions), retriever or reranker order.

A thin wrapper over the named Hydra experiments ``evaluate.py experiment=full_dynamic_k`` (the retriever's
order) and ``experiment=full_dynamic_k_reranker`` (``--order reranker``), whose job
(:func:`udcg_ltr.jobs.evaluate_job.mode_selectors`) does the study itself. How many of the top-10 passages
should the demo LLM read? Every selector of :mod:`udcg_ltr.select` picks a per-question ``k in 0..10`` (the
kept set is the top-k prefix of the order; k = 0 means no passage, UDCG 0.5) and is scored by the UDCG
(Eq. 4, gamma = 1/3) of the kept set per test question (1,643 questions, articles disjoint from train, val):

* ``best_fixed``: the fixed k with the best mean UDCG on train + val; ``score_threshold``,
  ``relative_threshold`` and ``cumulative_utility`` (labels-free rules), knobs searched on train + val;
* learned selectors (Lightning; :mod:`udcg_ltr.select.gate`, ``kclassifier``, ``expected``,
  ``calibrated``): the grid of :func:`udcg_ltr.select.training.learned_candidates` (the order's list
  features; plus lexical coverage; plus the reader probes of :mod:`udcg_ltr.data.probes`, label-free but
  one LLM call per candidate at inference), trained on the **train** split (6,468 questions, or
  ``--max-train``) with the best epoch and the configuration chosen on **val** (2,459), then (the recipe's
  ``selectors.refit``) each chosen one refitted on train + val for that many epochs; training budget
  ``--batch-size``, ``--max-epochs``, ``--patience``, ``--n-seeds``. ``learned`` is the configuration with
  the best val UDCG of all, ``learned_no_llm`` the best without reader probes; each kind's best is listed;
* ``oracle``: the per-question best k from the gold utilities (upper bound).

The retriever is not trained on these questions, so its train scores are used as they are. Reranker order:
the kept set is the top-k prefix of the best reranker of ``bench/full_rerankers.py``, chosen on val (its
``summary.json`` names it: ListNet on utility in the recorded runs; direct UDCG until that bench has run), seed 0
(``--reranker-run``: the train job's ``cross_encoder/model`` with the saved retriever-fusion weight); its own
train / val questions (``cross_encoder/questions.json``) are left out, so every score the selectors learn from
is held out, and the recipe
draws 1,500 train and 600 val questions of the rest (``--max-train`` / ``--max-val``: the reranker scores
every question used). Results go to ``<out>/reranker_order/``.

``--dataset annotated`` runs the same study on the 400-question annotated SQuAD set (train / val / test = 274 /
60 / 66; ``bench/dynamic_k_squad.py``) through ``experiment=dynamic_k_squad`` / ``dynamic_k_squad_reranker``:
every train and val question, the learned selectors' default budget (batches of 32, up to 150 epochs, patience 30,
3 seeds), and in the reranker order a run of ``bench/reranker_squad.py`` (its ``summary.json`` in
``outputs/bench/reranker_squad``), whose own questions are left out the same way: that reranker must have trained
and chosen on part of each split (``bench/reranker_squad.py --train-questions 137 --val-questions 30``), since its
recipes use all of them and would leave the selectors nothing held out (the job says so).

What this script adds to the job's tables (``<out>/job/``), over test questions resampled
(:mod:`udcg_ltr.stats.bootstrap`): each selector's mean UDCG with its bootstrap 95% CI; its paired
difference to ``best_fixed`` (CI and paired bootstrap p-value); the **gap closed** ``G = (learned -
best_fixed) / (oracle - best_fixed)`` with a paired bootstrap CI
(:func:`~udcg_ltr.stats.bootstrap.gap_closed_bootstrap`); table.md, selectors_test.csv, udcg_test.png and
results.json.

Run: ``.venv/bin/python bench/full_dynamic_k.py`` (2.5 minutes on an idle 2-core CPU; ``--max-queries 90
--grid quick --max-epochs 2`` for a seconds-long check of the plumbing on a seeded subsample).

Last line (machine-read; ``udcg_test_full_reranker_order: ...`` with ``--order reranker``, ``udcg_test: ...`` and
``udcg_test_reranker_order: ...`` with ``--dataset annotated``)::

    udcg_test_full: best_fixed=A relative_threshold=B learned=C oracle=D gap_closed=G p=P
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import NamedTuple

import _offline  # noqa: F401  (environment first: offline hubs, W&B offline)

ROOT = _offline.ROOT

import numpy as np  # noqa: E402
from _full_data import add_data_args, add_reuse_arg, best_reranker_run, prepare_data, run_job  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from udcg_ltr.io import atomic_write_json, atomic_write_text  # noqa: E402
from udcg_ltr.report import new_figure, read_csv, save_figure, write_csv  # noqa: E402
from udcg_ltr.select import format_rows_markdown  # noqa: E402
from udcg_ltr.stats.bootstrap import bootstrap_ci, gap_closed_bootstrap, paired_bootstrap_test  # noqa: E402


class Dataset(NamedTuple):
    """What ``--dataset`` names: the data folder, the recipe per order, the reranker bench, the table's words."""

    folder: str
    experiments: dict[str, str]
    rerankers: Path  # the output folder of the bench whose best-on-val run gives the reranker order
    title: str
    line: str  # the last line's name


DATASETS = {
    "annotated_full": Dataset("annotated_full", {"retriever": "full_dynamic_k", "reranker": "full_dynamic_k_reranker"},
                              ROOT / "outputs" / "bench" / "full_rerankers", "full annotated SQuAD", "udcg_test_full"),
    "annotated": Dataset("annotated", {"retriever": "dynamic_k_squad", "reranker": "dynamic_k_squad_reranker"},
                         ROOT / "outputs" / "bench" / "reranker_squad", "annotated SQuAD (400 questions)",
                         "udcg_test"),
}
ORDERS = ("retriever", "reranker")
HEADLINE = ("best_fixed", "relative_threshold", "learned", "oracle")
BUDGET = ("batch_size", "max_epochs", "patience", "n_seeds")


def job_command(data_root: Path, run_dir: Path, args) -> list[str]:
    """The Hydra job this bench wraps (printed, and stored in ``results.json``)."""
    cmd = [sys.executable, str(ROOT / "evaluate.py"), f"experiment={DATASETS[args.dataset].experiments[args.order]}",
           f"paths.data_dir={data_root}", f"selectors.grid={args.grid}",
           f"selectors.probes={str(args.probes).lower()}",
           *(f"selectors.budget.{key}={getattr(args, key)}" for key in BUDGET if getattr(args, key) is not None),
           f"seed={args.seed}", "logger=none", f"force={'false' if args.reuse else 'true'}", f"hydra.run.dir={run_dir}"]
    cmd += [f"selectors.max_questions.{s}={n}" for s, n in (("train", args.max_train), ("val", args.max_val))
            if n is not None]
    if args.order == "reranker":
        cmd += [f"reranker.path={args.reranker_run / 'cross_encoder' / 'model'}",
                f"selectors.exclude_questions={args.reranker_run / 'cross_encoder' / 'questions.json'}"]
    return cmd


def job_budget(run_dir: Path) -> dict:
    """The learned selectors' training budget the job ran with (the recipe's unless an option replaced it), as
    Hydra saved its configuration in the run folder."""
    return OmegaConf.to_container(OmegaConf.load(run_dir / ".hydra" / "config.yaml").selectors.budget)


def add_statistics(rows: list[dict], per_query: dict[str, np.ndarray], n_bootstrap: int, seed: int) -> None:
    """Each row's bootstrap CI, paired test against ``best_fixed`` and gap closed (module doc), in place."""
    fixed, oracle = per_query["best_fixed"], per_query["oracle"]
    for row in rows:
        name = row["selector"]
        v = per_query[name]
        if not math.isclose(v.mean(), row["udcg"], abs_tol=1e-12):
            raise SystemExit(f"per_query_test.csv and selectors_test.csv disagree on {name}")
        row["udcg_lo"], row["udcg_hi"] = bootstrap_ci(v, n_bootstrap, seed)
        test = paired_bootstrap_test(v, fixed, n_bootstrap, seed)
        row["diff_vs_best_fixed"], row["diff_lo"], row["diff_hi"] = test.mean_diff, test.lo, test.hi
        row["p_vs_best_fixed"] = test.p_value if name != "best_fixed" else float("nan")
        row["gap_closed"], row["gap_lo"], row["gap_hi"] = (
            (float("nan"),) * 3 if name in ("oracle", "best_fixed")
            else gap_closed_bootstrap(v, fixed, oracle, n_bootstrap, seed))


def plot(rows: list[dict], path: Path, title: str) -> Path:
    """Mean test UDCG per selector with its 95% CI; best fixed k and the oracle as vertical lines."""
    fig, ax = new_figure(figsize=(7.5, 0.4 * len(rows) + 1.6))
    y = np.arange(len(rows))[::-1]
    v = np.array([r["udcg"] for r in rows])
    err = np.vstack([v - np.array([r["udcg_lo"] for r in rows]), np.array([r["udcg_hi"] for r in rows]) - v])
    colors = ["tab:orange" if r["selector"] == "learned" else "tab:blue" for r in rows]
    ax.barh(y, v, xerr=np.clip(err, 0, None), capsize=3, color=colors)
    by = {r["selector"]: r for r in rows}
    for name, style in (("best_fixed", "--"), ("oracle", ":")):
        ax.axvline(by[name]["udcg"], color="grey", ls=style, lw=0.8, label=name)
    ax.set_yticks(y)
    ax.set_yticklabels([r["selector"] for r in rows])
    ax.set_xlim(max(0.0, min(r["udcg_lo"] for r in rows) - 0.02), max(r["udcg_hi"] for r in rows) + 0.01)
    ax.set_xlabel("mean UDCG of the kept set, test (95% CI)")
    g = by["learned"]
    gap = f"{g['gap_closed']:.3f} [{g['gap_lo']:.3f}, {g['gap_hi']:.3f}]"
    ax.set_title(f"{title}\ngap closed by learned: {gap}", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_args(ap, ROOT / "outputs" / "bench" / "full_dynamic_k")
    ap.add_argument("--dataset", default="annotated_full", choices=sorted(DATASETS),
                    help="the full set (recipes full_dynamic_k*) or the 400-question one (dynamic_k_squad*)")
    ap.add_argument("--order", choices=ORDERS, default="retriever",
                    help="whose top-k prefix the selectors cut: the retriever's or a trained reranker's")
    ap.add_argument("--reranker-run", type=Path, default=None,
                    help="with --order reranker: a run folder of bench/full_rerankers.py (bench/reranker_squad.py "
                         "with --dataset annotated; cross_encoder/model, cross_encoder/questions.json); default: the "
                         "seed-0 run of the system that bench names best on val (its summary.json), direct UDCG "
                         "before it has run")
    ap.add_argument("--max-train", type=int, default=None,
                    help="train the learned selectors on a seeded draw of this many train questions "
                         "(default: the recipe's: all of them, but 1,500 in the full set's reranker order)")
    ap.add_argument("--max-val", type=int, default=None,
                    help="a seeded draw of this many val questions (default: the recipe's: all, but 600 in the "
                         "full set's reranker order)")
    ap.add_argument("--grid", choices=("full", "quick"), default="full",
                    help="learned configurations: learned_candidates' full grid or its quick one")
    ap.add_argument("--probes", action=argparse.BooleanOptionalAction, default=True,
                    help="also offer the learned selectors the reader probes (label-free, an LLM call per "
                         "candidate)")
    # The learned selectors' budget: the recipe's (full set 256 / 40 / 8 / 1; 400 questions 32 / 150 / 30 / 3).
    ap.add_argument("--batch-size", type=int, default=None, help="default: the recipe's")
    ap.add_argument("--max-epochs", type=int, default=None, help="default: the recipe's")
    ap.add_argument("--patience", type=int, default=None, help="default: the recipe's")
    ap.add_argument("--n-seeds", type=int, default=None,
                    help="modules averaged per learned selector (default: the recipe's)")
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0, help="selector, subsample and bootstrap seed")
    t0 = time.perf_counter()
    add_reuse_arg(ap)
    args = ap.parse_args(argv)
    dataset = DATASETS[args.dataset]
    prepared = prepare_data(args, dataset.folder)
    if prepared is None:
        return 2
    data_root, out = prepared
    if args.order == "reranker":
        out = out / "reranker_order"
        out.mkdir(parents=True, exist_ok=True)
        if args.reranker_run is None:
            args.reranker_run = best_reranker_run(dataset.rerankers)
            print(f"reranker order: {args.reranker_run} (best on val in {dataset.rerankers / 'summary.json'})",
                  flush=True)
    run_dir = out / "job"
    cmd = job_command(data_root, run_dir, args)
    job_s = run_job(cmd, run_dir)

    job = json.loads((run_dir / "selectors.json").read_text(encoding="utf-8"))
    budget = job_budget(run_dir)
    rows = [{"selector": r["selector"], "val_udcg": float(r["val_udcg"]), "udcg": float(r["udcg"]),
             "mean_k": float(r["mean_k"]), "k0_rate": float(r["k0_rate"]), "k_hist": r["k_hist"]}
            for r in read_csv(run_dir / "selectors_test.csv")]
    table = read_csv(run_dir / "per_query_test.csv")
    per_query = {r["selector"]: np.array([float(q[r["selector"]]) for q in table]) for r in rows}
    add_statistics(rows, per_query, args.n_bootstrap, args.seed)
    by = {r["selector"]: r for r in rows}
    learned, p_learned = by["learned"], by["learned"]["p_vs_best_fixed"]
    n, ex, choice = job["questions"], job["excluded"], job["choice"]
    order_note = (f"; reranker order ({args.reranker_run}, retriever-fusion weight "
                  f"{job['retriever_fusion']:g}), its {ex['train']} train and {ex['val']} val questions left "
                  "out" if args.order == "reranker" else "")
    cols = ["selector", "val_udcg", "udcg", "udcg_lo", "udcg_hi", "diff_vs_best_fixed", "p_vs_best_fixed",
            "gap_closed", "gap_lo", "gap_hi", "mean_k", "k0_rate", "k_hist"]
    md = "\n".join([
        f"# Dynamic-k selectors, {dataset.title}, {args.order} order (test split)", "",
        f"Questions: {', '.join(f'{s} {v}' for s, v in n.items())}{order_note}; learned selectors trained on "
        f"train, configuration and epoch chosen on val"
        + (", then refitted on train + val for that many epochs (val_udcg: the train-only fit's)"
           if job.get("refit") else "") + f"; rule knobs searched on train + val (best fixed k: "
        f"{job['rules']['best_fixed']['config']}).",
        f"Learned grid: {args.grid} ({job['n_candidates']} configurations; batch {budget['batch_size']}, <= "
        f"{budget['max_epochs']} epochs, patience {budget['patience']}, {budget['n_seeds']} seed(s)); `learned` = "
        f"{choice['learned']['kind']}{' with reader probes' if choice['learned']['uses_probes'] else ''}"
        + (f"; `learned_no_llm` = {choice['learned_no_llm']['kind']}" if "learned_no_llm" in choice else "")
        + ".",
        f"UDCG (Eq. 4, gamma = 1/3) of the kept top-k per test question; CIs: {args.n_bootstrap} bootstrap "
        f"resamples of test questions, seed {args.seed}; differences and p paired with best_fixed. Job: "
        f"`{' '.join(cmd[1:])}`.",
        "", format_rows_markdown(rows, cols), "",
        f"Gap closed by `learned`: G = (learned - best_fixed) / (oracle - best_fixed) = "
        f"{learned['gap_closed']:.3f} [{learned['gap_lo']:.3f}, {learned['gap_hi']:.3f}] (paired bootstrap); "
        f"learned - best_fixed = "
        f"{learned['diff_vs_best_fixed']:+.4f} [{learned['diff_lo']:+.4f}, {learned['diff_hi']:+.4f}], "
        f"p = {p_learned:.4g}"
        + (f" (the smallest p a {args.n_bootstrap}-resample bootstrap can give)"
           if p_learned <= 1.0 / (args.n_bootstrap + 1) + 1e-12 else "") + ".", ""]) + "\n"
    atomic_write_text(out / "table.md", md)
    write_csv(out / "selectors_test.csv", rows)
    png = plot(rows, out / "udcg_test.png", f"{args.order} order, {n['test']} test questions")
    total_s = time.perf_counter() - t0
    atomic_write_json(out / "results.json", {
        "command": " ".join(shlex.quote(c) for c in sys.argv), "job_command": cmd,
        "args": {k: str(v) for k, v in vars(args).items()}, "budget": budget, "rows": rows, "job": job,
        "job_seconds": job_s,
        "total_seconds": total_s})
    print("\n" + md)
    print(f"files in {out}: table.md selectors_test.csv {png.name} results.json job/ (learned selectors "
          f"{job['learned_seconds'] / 60:.1f} min, total {total_s / 60:.1f} min)")
    print(f"{dataset.line}{'_reranker_order' if args.order == 'reranker' else ''}: "
          + " ".join(f"{name}={by[name]['udcg']:.4f}" for name in HEADLINE)
          + f" gap_closed={learned['gap_closed']:.3f} p={p_learned:.4g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
