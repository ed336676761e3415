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

Also printed: paired per-query UDCG@5 differences (each trained system minus the retriever and minus
BCE; paired bootstrap CI and p-value, :func:`udcg_ltr.stats.bootstrap.paired_bootstrap_test`).
``--reuse`` skips the training of a system whose model in ``--out-dir`` was trained with the same recipe
(re-evaluation only).

With ``--e2e`` the demo LLM also answers every test question's top-5 context of each system (through the
annotation cache) and ``wrong@5_test: ...`` reports the wrong-answer rates.

``--fusion`` interpolates each trained reranker with the retriever's score (:mod:`udcg_ltr.models.fusion`): the
weight is chosen on the val questions by UDCG@5, saved with the model, and the same rule serves every system;
the systems' rows are then the fused rankers, and ``<system>_alone`` rows give the cross-encoders alone.
Scores of a reused model are read back from ``scores_<split>.json`` in its run folder (same questions only).

``--dataset annotated_full`` reads the full set (10,570 questions; ``--train-questions`` / ``--val-questions``
subsample train and val, test stays whole); paired tests then cover UDCG@5, nDCG@5 and hits@5.

Ends with ``udcg@5_test: retriever=A bce=B udcg=C`` and ``ndcg@5_test: retriever=A bce=B udcg=C`` (and, on the
full set, ``udcg@5_test_full: retriever=A bce=B udcg=C p_udcg_vs_retriever=P1 p_udcg_vs_bce=P2``).
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path

import _offline  # noqa: E402,F401  (environment first: offline hubs, W&B offline)
import numpy as np  # noqa: E402
from _recipes import K, udcg_loss_spec  # noqa: E402

from udcg_ltr.io import atomic_write_json  # noqa: E402
from udcg_ltr.models.fusion import fit_fusion_weight, fuse_scores  # noqa: E402

HEADLINE = (f"udcg@{K}", f"ndcg@{K}")


def system_specs(args) -> dict[str, dict]:
    """Loss name, loss kwargs and learning rate of each trained system (``listnet`` and ``lambda_udcg``: the
    cheap neighbours of ``losses/``, ListNet on signed utility and LambdaLoss with UDCG@5 deltas)."""
    return {"bce": {"loss": "bce", "loss_kwargs": {}, "lr": args.bce_lr or args.lr},
            "udcg": {**udcg_loss_spec(vars(args), K), "lr": args.udcg_lr or args.lr},
            "listnet": {"loss": "listnet", "loss_kwargs": {}, "lr": args.lr},
            "lambda_udcg": {"loss": "lambda_udcg", "loss_kwargs": {"k": K}, "lr": args.lr}}


DATASETS = ("annotated", "annotated_full")  # folders of ../shared/data
PAIRED = (f"udcg@{K}", f"ndcg@{K}", f"hits@{K}")


def subsample(records: list, n: int | None, seed: int) -> list:
    """``n`` questions drawn without replacement (seeded), in file order; all of them when ``n`` is None or 0."""
    if not n or n >= len(records):
        return records
    keep = set(np.random.default_rng(seed).choice(len(records), size=n, replace=False).tolist())
    return [r for i, r in enumerate(records) if i in keep]


RECIPE_FILE = "bench_recipe.json"


def run_recipe(args, spec: dict, seed: int) -> dict:
    """Everything that decides a trained model (not threads, progress or which splits are scored)."""
    recipe = {"spec": spec, "epochs": args.epochs, "batch_size": args.batch_size, "warmup": args.warmup,
              "max_length": args.max_length, "seed": seed}
    if getattr(args, "dataset", "annotated") != "annotated":  # older recipe files stay valid for the small set
        recipe.update(dataset=args.dataset, train_questions=args.train_questions, val_questions=args.val_questions,
                      precision=args.precision)
    return recipe


def finished_run(run_dir: Path, recipe: dict, previous: dict, key: str) -> bool:
    """True when ``run_dir`` holds an exported model and metrics trained with exactly ``recipe``.

    The recipe is read from ``run_dir/bench_recipe.json``, or, for runs older than that file, rebuilt
    from the ``args`` of the ``results.json`` that recorded the run.
    """
    if not ((run_dir / "model" / "config.json").is_file() and (run_dir / "metrics.json").is_file()):
        return False
    if (run_dir / RECIPE_FILE).is_file():
        return json.loads((run_dir / RECIPE_FILE).read_text()) == json.loads(json.dumps(recipe))
    run = previous.get("runs", {}).get(key)
    if run is None:
        return False
    old = argparse.Namespace(**previous["args"])
    return json.loads(json.dumps(run_recipe(old, run["spec"], recipe["seed"]))) == json.loads(json.dumps(recipe))


def scores_of(run_dir: Path, split_name: str, records: list, score) -> list[np.ndarray]:
    """The cross-encoder's scores of ``records``: read from ``run_dir/scores_<split>.json`` when it holds the same
    questions (in order), else ``score(records)``, saved there for the next ``--reuse``."""
    path = run_dir / f"scores_{split_name}.json"
    qids = [r.qid for r in records]
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("qids") == qids:
            return [np.asarray(v, dtype=np.float64) for v in saved["scores"]]
    out = score(records)
    atomic_write_json(path, {"qids": qids, "scores": [np.asarray(v).tolist() for v in out]}, indent=None)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default="bce,udcg")
    ap.add_argument("--epochs", type=int, default=6)
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
    ap.add_argument("--udcg-ks", default="5",
                    help="cut-offs of the direct UDCG loss, e.g. 1,2,3,4,5 (mean of UDCG@k' losses; trains the prefix order)")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--dataset", default="annotated", choices=DATASETS,
                    help="shared annotated SQuAD set: the 400-question one or the full dev set (10,570 questions)")
    ap.add_argument("--train-questions", type=int, default=None,
                    help="train on this many train questions (seeded subsample, the same for every system and seed; "
                         "0 = all)")
    ap.add_argument("--val-questions", type=int, default=None,
                    help="select epochs on this many val questions (seeded subsample); test is always whole")
    ap.add_argument("--precision", default="32-true", help="training precision (Lightning name or auto)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-test", action="store_true", help="tuning mode: evaluate val only")
    ap.add_argument("--out-dir", default="outputs/bench/reranker_squad")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--reuse", action="store_true",
                    help="skip training where --out-dir already holds a model trained with the same recipe")
    ap.add_argument("--fusion", action="store_true",
                    help="interpolate each trained reranker with the retriever's score, weight chosen on val")
    ap.add_argument("--e2e", action="store_true",
                    help="the demo LLM (float32, cached) also answers every test top-5: correct / abstained / wrong")
    args = ap.parse_args(argv)

    import torch

    from udcg_ltr.data.readers.annotated import ANNOTATED_LLM, read_annotated_squad
    from udcg_ltr.models import Reranker, evaluate_reranker, fit_reranker, per_query_metrics
    from udcg_ltr.models.reranker import save_retriever_fusion
    from udcg_ltr.paths import shared_file
    from udcg_ltr.stats.bootstrap import paired_bootstrap_test

    torch.set_num_threads(args.threads)
    records = read_annotated_squad(shared_file(args.dataset, "squad_top10.jsonl.gz"))
    split = {s: [r for r in records if r.split == s] for s in ("train", "val", "test")}
    split["train"] = subsample(split["train"], args.train_questions, seed=1234)
    split["val"] = subsample(split["val"], args.val_questions, seed=4321)
    eval_splits = ["val"] if args.no_test else ["val", "test"]
    print(f"questions: train={len(split['train'])} val={len(split['val'])} test={len(split['test'])}", flush=True)

    llm = None
    if args.e2e:  # answers go through the shared annotation cache: a rerun costs no LLM time
        from udcg_ltr.annotate.annotator import with_cache
        from udcg_ltr.annotate.cache import open_cache
        from udcg_ltr.annotate.llms import load_llm

        llm = with_cache(load_llm("demo", num_threads=args.threads), open_cache(True, ANNOTATED_LLM))

    def evaluate(s: str, scores) -> dict[str, float]:
        return evaluate_reranker(split[s], scores, ANNOTATED_LLM, K, scorer=llm if s == "test" else None)

    results: dict[str, dict[str, dict[str, float]]] = {}
    per_query: dict[str, dict[str, list[dict]]] = {}  # system -> split -> per-seed {metric: [Q] values}
    for s in eval_splits:
        scores = [np.array([-float(p.rank) for p in r.passages]) for r in split[s]]
        results.setdefault("retriever", {})[s] = evaluate(s, scores)
        per_query.setdefault("retriever", {})[s] = [per_query_metrics(split[s], scores, ANNOTATED_LLM, K)]

    specs = system_specs(args)
    out = Path(args.out_dir)
    previous = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}
    runs = {}
    per_seed_alone: dict[str, dict[str, list[dict[str, float]]]] = {}  # --fusion: the cross-encoders alone
    for name in [s for s in args.systems.split(",") if s]:
        spec = specs[name]
        per_seed: dict[str, list[dict[str, float]]] = {s: [] for s in eval_splits}
        for seed in [int(x) for x in args.seeds.split(",")]:
            t0 = time.perf_counter()
            run_dir = out / f"{name}_seed{seed}"
            recipe = run_recipe(args, spec, seed)
            reused = args.reuse and finished_run(run_dir, recipe, previous, f"{name}_seed{seed}")
            if reused:
                path = str(run_dir / "model")
                fit_metrics = json.loads((run_dir / "metrics.json").read_text())
                print(f"{name} seed {seed}: reusing {path} (same recipe)", flush=True)
            else:
                for stale in run_dir.glob("scores_*.json"):  # scores of a model this run replaces
                    stale.unlink()
                path, fit_metrics = fit_reranker(
                    split["train"], split["val"], llm=ANNOTATED_LLM, loss=spec["loss"], loss_kwargs=spec["loss_kwargs"],
                    k=K, epochs=args.epochs, batch_size=args.batch_size, lr=spec["lr"], warmup=args.warmup,
                    max_length=args.max_length, seed=seed, output_dir=run_dir,
                    early_stopping_patience=None, enable_progress_bar=args.progress, num_threads=args.threads,
                    precision=args.precision)
                atomic_write_json(run_dir / RECIPE_FILE, recipe)
            reranker = Reranker.from_pretrained(path, batch_size=64, retriever_fusion=0.0)
            alone = {s: scores_of(run_dir, s, split[s], partial(reranker.score_records, fuse=False))
                     for s in eval_splits}  # val is always one of them
            fusion = None
            if args.fusion:  # the weight is chosen on val only, then saved with the model
                weight, curve = fit_fusion_weight(split["val"], alone["val"], ANNOTATED_LLM, K)
                save_retriever_fusion(path, weight)
                fusion = {"weight": weight, "val_udcg@5_by_weight": curve}
                print(f"{name} seed {seed}: retriever fusion weight {weight:g} (val UDCG@5 by weight: "
                      + ", ".join(f"{w:g}: {v:.4f}" for w, v in curve.items()) + ")", flush=True)
            for s in eval_splits:
                scores = fuse_scores(split[s], alone[s], fusion["weight"]) if fusion else alone[s]
                per_seed[s].append(evaluate(s, scores))
                per_query.setdefault(name, {}).setdefault(s, []).append(
                    per_query_metrics(split[s], scores, ANNOTATED_LLM, K))
                if fusion:
                    per_seed_alone.setdefault(name, {}).setdefault(s, []).append(evaluate(s, alone[s]))
            runs[f"{name}_seed{seed}"] = {"fit": fit_metrics, "minutes": (time.perf_counter() - t0) / 60,
                                          "spec": spec, "reused": reused, "fusion": fusion}
            summary = " ".join(f"{s}/{m}={per_seed[s][-1][m]:.4f}" for s in eval_splits for m in HEADLINE)
            print(f"{name} seed {seed}: best epoch {fit_metrics.get('best_epoch')} {summary} "
                  f"({runs[f'{name}_seed{seed}']['minutes']:.1f} min)", flush=True)
        results[name] = {s: {m: float(np.mean([r[m] for r in rows])) for m in rows[0]}
                         for s, rows in per_seed.items()}
    for name, by_split in per_seed_alone.items():  # table rows only; the paired tests compare the systems
        results[f"{name}_alone"] = {s: {m: float(np.mean([r[m] for r in rows])) for m in rows[0]}
                                    for s, rows in by_split.items()}

    systems = [name for name in results if name in per_query]
    paired = {}  # each trained system against the retriever and against BCE, query by query (seed means)
    for s in eval_splits:
        for i, name in enumerate(systems):
            for base in [b for b in systems[:i] if b in ("retriever", "bce")]:
                for m in PAIRED:
                    t = paired_bootstrap_test(np.mean([q[m] for q in per_query[name][s]], axis=0),
                                              np.mean([q[m] for q in per_query[base][s]], axis=0),
                                              n_bootstrap=10000, seed=0)
                    paired[f"{m}:{name}-{base}_{s}"] = {"mean_diff": t.mean_diff, "lo": t.lo, "hi": t.hi,
                                                        "p": t.p_value, "n": t.n}
    atomic_write_json(out / "results.json", {"args": vars(args), "results": results, "runs": runs,
                                             "paired": paired})
    cols = [f"udcg@{K}", f"ndcg@{K}", f"mrr@{K}", f"utility@{K}", f"hits@{K}"]
    for s in eval_splits:
        print(f"\n{s} ({len(split[s])} questions)")
        print("| system | " + " | ".join(cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for name in results:
            print(f"| {name} | " + " | ".join(f"{results[name][s][c]:.4f}" for c in cols) + " |")
    print("\npaired differences (per query, seed means; paired bootstrap, 95% CI, two-sided p):")
    for key, t in paired.items():
        print(f"  {key}: {t['mean_diff']:+.4f} [{t['lo']:+.4f}, {t['hi']:+.4f}] p={t['p']:.3f} (n={t['n']})")
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
    if per_seed_alone and not args.no_test:
        print(f"udcg@{K}_test_alone: " + " ".join(f"{name}={results[f'{name}_alone']['test'][f'udcg@{K}']:.4f}"
                                                 for name in per_seed_alone))
    if args.dataset == "annotated_full" and not args.no_test and {"bce", "udcg"} <= set(systems):
        p = {b: paired[f"udcg@{K}:udcg-{b}_test"]["p"] for b in ("retriever", "bce")}
        print(f"udcg@{K}_test_full: " + " ".join(f"{name}={results[name]['test'][f'udcg@{K}']:.4f}"
                                                for name in ("retriever", "bce", "udcg"))
              + f" p_udcg_vs_retriever={p['retriever']:.4g} p_udcg_vs_bce={p['bce']:.4g}")
    return results


if __name__ == "__main__":
    main()
