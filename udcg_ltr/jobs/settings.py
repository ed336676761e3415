"""Typed settings of train.py and evaluate.py: one dataclass per config node the jobs read, each checking its fields.

A job converts its composed config once, at start (:func:`job_settings`): the config is resolved, each node is cut
to its class's fields (a closed node refuses unknown keys; an open one, such as ``trainer``, keeps its other keys for
the ``_target_`` it feeds), merged onto the class's structured schema (OmegaConf refuses a value of the wrong type)
and built with :func:`omegaconf.OmegaConf.to_object`, which runs each class's ``__post_init__`` checks. The problems
of every node are raised together as one :class:`ConfigError`, before any stage runs, each naming the key as spelled
on the command line and the bad value; the stages then read typed attributes (``settings.model.cross_encoder.lr``).
Nodes instantiated as configured (``dataset.reader``, ``llm``, ``trainer``, ``callbacks``, ``logger``) are also
passed on as the DictConfig they are; :func:`udcg_ltr.jobs.common.config_hash` hashes that config, not these objects.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar, get_args, get_type_hints

from hydra.utils import get_method
from omegaconf import MISSING, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException, ValidationError

from udcg_ltr.annotate.grading import answer_matches
from udcg_ltr.annotate.llms import PRESETS as LLM_PRESETS
from udcg_ltr.losses import get_loss
from udcg_ltr.studies import get_study
from udcg_ltr.studies.common import config_from

log = logging.getLogger("udcg_ltr")

#: train.py's stages (``model.stages``), in the order the main job runs them.
STAGES = ("annotate", "udcg_theta", "cross_encoder", "dynamic_k", "evaluate")
#: evaluate.py's modes that run one of the paper's analyses, with the study's name.
STUDY_MODES = {"distractors": "distractors", "position": "position", "oracle_contexts": "oracle",
               "context_size": "context_size"}
#: evaluate.py's modes (``mode``; one file each under conf/mode/).
MODES = ("metrics", "reranker", "selectors", "correlation", "sweep_summary", *STUDY_MODES)
_HUB_ID = re.compile(r"^[\w.\-]+/[\w.\-]+$")


class ConfigError(ValueError):
    """An invalid job configuration, found before any stage runs; the message lists every problem."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in self.problems))


# ---- checks ------------------------------------------------------------------------------------
_GATHERED: ContextVar[list[str] | None] = ContextVar("udcg_ltr_config_problems", default=None)


def report(problems: Sequence[str]) -> None:
    """A node's problems: added to those of the other nodes while :func:`job_settings` converts a config (so that
    all are reported at once), raised as a :class:`ConfigError` when a settings object is built directly."""
    if not problems:
        return
    gathered = _GATHERED.get()
    if gathered is None:
        raise ConfigError(problems)
    gathered.extend(problems)


def number(name: str, value: Any, *, kind: type = int, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> list[str]:
    """The problem with a number setting (none: ``[]``): not an integer / finite number, or out of bounds."""
    try:
        converted = kind(value)
        if isinstance(value, bool) or not math.isfinite(converted) or (kind is int and converted != value):
            raise ValueError  # NaN passes every bound below (its comparisons are false), inf is no setting
    except (TypeError, ValueError, OverflowError):
        return [f"{name} must be {'an integer' if kind is int else 'a finite number'}, got {value!r}"]
    if low is not None and (converted <= low if low_open else converted < low):
        return [f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}"]
    if high is not None and converted > high:
        return [f"{name} must be <= {high}, got {value!r}"]
    return []


def choice(name: str, value: Any, allowed: Sequence[Any]) -> list[str]:
    """The problem with a setting that is not one of ``allowed`` (None among them: it may stay unset)."""
    return [] if value in allowed else [f"{name} must be one of {[a for a in allowed if a is not None]}, got {value!r}"]


def match_rule(name: str, rule: str) -> list[str]:
    """The problem with an answer-grading rule (:func:`udcg_ltr.annotate.grading.answer_matches`)."""
    try:
        answer_matches("a", ["a"], rule=rule)
    except ValueError as err:
        return [f"{name}: {err}"]
    return []


def selector(where: str, kind: str, hparams: Mapping[str, Any]) -> list[str]:
    """The problem with a selector kind and its arguments (the run's gamma is checked at the top level)."""
    from udcg_ltr.select.io import make_selector

    try:
        make_selector(kind, **hparams)
    except (KeyError, ValueError, TypeError) as err:
        return [f"{where}: {err}"]
    return []


def path_values(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted key, value)`` of every string under ``node`` whose key is ``path`` or ends in ``_path`` / ``_file``."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, str) and (key == "path" or str(key).endswith(("_path", "_file"))):
                yield name, value
            else:
                yield from path_values(value, name)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from path_values(value, f"{prefix}[{i}]")


# ---- every job ---------------------------------------------------------------------------------
@dataclass
class DatasetSettings:
    """conf/dataset: the reader (a ``_target_`` returning QueryRecords, instantiated as configured), what the jobs
    read of the data, and the reader-specific keys its arguments interpolate (``dataset.path=...``)."""

    name: str = MISSING
    reader: dict[str, Any] = MISSING
    relevance_threshold: int = 1
    has_answers: bool = False
    contexts_path: str | None = None  # ready-made end-to-end runs
    limit: int | None = None  # the first N questions only
    annotated_llm: str | None = None
    path: str | None = None
    id: str | None = None
    split: str | None = None
    run_path: str | None = None
    top_k: int | None = None
    query_field: str | None = None

    def __post_init__(self) -> None:
        """The reader exists and accepts the configured arguments; every input file the config names exists."""
        problems = self._reader_problems()
        problems += [f"{key}: {value} does not exist (data folder: paths.data_dir=... or UDCG_LTR_DATA)"
                     for key, value in path_values(vars(self), "dataset") if not Path(value).exists()]
        problems += number("dataset.relevance_threshold", self.relevance_threshold, low=0)
        report(problems)

    def _reader_problems(self) -> list[str]:
        if "_target_" not in self.reader:
            return ["dataset.reader needs a _target_ (a function returning QueryRecords)"]
        target = self.reader["_target_"]
        try:
            fn = get_method(target)
        except Exception as err:  # noqa: BLE001 - Hydra wraps import errors in several types
            return [f"dataset.reader._target_ {target!r} cannot be imported: {err}"]
        kwargs = {k: v for k, v in self.reader.items() if not str(k).startswith("_")}
        try:
            inspect.signature(fn).bind(**kwargs)
        except TypeError as err:
            return [f"dataset.reader: {target} does not accept {sorted(kwargs)}: {err}"]
        return []


@dataclass
class LLMSettings:
    """conf/llm: instantiated as configured (``_target_``: :func:`udcg_ltr.annotate.llms.load_llm`, whose keys these
    are); the jobs read its ``name`` (the annotations' key)."""

    _target_: str = "udcg_ltr.annotate.llms.load_llm"
    model: str | None = None  # a preset ('demo', 'smollm2'), a local folder or a Hugging Face id
    name: str | None = None
    gguf_file: str | None = None
    dtype: str | None = None
    device: str | None = None
    batch_size: int | None = None
    max_batch_tokens: int | None = None
    max_new_tokens: int | None = None
    prompt: dict[str, Any] | None = None
    num_threads: int | None = None
    prefix_cache: bool | None = None
    quantize: str | None = None
    exact_tail: int | None = None
    trust_remote_code: bool | None = None
    progress: bool | None = None

    def __post_init__(self) -> None:
        """A model reference that can load: a preset, a local folder or a Hugging Face id."""
        if not self.model:
            report(["llm.model is not set (a preset 'demo' / 'smollm2', a local folder or a Hugging Face id)"])
        elif self.model not in LLM_PRESETS and not Path(self.model).exists():
            if not _HUB_ID.match(self.model):
                report([f"llm.model {self.model!r} is neither a preset ({sorted(LLM_PRESETS)}), an existing folder, "
                        f"nor a Hugging Face id of the form 'org/name'"])
            elif os.getenv("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
                # Not an error: a job whose data already carries this LLM's annotations never loads it.
                log.warning("llm.model %r is a Hugging Face id and the hub is offline (HF_HUB_OFFLINE=1): the job "
                            "fails if it needs the LLM and the model is not in the local Hugging Face cache",
                            self.model)


@dataclass
class PathSettings:
    """conf/paths: where things live (its other keys feed interpolations)."""

    open_node: ClassVar[bool] = True
    data_dir: str | None = None
    cache_dir: str | None = None
    annotation_cache_dir: str | None = None  # null: <cache_dir>/annotations/<llm name>
    output_dir: str | None = None


@dataclass
class JobSettings:
    """What every job reads at the top level of its config (its other top-level nodes are passed on as they are)."""

    open_node: ClassVar[bool] = True
    seed: int = 0
    k: int = 5  # context size the metrics and the objectives look at
    gamma: float = 1 / 3
    force: bool = False  # rerun a finished job
    task_name: str = "job"
    sweep_name: str = "default"
    tags: list[str] = field(default_factory=list)  # an experiment recipe's own logger tags
    splits: Any = field(default_factory=lambda: ["test"])  # evaluated: a split, a list of splits, or null: every record
    match_rule: str = "contains"  # answer grading (udcg_ltr.annotate.grading)
    end_to_end: bool = True  # the LLM answers the contexts where the job can (needs gold answers)
    paths: PathSettings = field(default_factory=PathSettings)
    dataset: DatasetSettings | None = None
    llm: LLMSettings | None = None

    def __post_init__(self) -> None:
        problems = number("k", self.k, low=1)
        problems += number("gamma", self.gamma, kind=float, low=0.0, high=1.0, low_open=True)
        problems += match_rule("match_rule", self.match_rule)
        if self.dataset is None:
            problems.append("no dataset configured (dataset=<name>)")
        report(problems)

    @property
    def llm_name(self) -> str | None:
        """The name the LLM's annotations are stored under (None without an LLM)."""
        return self.llm.name if self.llm is not None else None

    @property
    def num_threads(self) -> int | None:
        """torch's CPU threads (None: its default)."""
        return None


# ---- train.py ----------------------------------------------------------------------------------
@dataclass
class AnnotateSettings:
    """train.py's ``annotate`` stage."""

    answers: bool = True  # also the greedy single-passage answer (eRAG labels)
    batch_size: int | None = None


@dataclass
class CrossEncoderSettings:
    """conf/model/cross_encoder.yaml: the reranker's data, optimiser and scoring."""

    pretrained: str | None = None  # null: the packaged all-MiniLM-L6-v2
    train_split: str = "train"
    val_split: str = "val"
    train_questions: int | None = None  # a seeded subsample; null: every question
    train_subsample_seed: int = 1234
    val_questions: int | None = None
    val_subsample_seed: int = 4321
    batch_size: int = 4
    eval_batch_size: int = 64
    eval_precision: Any = None  # null: trainer.precision
    lr: float = 1.0e-4
    weight_decay: float = 0.01
    warmup: float = 0.1
    max_length: int = 192
    retriever_fusion: bool = False

    def __post_init__(self) -> None:
        if self.pretrained and not Path(self.pretrained).exists() and not _HUB_ID.match(self.pretrained):
            report([f"model.cross_encoder.pretrained {self.pretrained!r} is neither a folder nor a Hugging Face id"])


@dataclass
class UdcgThetaSettings:
    """conf/model/udcg_theta.yaml: the contexts UDCG_theta is fitted on and the fit."""

    fit_splits: list[str] = field(default_factory=lambda: ["train", "val"])
    n_contexts: int = 3
    top_n: int = 25
    variant: str = "full"
    C: float = 1.0

    def __post_init__(self) -> None:
        report(number("model.udcg_theta.n_contexts", self.n_contexts, low=1)
               + choice("model.udcg_theta.variant", self.variant, ("full", "relevance_only", "binary")))


@dataclass
class DynamicKSettings:
    """conf/model/dynamic_k.yaml: the selector and the splits it learns from."""

    selector: str = "gate"
    fit_split: str = "val"
    prior_split: str = "train"  # calibrated_utility's ranker-free prior
    max_k: int = 5
    hparams: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        report(selector("model.dynamic_k.selector", self.selector, self.hparams)
               + number("model.dynamic_k.max_k", self.max_k, low=1))


@dataclass
class ModelSettings:
    """conf/model: the stages train.py runs and the settings of each model family (of the stages it runs only: the
    main job's families share one file, and a family whose stage does not run is neither read nor checked)."""

    #: The nodes of the stages that have settings.
    STAGE_NODES: ClassVar[tuple[str, ...]] = ("cross_encoder", "udcg_theta", "dynamic_k")

    name: str = MISSING
    stages: list[str] = MISSING
    cross_encoder: CrossEncoderSettings | None = None
    udcg_theta: UdcgThetaSettings | None = None
    dynamic_k: DynamicKSettings | None = None

    def __post_init__(self) -> None:
        unknown = [s for s in self.stages if s not in STAGES]
        problems = [f"model.stages: unknown stages {unknown} (known: {list(STAGES)})"] if unknown else []
        if not self.stages:
            problems.append("model.stages is empty")
        problems += [f"model.stages names {stage} but model.{stage} is not set" for stage in self.STAGE_NODES
                     if stage in self.stages and getattr(self, stage) is None]
        report(problems)

    @classmethod
    def run_part(cls, node: Mapping[str, Any]) -> dict[str, Any]:
        """``node`` without the nodes of the stages it does not run (called on the config before conversion)."""
        run = set(node["stages"] or ()) if "stages" in node else set()
        return {key: value for key, value in node.items() if key not in cls.STAGE_NODES or key in run}


@dataclass
class TrainerSettings:
    """conf/trainer (a ``pytorch_lightning.Trainer`` node, passed on as configured): what the jobs read of it."""

    open_node: ClassVar[bool] = True
    accelerator: str = "cpu"
    precision: Any = "auto"
    max_epochs: int = 1
    num_threads: int | None = None  # torch.set_num_threads
    checkpoint_minutes: float | None = None

    def __post_init__(self) -> None:
        problems = number("trainer.max_epochs", self.max_epochs, low=1)
        if self.checkpoint_minutes is not None:
            problems += number("trainer.checkpoint_minutes", self.checkpoint_minutes, kind=float, low=0.0)
        report(problems)


@dataclass
class LoaderSettings:
    """conf/loader: the cross-encoder's DataLoaders (``fit_reranker(loader=...)``); None: chosen for the accelerator
    (:data:`udcg_ltr.models.training.LOADER_DEFAULTS`)."""

    num_workers: int | None = None
    pin_memory: bool | None = None
    buckets: int | None = None  # length buckets per batch (udcg_ltr.models.datamodule.SlateCollator)

    def __post_init__(self) -> None:
        problems = [] if self.num_workers is None else number("loader.num_workers", self.num_workers, low=0)
        if self.buckets is not None:
            problems += number("loader.buckets", self.buckets, low=1)
        report(problems)


@dataclass
class TrainSettings(JobSettings):
    """conf/train.yaml."""

    optimized_metric: str | None = None
    loss: Any = None  # conf/loss: a name, or a node with ``name`` and the loss's arguments
    annotate: AnnotateSettings = field(default_factory=AnnotateSettings)
    model: ModelSettings = MISSING
    trainer: TrainerSettings = field(default_factory=TrainerSettings)
    loader: LoaderSettings = field(default_factory=LoaderSettings)

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.model, ModelSettings) and "cross_encoder" in self.model.stages:
            report(self._loss_problems())

    def _loss_problems(self) -> list[str]:
        if self.loss is None:
            return ["the cross_encoder stage needs a loss (loss=<name>)"]
        name, kwargs = self.loss_spec()
        if not name:
            return ["loss.name is not set"]
        try:
            get_loss(name, **kwargs)
        except (KeyError, ValueError, TypeError) as err:
            return [f"loss {name!r}: {err.args[0] if err.args else err}"]
        return []

    def loss_spec(self) -> tuple[str | None, dict[str, Any]]:
        """``(name, arguments)`` of the loss."""
        if isinstance(self.loss, str):
            return self.loss, {}
        kwargs = dict(self.loss)
        return kwargs.pop("name", None), kwargs

    @property
    def num_threads(self) -> int | None:
        """``trainer.num_threads``."""
        return self.trainer.num_threads


# ---- evaluate.py -------------------------------------------------------------------------------
@dataclass
class RerankerSettings:
    """conf/mode/reranker.yaml: a saved reranker and how it scores."""

    path: str | None = None  # train.py writes <run>/cross_encoder/model
    batch_size: int = 64
    max_length: int = 256
    max_questions: int | None = None  # a seeded draw of this many questions of the splits
    scores_cache: str | None = None  # a JSON of the model's scores by question id, reused across evaluations

    def __post_init__(self) -> None:
        problems = []
        if self.path and not Path(self.path).exists():
            problems.append(f"reranker.path: {self.path} does not exist (train.py saves <run>/cross_encoder/model)")
        if self.max_questions is not None:
            problems += number("reranker.max_questions", self.max_questions, low=1)
        report(problems)


@dataclass
class SelectorsSettings:
    """conf/mode/selectors.yaml: the dynamic-k study's selectors, the order they cut and the learned grid."""

    scores: str = "reranker"  # reranker | retriever
    kinds: list[str] = field(default_factory=list)
    knobs: dict[str, Any] = field(default_factory=dict)
    grid: str = "full"  # full | quick | none
    probes: bool = True
    budget: dict[str, Any] = field(default_factory=dict)
    refit: bool = False
    exclude_questions: str | None = None  # a JSON {"train": [qids], "val": [qids]}
    max_questions: dict[str, int | None] = field(default_factory=lambda: {"train": None, "val": None})

    def __post_init__(self) -> None:
        problems = choice("selectors.scores", self.scores, ("reranker", "retriever"))
        for kind in self.kinds:
            problems += selector(f"selectors.kinds ({kind})", kind, {})
        if not self.kinds:
            problems.append("selectors.kinds is empty")
        problems += choice("selectors.grid", self.grid, ("full", "quick", "none"))
        problems += self._budget_problems()
        for split, n in self.max_questions.items():
            if n is not None:
                problems += number(f"selectors.max_questions.{split}", n, low=1)
        if self.exclude_questions and not Path(self.exclude_questions).is_file():
            problems.append(f"selectors.exclude_questions: {self.exclude_questions} does not exist "
                            "(train.py writes <run>/cross_encoder/questions.json)")
        report(problems)

    def _budget_problems(self) -> list[str]:
        unknown = sorted(set(self.budget) - {"batch_size", "max_epochs", "patience", "n_seeds"})
        problems = [f"selectors.budget: unknown keys {unknown}"] if unknown else []
        for key, value in self.budget.items():
            problems += number(f"selectors.budget.{key}", value, low=0 if key == "patience" else 1)
        return problems


@dataclass
class CorrelationSettings:
    """conf/mode/correlation.yaml: the sampled contexts, the fit and the sweep of the correlation study."""

    n_contexts: int = 10
    top_n: int = 25
    positive_fraction: float = 0.5
    fit_splits: list[str] = field(default_factory=lambda: ["train", "val"])
    report_split: str = "test"
    C: Any = 1.0  # a positive number, or "cv"
    n_bootstrap: int = 1000
    k_sweep: list[int] | None = None
    sweep_mode: str = "auto"  # auto | resample | truncate
    na_policy: str = "na"
    limit_queries: int | None = None
    answer_prob: bool = False

    def __post_init__(self) -> None:
        problems = number("correlation.n_contexts", self.n_contexts, low=1)
        for x in self.k_sweep or []:
            problems += number("correlation.k_sweep[]", x, low=1)
        problems += choice("correlation.sweep_mode", self.sweep_mode, ("auto", "resample", "truncate"))
        problems += choice("correlation.na_policy", self.na_policy, ("na", "zero"))
        if self.C != "cv":
            problems += number("correlation.C", self.C, kind=float, low=0.0, low_open=True)
        report(problems)
        if self.C != "cv" and not problems:
            self.C = float(self.C)  # the one setting OmegaConf cannot type (a number or "cv")


@dataclass
class EvaluateSettings(JobSettings):
    """conf/evaluate.yaml and the node of its mode (conf/mode/<mode>.yaml)."""

    mode: str = MISSING
    ties: str = "stable"  # rank ties of mode=reranker: stable | trec
    reranker: RerankerSettings = field(default_factory=RerankerSettings)
    selectors: SelectorsSettings | None = None
    correlation: CorrelationSettings | None = None
    studies: dict[str, dict[str, Any]] = field(default_factory=dict)
    sweep_dir: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        problems = [] if self.mode in MODES else [f"mode: unknown mode {self.mode!r} (known: {sorted(MODES)})"]
        problems += choice("ties", self.ties, ("stable", "trec"))
        scored = self.mode == "reranker" or (self.mode == "selectors" and self.selectors is not None
                                             and self.selectors.scores == "reranker")
        if scored and not self.reranker.path:
            problems.append(f"mode={self.mode} needs a trained reranker: reranker.path=<run>/cross_encoder/model")
        if self.mode == "sweep_summary" and not self.sweep_dir:
            problems.append("mode=sweep_summary needs sweep_dir=<multirun folder>")
        if self.mode in STUDY_MODES:
            problems += self._study_problems(STUDY_MODES[self.mode])
        report(problems)

    def study_params(self, study: str) -> dict[str, Any]:
        """The parameters of ``study``: ``studies.<study>`` over the job's seed, match rule and relevance threshold."""
        threshold = self.dataset.relevance_threshold if self.dataset is not None else 1
        return {"seed": self.seed, "rule": self.match_rule, "relevance_threshold": threshold,
                **self.studies.get(study, {})}

    def _study_problems(self, study: str) -> list[str]:
        try:
            config_from(self.study_params(study), get_study(study)[1])
        except (TypeError, ValueError) as err:
            return [f"studies.{study}: {err}"]
        return []


# ---- the grid ---------------------------------------------------------------------------------
@dataclass
class GridSettings:
    """conf/grid.yaml (:mod:`udcg_ltr.jobs.grid`): the statistics of a cell (the cell itself: ``grid``, a
    :class:`~udcg_ltr.studies.grid.CellSpec` ``_target_`` instantiated as configured)."""

    open_node: ClassVar[bool] = True
    n_bootstrap: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        report(number("n_bootstrap", self.n_bootstrap, low=1))


# ---- conversion --------------------------------------------------------------------------------
S = TypeVar("S")


def job_settings(cls: type[S], cfg) -> S:
    """``cfg`` (a DictConfig or a mapping) as a ``cls`` (module docstring); a :class:`ConfigError` lists every problem."""
    container = _resolved(cfg)
    gathered: list[str] = []
    token = _GATHERED.set(gathered)
    try:
        shaped = _shaped(cls, container, "")
        settings = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), shaped))
    except ValidationError as err:
        gathered.append(_type_problem(err))
    except MissingMandatoryValue as err:
        gathered.append(f"{err.full_key} is required but not set (e.g. `{err.full_key}=...` on the command line)")
    finally:
        _GATHERED.reset(token)
    if gathered:
        raise ConfigError(gathered)
    return settings


def _resolved(cfg) -> dict:
    """The configuration as plain containers, every interpolation resolved; a missing or unresolvable value is a
    :class:`ConfigError`."""
    try:
        return OmegaConf.to_container(OmegaConf.create(cfg), resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as err:
        key = getattr(err, "full_key", None) or str(err)
        raise ConfigError([f"{key} is required but not set (e.g. `{key}=...` on the command line)"]) from None
    except OmegaConfBaseException as err:
        raise ConfigError([f"the configuration does not resolve: {err}"]) from None


def _settings_class(hint: Any) -> type | None:
    """The settings class a field holds (``Cls`` or ``Cls | None``), None for a plain value."""
    return next((t for t in (hint, *get_args(hint)) if is_dataclass(t)), None)


def _shaped(cls: type, node: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``node`` cut to ``cls``'s fields, recursively (and to the part a class's ``run_part`` keeps); the unknown keys
    of a closed node are reported."""
    node = cls.run_part(node) if hasattr(cls, "run_part") else node
    hints, names = get_type_hints(cls), [f.name for f in fields(cls)]
    unknown = sorted(set(node) - set(names))
    if unknown and not getattr(cls, "open_node", False):
        report([f"{key}: unknown keys {unknown} (known: {', '.join(names)})"])
    shaped = {}
    for name in (n for n in names if n in node):
        inner, value = _settings_class(hints[name]), node[name]
        shaped[name] = _shaped(inner, value, f"{key}.{name}".lstrip(".")) if inner and isinstance(value, Mapping) \
            else value
    return shaped


_EXPECTED = {int: "an integer", float: "a finite number", bool: "one of [True, False]", str: "a string"}


def _type_problem(err: ValidationError) -> str:
    """A value of the wrong type, named by its key: ``selectors.refit must be one of [True, False], got 'maybe'``."""
    hint = get_type_hints(err.object_type).get(err.key) if is_dataclass(err.object_type) else None
    expected = next((_EXPECTED[t] for t in (hint, *get_args(hint)) if t in _EXPECTED), None)
    if expected is None:
        return f"{err.full_key}: {err.msg.splitlines()[0]}"
    return f"{err.full_key} must be {expected}, got {err.value!r}"
