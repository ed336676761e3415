"""Label-free lexical match features of a question and its candidate passages (LETOR-style term coverage).

Per passage ``p`` of question ``q``, with ``T(q)`` the question's content terms (normalised tokens of
:func:`udcg_ltr.text.answer_tokens`, stop words removed, each counted once) and ``T(p)`` the
passage's normalised tokens:

=========================  ===========================================================================
``lexical_coverage``       ``|T(q) & T(p)| / |T(q)|``: the share of question terms the passage covers
``lexical_coverage_idf``   ``sum_{t in T(q) & T(p)} idf(t) / sum_{t in T(q)} idf(t)``, with
                           ``idf(t) = log((N + 1) / (df(t) + 0.5))`` over a corpus of ``N`` passages
=========================  ===========================================================================

Both are 0 when the question has no content term. They read no label and no model (LETOR's
"covered query term" features), so a selector may learn from them on any split
(:mod:`udcg_ltr.select.calibrated`); pass one :func:`corpus_idf` to every split so that they agree.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from udcg_ltr.text import answer_tokens

#: Feature names, usable as selector ``extra_features`` (they live in ``PaddedSlates.probes``).
LEXICAL_FEATURES = ("lexical_coverage", "lexical_coverage_idf")

#: Function words of English questions (articles are already dropped by the normaliser).
STOP_WORDS = frozenset(
    "of in on at to for by with from and or is was were are be been being am what which who whom whose when where "
    "why how did does do done that this these those it its as into than then there their they them he she his her "
    "him i we you your our has have had not no but if so such can could would should will may might must about "
    "after before during between over under up down out s".split())


def content_terms(text: str) -> set[str]:
    """Distinct normalised tokens of ``text`` without stop words."""
    return {t for t in answer_tokens(text) if t not in STOP_WORDS}


class CorpusIdf(Mapping[str, float]):
    """``idf(t) = log((N + 1) / (df(t) + 0.5))`` over ``N`` documents; unseen terms get the largest value
    (also through ``get`` and ``in``: every term has an idf)."""

    def __init__(self, document_frequency: Mapping[str, int], n_documents: int):
        if n_documents < 0:
            raise ValueError(f"n_documents must be >= 0, got {n_documents}")
        self.document_frequency, self.n_documents = dict(document_frequency), int(n_documents)

    def __getitem__(self, term: str) -> float:
        return math.log((self.n_documents + 1) / (self.document_frequency.get(term, 0) + 0.5))

    def __iter__(self):
        return iter(self.document_frequency)

    def __len__(self) -> int:
        return len(self.document_frequency)


def corpus_idf(texts: Iterable[str]) -> CorpusIdf:
    """Document frequencies of the (already de-duplicated) passage ``texts``."""
    texts = list(texts)
    return CorpusIdf(Counter(t for text in texts for t in set(answer_tokens(text))), len(texts))


def records_idf(records) -> CorpusIdf:
    """:func:`corpus_idf` over the distinct passages (by id) of ``records``' pools."""
    return corpus_idf({p.pid: p.text for r in records for p in r.passages}.values())


def lexical_features(question: str, texts: Sequence[str], idf: Mapping[str, float]) -> dict[str, list[float]]:
    """The two coverage features (module table) of each passage text for ``question``."""
    terms = content_terms(question)
    weights = {t: idf[t] for t in terms}
    total = sum(weights.values())
    covered = [terms & set(answer_tokens(text)) for text in texts]
    return {"lexical_coverage": [len(c) / len(terms) if terms else 0.0 for c in covered],
            "lexical_coverage_idf": [sum(weights[t] for t in c) / total if total > 0 else 0.0 for c in covered]}
