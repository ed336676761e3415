"""Reader for BEIR data set folders.

Layout (as distributed by BEIR)::

    FOLDER/corpus.jsonl        {"_id": str, "title": str, "text": str, "metadata": {...}}  one per line
    FOLDER/queries.jsonl       {"_id": str, "text": str, "metadata": {...}}                one per line
    FOLDER/qrels/{split}.tsv   header "query-id<TAB>corpus-id<TAB>score", then one judgement a line

(``.gz`` variants too.) :func:`read_beir` builds one record per query of the split; only the
documents a pool needs are kept from the corpus, so large corpora stream through in one pass.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from udcg_ltr.data.jsonl import parse_lines
from udcg_ltr.data.readers.trec import (
    Qrels,
    Run,
    as_nested_dict,
    judged_record,
    qrels_from_rows,
    ranked_items,
    read_trec_run,
)
from udcg_ltr.data.schema import MAX_GRADE, DataError, QueryRecord, get_field, validate_record
from udcg_ltr.io import MissingFileError, open_text

_QRELS_COLUMNS = ("column 1 (query-id)", "column 2 (corpus-id)", "column 3 (score)")


def _find(folder: Path, name: str) -> Path:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.exists():
            return candidate
    raise MissingFileError("no such file (nor its .gz)", path=str(folder / name))


def _qrels_rows(path: str | os.PathLike) -> Iterator[tuple[int, str, str, str]]:
    """``(line, qid, docid, grade text)`` of each judgement line of a BEIR qrels TSV (after its header)."""
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            cols = line.rstrip("\r\n").split("\t")
            if not line.strip() or (lineno == 1 and cols[:1] == ["query-id"]):
                continue
            if len(cols) != 3:
                raise DataError(f"expected 3 tab-separated columns (query-id corpus-id score), got {len(cols)}",
                                path=str(path), line=lineno)
            qid, docid, grade = (c.strip() for c in cols)
            if not qid or not docid:
                raise DataError("empty id", path=str(path), line=lineno,
                                field=_QRELS_COLUMNS[0 if not qid else 1])
            yield lineno, qid, docid, grade


def read_beir_qrels(path: str | os.PathLike, *, grades: tuple[int, int] | None = None) -> Qrels:
    """``{qid: {docid: grade}}`` from a BEIR qrels TSV (header ``query-id corpus-id score``), as
    :func:`~udcg_ltr.data.readers.trec.qrels_from_rows` (``"1.0"`` is a grade; ``"inf"``, ``"0.5"`` not)."""
    return qrels_from_rows(path, _qrels_rows(path), grades, _QRELS_COLUMNS[1:])


def _query(obj: Any) -> tuple[str, str]:
    return str(get_field(obj, "_id", (str, int))), get_field(obj, "text", str)


def _document(obj: Any) -> tuple[str, str, str]:
    return (str(get_field(obj, "_id", (str, int))), get_field(obj, "text", str),
            get_field(obj, "title", str, optional=True, default=""))


def read_beir_queries(path: str | os.PathLike) -> dict[str, str]:
    """``{qid: text}`` from ``queries.jsonl`` (an id given twice, or no query at all, is an error)."""
    return dict(parse_lines(path, _query, unique=lambda q: q[0], unique_field="_id"))


def read_beir_corpus(path: str | os.PathLike, ids: set[str] | None = None) -> dict[str, dict[str, str]]:
    """``{docid: {"title", "text"}}`` from ``corpus.jsonl``; with ``ids``, only those documents (every line
    is still checked: a malformed line or a repeated id is an error even when not wanted)."""
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
    reported. Without a run, the pool is the query's judged documents (``top_k`` ignored). Labels as
    :func:`~udcg_ltr.data.readers.trec.judged_record`. A document or query without text is an error.
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
    pools: dict[str, list[tuple[str, float | None]]] = {
        qid: [(docid, None) for docid in judged] if run is None
        else [(d, float(s)) for d, s in ranked_items(run.get(qid, {}))[:top_k]]
        for qid, judged in qrels.items()}
    needed = {docid for pool in pools.values() for docid, _ in pool}
    corpus_path = _find(folder, "corpus.jsonl")
    corpus = read_beir_corpus(corpus_path, needed)
    source: Any = "run" if run is not None else qrels_path
    records = []
    for qid, judged in qrels.items():
        if qid not in queries:
            raise DataError(f"query {qid!r} of the qrels has no text in {queries_path}", path=str(qrels_path),
                            field=_QRELS_COLUMNS[0])
        hits = []
        for rank, (docid, score) in enumerate(pools[qid], start=1):
            doc = corpus.get(docid)
            if doc is None:
                raise DataError(f"document {docid!r} (query {qid!r}) is not in the corpus", path=str(corpus_path),
                                field="_id")
            hits.append((docid, doc["title"], doc["text"], rank if score is not None else None, score))
        try:
            records.append(validate_record(judged_record(qid, queries[qid], hits, judged, split=split)))
        except DataError as err:
            raise DataError(f"{err.reason} (pool from {source})", path=str(qrels_path),
                            field=f"query {qid!r} {err.field}") from None
    return records
