"""``python -m udcg_ltr.annotate``: annotate a dataset's passages with an LLM (Hydra entry point).

Reads the records (``dataset=<config with a _target_ reader>`` or ``input=path.jsonl``), optionally relabels
relevance, fills ``Passage.annotations[<llm name>]`` through the persistent cache and writes the annotated
JSONL (``output=``) plus ``<output>.meta.json``. The last stdout line is a JSON summary (``{"passages": 40,
"computed": 12, "cached": 28, ...}``). Killing a run loses no finished batch: rerunning the same command
recomputes only what is missing. Settings (``limit``, ``shard.*``, ``max_passages``, ``output``) are checked
before any record is read or LLM loads (:func:`check_settings`). Bad input or a bad setting (a
:class:`~udcg_ltr.data.schema.DataError`) ends a single run with
its message on stderr and exit status 1, without a traceback; in a multirun (shards) it is raised so the other
shards still run and Hydra reports it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("WANDB_MODE", "offline")):
    os.environ.setdefault(_var, _value)

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from udcg_ltr.annotate.annotator import annotate_records  # noqa: E402
from udcg_ltr.annotate.baselines import MonteCarloConfig  # noqa: E402
from udcg_ltr.annotate.cache import AnnotationCache, default_cache_root  # noqa: E402
from udcg_ltr.annotate.judge import RELEVANCE_JUDGE, RelevanceJudge  # noqa: E402
from udcg_ltr.annotate.relevance import label_relevance  # noqa: E402
from udcg_ltr.data.jsonl import read_records, write_records  # noqa: E402
from udcg_ltr.data.schema import DataError  # noqa: E402
from udcg_ltr.io import atomic_write_json  # noqa: E402
from udcg_ltr.paths import PROJECT_ROOT  # noqa: E402

log = logging.getLogger("udcg_ltr.annotate")

def load_records(cfg: DictConfig) -> tuple[list, str]:
    """The records to annotate and a description of their source."""
    from hydra.utils import instantiate

    dataset = cfg.get("dataset")
    if dataset is None:
        if cfg.get("input"):
            return read_records(cfg.input), str(cfg.input)
        raise ValueError("nothing to annotate: pass input=path.jsonl or dataset=<name>")
    if isinstance(dataset, str):
        raise ValueError(f"unknown dataset {dataset!r}: give a config with a _target_ reader")
    for node in (dataset, dataset.get("reader")):
        if node is not None and not isinstance(node, str) and "_target_" in node:
            return list(instantiate(node, _convert_="all")), str(dataset.get("name") or node["_target_"])
    raise ValueError("dataset config needs a _target_ (or reader._target_) pointing to a reader function "
                     "returning QueryRecords")


def _count_setting(cfg: DictConfig, key: str, *, minimum: int, optional: bool = True) -> int | None:
    """``cfg[key]`` as an integer >= ``minimum`` (None when unset and ``optional``); anything else (``abc``,
    ``2.5``, ``true``, ``-1``) is a :class:`DataError` naming the setting, not a traceback from ``int()``."""
    value = OmegaConf.select(cfg, key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DataError(f"expected an integer >= {minimum}{' or null' if optional else ''}, got {value!r:.40}",
                        field=key)
    return value


def _check_output(output: Any) -> Path:
    """The output file must be writable as a file: not an existing directory, its parent not a file. Checked
    before any record is read or any LLM loads, so that hours of annotation are not lost at the final write."""
    if not output or not isinstance(output, str):
        raise DataError(f"expected a file path, got {output!r:.60}", field="output")
    path = Path(output)
    if path.is_dir():
        raise DataError(f"{path} is an existing directory: give a file path (e.g. {path / 'annotated.jsonl'})",
                        field="output")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise DataError(f"{parent} is a file, not a directory", field="output")
    return path


def check_settings(cfg: DictConfig) -> None:
    """Every setting the run reads, checked before any record is read or any LLM loads: ``limit`` and
    ``max_passages`` (>= 1: ``limit=0`` would write an empty file that :func:`read_records` refuses),
    ``shard.count`` (>= 1) and ``shard.index`` (in ``[0, count)``), ``num_threads``, ``output``."""
    _count_setting(cfg, "limit", minimum=1)
    _count_setting(cfg, "max_passages", minimum=1)
    _count_setting(cfg, "num_threads", minimum=1)
    count = _count_setting(cfg, "shard.count", minimum=1, optional=False)
    index = _count_setting(cfg, "shard.index", minimum=0, optional=False)
    if index >= count:
        raise DataError(f"must be in [0, shard.count) = [0, {count}), got {index}", field="shard.index")
    _check_output(cfg.get("output"))


def select_shard(records: list, *, index: int, count: int) -> list:
    """Shard ``index`` of ``count``, strided: every shard gets the same mix of short and long pools."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard.index must be in [0, shard.count), got index={index} count={count}")
    return records[index::count]


def run(cfg: DictConfig) -> dict[str, Any]:
    """Annotate as ``cfg`` says; returns the summary (also written next to the output)."""
    from udcg_ltr.annotate.llms import load_llm  # torch: loaded when there is work to do

    check_settings(cfg)
    records, source = load_records(cfg)
    if cfg.get("limit") is not None:
        records = records[: int(cfg.limit)]
    index, count = int(cfg.shard.index), int(cfg.shard.count)
    records = select_shard(records, index=index, count=count)
    if count > 1:
        source = f"{source} (shard {index + 1}/{count})"
    if cfg.get("max_passages") is not None:
        for r in records:
            r.passages = r.passages[: int(cfg.max_passages)]
    overrides = {"progress": bool(cfg.get("progress", True))}
    if cfg.get("num_threads"):
        overrides["num_threads"] = int(cfg.num_threads)
    scorer = load_llm(cfg.llm, **overrides)
    log.info("annotating %d questions / %d passages from %s with %r", len(records),
             sum(len(r.passages) for r in records), source, scorer)

    cache = None
    if cfg.cache.enabled:
        folder = (cfg.get("paths") or {}).get("annotation_cache_dir")  # one spelling for every entry point
        root = Path(folder) if folder else default_cache_root(scorer.name)
        cache = AnnotationCache(root, fsync=bool(cfg.cache.get("fsync", True)))
        log.info("annotation cache %s: %d entries", root, len(cache))

    rel_cfg = cfg.get("relevance") or {}
    method = rel_cfg.get("method", "dataset")
    judge = None
    if method == "llm":
        judge_cfg = dataclasses.replace(RELEVANCE_JUDGE, max_new_tokens=int(rel_cfg.get("max_new_tokens", 128)))
        judge = RelevanceJudge(scorer, judge_cfg, cache=cache)
    rel_stats = label_relevance(records, method, judge=judge, fallback=rel_cfg.get("fallback"),
                                progress=overrides["progress"])

    mc = MonteCarloConfig(**(cfg.get("mc") or {}))
    try:
        stats = annotate_records(records, scorer, cache, fields=list(cfg.fields), mc=mc, progress=overrides["progress"])
    finally:
        if cache is not None:
            cache.close()

    output = Path(cfg.output)
    write_records(output, records)
    summary = {"output": str(output), "source": source, "questions": len(records), **stats.to_dict(),
               "relevance": rel_stats.to_dict(), "cache": cache.stats() if cache is not None else None,
               "cache_dir": str(cache.root) if cache is not None else None}
    meta = {"llm": scorer.describe(), "fields": list(cfg.fields), "summary": summary,
            "config": OmegaConf.to_container(cfg, resolve=True)}
    atomic_write_json(output.with_name(output.name + ".meta.json"), meta)
    return summary


@hydra.main(config_path=str(PROJECT_ROOT / "conf"), config_name="annotate", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, Any]:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    try:
        summary = run(cfg)
    except DataError as err:  # bad input or a bad setting: one line, exit status 1
        if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.RUN:
            raise SystemExit(f"error: {' '.join(str(err).split())}") from None
        raise
    print(json.dumps({k: summary[k] for k in ("passages", "computed", "cached", "seconds", "output")}))
    sys.stdout.flush()
    return summary


if __name__ == "__main__":
    main()
