"""The TREC table equals trec_eval (pytrec_eval) and ranx: R and the graded ideal from the qrels,
unjudged queries dropped and counted, ties broken as trec_eval does (or written so that it reads ours).

Three levels: random runs with ties, unretrieved relevant documents and queries without qrels
(hypothesis, no data needed); the BM25 run of TREC DL19 (``../shared/data/trec_dl19``, skipped
when absent); and the table that ``evaluate.py experiment=dl19_rerank`` itself produces, with a
stand-in reranker (BM25 scores rounded to integers, so many ties) instead of a trained model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udcg_ltr.data.readers.trec import read_trec_qrels, read_trec_run, trec_order, write_trec_run
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.jobs.systems import trec_metrics
from udcg_ltr.metrics.reference import pytrec_eval_table, ranx_table
from udcg_ltr.paths import data_dir

CUTOFFS = (5, 10)
TOL = 1e-9


def pytrec_reference(qrels, run, columns, threshold: int) -> dict[str, dict[str, float]]:
    """Per-query ``{column: value}`` from trec_eval (through pytrec_eval), ``-l threshold``."""
    pytest.importorskip("pytrec_eval")
    return pytrec_eval_table(qrels, run, columns, threshold)


def ranx_reference(qrels, run, columns, threshold: int) -> dict[str, dict[str, float]]:
    """Per-query ``{column: value}`` from ranx (given scores that encode trec_eval's order of ties)."""
    pytest.importorskip("ranx")
    return ranx_table(qrels, run, columns, threshold)


def assert_matches(ours: dict[str, np.ndarray], qids, reference: dict[str, dict[str, float]]) -> float:
    """Every column of every judged query within TOL of the reference; unjudged queries NA. Returns the max diff."""
    worst = 0.0
    for name, values in ours.items():
        for q, v in zip(qids, values):
            if q not in reference:
                assert np.isnan(v), (name, q)
                continue
            diff = abs(v - reference[q][name])
            worst = max(worst, diff)
            assert diff <= TOL, (name, q, v, reference[q][name])
    return worst


# ---- random runs: ties, unretrieved relevant documents, queries without qrels -----------------

ALPHABET = "abAB9_é"  # upper < digits < lower in byte order, and a two-byte character


@st.composite
def trec_worlds(draw):
    n_queries = draw(st.integers(1, 5))
    records, qrels, run = [], {}, {}
    for qi in range(n_queries):
        qid = f"q{qi}"
        n_docs = draw(st.integers(1, 12))
        ids = draw(st.lists(st.text(ALPHABET, min_size=1, max_size=3), min_size=n_docs, max_size=n_docs, unique=True))
        values = [0.0, 0.5, 1.0, 1.0 + 1e-9, 2.0, -1.0]  # 1 and 1 + 1e-9 differ in float64, tie in float32
        scores = draw(st.lists(st.sampled_from(values), min_size=n_docs, max_size=n_docs))
        grades = draw(st.lists(st.sampled_from([None, 0, 1, 2, 3]), min_size=n_docs, max_size=n_docs))
        unretrieved = draw(st.lists(st.integers(0, 3), max_size=4))
        judged = {d: g for d, g in zip(ids, grades) if g is not None}
        judged.update({f"missing{j}": g for j, g in enumerate(unretrieved)})
        if judged and (qi == 0 or draw(st.booleans())):  # the other queries have no qrels at all
            qrels[qid] = judged
        else:
            judged = {}
        passages = [Passage(pid=d, text="t", rank=j + 1, score=s, relevance=judged.get(d, 0))
                    for j, (d, s) in enumerate(zip(ids, scores))]
        counts: dict[str, int] = {}
        for g in judged.values():
            counts[str(g)] = counts.get(str(g), 0) + 1
        records.append(QueryRecord(qid=qid, question="?", passages=passages, extra={"judged_grades": counts}))
        run[qid] = dict(zip(ids, scores))
    return records, qrels, run, draw(st.sampled_from([1, 2]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trec_worlds())
def test_trec_table_equals_trec_eval_on_random_runs_with_ties(world):
    records, qrels, run, threshold = world
    scores = [np.array([p.score for p in r.passages]) for r in records]
    ours = trec_metrics(records, scores, relevance_threshold=threshold, cutoffs=CUTOFFS, ties="trec")
    assert len(ours) >= 8
    qids = [r.qid for r in records]
    reference = pytrec_reference(qrels, run, list(ours), threshold)
    assert set(reference) == {q for q in qids if q in qrels}  # trec_eval drops queries without qrels
    assert_matches(ours, qids, reference)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trec_worlds())
def test_written_run_reads_back_in_our_order(tmp_path_factory, world):
    """write_trec_run: trec_eval's reading of the file is the order our table used (either tie rule)."""
    records, qrels, run, threshold = world
    scores = [np.array([p.score for p in r.passages]) for r in records]
    path = tmp_path_factory.mktemp("run") / "run.txt"
    for ties in ("stable", "trec"):
        write_trec_run(path, run, ties=ties)
        lines = [ln.split() for ln in path.read_text(encoding="utf-8").splitlines()]
        back = read_trec_run(path)
        for qid in run:
            rows = [ln for ln in lines if ln[0] == qid]
            assert [int(ln[3]) for ln in rows] == list(range(1, len(rows) + 1))
            assert trec_order(back[qid]) == [ln[2] for ln in rows]  # the rank column is trec_eval's order
        ours = trec_metrics(records, scores, relevance_threshold=threshold, cutoffs=CUTOFFS, ties=ties)
        assert_matches(ours, [r.qid for r in records], pytrec_reference(qrels, back, list(ours), threshold))
    trec_scores = read_trec_run(path)  # the last file: ties="trec" writes the scores unchanged
    assert trec_scores == {q: {d: float(s) for d, s in v.items()} for q, v in run.items()}


# ---- TREC DL19 --------------------------------------------------------------------------------

def _dl19_paths():
    folder = data_dir() / "trec_dl19"
    results, qrels = folder / "retrieve_results_dl19.json.gz", folder / "qrels.dl19-passage.txt.gz"
    if not (results.is_file() and qrels.is_file()):
        pytest.skip(f"TREC DL19 not found under {folder}")
    return results, qrels


@pytest.fixture(scope="module")
def dl19():
    from udcg_ltr.data.readers.trec import read_dl19

    results, qrels_path = _dl19_paths()
    return read_dl19(results, qrels_path), read_trec_qrels(qrels_path)


def _bm25(records):
    return [np.array([p.score for p in r.passages]) for r in records]


@pytest.mark.parametrize("reference", [pytrec_reference, ranx_reference])
def test_dl19_bm25_table_equals_the_reference(dl19, reference):
    records, qrels = dl19
    run = {r.qid: {p.pid: p.score for p in r.passages} for r in records}
    ours = trec_metrics(records, _bm25(records), relevance_threshold=2, cutoffs=CUTOFFS, ties="trec")
    assert {"ndcg@10", "ndcg@5", "map@10", "recall@10", "precision@10", "mrr@10", "map", "ndcg"} <= set(ours)
    assert assert_matches(ours, [r.qid for r in records], reference(qrels, run, list(ours), 2)) <= TOL
    # the numbers of the issue: trec_eval's MAP@10 and R@10, not the pool-relative 0.226 / 0.328
    assert np.mean(ours["map@10"]) == pytest.approx(0.12722168847006304, abs=1e-12)
    assert np.mean(ours["recall@10"]) == pytest.approx(0.17512799328543338, abs=1e-12)


def _evaluate_dl19(tmp_path, monkeypatch, ties: str, *extra: str, caches: list | None = None) -> dict[str, float]:
    """``evaluate.py experiment=dl19_rerank`` in process, the reranker replaced by rounded BM25 scores; the
    scores cache each call was given goes to ``caches``."""
    from hydra import compose, initialize_config_dir

    from udcg_ltr.jobs import evaluate_job

    def stand_in_scores(ctx, records, cache=None):
        (caches if caches is not None else []).append(cache)
        return [np.round(s) for s in _bm25(records)]

    root = Path(evaluate_job.__file__).resolve().parents[2]
    monkeypatch.setattr(evaluate_job, "_reranker_scores", stand_in_scores)
    stand_in = tmp_path / "stand-in"  # an existing folder: the config check wants one; nothing is loaded from it
    stand_in.mkdir(parents=True)
    with initialize_config_dir(config_dir=f"{root}/conf", version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[
            "experiment=dl19_rerank", "~llm", "logger=none", f"reranker.path={stand_in}", f"paths.root_dir={root}",
            f"paths.data_dir={data_dir()}", f"paths.output_dir={tmp_path / 'run'}",
            f"paths.cache_dir={tmp_path / 'cache'}", f"++ties={ties}", *extra])
        return evaluate_job.evaluate(cfg)


@pytest.mark.parametrize("ties", ["trec", "stable"])
def test_evaluate_dl19_rerank_tables_equal_trec_eval(dl19, tmp_path, monkeypatch, ties):
    """Both tables of mode=reranker (the top-10 contexts' and the full rankings' TREC table) against
    trec_eval on the run file the project writes for the same scores."""
    records, qrels = dl19
    metrics = _evaluate_dl19(tmp_path, monkeypatch, ties)
    rankings = {"retriever": {r.qid: {p.pid: -float(p.rank) for p in r.passages} for r in records},
                "reranker": {r.qid: {p.pid: float(np.round(p.score)) for p in r.passages} for r in records}}
    assert sum(len(set(s.values())) < len(s) for s in rankings["reranker"].values()) > 20  # ties to break
    columns = [f"{name}@{c}" for c in (5, 10) for name in ("ndcg", "map", "precision", "recall", "mrr")] + \
        ["ndcg", "map", "recall", "mrr"]
    checked = 0
    for system, run in rankings.items():
        path = write_trec_run(tmp_path / f"{system}.run", run, ties=ties)
        reference = pytrec_reference(qrels, read_trec_run(path), columns, 2)
        for c in columns:
            expected = np.mean([reference[q][c] for q in reference])
            assert metrics[f"test/trec/{system}/{c}"] == pytest.approx(expected, abs=TOL), (system, c)
            checked += 1
        for c in ("ndcg@10", "map@10", "precision@10", "recall@10", "mrr@10"):  # the context table of the top 10
            expected = np.mean([reference[q][c] for q in reference])
            assert metrics[f"test/{system}@10/{c}"] == pytest.approx(expected, abs=TOL), (system, c)
            checked += 1
    assert checked == 2 * (len(columns) + 5)
    # the tie rule matters here: trec_eval on the file written with the other rule disagrees
    other = write_trec_run(tmp_path / "other.run", rankings["reranker"], ties="stable" if ties == "trec" else "trec")
    reference = pytrec_reference(qrels, read_trec_run(other), ["ndcg@5"], 2)
    assert abs(metrics["test/trec/reranker/ndcg@5"] - np.mean([v["ndcg@5"] for v in reference.values()])) > 1e-3
    assert metrics["test/trec/unjudged_queries"] == 0 and metrics["test/trec/judged_queries"] == 43
    assert metrics["test/reranker@10/unjudged_queries"] == 0
    assert (tmp_path / "run" / "trec.md").is_file() and (tmp_path / "run" / "results.md").is_file()


def test_reranker_mode_evaluates_a_seeded_draw_of_max_questions(dl19, tmp_path, monkeypatch):
    """``reranker.max_questions``: the questions of the split drawn with the job's seed, every table on them."""
    from udcg_ltr.jobs.common import subsample
    from udcg_ltr.report import read_csv

    records, _ = dl19
    metrics = _evaluate_dl19(tmp_path, monkeypatch, "stable", "reranker.max_questions=10", "seed=3")
    assert metrics["test/trec/judged_queries"] == 10
    drawn = [r["qid"] for r in read_csv(tmp_path / "run" / "per_query.csv") if r["system"] == "retriever@10"]
    assert drawn == [r.qid for r in subsample(records, 10, seed=3)] != [r.qid for r in records[:10]]


def test_reranker_mode_hands_its_scores_cache_to_the_scoring(dl19, tmp_path, monkeypatch):
    """``reranker.scores_cache``: the file the model's scores are kept in and reused from (bench/cross_llm.py
    scores each model once for two LLMs); null by default."""
    default, given = [], []
    _evaluate_dl19(tmp_path / "a", monkeypatch, "stable", caches=default)
    _evaluate_dl19(tmp_path / "b", monkeypatch, "stable", f"reranker.scores_cache={tmp_path / 'scores.json'}",
                   caches=given)
    assert default == [None] and given == [tmp_path / "scores.json"]


def test_unjudged_queries_are_dropped_and_counted(dl19, tmp_path):
    """A run query the qrels do not judge: NA in every relevance column, counted, the means unchanged."""
    from udcg_ltr.jobs.systems import evaluate_systems, retrieval_scores
    from udcg_ltr.models.evaluation import top_k_by

    records, _ = dl19
    extra = QueryRecord(qid="no-qrels", question="?", extra={"judged_grades": {}},
                        passages=[Passage(pid=f"x{j}", text="t", rank=j + 1, score=1.0 - j, relevance=0)
                                  for j in range(10)])
    both = [*records, extra]
    [base] = evaluate_systems(records, {"bm25": top_k_by(records, retrieval_scores(records), 10)}, llm=None, k=10,
                              relevance_threshold=2)
    [with_extra] = evaluate_systems(both, {"bm25": top_k_by(both, retrieval_scores(both), 10)}, llm=None, k=10,
                                    relevance_threshold=2)
    assert with_extra.summary()["unjudged_queries"] == 1 and base.summary()["unjudged_queries"] == 0
    for name in ("ndcg@10", "map@10", "recall@10", "precision@10", "mrr@10", "hits@10"):
        assert np.isnan(with_extra.per_query[name][-1])
        assert with_extra.summary()[name] == pytest.approx(base.summary()[name], abs=1e-15)
    table = trec_metrics(both, _bm25(both), relevance_threshold=2)
    assert all(np.isnan(v[-1]) and np.isfinite(v[:-1]).all() for v in table.values())
