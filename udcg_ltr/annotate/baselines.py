"""Annotations of the baselines UDCG is compared with, computed from the same LLM and prompt.

* **eRAG** (Salemi & Zamani, 2024): the LLM's answer with one passage alone (``answer_alone``) scored against
  the gold answers: ``erag_em`` (EM), ``erag_f1`` (token F1), ``erag_contains`` (:func:`erag_labels`);
* **ANSWER_PROB**: the log-likelihood of the gold answer given the passage, teacher-forced after the same
  prompt, max over the gold answers (``answer_logprob``; :meth:`.LLMScorer.answer_logprobs`);
* **Monte Carlo P(NO-RESPONSE)** for LLMs reachable only through a text API: the share of ``n`` answers
  sampled at temperature ``T`` that abstain (``p_no_response_mc``) -- :func:`monte_carlo_p_no_response`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from udcg_ltr.text import ABSTENTION_STRING, contains_answer, exact_match, is_abstention, token_f1

#: Annotation fields that :func:`erag_labels` fills.
ERAG_FIELDS = ("erag_em", "erag_f1", "erag_contains")


def erag_labels(answer_alone: str, gold: Sequence[str], *, abstention_string: str = ABSTENTION_STRING) -> dict[str, float]:
    """eRAG labels of one passage: EM / token F1 / containment of ``answer_alone`` against ``gold``. An
    abstention scores 0 on all three (a refusal phrase quoting the answer would otherwise earn credit)."""
    if not gold or is_abstention(answer_alone, abstention_string):
        return {"erag_em": 0.0, "erag_f1": 0.0, "erag_contains": 0.0}
    return {"erag_em": exact_match(answer_alone, gold), "erag_f1": token_f1(answer_alone, gold),
            "erag_contains": contains_answer(answer_alone, gold)}


@dataclass(frozen=True)
class MonteCarloConfig:
    """``n`` sampled answers at ``temperature`` per prompt; ``seed`` makes the draws reproducible."""

    n: int = 10
    temperature: float = 1.0
    seed: int = 0
    max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"Monte Carlo n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")


def abstention_rate(answers: Sequence[str], *, abstention_string: str = ABSTENTION_STRING) -> float:
    """Share of answers that abstain: the Monte Carlo estimate of P(NO-RESPONSE)."""
    if not answers:
        raise ValueError("abstention_rate needs at least one answer")
    return sum(is_abstention(a, abstention_string) for a in answers) / len(answers)


def monte_carlo_p_no_response(scorer, item, config: MonteCarloConfig = MonteCarloConfig(), *,
                              seed: int | None = None) -> tuple[float, list[str]]:
    """Black-box P(NO-RESPONSE): sample ``config.n`` answers and count abstentions. ``scorer`` needs only
    ``sample_answers(item, n, temperature, seed=..., max_new_tokens=...)``: an API client can stand in."""
    answers = scorer.sample_answers(item, config.n, config.temperature, seed=config.seed if seed is None else seed,
                                    max_new_tokens=config.max_new_tokens)
    abstention = getattr(getattr(scorer, "prompt", None), "abstention", ABSTENTION_STRING)
    return abstention_rate(answers, abstention_string=abstention), answers
