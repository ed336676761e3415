"""Plumbing every job shares: offline environment, seeds, run folder, resume check, logger, dataset, LLM (the
typed, checked settings a job reads: :mod:`udcg_ltr.jobs.settings`).

:func:`run_job` records a job's life in ``<run folder>/job_result.json``, written atomically: "running",
then "finished" (with metrics and config, once every artefact is complete) or "failed" (with the error; its
W&B run is marked failed). A restarted sweep skips a job only when its folder holds a finished result of the
same :func:`config_hash` (configuration and input files); another configuration's folder is cleared and rerun;
a killed or failed job reruns in place (its W&B run removed; resumable artefacts such as ``last.ckpt`` stay).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from udcg_ltr.annotate.annotator import annotate_records, missing_annotations, with_cache
from udcg_ltr.annotate.cache import AnnotationCache, default_cache_root
from udcg_ltr.data.lexical import records_idf
from udcg_ltr.data.padded import PaddedSlates, pad_records
from udcg_ltr.data.schema import DataError, QueryRecord, validate_record
from udcg_ltr.io import atomic_write_json, read_json_dict, sha256_file
from udcg_ltr.jobs.settings import ConfigError, DatasetSettings, JobSettings, job_settings, path_values
from udcg_ltr.paths import PROJECT_ROOT
from udcg_ltr.sweeps import RESULT_FILE
from udcg_ltr.tracking import RunLogger, make_logger

log = logging.getLogger("udcg_ltr")

#: Config keys that cannot change a job's results (where things are logged or cached, the sweep's name,
#: ``force``; the annotation cache is a memo of deterministic LLM calls; how often a resume checkpoint is written,
#: which tests/test_kill_training.py shows leaves the weights unchanged): left out of :func:`config_hash`.
RESULT_INDEPENDENT_KEYS = ("force", "sweep_name", "logger", "paths.output_dir", "paths.log_dir", "paths.root_dir",
                           "paths.cache_dir", "paths.annotation_cache_dir", "trainer.checkpoint_minutes")

S = TypeVar("S", bound=JobSettings)

#: Environment defaults of every job: offline (no hub downloads, W&B never asks for a key), quiet tokenizers.
OFFLINE_DEFAULTS = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline",
                    "WANDB_SILENT": "true", "TOKENIZERS_PARALLELISM": "false"}


def prepare_environment(settings: JobSettings) -> None:
    """Offline by default (:data:`OFFLINE_DEFAULTS`), the configured folders exported, seeded, bounded CPU threads."""
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
    for folder, variable in ((settings.paths.data_dir, "UDCG_LTR_DATA"), (settings.paths.cache_dir, "UDCG_LTR_CACHE")):
        if folder:
            os.environ[variable] = folder
    random.seed(settings.seed)
    np.random.seed(settings.seed)
    import torch

    torch.manual_seed(settings.seed)
    if settings.num_threads:
        torch.set_num_threads(settings.num_threads)


def _hydra_run():
    """Hydra's config of the running job (None outside Hydra)."""
    return HydraConfig.get() if HydraConfig.initialized() else None


def output_dir(cfg) -> Path:
    """The run folder Hydra made for this job (or ``paths.output_dir`` outside Hydra)."""
    hydra = _hydra_run()
    return Path(hydra.runtime.output_dir) if hydra is not None else Path(cfg.paths.output_dir)


def is_multirun() -> bool:
    hydra = _hydra_run()
    return hydra is not None and hydra.mode == RunMode.MULTIRUN


# ---- config hash -------------------------------------------------------------------------------
def _drop(container: dict, dotted: str) -> None:
    *parents, last = dotted.split(".")
    node: Any = container
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


def _without_nulls(node: Any) -> Any:
    """``node`` without its null settings (and groups left empty): a setting added later with a null default that keeps
    the earlier behaviour (the house rule for new keys) leaves the hash of jobs finished before it existed unchanged."""
    if isinstance(node, dict):
        kept = {key: _without_nulls(value) for key, value in node.items()}
        return {key: value for key, value in kept.items() if value is not None and value != {}}
    if isinstance(node, list):
        return [_without_nulls(value) for value in node]
    return node


def _file_fingerprint(path: str) -> dict[str, str] | str:
    """sha256 of a file's bytes (of each file below a folder, by relative path), or ``"missing"``. Content, not
    modification times: the same bytes provisioned again at the same path are the same inputs, so finished jobs stay
    finished (hashing reads about 1 GB a second)."""
    p = Path(path)
    if not p.exists():
        return "missing"
    files = [p] if p.is_file() else [f for f in sorted(p.rglob("*")) if f.is_file()]
    return {f.relative_to(p).as_posix(): sha256_file(f) for f in files}


def config_hash(cfg) -> str:
    """sha256 of what determines a job's results: the resolved config minus :data:`RESULT_INDEPENDENT_KEYS` and
    null settings, plus the content hash of each input file named under ``dataset``."""
    container = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    for key in RESULT_INDEPENDENT_KEYS:
        _drop(container, key)
    container = _without_nulls(container)
    inputs = {key: _file_fingerprint(value) for key, value in path_values(container.get("dataset") or {})}
    blob = json.dumps({"config": container, "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# ---- job state ---------------------------------------------------------------------------------
def _mark(run_dir: Path, status: str, config_hash_: str | None, **extra: Any) -> None:
    """Write ``job_result.json`` atomically (``status`` "finished" last, once every artefact is complete)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / RESULT_FILE, {"status": status, "config_hash": config_hash_, **extra})


def is_dedicated_run_dir(run_dir: Path) -> bool:
    """False for a folder that holds more than a job's run (the working directory or one of its parents, the
    project, a git checkout): artefacts are never cleared there (``hydra.run.dir=.`` must not empty a checkout)."""
    run_dir = run_dir.resolve()
    for protected in (Path.cwd().resolve(), PROJECT_ROOT.resolve(), Path.home().resolve()):
        if run_dir == protected or run_dir in protected.parents:
            return False
    return not any((run_dir / name).exists() for name in (".git", "pyproject.toml", "setup.py"))


#: Run-folder entries that check themselves: a stage reuses one only when its own stamp equals the stage's
#: arguments (``cross_encoder/fit_arguments.json`` beside the model, ``checkpoints/fit_arguments.json`` beside
#: ``last.ckpt``; :func:`udcg_ltr.models.training.fit_reranker`). A job whose config changed keeps them, so a
#: new or renamed key that does not touch the training no longer costs a finished training; ``force=true`` drops them.
SELF_STAMPED = frozenset({"cross_encoder"})


def clear_run_dir(run_dir: Path, *, keep_resumable: bool, previous: Mapping[str, Any] | None = None,
                  keep: frozenset[str] = frozenset()) -> list[str]:
    """Remove what an earlier attempt left in ``run_dir``, returning the removed names: always ``job_result.json``
    and the attempt's W&B run (so a rerun logs exactly one run); with ``keep_resumable=False`` every artefact too,
    in a dedicated run folder only, but ``.hydra/``, logs and the entries named in ``keep``."""
    if not run_dir.is_dir():
        return []
    if not is_dedicated_run_dir(run_dir):
        if not keep_resumable:
            log.warning("%s is not a dedicated run folder: only the earlier attempt's job_result.json and W&B run "
                        "are removed; its other artefacts may remain", run_dir)
        targets = [run_dir / RESULT_FILE]
        wandb_run = (previous or {}).get("wandb_run")
        if isinstance(wandb_run, str) and wandb_run.startswith("wandb/") and ".." not in wandb_run:
            targets.append(run_dir / wandb_run)
    else:
        targets = [child for child in sorted(run_dir.iterdir())
                   if not (child.name == ".hydra" or child.name in keep or (child.is_file() and child.suffix == ".log"))
                   and (not keep_resumable or child.name in (RESULT_FILE, "wandb"))]
    targets = [target for target in targets if target.exists() or target.is_symlink()]
    for target in targets:
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink()
    return [target.relative_to(run_dir).as_posix() for target in targets]


# ---- logger, records ---------------------------------------------------------------------------
def open_logger(cfg, settings: JobSettings, run_dir: Path, *, job_type: str) -> RunLogger:
    """The job's run logger, as ``cfg.logger`` configures it (none without one)."""
    lcfg = OmegaConf.to_container(cfg.logger, resolve=True) if "logger" in cfg else {"backend": "none"}
    backend = lcfg.pop("backend", "none")
    if settings.tags and "tags" in lcfg:  # an experiment recipe's own tags join the logger's
        lcfg["tags"] = [*lcfg["tags"], *settings.tags]
    multirun = is_multirun()
    if multirun and lcfg.setdefault("group", None) is None:
        lcfg["group"] = f"{settings.task_name}/{settings.sweep_name}"
    return make_logger(backend, run_dir, config=OmegaConf.to_container(cfg, resolve=True), job_type=job_type,
                       name=run_dir.name if multirun else None, **lcfg)


def load_records(dataset: DatasetSettings) -> list[QueryRecord]:
    """Instantiate the dataset's reader (``dataset.reader._target_``) and validate what it returns."""
    try:
        records = instantiate(dataset.reader)
    except InstantiationException as err:  # Hydra wraps the reader's own error: give the DataError back
        if isinstance(err.__cause__, (DataError, FileNotFoundError)):
            raise err.__cause__ from None
        raise
    if not isinstance(records, list) or not all(isinstance(r, QueryRecord) for r in records):
        raise TypeError(f"dataset {dataset.name!r}: the reader must return a list of QueryRecord")
    if dataset.limit:
        records = records[: dataset.limit]
    for i, r in enumerate(records, start=1):
        validate_record(r, path=f"dataset {dataset.name}", line=i)
    return records


def select_split(records: Sequence[QueryRecord], splits: str | Sequence[str] | None) -> list[QueryRecord]:
    """Records whose ``split`` is in ``splits`` (all records when ``splits`` is None)."""
    if splits is None:
        return list(records)
    wanted = {splits} if isinstance(splits, str) else set(splits)
    return [r for r in records if r.split in wanted]


def subsample(records: Sequence[QueryRecord], n: int | None, seed: int) -> list[QueryRecord]:
    """``n`` of ``records`` in their order (all when ``n`` is None, 0 or not smaller): a fixed ``seed`` draws the
    same questions for every system and model seed of a comparison."""
    if not n or n >= len(records):
        return list(records)
    keep = set(np.random.default_rng(seed).choice(len(records), size=int(n), replace=False).tolist())
    return [r for i, r in enumerate(records) if i in keep]


def get_metric_value(metrics: Mapping[str, Any], name: str | None) -> float | None:
    """The value sweepers optimise (lightning-hydra-template's convention)."""
    if not name:
        return None
    if name not in metrics:
        raise KeyError(f"optimized_metric {name!r} is not among the job's metrics: {sorted(metrics)}")
    return float(metrics[name])


def has_annotations(records: Sequence[QueryRecord], llm: str | None) -> bool:
    """True when every passage carries ``p_no_response`` of ``llm``."""
    return llm is not None and not missing_annotations(records, llm, ["p_no_response"])


class JobContext:
    """What a job's stages (train.py) or modes (evaluate.py) share: the typed ``settings`` the job reads, the
    ``cfg`` whose ``_target_`` nodes it instantiates (the LLM, the trainer). The records and the LLM load on first
    use, so a job whose data carries the annotations and that needs no end-to-end answers never loads the LLM."""

    def __init__(self, cfg: DictConfig, settings: JobSettings, run_dir: Path, logger: RunLogger):
        self.cfg, self.settings, self.run_dir, self.logger = cfg, settings, run_dir, logger
        self.llm_name = settings.llm_name
        self.threshold = settings.dataset.relevance_threshold

    @cached_property
    def scorer(self):
        """The LLM (a ``_target_`` config) behind the persistent annotation cache (a CachedScorer)."""
        if self.settings.llm is None:
            raise ValueError("this job needs an LLM but none is configured (llm=...)")
        t0 = time.perf_counter()
        scorer = instantiate(self.cfg.llm, _convert_="all")
        cache_dir = Path(self.settings.paths.annotation_cache_dir or default_cache_root(scorer.name))
        cached = with_cache(scorer, AnnotationCache(cache_dir))
        log.info("LLM %s ready in %.1fs (annotation cache %s)", scorer.name, time.perf_counter() - t0, cache_dir)
        return cached

    def ensure_annotations(self, records: list[QueryRecord], *, answers: bool = True) -> dict[str, Any]:
        """Annotate every passage (P(NO-RESPONSE), and its lone answer when ``answers``) unless present."""
        wanted = ["p_no_response"] + (["answer_alone"] if answers else [])
        if not missing_annotations(records, self.llm_name, wanted):
            log.info("annotations of %s already present: no LLM work", self.llm_name)
            return {}
        fields = ["p_no_response"] + (["answer_alone", "erag_em"] if answers else [])
        summary = annotate_records(records, self.scorer, fields=fields, progress=True).to_dict()
        log.info("annotation: %s", summary)
        return summary

    @cached_property
    def records(self) -> list[QueryRecord]:
        records = load_records(self.settings.dataset)
        log.info("dataset %s: %d queries, %d passages", self.settings.dataset.name, len(records),
                 sum(len(r.passages) for r in records))
        return records

    def split(self, splits: str | Sequence[str] | None) -> list[QueryRecord]:
        return select_split(self.records, splits)

    def check_splits(self, key: str, splits: str | Sequence[str] | None) -> None:
        """Every split named at ``key`` is in the data (null: every record): a typo, or a file without that split,
        must not put every record (training questions included) into a test table. Runs before any stage."""
        if splits is None:
            return
        named = [splits] if isinstance(splits, str) else list(splits)
        present = sorted({str(r.split) for r in self.records})
        missing = [s for s in named if s not in present]
        if missing or not named:
            raise ConfigError([f"{key}={named}: " + (f"no split {missing} in the data" if missing else "empty")
                               + f" (dataset {self.settings.dataset.name} has splits {present}; null: every record)"])

    @cached_property
    def idf(self):
        """Lexical corpus statistics over every record (:mod:`udcg_ltr.data.lexical`), shared by all splits."""
        return records_idf(self.records)

    def slates(self, records: Sequence[QueryRecord]) -> PaddedSlates:
        """Padded arrays of ``records`` (the selectors' input): one width and idf for every split."""
        return pad_records(records, llm=self.llm_name, width=max(len(r.passages) for r in self.records),
                           relevance_threshold=self.threshold, idf=self.idf)


# ---- the job -----------------------------------------------------------------------------------
def run_job(cfg, settings_type: type[S], *, job_type: str,
            body: Callable[[S, Path, RunLogger], dict[str, float]]) -> dict[str, float]:
    """The life of a train.py / evaluate.py job (module docstring) around ``body(settings, run_dir, logger)``:
    ``settings`` is ``cfg`` as a ``settings_type`` (:func:`~udcg_ltr.jobs.settings.job_settings`), built and so
    checked before the body runs. Under Hydra a :class:`DataError` or :class:`ConfigError` ends a single run with
    its message on stderr and exit status 1, without a traceback."""
    job_log = logging.getLogger(f"udcg_ltr.{cfg.task_name}")
    run_dir = output_dir(cfg)
    try:
        try:
            chash = config_hash(cfg)
        except OmegaConfBaseException:
            chash = None  # unresolvable: validation says why
        force = "force" in cfg and cfg.force is True  # read before the settings: a finished job is not checked
        previous = read_json_dict(run_dir / RESULT_FILE)  # None when absent or torn: no state
        if previous is not None and previous.get("status") == "finished" and chash is not None \
                and previous.get("config_hash") == chash and not force:
            job_log.info("job already finished in %s: skipping (force=true reruns it)", run_dir)
            return previous["metrics"]
        try:
            settings = job_settings(settings_type, cfg)
        except ConfigError as err:
            if previous is None:  # a new run folder says why it is empty; an earlier result stays untouched
                _mark(run_dir, "failed", chash, error=str(err))
            raise
        stale = previous is not None and (previous.get("config_hash") != chash or force)
        if previous is not None:
            removed = clear_run_dir(run_dir, keep_resumable=not stale, previous=previous,
                                    keep=frozenset() if force else SELF_STAMPED)
            why = ("force=true" if force else "its config changed") if stale else f"last attempt {previous.get('status')}"
            job_log.warning("%s held a result of an earlier attempt (%s): rerunning; removed %s", run_dir, why, removed)
        _mark(run_dir, "running", chash)
        prepare_environment(settings)
        logger = open_logger(cfg, settings, run_dir, job_type=job_type)
        wandb_run = {"wandb_run": logger.run_folder} if getattr(logger, "run_folder", None) else {}
        if wandb_run:  # a rerun removes exactly this W&B run of the attempt
            _mark(run_dir, "running", chash, **wandb_run)
        try:
            metrics = body(settings, run_dir, logger)
            logger.summary(metrics)
            logger.finish()  # before "finished": a kill in between leaves a job that reruns, not an unclosed W&B run
            _mark(run_dir, "finished", chash, metrics=dict(metrics), config=OmegaConf.to_container(cfg, resolve=True))
            job_log.info("results in %s", run_dir)
        except BaseException as err:
            _mark(run_dir, "failed", chash, error=f"{type(err).__name__}: {err}", **wandb_run)
            logger.finish(exit_code=1)
            raise
        return metrics
    except (DataError, ConfigError) as err:
        if _hydra_run() is not None and not is_multirun():
            raise SystemExit(f"error: {err}") from None
        raise
