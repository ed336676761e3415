"""TREC DL19 passage reranking: nDCG@10 of BM25 and of our cross-encoder, checked against ranx.

Data: ``trec_dl19/`` (BM25 top-100 of 43 queries, graded qrels 0..3). nDCG@10 uses graded gains
``rel / log2(rank + 1)`` with the ideal DCG from **all** judged passages of the query (not only
the 100 retrieved), as trec_eval's ``ndcg_cut_10`` and ranx's ``ndcg@10`` do; our value
(:func:`udcg_ltr.models.evaluation.evaluate_reranker`) must equal ranx's on the same run to 1e-9.

The reranker: there is no MS MARCO training data here, so by default it is **trained on the
annotated SQuAD set** (train split, best epoch on val) and applied to DL19 zero-shot -- a transfer
from Wikipedia questions to web queries. Which objective it uses is ``--loss`` (``bce`` on
answer-bearing labels by default; ``udcg`` for the utility-trained one). ``--model PATH`` reuses a
saved reranker instead (e.g. one from ``bench/reranker_squad.py``). ``--cv N`` adds an in-domain
check: N-fold cross-validation by query on DL19 itself (fine-tune on the other folds' queries
with graded labels and ListNet, 20-passage slates sampled per epoch, score the held-out fold).

Ends with ``ndcg@10_dl19: bm25=A reranker=B ranx_bm25=C``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _offline  # noqa: E402,F401  (environment first: offline hubs, W&B offline)
import numpy as np  # noqa: E402

from udcg_ltr.io import atomic_write_json  # noqa: E402

K = 10
THRESHOLD = 2  # DL19 binary relevance: grade >= 2


def ranx_ndcg(qrels_path, run: dict[str, dict[str, float]]) -> float:
    from ranx import Qrels, Run, evaluate

    from udcg_ltr.data.readers.trec import read_trec_qrels

    qrels = read_trec_qrels(qrels_path)
    qrels = {q: judged for q, judged in qrels.items() if q in run}
    return float(evaluate(Qrels.from_dict(qrels), Run.from_dict(run), f"ndcg@{K}"))


def tied_queries(scores: list[np.ndarray]) -> int:
    """Queries whose top K+1 scores hold a tie: there tie-breaking (ours: input order; ranx: its own)
    may legitimately move a document across the cutoff, so equality with ranx is not enforced."""
    return sum(len(set(np.sort(s)[::-1][:K + 1].tolist())) < min(len(s), K + 1) for s in scores)


def train_on_squad(args, out: Path) -> str:
    from udcg_ltr.data.readers.annotated import ANNOTATED_LLM, read_annotated_squad
    from udcg_ltr.models import fit_reranker

    records = read_annotated_squad()
    train = [r for r in records if r.split == "train"]
    val = [r for r in records if r.split == "val"]
    kwargs = {"k": 5, "tau": args.tau} if args.loss == "udcg" else {}
    path, metrics = fit_reranker(train, val, llm=ANNOTATED_LLM, loss=args.loss, loss_kwargs=kwargs, k=5,
                                 epochs=args.epochs, batch_size=8, lr=args.lr, warmup=0.1, max_length=256,
                                 seed=args.seed, output_dir=out / f"squad_{args.loss}",
                                 early_stopping_patience=None, enable_progress_bar=args.progress,
                                 num_threads=args.threads)
    print(f"trained on SQuAD ({args.loss}): best epoch {metrics.get('best_epoch')}, "
          f"val udcg@5 {metrics.get('val/udcg@5', float('nan')):.4f}, val ndcg@5 {metrics.get('val/ndcg@5', float('nan')):.4f}")
    return path


def cross_validate(records, init: str, args, out: Path) -> list[np.ndarray]:
    """N-fold CV by query: fine-tune ``init`` on the other folds (graded ListNet), score the held-out fold."""
    from udcg_ltr.models import Reranker, fit_reranker

    rng = np.random.default_rng(args.seed)
    folds = np.array_split(rng.permutation(len(records)), args.cv)
    scores: list[np.ndarray | None] = [None] * len(records)
    for f, held in enumerate(folds):
        held_set = set(held.tolist())
        train = [r for i, r in enumerate(records) if i not in held_set]
        path, _ = fit_reranker(train, None, loss="listnet", loss_kwargs={"tau": 0.5}, target="graded", k=K,
                               epochs=args.cv_epochs, batch_size=4, lr=args.lr, warmup=0.1, max_length=256,
                               max_slate=20, slate_sampling="random", relevance_threshold=THRESHOLD,
                               model_name_or_path=init, seed=args.seed, output_dir=out / f"cv_fold{f}",
                               enable_progress_bar=args.progress, num_threads=args.threads)
        rr = Reranker.from_pretrained(path, batch_size=64)
        held_records = [records[i] for i in held]
        for i, s in zip(held, rr.score_records(held_records, progress=args.progress).aligned(held_records)):
            scores[i] = s
        print(f"fold {f + 1}/{args.cv}: {len(train)} training queries, {len(held)} held out", flush=True)
    return scores  # type: ignore[return-value]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="a saved reranker (skips training)")
    ap.add_argument("--loss", default="bce", choices=["bce", "udcg"], help="SQuAD training objective")
    ap.add_argument("--tau", type=float, default=1.0)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cv", type=int, default=0, help="also N-fold cross-validation by query on DL19")
    ap.add_argument("--cv-epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out-dir", default="outputs/bench/reranker_dl19")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)

    import torch

    from udcg_ltr.data.readers.trec import dl19_dir, read_dl19, records_to_run
    from udcg_ltr.models import Reranker, evaluate_reranker, write_run

    torch.set_num_threads(args.threads)
    out = Path(args.out_dir)
    records = read_dl19()
    qrels_path = dl19_dir() / "qrels.dl19-passage.txt.gz"
    print(f"DL19: {len(records)} queries x {np.mean([len(r.passages) for r in records]):.0f} BM25 passages")

    bm25 = [np.array([p.score for p in r.passages]) for r in records]
    res = {"bm25": evaluate_reranker(records, bm25, None, K, relevance_threshold=THRESHOLD)}
    ties = {"bm25": tied_queries(bm25)}
    ranx = {"bm25": ranx_ndcg(qrels_path, records_to_run(records, "score"))}

    t0 = time.perf_counter()
    path = args.model or train_on_squad(args, out)
    rr = Reranker.from_pretrained(path, batch_size=64)
    scores = rr.score_records(records, progress=args.progress)
    write_run(records, scores, out / "reranker.run", tag="udcg_ltr")
    res["reranker"] = evaluate_reranker(records, scores, None, K, relevance_threshold=THRESHOLD)
    ties["reranker"] = tied_queries(scores.aligned(records))
    ranx["reranker"] = ranx_ndcg(qrels_path, scores.to_run(records))
    print(f"reranker: {path} ({(time.perf_counter() - t0) / 60:.1f} min incl. training)")
    if args.cv:
        cv_scores = cross_validate(records, path, args, out)
        res["reranker_cv"] = evaluate_reranker(records, cv_scores, None, K, relevance_threshold=THRESHOLD)
        ties["reranker_cv"] = tied_queries(cv_scores)
        ranx["reranker_cv"] = ranx_ndcg(qrels_path, {r.qid: dict(zip((p.pid for p in r.passages), map(float, s)))
                                                     for r, s in zip(records, cv_scores)})

    cols = [f"ndcg@{K}", f"mrr@{K}", f"precision@{K}", f"recall@{K}"]
    print("| run | " + " | ".join(cols) + " | ranx ndcg@10 | |ours - ranx| |")
    print("|---|" + "---:|" * (len(cols) + 2))
    for name, m in res.items():
        diff = abs(m[f"ndcg@{K}"] - ranx[name])
        print(f"| {name} | " + " | ".join(f"{m[c]:.4f}" for c in cols) + f" | {ranx[name]:.4f} | {diff:.1e} |")
        if diff > 1e-9:
            if not ties[name]:
                raise SystemExit(f"nDCG@{K} of {name} differs from ranx by {diff:.3g}")
            print(f"  ({name}: {ties[name]} queries with tied scores at the cutoff; tie-breaking differs)")
    atomic_write_json(out / "results.json", {"args": vars(args), "ours": res, "ranx": ranx, "model": path})
    extra = f" reranker_cv={res['reranker_cv'][f'ndcg@{K}']:.4f}" if args.cv else ""
    print(f"ndcg@10_dl19: bm25={res['bm25'][f'ndcg@{K}']:.4f} reranker={res['reranker'][f'ndcg@{K}']:.4f} "
          f"ranx_bm25={ranx['bm25']:.4f}{extra}")
    return {"ours": res, "ranx": ranx}


if __name__ == "__main__":
    main()
