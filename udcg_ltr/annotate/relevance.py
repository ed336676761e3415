"""Relevance labels R(q, p) for utility (Eq. 2): from the dataset, by answer containment, or by an LLM judge.

* ``dataset`` (or ``keep``): keep the labels the reader set (qrels, gold passages, ``has_answer`` flags);
* ``contains``: ``1`` when a normalised gold answer occurs as whole tokens in the passage text
  (:func:`udcg_ltr.text.has_answer`, the DPR convention), else ``0``;
* ``llm``: the UDCG paper's relevance judge (Figure 5, :class:`~udcg_ltr.annotate.judge.RelevanceJudge`):
  grade A -> 1, B -> 0; unparseable replies are counted, logged, and either left unlabelled or labelled by
  containment (``fallback="contains"``). Verdicts are kept in ``Passage.extra["relevance_judge"]``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from udcg_ltr.data.schema import DataError, QueryRecord
from udcg_ltr.text import has_answer

log = logging.getLogger(__name__)

METHODS = ("dataset", "keep", "contains", "llm")


@dataclass
class RelevanceStats:
    method: str
    passages: int = 0
    relevant: int = 0
    unlabelled: int = 0
    unparseable: int = 0

    def to_dict(self) -> dict:  # as AnnotationStats.to_dict: the CLI's summary reads both alike
        return asdict(self)


def label_relevance(records: Sequence[QueryRecord], method: str = "dataset", *, judge=None,
                    fallback: str | None = None, progress: bool | None = None) -> RelevanceStats:
    """Set ``Passage.relevance`` on every passage (in place); ``judge``: a :class:`.RelevanceJudge`."""
    if method not in METHODS:
        raise ValueError(f"unknown relevance method {method!r} (use one of {', '.join(METHODS)})")
    passages = [(r, p) for r in records for p in r.passages]
    stats = RelevanceStats(method=method, passages=len(passages))
    if method == "contains":
        for r, p in passages:
            if not r.answers:
                raise DataError(f"query {r.qid!r} has no gold answers: relevance by containment is undefined",
                                field="answers")
            p.relevance = int(has_answer(p.text, r.answers))
    elif method == "llm":
        if judge is None:
            raise ValueError("relevance method 'llm' needs a judge (udcg_ltr.annotate.judge.RelevanceJudge)")
        results = judge.judge_many([(r.question, r.answers, p.text) for r, p in passages], progress=progress)
        stats.unparseable = results.unparseable
        for (r, p), reply in zip(passages, results.replies):
            p.extra["relevance_judge"] = {"grade": reply.grade, "motivation": reply.motivation}
            if reply.grade is not None:
                p.relevance = int(reply.grade == "A")
            elif fallback == "contains" and r.answers:
                p.relevance = int(has_answer(p.text, r.answers))
            else:
                p.relevance = None
        if stats.unparseable:
            log.warning("relevance judge: %d of %d replies unparseable%s", stats.unparseable, len(passages),
                        " (labelled by containment)" if fallback == "contains" else " (left unlabelled)")
    stats.relevant = sum(1 for _, p in passages if p.relevance is not None and p.relevance >= 1)
    stats.unlabelled = sum(1 for _, p in passages if p.relevance is None)
    if stats.unlabelled:
        log.warning("relevance (%s): %d of %d passages have no label (they count as not relevant)",
                    method, stats.unlabelled, stats.passages)
    return stats
