"""ANSWER_PROB annotations: the log-likelihood of the gold answer given one passage, cached on disk.

``answer_logprob(q, p) = max_a sum_t log P_LLM(a_t | prompt(q, [p]), a_<t)`` over the query's distinct
gold answers ``a`` (normalised with :func:`udcg_ltr.text.normalize_answer`; the first spelling of each
is scored), with the annotation prompt (a ``PromptItem`` with that single passage), teacher-forced
by the annotate helper's ``LLMScorer.answer_logprobs``. The study's ANSWER_PROB metric of a context is
the mean of its passages' values.

Values are cached in an append-only JSONL file (default ``cache_dir()/answer_logprob/<llm>-<prompt
version>.jsonl``): one self-contained line per (question, passage text, answer), keyed by a sha256 of
the LLM name, the prompt version, the question, the passage title and text, and the answer. Lines are
flushed and fsynced after every chunk, and a truncated last line (a killed run) is ignored on read,
so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.paths import cache_dir
from udcg_ltr.text import normalize_answer


def distinct_answers(answers: Sequence[str]) -> list[str]:
    seen, out = set(), []
    for a in answers:
        n = normalize_answer(a)
        if n and n not in seen:
            seen.add(n)
            out.append(a)
    return out


def _key(llm: str, version: str, question: str, title: str, text: str, answer: str) -> str:
    blob = json.dumps([llm, version, question, title, text, answer], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def read_cache(path: str | os.PathLike) -> dict[str, float]:
    path = Path(path)
    out: dict[str, float] = {}
    if not path.is_file():
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                obj = json.loads(line)
                out[obj["key"]] = float(obj["logprob"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue  # a line cut by a killed writer
    return out


def default_cache_path(llm: str, prompt_version: str) -> Path:
    return cache_dir() / "answer_logprob" / f"{llm}-{prompt_version}.jsonl"


def compute_answer_logprobs(records: Iterable[QueryRecord], scorer, *, cache_path: str | os.PathLike | None = None,
                            chunk: int = 32, progress: bool = True) -> dict[tuple[str, str], float]:
    """``{(qid, pid): max over distinct gold answers of log P(answer | question, passage)}`` for every passage.

    ``scorer`` needs ``name``, ``prompt_version`` and ``answer_logprobs(items, answers)`` (``LLMScorer``).
    """
    from tqdm.auto import tqdm

    from udcg_ltr.annotate.scorer import PromptItem

    records = list(records)
    version = getattr(scorer, "prompt_version", "unversioned")
    path = Path(cache_path) if cache_path is not None else default_cache_path(scorer.name, version)
    cache = read_cache(path)
    jobs = []  # (key, qid, pid, item, answer)
    for rec in records:
        for p in rec.passages:
            for a in distinct_answers(rec.answers):
                jobs.append((_key(scorer.name, version, rec.question, p.title, p.text, a), rec.qid, p.pid,
                             PromptItem(rec.question, [(p.title, p.text)]), a))
    todo = [j for j in jobs if j[0] not in cache]
    if todo:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f, tqdm(total=len(todo), desc=f"answer log-prob {scorer.name}",
                                                            disable=not progress) as bar:
            for start in range(0, len(todo), chunk):
                part = todo[start:start + chunk]
                values = scorer.answer_logprobs([j[3] for j in part], [j[4] for j in part], progress=False)
                for (key, qid, pid, _, answer), v in zip(part, values):
                    cache[key] = float(v)
                    f.write(json.dumps({"key": key, "qid": qid, "pid": pid, "answer": answer, "logprob": float(v)},
                                       ensure_ascii=False) + "\n")
                f.flush()
                os.fsync(f.fileno())
                bar.update(len(part))
    out: dict[tuple[str, str], float] = {}
    for key, qid, pid, _, _ in jobs:
        v = cache[key]
        out[(qid, pid)] = max(out.get((qid, pid), float("-inf")), v)
    return out


def attach_answer_logprobs(records: Iterable[QueryRecord], values: Mapping[tuple[str, str], float], llm: str) -> int:
    """Store ``values`` as ``annotations[llm]["answer_logprob"]`` (in place); returns how many were set."""
    n = 0
    for rec in records:
        for p in rec.passages:
            v = values.get((rec.qid, p.pid))
            if v is not None:
                p.annotations.setdefault(llm, {})["answer_logprob"] = float(v)
                n += 1
    return n


def load_cached_answer_logprobs(records: Iterable[QueryRecord], llm: str, prompt_version: str, *,
                                cache_path: str | os.PathLike | None = None) -> dict[tuple[str, str], float]:
    """The cached values only (no LLM): passages with no cached answer are left out."""
    path = Path(cache_path) if cache_path is not None else default_cache_path(llm, prompt_version)
    cache = read_cache(path)
    out: dict[tuple[str, str], float] = {}
    for rec in records:
        for p in rec.passages:
            vals = [cache.get(_key(llm, prompt_version, rec.question, p.title, p.text, a))
                    for a in distinct_answers(rec.answers)]
            if vals and all(v is not None for v in vals):
                out[(rec.qid, p.pid)] = max(vals)
    return out
