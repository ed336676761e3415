"""``fit_selector``: train (or grid-fit) a dynamic-k selector from held-out scores.

Plain keyword arguments, so a Hydra group (``model=dynamic_k``) maps onto it one to one, e.g.
``fit_selector("gate", train_scores, train_slates, val_scores, val_slates, objective="soft_mask", lr=0.01)``,
``*_scores`` being ``[Q, W]`` aligned with the columns of ``*_slates`` (LLM utilities, Eq. 2) or per-record
score arrays. Learned selectors train on the train rows, best epoch by val; rule baselines grid-search
their knobs on ``fit_on`` unless given. **Held-out scores**: a reranker is over-confident on its own
training queries, so a selector learns from scores the reranker did not train on: the val split, or
train scores *cross-fitted* by k-fold (folds grouped by article: :func:`group_kfold`). The dynamic-k study
(``evaluate.py mode=selectors``) searches the grid of :func:`learned_candidates` with :func:`fit_learned`.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.data.lexical import LEXICAL_FEATURES
from udcg_ltr.data.probes import READER_PROBES
from udcg_ltr.io import atomic_write_json
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.base import RankedSlates, Selector, rank_slates, udcg_of_kept
from udcg_ltr.select.io import make_selector, registry, save_selector
from udcg_ltr.select.nn import LearnedSelector

log = logging.getLogger(__name__)

LEARNED_KINDS = ("gate", "kclassifier", "expected_utility", "calibrated_utility")
#: Ranker-free per-passage arrays of the calibrated selector's prior (with the lexical features, the probes).
PRIOR_FEATURES = ("retrieval_score", "retrieval_rank")

#: The knobs of each rule baseline that, once given, leave nothing to fit (the oracle has none).
GIVEN_KNOBS = {"fixed_k": ("k",), "score_threshold": ("threshold",), "oracle": (),
               "relative_threshold": ("fraction", "normalize"), "cumulative_utility": ("relevant_fraction",)}


def _concat(a: RankedSlates, b: RankedSlates) -> RankedSlates:
    """The rows of ``a`` then ``b``, padded to the wider of the two (extra arrays both carry)."""
    w = max(a.width, b.width)
    a, b = a.resized(w), b.resized(w)

    def both(x, y):
        return None if x is None or y is None else np.concatenate([x, y])

    extra = {k: both(a.extra[k], b.extra[k]) for k in a.extra if k in b.extra}
    qids = None if a.qids is None or b.qids is None else list(a.qids) + list(b.qids)
    return RankedSlates(both(a.scores, b.scores), both(a.mask, b.mask), both(a.utility, b.utility), extra, None, qids)


def required_extra(selector: Selector) -> tuple[str, ...]:
    """Extra per-passage arrays (slates field names) the selector reads at inference."""
    return tuple(getattr(selector, "extra_features", ()) or ())


def rank_split(scores, slates, *, extra_fields: Sequence[str] = ()) -> RankedSlates | None:
    """:func:`~udcg_ltr.select.base.rank_slates` of one split (None when ``scores`` is None)."""
    return None if scores is None else rank_slates(scores, slates, extra_fields=tuple(extra_fields))


def select_k(selector: Selector, scores, slates) -> np.ndarray:
    """The selector's kept count per row of ``slates`` ranked by ``scores``, with the extra arrays it reads
    (the jobs' inference path: a selector trained on extra features needs them again, same fields)."""
    return selector.select(rank_split(scores, slates, extra_fields=required_extra(selector)))


def split_metrics(selector: Selector, ranked: RankedSlates, prefix: str, *, gamma: float) -> dict[str, float]:
    """``{prefix}/udcg``, ``{prefix}/mean_k``, ``{prefix}/k0_rate`` of ``selector`` on ranked rows."""
    k = selector.select(ranked)
    out = {f"{prefix}/mean_k": float(k.mean()), f"{prefix}/k0_rate": float((k == 0).mean())}
    if ranked.utility is not None:
        out[f"{prefix}/udcg"] = float(udcg_of_kept(ranked.utility, ranked.mask, k, gamma=gamma).mean())
    return out


def fit_selector(kind: str, train_scores=None, train_slates=None, val_scores=None, val_slates=None, *,
                 test_scores=None, test_slates=None, gamma: float = DEFAULT_GAMMA, fit_on: str = "train",
                 output_dir: str | os.PathLike | None = None, metadata: Mapping[str, Any] | None = None,
                 **hparams: Any) -> tuple[Selector, dict[str, float]]:
    """Build a selector of ``kind`` with ``hparams``, fit it (module doc), return ``(selector, metrics)``;
    with ``output_dir``, saved to ``output_dir/selector`` and ``output_dir/metrics.json`` (atomically)."""
    if kind in (*LEARNED_KINDS, "oracle"):
        hparams.setdefault("gamma", gamma)
    selector = make_selector(kind, **hparams)
    if fit_on not in ("train", "val", "train+val"):
        raise ValueError(f"fit_on must be 'train', 'val' or 'train+val', got {fit_on!r}")
    train, val, test = (rank_split(scores, slates, extra_fields=required_extra(selector)) for scores, slates in
                        ((train_scores, train_slates), (val_scores, val_slates), (test_scores, test_slates)))
    if isinstance(selector, LearnedSelector):
        if train is None:
            raise ValueError(f"a {kind} selector needs train_scores and train_slates")
        selector.fit(train, gamma=gamma, val=val)
    else:
        if fit_on == "train+val" and (train is None or val is None):
            raise ValueError("fit_on='train+val' needs both splits")
        data = _concat(train, val) if fit_on == "train+val" else {"train": train, "val": val}[fit_on]
        knobs = GIVEN_KNOBS.get(kind)
        if knobs is None or any(getattr(selector, knob) is None for knob in knobs):  # not given: fit them
            if data is None:
                raise ValueError(f"{kind}: nothing to fit on (no {fit_on} scores) and no knobs given")
            selector.fit(data, gamma=gamma)
    metrics: dict[str, float] = {}
    for name, ranked in (("train", train), ("val", val), ("test", test)):
        if ranked is not None and len(ranked):
            metrics.update(split_metrics(selector, ranked, name, gamma=gamma))
    if getattr(selector, "fits_on_val", False) and "val/udcg" in metrics:
        # the selector learned from the val rows: its in-sample val UDCG is optimistic, the
        # cross-fitted one compares fairly with selectors that only early-stop on val
        metrics.update({f"{k}_in_sample": metrics[k] for k in selector.crossfit_metrics})
        metrics.update(selector.crossfit_metrics)
    if isinstance(selector, LearnedSelector):
        metrics.update({f"fit/{k}": float(v) for k, v in selector.history.items()})
    if output_dir is not None:
        metadata = {"metrics": metrics, **dict(metadata or {})}
        save_selector(selector, Path(output_dir) / "selector", metadata=metadata)
        atomic_write_json(Path(output_dir) / "metrics.json", metrics)
    return selector, metrics


def fit_best_selector(candidates: Sequence[tuple[str, Mapping[str, Any]]], train_scores, train_slates, val_scores,
                      val_slates, *, gamma: float = DEFAULT_GAMMA, progress: bool = True,
                      **common: Any) -> tuple[Selector, list[dict[str, Any]]]:
    """Fit every ``(kind, hparams)`` candidate (plus the ``common`` keyword arguments); return the one with
    the highest ``val/udcg`` (first on ties) and one row per candidate (kind, hparams, metrics)."""
    from tqdm.auto import tqdm

    best, best_value, rows = None, -np.inf, []
    for kind, hp in tqdm(list(candidates), desc="selectors", disable=not progress):
        sel, metrics = fit_selector(kind, train_scores, train_slates, val_scores, val_slates, gamma=gamma,
                                    **{**common, **dict(hp)})
        rows.append({"kind": kind, "hparams": dict(hp), **metrics})
        value = metrics.get("val/udcg", -np.inf)
        if value > best_value + 1e-12:
            best, best_value = sel, value
    if best is None:
        raise ValueError("no candidate selector")
    return best, rows


def learned_candidates(extra: Sequence[str] = (), quick: bool = False, probes: bool = False,
                       **budget: Any) -> list[tuple[str, dict]]:
    """The grid of learned selectors searched on val: each kind over three feature sets, the scores' list features
    alone; plus ``extra`` (e.g. the retriever's score under a reranker's order) and the lexical coverage
    (:data:`LEXICAL_FEATURES`); with ``probes`` also plus the reader probes (:data:`READER_PROBES`, label-free but one
    LLM call per candidate at inference). The calibrated selector's prior reads :data:`PRIOR_FEATURES` and the lexical
    features (plus the probes). ``quick``: fewer architectures, one seed. ``budget`` (``batch_size``, ``max_epochs``,
    ``patience``, ``n_seeds``) replaces the default training budget of every candidate."""
    base = {"max_epochs": 150, "patience": 30, "batch_size": 32, "weight_decay": 1e-3,
            "n_seeds": 1 if quick else 3, **budget}
    hidden_sizes = (0,) if quick else (0, 16)
    lexical = [*extra, *LEXICAL_FEATURES]
    prior = [*PRIOR_FEATURES, *LEXICAL_FEATURES]
    cands = [("calibrated_utility", {**base, "lr": 0.03, "hidden": hidden, "extra_features": ex})
             for ex in [prior] + ([[*prior, *READER_PROBES]] if probes else []) for hidden in hidden_sizes]
    for ex in [[], lexical] + ([[*lexical, *READER_PROBES]] if probes else []):
        cands += [("gate", {**base, "lr": 0.1, "objective": objective, "hidden": hidden, "extra_features": ex})
                  for objective in ("soft_mask", "expected") for hidden in hidden_sizes]
        cands += [("kclassifier", {**base, "lr": 0.03, "arch": arch, "objective": objective, "extra_features": ex})
                  for arch in (("cumulative",) if quick else ("cumulative", "linear"))
                  for objective in ("expected", "cross_entropy")]
        cands += [("expected_utility", {**base, "lr": 0.03, "hidden": hidden, "extra_features": ex})
                  for hidden in hidden_sizes]
    return cands


def uses_probes(hparams: Mapping[str, Any]) -> bool:
    """True for a configuration that reads reader probes (an LLM call per candidate at inference)."""
    return bool(set(hparams.get("extra_features", ())) & set(READER_PROBES))


def refit_selector(selector: Selector, train: tuple, val: tuple) -> Selector:
    """``selector``'s configuration trained again on the train + val rows (``(scores, slates)`` each) for the
    epoch count val chose (``best_epoch + 1``; nothing is held out, so no early stop), as the rule baselines
    are fitted on train + val. Not learned, or calibrating on held-out rows (``fits_on_val``): kept as it is.
    The refitted selector reports the train-only fit's val metrics as ``crossfit_metrics`` (held out)."""
    if not isinstance(selector, LearnedSelector) or getattr(selector, "fits_on_val", False):
        return selector
    epochs = int(round(selector.history["best_epoch"])) + 1
    new = make_selector(selector.kind, **{**selector.get_config(), "max_epochs": epochs, "patience": None})
    extra = required_extra(new)
    val_ranked = rank_split(*val, extra_fields=extra)
    new.fit(_concat(rank_split(*train, extra_fields=extra), val_ranked))
    new.fits_on_val = True  # it learned from the val rows: the jobs report its held-out val UDCG instead
    new.crossfit_metrics = split_metrics(selector, val_ranked, "val", gamma=selector.gamma)
    return new


def fit_learned(candidates: Sequence[tuple[str, Mapping[str, Any]]], train: tuple, val: tuple, *,
                progress: bool = False, refit: bool = False,
                **common: Any) -> tuple[dict[str, Selector], list[dict], dict]:
    """The best configuration by val UDCG per kind and per reader probes or not (:func:`fit_best_selector` on each group
    of ``candidates``; ``train`` / ``val`` = ``(scores, slates)``). Returns ``(selectors, grid rows, choice)``: each
    kind's best; ``learned``, the best of all; ``learned_no_llm``, the best without reader probes. Plain groups are
    fitted first, so a tie goes to the configuration without the LLM, then to the earlier kind. ``refit``: each returned
    selector is then :func:`refit_selector`'s (the choices stay those of the train-only fits)."""
    best = {}  # (kind, probes) -> (selector, its val UDCG)
    grid: list[dict[str, Any]] = []
    for kind in LEARNED_KINDS:
        for probes in (False, True):
            group = [c for c in candidates if c[0] == kind and uses_probes(c[1]) == probes]
            if not group:
                continue
            t0 = time.perf_counter()
            sel, rows = fit_best_selector(group, *train, *val, progress=progress, **common)
            best[(kind, probes)] = (sel, max(r["val/udcg"] for r in rows))
            grid += rows
            log.info("%s%s: %d configurations in %.0f s, best val UDCG %.4f", kind,
                     " + reader probes" if probes else "", len(group), time.perf_counter() - t0,
                     best[(kind, probes)][1])

    def first_best(keys):
        return max(keys, key=lambda key: best[key][1])  # max keeps the first of equal values

    refitted: dict[tuple, Selector] = {}

    def chosen(key):  # each chosen configuration refitted once, shared by the names that chose it
        if key not in refitted:
            refitted[key] = refit_selector(best[key][0], train, val) if refit else best[key][0]
        return refitted[key]

    selectors = {kind: chosen(first_best([key for key in best if key[0] == kind]))
                 for kind in LEARNED_KINDS if any(key[0] == kind for key in best)}
    choice = {}
    for name, keys in (("learned", list(best)), ("learned_no_llm", [key for key in best if not key[1]])):
        if keys:
            key = first_best(keys)
            selectors[name] = chosen(key)
            choice[name] = {"kind": key[0], "uses_probes": key[1], "config": selectors[name].get_config()}
    return selectors, grid, choice


def needs_prior_rows(kind: str) -> bool:
    """True for a selector that learns a ranker-free prior on other rows and calibrates on the fit rows
    (``calibrated_utility``: :mod:`udcg_ltr.select.calibrated`)."""
    return bool(getattr(registry().get(kind), "fits_on_val", False))


def fit_selector_with_prior(kind: str, fit_scores, fit_slates, prior: Callable[[], tuple[Any, Any]] | None = None,
                            **kwargs: Any) -> tuple[Selector, dict[str, float]]:
    """:func:`fit_selector` as the jobs call it, on the held-out *fit* rows of the deployed ranker. A kind
    with a ranker-free prior (:func:`needs_prior_rows`) learns it on the ``(scores, slates)`` of ``prior()``
    (e.g. the reranker's own training split: the prior reads no ranker score), calibrates on the fit rows."""
    if not needs_prior_rows(kind):
        return fit_selector(kind, fit_scores, fit_slates, **kwargs)
    if prior is None:
        raise ValueError(f"a {kind} selector needs prior rows besides the fit rows (e.g. prior_split: train)")
    return fit_selector(kind, *prior(), fit_scores, fit_slates, **kwargs)  # prior() -> (scores, slates)


def group_kfold(groups: Sequence[Any], n_folds: int, *, seed: int = 0) -> list[np.ndarray]:
    """``n_folds`` arrays of item indices (the held-out rows) such that items of one group (e.g. a SQuAD
    article) share a fold. Groups are shuffled with ``seed`` and assigned, largest first, to the currently
    smallest fold, so folds are balanced in items."""
    if n_folds < 2:
        raise ValueError(f"n_folds must be >= 2, got {n_folds}")
    groups = list(groups)
    sizes = Counter(groups)
    uniq = sorted(sizes, key=str)
    if len(uniq) < n_folds:
        raise ValueError(f"{len(uniq)} groups cannot fill {n_folds} folds")
    np.random.default_rng(seed).shuffle(uniq)
    load = np.zeros(n_folds, dtype=np.int64)
    fold_of = {}
    for g in sorted(uniq, key=lambda g: -sizes[g]):  # largest first, stable after the shuffle
        fold_of[g] = int(np.argmin(load))
        load[fold_of[g]] += sizes[g]
    fold = np.array([fold_of[g] for g in groups])
    return [np.flatnonzero(fold == f) for f in range(n_folds)]
