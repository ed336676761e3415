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
from udcg_ltr.data.readers import trec
from udcg_ltr.data.schema import MAX_GRADE, DataError, QueryRecord, get_field, validate_record
from udcg_ltr.io import MissingFileError

_QRELS_COLUMNS = ("column 1 (query-id)", "column 2 (corpus-id)", "column 3 (score)")


def _find(folder: Path, name: str) -> Path:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.exists():
            return candidate
    raise MissingFileError("no such file (nor its .gz)", path=str(folder / name))


def _qrels_rows(path: str | os.PathLike) -> Iterator[tuple[int, str, str, str]]:
    """``(line, qid, docid, grade text)`` of each judgement line of a BEIR qrels TSV (after its header)."""
    for lineno, cols in trec.iter_columns(path, ("query-id", "corpus-id", "score"), tabs=True, header="query-id"):
        qid, docid, grade = (c.strip() for c in cols)
        if not qid or not docid:
            raise DataError("empty id", path=str(path), line=lineno, field=_QRELS_COLUMNS[0 if not qid else 1])
        yield lineno, qid, docid, grade


def _query(obj: Any) -> tuple[str, str]:
    return str(get_field(obj, "_id", (str, int))), get_field(obj, "text", str)


def _document(obj: Any) -> tuple[str, str, str]:
    return (str(get_field(obj, "_id", (str, int))), get_field(obj, "text", str),
            get_field(obj, "title", str, optional=True, default=""))


def read_beir(folder: str | os.PathLike, split: str = "test", run: trec.Run | str | os.PathLike | None = None,
              top_k: int | None = 100) -> list[QueryRecord]:
    """One record per query of ``qrels/{split}.tsv``, labelled by :func:`~.trec.judged_record`, its pool
    the query's top ``top_k`` documents of ``run`` (a ``{qid: {docid: score}}`` mapping, a ranx ``Run`` or
    a TREC run file; a judged query missing from it has an empty pool, an error) or, without a run, its
    judged documents (no rank or score). A document or query without text is an error."""
    trec.check_top_k(top_k)
    folder = Path(folder)
    qrels_path = _find(folder / "qrels", f"{split}.tsv")
    qrels = trec.qrels_from_rows(qrels_path, _qrels_rows(qrels_path), (0, MAX_GRADE), _QRELS_COLUMNS[1:])
    queries_path = _find(folder, "queries.jsonl")
    queries = dict(parse_lines(queries_path, _query, unique=lambda q: q[0], unique_field="_id"))
    if isinstance(run, (str, os.PathLike)):
        run = trec.read_trec_run(run)
    elif run is not None:
        run = trec.checked_run(run)  # a mapping or a ranx Run, its scores checked
    pools: dict[str, list[tuple[str, float | None]]] = {
        qid: [(docid, None) for docid in judged] if run is None
        else [(d, float(s)) for d, s in trec.ranked_items(run.get(qid, {}))[:top_k]]
        for qid, judged in qrels.items()}
    needed = {docid for pool in pools.values() for docid, _ in pool}
    corpus_path = _find(folder, "corpus.jsonl")
    documents = parse_lines(corpus_path, _document, unique=lambda d: d[0], unique_field="_id")
    corpus = {doc[0]: doc for doc in documents if doc[0] in needed}  # every line is checked
    source: Any = "run" if run is not None else qrels_path
    records = []
    for qid, judged in qrels.items():
        if qid not in queries:
            raise DataError(f"query {qid!r} of the qrels has no text in {queries_path}", path=str(qrels_path),
                            field=_QRELS_COLUMNS[0])
        hits = []
        for rank, (docid, score) in enumerate(pools[qid], start=1):
            if docid not in corpus:
                raise DataError(f"document {docid!r} (query {qid!r}) is not in the corpus", path=str(corpus_path),
                                field="_id")
            _, text, title = corpus[docid]
            hits.append((docid, title, text, rank if score is not None else None, score))
        try:
            records.append(validate_record(trec.judged_record(qid, queries[qid], hits, judged, split=split)))
        except DataError as err:
            raise DataError(f"{err.reason} (pool from {source})", path=str(qrels_path),
                            field=f"query {qid!r} {err.field}") from None
    return records
