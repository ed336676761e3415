"""Ranking losses on signed targets (:mod:`udcg_ltr.losses.base`), behind a registry (:data:`LOSSES`).

``get_loss("udcg", k=5, tau=0.5)``; ``get_loss("combined", terms=[{"name": "udcg", "weight": 1.0,
"tau": 0.5}, {"name": "listnet", "weight": 0.1}])`` (or the shorthand ``get_loss("udcg+listnet",
weights=[1.0, 0.1], udcg={...}, listnet={...})``). The sentence-transformers adapters live in
:mod:`udcg_ltr.losses.sentence_transformers` (not imported here: an optional dependency, slow to import).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from udcg_ltr.losses.base import RankingLoss
from udcg_ltr.losses.direct import DirectUDCGLoss
from udcg_ltr.losses.listwise import LambdaUDCGLoss, ListMLELoss, ListNetLoss
from udcg_ltr.losses.pairwise import PairwiseHingeLoss, RankNetLoss
from udcg_ltr.losses.pointwise import BCELoss, MSELoss


class CombinedLoss(RankingLoss):
    """``L = sum_m weight_m L_m``, reading relevance only when every term does, else utilities (a relevance
    loss such as BCE binarises them: Eq. 2, ``sign(u) = R``); ``anneal`` reaches the terms that have it."""

    def __init__(self, terms: Sequence[tuple[float, RankingLoss]]):
        super().__init__()
        if not terms:
            raise ValueError("CombinedLoss needs at least one term")
        self.weights = [float(w) for w, _ in terms]
        self.terms = torch.nn.ModuleList([loss for _, loss in terms])
        self.target = "relevance" if all(t.target == "relevance" for t in self.terms) else "utility"

    def compute(self, scores, targets, mask):
        return sum(w * term.compute(scores, targets, mask) for w, term in zip(self.weights, self.terms))

    def anneal(self, progress: float) -> None:
        for term in self.terms:
            if hasattr(term, "anneal"):
                term.anneal(progress)


#: Registry names -> loss classes, plus ``"combined"`` (:class:`CombinedLoss`, a weighted sum of these).
LOSSES: dict[str, type[RankingLoss]] = {
    "mse": MSELoss, "bce": BCELoss, "ranknet": RankNetLoss, "hinge": PairwiseHingeLoss,
    "listnet": ListNetLoss, "listmle": ListMLELoss, "lambda_udcg": LambdaUDCGLoss, "udcg": DirectUDCGLoss}
ALIASES = {"lambdaloss": "lambda_udcg", "direct_udcg": "udcg", "udcg_direct": "udcg", "pointwise_mse": "mse",
           "binary_cross_entropy": "bce"}


def _canonical(name: str) -> str:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in LOSSES and key != "combined":
        raise KeyError(f"unknown loss {name!r}; known: {sorted(LOSSES) + ['combined']}")
    return key


def get_loss(name: str, **kwargs: Any) -> RankingLoss:
    """Build a loss by registry name (see the module docstring); ``kwargs`` go to its constructor."""
    if "+" in name:
        names = [n for n in name.split("+") if n]
        weights = kwargs.pop("weights", [1.0] * len(names))
        if len(weights) != len(names):
            raise ValueError(f"{len(names)} losses but {len(weights)} weights")
        shared = {k: v for k, v in kwargs.items() if k not in names}
        terms = [{"name": n, "weight": w, **_shared_for(n, shared), **(kwargs.get(n) or {})}
                 for n, w in zip(names, weights)]
        return get_loss("combined", terms=terms)
    key = _canonical(name)
    if key == "combined":
        terms = kwargs.pop("terms", None)
        if not terms or kwargs:
            raise ValueError("get_loss('combined', terms=[{'name': ..., 'weight': ..., **kwargs}, ...])")
        terms = [dict(term) if isinstance(term, Mapping) else dict(term.items()) for term in terms]
        return CombinedLoss([(float(t.pop("weight", 1.0)), get_loss(t.pop("name"), **t)) for t in terms])
    return LOSSES[key](**kwargs)


def _shared_for(name: str, shared: Mapping[str, Any]) -> dict[str, Any]:
    """Pass shorthand-level keyword arguments (e.g. ``k``, ``gamma``) to the terms that accept them."""
    params = inspect.signature(LOSSES[_canonical(name)].__init__).parameters
    return {k: v for k, v in shared.items() if k in params}


def with_spec(name: str, kwargs: Mapping[str, Any] | None, **spec: Any) -> dict[str, Any]:
    """``kwargs`` for ``get_loss(name, ...)`` with the experiment's ``spec`` (``k``, ``gamma``, Eq. 4) filled
    in for every term whose constructor takes them, unless ``kwargs`` (e.g. ``loss.gamma=0.2``) sets its own:
    the validation metrics, the report and the loss share one context size and gamma."""
    out = dict(kwargs or {})
    if "+" in name:  # get_loss hands shorthand-level values to the terms that take them
        return {**spec, **out}
    if _canonical(name) == "combined":
        out["terms"] = [{**_shared_for(str(term["name"]), spec), **term} for term in out.get("terms") or []]
        return out
    return {**_shared_for(name, spec), **out}


def loss_versions(name: str, kwargs: Mapping[str, Any] | None = None) -> dict[str, int]:
    """``{class name: VERSION}`` of every loss class ``get_loss(name, **kwargs)`` builds (a combined loss and its
    terms): the stamps the training fingerprint reads."""
    if "+" in name:
        terms = [{"name": n} for n in name.split("+") if n]
    elif _canonical(name) == "combined":
        terms = list((kwargs or {}).get("terms") or [])
    else:
        cls = LOSSES[_canonical(name)]
        return {cls.__name__: cls.VERSION}
    out = {CombinedLoss.__name__: CombinedLoss.VERSION}
    for term in terms:
        out.update(loss_versions(str(term["name"]), term))
    return out


__all__ = [
    "ALIASES", "BCELoss", "CombinedLoss", "DirectUDCGLoss", "LOSSES", "LambdaUDCGLoss", "ListMLELoss",
    "ListNetLoss", "MSELoss", "PairwiseHingeLoss", "RankNetLoss", "RankingLoss", "get_loss", "loss_versions",
    "with_spec"]
