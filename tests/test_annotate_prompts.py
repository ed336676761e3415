"""PromptConfig: rendering, version hash, and agreement with the shared set's meta.json."""

from __future__ import annotations

import pytest

from udcg_ltr.annotate.prompts import PAPER_SYSTEM_PROMPT, PromptConfig
from udcg_ltr.paths import shared_file

META = shared_file("annotated", "meta.json")


def test_render_user_numbers_and_joins_documents():
    cfg = PromptConfig()
    user = cfg.render_user("Who?", [("T1", "first text"), ("T2", "second text")])
    assert user == ("Documents:\nDocument [1] (Title: T1) first text\n\nDocument [2] (Title: T2) second text"
                    "\n\nQuestion:\nWho?\n\nAnswer:")
    msgs = cfg.messages("Who?", [("T1", "x")])
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == PAPER_SYSTEM_PROMPT


def test_plain_text_and_index_base():
    cfg = PromptConfig(first_document_index=0, system_prompt="SYS")
    assert cfg.plain_text("q", [("t", "x")]).startswith("SYS\n\nDocuments:\nDocument [0] (Title: t) x")


def test_version_tracks_prompt_fields_but_not_the_token_check():
    base = PromptConfig()
    assert base.version() == PromptConfig().version()
    assert len(base.version()) == 12
    assert base.replace(system_prompt="other").version() != base.version()
    assert base.replace(document_separator="\n").version() != base.version()
    assert base.replace(abstention="I DON'T KNOW").version() != base.version()
    assert base.replace(no_response_token="NO").version() == base.version()


def test_invalid_templates_are_rejected():
    with pytest.raises(ValueError, match="documents"):
        PromptConfig(user_template="Question: {question}")
    with pytest.raises(ValueError, match="text"):
        PromptConfig(document_template="[{i}] {title}")
    with pytest.raises(ValueError, match="unknown prompt keys"):
        PromptConfig.from_dict({"system": "x"})


def test_from_dict_accepts_mappings():
    cfg = PromptConfig.from_dict({"abstention": "NONE", "_target_": "ignored"})
    assert cfg.abstention == "NONE" and cfg.system_prompt == PAPER_SYSTEM_PROMPT
    assert PromptConfig.from_dict(None) == PromptConfig()


def test_from_meta_parses_document_index():
    meta = {"system_prompt": "S", "user_template": "{documents}|{question}", "document_template": "{i}:{text}",
            "document_index": "i starts at 0", "no_response_token": "NO"}
    cfg = PromptConfig.from_meta(meta)
    assert cfg.render_user("q", [("t", "a"), ("t", "b")]) == "0:a\n\n1:b|q"
    assert cfg.no_response_token == "NO"
    with pytest.raises(ValueError, match="lacks"):
        PromptConfig.from_meta({"system_prompt": "S"})


@pytest.mark.shared_data
@pytest.mark.skipif(not META.is_file(), reason="shared annotated set absent")
def test_from_meta_renders_what_meta_json_specifies():
    from udcg_ltr.data.readers.annotated import read_annotated_squad, read_annotation_meta

    meta = read_annotation_meta()
    cfg = PromptConfig.from_meta(meta)
    record = read_annotated_squad()[7]
    p = record.passages[3]
    # What meta.json says, spelled out independently of PromptConfig.
    document = meta["document_template"].replace("{i}", "1").replace("{title}", p.title).replace("{text}", p.text)
    expected_user = (meta["user_template"].replace("{documents}", document)
                     .replace("{question}", record.question))
    assert cfg.render_user(record.question, [(p.title, p.text)]) == expected_user
    assert cfg.messages(record.question, [(p.title, p.text)]) == [
        {"role": "system", "content": meta["system_prompt"]}, {"role": "user", "content": expected_user}]
    # Two documents are joined by meta's separator.
    two = cfg.render_documents([(p.title, p.text), ("T", "x")])
    assert two == document + meta["document_separator"] + "Document [2] (Title: T) x"
    # The paper defaults are the same prompt as the shared set's (same version).
    assert cfg.version() == PromptConfig().version()


@pytest.mark.shared_data
@pytest.mark.skipif(not META.is_file(), reason="shared annotated set absent")
def test_chat_rendering_with_the_demo_tokenizer_matches_meta():
    from udcg_ltr.annotate.demo_llm import demo_model_dir, is_converted, verify_converted

    if not is_converted(demo_model_dir()):
        pytest.skip(f"demo LLM not set up (python -m udcg_ltr.annotate.demo_llm): {verify_converted(demo_model_dir())}")
    from transformers import AutoTokenizer

    from udcg_ltr.annotate.prompts import PromptItem
    from udcg_ltr.annotate.scorer import LLMScorer
    from udcg_ltr.data.readers.annotated import read_annotated_squad, read_annotation_meta

    meta = read_annotation_meta()
    tok = AutoTokenizer.from_pretrained(demo_model_dir())
    record = read_annotated_squad()[0]
    p = record.passages[0]

    class _NoModel:  # rendering needs only the tokenizer
        generation_config = None

        def eval(self):
            return self

        def forward(self, input_ids=None, logits_to_keep=0):  # pragma: no cover - never called
            raise AssertionError

        def get_input_embeddings(self):
            import torch
            return torch.nn.Embedding(1, 1)

    scorer = LLMScorer("demo", model=_NoModel(), tokenizer=tok, prompt=PromptConfig.from_meta(meta))
    text = scorer.render(PromptItem(record.question, [(p.title, p.text)]))
    user = meta["user_template"].format(documents=meta["document_template"].format(i=1, title=p.title, text=p.text),
                                        question=record.question)
    assert text == (f"<|im_start|>system\n{meta['system_prompt']}<|im_end|>\n"
                    f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
    assert tok.convert_ids_to_tokens(scorer.no_response_token_id) == meta["no_response_token"]
    # The shared prefix ends right before the documents.
    prefix = tok.decode(scorer.prefix_ids())
    assert text.startswith(prefix) and prefix.endswith("Documents:\n")
