"""Configuration is validated before any stage runs, and bad input ends an entry point with one clean message.

Issue 16: ``loss.name=doesnotexist`` used to fail after 27 minutes of annotation and fitting; unknown stages,
modes, selector kinds and LLM keys, ``k < 1``, ``gamma`` outside (0, 1] and missing data files must all be
reported at job start, together (the typed settings of :mod:`udcg_ltr.jobs.settings`). A malformed data file
(:class:`~udcg_ltr.data.schema.DataError`) ends train.py / evaluate.py / ``python -m udcg_ltr.annotate`` with a
one-paragraph message naming the file, line and field, exit status 1 and no Python traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from udcg_ltr.jobs import settings
from udcg_ltr.jobs.common import ConfigError
from udcg_ltr.jobs.evaluate_job import MODES
from udcg_ltr.jobs.settings import EvaluateSettings, TrainSettings, job_settings
from udcg_ltr.jobs.train_job import STAGE_FUNCS
from udcg_ltr.paths import PROJECT_ROOT

CONF = PROJECT_ROOT / "conf"
ENV = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
       "WANDB_SILENT": "true"}


def compose(task: str, overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    # Outside a Hydra run there is no ${hydra:runtime...}: pin the paths the config derives from it.
    pinned = [f"paths.root_dir={PROJECT_ROOT}", "paths.output_dir=."]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name=task, overrides=pinned + list(overrides))


def validate(task: str, overrides: list[str]) -> None:
    job_settings(TrainSettings if task == "train" else EvaluateSettings, compose(task, overrides))


def problems(task: str, overrides: list[str]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate(task, overrides)
    return info.value.problems


@pytest.mark.parametrize(("task", "overrides", "expected"), [
    ("train", ["loss.name=doesnotexist"], "loss 'doesnotexist'"),
    ("train", ["k=0"], "k must be >= 1"),
    ("train", ["gamma=0"], "gamma must be > 0.0"),
    ("train", ["gamma=1.5"], "gamma must be <= 1.0"),
    ("train", ["gamma=-0.2"], "gamma must be > 0.0"),
    ("train", ["model.stages=[annotate,fit_everything]"], "unknown stages ['fit_everything']"),
    ("train", ["model=dynamic_k", "model.dynamic_k.selector=psychic"], "unknown selector kind 'psychic'"),
    ("train", ["loss=udcg_direct", "+loss.temperature=2"], "loss 'udcg'"),
    ("train", ["match_rule=fuzzy"], "match_rule: unknown match rule 'fuzzy'"),
    ("evaluate", ["match_rule=fuzzy"], "match_rule: unknown match rule 'fuzzy'"),
    ("train", ["dataset=jsonl", "dataset.reader.path=/nonexistent/data.jsonl"],
     "dataset.reader.path: /nonexistent/data.jsonl does not exist"),
    ("train", ["dataset=jsonl"], "dataset.reader.path is required"),
    ("train", ["+dataset.reader.n_topics=3"], "does not accept"),
    ("train", ["llm.model='not a model'"], "llm.model 'not a model'"),
    ("train", ["+llm.temperature=0.7"], "llm: unknown keys ['temperature']"),
    ("train", ["model=udcg_theta", "model.udcg_theta.variant=everything"], "model.udcg_theta.variant"),
    ("train", ["model=cross_encoder", "trainer.checkpoint_minutes=-1"], "trainer.checkpoint_minutes must be >= 0.0"),
    ("train", ["loader.num_workers=-1"], "loader.num_workers must be >= 0"),
    ("train", ["loader.buckets=0"], "loader.buckets must be >= 1"),
    ("train", ["loader.pin_memory=maybe"], "loader.pin_memory must be one of [True, False], got 'maybe'"),
    ("evaluate", ["mode=selectors", "selectors.scores=retriever", "selectors.kinds=[gate,crystal_ball]"],
     "unknown selector kind 'crystal_ball'"),
    ("evaluate", ["mode=reranker"], "needs a trained reranker"),
    ("evaluate", ["mode=reranker", "reranker.path=/nonexistent/model"], "reranker.path: /nonexistent/model"),
    ("evaluate", ["mode=reranker", "reranker.max_questions=0"], "reranker.max_questions must be >= 1"),
    ("evaluate", ["mode=correlation", "correlation.k_sweep=[0,2]"], "correlation.k_sweep[] must be >= 1"),
    ("evaluate", ["mode=correlation", "correlation.sweep_mode=sideways"], "correlation.sweep_mode"),
    ("evaluate", ["mode=distractors", "studies.distractors.k=1"], "studies.distractors: k must be >= 2"),
    ("evaluate", ["mode=distractors", "studies.distractors.weak_threshold=0.9",
                  "studies.distractors.hard_threshold=0.1"], "studies.distractors: need 0 <= weak_threshold"),
    ("evaluate", ["mode=oracle_contexts", "+studies.oracle.colour=red"], "unknown OracleConfig parameters"),
    ("evaluate", ["mode=sweep_summary"], "needs sweep_dir"),
    ("evaluate", ["mode=metrics", "match_rule=vibes"], "unknown match rule 'vibes'"),
    # typed settings: a value of the wrong type, an unknown key of a closed node, a stage without its settings
    ("train", ["k=abc"], "k must be an integer, got 'abc'"),
    ("train", ["model.cross_encoder.lr=fast"], "model.cross_encoder.lr must be a finite number, got 'fast'"),
    ("train", ["+model.cross_encoder.lrr=0.1"], "model.cross_encoder: unknown keys ['lrr']"),
    ("train", ["model=cross_encoder", "model.stages=[dynamic_k]"], "model.stages names dynamic_k but model.dynamic_k"),
    ("evaluate", ["mode=correlation", "correlation.n_bootstrap=many"], "correlation.n_bootstrap must be an integer"),
])
def test_each_bad_setting_is_named(task, overrides, expected):
    found = problems(task, overrides)
    assert any(expected in p for p in found), found


def test_unknown_mode_is_refused_with_the_known_ones():
    """A mode is a config group (conf/mode/<name>.yaml): Hydra refuses an unknown one and lists the others."""
    from hydra.errors import MissingConfigException

    with pytest.raises(MissingConfigException, match="Could not find 'mode/oracle'") as info:
        compose("evaluate", ["mode=oracle"])
    assert "oracle_contexts" in str(info.value)
    cfg = compose("evaluate", ["mode=oracle_contexts"])
    cfg.mode = "oracle"
    with pytest.raises(ConfigError, match="unknown mode 'oracle'"):  # a config built another way is still checked
        job_settings(EvaluateSettings, cfg)


@pytest.mark.parametrize("task", ["train", "evaluate"])
def test_the_evaluation_settings_have_one_spelling(task):
    """``splits``, ``match_rule`` and ``end_to_end`` are top-level keys of both jobs (one definition: JobSettings);
    the retired ``evaluation.*`` spelling of train.py is refused, not ignored."""
    from hydra.errors import ConfigCompositionException

    cls = TrainSettings if task == "train" else EvaluateSettings
    s = job_settings(cls, compose(task, ["splits=[val,test]", "match_rule=em", "end_to_end=false"]))
    assert (s.splits, s.match_rule, s.end_to_end) == (["val", "test"], "em", False)
    for old in ("evaluation.splits=[test]", "evaluation.match_rule=em", "evaluation.end_to_end=false"):
        with pytest.raises(ConfigCompositionException, match="Could not override"):
            compose(task, [old])


def test_the_dataloader_settings_have_one_spelling():
    """The DataLoaders' settings are the ``loader`` group (conf/loader) alone: the retired ``trainer.*`` spelling is
    refused by Hydra, not silently ignored."""
    from hydra.errors import ConfigCompositionException

    s = job_settings(TrainSettings, compose("train", ["loader.num_workers=2", "loader.pin_memory=true",
                                                      "loader.buckets=3"]))
    assert (s.loader.num_workers, s.loader.pin_memory, s.loader.buckets) == (2, True, 3)
    assert job_settings(TrainSettings, compose("train", [])).loader == settings.LoaderSettings()  # null: per device
    for old in ("trainer.num_workers=0", "trainer.pin_memory=true", "trainer.length_buckets=3", "loader.length_buckets=3"):
        with pytest.raises(ConfigCompositionException, match="Could not override") as info:
            compose("train", [old])
        assert "not in struct" in str(info.value.__cause__ or info.value), old


def test_the_loss_has_one_spelling():
    """The loss is the top-level ``loss`` group (conf/loss) alone: conf/model has no ``model.loss`` copy of it."""
    cfg = compose("train", ["model=cross_encoder", "loss=bce"])
    assert "loss" not in cfg.model and job_settings(TrainSettings, cfg).loss_spec() == ("bce", {})


def test_the_settings_accept_the_stages_and_modes_the_jobs_run():
    assert tuple(STAGE_FUNCS) == settings.STAGES and tuple(MODES) == settings.MODES


def test_every_problem_is_reported_at_once():
    found = problems("train", ["k=0", "gamma=2", "loss.name=nope", "model.stages=[annotate,cross_encoder,nope]",
                               "dataset=jsonl", "dataset.reader.path=/no/such/file.jsonl"])
    assert len(found) == 5, found
    for needle in ("k must", "gamma must", "loss 'nope'", "unknown stages ['nope']", "/no/such/file.jsonl"):
        assert any(needle in p for p in found), (needle, found)


def test_a_settings_object_built_directly_is_checked_too():
    with pytest.raises(ConfigError, match="model.udcg_theta.n_contexts must be >= 1, got 0"):
        settings.UdcgThetaSettings(n_contexts=0)


def test_the_settings_of_a_stage_that_does_not_run_are_not_checked():
    """model=pipeline carries every family's node; with the dynamic_k stage left out, its settings are not read."""
    validate("train", ["model.stages=[annotate,evaluate]", "model.dynamic_k.selector=psychic"])


def test_boundaries_are_valid():
    validate("train", ["k=1", "gamma=1"])
    validate("train", ["gamma=1e-6"])


@pytest.mark.parametrize("model", ["pipeline", "udcg_theta", "cross_encoder", "dynamic_k"])
def test_default_train_configs_are_valid(model):
    validate("train", [f"model={model}"])


@pytest.mark.parametrize("kind", ["gate", "kclassifier", "expected_utility", "calibrated_utility", "relative_threshold",
                                  "score_threshold", "fixed_k", "cumulative_utility"])
def test_documented_selector_kinds_are_valid(kind):
    validate("train", ["model=dynamic_k", f"model.dynamic_k.selector={kind}"])


@pytest.mark.parametrize("mode", ["metrics", "correlation", "distractors", "position", "oracle_contexts",
                                  "context_size"])
def test_default_evaluate_modes_are_valid(mode):
    validate("evaluate", [f"mode={mode}"])


# Every option of every config group and every experiment recipe composes, resolves and validates:
# tests/test_configs.py.


# ---- the entry points --------------------------------------------------------------------------
def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)


def test_bad_loss_fails_before_any_stage(tmp_path):
    """The reported case: the main job with an unknown loss stops at once, before annotating anything."""
    run_dir = tmp_path / "run"
    proc = _run([str(PROJECT_ROOT / "train.py"), "loss.name=doesnotexist", "logger=csv",
                 f"paths.annotation_cache_dir={tmp_path / 'annotations'}", f"hydra.run.dir={run_dir}"], tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "loss 'doesnotexist'" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "annotations").exists()  # no stage ran: nothing was annotated
    state = json.loads((run_dir / "job_result.json").read_text())
    assert state["status"] == "failed" and "doesnotexist" in state["error"]
    assert "== stage" not in (run_dir / "train.log").read_text()


def _bad_jsonl(path: Path) -> Path:
    good = {"qid": "q1", "question": "Who?", "answers": ["A"], "split": "test",
            "passages": [{"pid": "p1", "text": "A did it.", "relevance": 1}]}
    bad = {"qid": "q2", "question": "What?", "answers": ["B"], "split": "test",
           "passages": [{"pid": "p2", "relevance": 1}]}  # no text
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("entry", ["train", "evaluate", "annotate"])
def test_data_error_is_one_clean_message(entry, tmp_path):
    data = _bad_jsonl(tmp_path / "bad.jsonl")
    if entry == "annotate":
        args = ["-m", "udcg_ltr.annotate", f"input={data}", f"output={tmp_path / 'out.jsonl'}", "llm=smollm2",
                f"hydra.run.dir={tmp_path / 'run'}"]
    else:
        args = [str(PROJECT_ROOT / f"{entry}.py"), "dataset=jsonl", f"dataset.reader.path={data}", "logger=none",
                f"hydra.run.dir={tmp_path / 'run'}"] + (["mode=metrics"] if entry == "evaluate" else [])
    proc = _run(args, tmp_path)
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-3000:])
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    message = err.splitlines()[-1]
    assert message.startswith("error: ") and str(data) in message and "line 2" in message and "text" in message, err
