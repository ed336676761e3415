"""Data in and out: ranx ``Qrels`` / ``Run``, TREC files and Hugging Face ``datasets``, both ways.

=====================  ======================================  ==============================================
format                 records -> format                       format -> records
=====================  ======================================  ==============================================
ranx                   :func:`records_to_ranx_qrels`,          :func:`~udcg_ltr.data.readers.trec.records_from_run`
                       :func:`records_to_ranx_run`             (takes ranx ``Run`` / ``Qrels`` as they are)
TREC run / qrels       :func:`records_to_trec`                 :func:`records_from_trec`
Hugging Face datasets  :func:`records_to_hf_dataset`           :func:`records_from_hf_dataset`
=====================  ======================================  ==============================================

A Hugging Face dataset holds one row per query (:data:`RECORD_COLUMNS`), its ``passages`` a list of
:data:`PASSAGE_COLUMNS`. The free-form ``annotations`` / ``extra`` mappings are JSON strings: Arrow
structs would give every row every key of any row, and ``datasets``' ``Json`` feature rounds floats
to 10 digits; either would break the exact round trip.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from udcg_ltr.data.jsonl import dumps_json, loads_json
from udcg_ltr.data.readers import trec
from udcg_ltr.data.schema import MAX_GRADE, DataError, Passage, QueryRecord, validate_record
from udcg_ltr.io import optional_import

#: The columns of a records dataset (one row per query) and of each passage.
RECORD_COLUMNS = ("qid", "question", "answers", "split", "extra_json", "passages")
PASSAGE_COLUMNS = ("pid", "title", "text", "rank", "score", "relevance", "is_distractor", "annotations_json",
                   "extra_json")
#: Keys a passage row may hold: its columns, or plain ``annotations`` / ``extra`` mappings.
_PASSAGE_ROW_KEYS = {*PASSAGE_COLUMNS, "annotations", "extra"}


def records_to_ranx_qrels(records: Iterable[QueryRecord], **options: bool):
    """A ranx ``Qrels`` of the records' labelled passages (``options`` as :func:`~.trec.records_to_qrels`)."""
    return optional_import("ranx").Qrels.from_dict(trec.records_to_qrels(records, **options))


def records_to_ranx_run(records: Iterable[QueryRecord],
                        score_field: str | Callable[[Passage], float | None] = "score", *, name: str | None = None):
    """A ranx ``Run`` of the records' passages scored by ``score_field`` (:func:`~.trec.records_to_run`)."""
    return optional_import("ranx").Run.from_dict(trec.records_to_run(records, score_field), name=name)


def records_to_trec(records: Iterable[QueryRecord], run_path: str | os.PathLike | None = None,
                    qrels_path: str | os.PathLike | None = None, *,
                    score_field: str | Callable[[Passage], float | None] = "score", tag: str = "udcg_ltr",
                    ties: str = "stable") -> tuple[Path | None, Path | None]:
    """Write the records' run (``score_field``, as :func:`records_to_ranx_run`) and / or qrels as TREC files
    (atomically); returns ``(run_path, qrels_path)`` (None for the one not asked for)."""
    records = list(records)
    run = (trec.write_trec_run(run_path, trec.records_to_run(records, score_field), tag=tag, ties=ties)
           if run_path else None)
    qrels = trec.write_trec_qrels(qrels_path, trec.records_to_qrels(records)) if qrels_path else None
    return run, qrels


def records_from_trec(run_path: str | os.PathLike, texts: Mapping[str, Any], queries: Mapping[str, str],
                      qrels_path: str | os.PathLike | None = None, *, top_k: int | None = None) -> list[QueryRecord]:
    """Records from a TREC run file (+ qrels file), as :func:`~.trec.records_from_run`; a query, or a document
    within a query's ``top_k``, without a text is an error naming the run file, its line and column."""
    run = trec.read_trec_run(run_path)
    qrels = trec.read_trec_qrels(qrels_path, grades=(0, MAX_GRADE)) if qrels_path is not None else None
    missing_queries = {qid for qid in run if qid not in queries}
    missing_docs = {(qid, docid) for qid, scores in run.items()
                    for docid, _ in trec.ranked_items(scores)[:top_k] if docid not in texts}
    if missing_queries or missing_docs:
        for lineno, (qid, _, docid, *_) in trec.iter_columns(run_path, trec.RUN_COLUMNS):
            if qid in missing_queries:
                raise DataError(f"no text for query {qid!r} in the queries given", path=str(run_path),
                                line=lineno, field="column 1 (qid)")
            if (qid, docid) in missing_docs:
                raise DataError(f"no text for document {docid!r} (query {qid!r}) in the texts given",
                                path=str(run_path), line=lineno, field="column 3 (docid)")
    return trec.records_from_run(run, qrels, texts, queries, top_k=top_k)


def records_to_hf_dataset(records: Iterable[QueryRecord]):
    """A ``datasets.Dataset`` with one row per record (columns: the module docstring); exact round trip with
    :func:`records_from_hf_dataset`."""
    datasets = optional_import("datasets")
    rows = [{"qid": rec.qid, "question": rec.question, "answers": list(rec.answers), "split": rec.split,
             "extra_json": dumps_json(rec.extra, rec.qid, "extra"),
             "passages": [{**{column: getattr(p, column) for column in PASSAGE_COLUMNS[:7]},
                           "score": None if p.score is None else float(p.score),
                           "annotations_json": dumps_json(p.annotations, rec.qid, f"passages[{i}].annotations"),
                           "extra_json": dumps_json(p.extra, rec.qid, f"passages[{i}].extra")}
                          for i, p in enumerate(rec.passages)]}
            for rec in records]
    kinds = {"rank": "int64", "score": "float64", "relevance": "int64", "is_distractor": "bool"}
    string = datasets.Value("string")
    passage = {column: datasets.Value(kinds.get(column, "string")) for column in PASSAGE_COLUMNS}
    features = datasets.Features({"qid": string, "question": string, "answers": datasets.List(string),
                                  "split": string, "extra_json": string, "passages": datasets.List(passage)})
    return datasets.Dataset.from_list(rows, features=features)


def _json_field(row: Mapping[str, Any], key: str, where: str) -> Any:
    """A ``*_json`` column decoded (empty / missing: ``{}``); a mapping under the plain name is taken as is."""
    plain = key.removesuffix("_json")
    if key not in row and isinstance(row.get(plain), Mapping):
        return dict(row[plain])
    if (text := row.get(key)) in (None, ""):
        return {}
    if not isinstance(text, str):
        raise DataError(f"expected a JSON string, got {type(text).__name__}", field=f"{where}{key}")
    try:
        return loads_json(text)
    except DataError as err:
        raise DataError(err.reason, field=f"{where}{key}" + (f" ({err.field})" if err.field else "")) from None
    except ValueError as err:
        raise DataError(f"not valid JSON: {err}", field=f"{where}{key}") from None


def _record_from_row(row: Mapping[str, Any]) -> QueryRecord:
    if not isinstance(row, Mapping):
        raise DataError(f"expected a row mapping, got {type(row).__name__}")
    for column in ("qid", "question", "passages"):
        if column not in row:
            raise DataError("missing column", field=column)
    if not isinstance(passages := row["passages"], (list, tuple)):
        raise DataError(f"expected a list of passages, got {type(passages).__name__}", field="passages")
    obj: dict[str, Any] = {"qid": row["qid"], "question": row["question"], "answers": row.get("answers") or [],
                           "split": row.get("split"), "extra": _json_field(row, "extra_json", ""), "passages": []}
    for i, p in enumerate(passages):
        where = f"passages[{i}]."
        if not isinstance(p, Mapping):
            raise DataError(f"expected a passage mapping, got {type(p).__name__}", field=f"passages[{i}]")
        # a key other rows have (Arrow gives every row every struct field, None where absent) is not an error
        if unknown := {key for key, value in p.items() if value is not None} - _PASSAGE_ROW_KEYS:
            raise DataError(f"unknown keys {sorted(unknown)}", field=f"passages[{i}]")
        passage = {key: p.get(key) for key in PASSAGE_COLUMNS[:7] if key in p}  # all but the *_json columns
        obj["passages"].append({**passage, "title": "" if p.get("title") is None else p["title"],
                                "annotations": _json_field(p, "annotations_json", where),
                                "extra": _json_field(p, "extra_json", where)})
    return validate_record(QueryRecord.from_dict(obj))


def records_from_hf_dataset(dataset: Any, *, name: str | None = None) -> list[QueryRecord]:
    """Records from a ``datasets.Dataset`` (or any iterable of row mappings) in the layout of
    :func:`records_to_hf_dataset`; a ``datasets.DatasetDict`` gives every split's records, ``split``
    defaulting to the split name. Errors name the dataset (``name``), the row (as ``line``) and the field."""
    records = []
    if isinstance(dataset, Mapping):  # a DatasetDict (split name -> Dataset); a Dataset is no mapping
        label = name or "DatasetDict"
        for split, part in dataset.items():
            for rec in records_from_hf_dataset(part, name=f"{name or _dataset_name(part)}[{split}]"):
                rec.split = rec.split if rec.split is not None else str(split)
                records.append(rec)
    else:
        label = name or _dataset_name(dataset)
        for row_number, row in enumerate(dataset, start=1):
            try:
                records.append(_record_from_row(row))
            except DataError as err:
                raise err.located(path=label, line=row_number) from None
    seen: dict[str, int] = {}
    for row_number, rec in enumerate(records, start=1):
        if rec.qid in seen:
            raise DataError(f"query id {rec.qid!r} also in row {seen[rec.qid]}", path=label, line=row_number,
                            field="qid")
        seen[rec.qid] = row_number
    return records


def _dataset_name(dataset: Any) -> str:
    info = getattr(dataset, "info", None)
    name = getattr(info, "dataset_name", None)
    files = [f.get("filename") for f in getattr(dataset, "cache_files", None) or [] if isinstance(f, Mapping)]
    return f"Hugging Face dataset {name or (files[0] if files else '(in memory)')}"
