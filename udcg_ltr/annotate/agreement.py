"""Re-annotating passages of the shared annotated SQuAD set (annotated by the demo LLM as its ``meta.json``
records) and counting how many reproduce the stored ``p_no_response`` within a tolerance and ``answer_alone``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from udcg_ltr.annotate.prompts import PromptItem
from udcg_ltr.data.schema import Passage, QueryRecord


@dataclass
class AgreementRow:
    qid: str
    pid: str
    stored_p: float
    ours_p: float
    stored_answer: str | None
    ours_answer: str | None

    @property
    def abs_diff(self) -> float:
        return abs(self.ours_p - self.stored_p)

    @property
    def same_answer(self) -> bool:
        return self.stored_answer is not None and self.ours_answer == self.stored_answer


@dataclass
class AgreementReport:
    rows: list[AgreementRow] = field(default_factory=list)
    tolerance: float = 0.01

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def within(self) -> int:
        return sum(r.abs_diff < self.tolerance for r in self.rows)

    @property
    def same_answer(self) -> int:
        return sum(r.same_answer for r in self.rows)

    @property
    def max_abs_diff(self) -> float:
        return max((r.abs_diff for r in self.rows), default=0.0)

    @property
    def mean_diff(self) -> float:
        return sum(r.ours_p - r.stored_p for r in self.rows) / max(1, self.n)

    def summary_line(self) -> str:
        return f"agreement: within_{self.tolerance:g}={self.within}/{self.n} same_answer={self.same_answer}/{self.n}"


def spread_sample(records: Sequence[QueryRecord], n: int = 20, per_question: int = 2) -> list[tuple[QueryRecord, Passage]]:
    """``n`` (record, passage) pairs: the first ``per_question`` passages of evenly spaced questions."""
    n_questions = -(-n // per_question)
    if n_questions > len(records):
        raise ValueError(f"cannot pick {n} passages from {len(records)} questions")
    step = len(records) // n_questions
    return [(records[i * step], p) for i in range(n_questions) for p in records[i * step].passages[:per_question]][:n]


def reannotate_shared(scorer, pairs: Sequence[tuple[QueryRecord, Passage]], stored_llm: str, *,
                      tolerance: float = 0.01, progress: bool | None = None) -> AgreementReport:
    """Score ``pairs`` (question + one passage, greedy answer) and compare with ``stored_llm``'s annotations."""
    items = [PromptItem(r.question, [(p.title, p.text)]) for r, p in pairs]
    results = scorer.score(items, generate=True, progress=progress)
    rows = [AgreementRow(r.qid, p.pid, float(ann["p_no_response"]), res.p_no_response,
                         ann.get("answer_alone"), res.answer)
            for (r, p), res in zip(pairs, results) for ann in [p.annotations[stored_llm]]]
    return AgreementReport(rows, tolerance)
