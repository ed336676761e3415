"""``fit_selector``: train (or grid-fit) a dynamic-k selector from held-out scores; ``load_selector``.

Plain keyword arguments, so a Hydra group (``model=dynamic_k``) maps onto it one to one::

    selector, metrics = fit_selector("gate", train_scores, train_slates, val_scores, val_slates,
                                     objective="soft_mask", hidden=0, lr=0.01, output_dir="outputs/x")

``*_scores`` are ``[Q, W]`` arrays aligned with the columns of ``*_slates``
(:class:`~udcg_ltr.data.padded.PaddedSlates` with LLM utilities, Eq. 2), or per-record lists of
score arrays. What is "trained" on which rows:

* learned selectors (``gate``, ``kclassifier``, ``expected_utility``) train on the train rows and keep the best epoch
  by the val rows; ``calibrated_utility`` trains its ranker-free prior on the train rows and
  calibrates it with the ranker's scores on the val rows (its ``val/udcg`` is cross-fitted over val
  folds, ``val/udcg_in_sample`` the optimistic one);
* rule baselines (``fixed_k``, ``score_threshold``, ``relative_threshold``,
  ``cumulative_utility``) grid-search their knobs on ``fit_on`` (``"train"``, ``"val"`` or
  ``"train+val"``) unless the knobs are given;
* ``oracle`` needs nothing (it reads the gold utilities at selection time).

**Held-out scores.** A reranker's scores on its own training queries are over-confident, so a
selector must learn from scores the reranker did not train on: the val split, or train scores
*cross-fitted* by k-fold (each fold scored by a reranker trained on the other folds, folds grouped
by article: :func:`group_kfold`). The returned metrics are the mean UDCG of the kept set (Eq. 4),
the mean k and the share of ``k = 0`` on each split given.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.io import atomic_write_json
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.base import RankedSlates, Selector, pad_scores, rank_slates, udcg_of_kept
from udcg_ltr.select.io import load_selector, make_selector, registry, save_selector
from udcg_ltr.select.learned import LearnedSelector

LEARNED_KINDS = ("gate", "kclassifier", "expected_utility", "calibrated_utility")


def _concat(a: RankedSlates, b: RankedSlates) -> RankedSlates:
    w = max(a.width, b.width)

    def pad(x, fill):
        if x is None:
            return None
        return np.concatenate([x, np.full((x.shape[0], w - x.shape[1]), fill, dtype=x.dtype)], axis=1)

    def both(x, y, fill):
        return None if x is None or y is None else np.concatenate([pad(x, fill), pad(y, fill)])

    scores = np.concatenate([pad(a.scores, 0.0), pad(b.scores, 0.0)])
    mask = both(a.mask, b.mask, False)
    low = np.where(mask, scores, np.inf).min(axis=1, keepdims=True)  # padding: the row's lowest score
    scores = np.where(mask, scores, np.where(np.isfinite(low), low, 0.0))
    extra = {k: both(a.extra[k], b.extra[k], 0.0) for k in a.extra if k in b.extra}
    qids = None if a.qids is None or b.qids is None else list(a.qids) + list(b.qids)
    return RankedSlates(scores, mask, both(a.utility, b.utility, 0.0), extra, None, qids)


def required_extra(selector: Selector) -> tuple[str, ...]:
    """Extra per-passage arrays (slates field names) the selector reads at inference."""
    return tuple(getattr(selector, "extra_features", ()) or ())


def rank_split(scores, slates, *, mask=None, extra_fields: Sequence[str] = ()) -> RankedSlates | None:
    """:func:`~udcg_ltr.select.base.rank_slates` of one split (None when ``scores`` is None)."""
    if scores is None:
        return None
    if isinstance(scores, (list, tuple)) and slates is not None:
        scores, smask = pad_scores(scores, width=slates.mask.shape[1])
        mask = smask & slates.mask if mask is None else mask
    return rank_slates(scores, slates, mask=mask, extra_fields=tuple(extra_fields))


def select_k(selector: Selector, scores, slates) -> np.ndarray:
    """The selector's kept count per row of ``slates`` ranked by ``scores``, with the extra arrays it reads.

    The inference path of the jobs: a selector trained on extra features (the retriever's score,
    reader probes) needs them again at inference, from the same slates fields.
    """
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
    """Build a selector of ``kind`` with ``hparams``, fit it (see the module doc), return ``(selector, metrics)``.

    ``fit_on`` applies to the rule baselines (``"train"``, ``"val"``, ``"train+val"``). With
    ``output_dir`` the selector is saved to ``output_dir/selector`` (:func:`save_selector`) and the
    metrics to ``output_dir/metrics.json``, both atomically.
    """
    classes = registry()
    if kind not in classes:
        raise ValueError(f"unknown selector kind {kind!r} (choose from {sorted(classes)})")
    if fit_on not in ("train", "val", "train+val"):
        raise ValueError(f"fit_on must be 'train', 'val' or 'train+val', got {fit_on!r}")
    if kind in (*LEARNED_KINDS, "oracle"):
        hparams.setdefault("gamma", gamma)
    selector = make_selector(kind, **hparams)
    extra = required_extra(selector)
    train = rank_split(train_scores, train_slates, extra_fields=extra)
    val = rank_split(val_scores, val_slates, extra_fields=extra)
    test = rank_split(test_scores, test_slates, extra_fields=extra)
    if isinstance(selector, LearnedSelector):
        if train is None:
            raise ValueError(f"a {kind} selector needs train_scores and train_slates")
        selector.fit(train, gamma=gamma, val=val)
    else:
        rows = {"train": train, "val": val}
        if fit_on == "train+val":
            if train is None or val is None:
                raise ValueError("fit_on='train+val' needs both splits")
            data = _concat(train, val)
        else:
            data = rows[fit_on]
        if data is not None and not _is_set(selector):
            selector.fit(data, gamma=gamma)
        elif data is None and not _is_set(selector):
            raise ValueError(f"{kind}: nothing to fit on (no {fit_on} scores) and no knobs given")
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
        out = Path(output_dir)
        save_selector(selector, out / "selector", metadata={"metrics": metrics, **dict(metadata or {})})
        atomic_write_json(out / "metrics.json", metrics)
    return selector, metrics


def _is_set(selector: Selector) -> bool:
    """True when a rule baseline's knobs were given (then ``fit`` is skipped)."""
    cfg = selector.get_config()
    if selector.kind == "fixed_k":
        return cfg["k"] is not None
    if selector.kind == "score_threshold":
        return cfg["threshold"] is not None
    if selector.kind == "relative_threshold":
        return cfg["fraction"] is not None and cfg["normalize"] is not None
    if selector.kind == "cumulative_utility":
        return cfg["relevant_fraction"] is not None
    return selector.kind == "oracle"


def fit_best_selector(candidates: Sequence[tuple[str, Mapping[str, Any]]], train_scores, train_slates, val_scores,
                      val_slates, *, gamma: float = DEFAULT_GAMMA, progress: bool = True,
                      **common: Any) -> tuple[Selector, list[dict[str, Any]]]:
    """Fit every ``(kind, hparams)`` candidate; keep the one with the highest ``val/udcg`` (first on ties).

    Returns ``(best selector, rows)`` with one row per candidate (kind, hparams, train/val metrics),
    the record of the model selection. ``common`` keyword arguments go to every candidate.
    """
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


def needs_prior_rows(kind: str) -> bool:
    """True for a selector that learns a ranker-free prior on other rows and calibrates on the fit rows
    (``calibrated_utility``: :mod:`udcg_ltr.select.calibrated`)."""
    return bool(getattr(registry().get(kind), "fits_on_val", False))


def fit_selector_with_prior(kind: str, fit_scores, fit_slates, prior: Callable[[], tuple[Any, Any]] | None = None,
                            **kwargs: Any) -> tuple[Selector, dict[str, float]]:
    """:func:`fit_selector` as the jobs call it: the *fit* rows are the held-out rows of the deployed ranker.

    Most kinds train on them. A kind with a ranker-free prior (:func:`needs_prior_rows`) learns the
    prior on the rows ``prior()`` returns as ``(scores, slates)`` (e.g. the reranker's own training
    split: the prior reads no ranker score) and calibrates on the fit rows.
    """
    if not needs_prior_rows(kind):
        return fit_selector(kind, fit_scores, fit_slates, **kwargs)
    if prior is None:
        raise ValueError(f"a {kind} selector needs prior rows besides the fit rows (e.g. prior_split: train)")
    prior_scores, prior_slates = prior()
    return fit_selector(kind, prior_scores, prior_slates, fit_scores, fit_slates, **kwargs)


def group_kfold(groups: Sequence[Any], n_folds: int, *, seed: int = 0) -> list[np.ndarray]:
    """Fold id per item such that items of one group (e.g. a SQuAD article) share a fold.

    Groups are shuffled with ``seed`` and assigned greedily to the currently smallest fold, so
    folds are balanced in items. Returns ``n_folds`` arrays of item indices (the held-out rows).
    """
    if n_folds < 2:
        raise ValueError(f"n_folds must be >= 2, got {n_folds}")
    groups = list(groups)
    uniq = sorted(set(groups), key=str)
    if len(uniq) < n_folds:
        raise ValueError(f"{len(uniq)} groups cannot fill {n_folds} folds")
    rng = np.random.default_rng(seed)
    rng.shuffle(uniq)
    sizes = {g: 0 for g in uniq}
    for g in groups:
        sizes[g] += 1
    load = np.zeros(n_folds, dtype=np.int64)
    fold_of = {}
    for g in sorted(uniq, key=lambda g: -sizes[g]):  # largest first, stable after the shuffle
        f = int(np.argmin(load))
        fold_of[g] = f
        load[f] += sizes[g]
    fold = np.array([fold_of[g] for g in groups])
    return [np.flatnonzero(fold == f) for f in range(n_folds)]


__all__ = ["LEARNED_KINDS", "fit_best_selector", "fit_selector", "fit_selector_with_prior", "group_kfold",
           "needs_prior_rows", "load_selector", "rank_split",
           "required_extra", "select_k", "split_metrics"]
