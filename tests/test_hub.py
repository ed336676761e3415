"""Model card and push_to_hub (issue 18, item 1): the card's facts, and the Hub calls up to the upload, offline."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from model_fixtures import save_tiny_bert, tiny_bert

from udcg_ltr.data.schema import MissingFileError, Passage, QueryRecord
from udcg_ltr.models import hub
from udcg_ltr.models.reranker import save_reranker

LLM = "toy-llm"


@pytest.fixture()
def folder(tmp_path):
    model, tok = tiny_bert(layers=1, seed=2)
    path = tmp_path / "model"
    save_reranker(model, tok, path, max_length=32,
                  extra={"loss": "udcg", "loss_kwargs": {"tau": 0.5}, "k": 5, "gamma": 0.25, "llm": LLM,
                         "base_model": str(tmp_path / "checkpoints" / "my-start"), "seed": 3})
    return path


def front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_card_states_the_training_facts_from_the_side_file_and_the_arguments(folder, tmp_path):
    (tmp_path / "checkpoints" / "my-start").mkdir(parents=True)  # a local start: named, its path not shown
    path = hub.write_model_card(folder, dataset="annotated_squad (train split)", k=3,
                                metrics={"val/udcg@3": 0.51234, "val/ndcg@3": 0.7}, epochs=6)
    assert path == folder / "README.md"
    card = path.read_text()
    meta = front_matter(card)
    assert meta["library_name"] == "sentence-transformers" and meta["pipeline_tag"] == "text-ranking"
    assert "base_model" not in meta  # a local folder is no Hub id
    rows = dict(line.strip("|").split("|")[:2] for line in card.splitlines() if line.startswith("| "))
    rows = {a.strip(): b.strip() for a, b in rows.items()}
    assert rows["base model"] == "my-start" and str(tmp_path) not in card
    assert rows["data set"] == "annotated_squad (train split)"
    assert rows["loss"] == "udcg" and rows["loss arguments"] == '{"tau": 0.5}'
    assert rows["k (context size)"] == "3"  # the argument wins over the side file's 5
    assert rows["gamma"] == "0.2500" and rows["LLM whose utilities were the targets"] == LLM
    assert rows["passage template"] == "{title}. {text}" and rows["seed"] == "3"
    assert rows["val/udcg@3"] == "0.5123" and rows["val/ndcg@3"] == "0.7000"
    assert rows["epochs"] == "6"  # an unknown fact goes to the other settings
    assert "format_passage" in card and "CrossEncoder" in card


def test_card_without_facts_and_with_a_hub_base_model(folder):
    (folder / "udcg_ltr_reranker.json").unlink()
    card = hub.write_model_card(folder, base_model="sentence-transformers/all-MiniLM-L6-v2").read_text()
    assert front_matter(card)["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert "| data set | unknown |" in card and "No metrics were recorded." in card
    assert "none (relevance targets)" in card


def test_card_needs_a_model_folder(tmp_path):
    with pytest.raises(MissingFileError, match="config.json"):
        hub.write_model_card(tmp_path)


class FakeApi:
    """Records what push_to_hub asks of ``HfApi``; at the upload, what the folder holds."""

    calls: list = []

    def __init__(self, token=None, **kwargs):
        FakeApi.calls.append(("init", {"token": token, **kwargs}))

    def create_repo(self, repo_id, **kwargs):
        FakeApi.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, **kwargs):
        from pathlib import Path

        files = sorted(p.name for p in Path(kwargs["folder_path"]).iterdir())
        FakeApi.calls.append(("upload_folder", {**kwargs, "files": files}))
        return "commit-info"


def test_push_to_hub_creates_the_repo_and_uploads_the_folder_with_a_card(folder, monkeypatch):
    FakeApi.calls = []
    monkeypatch.setattr(hub, "HfApi", FakeApi)
    out = hub.push_to_hub(folder, "me/udcg-minilm", token="hf_x", private=True)
    assert out == "commit-info"
    assert [name for name, _ in FakeApi.calls] == ["init", "create_repo", "upload_folder"]
    assert FakeApi.calls[0][1]["token"] == "hf_x"
    create = FakeApi.calls[1][1]
    assert create["repo_id"] == "me/udcg-minilm" and create["private"] is True and create["exist_ok"] is True
    assert create["repo_type"] == "model"
    upload = FakeApi.calls[2][1]
    assert upload["repo_id"] == "me/udcg-minilm" and upload["folder_path"] == str(folder)
    assert upload["repo_type"] == "model"
    assert {"README.md", "config.json", "model.safetensors", "udcg_ltr_reranker.json"} <= set(upload["files"])
    assert 'snapshot_download("me/udcg-minilm")' in (folder / "README.md").read_text()
    # an existing card is kept
    (folder / "README.md").write_text("my own card")
    hub.push_to_hub(folder, "me/udcg-minilm")
    assert (folder / "README.md").read_text() == "my own card"


def test_push_to_hub_checks_before_any_network_call(folder, monkeypatch, tmp_path):
    FakeApi.calls = []
    monkeypatch.setattr(hub, "HfApi", FakeApi)
    with pytest.raises(ValueError, match="repo_id"):
        hub.push_to_hub(folder, "no-owner")
    (folder / "model.safetensors").unlink()
    with pytest.raises(MissingFileError, match="model.safetensors"):
        hub.push_to_hub(folder, "me/x")
    assert FakeApi.calls == []


def toy_records(n: int, seed: int, split: str) -> list[QueryRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n):
        ps = [Passage(pid=f"{split}{q}-{j}", title="T" if j % 2 else "", text=f"object{q} is colour {j}",
                      rank=j + 1, relevance=int(j == 0), annotations={LLM: {"p_no_response": float(rng.uniform())}})
              for j in range(3)]
        out.append(QueryRecord(qid=f"{split}{q}", question=f"what colour is object{q}?", passages=ps, split=split))
    return out


def test_fit_reranker_writes_the_model_card_with_its_metrics(tmp_path):
    from udcg_ltr.models import fit_reranker

    start = save_tiny_bert(tmp_path / "start", layers=1, seed=0)
    path, metrics = fit_reranker(toy_records(4, 0, "train"), toy_records(2, 1, "val"), llm=LLM,
                                 model_name_or_path=start, loss="udcg", k=2, gamma=0.5, epochs=1, batch_size=2,
                                 max_length=32, output_dir=tmp_path / "run", enable_progress_bar=False, num_threads=1)
    card = (tmp_path / "run" / "model" / "README.md").read_text()
    assert "| base model | start |" in card and str(tmp_path) not in card
    assert "| data set | 4 training / 2 validation queries |" in card
    assert "| loss | udcg |" in card and "| k (context size) | 2 |" in card and "| gamma | 0.5000 |" in card
    assert f"| LLM whose utilities were the targets | {LLM} |" in card
    assert f"| val/udcg@2 | {metrics['val/udcg@2']:.4f} |" in card
    # a later call adds the data set's name and keeps the metrics
    card = hub.write_model_card(path, dataset="toy colours").read_text()
    assert "| data set | toy colours |" in card and f"| val/udcg@2 | {metrics['val/udcg@2']:.4f} |" in card
