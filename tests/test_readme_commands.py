"""Every command the README shows is run by a test, so the README cannot drift from the code (issue 16).

The commands are parsed from the README itself: its ```bash blocks (continuation lines joined, comments dropped)
and the inline commands of its tables and text (``evaluate.py ...``, ``python -m ...``, ``<bench>.py --flags``).

* every ``train.py`` / ``evaluate.py`` / ``python -m udcg_ltr.annotate`` command runs with ``--cfg job --resolve``
  (the real entry point composes and resolves exactly those words; a sweep's ``-m`` lists are expanded into
  their jobs) and its composed config builds the job's typed settings (:func:`udcg_ltr.jobs.settings.job_settings`);
* ``python -m udcg_ltr.sweeps`` runs for real on a sweep folder of finished jobs;
* every bench script runs with ``--help``, and the README's flags for it are among its options and parse;
* ``bash scripts/dev.sh train|test`` run with ``--cfg job`` / ``--collect-only`` (set-up included, when it is a
  no-op);
* inline code naming a config option (``llm=llama3.1-8b``), a module or a file must name one that exists;
* ``slow``: the commands that are cheap in a tiny mode run for real, with overrides appended that cut the work
  (a 16-question demo world, the SmolLM2 fixture with 4-token answers, one epoch, a 40-question slice of the
  shared SQuAD set): the main job, every demo study, the correlation study on the demo world and on the shared
  set, the reranker / selector / DL19 evaluations of the main job's model, the SQuAD studies recipe and the
  annotation CLI. The README words come first; the tiny overrides follow (Hydra: a later value wins).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from udcg_ltr.paths import PROJECT_ROOT, shared_file

ROOT = PROJECT_ROOT
README = ROOT / "README.md"
CONF = ROOT / "conf"
ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
ENTRIES = {"train.py": "train", "evaluate.py": "evaluate"}

#: Inline commands of the README that are schematic on purpose (not runnable as written), with why.
SCHEMATIC = {"python train.py -m a=x,y b=u,v": "explains the sweep syntax with placeholder keys"}


@dataclass(frozen=True)
class Command:
    text: str  # as the README shows it (continuations joined)
    argv: tuple[str, ...]  # after the interpreter: ("train.py", ...), ("-m", "udcg_ltr.annotate", ...), ("bench/x.py", ...)
    kind: str  # entry | module | bench | dev

    @property
    def id(self) -> str:
        return self.text if len(self.text) < 90 else self.text[:87] + "..."


def _strip_comment(line: str) -> str:
    out, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).strip()


def _classify(text: str) -> Command | None:
    words = shlex.split(text)
    if not words:
        return None
    if words[0] == "bash" and len(words) > 1 and words[1] == "scripts/dev.sh":
        return Command(text, tuple(words[1:]), "dev")
    if words[0] in (".venv/bin/python", "python", "python3"):
        words = words[1:]
    if not words:
        return None
    if words[0] in ENTRIES:
        return Command(text, tuple(words), "entry")
    if words[0] == "-m" and len(words) > 1 and words[1].startswith("udcg_ltr"):
        return Command(text, tuple(words), "module")
    if words[0].endswith(".py"):
        name = words[0] if words[0].startswith("bench/") else f"bench/{words[0]}"
        return Command(text, (name, *words[1:]), "bench")
    return None


def readme_commands() -> list[Command]:
    """Every command of the README: the ```bash blocks, then the inline ones (tables and text), in order."""
    text = README.read_text(encoding="utf-8")
    found: list[Command] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = _strip_comment(line)
            cmd = _classify(line) if line else None
            assert line == "" or cmd is not None, f"README bash line not understood by this test: {line!r}"
            if cmd is not None:
                found.append(cmd)
    for span in re.findall(r"`([^`\n]+)`", text):
        span = span.strip()
        if span in SCHEMATIC or "<name>" in span:
            continue
        starts = ("train.py", "evaluate.py", "python ", ".venv/bin/python ")
        if span.startswith(starts) or re.fullmatch(r"[\w]+\.py( --?[\w-].*)?", span):
            if re.fullmatch(r"[\w]+\.py", span) and not (ROOT / "bench" / span).is_file() and \
                    (ROOT / span).is_file():
                continue  # train.py / evaluate.py named as files
            cmd = _classify(span)
            if cmd is not None and cmd not in found:
                found.append(cmd)
    return found


COMMANDS = readme_commands()


def _by_kind(kind: str) -> list[Command]:
    return [c for c in COMMANDS if c.kind == kind]


def test_readme_commands_are_found():
    kinds = {c.kind for c in COMMANDS}
    assert {"entry", "module", "bench", "dev"} <= kinds, kinds
    texts = " | ".join(c.text for c in COMMANDS)
    for needle in ("train.py experiment=squad_udcg", "evaluate.py mode=distractors", "udcg_ltr.annotate",
                   "udcg_ltr.sweeps", "correlation.n_contexts=4", "studies_squad.py --compute --threads 2"):
        assert needle in texts, needle


# ---- composing every entry-point command ---------------------------------------------------------
def _expand_sweep(args: list[str]) -> list[list[str]]:
    """A ``-m`` command's jobs: every combination of its comma lists (Hydra's basic sweeper); ``range(a,b)``
    takes its first value. Commas inside brackets or quotes are not separators."""
    choices = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or value.startswith(("[", "{", "'", '"')) and not value.startswith("'range("):
            choices.append([arg])
        elif value.strip("'").startswith("range("):
            start = int(re.match(r"range\((\d+)", value.strip("'")).group(1))
            choices.append([f"{key}={start}"])
        else:
            choices.append([f"{key}={v}" for v in value.split(",")])
    return [list(c) for c in itertools.product(*choices)]


def _placeholders(args: list[str], run_dir: Path) -> list[str]:
    return [a.replace("<run>", str(run_dir)) for a in args]


def _jobs(cmd: Command, run_dir: Path) -> list[tuple[str, list[str]]]:
    """(script or module argv prefix, overrides) for each job of an entry / annotate command."""
    argv = list(cmd.argv)
    prefix, args = (argv[:2], argv[2:]) if argv[0] == "-m" else (argv[:1], argv[1:])
    args = _placeholders(args, run_dir)
    if "-m" in args:
        args.remove("-m")
        return [(" ".join(prefix), job) for job in _expand_sweep(args)]
    return [(" ".join(prefix), args)]


def _needs_shared_data(args: list[str]) -> bool:
    joined = " ".join(args)
    return any(name in joined for name in ("annotated_squad", "squad_", "dl19", "dataset=squad", "hotpotqa", "nq_open"))


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory) -> Path:
    """A run folder as train.py leaves it, with what the README's ``<run>/cross_encoder/...`` names: the
    reranker folder and the questions it trained on (for ``--cfg job``)."""
    run = tmp_path_factory.mktemp("run")
    (run / "cross_encoder" / "model").mkdir(parents=True)
    (run / "cross_encoder" / "questions.json").write_text('{"train": [], "val": []}', encoding="utf-8")
    return run


def _values_under(cfg, folder: Path) -> dict[str, str]:
    """``{config key: value}`` of the composed config's string values that are paths inside ``folder``."""
    from omegaconf import OmegaConf

    prefix, found = str(folder).rstrip("/") + "/", {}

    def walk(node, key):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{key}[{i}]")
        elif isinstance(node, str) and os.path.normpath(node).startswith(prefix):
            found[key] = node

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return found


def _compose(task: str, overrides: list[str]):
    from hydra import compose, initialize_config_dir

    pinned = [f"paths.root_dir={ROOT}", "paths.output_dir=."]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=task, overrides=pinned + overrides)


@pytest.mark.parametrize("cmd", _by_kind("entry") + [c for c in _by_kind("module") if "annotate" in c.argv[1]],
                         ids=lambda c: c.id)
def test_command_composes_resolves_and_validates(cmd, fake_run, tmp_path):
    from udcg_ltr.jobs.settings import EvaluateSettings, TrainSettings, job_settings

    for prefix, overrides in _jobs(cmd, fake_run):
        if _needs_shared_data(overrides) and not shared_file().is_dir():
            pytest.skip("shared data folder absent")
        launcher = [a for a in overrides if a.startswith("hydra/launcher=")]
        overrides = [a for a in overrides if not a.startswith("hydra/launcher=")]
        script = prefix.split() if prefix.startswith("-m") else [str(ROOT / prefix)]
        proc = subprocess.run([sys.executable, *script, *overrides, "--cfg", "job", "--resolve"], cwd=ROOT,
                              env=ENV, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (cmd.text, overrides, proc.stderr[-3000:])
        if launcher:  # the launcher plugin and its config exist (a SLURM cluster is not needed to compose it)
            proc = subprocess.run([sys.executable, *script, *launcher, "--cfg", "hydra"], cwd=ROOT, env=ENV,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, (cmd.text, launcher, proc.stderr[-3000:])
        if prefix in ENTRIES:
            task = ENTRIES[prefix]
            cfg = _compose(task, overrides)
            # A recipe may pick the shared set itself (experiment=full_*): the words alone do not tell.
            if any(not Path(v).exists() for v in _values_under(cfg, shared_file().resolve()).values()):
                pytest.skip("shared data folder absent")
            # This machine's finished runs exist here and not in a clean checkout (CI): a command that needs
            # one must name it (<run>/...), not lean on a recipe's default path into outputs/.
            local = _values_under(cfg, ROOT / "outputs")
            assert not local, f"{cmd.text!r} reads {local}: outputs of this machine that a clean checkout lacks"
            job_settings(TrainSettings if task == "train" else EvaluateSettings, cfg)


# ---- the sweep summary, the benches, the set-up script ---------------------------------------------------
@pytest.mark.parametrize("cmd", [c for c in _by_kind("module") if "sweeps" in c.argv[1]], ids=lambda c: c.id)
def test_sweep_summary_command_runs(cmd, tmp_path):
    """Run as written, from a folder holding a sweep of three finished jobs at the path the README names."""
    sweep = tmp_path / cmd.argv[2]
    for i, value in enumerate((0.51, 0.55, 0.53)):
        job = sweep / f"loss=x{i}"
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(f"- loss=x{i}\n")
        (job / "job_result.json").write_text(json.dumps({
            "status": "finished", "config_hash": str(i), "config": {"optimized_metric": "test/udcg@5"},
            "metrics": {"test/udcg@5": value, "annotate/passages": 320.0}}))
    proc = subprocess.run([sys.executable, *cmd.argv], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (sweep / "sweep_summary.png").stat().st_size > 0
    assert (sweep / "sweep_summary.md").read_text().splitlines()[0].split("|")[2].strip() == "test/udcg@5"


def _bench_commands() -> list[Command]:
    by_script: dict[str, list[Command]] = {}
    for c in _by_kind("bench"):
        by_script.setdefault(c.argv[0], []).append(c)
    return [c for cs in by_script.values() for c in cs]


def _setup_is_current() -> bool:
    import hashlib

    stamp = ROOT / ".venv" / ".udcg_ltr_installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return stamp.is_file() and stamp.read_text().strip() == want


@pytest.mark.parametrize("cmd", _by_kind("dev"), ids=lambda c: c.id)
def test_dev_script_commands(cmd, tmp_path):
    if not _setup_is_current():
        pytest.skip("the set-up would reinstall packages (pyproject.toml changed since the last set-up)")
    extra = {"train": ["--cfg", "job"], "test": ["--collect-only", "-q", "tests/test_readme_commands.py"]}
    action = cmd.argv[1]
    assert action in extra, f"README runs `dev.sh {action}`: add its tiny mode here"
    proc = subprocess.run(["bash", *cmd.argv, *extra[action]], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("model:" in proc.stdout) if action == "train" else ("test_readme_commands" in proc.stdout)


# ---- names in inline code ----------------------------------------------------------------------------------
def _inline_spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", README.read_text(encoding="utf-8"))


def test_inline_config_options_exist():
    """``group=option`` in inline code (``llm=llama3.1-8b``, ``trainer=ddp``, ``hydra/launcher=slurm``) names a file
    under conf/."""
    groups = {p.relative_to(CONF).as_posix() for p in CONF.rglob("*") if p.is_dir()}
    seen = 0
    for span in _inline_spans():
        for word in span.split():
            key, sep, value = word.partition("=")
            if sep and key in groups and re.fullmatch(r"[\w.\-]+", value):
                seen += 1
                assert (CONF / key / f"{value}.yaml").is_file(), f"README names {word}: no conf/{key}/{value}.yaml"
    assert seen >= 10


TOP_LEVEL = {p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in ("outputs", "multirun")}


def test_inline_modules_and_files_exist():
    """``udcg_ltr.x.y`` modules, ``udcg_ltr/...`` / ``select/x.py`` files and ``conf/...`` folders named inline exist."""
    for span in _inline_spans():
        if re.fullmatch(r"udcg_ltr(\.\w+)+", span):
            assert importlib.util.find_spec(span) is not None, f"README names module {span}"
        elif re.fullmatch(r"[\w./]+/[\w.]*", span) and not span.startswith(("outputs/", "multirun/", "../")) \
                and (re.search(r"\.(py|sh|yaml|md|json)$", span) or span.split("/")[0] in TOP_LEVEL):
            candidates = [ROOT / span, ROOT / "udcg_ltr" / span, ROOT / "bench" / span]
            assert any(p.exists() for p in candidates), f"README names {span}, which does not exist"


# ---- slow: the cheap commands run for real, in a tiny mode ---------------------------------------------------
TINY_DEMO = ["dataset.reader.n_entities=32", "dataset.reader.n_questions=16"]  # train 9 / val 4 / test 3
TINY_LLM = ["llm=smollm2", "llm.max_new_tokens=4", "llm.num_threads=1"]
TINY_SQUAD = ["+dataset.limit=40", "end_to_end=false"]  # train 30 / val 4 / test 6
#: Per evaluate mode (conf/mode/<mode>.yaml holds that mode's settings, so only its own keys can be overridden).
TINY_STUDIES = {"correlation": ["correlation.n_bootstrap=50", "correlation.n_contexts=2"],
                "distractors": ["studies.distractors.n_bootstrap=50"],
                "position": ["studies.position.n_bootstrap=50"],
                "oracle_contexts": ["studies.oracle.n_bootstrap=50", "studies.oracle.ks=[3]"],
                "context_size": ["studies.context_size.n_bootstrap=50", "studies.context_size.k_values=[1,3]",
                                 "+studies.context_size.n_contexts=2"]}


def _mode(cmd: Command) -> str:
    """The ``mode=`` an ``evaluate.py`` command sets (conf/evaluate.yaml's default: correlation)."""
    return next((a.split("=", 1)[1] for a in cmd.argv if a.startswith("mode=")), "correlation")


def _tiny(cmd: Command, ann: Path, model_run: Path | None) -> list[str] | None:
    """The overrides appended to a README command in the slow tier, or None when it only composes (above)."""
    args = " ".join(cmd.argv)
    if cmd.argv[0] == "train.py":
        if cmd.argv[1:] == ():  # the main job
            return [*TINY_DEMO, *TINY_LLM, "trainer.max_epochs=1", "trainer.num_threads=1",
                    "model.cross_encoder.max_length=64", "model.udcg_theta.n_contexts=2", f"paths.annotation_cache_dir={ann}"]
        return None  # annotated-SQuAD trainings (minutes each) and the 4-job sweep: composed and validated only
    if cmd.argv[0] == "evaluate.py":
        if ("<run>" in args and model_run is None) or "experiment=full_" in args:
            return None  # the full set's recipes (minutes to hours on the CPU): composed and validated only
        if "experiment=squad_studies" in args:
            return ["studies.distractors.max_queries=2", "studies.distractors.n_bootstrap=50", "llm.num_threads=1",
                    f"paths.annotation_cache_dir={ann / 'squad'}"]
        if "mode=correlation" in args and "annotated_squad" in args:  # ready-made runs: no LLM, seconds
            return ["correlation.n_bootstrap=50"]
        if "annotated_squad" in args or "dl19" in args:
            extra = ["selectors.kinds=[fixed_k,relative_threshold,oracle]"] if "mode=selectors" in args else []
            limit = ["+dataset.limit=3"] if "dl19" in args else TINY_SQUAD
            return [*limit, *extra, "reranker.batch_size=16"]
        mode = _mode(cmd)
        return [*TINY_DEMO, *TINY_LLM, *TINY_STUDIES.get(mode, []), f"paths.annotation_cache_dir={ann}"]
    if cmd.argv[:2] == ("-m", "udcg_ltr.annotate") and "input=data.jsonl" in args:
        return [*TINY_LLM, f"paths.annotation_cache_dir={ann / 'annotate_cli'}"]
    return None


def _run_tiny(cmd: Command, extra: list[str], cwd: Path, run_dir: Path, model_run: Path | None
              ) -> subprocess.CompletedProcess:
    argv = list(cmd.argv)
    script = [str(ROOT / argv[0])] if argv[0] in ENTRIES else argv[:2]
    words = argv[1:] if argv[0] in ENTRIES else argv[2:]
    words = _placeholders(words, model_run) if model_run is not None else words
    proc = subprocess.run([sys.executable, *script, *words, *extra, f"hydra.run.dir={run_dir}"], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=1800)
    return proc


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory):
    """One annotation cache for every tiny run (the same tiny demo world and LLM): annotated once."""
    return tmp_path_factory.mktemp("tiny")


@pytest.fixture(scope="module")
def main_job(tiny_world) -> Path:
    """The README's main job (``train.py``), tiny; its run folder holds the reranker the other commands use."""
    cmd = next(c for c in _by_kind("entry") if c.argv == ("train.py",))
    run_dir = tiny_world / "main_job"
    proc = _run_tiny(cmd, _tiny(cmd, tiny_world / "annotations", None), ROOT, run_dir, None)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return run_dir


@pytest.mark.slow
def test_main_job_runs_in_tiny_mode(main_job):
    result = json.loads((main_job / "job_result.json").read_text())
    assert result["status"] == "finished"
    assert 0.0 < result["metrics"]["test/udcg@5"] < 1.0
    assert (main_job / "cross_encoder" / "model").is_dir() and (main_job / "results.md").is_file()


@pytest.mark.slow
def test_main_job_rerun_on_the_same_cache_writes_the_same_per_query_csv(main_job, tiny_world):
    """Behaviour kept (issue 30): the main job run again into a new folder on the annotation cache the first run
    left (no LLM work) reproduces its per-query table byte for byte: seeded training, deterministic scoring."""
    cmd = next(c for c in _by_kind("entry") if c.argv == ("train.py",))
    again = tiny_world / "main_job_again"
    proc = _run_tiny(cmd, _tiny(cmd, tiny_world / "annotations", None), ROOT, again, None)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (again / "per_query.csv").read_bytes() == (main_job / "per_query.csv").read_bytes()


def _slow_commands() -> list[Command]:
    out = []
    for c in _by_kind("entry") + _by_kind("module"):
        if c.argv == ("train.py",):
            continue
        if _tiny(c, Path("/x"), Path("/x")) is not None:
            out.append(c)
    return out


#: The folder each study mode writes under the run folder, and its table.
STUDY_FILES = {"distractors": ("distractors", "distractors.csv"), "position": ("position", "position.csv"),
               "oracle_contexts": ("oracle", "oracle.csv"), "context_size": ("context_size", "context_size.csv")}


def check_study_outputs(cmd: Command, run_dir: Path, annotations: Path) -> None:
    """A study mode's table, report, summary and plot are written; the config's study parameters reached the
    study (``studies.oracle.ks`` of :data:`TINY_STUDIES`); the LLM answered through the run's annotation cache."""
    mode = _mode(cmd)
    if mode not in STUDY_FILES:
        return
    folder, table = STUDY_FILES[mode]
    out = run_dir / folder
    for name in (table, "report.md", "summary.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert any(p.suffix == ".png" for p in out.iterdir())
    if mode == "oracle_contexts":
        assert {r["k"] for r in json.loads((out / "summary.json").read_text())["rows"]} == {3}
    assert any(annotations.rglob("*.jsonl"))


def is_demo_world_study(cmd: Command) -> bool:
    """An ``evaluate.py`` study on the demo world (no trained model, no shared data): these run in
    ``test_readme_demo_studies.py``, beside this file, so that two test workers share the slow tier."""
    return cmd.argv[0] == "evaluate.py" and "<run>" not in cmd.text and not _needs_shared_data(list(cmd.argv))


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [c for c in _slow_commands() if not is_demo_world_study(c)], ids=lambda c: c.id)
def test_command_runs_in_tiny_mode(cmd, tiny_world, tmp_path, request):
    check_command_in_tiny_mode(cmd, tiny_world, tmp_path, request)


def check_command_in_tiny_mode(cmd: Command, tiny_world: Path, tmp_path: Path, request) -> None:
    """Run ``cmd`` as written plus its tiny overrides (:func:`_tiny`) and check what it left behind."""
    args = " ".join(cmd.argv)
    if _needs_shared_data(cmd.argv) and not shared_file().is_dir():
        pytest.skip("shared data folder absent")
    model_run = request.getfixturevalue("main_job") if "<run>" in args else None
    extra = _tiny(cmd, tiny_world / "annotations", model_run)
    cwd = ROOT
    if cmd.argv[:2] == ("-m", "udcg_ltr.annotate"):
        cwd = tmp_path  # input=data.jsonl output=annotated.jsonl are relative to where it runs
        rec = {"qid": "q1", "question": "Who wrote Hamlet?", "answers": ["Shakespeare"], "split": "test",
               "passages": [{"pid": "p1", "text": "Hamlet is a tragedy by William Shakespeare.", "relevance": 1},
                            {"pid": "p2", "text": "Paris is the capital of France.", "relevance": 0}]}
        (tmp_path / "data.jsonl").write_text(json.dumps(rec) + "\n")
    proc = _run_tiny(cmd, extra, cwd, tmp_path / "run", model_run)
    assert proc.returncode == 0, (cmd.text, extra, proc.stderr[-4000:])
    if cmd.argv[:2] == ("-m", "udcg_ltr.annotate"):
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        assert summary["passages"] == 2 and (tmp_path / "annotated.jsonl").is_file()
    else:
        result = json.loads((tmp_path / "run" / "job_result.json").read_text())
        assert result["status"] == "finished", result
        if "mode=distractors" in args and "experiment" not in args:  # the demo world: k fitted to its pools
            assert result["metrics"]["distractors/k"] == 4
        if is_demo_world_study(cmd):
            check_study_outputs(cmd, tmp_path / "run", tiny_world / "annotations")
        if "mode=correlation" in args:
            assert any(k.startswith("correlation/spearman/") for k in result["metrics"])
            assert not (tmp_path / "run" / "correlation" / "k_sweep.csv").exists()  # no silent k sweep
