"""TREC run and qrels files, the TREC DL 2019 passage layout, and conversions to and from records.

qrels (``qid iter docid rel``) -> ``{qid: {docid: rel}}``; runs (``qid Q0 docid rank score tag``) ->
``{qid: {docid: score}}``, ordered by score as trec_eval does: the shapes ranx and ir-measures accept.
Errors name file, line and column. TREC DL19 (``trec_dl19/``): ``retrieve_results_dl19.json.gz`` (a JSON
list of ``{query, hits: [{content, qid, docid, rank, score}]}``, BM25 top 100 of 43 queries) and
``qrels.dl19-passage.txt.gz`` (grades 0..3), joined by :func:`read_dl19`.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.data.readers._common import parse_grade, parse_json_array, validate_as_in_file
from udcg_ltr.data.schema import MAX_GRADE, DataError, Passage, QueryRecord, get_field, validate_record
from udcg_ltr.io import atomic_open, open_text
from udcg_ltr.paths import shared_file

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]

RUN_COLUMNS = ("qid", "Q0", "docid", "rank", "score", "tag")
_QRELS_COLUMNS = ("qid", "iter", "docid", "rel")


def iter_columns(path: str | os.PathLike, names: Sequence[str], *, tabs: bool = False,
                 header: str | None = None) -> Iterator[tuple[int, list[str]]]:
    """``(line, columns)`` of each non-blank line of a file of ``names`` columns separated by white space (or
    tabs), after a first line whose first column is ``header``."""
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            cols = line.rstrip("\r\n").split("\t") if tabs else line.split()
            if not line.strip() or (lineno == 1 and header is not None and cols[0] == header):
                continue
            if len(cols) != len(names):
                kind = "tab-separated" if tabs else "white-space separated"
                raise DataError(f"expected {len(names)} {kind} columns ({' '.join(names)}), got {len(cols)}",
                                path=str(path), line=lineno)
            yield lineno, cols


def _column(index: int, names: Sequence[str]) -> str:
    return f"column {index + 1} ({names[index]})"


def _run_error(path: str | os.PathLike, lineno: int, index: int, message: str) -> DataError:
    return DataError(message, path=str(path), line=lineno, field=_column(index, RUN_COLUMNS))


def qrels_from_rows(path: str | os.PathLike, rows: Iterable[tuple[int, str, str, str]],
                    grades: tuple[int, int] | None, columns: tuple[str, str]) -> Qrels:
    """``{qid: {docid: grade}}`` from ``(line, qid, docid, grade text)`` rows (``columns``: the docid and
    grade columns' names in errors); a pair judged twice and an empty file are errors. ``grades=(lo, hi)``
    bounds the grades (readers of record labels pass 0..5, so that the error names the qrels line)."""
    qrels: Qrels = {}
    for lineno, qid, docid, text in rows:
        try:
            grade = parse_grade(text)
        except DataError as err:
            raise DataError(err.reason, path=str(path), line=lineno, field=columns[1]) from None
        if grades is not None and not grades[0] <= grade <= grades[1]:
            raise DataError(f"grade {grade} outside {grades[0]}..{grades[1]}", path=str(path), line=lineno,
                            field=columns[1])
        judged = qrels.setdefault(qid, {})
        if docid in judged:
            raise DataError(f"document {docid!r} of query {qid!r} judged twice ({judged[docid]} and {grade})",
                            path=str(path), line=lineno, field=columns[0])
        judged[docid] = grade
    if not qrels:
        raise DataError("no records (no judgement in the file)", path=str(path))
    return qrels


def read_trec_qrels(path: str | os.PathLike, *, grades: tuple[int, int] | None = None) -> Qrels:
    """``{qid: {docid: rel}}`` from a TREC qrels file (:func:`qrels_from_rows`); grades may be negative
    (-1 or -2 for junk in some collections) unless ``grades`` bounds them."""
    rows = ((lineno, cols[0], cols[2], cols[3]) for lineno, cols in iter_columns(path, _QRELS_COLUMNS))
    return qrels_from_rows(path, rows, grades, (_column(2, _QRELS_COLUMNS), _column(3, _QRELS_COLUMNS)))


def read_trec_run(path: str | os.PathLike) -> Run:
    """``{qid: {docid: score}}`` from a 6-column TREC run file; a non-integer rank, a non-finite score, a
    document listed twice for one query and an empty file are errors."""
    run: Run = {}
    for lineno, (qid, _, docid, rank, score, _) in iter_columns(path, RUN_COLUMNS):
        try:
            int(rank)
        except ValueError:
            raise _run_error(path, lineno, 3, f"expected an integer rank, got {rank!r}") from None
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise _run_error(path, lineno, 4, f"expected a finite score, got {score!r}")
        ranked = run.setdefault(qid, {})
        if docid in ranked:
            raise _run_error(path, lineno, 2, f"document {docid!r} listed twice for query {qid!r}")
        ranked[docid] = value
    if not run:
        raise DataError("no records (no ranked document in the file)", path=str(path))
    return run


def _check_id(value: str, what: str) -> str:
    value = str(value)
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(f"{what} {value!r} is empty or contains white space: not representable in a TREC file")
    return value


def check_top_k(top_k: Any) -> None:
    """``top_k`` must be None (every ranked document) or an integer >= 0: ``-1`` would slice off the last
    document (``items[:-1]``) without a word; a :class:`DataError` naming the setting."""
    if top_k is None:
        return
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
        raise DataError(f"must be an integer >= 0 or None, got {top_k!r:.40}", field="top_k")


def run_score(value: Any, qid: str, docid: str) -> float:
    """One run score as a finite float; ``None``, a string, a boolean, NaN or infinity is a :class:`DataError`
    naming the query and the document (``field 'run['q1']['d3']'``), not a TypeError from the sort."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise DataError(f"score of document {docid!r} in query {qid!r}: expected a finite number, got "
                        f"{type(value).__name__} {value!r:.40}", field=f"run[{qid!r}][{docid!r}]")
    return float(value)


def checked_run(run: Any) -> Run:
    """``{qid: {docid: score}}`` from a mapping or a ranx ``Run`` (:func:`as_nested_dict`), every score checked
    by :func:`run_score`: what a file reader checks, for runs given in memory."""
    out: Run = {}
    for qid, scores in as_nested_dict(run, "run").items():
        if not isinstance(scores, Mapping):
            raise DataError(f"query {qid!r}: expected a {{docid: score}} mapping, got {type(scores).__name__}",
                            field=f"run[{qid!r}]")
        out[str(qid)] = {str(d): run_score(v, str(qid), str(d)) for d, v in scores.items()}
    return out


def ranked_items(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """``(docid, score)`` by descending score; equal scores keep their input order (stable)."""
    return sorted(scores.items(), key=lambda kv: -kv[1])


def write_trec_run(path: str | os.PathLike, run: Mapping[str, Mapping[str, float]], tag: str = "udcg_ltr", *,
                   ties: str = "stable") -> Path:
    """Write a 6-column TREC run atomically, in the order trec_eval re-derives on reading (it ignores the
    rank column, reads each score into a C ``float``, sorts by it, then by docid descending:
    ``comp_sim_docno`` in its ``form_res_rels.c``).

    ``ties="stable"`` (as :func:`udcg_ltr.metrics.rank_by_scores`) keeps input order: a score trec_eval would
    see tied with (or, after 32-bit rounding, above) the previous one is written as the next 32-bit float
    below it. ``ties="trec"``: trec_eval's own order, scores unchanged. Scores are written with ``repr``, so
    :func:`read_trec_run` gives back the same floats (the untied ones for "stable").
    """
    tag = _check_id(tag, "run tag")
    path = Path(path)
    with atomic_open(path, "w") as f:
        for qid, scores in run.items():
            q = _check_id(qid, "query id")
            for rank, (docid, score) in enumerate(_trec_ordered(qid, scores, ties), start=1):
                f.write(f"{q} Q0 {_check_id(docid, 'document id')} {rank} {score!r} {tag}\n")
    return path


def _c_float(x: float) -> float:
    """``x`` as trec_eval holds a score: a 32-bit C ``float`` (``float sim``), rounded to nearest."""
    with np.errstate(over="ignore"):  # beyond the float32 range: +-inf, as C gives
        return float(np.float32(x))


def trec_order(scores: Mapping[str, float]) -> list[str]:
    """trec_eval's order of one query's documents: score as a C float descending, then docid descending."""
    by_id = sorted(scores, reverse=True)  # code point order = UTF-8 byte order, as strcmp
    return sorted(by_id, key=lambda d: -_c_float(scores[d]))  # stable: ties keep docid descending


def _trec_ordered(qid: str, scores: Mapping[str, float], ties: str) -> list[tuple[str, float]]:
    """``(docid, score to write)`` in the order trec_eval will read them (see :func:`write_trec_run`)."""
    if ties not in ("stable", "trec"):
        raise ValueError(f"ties must be 'stable' or 'trec', got {ties!r}")
    items = []
    for docid, score in scores.items():
        score = float(score)
        if not math.isfinite(score):
            raise ValueError(f"score {score} of document {docid!r} in query {qid!r} is not finite")
        items.append((str(docid), score))
    if ties == "trec":
        scored = dict(items)
        return [(docid, scored[docid]) for docid in trec_order(scored)]
    items.sort(key=lambda kv: -kv[1])
    out, last = [], math.inf
    for docid, score in items:
        if not _c_float(score) < last:  # trec_eval would tie it with the previous one: strictly below it
            score = float(np.nextafter(np.float32(last), np.float32(-np.inf)))  # the next float32 below
            if not math.isfinite(score):
                raise ValueError(f"cannot make the tied scores of query {qid!r} distinct below {last!r}")
        out.append((docid, score))
        last = _c_float(score)
    return out


def write_trec_qrels(path: str | os.PathLike, qrels: Mapping[str, Mapping[str, int]]) -> Path:
    """Write ``qid 0 docid rel`` lines atomically, in the mapping's order."""
    path = Path(path)
    with atomic_open(path, "w") as f:
        for qid, judged in qrels.items():
            q = _check_id(qid, "query id")
            for docid, rel in judged.items():
                if isinstance(rel, bool) or int(rel) != rel:
                    raise ValueError(f"grade {rel!r} of document {docid!r} in query {qid!r} is not an integer")
                f.write(f"{q} 0 {_check_id(docid, 'document id')} {int(rel)}\n")
    return path


def _text_of(entry: Any) -> tuple[str, str]:
    if isinstance(entry, str):
        return "", entry
    if isinstance(entry, Mapping):
        return str(entry.get("title", "") or ""), str(entry["text"])
    if isinstance(entry, (tuple, list)) and len(entry) == 2:
        return str(entry[0]), str(entry[1])
    raise TypeError(f"expected a text, a {{'title', 'text'}} mapping or a (title, text) pair, got {entry!r:.60}")


def as_nested_dict(obj: Any, what: str = "run") -> Mapping[str, Mapping[str, Any]]:
    """``{qid: {docid: value}}`` from a mapping or a ranx ``Run`` / ``Qrels`` (via ``to_dict()``)."""
    if isinstance(obj, Mapping):
        return obj
    to_dict = getattr(obj, "to_dict", None)
    nested = to_dict() if callable(to_dict) else None
    if not isinstance(nested, Mapping):
        raise TypeError(f"{what}: expected a {{qid: {{docid: value}}}} mapping or a ranx object with to_dict(), "
                        f"got {type(obj).__name__}")
    return nested


def judged_grade(grade: int) -> int:
    """A qrels grade as a record label: a negative one (-1 / -2, junk in some TREC collections) is "not
    relevant", 0, as trec_eval reads every grade below 1; the labels of the data model are 0..5."""
    return max(int(grade), 0)


def judged_record(qid: str, question: str, hits: Iterable[tuple[str, str, str, int | None, float | None]],
                  judged: Mapping[str, int], **fields: Any) -> QueryRecord:
    """A record of ``hits`` ``(docid, title, text, rank, score)`` labelled by the query's qrels ``judged``
    (0 for an unjudged document, ``extra["unjudged"]``; a negative grade is 0, :func:`judged_grade`, the file's
    grade kept in ``extra["qrels_grade"]``); ``extra["judged_grades"]`` counts judged documents per label over
    all qrels, not only the pool (recall-style metrics need it). Not validated."""
    def extra(docid: str) -> dict:
        grade = judged.get(docid, 0)
        return {"unjudged": docid not in judged, **({"qrels_grade": int(grade)} if grade < 0 else {})}

    passages = [Passage(pid=docid, title=title, text=text, rank=rank, score=score,
                        relevance=judged_grade(judged.get(docid, 0)), extra=extra(docid))
                for docid, title, text, rank, score in hits]
    counts = dict(sorted(Counter(str(judged_grade(g)) for g in judged.values()).items(), key=lambda kv: int(kv[0])))
    return QueryRecord(qid=qid, question=question, passages=passages, extra={"judged_grades": counts}, **fields)


def records_from_run(run: Mapping[str, Mapping[str, float]] | Any, qrels: Mapping[str, Mapping[str, int]] | Any | None,
                     texts: Mapping[str, Any], queries: Mapping[str, str], *,
                     top_k: int | None = None) -> list[QueryRecord]:
    """Records from a run (a mapping or a ranx ``Run``; ``qrels`` likewise): per query, in run order, its
    top ``top_k`` documents by descending score (:func:`judged_record`). ``texts[docid]`` is a text, a
    ``{"title", "text"}`` mapping or a ``(title, text)`` pair."""
    check_top_k(top_k)
    run = checked_run(run)
    qrels = as_nested_dict(qrels, "qrels") if qrels is not None else {}
    records = []
    for qid, scores in run.items():
        if qid not in queries:
            raise DataError(f"no text for query {qid!r}", field="queries")
        hits = []
        for rank, (docid, score) in enumerate(ranked_items(scores)[:top_k], start=1):
            if docid not in texts:
                raise DataError(f"no text for document {docid!r} (query {qid!r})", field="texts")
            hits.append((docid, *_text_of(texts[docid]), rank, float(score)))
        records.append(validate_record(judged_record(qid, queries[qid], hits, qrels.get(qid, {}))))
    return records


def _score_getter(score_field: str | Callable[[Passage], float | None]) -> Callable[[Passage], Any]:
    if callable(score_field):
        return score_field
    if score_field in ("score", "relevance"):
        return lambda p: getattr(p, score_field)
    if score_field == "rank":  # higher is better: rank r scores -r
        return lambda p: None if p.rank is None else -float(p.rank)
    parts = score_field.split(".")
    if parts[0] == "extra" and len(parts) == 2:
        return lambda p: p.extra.get(parts[1])
    if parts[0] == "annotations" and len(parts) == 3:
        return lambda p: p.annotations.get(parts[1], {}).get(parts[2])
    raise ValueError(f"unknown score field {score_field!r}: use 'score', 'rank', 'relevance', "
                     "'extra.KEY', 'annotations.LLM.KEY' or a callable")


def records_to_run(records: Iterable[QueryRecord],
                   score_field: str | Callable[[Passage], float | None] = "score") -> Run:
    """``{qid: {pid: score}}`` for ranx / ir-measures / :func:`write_trec_run`, by ``score_field``:
    ``"score"``, ``"rank"`` (``-rank``), ``"relevance"``, ``"extra.KEY"``, ``"annotations.LLM.KEY"`` or a
    callable on a :class:`Passage`; a passage without a value is an error (a run with holes ranks
    documents arbitrarily)."""
    get = _score_getter(score_field)

    def score(rec: QueryRecord, p: Passage) -> float:
        value = get(p)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"passage {p.pid!r} of query {rec.qid!r} has no numeric {score_field!r} "
                             f"(got {value!r:.40})")
        return float(value)

    return {rec.qid: {p.pid: score(rec, p) for p in rec.passages} for rec in records}


def records_to_qrels(records: Iterable[QueryRecord], *, include_zero: bool = True,
                     include_unjudged: bool = False) -> Qrels:
    """``{qid: {pid: relevance}}`` of labelled passages (``extra["unjudged"]`` ones only with
    ``include_unjudged``; ``include_zero=False`` keeps only positive grades)."""
    return {rec.qid: {p.pid: int(p.relevance) for p in rec.passages
                      if p.relevance is not None and (include_unjudged or not p.extra.get("unjudged"))
                      and (include_zero or p.relevance != 0)}
            for rec in records}


def dl19_dir() -> Path:
    return shared_file("trec_dl19")


def _dl19_record(obj: Any, qrels: Qrels) -> QueryRecord:
    query = get_field(obj, "query", str)
    qids: set[str] = set()
    rows = []
    for j, hit in enumerate(get_field(obj, "hits", list)):
        where = f"hits[{j}]"
        qids.add(str(get_field(hit, "qid", (str, int), where)))
        if len(qids) > 1:
            raise DataError(f"hits of one query carry different qids {sorted(qids)}", field=f"{where}.qid")
        rows.append((get_field(hit, "rank", int, where), j, str(get_field(hit, "docid", (str, int), where)),
                     get_field(hit, "content", str, where), float(get_field(hit, "score", float, where))))
    if not rows:
        raise DataError("no hits", field="hits")
    qid = next(iter(qids))
    rows.sort()  # by rank, then file order
    hits = [(docid, "", text, rank, score) for rank, _, docid, text, score in rows]
    record = judged_record(qid, query, hits, qrels.get(qid, {}))
    # errors name the hit as the file holds it (its position before sorting by rank, its own keys)
    return validate_as_in_file(record, qid="hits[0].qid", passages="hits", names={"pid": "docid"},
                               order=[row[1] for row in rows])


def read_dl19(results_path: str | os.PathLike | None = None,
              qrels_path: str | os.PathLike | None = None) -> list[QueryRecord]:
    """TREC DL19 passages: BM25 top-100 per query in rank order, relevance = graded qrel (0..3; use
    ``relevance_threshold=2`` for the usual binary DL19 metrics). Errors name the file, the line where
    the query's entry starts and the field (``[3].hits[7].score``)."""
    results_path = Path(results_path) if results_path is not None else dl19_dir() / "retrieve_results_dl19.json.gz"
    qrels_path = Path(qrels_path) if qrels_path is not None else dl19_dir() / "qrels.dl19-passage.txt.gz"
    qrels = read_trec_qrels(qrels_path, grades=(0, MAX_GRADE))
    return parse_json_array(results_path, lambda obj: _dl19_record(obj, qrels), unique=lambda r: r.qid,
                            unique_field="hits[0].qid")
