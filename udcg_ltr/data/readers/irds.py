"""Reader for any ir_datasets id (``dataset=ir_datasets dataset.id=...``), from ir_datasets' local cache.

One record per judged query, as the BEIR reader builds: the pool is the query's top ``top_k`` documents
of a run (``run_path``, else the dataset's ``scoreddocs``) or its judged documents (qrels order, no
rank or score); only pooled documents are looked up. Offline, only ids already in ``IR_DATASETS_HOME``
load. Errors name the id's part (``ir_datasets:ID qrels``), the position in it (``line``) and the field.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from udcg_ltr.data.readers.trec import (
    Run,
    check_top_k,
    judged_record,
    ranked_items,
    read_trec_run,
    records_from_run,
    run_score,
)
from udcg_ltr.data.schema import MAX_GRADE, DataError, QueryRecord, validate_record
from udcg_ltr.io import optional_import

log = logging.getLogger(__name__)

#: Fields tried, in order, for a query's text and a document's text / title (ir_datasets' record types differ).
QUERY_TEXT_FIELDS = ("text", "title", "query", "description")
DOC_TEXT_FIELDS = ("text", "body", "passage", "contents", "abstract")
DOC_TITLE_FIELDS = ("title",)


def _field(item: Any, names: Iterable[str], source: str, what: str, *, line: int | None = None,
           optional: bool = False) -> str:
    """The first string field of ``item`` among ``names`` (an ir_datasets namedtuple); ``""`` when ``optional``."""
    for name in names:
        if isinstance(value := getattr(item, name, None), str):
            return value
    if optional:
        return ""
    fields = getattr(item, "_fields", None) or (sorted(vars(item)) if hasattr(item, "__dict__") else [])
    raise DataError(f"no {what} field (tried {', '.join(names)}; the record has {list(fields)})", path=source,
                    line=line, field=what)


def _has(dataset: Any, part: str) -> bool:
    """Whether the dataset offers ``part``: its ``has_<part>()``, else the accessor the reader calls."""
    if callable(has := getattr(dataset, f"has_{part}", None)):
        return bool(has())
    return callable(getattr(dataset, "docs_store" if part == "docs" else f"{part}_iter", None))


def read_ir_dataset(dataset_id: str, *, split: str | None = None, top_k: int | None = 100,
                    run_path: str | os.PathLike | None = None, query_field: str | None = None) -> list[QueryRecord]:
    """One record per judged query of ``dataset_id`` (module doc), each with ``split`` (ir_datasets ids
    name their split: ``beir/scifact/test``); ``query_field``: the query text field, else the first of
    :data:`QUERY_TEXT_FIELDS`."""
    check_top_k(top_k)
    irds = optional_import("ir_datasets")
    try:
        dataset = irds.load(str(dataset_id))
    except KeyError:
        raise DataError(f"unknown ir_datasets id {dataset_id!r} (see https://ir-datasets.com)",
                        field="dataset.id") from None
    name = f"ir_datasets:{dataset_id}"
    if not _has(dataset, "qrels"):
        raise DataError("the dataset has no qrels: nothing to evaluate or train on", path=name, field="qrels")
    qrels: dict[str, dict[str, int]] = {}
    for position, qrel in enumerate(dataset.qrels_iter(), start=1):
        qid, docid, grade = str(qrel.query_id), str(qrel.doc_id), qrel.relevance
        # negative grades (TREC junk, -1 / -2) are read as trec_eval reads them: not relevant (judged_record)
        if isinstance(grade, bool) or not isinstance(grade, int) or not -(2 ** 31) <= grade <= MAX_GRADE:
            raise DataError(f"grade {grade!r:.40} is not an integer <= {MAX_GRADE}", path=f"{name} qrels",
                            line=position, field="relevance")
        judged = qrels.setdefault(qid, {})
        if docid in judged and judged[docid] != grade:
            raise DataError(f"document {docid!r} of query {qid!r} judged twice ({judged[docid]} and {grade})",
                            path=f"{name} qrels", line=position, field="doc_id")
        judged[docid] = grade
    if not qrels:
        raise DataError("no judgement", path=f"{name} qrels")
    queries: dict[str, str] = {}
    fields = (query_field,) if query_field else QUERY_TEXT_FIELDS
    for position, query in enumerate(dataset.queries_iter(), start=1):
        if str(query.query_id) in qrels:
            queries[str(query.query_id)] = _field(query, fields, f"{name} queries", "query text", line=position)
    if unknown := [qid for qid in qrels if qid not in queries]:
        raise DataError(f"{len(unknown)} judged queries have no query text (first: {unknown[0]!r})",
                        path=f"{name} qrels", field="query_id")
    run: Run | None = read_trec_run(run_path) if run_path is not None else None
    if run_path is None and _has(dataset, "scoreddocs"):
        run = {}
        for position, hit in enumerate(dataset.scoreddocs_iter(), start=1):
            if (qid := str(hit.query_id)) in qrels:
                scores = run.setdefault(qid, {})
                if str(hit.doc_id) in scores:
                    raise DataError(f"document {hit.doc_id!r} listed twice for query {qid!r}",
                                    path=f"{name} scoreddocs", line=position, field="doc_id")
                try:
                    scores[str(hit.doc_id)] = run_score(hit.score, qid, str(hit.doc_id))
                except DataError as err:
                    raise DataError(err.reason, path=f"{name} scoreddocs", line=position, field="score") from None
    if run is not None:
        run = {qid: run[qid] for qid in qrels if qid in run}
        if dropped := len(qrels) - len(run):
            log.warning("%s: %d of %d judged queries have no ranked documents in the %s and are left out",
                        name, dropped, len(qrels), run_path or "scoreddocs")
        pools = {qid: [d for d, _ in ranked_items(scores)[:top_k]] for qid, scores in run.items()}
    else:
        pools = {qid: list(judged) for qid, judged in qrels.items()}

    texts = _documents(dataset, {d for pool in pools.values() for d in pool}, name)
    if run is not None:
        records = records_from_run(run, qrels, texts, queries, top_k=top_k)
    else:  # the judged documents, unranked
        hits = {qid: [(d, *texts[d], None, None) for d in pool] for qid, pool in pools.items()}
        records = [validate_record(judged_record(qid, queries[qid], hits[qid], qrels[qid])) for qid in hits]
    for record in records:
        record.split = split
    return records


def _documents(dataset: Any, ids: set[str], name: str) -> dict[str, tuple[str, str]]:
    """``{docid: (title, text)}`` of ``ids`` from the dataset's document store."""
    if not ids:
        return {}
    if not _has(dataset, "docs"):
        raise DataError("the dataset has no documents (docs_store)", path=name, field="docs")
    found = dataset.docs_store().get_many(sorted(ids))
    if missing := sorted(ids - set(found)):
        raise DataError(f"{len(missing)} pooled documents are not in the document store (first: {missing[0]!r})",
                        path=f"{name} docs", field="doc_id")
    return {docid: (_field(doc, DOC_TITLE_FIELDS, name, "title", optional=True),
                    _field(doc, DOC_TEXT_FIELDS, f"{name} docs (document {docid!r})", "document text"))
            for docid, doc in ((d, found[d]) for d in sorted(ids))}
