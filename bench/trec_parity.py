"""Parity of the TREC table with trec_eval (pytrec_eval) and ranx on TREC DL19, in one run.

Three comparisons, every measure of the TREC table (nDCG, MAP, P, R, MRR at 5 and 10, and the
uncut nDCG, MAP, R = set_recall, MRR), per query:

1. the BM25 run of ``../shared/data/trec_dl19`` through :func:`udcg_ltr.jobs.systems.trec_metrics`
   (``ties="trec"``) against trec_eval (``-l 2``) and ranx;
2. the tables ``evaluate.py experiment=dl19_rerank`` itself produces (the full-ranking TREC table
   and the top-10 context table, means over the judged queries), with a stand-in reranker instead
   of a trained model: BM25 scores rounded to integers, so most queries have tied scores. Once per
   tie rule (``ties=trec`` and ``ties=stable``); the reference reads the run file that
   :func:`udcg_ltr.data.readers.trec.write_trec_run` writes for the same scores with that rule.

Prints the largest absolute difference per measure, then the machine-read line
``trec_parity_dl19: max_abs_diff=X metrics=N`` (N = distinct measures compared).

Run: ``.venv/bin/python bench/trec_parity.py`` (about 20 s; needs pytrec_eval-terrier, uses ranx when
installed, and the DL19 files under ``UDCG_LTR_DATA`` / ``../shared/data``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import _offline  # noqa: E402,F401  (environment first: offline hubs, W&B offline)
import numpy as np  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from udcg_ltr.data.readers.trec import read_dl19, read_trec_qrels, read_trec_run, write_trec_run  # noqa: E402
from udcg_ltr.jobs import evaluate_job  # noqa: E402
from udcg_ltr.jobs.systems import trec_metrics  # noqa: E402
from udcg_ltr.metrics.reference import max_abs_diff, pytrec_eval_table, ranx_table  # noqa: E402
from udcg_ltr.metrics.table import trec_measure  # noqa: E402
from udcg_ltr.paths import data_dir  # noqa: E402

CUTOFFS = (5, 10)
THRESHOLD = 2  # DL19: grade >= 2 is relevant for the binary measures (trec_eval -l 2)
CONTEXT = ("ndcg@10", "map@10", "precision@10", "recall@10", "mrr@10")  # the top-10 context table's trec measures


def stand_in(records):
    """The stand-in reranker: BM25 rounded to integers (deterministic, no model, many ties)."""
    return [np.round(np.array([p.score for p in r.passages])) for r in records]


def run_pipeline(tmp: Path, ties: str) -> dict[str, float]:
    """``evaluate.py experiment=dl19_rerank`` in process; only the reranker's scoring is replaced."""
    evaluate_job._reranker_scores = lambda ctx, records: stand_in(records)  # no trained model needed
    root = Path(evaluate_job.__file__).resolve().parents[2]
    stand_in_dir = tmp / "stand-in"  # an existing folder: the config check wants one; nothing is loaded from it
    stand_in_dir.mkdir(exist_ok=True)
    with initialize_config_dir(config_dir=str(root / "conf"), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[
            "experiment=dl19_rerank", "~llm", "logger=none", f"reranker.path={stand_in_dir}", f"paths.root_dir={root}",
            f"paths.data_dir={data_dir()}", f"paths.output_dir={tmp / ties}", f"paths.cache_dir={tmp / 'cache'}",
            f"++ties={ties}"])
        return evaluate_job.evaluate(cfg)


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help, and no stray arguments
    folder = data_dir() / "trec_dl19"
    results, qrels_path = folder / "retrieve_results_dl19.json.gz", folder / "qrels.dl19-passage.txt.gz"
    if not (results.is_file() and qrels_path.is_file()):
        print(f"TREC DL19 not found under {folder} (set UDCG_LTR_DATA)", file=sys.stderr)
        return 2
    records, qrels = read_dl19(results, qrels_path), read_trec_qrels(qrels_path)
    qids = [r.qid for r in records]
    worst: dict[str, float] = {}

    def note(diffs: dict[str, float], label: str) -> None:
        for name, d in diffs.items():
            worst[name] = max(worst.get(name, 0.0), d)
        print(f"{label:<48} max |diff| {max(diffs.values()):.3e} over {len(diffs)} measures")

    bm25 = [np.array([p.score for p in r.passages]) for r in records]
    ours = trec_metrics(records, bm25, relevance_threshold=THRESHOLD, cutoffs=CUTOFFS, ties="trec")
    columns = list(ours)
    run = {r.qid: {p.pid: p.score for p in r.passages} for r in records}
    note(max_abs_diff(ours, qids, pytrec_eval_table(qrels, run, columns, THRESHOLD)), "BM25 run vs trec_eval")
    try:
        note(max_abs_diff(ours, qids, ranx_table(qrels, run, columns, THRESHOLD)), "BM25 run vs ranx")
    except ImportError:
        print("ranx not installed: trec_eval only")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rankings = {"retriever": {r.qid: {p.pid: -float(p.rank) for p in r.passages} for r in records},
                    "reranker": {r.qid: dict(zip((p.pid for p in r.passages), s.tolist()))
                                 for r, s in zip(records, stand_in(records))}}
        tied = sum(len(set(s.values())) < len(s) for s in rankings["reranker"].values())
        for ties in ("trec", "stable"):
            metrics = run_pipeline(tmp, ties)
            for system, scores in rankings.items():
                path = write_trec_run(tmp / f"{system}-{ties}.run", scores, ties=ties)
                reference = pytrec_eval_table(qrels, read_trec_run(path), columns, THRESHOLD)
                means = {c: float(np.mean([reference[q][c] for q in reference])) for c in columns}
                diffs = {c: abs(metrics[f"test/trec/{system}/{c}"] - means[c]) for c in columns}
                diffs |= {c: max(diffs[c], abs(metrics[f"test/{system}@10/{c}"] - means[c])) for c in CONTEXT}
                note(diffs, f"evaluate.py dl19_rerank {system} (ties={ties})")
        print(f"stand-in reranker: {tied} of {len(records)} queries have tied scores")

    print("\n| measure | trec_eval name | max abs diff |\n|---|---|---:|")
    for name, d in worst.items():
        print(f"| {name} | {trec_measure(name)} | {d:.3e} |")
    x = max(worst.values())
    print(f"trec_parity_dl19: max_abs_diff={x:.3e} metrics={len(worst)}")
    return 0 if x <= 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
