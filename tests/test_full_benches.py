"""The full-set benches (``bench/full_correlation.py``, ``bench/full_dynamic_k.py``), their dataset config, and
``bench/dynamic_k_squad.py`` (``full_dynamic_k.py --dataset annotated``).

The end-to-end checks run each bench on a seeded subsample of the real ``annotated_full`` set (built once
here, 60 questions: 20 per split), or of the 400-question ``annotated`` set, and read its machine-read last line;
they skip when the shared data is absent. Numbers on 15-20 test questions mean nothing: only the format and the
ranges are checked.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
if str(BENCH) not in sys.path:  # the benches' data helper (bench/_full_data.py)
    sys.path.append(str(BENCH))

from _full_data import write_subsample  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline"}
NUMBER = r"([-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf))"
CORRELATION_LINE = re.compile(rf"spearman_test_full: udcg={NUMBER} udcg_theta={NUMBER} ndcg={NUMBER} erag={NUMBER} "
                              rf"diff_theta_vs_ndcg={NUMBER} \[{NUMBER}, {NUMBER}\]")
DYNAMIC_K_LINE = re.compile(rf"udcg_test_full: best_fixed={NUMBER} relative_threshold={NUMBER} learned={NUMBER} "
                            rf"oracle={NUMBER} gap_closed={NUMBER} p={NUMBER}")
DYNAMIC_K_SQUAD_LINE = re.compile(DYNAMIC_K_LINE.pattern.replace("udcg_test_full: ", "udcg_test: ", 1))


def _run(script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / script), *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def _last_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_dataset_config_is_the_annotated_reader_on_the_full_folder():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        full = compose(config_name="evaluate", overrides=["dataset=annotated_squad_full", "mode=correlation"])
        small = compose(config_name="evaluate", overrides=["dataset=annotated_squad", "mode=correlation"])
    f, s = (OmegaConf.to_container(c.dataset, resolve=False) for c in (full, small))
    assert f["name"] == "annotated_squad_full" and full.mode == "correlation"
    assert f["reader"]["_target_"] == s["reader"]["_target_"]
    assert f["reader"]["path"] == "${paths.data_dir}/annotated_full/squad_top10.jsonl.gz"
    assert f["contexts_path"] == "${paths.data_dir}/annotated_full/squad_contexts.jsonl.gz"
    assert {k: v for k, v in f.items() if k not in ("name", "reader", "contexts_path")} == \
           {k: v for k, v in s.items() if k not in ("name", "reader", "contexts_path")}


@pytest.mark.parametrize("script", ["full_correlation.py", "full_dynamic_k.py", "dynamic_k_squad.py"])
def test_help(script):
    proc = _run(script, "--help", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "--max-queries" in proc.stdout and "--data-dir" in proc.stdout


@pytest.fixture(scope="module")
def small_full_set(shared_data_dir, tmp_path_factory) -> Path:
    """A folder holding ``annotated_full/`` with 20 questions per split of the real set (seeded)."""
    if not (shared_data_dir / "annotated_full" / "squad_contexts.jsonl.gz").is_file():
        pytest.skip("the shared annotated_full set is absent")
    root = tmp_path_factory.mktemp("full_subsample")
    counts = write_subsample(shared_data_dir, root, 60, seed=0)
    assert counts == {"train": 20, "val": 20, "test": 20}
    return root


def test_full_correlation_end_to_end(small_full_set, tmp_path):
    proc = _run("full_correlation.py", "--data-dir", str(small_full_set), "--out", str(tmp_path),
                "--n-bootstrap", "200", "--k-sweep", "none")
    match = CORRELATION_LINE.fullmatch(_last_line(proc))
    assert match, _last_line(proc)
    values = [float(x) for x in match.groups()]
    assert all(math.isfinite(v) and -1.0 <= v <= 1.0 for v in values), values
    diff, lo, hi = values[4:]
    assert lo <= diff <= hi
    for name in ("table.md", "table.csv", "diagnostics.csv", "correlation_vs_ndcg.png", "summary.json",
                 "job/correlation/per_query.csv"):
        assert (tmp_path / name).is_file(), name


def test_full_dynamic_k_end_to_end(small_full_set, tmp_path):
    # --max-queries on the 60-question folder draws 15 per split from it: the subsample path is exercised too
    proc = _run("full_dynamic_k.py", "--data-dir", str(small_full_set), "--out", str(tmp_path), "--max-queries", "45",
                "--grid", "quick", "--no-probes", "--max-epochs", "2", "--n-bootstrap", "200")
    match = DYNAMIC_K_LINE.fullmatch(_last_line(proc))
    assert match, _last_line(proc)
    best_fixed, relative, learned, oracle, gap, p = (float(x) for x in match.groups())
    assert all(0.0 < v < 1.0 for v in (best_fixed, relative, learned, oracle))
    # the oracle takes each question's best k: no selector's mean can beat it
    assert oracle >= max(best_fixed, relative, learned) - 1e-4
    assert math.isfinite(gap) and gap <= 1.0 + 1e-6
    assert 0.0 < p <= 1.0
    assert "experiment=full_dynamic_k " in proc.stdout  # the named recipe, one command away
    assert "Questions: train 15, val 15, test 15" in proc.stdout
    for name in ("table.md", "selectors_test.csv", "udcg_test.png", "results.json", "job/per_query_test.csv",
                 "job/learned_grid.csv", "job/k_hist_test.png", "job/selectors.json"):
        assert (tmp_path / name).is_file(), name


def test_full_dynamic_k_runs_the_named_recipe_with_its_options_as_overrides(tmp_path):
    from full_dynamic_k import job_command

    args = argparse.Namespace(dataset="annotated_full", order="reranker", reranker_run=tmp_path / "rr", grid="quick",
                              probes=False,
                              batch_size=64, max_epochs=3, patience=2, n_seeds=2, seed=5, reuse=True,
                              max_train=100, max_val=None)
    cmd = job_command(tmp_path / "data", tmp_path / "job", args)
    assert cmd[2] == "experiment=full_dynamic_k_reranker" and f"hydra.run.dir={tmp_path / 'job'}" in cmd
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        overrides = [c for c in cmd[2:] if not c.startswith("hydra.")]
        cfg = compose(config_name="evaluate", overrides=[f"paths.root_dir={ROOT}", *overrides])
    sc = cfg.selectors
    assert cfg.mode == "selectors" and sc.scores == "reranker" and cfg.dataset.name == "annotated_squad_full"
    assert cfg.reranker.path == str(tmp_path / "rr" / "cross_encoder" / "model")
    assert sc.exclude_questions == str(tmp_path / "rr" / "cross_encoder" / "questions.json")
    assert (sc.max_questions.train, sc.max_questions.val) == (100, 600)  # --max-val not given: the recipe's
    assert sc.grid == "quick" and sc.probes is False
    assert dict(sc.budget) == {"batch_size": 64, "max_epochs": 3, "patience": 2, "n_seeds": 2}
    assert cfg.seed == 5 and cfg.force is False and cfg.paths.data_dir == str(tmp_path / "data")


def _dynamic_k_args(**given):
    """``full_dynamic_k.py``'s options as parsed when only ``given`` are on the command line."""
    from full_dynamic_k import BUDGET

    return argparse.Namespace(**{"dataset": "annotated_full", "order": "retriever", "reranker_run": None,
                                 "grid": "full", "probes": True, "seed": 0, "reuse": False, "max_train": None,
                                 "max_val": None, **dict.fromkeys(BUDGET), **given})


@pytest.mark.parametrize("order", ["retriever", "reranker"])
def test_dynamic_k_squad_runs_the_annotated_recipes_with_their_own_budget(tmp_path, order):
    from full_dynamic_k import job_command

    args = _dynamic_k_args(dataset="annotated", order=order, reranker_run=tmp_path / "rr")
    cmd = job_command(tmp_path / "data", tmp_path / "job", args)
    assert cmd[2] == f"experiment=dynamic_k_squad{'_reranker' if order == 'reranker' else ''}"
    assert not [c for c in cmd if c.startswith("selectors.budget.")]  # options not given: the recipe's budget
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[f"paths.root_dir={ROOT}",
                                                         *[c for c in cmd[2:] if not c.startswith("hydra.")]])
    sc = cfg.selectors
    assert cfg.mode == "selectors" and cfg.dataset.name == "annotated_squad" and sc.scores == order
    assert dict(sc.budget) == {"batch_size": 32, "max_epochs": 150, "patience": 30, "n_seeds": 3}
    assert (sc.max_questions.train, sc.max_questions.val) == (None, None)  # every question not left out
    assert sc.refit is True and sc.grid == "full" and sc.probes is True
    if order == "reranker":
        assert cfg.reranker.path == str(tmp_path / "rr" / "cross_encoder" / "model")
        assert sc.exclude_questions == str(tmp_path / "rr" / "cross_encoder" / "questions.json")


def test_dynamic_k_squad_end_to_end(shared_data_dir, tmp_path):
    if not (shared_data_dir / "annotated" / "squad_contexts.jsonl.gz").is_file():
        pytest.skip("the shared annotated set is absent")
    proc = _run("dynamic_k_squad.py", "--data-dir", str(shared_data_dir), "--out", str(tmp_path), "--max-queries",
                "45", "--grid", "quick", "--no-probes", "--max-epochs", "1", "--n-bootstrap", "200")
    match = DYNAMIC_K_SQUAD_LINE.fullmatch(_last_line(proc))
    assert match, _last_line(proc)
    best_fixed, relative, learned, oracle, gap, p = (float(x) for x in match.groups())
    assert all(0.0 <= v <= 1.0 for v in (best_fixed, relative, learned, oracle))
    assert oracle >= max(best_fixed, relative, learned) - 1e-4
    assert math.isfinite(gap) and gap <= 1.0 + 1e-6 and 0.0 < p <= 1.0
    assert "experiment=dynamic_k_squad " in proc.stdout and "Questions: train 15, val 15, test 15" in proc.stdout
    assert (tmp_path / "subsample_data" / "annotated" / "squad_top10.jsonl.gz").is_file()
    for name in ("table.md", "selectors_test.csv", "udcg_test.png", "results.json", "job/selectors.json"):
        assert (tmp_path / name).is_file(), name


def test_the_reranker_order_defaults_to_the_reranker_best_on_val(tmp_path):
    import json

    from _full_data import best_reranker_run

    assert best_reranker_run(tmp_path) == tmp_path / "udcg_seed0"  # full_rerankers.py has not run
    (tmp_path / "summary.json").write_text(json.dumps({"means": {}}))
    assert best_reranker_run(tmp_path) == tmp_path / "udcg_seed0"  # a summary from before the val choice
    (tmp_path / "summary.json").write_text(json.dumps({"best_on_val": "listnet"}))
    assert best_reranker_run(tmp_path) == tmp_path / "listnet_seed0"


def test_full_end_to_end_pairs_the_reranker_with_the_retriever_on_the_llms_outcomes(tmp_path, monkeypatch, capsys):
    """bench/full_end_to_end.py: its job composes into the named recipe; the outcome rates and paired tests come
    from the job's per_query.csv (the job faked: the reranker turns 6 of 40 wrong answers correct)."""
    import gzip
    import json

    import full_end_to_end as bench

    from udcg_ltr.report import write_csv

    args = bench.argparse.Namespace(questions=200, seed=0, reuse=False)
    cmd = bench.job_command(tmp_path / "data", tmp_path / "job", tmp_path / "rr", args)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[f"paths.root_dir={ROOT}",
                                                         *[c for c in cmd[2:] if not c.startswith("hydra.")]])
    assert cfg.mode == "reranker" and cfg.end_to_end is True and list(cfg.splits) == ["test"]
    assert cfg.dataset.name == "annotated_squad_full" and cfg.llm.quantize == "auto"  # the fast mode (bf16 where native)
    assert cfg.reranker.max_questions == 200 and cfg.reranker.path == str(tmp_path / "rr" / "cross_encoder" / "model")

    def fake_job(command, run_dir):
        rows = []
        for q in range(40):
            outcome = {"retriever@5": "wrong" if q < 10 else "correct",
                       "reranker@5": "wrong" if q < 4 else "correct", "oracle_utility@5": "correct"}
            for system in bench.SYSTEMS.values():
                rows.append({"system": system, "qid": f"q{q}", "split": "test", "udcg@5": 0.5,
                             "outcome": outcome[system] if q != 39 else "abstained"})
        write_csv(run_dir / "per_query.csv", rows)
        return 0.0

    monkeypatch.setattr(bench, "run_job", fake_job)
    data = tmp_path / "data" / "annotated_full"
    data.mkdir(parents=True)
    for name in ("squad_top10.jsonl.gz", "squad_contexts.jsonl.gz"):
        with gzip.open(data / name, "wt") as f:
            f.write("{}\n")
    (tmp_path / "job").mkdir()
    assert bench.main(["--data-dir", str(tmp_path / "data"), "--out", str(tmp_path), "--n-bootstrap", "300",
                       "--reranker-run", str(tmp_path / "rr")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("end_to_end_test_subset: n=40 retriever=0.7250 reranker=0.8750 oracle=0.9750 "
                           "diff_reranker_vs_retriever=+0.1500 [")
    summary = json.loads((tmp_path / "summary.json").read_text())
    by = {r["system"]: r for r in summary["rows"]}
    assert by["retriever"]["abstained"] == pytest.approx(1 / 40) and by["reranker"]["wrong"] == pytest.approx(0.1)
    wrong = next(r for r in summary["paired"] if r["comparison"] == "reranker - retriever" and r["metric"] == "wrong")
    assert wrong["diff"] == pytest.approx(-0.15) and wrong["hi"] < 0 and wrong["n"] == 40
    for name in ("table.md", "table.csv", "outcomes.png"):
        assert (tmp_path / name).is_file(), name
