"""Prompt configuration for utility annotation (UDCG paper, Figure 4), its version hash, and the prompt data types
(:class:`PromptItem` in, :class:`ScoreResult` out; torch-free, so the cache and the annotator need no model).

One prompt: the paper's instruction as the system message, then the user message (passages numbered from
``i = 1``, joined by a blank line), through the model's chat template, else as ``{system}\\n\\n{user}``;
:meth:`PromptConfig.version` (a short sha256 of its canonical JSON) is the *prompt version* keying the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The UDCG paper's annotation instruction (Figure 4), as in the shared ``meta.json``.
PAPER_SYSTEM_PROMPT = ("You are given a question and you must respond based on the provided documents. "
                       "Respond directly without providing any premise or explanation. If none of the "
                       "documents contain the answer, please respond with NO-RESPONSE. Do not try to "
                       "respond based on your own knowledge.")
PAPER_USER_TEMPLATE = "Documents:\n{documents}\n\nQuestion:\n{question}\n\nAnswer:"
PAPER_DOCUMENT_TEMPLATE = "Document [{i}] (Title: {title}) {text}"
PAPER_DOCUMENT_SEPARATOR = "\n\n"
ABSTENTION = "NO-RESPONSE"


@dataclass
class PromptItem:
    """One prompt: a question and its passages in prompt order, as ``(title, text)`` pairs."""

    question: str
    passages: Sequence[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.question, str):
            raise TypeError(f"PromptItem.question must be a string, got {type(self.question).__name__}")
        self.passages = [(str(t), str(x)) for t, x in self.passages]


@dataclass
class ScoreResult:
    """P(NO-RESPONSE), the greedy answer (``None`` unless asked for) and the prompt length in tokens."""

    p_no_response: float
    answer: str | None
    n_prompt_tokens: int


@dataclass(frozen=True)
class PromptConfig:
    """Texts and templates of the annotation prompt (``user_template`` has ``{documents}`` and ``{question}``,
    ``document_template`` may use ``{i}``, ``{title}`` and ``{text}``). The probability of the first token of
    ``abstention`` at the first answer position is P(NO-RESPONSE) (Eq. 2); ``no_response_token``, when set, is
    checked against that token (e.g. ``"NO"`` for Qwen), so a tokenizer that splits the string otherwise fails
    loudly. ``chat_template``: ``None`` uses the model's if any, ``True`` requires one, ``False`` never."""

    system_prompt: str = PAPER_SYSTEM_PROMPT
    user_template: str = PAPER_USER_TEMPLATE
    document_template: str = PAPER_DOCUMENT_TEMPLATE
    document_separator: str = PAPER_DOCUMENT_SEPARATOR
    abstention: str = ABSTENTION
    no_response_token: str | None = None
    first_document_index: int = 1
    chat_template: bool | None = None
    plain_separator: str = "\n\n"

    def __post_init__(self) -> None:
        for placeholder in ("{documents}", "{question}"):
            if placeholder not in self.user_template:
                raise ValueError(f"PromptConfig.user_template must contain {placeholder}: {self.user_template!r}")
        if "{text}" not in self.document_template:
            raise ValueError(f"PromptConfig.document_template must contain {{text}}: {self.document_template!r}")
        if not self.abstention:
            raise ValueError("PromptConfig.abstention must be a non-empty string")

    def render_documents(self, passages: Sequence[tuple[str, str]]) -> str:
        """All ``(title, text)`` passages in prompt order, numbered from :attr:`first_document_index`."""
        return self.document_separator.join(self.document_template.format(i=i, title=t, text=x)
                                            for i, (t, x) in enumerate(passages, start=self.first_document_index))

    def render_user(self, question: str, passages: Sequence[tuple[str, str]]) -> str:
        return self.user_template.format(documents=self.render_documents(passages), question=question)

    def messages(self, question: str, passages: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
        """Chat messages: the instruction as the system message, then the user message."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return system + [{"role": "user", "content": self.render_user(question, passages)}]

    def plain_text(self, question: str, passages: Sequence[tuple[str, str]]) -> str:
        """The prompt for models without a chat template."""
        user = self.render_user(question, passages)
        return f"{self.system_prompt}{self.plain_separator}{user}" if self.system_prompt else user

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def version(self) -> str:
        """The prompt version: 12 hex digits of the sha256 of the canonical JSON of the fields shaping the
        prompt (``no_response_token``, a mere check, is left out: :meth:`from_meta` shares the default's)."""
        fields = {k: v for k, v in self.to_dict().items() if k != "no_response_token"}
        canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]

    def replace(self, **changes: Any) -> PromptConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, obj: PromptConfig | Mapping[str, Any] | None) -> PromptConfig:
        """A :class:`PromptConfig`, ``None`` (the paper's) or a mapping of fields (``_target_`` ignored)."""
        if obj is None or isinstance(obj, PromptConfig):
            return obj or cls()
        if not hasattr(obj, "items"):
            raise TypeError(f"expected a PromptConfig or a mapping, got {type(obj).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in obj.items() if k != "_target_"}
        if unknown := set(data) - known:
            raise ValueError(f"unknown prompt keys {sorted(unknown)} (known: {sorted(known)})")
        return cls(**data)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> PromptConfig:
        """The configuration an annotation ``meta.json`` describes (the shared annotated SQuAD set): its
        templates, ``no_response_token`` and ``document_index`` ("i starts at N"); the abstention string is
        ``meta["abstention"]``, default the paper's ``NO-RESPONSE``."""
        if missing := [k for k in ("system_prompt", "user_template", "document_template") if k not in meta]:
            raise ValueError(f"annotation meta lacks {missing}")
        index = meta.get("document_index")
        found = re.search(r"-?\d+", index) if isinstance(index, str) else None
        first = index if isinstance(index, int) else int(found.group()) if found else 1
        return cls(system_prompt=meta["system_prompt"], user_template=meta["user_template"],
                   document_template=meta["document_template"], first_document_index=first,
                   document_separator=meta.get("document_separator", PAPER_DOCUMENT_SEPARATOR),
                   abstention=meta.get("abstention", ABSTENTION), no_response_token=meta.get("no_response_token"))
