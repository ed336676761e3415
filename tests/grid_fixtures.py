"""Tiny test-built inputs for the grid: a HotpotQA-layout file and a deterministic stand-in LLM.

The stand-in answers a context correctly exactly when one of its passages holds the gold answer and wrongly
otherwise (it never abstains), so that the outcome of a context equals its HITS value: a test can tell a
correct correlation from a broken one.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from udcg_ltr.annotate.prompts import PromptConfig, ScoreResult


def _h(*parts) -> float:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def write_tiny_hotpot(data_dir: Path, n_questions: int = 12, n_paragraphs: int = 7) -> Path:
    """``data_dir/hotpotqa/dev_300.jsonl.gz``: questions whose answer ``answerN`` is in 2 supporting paragraphs."""
    path = data_dir / "hotpotqa" / "dev_300.jsonl.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for q in range(n_questions):
            contexts = [{"id": j, "title": f"T{q}-{j}", "is_supporting": j < 2,
                         "paragraph_text": f"Paragraph {j} of question {q} says answer{q}." if j < 2
                         else f"Paragraph {j} of question {q} talks about topic{j}."} for j in range(n_paragraphs)]
            f.write(json.dumps({"question_id": f"q{q}", "question_text": f"What is asked in question {q}?",
                                "answers_objects": [{"spans": [f"answer{q}"]}], "contexts": contexts}) + "\n")
    return path


class FakeLLM:
    """A deterministic stand-in for :class:`~udcg_ltr.annotate.scorer.LLMScorer`, built from an LLM config
    (``llm._target_=grid_fixtures.FakeLLM``); ``calls`` counts the prompts it computed (class-wide)."""

    calls = 0

    def __init__(self, name: str = "fake-llm", device: str = "cpu", progress: bool = False, **_: object):
        self.name, self.device, self.progress = name, device, progress
        self.model_name_or_path, self.gguf_file = f"/nowhere/{name}", None
        self.dtype, self.quantize, self.max_new_tokens = "float32", None, 24
        self.prompt = PromptConfig()

    @property
    def prompt_version(self) -> str:
        return self.prompt.version()

    def describe(self) -> dict:
        return {"name": self.name, "model": self.model_name_or_path, "dtype": self.dtype, "device": self.device,
                "quantize": None, "exact_tail": None, "max_new_tokens": self.max_new_tokens,
                "prompt_version": self.prompt_version, "prompt": self.prompt.to_dict()}

    def _answer(self, question: str, passages) -> tuple[float, str]:
        gold = next((w.rstrip(".") for _, text in passages for w in text.split() if w.startswith("answer")), None)
        if gold is not None:
            return 0.05, gold
        p = _h(self.name, question, passages)
        return p, "NO-RESPONSE" if len(passages) == 1 and p > 0.5 else "something else"

    def score(self, items, *, generate=False, progress=None, on_batch=None):
        items = list(items)
        out = []
        for it in items:
            p, answer = self._answer(it.question, it.passages)
            out.append(ScoreResult(p, answer if generate else None, 10))
        FakeLLM.calls += len(items)
        if on_batch:
            on_batch(list(range(len(items))), out)
        return out
