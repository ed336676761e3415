"""Keyed passage scores: question id -> one score per passage of that question's record, in passage order.

ranx's ``Run`` idea (``{qid: {docid: score}}``) with the record's passage order standing in for the docids: a
reranker's logits, a fused score, the retriever's order or the utilities (Eq. 2) travel from the scorer to the
selectors, the metrics and the reports as one :class:`PassageScores`, and every consumer looks its rows up by
question id instead of trusting that a list of arrays lines up with its own list of records.

The values are float64, read-only, never NaN: the metrics and the selectors rank passages by them, and a NaN has no
rank (``-inf`` and ``+inf`` do: the retriever's order gives ``-inf`` to a passage without a score).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from udcg_ltr.data.padded import pad_scores
from udcg_ltr.data.schema import QueryRecord


def _frozen(qid: str, values: Any) -> np.ndarray:
    """``values`` as a read-only 1-D float64 copy, or a ValueError naming ``qid`` (not numbers, not 1-D, NaN)."""
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"query {qid!r}: scores must be numbers ({err})") from None
    if arr.ndim != 1:
        raise ValueError(f"query {qid!r}: expected one score per passage (1-D), got shape {arr.shape}")
    if np.isnan(arr).any():  # a NaN has no rank: the metrics would raise far from where it came in
        raise ValueError(f"query {qid!r}: NaN score at passage {int(np.flatnonzero(np.isnan(arr))[0])}")
    arr.flags.writeable = False
    return arr


class PassageScores(Mapping[str, np.ndarray]):
    """An immutable ``{qid: float64 array}``, one score per passage in the record's passage order (module doc).

    Build one with :meth:`of` (records + aligned arrays), :meth:`from_run` (``{qid: {pid: score}}`` or a ranx
    ``Run``), :meth:`from_json_dict` or :func:`as_passage_scores` (any of these); read it back with
    :meth:`aligned` (per-record arrays), :meth:`padded` (``[Q, W]`` as a :class:`~udcg_ltr.data.padded.PaddedSlates`)
    or :meth:`to_run`. Every shape or key mismatch is a ValueError naming the question.
    """

    __slots__ = ("_scores",)

    def __init__(self, scores: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()):
        items = scores.items() if isinstance(scores, Mapping) else scores
        out: dict[str, np.ndarray] = {}
        for qid, values in items:
            if qid in out:
                raise ValueError(f"query {qid!r} appears twice")
            out[qid] = _frozen(qid, values)
        self._scores = out

    # ---- constructors ----------------------------------------------------------------------------------------
    @classmethod
    def of(cls, records: Sequence[QueryRecord], arrays: Sequence[Any]) -> PassageScores:
        """From per-record arrays aligned with ``records`` (one array per record, one score per passage)."""
        arrays = list(arrays)
        if len(arrays) != len(records):
            raise ValueError(f"{len(records)} records but {len(arrays)} score arrays")
        out = cls((r.qid, s) for r, s in zip(records, arrays))
        for r in records:
            if len(out[r.qid]) != len(r.passages):
                raise ValueError(f"query {r.qid!r}: {len(r.passages)} passages but {len(out[r.qid])} scores")
        return out

    @classmethod
    def from_run(cls, records: Sequence[QueryRecord], run: Any) -> PassageScores:
        """From ``{qid: {pid: score}}`` or a ranx ``Run``, in each record's passage order; every passage of
        ``records`` needs a score (queries of the run that no record asks for are left out)."""
        # a ranx Run converts itself (readers.trec.as_nested_dict does the same; importing it here would load every
        # reader with `import udcg_ltr.data`)
        nested = run.to_dict() if not isinstance(run, Mapping) and callable(getattr(run, "to_dict", None)) else run
        if not isinstance(nested, Mapping):
            raise TypeError(f"expected a {{qid: {{pid: score}}}} mapping or a ranx Run, got {type(run).__name__}")
        arrays = []
        for r in records:
            if r.qid not in nested:
                raise ValueError(f"query {r.qid!r}: no scores")
            by_pid = nested[r.qid]
            if not isinstance(by_pid, Mapping):
                raise ValueError(f"query {r.qid!r}: expected a {{pid: score}} mapping, got {type(by_pid).__name__}")
            missing = next((p.pid for p in r.passages if p.pid not in by_pid), None)
            if missing is not None:
                raise ValueError(f"query {r.qid!r}: no score for passage {missing!r}")
            arrays.append([by_pid[p.pid] for p in r.passages])
        return cls.of(records, arrays)

    @classmethod
    def from_json_dict(cls, doc: Any) -> PassageScores:
        """The inverse of :meth:`to_json_dict`: ``{qid: [score, ...]}`` with finite numbers only (a cache file's
        content: anything else is a ValueError naming the question)."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"expected a {{qid: [scores]}} object, got {type(doc).__name__}")
        for qid, values in doc.items():
            # bools and strings would pass np.array(dtype=float): a file must hold numbers
            if not isinstance(values, list) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
                raise ValueError(f"query {qid!r}: expected a list of finite numbers, got {values!r:.60}")
        return cls(doc)

    # ---- the Mapping -----------------------------------------------------------------------------------------
    def __getitem__(self, qid: str) -> np.ndarray:
        return self._scores[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._scores)

    def __len__(self) -> int:
        return len(self._scores)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PassageScores):
            return NotImplemented
        return list(self) == list(other) and all(np.array_equal(self[q], other[q]) for q in self)

    __hash__ = None  # type: ignore[assignment]  # equal by content, like a dict

    def __repr__(self) -> str:
        return f"PassageScores({len(self)} queries, {sum(map(len, self._scores.values()))} passages)"

    # ---- lookups by records ----------------------------------------------------------------------------------
    def _row(self, qid: str, n_passages: int | None = None) -> np.ndarray:
        """The scores of ``qid`` (with ``n_passages``: checked to be that many), or a ValueError naming it."""
        if qid not in self._scores:
            raise ValueError(f"query {qid!r}: no scores (these scores hold {len(self)} queries)")
        row = self._scores[qid]
        if n_passages is not None and len(row) != n_passages:
            raise ValueError(f"query {qid!r}: {n_passages} passages but {len(row)} scores")
        return row

    def aligned(self, records: Sequence[QueryRecord]) -> list[np.ndarray]:
        """One read-only array per record, aligned with ``record.passages``."""
        return [self._row(r.qid, len(r.passages)) for r in records]

    def restrict(self, records: Sequence[QueryRecord]) -> PassageScores:
        """The scores of ``records`` only, in their order (each checked against its record)."""
        return PassageScores.of(records, self.aligned(records))

    def subset(self, qids: Iterable[str]) -> PassageScores:
        """The scores of the questions ``qids`` only, in that order."""
        return PassageScores((q, self._row(q)) for q in qids)

    def missing(self, records: Sequence[QueryRecord]) -> list[QueryRecord]:
        """The records these scores do not cover: question absent, or another number of passages."""
        return [r for r in records if r.qid not in self._scores or len(self._scores[r.qid]) != len(r.passages)]

    def merge(self, other: Mapping[str, Any]) -> PassageScores:
        """These scores with ``other``'s added; a question in both takes ``other``'s (``dict.update``'s rule)."""
        return PassageScores({**self._scores, **dict(other.items())})

    def padded(self, slates: Any) -> np.ndarray:
        """``[Q, W]`` scores aligned with the columns of ``slates`` (a :class:`~udcg_ltr.data.padded.PaddedSlates`
        in the records' passage order, ``order="given"``), 0 at padding: rows by ``slates.qids``."""
        mask = np.asarray(slates.mask, dtype=bool)
        width = mask.shape[1]
        rows = [self._row(q) for q in slates.qids]
        for q, row, n_real in zip(slates.qids, rows, mask.sum(axis=1)):
            if n_real != min(len(row), width):  # the slates cut a row to their width, never shorter
                raise ValueError(f"query {q!r}: {n_real} passages in the slates but {len(row)} scores")
        return pad_scores(rows, width)[0]

    # ---- out -------------------------------------------------------------------------------------------------
    def to_run(self, records: Sequence[QueryRecord]) -> dict[str, dict[str, float]]:
        """``{qid: {pid: score}}`` of ``records`` (ranx ``Run``, ir-measures, a TREC run file)."""
        return {r.qid: {p.pid: float(v) for p, v in zip(r.passages, s)} for r, s in zip(records, self.aligned(records))}

    def to_json_dict(self) -> dict[str, list[float]]:
        """``{qid: [score, ...]}``, exact through JSON (a float's repr round-trips); infinities have no JSON."""
        for qid, row in self._scores.items():
            if not np.isfinite(row).all():
                raise ValueError(f"query {qid!r}: infinite scores have no JSON form")
        return {qid: row.tolist() for qid, row in self._scores.items()}


def as_passage_scores(records: Sequence[QueryRecord], scores: Any) -> PassageScores:
    """``scores`` as :class:`PassageScores` covering ``records``: a PassageScores (as is), ``{qid: {pid: score}}``
    or a ranx ``Run``, or per-record arrays aligned with ``records`` (a list, or a ``[Q, P]`` array)."""
    if isinstance(scores, PassageScores):
        return scores
    if isinstance(scores, Mapping) or callable(getattr(scores, "to_dict", None)):
        return PassageScores.from_run(records, scores)
    return PassageScores.of(records, scores)
