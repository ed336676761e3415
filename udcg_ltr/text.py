"""Answer normalisation and matching, shared by relevance labelling, answer grading, reader probes and eRAG.

``normalize_answer`` is the SQuAD / DPR convention (lower-case, drop punctuation and the articles "a", "an",
"the", collapse white space); ``has_answer`` is whole-token containment of a normalised gold answer in a
normalised passage (the DPR convention, with its usual noise); ``is_abstention`` spots a declining answer.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b", flags=re.UNICODE)
_PUNCT = set(string.punctuation) | {"\u2018", "\u2019", "\u201c", "\u201d", "\u2013", "\u2014"}


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse white space (SQuAD's official normaliser)."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch if ch not in _PUNCT else " " for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def has_answer(passage: str, answers: Iterable[str]) -> bool:
    """True when some normalised gold answer occurs in the normalised passage as whole tokens."""
    return has_answer_tokens(answer_tokens(passage), [answer_tokens(a) for a in answers])


def has_answer_tokens(tokens: Sequence[str], targets: Iterable[Sequence[str]]) -> bool:
    """Pre-normalised :func:`has_answer`: readers testing many pairs tokenise each passage once."""
    tokens = list(tokens)
    return any(g and any(tokens[i:i + len(g)] == g for i, t in enumerate(tokens) if t == g[0])
               for g in map(list, targets))


def exact_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(a) for a in answers))


def _best_f1(prediction: str, answers: Iterable[str], overlap: Callable[[list, list], int]) -> float:
    """Max over gold answers of the F1 whose matched-token count is ``overlap(prediction, gold)``."""
    pred = answer_tokens(prediction)
    best = 0.0
    for gold in map(answer_tokens, answers):
        matched = overlap(pred, gold) if pred and gold else 0
        if matched:
            p, r = matched / len(pred), matched / len(gold)
            best = max(best, 2 * p * r / (p + r))
    return best


def token_f1(prediction: str, answers: Iterable[str]) -> float:
    """Max over gold answers of the bag-of-tokens F1 (SQuAD's official F1)."""
    return _best_f1(prediction, answers, lambda pred, gold: sum((Counter(pred) & Counter(gold)).values()))


def contains_answer(prediction: str, answers: Iterable[str]) -> float:
    """1.0 when a normalised gold answer occurs as whole tokens in the normalised prediction."""
    return float(has_answer(prediction, answers))


def rouge_l(prediction: str, answers: Iterable[str]) -> float:
    """Max over gold answers of ROUGE-L F1 (longest common subsequence of normalised tokens)."""
    return _best_f1(prediction, answers, _lcs_length)


def _lcs_length(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def distinct_answers(answers: Sequence[str]) -> list[str]:
    """The first spelling of each distinct normalised answer, in order (empty normalisations dropped)."""
    first: dict[str, str] = {}
    for a in answers:
        first.setdefault(normalize_answer(a), a)
    return [a for key, a in first.items() if key]


ABSTENTION_STRING = "NO-RESPONSE"

#: Refusal phrases (matched on the normalised answer) besides the abstention string itself.
REFUSAL_PATTERNS: tuple[str, ...] = (
    r"\bno[ -]?response\b", r"\bi (do not|dont|don t) know\b",
    r"\b(cannot|can not|can t|unable to) (answer|be answered|determine|find|provide)\b",
    r"\b(does not|doesn t|do not|don t) (contain|mention|provide|specify|say|include)\b",
    r"\bnot (mentioned|provided|specified|stated|found|given|available)\b",
    r"\bno (information|answer|relevant information|mention)\b", r"\binsufficient information\b",
    r"^(none|unknown|n a)$",
)
_REFUSAL = re.compile("|".join(REFUSAL_PATTERNS))


def is_abstention(answer: str, abstention_string: str = ABSTENTION_STRING) -> bool:
    """True for the abstention string, an empty answer, or a usual refusal phrase."""
    stripped = answer.strip()
    if not stripped or (abstention_string and abstention_string.lower() in stripped.lower()):
        return True
    return bool(_REFUSAL.search(normalize_answer(stripped)))
