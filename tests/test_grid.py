"""The grid: a cell annotated by udcg_ltr.jobs.annotate_cell (a stand-in LLM), kept compactly, resumed from the
cache, and measured by the grid multirun (python -m udcg_ltr.jobs.grid -m ...) on test-built data."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from grid_fixtures import FakeLLM, write_tiny_hotpot

from udcg_ltr.data.cells import read_cell
from udcg_ltr.data.readers.hotpotqa import read_hotpotqa
from udcg_ltr.paths import PROJECT_ROOT
from udcg_ltr.studies import grid

LINE = re.compile(r"^grid: dataset=hotpotqa llm=(fake-[ab]) n=(\d+) udcg=\S+ udcg_theta=\S+ ndcg=\S+ erag=\S+ "
                  r"diff_theta_vs_ndcg=\S+ \[\S+, \S+\] wrong_oracle_utility=\S+ wrong_oracle_relevance=\S+$", re.M)


def compose_cell(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return compose(config_name="annotate_cell", overrides=[f"paths.root_dir={PROJECT_ROOT}", *overrides])


def annotate(tmp: Path, llm: str, **extra: str) -> dict:
    from udcg_ltr.jobs import annotate_cell

    overrides = ["dataset=hotpotqa", "llm._target_=grid_fixtures.FakeLLM", f"llm.name={llm}",
                 f"paths.data_dir={tmp / 'data'}", f"paths.annotation_cache_dir={tmp / 'cache' / llm}",
                 f"plan.output={tmp / 'annotations' / 'hotpotqa' / llm}", "plan.n_contexts=4",
                 "plan.chunk_questions=5", "plan.progress=false", *[f"plan.{k}={v}" for k, v in extra.items()]]
    return annotate_cell.run(compose_cell(overrides))


@pytest.fixture(scope="module")
def cells(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("grid")
    write_tiny_hotpot(tmp / "data")
    for llm in ("fake-a", "fake-b"):
        annotate(tmp, llm)
    return tmp


def test_cell_is_compact_complete_and_joins_back(cells):
    folder = cells / "annotations" / "hotpotqa" / "fake-a"
    records, runs, provenance = read_cell(folder, read_hotpotqa(cells / "data" / "hotpotqa" / "dev_300.jsonl.gz"))
    assert provenance["complete"] and provenance["sizes"] == {"questions": 12, "passages": 84, "contexts": 48,
                                                               "planned_questions": 12}
    assert len(records) == 12 and len(runs) == 48
    assert all("fake-a" in p.annotations for r in records for p in r.passages)
    # ids and values only: no passage text reaches the committed files
    import gzip
    assert "Paragraph" not in gzip.open(folder / "passages.jsonl.gz", "rt").read()
    assert "Paragraph" not in gzip.open(folder / "contexts.jsonl.gz", "rt").read()
    # the protocol: half of each question's contexts hold a supporting passage, half none
    by_qid = {r.qid: r for r in records}
    has_rel = [any(by_qid[c.qid].passage(p).is_relevant() for p in c.pids) for c in runs]
    assert sum(has_rel) == 24


def test_rerun_resumes_from_the_cache(cells):
    before = FakeLLM.calls
    summary = annotate(cells, "fake-a")
    assert FakeLLM.calls == before, "a finished cell must not call the LLM again"
    assert summary["sizes"]["contexts"] == 48


def test_max_seconds_stops_between_chunks_and_the_rerun_finishes(tmp_path):
    write_tiny_hotpot(tmp_path / "data")
    first = annotate(tmp_path, "fake-c", max_seconds=0)
    assert first["sizes"]["questions"] == 5 and not first["complete"]
    second = annotate(tmp_path, "fake-c")
    assert second["sizes"]["questions"] == 12 and second["complete"]


def test_grid_multirun_composes_runs_and_summarizes(cells, tmp_path):
    out = tmp_path / "grid"
    cmd = [sys.executable, "-m", "udcg_ltr.jobs.grid", "-m", "grid.dataset=hotpotqa", "grid.llm=fake-a,fake-b",
           f"grid.data_dir={cells / 'data'}", f"grid.annotations_dir={cells / 'annotations'}", f"grid_dir={out}",
           "n_bootstrap=50", "hydra.sweep.dir=" + str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(m.group(1) for m in LINE.finditer(proc.stdout)) == ["fake-a", "fake-b"], proc.stdout
    from udcg_ltr.jobs import grid as grid_job

    def spec_of(dataset, llm):
        return grid.CellSpec(dataset, llm, str(cells / "data"), str(cells / "annotations"))

    summary = grid_job.summarize(out, spec_of)
    assert [c["llm"] for c in summary["cells"]] == ["fake-a", "fake-b"]
    assert (out / "summary.png").stat().st_size > 0 and "UDCG_theta - nDCG" in (out / "summary.md").read_text()
    (agreement,) = summary["agreement"]
    assert agreement["passages"] == 84 and agreement["sign_changed"] == 0.0


def test_outcome_equal_to_hits_correlates_perfectly(cells):
    # The stand-in answers correctly exactly when a context holds the answer: HITS is the outcome itself.
    cell = grid.CellSpec("hotpotqa", "fake-a", str(cells / "data"), str(cells / "annotations")).load()
    rows = {r["metric"]: r for r in grid.correlation_rows(cell, n_bootstrap=50)}
    assert rows["hits"]["spearman"] == pytest.approx(1.0) and rows["hits"]["spearman_n"] == 12
    assert rows["hits"]["kendall"] == pytest.approx(1.0)
    oracle = {r["criterion"]: r for r in grid.oracle_rows(cell, n_bootstrap=50)}
    assert oracle["relevance"]["correct"] == pytest.approx(1.0) and oracle["relevance"]["wrong"] == 0.0


def test_cross_fitting_without_splits_and_train_fit_with_them(cells):
    cell = grid.CellSpec("hotpotqa", "fake-a", str(cells / "data"), str(cells / "annotations")).load()
    from udcg_ltr.data.schema import records_by_qid
    from udcg_ltr.fit.pairs import build_context_table

    by_qid = records_by_qid(cell.records)
    table = build_context_table(by_qid, cell.runs, "fake-a", k=5)
    folds = grid.fit_folds(table, by_qid, seed=0)
    assert set(folds.tolist()) <= set(range(1, grid.CROSS_FIT_FOLDS + 1)) and len(set(folds.tolist())) > 1
    for q in set(table.qids.tolist()):  # a question's contexts share one fold
        assert len(set(folds[table.qids == q].tolist())) == 1
    for i, r in enumerate(cell.records):
        r.split = "train" if i < 8 else "test"
    folds = grid.fit_folds(table, by_qid, seed=0)
    assert set(folds.tolist()) == {0, 1}


def test_utility_agreement_of_a_cell_with_itself_and_with_another(cells):
    spec = grid.CellSpec("hotpotqa", "fake-a", str(cells / "data"), str(cells / "annotations"))
    a = spec.load()
    same = grid.utility_agreement(a, spec.load(), n_bootstrap=50)
    assert same["spearman"] == pytest.approx(1.0) and same["distractor_class_changed"] == 0.0
    b = grid.CellSpec("hotpotqa", "fake-b", str(cells / "data"), str(cells / "annotations")).load()
    other = grid.utility_agreement(a, b, n_bootstrap=50)
    assert other["spearman"] < 1.0 and 0.0 < other["distractor_class_changed"] < 1.0
    assert np.isfinite([other["spearman_lo"], other["spearman_hi"]]).all()


@pytest.mark.parametrize("override, message", [
    ("plan.n_contexts=0", "plan.n_contexts=0"), ("plan.chunk_questions=-1", "plan.chunk_questions=-1"),
    ("plan.max_seconds=nan", "plan.max_seconds=nan"), ("plan.seed=-2", "plan.seed=-2"),
    ("plan.questions={all: -1}", "plan.questions.all=-1")])
def test_cell_plan_is_checked_before_the_data_or_the_llm(tmp_path, override, message):
    from hydra.errors import InstantiationException

    before = FakeLLM.calls
    with pytest.raises((ValueError, InstantiationException), match=re.escape(message)):
        annotate(tmp_path, "fake-d", **dict([override.removeprefix("plan.").split("=", 1)]))
    assert FakeLLM.calls == before and not (tmp_path / "annotations").exists()


def test_cell_spec_refuses_unknown_dataset_and_bad_context_count():
    with pytest.raises(ValueError, match="grid.dataset='nq'"):
        grid.CellSpec("nq", "x", "d", "a")
    with pytest.raises(ValueError, match="grid.n_contexts=0"):
        grid.CellSpec("hotpotqa", "x", "d", "a", n_contexts=0)


def test_bench_line_matches_the_issue_format(cells):
    from udcg_ltr.jobs.grid import compute_cell
    from udcg_ltr.studies.grid_report import bench_line

    spec = grid.CellSpec("hotpotqa", "fake-b", str(cells / "data"), str(cells / "annotations"))
    line = bench_line(json.loads(json.dumps(compute_cell(spec, n_bootstrap=50, seed=0), default=str)))
    assert LINE.fullmatch(line), line
