"""Grading an end-to-end answer as CORRECT / ABSTAINED / WRONG (the outcome order UDCG_theta learns).

* ABSTAINED: the abstention string (``NO-RESPONSE``) or a refusal (:func:`udcg_ltr.text.is_abstention`);
* CORRECT: the answer matches a gold answer under the chosen rule (``contains``: a normalised gold answer
  occurs as whole tokens in the normalised answer; ``em``: normalised exact match; ``f1``: token F1 >=
  ``f1_threshold``) **and** the context holds a relevant passage, as in the UDCG paper (a right answer from
  parametric memory alone is not credited to the context);
* WRONG: anything else.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Sequence

from udcg_ltr.text import ABSTENTION_STRING, contains_answer, exact_match, is_abstention, token_f1


class Outcome(str, enum.Enum):
    CORRECT = "correct"
    ABSTAINED = "abstained"
    WRONG = "wrong"

    @property
    def score(self) -> int:
        """Ordinal used for ranking contexts: correct (2) > abstained (1) > wrong (0)."""
        return {"correct": 2, "abstained": 1, "wrong": 0}[self.value]


_MATCH_RULES = {"contains": contains_answer, "em": exact_match, "f1": token_f1}


def answer_matches(answer: str, gold: Sequence[str], *, rule: str = "contains", f1_threshold: float = 0.5) -> bool:
    if rule not in _MATCH_RULES:
        raise ValueError(f"unknown match rule {rule!r} (use 'contains', 'em' or 'f1')")
    return _MATCH_RULES[rule](answer, gold) >= (f1_threshold if rule == "f1" else 1.0)  # contains, em: 0 or 1


def grade_answer(answer: str, gold: Sequence[str], *, context_has_relevant: bool = True, rule: str = "contains",
                 f1_threshold: float = 0.5, abstention_string: str = ABSTENTION_STRING) -> Outcome:
    """CORRECT / ABSTAINED / WRONG for one end-to-end answer (see the module docstring)."""
    if is_abstention(answer, abstention_string):
        return Outcome.ABSTAINED
    if context_has_relevant and answer_matches(answer, gold, rule=rule, f1_threshold=f1_threshold):
        return Outcome.CORRECT
    return Outcome.WRONG


def outcome_counts(outcomes: Iterable[Outcome | str]) -> dict[str, int]:
    counts = Counter(Outcome(o).value for o in outcomes)
    return {o.value: counts[o.value] for o in Outcome}
