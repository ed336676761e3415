"""Reader for the DPR / KILT / FiD ``ctxs`` layout, and a BM25 pool builder for NQ-open.

Layout: one JSON object a line (``*.jsonl`` or ``*.jsonl.gz``)::

    {"id" | "qid": optional, "question": str, "answers": [str],
     "ctxs": [{"title": str, "text": str, "hasanswer" | "has_answer": bool,
               "isgold": bool (optional), "id": optional, "score": optional}]}

``qid`` is the ``id`` or ``qid`` field, else the 1-based line number; ``pid`` the ctx ``id``, else
``f"{qid}-{j}"`` (``j``: 0-based ctx index); ``relevance`` is ``hasanswer`` as 1/0 (computed with
:func:`udcg_ltr.text.has_answer` when absent); ``isgold`` goes to ``extra["isgold"]``; ``rank`` = j + 1.

NQ-open's oracle file holds one gold passage per question and no distractors: :func:`build_nq_pool`
retrieves a pool per question by BM25 over all the gold passages of the file (:class:`BM25Index`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from udcg_ltr.data.jsonl import iter_json_lines
from udcg_ltr.data.readers._common import validate_as_in_file
from udcg_ltr.data.schema import DataError, Passage, QueryRecord, get_field, get_str_list, validate_record
from udcg_ltr.paths import shared_file
from udcg_ltr.text import answer_tokens, has_answer, has_answer_tokens


def _ctx(obj: Any, j: int, qid: str, answers: list[str]) -> Passage:
    where = f"ctxs[{j}]"
    text = get_field(obj, "text", str, where)
    title = get_field(obj, "title", str, where, optional=True, default="")
    pid = str(get_field(obj, "id", (str, int), where, optional=True, default=f"{qid}-{j}"))
    flag = get_field(obj, "hasanswer", bool, where, optional=True)
    if flag is None:
        flag = get_field(obj, "has_answer", bool, where, optional=True)
    extra: dict[str, Any] = {} if flag is not None else {"hasanswer_computed": True}
    flag = has_answer(text, answers) if flag is None else flag
    if (isgold := get_field(obj, "isgold", bool, where, optional=True)) is not None:
        extra["isgold"] = isgold
    score = get_field(obj, "score", (float, str), where, optional=True)
    if isinstance(score, str):  # DPR's own dumps write scores as strings
        try:
            score = float(score)
        except ValueError:
            raise DataError(f"expected a number, got {score!r:.60}", field=f"{where}.score") from None
    return Passage(pid=pid, title=title, text=text, rank=j + 1,
                   score=None if score is None else float(score), relevance=int(flag), extra=extra)


def _dpr_record(obj: Any, lineno: int) -> QueryRecord:
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object, got {type(obj).__name__}")
    for key in ("id", "qid"):
        if key in obj and obj[key] is None:  # an explicit null id must not silently become a line number
            raise DataError("must not be null", field=key)
    id_key = "id" if "id" in obj else "qid"
    qid = str(get_field(obj, id_key, (str, int), optional=True, default=lineno))
    question = get_field(obj, "question", str)
    answers = get_str_list(obj, "answers")
    passages = [_ctx(c, j, qid, answers) for j, c in enumerate(get_field(obj, "ctxs", list))]
    record = QueryRecord(qid=qid, question=question, answers=answers, passages=passages)
    return validate_as_in_file(record, qid=id_key, passages="ctxs", names={"pid": "id", "relevance": "hasanswer"})


def read_dpr(path: str | os.PathLike | None = None, limit: int | None = None) -> list[QueryRecord]:
    """Read a DPR-style ``ctxs`` JSONL file (default: the shared NQ-open oracle file), the first ``limit``
    questions; errors name the file, the line and the field (``ctxs[2].hasanswer``)."""
    path = Path(path) if path is not None else shared_file("nq_open", "nq-open-oracle.jsonl.gz")
    records: list[QueryRecord] = []
    if limit is not None and limit <= 0:
        return records
    seen: dict[str, int] = {}
    for lineno, obj in iter_json_lines(path):
        try:
            record = _dpr_record(obj, lineno)
        except DataError as err:
            raise err.located(path=path, line=lineno) from None
        if record.qid in seen:
            raise DataError(f"duplicate question id {record.qid!r} (first on line {seen[record.qid]})",
                            path=str(path), line=lineno, field="id" if "id" in obj else "qid")
        seen[record.qid] = lineno
        records.append(record)
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise DataError("no records (the file is empty)", path=str(path))
    return records


_TOKEN = re.compile(r"\w+", re.UNICODE)

#: A short English stop list: enough to keep "the", "of", "in" from dominating short questions.
STOPWORDS = frozenset("""a an and are as at be been but by did do does for from had has have he her his how
i in into is it its of on or she that the their them they this to was were what when where which who
whom why will with you your""".split())


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without stop words (the BM25 analyser)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


class BM25Index:
    """Okapi BM25 over a fixed corpus, as a sparse ``[n_docs, vocab]`` weight matrix (a batch of queries is
    one sparse product): ``score(q, d) = sum_{t in q} idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b +
    b * |d| / avgdl))``, ``idf(t) = log(1 + (N - df(t) + 0.5) / (df(t) + 0.5))`` (Lucene's, never negative);
    a query term counts once per occurrence."""

    def __init__(self, texts: Sequence[str], *, k1: float = 0.9, b: float = 0.4):
        self.k1, self.b = float(k1), float(b)
        self.vocab: dict[str, int] = {}
        docs = [tokenize(text) for text in texts]
        counts = [Counter(self.vocab.setdefault(t, len(self.vocab)) for t in toks) for toks in docs]
        lengths = np.array([len(toks) for toks in docs], dtype=np.float64)
        rows = [i for i, c in enumerate(counts) for _ in c]
        cols = [t for c in counts for t in c]
        vals = [n for c in counts for n in c.values()]
        n_docs, n_terms = len(texts), len(self.vocab)
        tf = sp.coo_matrix((np.asarray(vals, dtype=np.float64), (rows, cols)), shape=(n_docs, n_terms))
        df = np.bincount(np.asarray(cols, dtype=np.int64), minlength=n_terms)
        self.idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        avgdl = lengths.mean() if n_docs and lengths.mean() > 0 else 1.0
        norm = self.k1 * (1.0 - self.b + self.b * lengths / avgdl)
        weight = tf.data * (self.k1 + 1.0) / (tf.data + norm[tf.row]) * self.idf[tf.col]
        self.weights = sp.csr_matrix((weight, (tf.row, tf.col)), shape=(n_docs, n_terms))
        self.n_docs = n_docs

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """Dense ``[n_queries, n_docs]`` BM25 scores."""
        terms = [[self.vocab[t] for t in tokenize(q) if t in self.vocab] for q in queries]
        rows = [i for i, ids in enumerate(terms) for _ in ids]
        cols = [c for ids in terms for c in ids]
        query = sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(queries), len(self.vocab)))
        return np.asarray((query @ self.weights.T).todense())

    def search(self, queries: Sequence[str], k: int, *, seed: int | None = 0,
               batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` document indices and scores per query, best first; equal scores in a seeded random order
        of the documents (``seed=None``: by index), so ties at the cut-off do not favour early documents."""
        k = min(int(k), self.n_docs)
        tiebreak = (np.random.default_rng(seed).permutation(self.n_docs) if seed is not None
                    else np.arange(self.n_docs))
        idx = np.zeros((len(queries), k), dtype=np.int64)
        val = np.zeros((len(queries), k))
        for start in range(0, len(queries), batch_size):
            block = self.scores(queries[start:start + batch_size])
            kth = (np.partition(block, self.n_docs - k, axis=1)[:, self.n_docs - k] if k < self.n_docs
                   else np.full(len(block), -np.inf))
            for r, row in enumerate(block):
                cand = np.flatnonzero(row >= kth[r])
                order = cand[np.lexsort((tiebreak[cand], -row[cand]))][:k]
                idx[start + r] = order
                val[start + r] = row[order]
        return idx, val


def build_nq_pool(records: Sequence[QueryRecord], pool_size: int = 10, seed: int = 0, *,
                  include_gold: bool = True, k1: float = 0.9, b: float = 0.4) -> list[QueryRecord]:
    """Candidate pools for gold-passage-only data (NQ-open oracle) by BM25 over all gold passages (those of
    ``records``, identical title + text indexed once): each question's top ``pool_size`` over ``title + " " +
    text``, ``relevance`` = ``has_answer`` (its own gold passage also keeps the file's ``hasanswer``). With
    ``include_gold`` an unretrieved gold passage replaces the last one (``extra["gold_retrieved"]`` says so).
    ``seed`` orders equal scores."""
    if pool_size < 1:
        raise ValueError(f"pool_size must be >= 1, got {pool_size}")
    first: dict[tuple[str, str], tuple[Passage, str]] = {}  # (title, text) -> its first passage and query
    for rec in records:
        for p in rec.passages:
            first.setdefault((p.title, p.text), (p, rec.qid))
    doc_of_text = {key: i for i, key in enumerate(first)}
    docs = list(first.values())
    own = [[doc_of_text[(p.title, p.text)] for p in rec.passages] for rec in records]
    if not docs:
        raise ValueError("no passages to index")
    index = BM25Index([f"{p.title} {p.text}" if p.title else p.text for p, _ in docs], k1=k1, b=b)
    top, top_scores = index.search([r.question for r in records], pool_size, seed=seed)
    doc_tokens = [answer_tokens(p.text) for p, _ in docs]
    out = []
    for i, rec in enumerate(records):
        targets = [t for t in (answer_tokens(a) for a in rec.answers) if t]
        chosen, scores = list(top[i]), list(top_scores[i])
        gold = set(own[i])
        retrieved = bool(gold & set(chosen))
        if include_gold and gold and not retrieved:  # the gold passage replaces the last one
            chosen[-1], scores[-1] = own[i][0], float(index.scores([rec.question])[0, own[i][0]])
        own_flags = dict(zip(own[i], rec.passages))
        passages = []
        for rank, (d, s) in enumerate(zip(chosen, scores), start=1):
            src, src_qid = docs[d]
            own_relevant = d in own_flags and bool(own_flags[d].relevance)
            passages.append(Passage(pid=src.pid, title=src.title, text=src.text, rank=rank, score=float(s),
                                    relevance=int(own_relevant or has_answer_tokens(doc_tokens[d], targets)),
                                    extra={"source_qid": src_qid, "own_gold": d in gold}))
        new = QueryRecord(qid=rec.qid, question=rec.question, answers=list(rec.answers), passages=passages,
                          split=rec.split, extra={**rec.extra, "pool": f"bm25-top{pool_size}",
                                                  "gold_retrieved": retrieved})
        out.append(validate_record(new))
    return out


def read_nq_pool(path: str | os.PathLike | None = None, pool_size: int = 10, seed: int = 0,
                 limit: int | None = None, **kw: Any) -> list[QueryRecord]:
    """:func:`read_dpr` then :func:`build_nq_pool` (the corpus is all passages of the whole file;
    ``limit`` keeps the first ``limit`` questions after retrieval)."""
    pools = build_nq_pool(read_dpr(path), pool_size=pool_size, seed=seed, **kw)
    return pools if limit is None else pools[:limit]
