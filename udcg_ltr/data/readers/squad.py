"""Reader for SQuAD v1.1 (``squad/dev-v1.1.json.gz``): passages, same-article pools, splits by article.

Passages (:func:`chunk_paragraph`): each paragraph's sentences (cut after ``.``, ``!`` or ``?`` and
white space) packed greedily into chunks of at most ``max_words`` words, a longer sentence being a
chunk by itself. This rule reproduces all 3,629 passages of the shared annotated set. Passage id
``ARTICLE-PARAGRAPH-CHUNK`` (0-based, ``"4-6-1"``); title = article title with underscores as spaces.

Pools: ``pool="article"``: every passage of the question's article (other paragraphs are same-topic
hard distractors), in article order, without rank or score; ``pool="paragraph"``: the question's own
paragraph. Relevance is :func:`udcg_ltr.text.has_answer` of the gold answers; a passage without the
answer is ``is_distractor=True``. Splits are by article (:func:`assign_splits`).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

from udcg_ltr.data.readers._common import load_json
from udcg_ltr.data.schema import DataError, Passage, QueryRecord, get_field, validate_record
from udcg_ltr.paths import shared_file
from udcg_ltr.text import answer_tokens, has_answer_tokens

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

#: Default split proportions by article (the shared annotated set's 32 / 8 / 8 of 48 articles).
DEFAULT_SPLIT_RATIOS: dict[str, float] = {"train": 32, "val": 8, "test": 8}


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: cut after ``.``, ``!`` or ``?`` followed by white space."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def chunk_paragraph(text: str, max_words: int = 100) -> list[str]:
    """Greedy packing of whole sentences into chunks of at most ``max_words`` words (module doc)."""
    if max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    chunks: list[list[str]] = []
    n_words = 0
    for sentence in split_sentences(text):
        w = len(sentence.split())
        if not chunks or n_words + w > max_words:
            chunks.append([])
            n_words = 0
        chunks[-1].append(sentence)
        n_words += w
    return [" ".join(chunk) for chunk in chunks]


def assign_splits(n_items: int, ratios: Mapping[str, float] | None = None, seed: int | None = None) -> list[str]:
    """Split name per item index: items (in index order, or a seeded random order) cut by ``ratios`` at
    ``round(n * cumulative_ratio / total)`` (48 items with 32/8/8 give exactly 32, 8 and 8)."""
    ratios = dict(DEFAULT_SPLIT_RATIOS if ratios is None else ratios)
    if not ratios or any(v < 0 for v in ratios.values()) or sum(ratios.values()) <= 0:
        raise ValueError(f"split ratios must be non-negative with a positive sum, got {ratios}")
    order = list(range(n_items))
    if seed is not None:
        random.Random(seed).shuffle(order)
    total = float(sum(ratios.values()))
    ends = [round(n_items * cumulative / total) for cumulative in accumulate(ratios.values(), initial=0.0)]
    out = [""] * n_items
    for name, start, end in zip(ratios, ends, ends[1:]):
        for pos in order[start:end]:
            out[pos] = name
    return out


@dataclass(frozen=True)
class SquadPassage:
    article: int
    paragraph: int
    chunk: int
    title: str
    text: str
    tokens: tuple[str, ...] = ()  # answer_tokens(text), for fast has_answer

    @property
    def pid(self) -> str:
        return f"{self.article}-{self.paragraph}-{self.chunk}"


def squad_passages(data: Any, max_words: int = 100, *, path: str | os.PathLike | None = None
                   ) -> list[list[SquadPassage]]:
    """Passages per article of a parsed SQuAD file (``{"data": [...]}``), in article order."""
    out = []
    for a, article in enumerate(_articles(data, path)):
        try:
            title = get_field(article, "title", str).replace("_", " ")
            contexts = [get_field(para, "context", str, f"paragraphs[{p}]")
                        for p, para in enumerate(get_field(article, "paragraphs", list))]
        except DataError as err:
            raise err.located(path=path, prefix=f"data[{a}]") from None
        out.append([SquadPassage(a, p, c, title, text, tuple(answer_tokens(text)))
                    for p, context in enumerate(contexts) for c, text in enumerate(chunk_paragraph(context, max_words))])
    return out


def _articles(data: Any, path: str | os.PathLike | None = None) -> list:
    try:
        if not isinstance(data, Mapping):
            raise DataError(f"expected a JSON object with a 'data' list, got {type(data).__name__}")
        return get_field(data, "data", list)
    except DataError as err:
        raise err.located(path=path) from None


def read_squad(path: str | os.PathLike | None = None, *, max_words: int = 100, questions_per_article: int | None = None,
               seed: int = 0, pool: str = "article", split_ratios: Mapping[str, float] | None = None,
               split_seed: int | None = None, article_splits: Mapping[int, str] | None = None,
               articles: Sequence[int] | None = None) -> list[QueryRecord]:
    """SQuAD v1.1 questions with same-article candidate pools (module doc); ``questions_per_article``
    samples that many questions per article with ``seed`` (in file order). Splits: ``article_splits``
    (article index -> split name), else :func:`assign_splits` of all articles. ``articles`` keeps those
    article indices. Errors name the file and the field (``data[3].paragraphs``...)."""
    if pool not in ("article", "paragraph"):
        raise ValueError(f"pool must be 'article' or 'paragraph', got {pool!r}")
    path = Path(path) if path is not None else shared_file("squad", "dev-v1.1.json.gz")
    data = load_json(path)
    passages = squad_passages(data, max_words, path=path)
    raw_articles = _articles(data, path)
    splits = assign_splits(len(raw_articles), split_ratios, split_seed)
    if article_splits is not None:
        splits = [article_splits.get(a, "") for a in range(len(raw_articles))]
    rng = random.Random(seed)
    records: list[QueryRecord] = []
    seen: dict[str, str] = {}  # question id -> where it first appeared, over the whole file
    wanted = None if articles is None else set(articles)
    for a, article in enumerate(raw_articles):
        # sample even for skipped articles so that a subset keeps the same questions
        try:
            questions = _questions(article)
            for _, q, where in questions:
                qid = str(get_field(q, "id", (str, int), where))
                if qid in seen:
                    raise DataError(f"duplicate question id {qid!r} (first at {seen[qid]})", field=f"{where}.id")
                seen[qid] = f"data[{a}].{where}"
        except DataError as err:
            raise err.located(path=path, prefix=f"data[{a}]") from None
        if questions_per_article is not None and questions_per_article < len(questions):
            keep = sorted(rng.sample(range(len(questions)), questions_per_article))
            questions = [questions[i] for i in keep]
        if wanted is not None and a not in wanted:
            continue
        for p, q, where in questions:
            try:
                records.append(_record(q, a, p, passages[a], pool, splits[a] or None))
            except DataError as err:
                raise err.located(path=path, prefix=f"data[{a}].{where}") from None
    if not seen:
        raise DataError("no records (no question in the file)", path=str(path), field="data")
    return records


def _questions(article: Any) -> list[tuple[int, Any, str]]:
    return [(p, qa, f"paragraphs[{p}].qas[{i}]") for p, para in enumerate(get_field(article, "paragraphs", list))
            for i, qa in enumerate(get_field(para, "qas", list, f"paragraphs[{p}]"))]


def _record(qa: Any, article: int, paragraph: int, article_passages: list[SquadPassage], pool: str,
            split: str | None) -> QueryRecord:
    qid = get_field(qa, "id", (str, int))
    question = get_field(qa, "question", str)
    answers = list(dict.fromkeys(get_field(ans, "text", str, f"answers[{i}]")  # distinct, in file order
                                 for i, ans in enumerate(get_field(qa, "answers", list))))
    if not answers:
        raise DataError("no gold answer", field="answers")
    targets = [answer_tokens(a) for a in answers]
    kept = [sp for sp in article_passages if pool != "paragraph" or sp.paragraph == paragraph]
    relevant = [has_answer_tokens(sp.tokens, targets) for sp in kept]
    passages = [Passage(pid=sp.pid, title=sp.title, text=sp.text, relevance=int(r), is_distractor=not r,
                        extra={"same_paragraph": sp.paragraph == paragraph}) for sp, r in zip(kept, relevant)]
    record = QueryRecord(qid=str(qid), question=question, answers=answers, passages=passages, split=split,
                         extra={"article": article, "paragraph": paragraph,
                                "title": article_passages[0].title if article_passages else ""})
    return validate_record(record)
