"""Plumbing every job shares: offline environment, seeds, run folder, config validation, resume check, logger,
dataset, LLM.

:func:`run_job` records a job's life in ``<run folder>/job_result.json``, written atomically: "running",
then "finished" (with metrics and config, once every artefact is complete) or "failed" (with the error; its
W&B run is marked failed). A restarted sweep skips a job only when its folder holds a finished result of the
same :func:`config_hash` (configuration and input files); another configuration's folder is cleared and rerun;
a killed or failed job reruns in place (its W&B run removed; resumable artefacts such as ``last.ckpt`` stay).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import os
import random
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.types import RunMode
from hydra.utils import get_method, instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from udcg_ltr.annotate.annotator import annotate_records, missing_annotations, with_cache
from udcg_ltr.annotate.cache import AnnotationCache, default_cache_root
from udcg_ltr.annotate.grading import answer_matches
from udcg_ltr.annotate.llms import _SCORER_KEYS as LLM_KEYS
from udcg_ltr.annotate.llms import PRESETS as LLM_PRESETS
from udcg_ltr.data.lexical import records_idf
from udcg_ltr.data.padded import PaddedSlates, pad_records
from udcg_ltr.data.schema import DataError, QueryRecord, validate_record
from udcg_ltr.io import atomic_write_json, read_json_dict, sha256_file
from udcg_ltr.losses import get_loss
from udcg_ltr.paths import PROJECT_ROOT
from udcg_ltr.studies import get_study
from udcg_ltr.studies.common import config_from
from udcg_ltr.sweeps import RESULT_FILE
from udcg_ltr.tracking import RunLogger, make_logger

log = logging.getLogger("udcg_ltr")

#: Config keys that cannot change a job's results (where things are logged or cached, the sweep's name,
#: ``force``; the annotation cache is a memo of deterministic LLM calls; how often a resume checkpoint is written,
#: which tests/test_kill_training.py shows leaves the weights unchanged): left out of :func:`config_hash`.
RESULT_INDEPENDENT_KEYS = ("force", "sweep_name", "logger", "paths.output_dir", "paths.log_dir", "paths.root_dir",
                           "paths.cache_dir", "paths.annotation_cache_dir", "trainer.checkpoint_minutes")

#: Environment defaults of every job: offline (no hub downloads, W&B never asks for a key), quiet tokenizers.
OFFLINE_DEFAULTS = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline",
                    "WANDB_SILENT": "true", "TOKENIZERS_PARALLELISM": "false"}


class ConfigError(ValueError):
    """An invalid job configuration, found before any stage runs; the message lists every problem."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in self.problems))


def prepare_environment(cfg) -> None:
    """Offline by default (:data:`OFFLINE_DEFAULTS`), seeded, bounded CPU threads."""
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
    paths = cfg.get("paths", {})
    for key, variable in (("data_dir", "UDCG_LTR_DATA"), ("cache_dir", "UDCG_LTR_CACHE")):
        if paths.get(key):
            os.environ[variable] = str(paths[key])
    seed = int(cfg.get("seed", 0))
    random.seed(seed)
    np.random.seed(seed)
    import torch

    torch.manual_seed(seed)
    threads = (cfg.get("trainer") or {}).get("num_threads")
    if threads:
        torch.set_num_threads(int(threads))


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


def _path_values(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted key, value)`` of every string under ``node`` whose key is ``path`` or ends in ``_path`` / ``_file``."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, str) and (key == "path" or str(key).endswith(("_path", "_file"))):
                yield name, value
            else:
                yield from _path_values(value, name)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _path_values(value, f"{prefix}[{i}]")


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
    inputs = {key: _file_fingerprint(value) for key, value in _path_values(container.get("dataset") or {})}
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


def clear_run_dir(run_dir: Path, *, keep_resumable: bool, previous: Mapping[str, Any] | None = None) -> list[str]:
    """Remove what an earlier attempt left in ``run_dir``, returning the removed names: always ``job_result.json``
    and the attempt's W&B run (so a rerun logs exactly one run); with ``keep_resumable=False`` every artefact too,
    in a dedicated run folder only, but ``.hydra/`` and logs."""
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
                   if not (child.name == ".hydra" or (child.is_file() and child.suffix == ".log"))
                   and (not keep_resumable or child.name in (RESULT_FILE, "wandb"))]
    targets = [target for target in targets if target.exists() or target.is_symlink()]
    for target in targets:
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink()
    return [target.relative_to(run_dir).as_posix() for target in targets]


# ---- validation --------------------------------------------------------------------------------
def _check_number(problems: list[str], name: str, value: Any, *, kind=int, low=None, high=None, low_open=False) -> None:
    try:
        number = kind(value)
        if isinstance(value, bool) or not math.isfinite(number) or (kind is int and number != value):
            raise ValueError  # NaN passes every bound below (its comparisons are false), inf is no setting
    except (TypeError, ValueError, OverflowError):
        problems.append(f"{name} must be {'an integer' if kind is int else 'a finite number'}, got {value!r}")
        return
    if low is not None and (number <= low if low_open else number < low):
        problems.append(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    elif high is not None and number > high:
        problems.append(f"{name} must be <= {high}, got {value!r}")


def _check_choice(problems: list[str], name: str, value: Any, allowed: Sequence[Any]) -> None:
    """``value`` is one of ``allowed`` (None among them: the setting may stay unset)."""
    if value not in allowed:
        problems.append(f"{name} must be one of {[a for a in allowed if a is not None]}, got {value!r}")


def _check_match_rule(problems: list[str], name: str, rule: Any) -> None:
    try:
        answer_matches("a", ["a"], rule=str(rule))
    except ValueError as err:
        problems.append(f"{name}: {err}")


def _check_dataset(problems: list[str], dataset: Mapping[str, Any] | None) -> None:
    """The reader exists and accepts the configured arguments; every input file the config names exists."""
    if not dataset:
        problems.append("no dataset configured (dataset=<name>)")
        return
    reader = dataset.get("reader")
    if not isinstance(reader, Mapping) or "_target_" not in reader:
        problems.append("dataset.reader needs a _target_ (a function returning QueryRecords)")
    else:
        try:
            fn = get_method(reader["_target_"])
        except Exception as err:  # noqa: BLE001 - Hydra wraps import errors in several types
            problems.append(f"dataset.reader._target_ {reader['_target_']!r} cannot be imported: {err}")
        else:
            kwargs = {k: v for k, v in reader.items() if not str(k).startswith("_")}
            try:
                inspect.signature(fn).bind(**kwargs)
            except TypeError as err:
                problems.append(f"dataset.reader: {reader['_target_']} does not accept {sorted(kwargs)}: {err}")
    for key, value in _path_values(dataset, "dataset"):
        if not Path(value).exists():
            problems.append(f"{key}: {value} does not exist (data folder: paths.data_dir=... or UDCG_LTR_DATA)")
    _check_number(problems, "dataset.relevance_threshold", dataset.get("relevance_threshold", 1), low=0)


_HUB_ID = re.compile(r"^[\w.\-]+/[\w.\-]+$")


def _check_llm(problems: list[str], llm: Mapping[str, Any] | None) -> None:
    """Known keys and a model reference that can load: a preset, a local folder or a Hugging Face id."""
    if llm is None:
        return
    unknown = sorted(set(llm) - set(LLM_KEYS) - {"model", "_target_"})
    if unknown:
        problems.append(f"llm: unknown keys {unknown} (known: model, {', '.join(LLM_KEYS)})")
    model = llm.get("model")
    if not model:
        problems.append("llm.model is not set (a preset 'demo' / 'smollm2', a local folder or a Hugging Face id)")
        return
    model = str(model)
    if model in LLM_PRESETS or Path(model).exists():
        return
    if not _HUB_ID.match(model):
        problems.append(f"llm.model {model!r} is neither a preset ({sorted(LLM_PRESETS)}), an existing folder, "
                        f"nor a Hugging Face id of the form 'org/name'")
    elif os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        # Not an error: a job whose data already carries this LLM's annotations never loads it.
        log.warning("llm.model %r is a Hugging Face id and the hub is offline (HF_HUB_OFFLINE=1): the job fails "
                    "if it needs the LLM and the model is not in the local Hugging Face cache", model)


def _check_loss(problems: list[str], loss: Any) -> None:
    if loss is None:
        problems.append("the cross_encoder stage needs a loss (loss=<name>)")
        return
    kwargs = {} if isinstance(loss, str) else dict(loss)
    name = loss if isinstance(loss, str) else kwargs.pop("name", None)
    if not isinstance(loss, str) and not name:
        problems.append("loss.name is not set")
        return
    try:
        get_loss(str(name), **kwargs)
    except (KeyError, ValueError, TypeError) as err:
        problems.append(f"loss {name!r}: {err.args[0] if err.args else err}")


def _check_selector(problems: list[str], where: str, kind: Any, hparams: Mapping[str, Any], gamma: float) -> None:
    from udcg_ltr.select.io import make_selector
    from udcg_ltr.select.training import LEARNED_KINDS

    kwargs = dict(hparams or {})
    if kind in (*LEARNED_KINDS, "oracle"):
        kwargs.setdefault("gamma", gamma)
    try:
        make_selector(str(kind), **kwargs)
    except (KeyError, ValueError, TypeError) as err:
        problems.append(f"{where}: {err}")


#: evaluate.py's modes that run one of the paper's analyses, with the study's name.
STUDY_MODES = {"distractors": "distractors", "position": "position", "oracle_contexts": "oracle",
               "context_size": "context_size"}


def validate_config(cfg, *, stages: Sequence[str] | None = None, known_stages: Sequence[str] = (),
                    mode: str | None = None, known_modes: Sequence[str] = ()) -> None:
    """Check a train.py (``stages``) or evaluate.py (``mode``) configuration before any stage runs, cheaply
    (no data, no model loaded); raises :class:`ConfigError` listing every problem."""
    c = _resolved_config(cfg)
    problems: list[str] = []
    _check_number(problems, "k", c.get("k"), low=1)
    _check_number(problems, "gamma", c.get("gamma"), kind=float, low=0.0, high=1.0, low_open=True)
    _check_number(problems, "seed", c.get("seed", 0))
    _check_dataset(problems, c.get("dataset"))
    _check_llm(problems, c.get("llm"))
    gamma = float(c.get("gamma") or 1 / 3)
    if stages is not None:  # train.py
        _check_train_stages(problems, c, list(stages), known_stages, gamma)
    if mode is not None:  # evaluate.py
        _check_evaluate_mode(problems, c, mode, known_modes, gamma)
    if problems:
        raise ConfigError(problems)


def _resolved_config(cfg) -> dict:
    """The configuration as plain containers, every interpolation resolved; a missing or unresolvable value is a
    :class:`ConfigError`."""
    try:
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as err:
        key = getattr(err, "full_key", None) or str(err)
        raise ConfigError([f"{key} is required but not set (e.g. `{key}=...` on the command line)"]) from None
    except OmegaConfBaseException as err:
        raise ConfigError([f"the configuration does not resolve: {err}"]) from None


def _check_train_stages(problems: list[str], c: dict, stages: list[str], known_stages: Sequence[str],
                        gamma: float) -> None:
    """train.py: the stage list and the settings of each stage it names."""
    unknown = [s for s in stages if s not in known_stages]
    if unknown:
        problems.append(f"model.stages: unknown stages {unknown} (known: {list(known_stages)})")
    if not stages:
        problems.append("model.stages is empty")
    model, evaluation = c.get("model") or {}, c.get("evaluation") or {}
    _check_match_rule(problems, "evaluation.match_rule", evaluation.get("match_rule", "contains"))
    if "cross_encoder" in stages:
        _check_loss(problems, model.get("loss", c.get("loss")))
        pretrained = (model.get("cross_encoder") or {}).get("pretrained")
        if pretrained and not Path(str(pretrained)).exists() and not _HUB_ID.match(str(pretrained)):
            problems.append(f"model.cross_encoder.pretrained {pretrained!r} is neither a folder nor a "
                            f"Hugging Face id")
        _check_number(problems, "trainer.max_epochs", (c.get("trainer") or {}).get("max_epochs", 1), low=1)
        if (c.get("trainer") or {}).get("checkpoint_minutes") is not None:
            _check_number(problems, "trainer.checkpoint_minutes", c["trainer"]["checkpoint_minutes"], kind=float,
                          low=0.0)
    if "dynamic_k" in stages:
        dk = model.get("dynamic_k") or {}
        _check_selector(problems, "model.dynamic_k.selector", dk.get("selector"), dk.get("hparams") or {}, gamma)
        _check_number(problems, "model.dynamic_k.max_k", dk.get("max_k", 1), low=1)
    if "udcg_theta" in stages:
        ut = model.get("udcg_theta") or {}
        _check_number(problems, "model.udcg_theta.n_contexts", ut.get("n_contexts", 1), low=1)
        _check_choice(problems, "model.udcg_theta.variant", ut.get("variant"),
                      (None, "full", "relevance_only", "binary"))


def _check_evaluate_mode(problems: list[str], c: dict, mode: str, known_modes: Sequence[str], gamma: float) -> None:
    """evaluate.py: the mode and the settings it reads."""
    if mode not in known_modes:
        problems.append(f"mode: unknown mode {mode!r} (known: {sorted(known_modes)})")
    _check_match_rule(problems, "match_rule", c.get("match_rule", "contains"))
    sc = c.get("selectors") or {}
    if mode == "selectors":
        _check_selectors_mode(problems, sc, gamma)
    needs_reranker = mode == "reranker" or (mode == "selectors" and sc.get("scores") == "reranker")
    path = (c.get("reranker") or {}).get("path")
    if needs_reranker and not path:
        problems.append(f"mode={mode} needs a trained reranker: reranker.path=<run>/cross_encoder/model")
    elif path and not Path(str(path)).exists():
        problems.append(f"reranker.path: {path} does not exist (train.py saves <run>/cross_encoder/model)")
    if (c.get("reranker") or {}).get("max_questions") is not None:
        _check_number(problems, "reranker.max_questions", c["reranker"]["max_questions"], low=1)
    if mode == "correlation":
        _check_correlation_mode(problems, c.get("correlation") or {})
    if mode == "sweep_summary" and not c.get("sweep_dir"):
        problems.append("mode=sweep_summary needs sweep_dir=<multirun folder>")
    if mode in STUDY_MODES:  # with the defaults evaluate_job.mode_study fills in
        study = STUDY_MODES[mode]
        params = {"seed": c.get("seed", 0), "rule": c.get("match_rule", "contains"),
                  "relevance_threshold": (c.get("dataset") or {}).get("relevance_threshold", 1),
                  **((c.get("studies") or {}).get(study) or {})}
        try:
            config_from(params, get_study(study)[1])
        except (TypeError, ValueError) as err:
            problems.append(f"studies.{study}: {err}")


def _check_selectors_mode(problems: list[str], sc: dict, gamma: float) -> None:
    """evaluate.py mode=selectors: the ``selectors`` group."""
    _check_choice(problems, "selectors.scores", sc.get("scores"), ("reranker", "retriever"))
    for kind in sc.get("kinds") or []:
        _check_selector(problems, f"selectors.kinds ({kind})", kind, {}, gamma)
    if not sc.get("kinds"):
        problems.append("selectors.kinds is empty")
    _check_choice(problems, "selectors.grid", sc.get("grid"), ("full", "quick", "none"))
    _check_choice(problems, "selectors.refit", sc.get("refit", False), (True, False))
    budget = sc.get("budget") or {}
    unknown = sorted(set(budget) - {"batch_size", "max_epochs", "patience", "n_seeds"})
    if unknown:
        problems.append(f"selectors.budget: unknown keys {unknown}")
    for key, value in budget.items():
        _check_number(problems, f"selectors.budget.{key}", value, low=0 if key == "patience" else 1)
    for split, n in (sc.get("max_questions") or {}).items():
        if n is not None:
            _check_number(problems, f"selectors.max_questions.{split}", n, low=1)
    if sc.get("exclude_questions") and not Path(str(sc["exclude_questions"])).is_file():
        problems.append(f"selectors.exclude_questions: {sc['exclude_questions']} does not exist "
                        "(train.py writes <run>/cross_encoder/questions.json)")


def _check_correlation_mode(problems: list[str], cc: dict) -> None:
    """evaluate.py mode=correlation: the ``correlation`` group."""
    _check_number(problems, "correlation.n_contexts", cc.get("n_contexts", 1), low=1)
    for x in cc.get("k_sweep") or []:
        _check_number(problems, "correlation.k_sweep[]", x, low=1)
    _check_choice(problems, "correlation.sweep_mode", cc.get("sweep_mode"), ("auto", "resample", "truncate"))
    _check_choice(problems, "correlation.na_policy", cc.get("na_policy"), ("na", "zero"))
    if cc.get("C") != "cv":
        _check_number(problems, "correlation.C", cc.get("C"), kind=float, low=0.0, low_open=True)


# ---- logger, records ---------------------------------------------------------------------------
def open_logger(cfg, run_dir: Path, *, job_type: str) -> RunLogger:
    lcfg = OmegaConf.to_container(cfg.logger, resolve=True) if cfg.get("logger") else {"backend": "none"}
    backend = lcfg.pop("backend", "none")
    if cfg.get("tags") and "tags" in lcfg:  # an experiment recipe's own tags join the logger's
        lcfg["tags"] = [*lcfg["tags"], *[str(t) for t in cfg.tags]]
    multirun = is_multirun()
    if multirun and lcfg.get("group") is None:
        lcfg["group"] = f"{cfg.get('task_name', 'job')}/{cfg.get('sweep_name', 'default')}"
    return make_logger(backend, run_dir, config=OmegaConf.to_container(cfg, resolve=True), job_type=job_type,
                       name=run_dir.name if multirun else None, **lcfg)


def load_records(cfg) -> list[QueryRecord]:
    """Instantiate the dataset's reader (``dataset.reader._target_``) and validate what it returns."""
    try:
        records = instantiate(cfg.dataset.reader)
    except InstantiationException as err:  # Hydra wraps the reader's own error: give the DataError back
        if isinstance(err.__cause__, (DataError, FileNotFoundError)):
            raise err.__cause__ from None
        raise
    if not isinstance(records, list) or not all(isinstance(r, QueryRecord) for r in records):
        raise TypeError(f"dataset {cfg.dataset.name!r}: the reader must return a list of QueryRecord")
    if cfg.dataset.get("limit"):
        records = records[: int(cfg.dataset.limit)]
    for i, r in enumerate(records, start=1):
        validate_record(r, path=f"dataset {cfg.dataset.name}", line=i)
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
    """What a job's stages (train.py) or modes (evaluate.py) share; the records and the LLM load on first use,
    so a job whose data carries the annotations and that needs no end-to-end answers never loads the LLM."""

    def __init__(self, cfg: DictConfig, run_dir: Path, logger: RunLogger):
        self.cfg, self.run_dir, self.logger = cfg, run_dir, logger
        self.llm_name: str | None = cfg.llm.get("name") if cfg.get("llm") else None

    @cached_property
    def scorer(self):
        """The LLM (a ``_target_`` config) behind the persistent annotation cache (a CachedScorer)."""
        if self.cfg.get("llm") is None:
            raise ValueError("this job needs an LLM but none is configured (llm=...)")
        t0 = time.perf_counter()
        scorer = instantiate(self.cfg.llm, _convert_="all")
        cache_dir = Path(self.cfg.paths.get("annotation_cache_dir") or default_cache_root(scorer.name))
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
        records = load_records(self.cfg)
        log.info("dataset %s: %d queries, %d passages", self.cfg.dataset.name, len(records),
                 sum(len(r.passages) for r in records))
        return records

    @property
    def threshold(self) -> int:
        return int(self.cfg.dataset.get("relevance_threshold", 1))

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
                               + f" (dataset {self.cfg.dataset.name} has splits {present}; null: every record)"])

    @cached_property
    def idf(self):
        """Lexical corpus statistics over every record (:mod:`udcg_ltr.data.lexical`), shared by all splits."""
        return records_idf(self.records)

    def slates(self, records: Sequence[QueryRecord]) -> PaddedSlates:
        """Padded arrays of ``records`` (the selectors' input): one width and idf for every split."""
        return pad_records(records, llm=self.llm_name, width=max(len(r.passages) for r in self.records),
                           relevance_threshold=self.threshold, idf=self.idf)


# ---- the job -----------------------------------------------------------------------------------
def run_job(cfg, *, job_type: str, body: Callable[[Path, RunLogger], dict[str, float]],
            check: Callable[[], None] | None = None) -> dict[str, float]:
    """The life of a train.py / evaluate.py job (module docstring) around ``body(run_dir, logger)``. Under
    Hydra a :class:`DataError` or :class:`ConfigError` ends a single run with its message on stderr and exit
    status 1, without a traceback."""
    job_log = logging.getLogger(f"udcg_ltr.{cfg.get('task_name', 'job')}")
    run_dir = output_dir(cfg)
    try:
        try:
            chash = config_hash(cfg)
        except OmegaConfBaseException:
            chash = None  # unresolvable: validation says why
        force = bool(cfg.get("force", False))
        previous = read_json_dict(run_dir / RESULT_FILE)  # None when absent or torn: no state
        if previous is not None and previous.get("status") == "finished" and chash is not None \
                and previous.get("config_hash") == chash and not force:
            job_log.info("job already finished in %s: skipping (force=true reruns it)", run_dir)
            return previous["metrics"]
        try:
            if check is not None:
                check()
        except ConfigError as err:
            if previous is None:  # a new run folder says why it is empty; an earlier result stays untouched
                _mark(run_dir, "failed", chash, error=str(err))
            raise
        stale = previous is not None and (previous.get("config_hash") != chash or force)
        if previous is not None:
            removed = clear_run_dir(run_dir, keep_resumable=not stale, previous=previous)
            why = ("force=true" if force else "its config changed") if stale else f"last attempt {previous.get('status')}"
            job_log.warning("%s held a result of an earlier attempt (%s): rerunning; removed %s", run_dir, why, removed)
        _mark(run_dir, "running", chash)
        prepare_environment(cfg)
        logger = open_logger(cfg, run_dir, job_type=job_type)
        wandb_run = {"wandb_run": logger.run_folder} if getattr(logger, "run_folder", None) else {}
        if wandb_run:  # a rerun removes exactly this W&B run of the attempt
            _mark(run_dir, "running", chash, **wandb_run)
        try:
            metrics = body(run_dir, logger)
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
