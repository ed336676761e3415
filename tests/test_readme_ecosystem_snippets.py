"""The python blocks of the README section "Using udcg-ltr with sentence-transformers, ranx, ir_datasets and the
Hub" run, offline, each in a fresh namespace in a temporary working folder (issue 18).

Where the section is read from: README.md when it has the section's heading; otherwise the markdown file named
by the environment variable ``UDCG_LTR_README_SECTION`` (a draft of the section); otherwise the test skips.

What the snippets may name, and what it becomes here (tiny fixtures built by this test):

* ``"path/to/reranker"``: a saved 2-layer, 32-wide random reranker (MiniLM's tokenizer), with a model card;
* ``"path/to/beir/scifact"``: a BEIR folder of three documents, two queries and their test qrels;
* ``ir_datasets.load``: a fake for any id (queries, documents, qrels, scoreddocs of the same three documents);
* ``udcg_ltr.models.hub.HfApi``: a recorder; the test checks that the repository was created and the folder
  uploaded (no network).
"""

from __future__ import annotations

import json
import os
import re
from collections import namedtuple
from pathlib import Path

import pytest
import torch
from model_fixtures import tiny_bert

from udcg_ltr.paths import PROJECT_ROOT

TITLE = "Using udcg-ltr with sentence-transformers, ranx, ir_datasets and the Hub"
ENV = "UDCG_LTR_README_SECTION"
PLACEHOLDERS = {"reranker": "path/to/reranker", "beir": "path/to/beir/scifact"}


def section_text() -> tuple[str, str] | None:
    """``(where, the section's markdown)`` from README.md, else from the draft ``$UDCG_LTR_README_SECTION``."""
    sources = [PROJECT_ROOT / "README.md"] + ([Path(os.environ[ENV])] if os.environ.get(ENV) else [])
    for source in sources:
        text = source.read_text(encoding="utf-8") if source.is_file() else ""
        match = re.search(rf"^(#+) {re.escape(TITLE)}\s*$", text, flags=re.M)
        if match:
            level = len(match.group(1))
            rest = text[match.end():]
            end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.M)
            return str(source), rest[: end.start() if end else len(rest)]
    return None


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


FOUND = section_text()
BLOCKS = python_blocks(FOUND[1]) if FOUND else []


def test_the_section_exists_and_has_its_snippets():
    if FOUND is None:
        pytest.skip(f"README.md has no section {TITLE!r} yet and ${ENV} names no draft")
    where, text = FOUND
    assert len(BLOCKS) >= 5, f"{where}: expected the 5 python blocks (sentence-transformers, ranx/TREC, datasets, "\
                             f"ir_datasets/BEIR, Hub), found {len(BLOCKS)}"
    joined = "\n".join(BLOCKS)
    for needle in ("CrossEncoder", "format_passage", "records_from_run", "records_to_ranx_run", "records_to_trec",
                   "records_to_hf_dataset", "read_ir_dataset", "read_beir", "push_to_hub", *PLACEHOLDERS.values()):
        assert needle in joined, f"{where}: no snippet uses {needle}"
    for option in ("dataset=beir", "dataset=ir_datasets"):
        assert f"`{option}`" in text, option


# ---- fixtures the placeholders stand for ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def reranker_folder(tmp_path_factory) -> Path:
    from udcg_ltr.models.hub import write_model_card
    from udcg_ltr.models.reranker import save_reranker

    model, tok = tiny_bert(layers=2, seed=11)
    path = tmp_path_factory.mktemp("snippets") / "model"
    save_reranker(model, tok, path, max_length=32, extra={"loss": "udcg", "k": 5, "llm": "toy-llm"})
    write_model_card(path)
    return path


@pytest.fixture(scope="module")
def beir_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("beir") / "scifact"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                               "".join(f"{q}\t{d}\t{g}\n" for q, d, g in QRELS))
    return folder


DOCS = [{"_id": "a", "title": "Hamlet", "text": "a tragedy by shakespeare"},
        {"_id": "b", "title": "", "text": "paris is the capital of france"},
        {"_id": "c", "title": "Rome", "text": "the capital of italy"}]
QUERIES = [("1", "who wrote hamlet"), ("2", "capital of france")]
QRELS = [("1", "a", 1), ("2", "b", 1)]
Query = namedtuple("Query", "query_id text")
Doc = namedtuple("Doc", "doc_id title text")
Qrel = namedtuple("Qrel", "query_id doc_id relevance iteration")
Scored = namedtuple("Scored", "query_id doc_id score")


class FakeIrDataset:
    def queries_iter(self):
        return (Query(q, t) for q, t in QUERIES)

    def qrels_iter(self):
        return (Qrel(q, d, g, "0") for q, d, g in QRELS)

    def scoreddocs_iter(self):
        return (Scored(q, d["_id"], float(i)) for q, _ in QUERIES for i, d in enumerate(DOCS))

    def docs_store(self):
        docs = {d["_id"]: Doc(d["_id"], d["title"], d["text"]) for d in DOCS}
        return type("Store", (), {"get_many": lambda self, ids: {i: docs[i] for i in ids if i in docs}})()


class RecordingHfApi:
    calls: list = []

    def __init__(self, token=None):
        RecordingHfApi.calls.append(("init", token))

    def create_repo(self, repo_id, **kwargs):
        RecordingHfApi.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, **kwargs):
        RecordingHfApi.calls.append(("upload_folder", kwargs))
        return "commit"


@pytest.mark.parametrize("index", range(len(BLOCKS)) if BLOCKS else [pytest.param(0, marks=pytest.mark.skip(
    reason=f"no section {TITLE!r} in README.md nor a draft named by ${ENV}"))])
def test_snippet_runs(index, reranker_folder, beir_folder, tmp_path, monkeypatch):
    from udcg_ltr.models import hub

    code = BLOCKS[index]
    code = code.replace(PLACEHOLDERS["reranker"], str(reranker_folder)).replace(PLACEHOLDERS["beir"], str(beir_folder))
    if "ir_datasets" in code:
        ir_datasets = pytest.importorskip("ir_datasets")
        monkeypatch.setattr(ir_datasets, "load", lambda dataset_id: FakeIrDataset())
    RecordingHfApi.calls = []
    monkeypatch.setattr(hub, "HfApi", RecordingHfApi)
    monkeypatch.chdir(tmp_path)  # files a snippet writes (run.trec, ...) land here
    torch.manual_seed(0)
    exec(compile(code, f"{FOUND[0]} python block {index + 1}", "exec"), {"__name__": "__readme__"})
    if "push_to_hub(" in code:
        names = [call[0] for call in RecordingHfApi.calls]
        assert names == ["init", "create_repo", "upload_folder"], names
        assert RecordingHfApi.calls[2][1]["folder_path"] == str(reranker_folder)
