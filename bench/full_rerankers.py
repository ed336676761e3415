"""Rerankers on the full annotated SQuAD set: retriever order vs BCE vs direct UDCG, paired per query.

A thin wrapper over the named Hydra train experiments ``conf/experiment/full_<system>.yaml`` (``full_bce``,
``full_udcg``; ``full_listnet`` and ``full_lambda_udcg`` on request), one job per system and seed::

    train.py experiment=full_<system> seed=<s> hydra.run.dir=<out>/<system>_seed<s> logger=none ...

Each job (:mod:`udcg_ltr.jobs.train_job`) trains the packaged MiniLM as a cross-encoder on a seeded subsample
of 800 of the 6,468 train questions (1 epoch, 8 questions a step), chooses the best checkpoint and the
retriever-fusion weight on 200 val questions by UDCG@5 (:mod:`udcg_ltr.models.fusion`; the same rule for every
loss), scores the whole test split (1,643 questions) in float32 and writes ``per_query.csv`` (every system:
``retriever@5``, ``reranker_alone@5`` = the cross-encoder without fusion, ``reranker@5``,
``oracle_utility@5``) and ``cross_encoder/questions.json`` (the questions it trained and chose on). A finished
job of the same configuration is reused (the job's own skip rule: it does not see code changes; ``--force``
reruns it).

What this script adds: the test means of each system averaged over seeds per query, and paired bootstrap tests
(:func:`udcg_ltr.stats.bootstrap.paired_bootstrap_test`, 10,000 resamples, seed 0) on UDCG@5, nDCG@5 and
hits@5 of each trained system against the retriever and against BCE, of the other losses (ListNet,
LambdaLoss) against direct UDCG, and against other finished jobs named by ``--compare`` (say the same loss
trained on more questions); which system is best is read on val (each job's val UDCG@5 as deployed, mean over
seeds: ``best_on_val``, the order ``bench/full_dynamic_k.py --order reranker`` cuts); ``table.md``, ``table.csv``,
``paired_<metric>.png`` and ``summary.json`` in ``--out``.

Run: ``.venv/bin/python bench/full_rerankers.py`` (one seed of both systems: 45-85 min on the 2-core CPU;
three seeds ``--seeds 0,1,2`` about 4 h). ``--max-queries 90 --train-questions 20 --val-questions 10`` is a
minutes-long check of the plumbing on a seeded subsample; ``--dataset annotated`` runs ``squad_<system>`` on
the 400-question set (``bench/reranker_squad.py``). Other Hydra overrides pass through to every job
(``trainer.limit_train_batches=2``, ``model.cross_encoder.lr=3e-5``).

Last line (machine-read; ``udcg@5_test`` on the small set)::

    udcg@5_test_full: retriever=A bce=B udcg=C p_udcg_vs_retriever=P1 p_udcg_vs_bce=P2
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
from _full_data import add_data_args, full_root, prepare_data, run_job  # noqa: E402

from udcg_ltr.io import atomic_write_json, atomic_write_text  # noqa: E402
from udcg_ltr.report import fmt_p, markdown_table, plot_bars, read_csv, write_csv  # noqa: E402
from udcg_ltr.stats.bootstrap import paired_bootstrap_test  # noqa: E402

K = 5  # the recipes' k
COLUMNS = (f"udcg@{K}", f"ndcg@{K}", f"mrr@{K}", f"hits@{K}", f"erag@{K}")
PAIRED = (f"udcg@{K}", f"ndcg@{K}", f"hits@{K}")
#: Recipe prefix and data folder of each ``--dataset``.
DATASETS = {"annotated_full": ("full", "annotated_full"), "annotated": ("squad", "annotated")}


def job_command(system: str, seed: int, data_root: Path, run_dir: Path, args) -> list[str]:
    """The train job of one system and seed (printed, and stored in ``summary.json``)."""
    cmd = [sys.executable, str(ROOT / "train.py"), f"experiment={DATASETS[args.dataset][0]}_{system}",
           f"seed={seed}", f"paths.data_dir={data_root}", "logger=none", f"hydra.run.dir={run_dir}"]
    for option, key in (("train_questions", "model.cross_encoder.train_questions"),
                        ("val_questions", "model.cross_encoder.val_questions"),
                        ("epochs", "trainer.max_epochs")):
        value = getattr(args, option)
        if value is not None:  # 0 questions: all of them
            cmd.append(f"{key}={value or 'null'}")
    return cmd + (["force=true"] if args.force else []) + list(args.overrides)


def per_query_rows(run_dir: Path) -> dict[str, dict[str, dict[str, float]]]:
    """``{system: {qid: {metric: value}}}`` of the test split in a job's ``per_query.csv`` (empty: NaN)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in read_csv(run_dir / "per_query.csv"):
        if row["split"] == "test":
            out.setdefault(row["system"], {})[row["qid"]] = {m: float(row.get(m) or "nan") for m in COLUMNS}
    if not out:
        raise SystemExit(f"{run_dir / 'per_query.csv'} holds no test question")
    return out


def val_udcg(metrics: dict) -> float:
    """The val UDCG@K of the system as deployed: the cross-encoder fused with the retriever at the weight the job
    chose on val (``cross_encoder/val_udcg_fusion_<weight>``), or its best epoch's without fusion."""
    weight = metrics.get("cross_encoder/retriever_fusion")
    key = f"cross_encoder/val_udcg_fusion_{weight:g}" if weight is not None else f"cross_encoder/best_val/udcg@{K}"
    return float(metrics.get(key, "nan"))


def seed_means(runs: list[dict[str, dict[str, dict[str, float]]]], system: str, qids: list[str]) -> dict:
    """``{metric: [Q]}`` of ``system`` averaged over the runs (seeds), question by question."""
    return {m: np.mean([[run[system][q][m] for q in qids] for run in runs], axis=0) for m in COLUMNS}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_args(ap, ROOT / "outputs" / "bench" / "full_rerankers")
    ap.add_argument("--dataset", default="annotated_full", choices=sorted(DATASETS),
                    help="the full set (recipes full_<system>) or the 400-question one (squad_<system>)")
    ap.add_argument("--systems", default="bce,udcg", help="bce, udcg; listnet, lambda_udcg (full set)")
    ap.add_argument("--seeds", default="0", help="model seeds, comma-separated (one job per system and seed)")
    ap.add_argument("--train-questions", type=int, default=None,
                    help="train questions (seeded subsample, the same for every system and seed; 0 = all; "
                         "default: the recipe's)")
    ap.add_argument("--val-questions", type=int, default=None, help="val questions: epoch and fusion weight")
    ap.add_argument("--epochs", type=int, default=None, help="default: the recipe's")
    ap.add_argument("--seed", type=int, default=0, help="seed of the --max-queries subsample")
    ap.add_argument("--n-bootstrap", type=int, default=10000)
    ap.add_argument("--force", action="store_true", help="rerun finished jobs (force=true)")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=RUN",
                    help="also pair every trained system with the fused reranker of another finished train job "
                         "(a folder with per_query.csv), e.g. udcg_800q=outputs/bench/full_rerankers/udcg_seed0; "
                         "repeatable")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides passed to every job")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()

    if args.dataset == "annotated_full":
        prepared = prepare_data(args)
        if prepared is None:
            return 2
        data_root, out = prepared
    else:
        if args.max_queries:
            ap.error("--max-queries subsamples the full set only")
        data_root, out = full_root(args.data_dir).resolve(), args.out.resolve()
        out.mkdir(parents=True, exist_ok=True)
    systems = [s for s in args.systems.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",") if s]

    commands, runs, finished = {}, {}, {}
    for system in systems:
        for seed in seeds:
            name = f"{system}_seed{seed}"
            commands[name] = job_command(system, seed, data_root, out / name, args)
            seconds = run_job(commands[name], out / name)
            runs[name] = per_query_rows(out / name)
            metrics = json.loads((out / name / "job_result.json").read_text(encoding="utf-8"))["metrics"]
            finished[name] = {"seconds": seconds, "metrics": metrics}
            print(f"  {name}: best epoch {metrics.get('cross_encoder/best_epoch')}, fusion weight "
                  f"{metrics.get('cross_encoder/retriever_fusion', 0.0):g}, test udcg@{K} "
                  f"{metrics.get(f'test/reranker@{K}/udcg@{K}', float('nan')):.4f}", flush=True)

    first = next(iter(runs.values()))
    qids = list(first[f"retriever@{K}"])
    if any(list(run[f"retriever@{K}"]) != qids for run in runs.values()):
        raise SystemExit("the jobs evaluated different test questions")
    per_query = {"retriever": seed_means([first], f"retriever@{K}", qids)}
    for system in systems:
        mine = [runs[f"{system}_seed{seed}"] for seed in seeds]
        per_query[system] = seed_means(mine, f"reranker@{K}", qids)
        if f"reranker_alone@{K}" in mine[0]:
            per_query[f"{system}_alone"] = seed_means(mine, f"reranker_alone@{K}", qids)
    # Which trained system is best is read on val, never on test (mean over seeds of each job's val UDCG@K as deployed):
    # bench/full_dynamic_k.py --order reranker takes that system's seed-0 run.
    val = {s: float(np.mean([val_udcg(finished[f"{s}_seed{seed}"]["metrics"]) for seed in seeds]))
           for s in systems}
    best_on_val = max((s for s in systems if math.isfinite(val[s])), key=val.get, default=None)
    others = []  # --compare: shown and paired, never chosen
    for spec in args.compare:
        name, _, run = spec.partition("=")
        if not name or not run or name in per_query:
            ap.error(f"--compare {spec!r}: expected NAME=RUN with a new name")
        rows = per_query_rows(Path(run))
        if list(rows[f"retriever@{K}"]) != qids:
            raise SystemExit(f"--compare {spec}: its job evaluated other test questions")
        per_query[name] = seed_means([rows], f"reranker@{K}", qids)
        val[name] = val_udcg(json.loads((Path(run) / "job_result.json").read_text(encoding="utf-8"))["metrics"])
        others.append(name)
    per_query["oracle"] = seed_means([first], f"oracle_utility@{K}", qids)
    means = {name: {m: float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
                    for m, v in values.items()} for name, values in per_query.items()}  # where defined

    pairs = [(s, "retriever") for s in systems]
    pairs += [(s, "bce") for s in systems if s != "bce" and "bce" in systems]
    # The other losses against the objective the issue is about, direct UDCG.
    pairs += [(s, "udcg") for s in systems if s not in ("bce", "udcg") and "udcg" in systems]
    pairs += [(s, name) for name in others for s in systems]
    paired = []
    for a, b in pairs:
        for m in PAIRED:
            t = paired_bootstrap_test(per_query[a][m], per_query[b][m], n_bootstrap=args.n_bootstrap, seed=0)
            paired.append({"comparison": f"{a} - {b}", "metric": m, "diff": t.mean_diff, "lo": t.lo,
                           "hi": t.hi, "p": t.p_value, "n": t.n})

    title = (f"{args.dataset}, test split: {len(qids)} questions; systems trained with seeds {args.seeds} "
             f"(per-query means over seeds)")
    table = markdown_table([{"system": name, **{m: f"{v[m]:.4f}" for m in COLUMNS},
                             f"val udcg@{K}": f"{val[name]:.4f}" if name in val else ""}
                            for name, v in means.items()], ["system", *COLUMNS, f"val udcg@{K}"])
    diffs = markdown_table([{**r, "diff": f"{r['diff']:+.4f} [{r['lo']:+.4f}, {r['hi']:+.4f}]",
                             "p": fmt_p(r["p"])} for r in paired], ["comparison", "metric", "diff", "p", "n"])
    md = "\n".join([f"# {title}", "", f"Data: `{data_root}/{DATASETS[args.dataset][1]}`. Jobs: "
                    + "; ".join(f"`{' '.join(c[1:])}`" for c in commands.values()), "", table,
                    "`*_alone`: the cross-encoder without retriever fusion; oracle: top 5 by utility. "
                    f"`val udcg@{K}`: the fused system on its job's val questions, mean over seeds; best on val: "
                    f"**{best_on_val}**.", "",
                    f"## Paired differences (per query; bootstrap 95% CI and two-sided p, {args.n_bootstrap} "
                    "resamples, seed 0)", "", diffs]) + "\n"
    atomic_write_text(out / "table.md", md)
    write_csv(out / "table.csv", [{"system": name, **v} for name, v in means.items()])
    pngs = [plot_bars([r["comparison"] for r in rows], [r["diff"] for r in rows], out / f"paired_{m}.png",
                      lo=[r["lo"] for r in rows], hi=[r["hi"] for r in rows], digits=4, title=title,
                      ylabel=f"paired difference of {m} per question (95% CI)")
            for m in PAIRED for rows in [[r for r in paired if r["metric"] == m]]]
    total_s = time.perf_counter() - t0
    atomic_write_json(out / "summary.json", {
        "command": " ".join(shlex.quote(c) for c in sys.argv),
        "args": {k: str(v) for k, v in vars(args).items()},
        "jobs": {n: {"command": commands[n], **finished[n]} for n in commands},
        "means": means, "val_udcg": val, "best_on_val": best_on_val, "paired": paired,
        "total_seconds": total_s})
    print("\n" + md)
    print(f"files in {out}: table.md table.csv {' '.join(png.name for png in pngs)} summary.json "
          f"<system>_seed<s>/ ({total_s:.0f} s)")
    headline = {"bce", "udcg"} <= set(systems)  # the comparison the line reports; else every system
    shown = ["retriever", *(["bce", "udcg"] if headline else systems)]
    line = f"udcg@{K}_test{'_full' if args.dataset == 'annotated_full' else ''}: " + " ".join(
        f"{name}={means[name][f'udcg@{K}']:.4f}" for name in shown)
    p = {(r["comparison"], r["metric"]): r["p"] for r in paired}
    if headline:
        line += "".join(f" p_udcg_vs_{b}={p[(f'udcg - {b}', f'udcg@{K}')]:.4g}" for b in ("retriever", "bce"))
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
