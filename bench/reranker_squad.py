"""BCE vs direct-UDCG cross-encoders on the shared annotated SQuAD set (training included).

Systems, all scored on the top 5 of each question's MiniLM top-10 pool:

* ``retriever``: the pool's own order (all-MiniLM-L6-v2 bi-encoder rank);
* ``bce``: the packaged MiniLM as a cross-encoder (new one-logit head) trained with binary
  cross-entropy on answer-bearing labels (the standard reranker objective);
* ``udcg``: the same network, budget and seeds, trained to maximise a smooth UDCG@5 (Eq. 4 on a
  NeuralSort top-5 relaxation, :class:`udcg_ltr.losses.DirectUDCGLoss`) of the utilities of
  ``ANNOTATED_LLM`` (Eq. 2), optionally with a small ListNet term.

Both trainings: AdamW, linear warm-up/decay, gradient clipping 1.0, ``--epochs`` epochs of the 274
train questions (batches of ``--batch-size`` questions x 10 passages, ``max_length`` 256), best
epoch chosen on **val** UDCG@5 (the same rule for both), evaluated on val and test
(:func:`udcg_ltr.models.evaluation.evaluate_reranker`). Hyper-parameters were chosen on val only
(see ``--help`` defaults and the report); ``--seeds`` averages several seeds.

With ``--e2e`` the demo LLM also answers every test question's top-5 context of each system (through the
annotation cache) and ``wrong@5_test: ...`` reports the wrong-answer rates.

Ends with ``udcg@5_test: retriever=A bce=B udcg=C`` and ``ndcg@5_test: retriever=A bce=B udcg=C``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _offline  # noqa: E402,F401  (environment first: offline hubs, W&B offline)
import numpy as np  # noqa: E402

from udcg_ltr.io import atomic_write_json  # noqa: E402

K = 5
HEADLINE = (f"udcg@{K}", f"ndcg@{K}")


def system_specs(args) -> dict[str, dict]:
    """Loss name, loss kwargs and learning rate of each trained system."""
    direct = {"k": K, "tau": args.tau, "objective": args.objective}
    if args.tau_end:
        direct["tau_end"] = args.tau_end
    if args.listnet_weight > 0:
        udcg = {"loss": "combined", "loss_kwargs": {"terms": [
            {"name": "udcg", **direct},
            {"name": "listnet", "weight": args.listnet_weight, "tau": args.listnet_tau}]}}
    else:
        udcg = {"loss": "udcg", "loss_kwargs": direct}
    return {"bce": {"loss": "bce", "loss_kwargs": {}, "lr": args.bce_lr or args.lr},
            "udcg": {**udcg, "lr": args.udcg_lr or args.lr}}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default="bce,udcg")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8, help="questions per step")
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--bce-lr", type=float, default=None)
    ap.add_argument("--udcg-lr", type=float, default=None)
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--tau", type=float, default=1.0, help="NeuralSort temperature of the UDCG objective")
    ap.add_argument("--tau-end", type=float, default=None, help="anneal the temperature to this value")
    ap.add_argument("--objective", default="udcg", choices=["udcg", "log_udcg", "logit"])
    ap.add_argument("--listnet-weight", type=float, default=0.0, help="add w * ListNet(utility) to the UDCG loss")
    ap.add_argument("--listnet-tau", type=float, default=0.1)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-test", action="store_true", help="tuning mode: evaluate val only")
    ap.add_argument("--out-dir", default="outputs/bench/reranker_squad")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--e2e", action="store_true",
                    help="the demo LLM (float32, cached) also answers every test top-5: correct / abstained / wrong")
    args = ap.parse_args(argv)

    import torch

    from udcg_ltr.data.readers.annotated import ANNOTATED_LLM, read_annotated_squad
    from udcg_ltr.models import Reranker, evaluate_reranker, fit_reranker

    torch.set_num_threads(args.threads)
    records = read_annotated_squad()
    split = {s: [r for r in records if r.split == s] for s in ("train", "val", "test")}
    eval_splits = ["val"] if args.no_test else ["val", "test"]
    print(f"questions: train={len(split['train'])} val={len(split['val'])} test={len(split['test'])}", flush=True)

    llm = None
    if args.e2e:  # answers go through the shared annotation cache: a rerun costs no LLM time
        from udcg_ltr.annotate.annotator import CachedScorer
        from udcg_ltr.annotate.cache import AnnotationCache, default_cache_root
        from udcg_ltr.annotate.llms import load_llm

        llm = CachedScorer(load_llm("demo", num_threads=args.threads), AnnotationCache(default_cache_root(ANNOTATED_LLM)))

    def evaluate(s: str, scores) -> dict[str, float]:
        return evaluate_reranker(split[s], scores, ANNOTATED_LLM, K, scorer=llm if s == "test" else None)

    results: dict[str, dict[str, dict[str, float]]] = {}
    for s in eval_splits:
        scores = [np.array([-float(p.rank) for p in r.passages]) for r in split[s]]
        results.setdefault("retriever", {})[s] = evaluate(s, scores)

    specs = system_specs(args)
    out = Path(args.out_dir)
    runs = {}
    for name in [s for s in args.systems.split(",") if s]:
        spec = specs[name]
        per_seed: dict[str, list[dict[str, float]]] = {s: [] for s in eval_splits}
        for seed in [int(x) for x in args.seeds.split(",")]:
            t0 = time.perf_counter()
            path, fit_metrics = fit_reranker(
                split["train"], split["val"], llm=ANNOTATED_LLM, loss=spec["loss"], loss_kwargs=spec["loss_kwargs"],
                k=K, epochs=args.epochs, batch_size=args.batch_size, lr=spec["lr"], warmup=args.warmup,
                max_length=args.max_length, seed=seed, output_dir=out / f"{name}_seed{seed}",
                early_stopping_patience=None, enable_progress_bar=args.progress, num_threads=args.threads)
            reranker = Reranker.from_pretrained(path, batch_size=64)
            for s in eval_splits:
                per_seed[s].append(evaluate(s, reranker.score_records(split[s])))
            runs[f"{name}_seed{seed}"] = {"fit": fit_metrics, "minutes": (time.perf_counter() - t0) / 60,
                                          "spec": spec}
            summary = " ".join(f"{s}/{m}={per_seed[s][-1][m]:.4f}" for s in eval_splits for m in HEADLINE)
            print(f"{name} seed {seed}: best epoch {fit_metrics.get('best_epoch')} {summary} "
                  f"({runs[f'{name}_seed{seed}']['minutes']:.1f} min)", flush=True)
        results[name] = {s: {m: float(np.mean([r[m] for r in rows])) for m in rows[0]}
                         for s, rows in per_seed.items()}

    atomic_write_json(out / "results.json", {"args": vars(args), "results": results, "runs": runs})
    systems = list(results)
    cols = [f"udcg@{K}", f"ndcg@{K}", f"mrr@{K}", f"utility@{K}", f"hits@{K}"]
    for s in eval_splits:
        print(f"\n{s} ({len(split[s])} questions)")
        print("| system | " + " | ".join(cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for name in systems:
            print(f"| {name} | " + " | ".join(f"{results[name][s][c]:.4f}" for c in cols) + " |")
    print()
    if llm is not None:
        print("end to end on test (demo LLM, top-5 contexts): " + "; ".join(
            f"{name} correct={results[name]['test']['correct_rate']:.3f} abstained="
            f"{results[name]['test']['abstained_rate']:.3f} wrong={results[name]['test']['wrong_rate']:.3f}"
            for name in systems))
        print("wrong@5_test: " + " ".join(f"{name}={results[name]['test']['wrong_rate']:.4f}" for name in systems))
    for s in eval_splits:
        for m in HEADLINE:
            print(f"{m}_{s}: " + " ".join(f"{name}={results[name][s][m]:.4f}" for name in systems))
    return results


if __name__ == "__main__":
    main()
