"""Every config composes: each option of each config group and each experiment recipe, for each entry point.

In the style of ashleve/lightning-hydra-template's ``tests/test_configs.py``, one step further: every file
``conf/<group>/<option>.yaml`` (nested groups such as ``hydra/launcher`` included) is composed into each primary
config whose defaults list declares the group (``train.yaml``, ``evaluate.yaml``, ``annotate.yaml``), and every
recipe ``conf/experiment/<name>.yaml`` into the entry point its usage line names. Each composed config is

1. resolved (every interpolation, the ``hydra`` node included, with the Hydra runtime values a run would set);
2. checked for ``_target_`` s that import and accept the config's arguments, and (the project's own) whose every
   parameter has a key but the documented :data:`UNSET_PARAMETERS`; the cheap, offline ones are
   instantiated (the demo world reader, the loss, the Lightning trainer and callbacks as the train job builds them),
   never an LLM or a reader of shared data; for third-party ones (Optuna's sampler, Hydra's launcher and sweeper
   plugins) the package must be installed;
3. converted to the job's typed settings (:func:`udcg_ltr.jobs.settings.job_settings`, which checks every value)
   as train.py / evaluate.py would; a config with a mandatory ``???`` value must fail naming that value.

A renamed option, a broken interpolation or a recipe that no longer validates cannot hide in a README.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from functools import cache
from pathlib import Path

import pytest
import yaml
from omegaconf import DictConfig, OmegaConf, open_dict

from udcg_ltr.jobs.common import ConfigError
from udcg_ltr.jobs.evaluate_job import MODES
from udcg_ltr.jobs.settings import EvaluateSettings, TrainSettings, job_settings
from udcg_ltr.losses import get_loss, with_spec
from udcg_ltr.paths import PROJECT_ROOT

CONF = PROJECT_ROOT / "conf"
TASKS = ("train", "evaluate", "annotate")
#: _target_ s instantiated for real: cheap, offline and deterministic (the seeded demo world).
CHEAP_TARGETS = ("udcg_ltr.data.demo_world.generate_demo_world",)
#: Groups composed into each primary config besides the ones train.yaml and evaluate.yaml declare. The annotation
#: CLI declares llm and paths too, but those options are already composed (identically) into train and evaluate.
ANNOTATE_GROUPS = ("dataset",)
#: Groups that change what a job runs: each option is composed on its own (see :func:`cases`).
ONE_AT_A_TIME = ("model", "loss", "hparams_search", "mode")
_INSTANTIATED: set[tuple[str, str]] = set()
#: Parameters of the project's own ``_target_`` s that their config files leave out on purpose: the callee's default
#: is the setting (``+dataset.reader.<name>=...`` sets one). Written into a file with a non-null default, such a key
#: would change the config hash of every finished job of that file (udcg_ltr.jobs.common.config_hash), and those
#: jobs would rerun. Third-party targets (Lightning's Trainer and callbacks, Optuna, Hydra plugins) are configured
#: by exception: their files name what the project changes.
UNSET_PARAMETERS = {
    "udcg_ltr.data.demo_world.generate_demo_world": {"family_size", "score_noise"},
    "udcg_ltr.data.jsonl.read_records": {"validate", "allow_empty"},
    "udcg_ltr.data.readers.dpr.read_nq_pool": {"limit"},  # dataset.limit cuts the records the jobs read
    "udcg_ltr.data.readers.squad.read_squad": {"pool", "split_ratios", "split_seed", "article_splits", "articles"},
}


def groups() -> dict[str, list[str]]:
    """``{group: options}`` for every folder under conf/ holding option files (``hydra/launcher`` included)."""
    found = {}
    for folder in sorted(p for p in CONF.rglob("*") if p.is_dir()):
        options = sorted(f.stem for f in folder.glob("*.yaml"))
        if options:
            found[folder.relative_to(CONF).as_posix()] = options
    return found


@cache
def declared_groups(task: str) -> frozenset[str]:
    """Groups the primary config's defaults list names (Hydra's own ``hydra/...`` groups are always there)."""
    entries = yaml.safe_load((CONF / f"{task}.yaml").read_text(encoding="utf-8")).get("defaults") or []
    names = {next(iter(e)).removeprefix("override ").strip("/") for e in entries if isinstance(e, dict)}
    return frozenset(names | {g for g in groups() if g.startswith("hydra/")})


def recipe_task(recipe: str) -> str:
    """The entry point a recipe's usage comment names (``python train.py ...`` or ``python evaluate.py ...``)."""
    text = (CONF / "experiment" / f"{recipe}.yaml").read_text(encoding="utf-8")
    tasks = set(re.findall(r"python (train|evaluate)\.py", text))
    assert len(tasks) == 1, f"conf/experiment/{recipe}.yaml must name one entry point in its usage line, found {tasks}"
    return tasks.pop()


def cases() -> list[tuple[str, tuple[str, ...]]]:
    """``(task, overrides)``: every option of every group the task declares, and every recipe.

    Options of the groups in :data:`ONE_AT_A_TIME` (and recipes) are composed alone: they change what the job
    runs. The others (dataset, llm, logger, trainer, paths, hydra, launchers) only parameterise it, so they are
    composed side by side, the i-th option of each in the i-th config (cycling through shorter groups):
    every option is composed, resolved and validated, in a third of the compositions (the test stays well under
    a minute on two cores).
    """
    out = []
    for group, options in groups().items():
        if group == "experiment":
            out.extend((recipe_task(option), (f"experiment={option}",)) for option in options)
    for task in TASKS:
        mine = {g: o for g, o in groups().items() if g in declared_groups(task) and g != "experiment"
                and (task != "annotate" or g in ANNOTATE_GROUPS)}
        for group in sorted(set(mine) & set(ONE_AT_A_TIME)):
            out.extend((task, (f"{group}={option}",)) for option in mine.pop(group))
        n = max((len(o) for o in mine.values()), default=0)
        out.extend((task, tuple(f"{g}={o[i % len(o)]}" for g, o in sorted(mine.items()))) for i in range(n))
    return out


@pytest.fixture()
def hydra_runtime(tmp_path):
    """Compose like a run: the hydra node included and the runtime values set; the global HydraConfig is cleared
    afterwards (output_dir() would otherwise send later tests' runs to this folder)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    def make(task: str, overrides: list[str]) -> DictConfig:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(config_name=task, overrides=[f"paths.root_dir={PROJECT_ROOT}", *overrides],
                          return_hydra_config=True)
        with open_dict(cfg):  # what Hydra sets when the job starts (run folder, job number in a sweep)
            cfg.hydra.runtime.output_dir = str(tmp_path / "run")
            cfg.hydra.job.num = 0
        HydraConfig.instance().set_config(cfg)
        return cfg

    yield make
    HydraConfig.instance().cfg = None


def targets(node, where: str = "") -> list[tuple[str, dict]]:
    """Every ``(dotted path, node)`` of a resolved config that holds a ``_target_``."""
    found = []
    if isinstance(node, dict):
        if "_target_" in node:
            found.append((where, node))
        for key, value in node.items():
            found.extend(targets(value, f"{where}.{key}" if where else str(key)))
    return found


def check_targets(resolved: dict) -> None:
    from hydra.utils import get_method, instantiate

    for where, node in targets(resolved):
        target = str(node["_target_"])
        if not target.startswith("udcg_ltr."):
            # Third-party (Optuna's sampler, Hydra's launcher and sweeper plugins): a Hydra run instantiates them;
            # here the package must exist (importing Optuna alone would take seconds per config).
            package = ".".join(target.split(".")[: 2 if target.startswith("hydra_plugins.") else 1])
            assert importlib.util.find_spec(package) is not None, f"{where}._target_ {target}: {package} is not installed"
            continue
        try:
            fn = get_method(target)
        except Exception as err:  # noqa: BLE001 (the message names the target)
            raise AssertionError(f"{where}._target_ {target!r} does not import: {err}") from err
        kwargs = {k: v for k, v in node.items() if not k.startswith("_")}
        params = inspect.signature(fn).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            unknown = sorted(set(kwargs) - set(params))
            assert not unknown, f"{where}: {target} does not accept {unknown}"
        named = {name for name, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        unset = sorted(named - set(kwargs) - UNSET_PARAMETERS.get(target, set()))
        assert not unset, f"{where}: {target}'s parameters {unset} have no key (add them, or to UNSET_PARAMETERS)"
        key = (target, repr(sorted(kwargs.items())))
        if target in CHEAP_TARGETS and "???" not in kwargs.values() and key not in _INSTANTIATED:
            assert instantiate(node) is not None, where
            _INSTANTIATED.add(key)  # the same arguments build the same object: once per session is enough


def build_loss(cfg: DictConfig):
    """The loss as the train job builds it (a ``_target_`` node, or a registry name filled with the run's k, gamma)."""
    from hydra.utils import instantiate

    node = cfg.get("loss")
    if isinstance(node, DictConfig) and "_target_" in node:
        return instantiate(node)
    kwargs = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else {"name": node}
    name = kwargs.pop("name")
    return get_loss(name, **with_spec(name, kwargs, k=int(cfg.k), gamma=float(cfg.gamma)))


def check_trainer_and_callbacks(cfg: DictConfig, tmp_path: Path) -> None:
    """The trainer config builds a ``pl.Trainer``, each callback config its callback and the loader config (not
    instantiated: no ``_target_``) the data module's :class:`~udcg_ltr.models.datamodule.LoaderConfig`, as the train
    job does (:func:`udcg_ltr.models.training.fit_reranker`); an accelerator this machine lacks (trainer=gpu, ddp):
    the arguments bind to ``pl.Trainer``."""
    import pytorch_lightning as pl
    from hydra.utils import get_class, instantiate

    from udcg_ltr.models.precision import on_gpu
    from udcg_ltr.models.training import (
        HOST_SIDE_KEYS,
        FitConfig,
        build_callbacks,
        callback_settings,
        loader_config,
        trainer_settings,
    )

    node, host = trainer_settings(cfg.trainer, {}, {})
    assert set(host) == set(HOST_SIDE_KEYS) and not set(node) & set(HOST_SIDE_KEYS)
    loader_config(FitConfig(), OmegaConf.to_container(cfg.loader), gpu=on_gpu(node.get("accelerator")))  # as the job
    cls = get_class(node["_target_"])
    assert issubclass(cls, pl.Trainer), node["_target_"]
    inspect.signature(cls).bind(**{key: value for key, value in node.items() if key != "_target_"})
    nodes = callback_settings(cfg.get("callbacks") or {}, monitor=f"val/udcg@{cfg.k}", early_stopping_patience=2,
                              save_weights_only=True)
    callbacks = build_callbacks(nodes, checkpoint_dir=tmp_path / "checkpoints", validates=True, has_logger=True)
    assert len(callbacks) == len(nodes) and all(isinstance(c, pl.Callback) for c in callbacks)
    for callback in callbacks:  # what they follow is what the cross-encoder logs (CrossEncoderModule.monitor)
        assert getattr(callback, "monitor", None) in (None, f"val/udcg@{cfg.k}"), callback
        if isinstance(callback, pl.callbacks.ModelCheckpoint):
            assert Path(callback.dirpath) == (tmp_path / "checkpoints").resolve()
    if node.get("accelerator") == "cpu":
        trainer = instantiate(node, _partial_=True)(callbacks=callbacks, logger=False, default_root_dir=str(tmp_path))
        assert trainer.max_epochs == cfg.trainer.max_epochs and trainer.precision == node["precision"]
        assert sum(isinstance(c, type(x)) for c in trainer.callbacks for x in callbacks) >= len(callbacks)


def job_part(cfg: DictConfig) -> DictConfig:
    """The config without the ``hydra`` node: what the task function receives."""
    return OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])


def validate(task: str, cfg: DictConfig, tmp_path: Path) -> None:
    run_cfg = job_part(cfg)
    if task == "train":
        job_settings(TrainSettings, run_cfg)
    elif task == "evaluate":
        with open_dict(run_cfg):  # modes that read a trained model / a sweep get an (empty) folder
            if run_cfg.get("reranker") is not None and run_cfg.reranker.get("path") is None:
                run_cfg.reranker.path = str(tmp_path)
            if run_cfg.get("sweep_dir") is None:
                run_cfg.sweep_dir = str(tmp_path)
        job_settings(EvaluateSettings, run_cfg)


@pytest.mark.parametrize(("task", "overrides"), cases(), ids=lambda v: ",".join(v) if isinstance(v, tuple) else v)
def test_config_composes_resolves_instantiates_and_validates(task, overrides, hydra_runtime, tmp_path):
    cfg = hydra_runtime(task, list(overrides))
    resolved = OmegaConf.to_container(cfg, resolve=True)  # every interpolation, hydra node included
    assert resolved["hydra"]["runtime"]["output_dir"] == str(tmp_path / "run")
    check_targets(resolved)
    if task == "train":
        check_trainer_and_callbacks(cfg, tmp_path)
    if task == "train" and "cross_encoder" in cfg.model.stages:
        loss = build_loss(cfg)
        for term in getattr(loss, "terms", [loss]):  # one spec: the loss sees the run's k and gamma
            assert getattr(term, "gamma", cfg.gamma) == cfg.gamma and getattr(term, "k", cfg.k) == cfg.k, term
    if task == "annotate":
        return  # python -m udcg_ltr.annotate has its own checks (tests/test_annotate_cli.py)
    missing = sorted(OmegaConf.missing_keys(job_part(cfg)))  # e.g. dataset=jsonl without dataset.reader.path
    try:
        validate(task, cfg, tmp_path)
        problems: list[str] = []
    except ConfigError as err:
        problems = err.problems
    for key in missing:  # a mandatory value left open is refused, by name
        assert any(key in p for p in problems), (key, problems)
    # Nothing else may be wrong, except data files the shared folder does not ship (validation reads no
    # data) and what another run writes under outputs/ (the reranker of experiment=full_dynamic_k_reranker).
    inputs = (str(cfg.paths.data_dir), str(PROJECT_ROOT / "outputs"))
    unexpected = [p for p in problems if not any(key in p for key in missing)
                  and not ("does not exist" in p and any(folder in p for folder in inputs))]
    assert not unexpected, unexpected


def test_every_group_is_composed_somewhere():
    """A new group folder or option file is covered by the parametrisation above."""
    composed = {tuple(o.split("=", 1)) for _, overrides in cases() for o in overrides}
    expected = {(group, option) for group, options in groups().items() for option in options}
    assert composed == expected, sorted(expected - composed)


def test_every_evaluate_mode_has_one_config_file():
    """``evaluate.py mode=<name>`` selects conf/mode/<name>.yaml, which names its mode: one file per mode."""
    assert set(groups()["mode"]) == set(MODES)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_mode_file_sets_its_mode_and_holds_its_settings(mode, hydra_runtime):
    cfg = hydra_runtime("evaluate", [f"mode={mode}"])
    assert cfg.mode == mode
    own = {"correlation": "correlation", "reranker": "reranker", "metrics": "reranker", "selectors": "selectors",
           "sweep_summary": "sweep_dir", "distractors": "studies", "position": "studies",
           "oracle_contexts": "studies", "context_size": "studies"}[mode]
    assert own in cfg
    others = {"correlation", "selectors", "sweep_dir"} - {own}
    assert not others & set(cfg), f"mode={mode} carries another mode's settings: {sorted(others & set(cfg))}"


def test_one_spelling_of_the_annotation_cache_folder(hydra_runtime):
    """train.py, evaluate.py and the annotation CLI read the cache folder from one key."""
    for task in TASKS:
        cfg = hydra_runtime(task, ["paths.annotation_cache_dir=/tmp/udcg-cache"])
        assert cfg.paths.annotation_cache_dir == "/tmp/udcg-cache"
        folders = {key for key in dotted_keys(OmegaConf.to_container(job_part(cfg))) if "cache" in key
                   and key.endswith("dir")}
        assert folders == {"paths.cache_dir", "paths.annotation_cache_dir"}, (task, folders)


def dotted_keys(node, prefix: str = "") -> list[str]:
    """Every key of a nested config as a dotted path."""
    if not isinstance(node, dict):
        return []
    return [name for key, value in node.items() for name in
            (f"{prefix}{key}", *dotted_keys(value, f"{prefix}{key}."))]


@pytest.mark.parametrize("task", TASKS)
def test_primary_config_resolves_as_is(task, hydra_runtime):
    cfg = hydra_runtime(task, [])
    OmegaConf.to_container(cfg, resolve=True)
    assert not OmegaConf.missing_keys(job_part(cfg)), f"{task}.yaml needs a value to run"


def test_demo_world_reader_instantiates_records(hydra_runtime):
    """The default dataset's ``_target_`` returns QueryRecords (cheap: the embedded, seeded demo world)."""
    from hydra.utils import instantiate

    from udcg_ltr.data.schema import QueryRecord

    records = instantiate(hydra_runtime("train", ["dataset=demo"]).dataset.reader)
    assert records and all(isinstance(r, QueryRecord) for r in records)


# ---- settings checks (issue 31, "Settings"): every number finite and in range, named splits exist -------------
@pytest.mark.parametrize("override, key", [("gamma=nan", "gamma"), ("gamma=inf", "gamma"),
                                           ("dataset.relevance_threshold=-1", "dataset.relevance_threshold")])
@pytest.mark.parametrize("task", ["train", "evaluate"])
def test_a_bad_number_is_refused_naming_key_and_value(task, override, key, hydra_runtime, tmp_path):
    cfg = hydra_runtime(task, ["dataset=demo", override])
    with pytest.raises(ConfigError, match=re.escape(key) + ".*" + re.escape(override.split("=")[1])):
        validate(task, cfg, tmp_path)


@pytest.mark.parametrize("field, value", [("gamma", float("nan")), ("k", 0), ("lr", float("inf")),
                                          ("relevance_threshold", -1), ("warmup", 1.5), ("max_slate", -1),
                                          ("schedule", "cosine")])
def test_fit_config_refuses_what_would_train_wrong(field, value):
    from udcg_ltr.models.training import FitConfig

    with pytest.raises(ValueError, match=field):
        FitConfig(**{field: value})


@pytest.mark.parametrize("splits, message", [(["nonexistent"], "no split \\['nonexistent'\\]"), ([], "empty")])
def test_named_splits_must_exist_in_the_data(tmp_path, splits, message, hydra_runtime):
    """``splits=[nonexistent]`` (or a file without the named split) is refused, not read as every record."""
    from udcg_ltr.data.demo_world import generate_demo_world
    from udcg_ltr.jobs.common import JobContext

    cfg = job_part(hydra_runtime("evaluate", ["dataset=demo"]))
    ctx = JobContext(cfg, job_settings(EvaluateSettings, cfg), tmp_path, logger=None)
    ctx.__dict__["records"] = [r for r in generate_demo_world(seed=0, n_questions=12) if r.split != "test"]
    ctx.check_splits("splits", ["train"])
    ctx.check_splits("splits", None)
    with pytest.raises(ConfigError, match=f"splits={re.escape(str(splits))}: {message}"):
        ctx.check_splits("splits", splits)
    with pytest.raises(ConfigError, match="no split \\['test'\\]"):  # the default, on a file without it
        ctx.check_splits("splits", list(cfg.splits))


# ---- the typed settings (udcg_ltr.jobs.settings) ----------------------------------------------------------------
def test_llm_settings_are_the_keys_load_llm_takes():
    """``llm`` is a closed node: its settings class holds exactly the keys :func:`load_llm` accepts."""
    from dataclasses import fields

    from udcg_ltr.annotate.llms import _SCORER_KEYS
    from udcg_ltr.jobs.settings import LLMSettings

    assert {f.name for f in fields(LLMSettings)} == {"_target_", "model", *_SCORER_KEYS}


@pytest.mark.parametrize("task", ["train", "evaluate"])
def test_settings_carry_the_composed_values(task, hydra_runtime):
    """The typed settings hold the config's values, typed (what the stages read instead of ``cfg.get``)."""
    cfg = job_part(hydra_runtime(task, ["k=3", "seed=7", "dataset=demo"]))
    settings = job_settings(TrainSettings if task == "train" else EvaluateSettings, cfg)
    assert (settings.k, settings.seed, settings.gamma) == (3, 7, cfg.gamma)
    assert settings.dataset.name == "demo" and settings.llm_name == cfg.llm.name
    if task == "train":
        assert settings.model.stages == list(cfg.model.stages) and settings.model.dynamic_k.max_k == 3
        assert isinstance(settings.model.cross_encoder.lr, float) and settings.trainer.max_epochs == cfg.trainer.max_epochs
    else:
        assert settings.correlation.n_contexts == cfg.correlation.n_contexts and settings.selectors is None
