"""The data model: one :class:`QueryRecord` per question, holding its candidate :class:`Passage` s.

A passage has its retrieval ``rank`` (1-based) and ``score``, an integer relevance label (binary, or
graded 0..5 as RA-nWG uses; TREC qrels keep their own scale, e.g. 0..3 for DL19) and per-LLM
``annotations[llm]`` holding at least ``p_no_response`` (the probability of the first token of
``NO-RESPONSE`` at the first answer position, UDCG paper Eq. 2).

:func:`validate_record` reports, never drops: each broken invariant is a :class:`DataError` naming
the file, line and field. The typed field getters of every reader (:func:`get_field` ...) live here
too, so that JSON types are checked one way everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from udcg_ltr.io import DataError, MissingFileError  # noqa: F401 (the readers' errors, re-exported)

#: Annotation fields that hold probabilities and must lie in [0, 1].
PROBABILITY_FIELDS = ("p_no_response", "p_no_response_mc")

#: Highest graded relevance label the data model accepts (RA-nWG's 0..5 scale).
MAX_GRADE = 5

#: A passage's keys in file order, with their JSON types.
_PASSAGE_KEYS = ("pid", "title", "text", "rank", "score", "relevance", "is_distractor", "annotations", "extra")
_RECORD_KEYS = ("qid", "question", "answers", "split", "passages", "extra")


@dataclass
class Passage:
    """One candidate passage of a query's pool."""

    pid: str
    text: str
    title: str = ""
    rank: int | None = None
    score: float | None = None
    relevance: int | None = None
    is_distractor: bool | None = None
    annotations: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def is_relevant(self, threshold: int = 1) -> bool:
        """Binary relevance R(q, p) > 0: ``relevance >= threshold`` (unlabelled counts as not relevant)."""
        return self.relevance is not None and self.relevance >= threshold

    def p_no_response(self, llm: str) -> float:
        try:
            return float(self.annotations[llm]["p_no_response"])
        except KeyError as err:
            raise KeyError(f"passage {self.pid!r} has no p_no_response annotation for LLM {llm!r}") from err

    def utility(self, llm: str, relevance_threshold: int = 1) -> float:
        """Passage utility, UDCG paper Eq. 2: ``u = R * (1 - P(NO-RESPONSE | q, p))`` with R in {+1, -1}."""
        sign = 1.0 if self.is_relevant(relevance_threshold) else -1.0
        return sign * (1.0 - self.p_no_response(llm))

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in _PASSAGE_KEYS}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], *, where: str = "passage") -> Passage:
        # One explicit call per field (this runs for every passage read); fresh {} defaults per passage.
        _check_keys(obj, ("pid", "text"), _PASSAGE_KEYS, "an object", where)
        return cls(pid=_typed(obj["pid"], str, f"{where}.pid"),
                   title=_typed(obj.get("title", ""), str, f"{where}.title"),
                   text=_typed(obj["text"], str, f"{where}.text"),
                   rank=_typed(obj.get("rank"), int, f"{where}.rank", optional=True),
                   score=_typed(obj.get("score"), float, f"{where}.score", optional=True),
                   relevance=_typed(obj.get("relevance"), int, f"{where}.relevance", optional=True),
                   is_distractor=_typed(obj.get("is_distractor"), bool, f"{where}.is_distractor", optional=True),
                   annotations=_typed(obj.get("annotations", {}), dict, f"{where}.annotations"),
                   extra=_typed(obj.get("extra", {}), dict, f"{where}.extra"))


@dataclass
class QueryRecord:
    """A question, its gold answers and its candidate pool (in retrieval order when ranks exist)."""

    qid: str
    question: str
    answers: list[str] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    split: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {key: getattr(self, key) for key in _RECORD_KEYS}
        return {**out, "answers": list(self.answers), "passages": [p.to_dict() for p in self.passages]}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> QueryRecord:
        _check_keys(obj, ("qid", "question", "passages"), _RECORD_KEYS, "a JSON object")
        answers = _typed(obj.get("answers", []), list, "answers")
        for i, a in enumerate(answers):
            _typed(a, str, f"answers[{i}]")
        passages = _typed(obj["passages"], list, "passages")
        return cls(qid=_typed(obj["qid"], str, "qid"), question=_typed(obj["question"], str, "question"),
                   answers=list(answers),
                   passages=[Passage.from_dict(p, where=f"passages[{i}]") for i, p in enumerate(passages)],
                   split=_typed(obj.get("split"), str, "split", optional=True),
                   extra=_typed(obj.get("extra", {}), dict, "extra"))

    def passage(self, pid: str) -> Passage:
        for p in self.passages:
            if p.pid == pid:
                return p
        raise KeyError(f"query {self.qid!r} has no passage {pid!r}")

    def llms(self) -> list[str]:
        """Names of the LLMs with an annotation on every passage of this record."""
        return sorted(set.intersection(*(set(p.annotations) for p in self.passages))) if self.passages else []


def records_by_qid(records: Iterable[QueryRecord] | Mapping[str, QueryRecord]) -> dict[str, QueryRecord]:
    """``{qid: record}`` from records (a mapping is taken as already keyed by qid)."""
    return dict(records) if isinstance(records, Mapping) else {r.qid: r for r in records}


def validate_record(record: QueryRecord, *, path: str | None = None, line: int | None = None,
                    allow_empty: bool = False) -> QueryRecord:
    """Check the invariants the metrics rely on; raise :class:`DataError` on the first violation."""
    def fail(message: str, name: str) -> DataError:
        return DataError(message, path=path, line=line, field=name)

    if not isinstance(record.qid, str) or not record.qid.strip():
        raise fail(f"empty query id {record.qid!r}", "qid")
    if not record.passages and not allow_empty:
        raise fail(f"query {record.qid!r} has an empty candidate list", "passages")
    seen: set[str] = set()
    for i, p in enumerate(record.passages):
        where = f"passages[{i}]"
        if not isinstance(p.pid, str) or not p.pid.strip():
            raise fail(f"empty passage id {p.pid!r} in query {record.qid!r}", f"{where}.pid")
        if p.pid in seen:
            raise fail(f"duplicate passage id {p.pid!r} in query {record.qid!r}", f"{where}.pid")
        seen.add(p.pid)
        if p.relevance is not None and not 0 <= p.relevance <= MAX_GRADE:
            raise fail(f"relevance {p.relevance} outside 0..{MAX_GRADE}", f"{where}.relevance")
        if p.rank is not None and (isinstance(p.rank, bool) or not isinstance(p.rank, int) or p.rank < 1):
            raise fail(f"rank {p.rank!r} is not a 1-based position", f"{where}.rank")
        if p.score is not None and not is_finite_number(p.score):
            raise fail(f"score {p.score} is not finite", f"{where}.score")
        for llm, ann in p.annotations.items():
            if not isinstance(ann, Mapping):
                raise fail("annotation must be an object", f"{where}.annotations[{llm!r}]")
            for key in PROBABILITY_FIELDS:
                if key in ann and not is_probability(ann[key]):
                    raise fail(f"probability {ann[key]!r} outside [0, 1]", f"{where}.annotations[{llm!r}].{key}")
    return record


def is_finite_number(value: Any) -> bool:
    """A JSON number that is not a boolean, NaN or infinite (an int too large for a float counts as infinite)."""
    try:
        return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:
        return False


def is_probability(value: Any) -> bool:
    return is_finite_number(value) and 0.0 <= float(value) <= 1.0


def _check_keys(obj: Any, required: tuple[str, ...], known: tuple[str, ...], kind: str,
                where: str | None = None) -> None:
    """``obj`` is a mapping (``kind`` names it in the error) holding ``required`` and only ``known`` keys."""
    if not isinstance(obj, Mapping):
        raise DataError(f"expected {kind}, got {type(obj).__name__}", field=where)
    for key in required:
        if key not in obj:
            raise DataError("missing", field=f"{where}.{key}" if where else key)
    if unknown := set(obj) - set(known):
        raise DataError(f"unknown keys {sorted(unknown)}", field=where or "(record)")


def _typed(value: Any, kind: type, name: str, *, optional: bool = False) -> Any:
    """``value`` checked to be a ``kind``; a ``float`` is any finite JSON number."""
    if value is None and optional:
        return None
    # bool is an int subclass: a JSON true must not pass for a rank, a label or a score.
    if kind is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise DataError(f"expected a number, got {value!r:.60}", field=name)
    if kind is float and not is_finite_number(value):
        raise DataError(f"expected a finite number, got {value!r:.60}", field=name)
    if kind is int and isinstance(value, bool):
        raise DataError(f"expected an integer, got {value!r}", field=name)
    if kind is not float and not isinstance(value, kind):
        raise DataError(f"expected {kind.__name__}, got {type(value).__name__} {value!r:.60}", field=name)
    return value


_MISSING = object()

_TYPE_NAMES = {str: "a string", bool: "true/false", int: "an integer", float: "a number",
               list: "a list", dict: "an object"}


def get_field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str = "",
              *, optional: bool = False, default: Any = None) -> Any:
    """``obj[key]`` checked to be of JSON type ``kind``, else a :class:`DataError` naming ``where.key``:
    ``float`` accepts integers and refuses NaN and infinities; ``int`` and ``float`` refuse booleans.
    ``optional=True``: a missing key or a ``null`` gives ``default``; otherwise a ``null`` is an error
    (an id of ``null`` must not become the string ``'None'``)."""
    name = f"{where}.{key}" if where else key
    if not isinstance(obj, Mapping):
        raise DataError(f"expected an object, got {type(obj).__name__}", field=where or None)
    if (value := obj.get(key, _MISSING)) is _MISSING or value is None:
        if optional:
            return default
        raise DataError("missing" if value is _MISSING else "must not be null", field=name)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and int not in kinds:
        kinds = kinds + (int,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds if not (k is int and float in kinds))
        raise DataError(f"expected {expected}, got {type(value).__name__} {value!r:.60}", field=name)
    if float in kinds and isinstance(value, (int, float)) and not isinstance(value, bool) \
            and not is_finite_number(value):
        raise DataError(f"expected a finite number, got {value!r:.60}", field=name)
    return value


def get_probability(obj: Mapping[str, Any], key: str, where: str = "", *, optional: bool = False) -> float | None:
    """:func:`get_field` of a number that must lie in [0, 1] (a P(NO-RESPONSE), UDCG paper Eq. 2)."""
    if (value := get_field(obj, key, float, where, optional=optional)) is not None and not 0.0 <= value <= 1.0:
        raise DataError(f"probability {value!r} outside [0, 1]", field=f"{where}.{key}" if where else key)
    return value


def get_str_list(obj: Mapping[str, Any], key: str, where: str = "", *, optional: bool = False) -> list[str]:
    """A list of strings under ``key`` (e.g. gold answers), each element checked; a bare string is refused
    (``"answers": "yes"`` must not be read as ``['y', 'e', 's']``)."""
    values = get_field(obj, key, list, where, optional=optional, default=[])
    name = f"{where}.{key}" if where else key
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise DataError(f"expected a string, got {type(v).__name__} {v!r:.60}", field=f"{name}[{i}]")
    return list(values)
