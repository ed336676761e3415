"""Dynamic-k selectors on the shared annotated SQuAD set: how many passages should the LLM read?

For two rankings of each question's MiniLM top-10 pool -- the **retriever**'s order and the order of
the **reranker** (the MiniLM cross-encoder trained on the train split with the direct UDCG objective on
``ANNOTATED_LLM`` utilities, the recipe of ``bench/reranker_squad.py``) -- every selector of
:mod:`udcg_ltr.select` picks a per-question ``k in 0..10`` (the kept set is the top-k prefix; k = 0
means no passage and scores UDCG 0.5), and we report the mean UDCG (Eq. 4) of the kept set on the
**test** split:

* ``best_fixed``: the fixed k with the best val UDCG (``best_fixed_on_test``: the best fixed k on test,
  for reference only);
* ``score_threshold``, ``relative_threshold`` (normalisation and fraction searched on val),
  ``cumulative_utility`` (the dynamic-k rule of :mod:`udcg_ltr.metrics.distractor` on labels-free
  pseudo-utilities, knobs searched on val);
* ``gate``, ``kclassifier`` and ``expected_utility``: learned selectors (Lightning), a small grid of
  configurations each (objective, architecture; 3-seed ensembles) over three feature sets: the scores'
  list features; plus the retriever's score (reranker ranking) and the question's lexical coverage of
  each passage (:mod:`udcg_ltr.data.lexical`, no model); plus the **reader probes** of
  :mod:`udcg_ltr.data.probes` (the LLM's own single-passage P(NO-RESPONSE), abstention, whether its
  answer quotes the passage, agreement across the pool: label-free, but one LLM call per candidate at
  inference; ``--no-probes`` leaves them out). Trained on **held-out** scores of the train split and
  selected on val UDCG;
* ``calibrated_utility`` (:mod:`udcg_ltr.select.calibrated`): the expected-UDCG rule with a relevance
  prior learned on the train split from ranker-free features only (retriever score and rank, lexical
  coverage, reader probes), calibrated with the deployed ranker's scores on val; its val UDCG is
  cross-fitted over val folds, so it competes fairly in the selection;
* ``learned``: the learned configuration with the best val UDCG of all; ``learned_no_llm`` the best
  without reader probes (no LLM call at inference);
* ``oracle``: the per-question best k from the gold utilities (upper bound).

Held-out scores: a reranker scores its own training questions over-confidently, so the train split is
*cross-fitted*: ``--folds`` rerankers (same recipe) are each trained on the other folds (folds grouped
by article, best epoch on val) and score their held-out fold; val and test are scored by the full
reranker. The retriever is not trained on these questions, so its train scores are used as they are.
Reranker weights are cached under ``udcg_ltr.paths.cache_dir()/models/squad_reranker_udcg`` (and
``..._cv{f}of{F}`` for the folds) with their recipe; a recipe change retrains them.

With ``--e2e`` the demo LLM also answers every test question with the kept passages of ``best_fixed``,
``relative_threshold``, ``learned``, ``learned_no_llm`` and ``oracle`` (correct / abstained / wrong, mean context length in
passages and tokens; k = 0 is not sent and counts as abstained).

Also printed: the dynamic-k / distractor analysis (best k, distractor rate, harm, assessment;
:func:`udcg_ltr.select.dynamic_k_report`) of both rankings on test, as Markdown (and CSV in
``--out-dir``), and k histograms (PNG).

Last line: ``udcg_test: best_fixed=A relative_threshold=B learned=C oracle=D`` (reranker ranking).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import _offline  # noqa: E402,F401  (environment first: offline hubs, W&B offline)

ROOT = _offline.ROOT

import numpy as np  # noqa: E402
from _recipes import K, udcg_loss_spec  # noqa: E402

from udcg_ltr.io import atomic_write_json, atomic_write_text  # noqa: E402
from udcg_ltr.report import write_csv  # noqa: E402

SPLITS = ("train", "val", "test")

#: Used when bench/reranker_squad.py is absent; otherwise its argparse defaults win (read from its source).
FALLBACK_RECIPE = {"epochs": 6, "batch_size": 8, "lr": 5e-5, "udcg_lr": None, "warmup": 0.1, "max_length": 256,
                   "tau": 1.0, "tau_end": None, "objective": "udcg", "listnet_weight": 0.0, "listnet_tau": 0.1,
                   "udcg_ks": "5", "seeds": "0"}


# ---- the reranker ------------------------------------------------------------------------------------
def reranker_recipe() -> dict:
    """The defaults of ``bench/reranker_squad.py``'s arguments, read from its source (no import side effects)."""
    path = ROOT / "bench" / "reranker_squad.py"
    recipe = dict(FALLBACK_RECIPE)
    if not path.is_file():
        return recipe
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and node.args
                and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("--")):
            name = node.args[0].value[2:].replace("-", "_")
            for kw in node.keywords:
                if kw.arg == "default":
                    try:
                        recipe[name] = ast.literal_eval(kw.value)
                    except ValueError:
                        pass
    return recipe


def _typed(value: str, default):
    """A ``--recipe`` value in the type of the default (numbers where the default is None)."""
    if default is None:
        try:
            return float(value)
        except ValueError:
            return value
    return type(default)(value)


def fit_kwargs(recipe: dict) -> dict:
    """``fit_reranker`` keyword arguments of the direct-UDCG system (``system_specs`` of reranker_squad.py)."""
    seed = int(str(recipe.get("seeds", "0")).split(",")[0])
    return {**udcg_loss_spec(recipe, K), "k": K, "epochs": int(recipe["epochs"]),
            "batch_size": int(recipe["batch_size"]), "lr": float(recipe.get("udcg_lr") or recipe["lr"]),
            "warmup": float(recipe["warmup"]), "max_length": int(recipe["max_length"]), "seed": seed,
            "early_stopping_patience": None}


def cached_reranker(name: str, train, val, kwargs: dict, *, threads: int, retrain: bool, progress: bool) -> Path:
    """Train once (``fit_reranker``) and keep the exported model under the cache, keyed by its recipe."""
    from udcg_ltr.data.readers.annotated import ANNOTATED_LLM
    from udcg_ltr.models import fit_reranker
    from udcg_ltr.paths import cache_dir

    key = {"fit": kwargs, "train_qids": sorted(r.qid for r in train), "val_qids": sorted(r.qid for r in val)}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    target = cache_dir() / "models" / name
    stamp = target / "udcg_ltr_bench_recipe.json"
    if not retrain and stamp.is_file() and json.loads(stamp.read_text()).get("digest") == digest:
        print(f"reranker {name}: cached ({target})", flush=True)
        return target
    print(f"reranker {name}: training on {len(train)} questions ({kwargs['epochs']} epochs)...", flush=True)
    t0 = time.perf_counter()
    work = cache_dir() / "models" / f".{name}.work"
    if work.exists():
        shutil.rmtree(work)
    path, metrics = fit_reranker(train, val, llm=ANNOTATED_LLM, output_dir=work, num_threads=threads,
                                 enable_progress_bar=progress, **kwargs)
    atomic_write_json(Path(path) / "udcg_ltr_bench_recipe.json",
                      {"digest": digest, "recipe": key["fit"], "fit_metrics": metrics,
                       "minutes": (time.perf_counter() - t0) / 60})
    old = target.parent / f".{name}.old"
    if target.exists():
        if old.exists():
            shutil.rmtree(old)
        os.replace(target, old)
    os.replace(path, target)  # the whole exported directory, swapped in one rename
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"reranker {name}: done in {(time.perf_counter() - t0) / 60:.1f} min, best val "
          f"{metrics.get('best_val/udcg@5', float('nan')):.4f}", flush=True)
    return target


def score_with(model_dir: Path, records, threads: int) -> list[np.ndarray]:
    """The model's scores of ``records`` (cached next to the weights, keyed by question ids)."""
    import torch

    from udcg_ltr.models import Reranker

    cache = model_dir / "udcg_ltr_bench_scores.json"
    stored = json.loads(cache.read_text()) if cache.is_file() else {}
    missing = [r for r in records if r.qid not in stored]
    if missing:
        torch.set_num_threads(threads)
        rr = Reranker.from_pretrained(model_dir, batch_size=64)
        for r, s in zip(missing, rr.score_records(missing, progress=False).aligned(missing)):
            stored[r.qid] = [float(x) for x in s]
        atomic_write_json(cache, stored, indent=None)
    return [np.asarray(stored[r.qid]) for r in records]


def reranker_scores(split: dict, args) -> dict[str, list[np.ndarray]]:
    """Cross-fitted train scores and full-model val/test scores."""
    from udcg_ltr.select import group_kfold

    recipe = reranker_recipe()
    suffix = ""
    if args.recipe:  # e.g. udcg_ks=1,2,3,4,5 epochs=3: separate cache entries, named by the overrides
        overrides = dict(item.split("=", 1) for item in args.recipe)
        unknown = sorted(set(overrides) - set(recipe))
        if unknown:
            raise SystemExit(f"--recipe: unknown keys {unknown} (known: {sorted(recipe)})")
        recipe.update({key: _typed(value, recipe[key]) for key, value in overrides.items()})
        suffix = "_" + hashlib.sha256(json.dumps(overrides, sort_keys=True).encode()).hexdigest()[:8]
    kwargs = fit_kwargs(recipe)
    if args.smoke:  # a plumbing check: two optimiser steps, separate cache entries
        kwargs.update(epochs=1, max_steps=2, limit_val_batches=1)
        suffix = "_smoke"
    print(f"reranker recipe: {json.dumps(kwargs)}", flush=True)
    if args.reranker:  # the reranker issue's model (same recipe, same questions): no retraining
        full = Path(args.reranker)
        print(f"reranker (val / test scores): {full}", flush=True)
    else:
        full = cached_reranker(f"squad_reranker_udcg{suffix}", split["train"], split["val"], kwargs,
                               threads=args.threads, retrain=args.retrain, progress=args.progress)
    out = {s: score_with(full, split[s], args.threads) for s in ("val", "test")}
    train = split["train"]
    folds = group_kfold([r.extra.get("article", r.qid) for r in train], args.folds, seed=0)
    train_scores: list[np.ndarray | None] = [None] * len(train)
    for f, held in enumerate(folds):
        held_set = set(held.tolist())
        fit_on = [r for i, r in enumerate(train) if i not in held_set]
        model = cached_reranker(f"squad_reranker_udcg{suffix}_cv{f}of{args.folds}", fit_on, split["val"], kwargs,
                                threads=args.threads, retrain=args.retrain, progress=args.progress)
        for i, s in zip(held, score_with(model, [train[i] for i in held], args.threads)):
            train_scores[i] = s
    out["train"] = train_scores
    return out


# ---- selectors -------------------------------------------------------------------------------------
def score_quality(scores: dict, slates: dict) -> list[dict]:
    """Per ranking and split: how often the top passage bears the answer, UDCG of k = 1, oracle UDCG.

    ``perfect_top1_udcg``: the best of k = 0 and k = 1 per question, i.e. a selector that knows
    whether the top passage bears the answer and nothing else (the gains past it need k >= 2).

    A selector learns from the train rows and is applied to test rows: if the cross-fitted train
    scores rank much worse than the full reranker's test scores, the selector learns the wrong prior
    (e.g. "the top passage is rarely relevant: give nothing").
    """
    from udcg_ltr.select.base import prefix_udcg, rank_slates

    rows = []
    for name, by_split in scores.items():
        for s in SPLITS:
            ranked = rank_slates(by_split[s], slates[s])
            curve = prefix_udcg(ranked.utility, ranked.mask)
            rows.append({"ranking": name, "split": s, "n": len(ranked),
                         "top1_answer_bearing": float((ranked.utility[:, 0] > 0).mean()),
                         "udcg_at_1": float(curve[:, 1].mean()),
                         "perfect_top1_udcg": float(curve[:, :2].max(axis=1).mean()),
                         "best_k_udcg": float(curve.max(axis=1).mean())})
    return rows


#: Selectors answered end to end by the LLM with ``--e2e``.
E2E_SELECTORS = ("best_fixed", "relative_threshold", "learned", "learned_no_llm", "oracle")
E2E_COLUMNS = ("correct_rate", "abstained_rate", "wrong_rate", "mean_passages", "mean_prompt_tokens",
               "mean_context_tokens")


def run_ranking(name: str, scores: dict, slates: dict, records: dict, args, out: Path,
                scorer=None) -> tuple[list[dict], dict]:
    """Fit every selector for one ranking, evaluate on test; returns (table rows, headline numbers)."""
    from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
    from udcg_ltr.select import EndToEnd, FixedK, OracleK, evaluate_selectors, fit_selector, prefix_udcg
    from udcg_ltr.select.training import fit_learned, learned_candidates, rank_split

    tr, va, te = ((scores[s], slates[s]) for s in SPLITS)
    selectors, fits = {}, {}
    for kind, hp in (("fixed_k", {}), ("score_threshold", {}), ("relative_threshold", {"normalize": None}),
                     ("cumulative_utility", {})):
        sel, m = fit_selector(kind, *tr, *va, fit_on="val", **hp)
        selectors["best_fixed" if kind == "fixed_k" else kind] = sel
        fits[kind] = {"config": sel.get_config(), **m}
    test_ranked = rank_split(*te)
    test_curve = prefix_udcg(test_ranked.utility, test_ranked.mask, gamma=DEFAULT_GAMMA).mean(axis=0)
    selectors["best_fixed_on_test"] = FixedK(int(np.argmax(test_curve)))
    extra = ["retrieval_score"] if name == "reranker" else []
    # each kind's best, with and without reader probes; ties to the configuration without the LLM
    learned, all_rows, choice = fit_learned(learned_candidates(extra, args.quick, probes=args.probes), tr, va,
                                            progress=args.progress, seed=args.seed)
    selectors.update(learned)
    fits["learned_grid"] = [{k: (v if not isinstance(v, float) else round(v, 5)) for k, v in r.items()}
                            for r in all_rows]
    fits["learned_choice"] = choice["learned"]
    if "learned_no_llm" in choice:
        fits["learned_no_llm_choice"] = choice["learned_no_llm"]
    selectors["oracle"] = OracleK()
    val_rows = evaluate_selectors(selectors, *va, split="val")
    rows = evaluate_selectors(selectors, *te, split="test", plot_path=out / f"k_hist_{name}_test.png",
                              title=f"chosen k on test, {name} ranking")
    for row, vrow in zip(rows, val_rows):
        row["ranking"] = name
        row["val_udcg"] = vrow["udcg"]
        sel = selectors[row["selector"]]
        if getattr(sel, "fits_on_val", False):  # it learned from val: its cross-fitted val UDCG
            row["val_udcg"] = sel.crossfit_metrics["val/udcg"]
    if scorer is not None:
        t0 = time.perf_counter()
        e2e = evaluate_selectors({n: selectors[n] for n in E2E_SELECTORS}, *te,
                                 end_to_end=EndToEnd(records["test"], scorer), split="test")
        by_name = {r["selector"]: r for r in e2e}
        for row in rows:
            if row["selector"] in by_name:
                row.update({c: by_name[row["selector"]][c] for c in E2E_COLUMNS})
        print(f"{name}: end to end with the LLM in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    fits["test_fixed_curve"] = [round(float(v), 5) for v in test_curve]
    return rows, fits


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folds", type=int, default=2, help="cross-fitting folds of the train split (reranker)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="seed of the learned selectors")
    ap.add_argument("--rankings", default="retriever,reranker")
    ap.add_argument("--retrain", action="store_true", help="retrain the cached rerankers")
    ap.add_argument("--reranker", default=None,
                    help="a saved reranker for the val / test scores, e.g. outputs/bench/reranker_squad/udcg_seed0/model "
                         "(trained by bench/reranker_squad.py with this recipe); default: train it here (cached)")
    ap.add_argument("--recipe", nargs="*", default=[], metavar="KEY=VALUE",
                    help="override the reranker recipe read from bench/reranker_squad.py (e.g. udcg_ks=1,2,3,4,5 "
                         "epochs=3); trains its own cached full model and folds")
    ap.add_argument("--quick", action="store_true", help="a smaller grid of learned selectors (development)")
    ap.add_argument("--probes", action=argparse.BooleanOptionalAction, default=True,
                    help="also offer the learned selectors the reader probes (udcg_ltr.data.probes: the demo LLM's "
                         "single-passage P(NO-RESPONSE) and answers, label-free, one LLM call per candidate)")
    ap.add_argument("--out-dir", default="outputs/bench/dynamic_k_squad")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--e2e", action="store_true",
                    help=f"answer the test questions with the demo LLM for {', '.join(E2E_SELECTORS)}")
    ap.add_argument("--smoke", action="store_true",
                    help="plumbing check: 40/12/12 questions, rerankers trained for 2 steps (numbers meaningless)")
    args = ap.parse_args(argv)

    import torch

    from udcg_ltr.data.lexical import records_idf
    from udcg_ltr.data.padded import pad_records, pad_scores
    from udcg_ltr.data.readers.annotated import ANNOTATED_LLM, read_annotated_squad
    from udcg_ltr.select import dynamic_k_report, format_rows_markdown

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    records = read_annotated_squad()
    idf = records_idf(records)  # one corpus (every pooled passage) for the lexical features of all splits
    split = {s: [r for r in records if r.split == s] for s in SPLITS}
    if args.smoke:
        split = {s: v[:40 if s == "train" else 12] for s, v in split.items()}
        args.quick = True
    print("questions: " + " ".join(f"{s}={len(v)}" for s, v in split.items()), flush=True)
    slates = {s: pad_records(v, llm=ANNOTATED_LLM, order="given", idf=idf) for s, v in split.items()}

    rankings = [r for r in args.rankings.split(",") if r]
    scores: dict[str, dict[str, np.ndarray]] = {}
    if "retriever" in rankings:
        scores["retriever"] = {s: slates[s].retrieval_score for s in SPLITS}
    if "reranker" in rankings:
        rs = reranker_scores(split, args)
        scores["reranker"] = {s: pad_scores(rs[s], width=slates[s].mask.shape[1])[0] for s in SPLITS}

    quality = score_quality(scores, slates)
    print("\nscores the selectors learn from (train: cross-fitted for the reranker) vs val / test:")
    print(format_rows_markdown(quality, ["ranking", "split", "n", "top1_answer_bearing", "udcg_at_1",
                                         "perfect_top1_udcg", "best_k_udcg"]))
    scorer = None
    if args.e2e:
        from udcg_ltr.annotate.demo_llm import ensure_demo_llm
        from udcg_ltr.annotate.scorer import DecodingConfig, LLMScorer

        scorer = LLMScorer(str(ensure_demo_llm()), name=ANNOTATED_LLM, decoding=DecodingConfig(batch_size=8),
                           num_threads=args.threads, progress=args.progress)
    all_rows, fits = [], {}
    for name in rankings:
        t1 = time.perf_counter()
        rows, fit_info = run_ranking(name, scores[name], slates, split, args, out, scorer=scorer)
        all_rows += rows
        fits[name] = fit_info
        print(f"\n{name} ranking: selectors fitted in {(time.perf_counter() - t1) / 60:.1f} min; "
              f"learned = {fit_info['learned_choice']['kind']}"
              f"{' (with reader probes)' if fit_info['learned_choice']['uses_probes'] else ''}", flush=True)
        cols = ["selector", "val_udcg", "udcg", "udcg_se", "mean_k", "k0_rate", "k_hist"]
        print(format_rows_markdown(rows, cols), flush=True)
        if scorer is not None:
            e2e_rows = [r for r in rows if "correct_rate" in r]
            print("\nend to end (test, demo LLM):\n" + format_rows_markdown(e2e_rows, ["selector", "udcg", *E2E_COLUMNS]))

    report = dynamic_k_report({name: (scores[name]["test"], slates["test"]) for name in rankings})
    report_md = format_rows_markdown(report, ["ranking", "utilities", "n", "best_k_mean", "best_k_median",
                                              "best_k_hist", "udcg_at_best_k", "distractor_rate", "harm",
                                              "harm_share", "safe", "risky", "dangerous"])
    print("\ndynamic-k analysis (test split, whole top-10; udcg_ltr.metrics.distractor):")
    print(report_md)
    write_csv(out / "dynamic_k_report.csv", report)
    write_csv(out / "selectors_test.csv", all_rows)
    atomic_write_text(out / "report.md", "# Dynamic-k selectors, annotated SQuAD (test)\n\n"
                      + "\n\n".join(f"## {n}\n\n" + format_rows_markdown([r for r in all_rows if r['ranking'] == n])
                                    for n in rankings)
                      + "\n\n## Dynamic-k analysis\n\n" + report_md + "\n")
    atomic_write_json(out / "results.json", {"args": vars(args), "rows": all_rows, "fits": fits, "score_quality": quality,
                                             "dynamic_k_report": report,
                                             "minutes": (time.perf_counter() - t0) / 60})
    print(f"\noutputs in {out} ({(time.perf_counter() - t0) / 60:.1f} min)")
    head = "reranker" if "reranker" in rankings else rankings[0]
    u = {r["selector"]: r["udcg"] for r in all_rows if r["ranking"] == head}
    for name in rankings:
        v = {r["selector"]: r["udcg"] for r in all_rows if r["ranking"] == name}
        print(f"udcg_test_{name}: " + " ".join(f"{k}={v[k]:.4f}" for k in v))
    print(f"udcg_test: best_fixed={u['best_fixed']:.4f} relative_threshold={u['relative_threshold']:.4f} "
          f"learned={u['learned']:.4f} oracle={u['oracle']:.4f}")
    return {"rows": all_rows, "fits": fits}


if __name__ == "__main__":
    main()
