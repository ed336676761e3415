"""Reader for BEIR data set folders.

Layout (as distributed by BEIR)::

    FOLDER/corpus.jsonl        {"_id": str, "title": str, "text": str, "metadata": {...}}  one per line
    FOLDER/queries.jsonl       {"_id": str, "text": str, "metadata": {...}}                one per line
    FOLDER/qrels/{split}.tsv   header "query-id<TAB>corpus-id<TAB>score", then one judgement a line

(``.gz`` variants of each file are read too.) :func:`read_beir` builds one
:class:`QueryRecord` per query of the split: the pool is the query's top ``top_k`` documents of a
given run (a ``{qid: {docid: score}}`` dict or a TREC run file), or, without a run, every judged
document of the query (in qrels order, no rank or score). Relevance is the qrels grade (0 and
``extra["unjudged"] = True`` for a retrieved but unjudged document). Only the documents a pool
needs are kept from the corpus, so large corpora stream through in one pass.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from udcg_ltr.data.jsonl import parse_lines
from udcg_ltr.data.readers._common import get_field, parse_grade
from udcg_ltr.data.readers.trec import Qrels, Run, as_nested_dict, grade_counts, ranked_items, read_trec_run
from udcg_ltr.data.schema import MAX_GRADE, DataError, MissingFileError, Passage, QueryRecord, validate_record
from udcg_ltr.io import open_text


def _find(folder: Path, name: str) -> Path:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.exists():
            return candidate
    raise MissingFileError("no such file (nor its .gz)", path=str(folder / name))


def read_beir_qrels(path: str | os.PathLike, *, grades: tuple[int, int] | None = None) -> Qrels:
    """``{qid: {docid: grade}}`` from a BEIR qrels TSV (header line ``query-id corpus-id score``).

    Grades are integers (``"1.0"`` accepted; ``"inf"``, ``"0.5"`` not); ``grades=(lowest,
    highest)`` bounds them. A pair judged twice and a file without judgements are errors.
    """
    qrels: Qrels = {}
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            cols = line.rstrip("\r\n").split("\t")
            if lineno == 1 and cols[:1] == ["query-id"]:
                continue
            if len(cols) != 3:
                raise DataError(f"expected 3 tab-separated columns (query-id corpus-id score), got {len(cols)}",
                                path=str(path), line=lineno)
            qid, docid, grade = (c.strip() for c in cols)
            if not qid or not docid:
                raise DataError("empty id", path=str(path), line=lineno,
                                field="column 1 (query-id)" if not qid else "column 2 (corpus-id)")
            try:
                value = parse_grade(grade)
            except DataError as err:
                raise DataError(err.reason, path=str(path), line=lineno, field="column 3 (score)") from None
            if grades is not None and not grades[0] <= value <= grades[1]:
                raise DataError(f"grade {value} outside {grades[0]}..{grades[1]}", path=str(path), line=lineno,
                                field="column 3 (score)")
            judged = qrels.setdefault(qid, {})
            if docid in judged:
                raise DataError(f"document {docid!r} of query {qid!r} judged twice ({judged[docid]} and {value})",
                                path=str(path), line=lineno, field="column 2 (corpus-id)")
            judged[docid] = value
    if not qrels:
        raise DataError("no records (no judgement in the file)", path=str(path))
    return qrels


def _query(obj: Any) -> tuple[str, str]:
    return str(get_field(obj, "_id", (str, int))), get_field(obj, "text", str)


def _document(obj: Any) -> tuple[str, str, str]:
    return (str(get_field(obj, "_id", (str, int))), get_field(obj, "text", str),
            get_field(obj, "title", str, optional=True, default=""))


def read_beir_queries(path: str | os.PathLike) -> dict[str, str]:
    """``{qid: text}`` from ``queries.jsonl`` (an id given twice, or no query at all, is an error)."""
    return dict(parse_lines(path, _query, unique=lambda q: q[0], unique_field="_id"))


def read_beir_corpus(path: str | os.PathLike, ids: set[str] | None = None) -> dict[str, dict[str, str]]:
    """``{docid: {"title", "text"}}`` from ``corpus.jsonl``; with ``ids``, only those documents.

    Every line is checked (a malformed line or a repeated id is an error even when its document is
    not wanted).
    """
    corpus: dict[str, dict[str, str]] = {}
    for docid, text, title in parse_lines(path, _document, unique=lambda d: d[0], unique_field="_id"):
        if ids is None or docid in ids:
            corpus[docid] = {"title": title, "text": text}
    return corpus


def read_beir(folder: str | os.PathLike, split: str = "test", run: Run | str | os.PathLike | None = None,
              top_k: int | None = 100) -> list[QueryRecord]:
    """One record per query of ``qrels/{split}.tsv``, pooled from ``run`` (a ``{qid: {docid: score}}`` mapping,
    a ranx ``Run`` or a TREC run file) or from the judged documents.

    With a run, each pool is the query's top ``top_k`` documents by descending score (``rank`` =
    position, ``score`` = run score); a judged query missing from the run has an empty pool and is
    reported. Without a run, the pool is the query's judged documents (``top_k`` ignored).
    ``record.extra["judged_grades"]`` counts the query's judgements per grade. A document or
    query id without text is an error naming the file.
    """
    folder = Path(folder)
    qrels_path = _find(folder / "qrels", f"{split}.tsv")
    qrels = read_beir_qrels(qrels_path, grades=(0, MAX_GRADE))
    queries_path = _find(folder, "queries.jsonl")
    queries = read_beir_queries(queries_path)
    if isinstance(run, (str, os.PathLike)):
        run = read_trec_run(run)
    elif run is not None:
        run = as_nested_dict(run, "run")  # a mapping or a ranx Run
    pools: dict[str, list[tuple[str, float | None]]] = {}
    for qid, judged in qrels.items():
        if run is None:
            pools[qid] = [(docid, None) for docid in judged]
        else:
            ranked = ranked_items(run.get(qid, {}))
            pools[qid] = [(d, float(s)) for d, s in (ranked if top_k is None else ranked[:top_k])]
    needed = {docid for pool in pools.values() for docid, _ in pool}
    corpus_path = _find(folder, "corpus.jsonl")
    corpus = read_beir_corpus(corpus_path, needed)
    records = []
    for qid, judged in qrels.items():
        if qid not in queries:
            raise DataError(f"query {qid!r} of the qrels has no text in {queries_path}", path=str(qrels_path),
                            field="column 1 (query-id)")
        passages = []
        for rank, (docid, score) in enumerate(pools[qid], start=1):
            doc = corpus.get(docid)
            if doc is None:
                raise DataError(f"document {docid!r} (query {qid!r}) is not in the corpus", path=str(corpus_path),
                                field="_id")
            passages.append(Passage(pid=docid, title=doc["title"], text=doc["text"],
                                    rank=rank if score is not None else None, score=score,
                                    relevance=int(judged.get(docid, 0)), extra={"unjudged": docid not in judged}))
        record = QueryRecord(qid=qid, question=queries[qid], passages=passages, split=split,
                             extra={"judged_grades": grade_counts(judged)})
        source: Any = "run" if run is not None else qrels_path
        try:
            records.append(validate_record(record))
        except DataError as err:
            raise DataError(f"{err.reason} (pool from {source})", path=str(qrels_path),
                            field=f"query {qid!r} {err.field}") from None
    return records
