"""Plumbing every job shares: offline environment, seeds, run folder, resume check, logger, dataset."""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.io import atomic_write_json
from udcg_ltr.tracking import RunLogger, make_logger

log = logging.getLogger("udcg_ltr")

FINISHED_FILE = "job_result.json"


def prepare_environment(cfg) -> None:
    """Offline by default (no hub downloads, W&B never asks for a key), seeded, bounded CPU threads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    paths = cfg.get("paths", {})
    if paths.get("data_dir"):
        os.environ["UDCG_LTR_DATA"] = str(paths.data_dir)
    if paths.get("cache_dir"):
        os.environ["UDCG_LTR_CACHE"] = str(paths.cache_dir)
    seed = int(cfg.get("seed", 0))
    random.seed(seed)
    np.random.seed(seed)
    import torch

    torch.manual_seed(seed)
    threads = (cfg.get("trainer") or {}).get("num_threads")
    if threads:
        torch.set_num_threads(int(threads))


def output_dir(cfg) -> Path:
    """The run folder Hydra made for this job (or ``paths.output_dir`` outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except (ImportError, ValueError):
        return Path(cfg.paths.output_dir)


def is_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode == RunMode.MULTIRUN
    except (ImportError, ValueError):
        return False


def finished_result(run_dir: Path) -> dict[str, Any] | None:
    """The metrics of a job that already finished in ``run_dir`` (resume: skip it), else None."""
    path = run_dir / FINISHED_FILE
    if not path.is_file():
        return None
    import json

    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    return result if result.get("status") == "finished" else None


def mark_finished(run_dir: Path, metrics: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    """Written last and atomically: its presence means every artefact of the job is complete."""
    atomic_write_json(run_dir / FINISHED_FILE, {"status": "finished", "metrics": dict(metrics), "config": config})


def open_logger(cfg, run_dir: Path, *, job_type: str) -> RunLogger:
    from omegaconf import OmegaConf

    lcfg = OmegaConf.to_container(cfg.logger, resolve=True) if cfg.get("logger") else {"backend": "none"}
    backend = lcfg.pop("backend", "none")
    config = OmegaConf.to_container(cfg, resolve=True)
    if cfg.get("tags") and "tags" in lcfg:  # an experiment recipe's own tags join the logger's
        lcfg["tags"] = [*lcfg["tags"], *[str(t) for t in cfg.tags]]
    name = None
    if is_multirun():
        name = run_dir.name
        if lcfg.get("group") is None:
            lcfg["group"] = f"{cfg.get('task_name', 'job')}/{cfg.get('sweep_name', 'default')}"
    return make_logger(backend, run_dir, config=config, job_type=job_type, name=name, **lcfg)


def load_records(cfg) -> list[QueryRecord]:
    """Instantiate the dataset's reader (``dataset.reader._target_``) and validate what it returns."""
    from hydra.utils import instantiate

    from udcg_ltr.data.schema import validate_record

    records = instantiate(cfg.dataset.reader)
    if not isinstance(records, list) or not all(isinstance(r, QueryRecord) for r in records):
        raise TypeError(f"dataset {cfg.dataset.name!r}: the reader must return a list of QueryRecord")
    limit = cfg.dataset.get("limit")
    if limit:
        records = records[: int(limit)]
    for i, r in enumerate(records, start=1):
        validate_record(r, path=f"dataset {cfg.dataset.name}", line=i)
    return records


def select_split(records: Sequence[QueryRecord], splits: str | Sequence[str] | None) -> list[QueryRecord]:
    """Records whose ``split`` is in ``splits`` (all records when ``splits`` is None)."""
    if splits is None:
        return list(records)
    wanted = {splits} if isinstance(splits, str) else set(splits)
    return [r for r in records if r.split in wanted]


def get_metric_value(metrics: Mapping[str, Any], name: str | None) -> float | None:
    """The value sweepers optimise (lightning-hydra-template's convention)."""
    if not name:
        return None
    if name not in metrics:
        raise KeyError(f"optimized_metric {name!r} is not among the job's metrics: {sorted(metrics)}")
    return float(metrics[name])


def run_job(cfg, *, job_type: str, body: Callable[[Path, RunLogger], dict[str, float]],
            check: Callable[[], None] | None = None) -> dict[str, float]:
    """The life of a train.py / evaluate.py job: skip it when its run folder holds finished metrics (unless
    ``force``), ``check`` the config, prepare the environment, open the logger, run ``body(run_dir, logger)``,
    then write the summary and ``job_result.json`` and close the logger (also on failure)."""
    from omegaconf import OmegaConf

    job_log = logging.getLogger(f"udcg_ltr.{cfg.get('task_name', 'job')}")
    run_dir = output_dir(cfg)
    done = finished_result(run_dir)
    if done is not None and not cfg.get("force", False):
        job_log.info("job already finished in %s: skipping (force=true reruns it)", run_dir)
        return done["metrics"]
    if check is not None:
        check()
    prepare_environment(cfg)
    logger = open_logger(cfg, run_dir, job_type=job_type)
    try:
        metrics = body(run_dir, logger)
        logger.summary(metrics)
        mark_finished(run_dir, metrics, OmegaConf.to_container(cfg, resolve=True))
        job_log.info("results in %s", run_dir)
        return metrics
    finally:
        logger.finish()
