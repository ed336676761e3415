"""Prompt configuration for utility annotation (UDCG paper, Figure 4), its version hash, and the prompt data types
(:class:`PromptItem` in, :class:`ScoreResult` out; torch-free, so the cache and the annotator need no model).

One (question, passages) prompt: the paper's instruction as the system message, then the user message
(:data:`PAPER_USER_TEMPLATE`; passages rendered by :data:`PAPER_DOCUMENT_TEMPLATE` from ``i = 1``, joined by
a blank line), through the model's chat template (``add_generation_prompt=True``), or the plain text
``{system}\\n\\n{user}`` for a model without one. Every text is configuration (:class:`PromptConfig`);
:meth:`PromptConfig.version` (a short sha256 of its canonical JSON) is the *prompt version* that keys the
annotation cache and is recorded with every annotation.
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
PAPER_SYSTEM_PROMPT = (
    "You are given a question and you must respond based on the provided documents. Respond directly "
    "without providing any premise or explanation. If none of the documents contain the answer, please "
    "respond with NO-RESPONSE. Do not try to respond based on your own knowledge."
)
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
    """Texts and templates of the annotation prompt.

    ``user_template`` must contain ``{documents}`` and ``{question}``; ``document_template`` may use
    ``{i}``, ``{title}`` and ``{text}``. ``abstention`` is the string the instruction asks for; the
    probability of its first token at the first answer position is P(NO-RESPONSE) (Eq. 2).
    ``no_response_token``, when set, is checked against that first token (e.g. ``"NO"`` for Qwen),
    so a tokenizer that splits the string differently fails loudly instead of scoring another token.
    ``chat_template``: ``None`` uses the model's chat template when it has one, ``True`` requires one,
    ``False`` always uses the plain-text form.
    """

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

    # ---- rendering ------------------------------------------------------------------------
    def render_documents(self, passages: Sequence[tuple[str, str]]) -> str:
        """All ``(title, text)`` passages in prompt order, numbered from :attr:`first_document_index`."""
        first = self.first_document_index
        return self.document_separator.join(self.document_template.format(i=i, title=t, text=x)
                                            for i, (t, x) in enumerate(passages, start=first))

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

    # ---- identity -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def version(self) -> str:
        """The prompt version: 12 hex digits of the sha256 of the canonical JSON of the fields that
        shape the prompt or the scored token (``no_response_token`` is only a check and is left out,
        so the paper's defaults and :meth:`from_meta` of the shared set share one version)."""
        fields = {k: v for k, v in self.to_dict().items() if k != "no_response_token"}
        canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]

    def replace(self, **changes: Any) -> PromptConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, obj: PromptConfig | Mapping[str, Any] | None) -> PromptConfig:
        """A :class:`PromptConfig` as is, ``None`` as the paper's prompt, or a mapping of its fields (e.g. a
        Hydra ``prompt`` group; ``_target_`` is ignored, other unknown keys are an error)."""
        if obj is None or isinstance(obj, PromptConfig):
            return obj or cls()
        if not hasattr(obj, "items"):
            raise TypeError(f"expected a PromptConfig or a mapping, got {type(obj).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in obj.items() if k != "_target_"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown prompt keys {sorted(unknown)} (known: {sorted(known)})")
        return cls(**data)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> PromptConfig:
        """The configuration an annotation ``meta.json`` describes (the shared annotated SQuAD set).

        Uses its ``system_prompt``, ``user_template``, ``document_template``, ``document_separator``,
        ``no_response_token`` and ``document_index`` ("i starts at N"); the abstention string is the
        paper's ``NO-RESPONSE`` unless ``meta`` names another under ``abstention``.
        """
        missing = [k for k in ("system_prompt", "user_template", "document_template") if k not in meta]
        if missing:
            raise ValueError(f"annotation meta lacks {missing}")
        index = meta.get("document_index")
        found = re.search(r"-?\d+", index) if isinstance(index, str) else None
        first = index if isinstance(index, int) else int(found.group()) if found else 1
        return cls(system_prompt=meta["system_prompt"], user_template=meta["user_template"],
                   document_template=meta["document_template"],
                   document_separator=meta.get("document_separator", PAPER_DOCUMENT_SEPARATOR),
                   abstention=meta.get("abstention", ABSTENTION), first_document_index=first,
                   no_response_token=meta.get("no_response_token"))
