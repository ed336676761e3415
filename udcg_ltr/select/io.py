"""Saving and loading selectors: a directory with ``selector.json`` (format, version, registry ``kind``,
constructor ``config``, free ``metadata``; ``inf`` as JSON ``Infinity``) plus, for learned selectors,
``selector.safetensors``, replaced atomically: a crash leaves the previous selector or the new one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.io import atomic_directory, atomic_write_bytes, atomic_write_json, json_safe
from udcg_ltr.select.base import Selector
from udcg_ltr.select.baselines import (
    CumulativeUtilityRule,
    FixedK,
    OracleK,
    RelativeThreshold,
    ScoreThreshold,
)
from udcg_ltr.select.calibrated import CalibratedUtilitySelector
from udcg_ltr.select.expected import ExpectedUtilitySelector
from udcg_ltr.select.gate import GateSelector
from udcg_ltr.select.kclassifier import KClassifierSelector

FORMAT = "udcg_ltr.selector"
VERSION = 1
CONFIG_FILE = "selector.json"
WEIGHTS_FILE = "selector.safetensors"


def registry() -> dict[str, type[Selector]]:
    """Selector classes by ``kind``."""
    classes = [FixedK, ScoreThreshold, RelativeThreshold, CumulativeUtilityRule, OracleK, GateSelector,
               KClassifierSelector, ExpectedUtilitySelector, CalibratedUtilitySelector]
    return {c.kind: c for c in classes}


def make_selector(kind: str, **config: Any) -> Selector:
    """A new selector of registry ``kind`` with flat constructor arguments ``config`` (:meth:`.Selector.from_config`)."""
    classes = registry()
    if kind not in classes:
        raise ValueError(f"unknown selector kind {kind!r} (choose from {sorted(classes)})")
    return classes[kind].from_config(config)


def save_selector(selector: Selector, path: str | os.PathLike, *, metadata: Mapping[str, Any] | None = None) -> str:
    """Write ``selector`` to the directory ``path`` (atomic whole-directory swap); return the path."""
    from safetensors.numpy import save

    path = Path(path)
    state = selector.get_state()
    with atomic_directory(path) as tmp:
        doc = {"format": FORMAT, "version": VERSION, "kind": selector.kind,
               "config": json_safe(selector.get_config()), "metadata": json_safe(dict(metadata or {}))}
        if state:
            tensors = {k: np.ascontiguousarray(np.asarray(v)) for k, v in state.items()}
            atomic_write_bytes(tmp / WEIGHTS_FILE, save(tensors))
            doc["weights"] = WEIGHTS_FILE
        atomic_write_json(tmp / CONFIG_FILE, doc)
    return str(path)


def read_selector_config(path: str | os.PathLike) -> dict[str, Any]:
    """The parsed ``selector.json`` of a saved selector directory (checked for format and version)."""
    path = Path(path)
    file = path / CONFIG_FILE if path.is_dir() else path
    doc = json.loads(file.read_text(encoding="utf-8"))
    if doc.get("format") != FORMAT:
        raise ValueError(f"{file}: not a saved selector (format {doc.get('format')!r})")
    if int(doc.get("version", 0)) > VERSION:
        raise ValueError(f"{file}: selector format version {doc['version']} is newer than this code ({VERSION})")
    return doc


def load_selector(path: str | os.PathLike) -> Selector:
    """Rebuild a selector saved by :func:`save_selector` (config, then weights when there are any)."""
    from safetensors.numpy import load_file

    path = Path(path)
    doc = read_selector_config(path)
    classes = registry()
    if doc["kind"] not in classes:
        raise ValueError(f"{path}: unknown selector kind {doc['kind']!r}")
    selector = classes[doc["kind"]].from_config(doc["config"])
    if doc.get("weights"):
        selector.set_state(load_file(str(path / doc["weights"])))
    selector.metadata = doc.get("metadata", {})
    return selector
