"""Test helper: read what an offline W&B run recorded (config, summary, history count, exit code, artifacts).

The project itself never reads W&B's private ``run-*.wandb`` log (the sweep summary reads the jobs'
own ``job_result.json``); the tests do, to check what a job sent to W&B. The format is W&B's
LevelDB-style record log of ``wandb_internal_pb2.Record`` protobufs; it may change between W&B
versions, which is why it lives here and not in the package.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2 as pb


@dataclass
class OfflineArtifact:
    """An artifact the run logged: name, type, metadata and its files (logical path -> size in bytes)."""

    name: str
    type: str
    metadata: dict[str, Any]
    files: dict[str, int]
    local_paths: dict[str, str]  # logical path -> the file W&B uploads on ``wandb sync`` (never sent itself)


@dataclass
class OfflineRun:
    """What an offline W&B run recorded: its id, group, tags, config, final summary and artifacts."""

    path: Path
    run_id: str = ""
    group: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    n_history: int = 0
    exit_code: int | None = None  # None: the run never finished (killed)
    artifacts: list[OfflineArtifact] = field(default_factory=list)


def _wandb_chunks(path: Path) -> Iterator[bytes]:
    """Records of a ``run-*.wandb`` file (W&B's LevelDB-style log: 32 KiB blocks, 7-byte headers)."""
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B transaction log")
    block, offset, pending = 32768, 7, b""
    while offset + 7 <= len(data):
        left = block - offset % block
        if left < 7:  # block trailer padding
            offset += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[offset:offset + 7])
        offset += 7
        chunk = data[offset:offset + length]
        offset += length
        if kind == 1:  # FULL
            yield chunk
        elif kind == 2:  # FIRST
            pending = chunk
        elif kind == 3:  # MIDDLE
            pending += chunk
        elif kind == 4:  # LAST
            yield pending + chunk
            pending = b""
        else:  # zero padding at the end of a file being written
            break


def _set_nested(target: dict, keys: Sequence[str], value: Any) -> None:
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


def read_offline_run(run_dir: str | Path) -> OfflineRun:
    """Parse ``offline-run-*/run-*.wandb``: config, summary (last value wins), group, tags and artifacts."""
    run_dir = Path(run_dir)
    files = sorted(run_dir.glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {run_dir}")
    out = OfflineRun(path=run_dir)
    for chunk in _wandb_chunks(files[0]):
        record = pb.Record()
        record.ParseFromString(chunk)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out.run_id, out.group, out.tags = record.run.run_id, record.run.run_group, list(record.run.tags)
            for item in record.run.config.update:
                out.config[item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                keys = list(item.nested_key) or [item.key]
                _set_nested(out.config, keys, json.loads(item.value_json))
        elif kind == "summary":
            for item in record.summary.update:
                keys = list(item.nested_key) or [item.key]
                _set_nested(out.summary, keys, json.loads(item.value_json))
        elif kind == "history":
            out.n_history += 1
        elif kind == "exit":
            out.exit_code = int(record.exit.exit_code)
        elif kind == "artifact":
            art = record.artifact
            contents = list(art.manifest.contents)
            out.artifacts.append(OfflineArtifact(
                name=art.name, type=art.type, metadata=json.loads(art.metadata) if art.metadata else {},
                files={c.path: int(c.size) for c in contents}, local_paths={c.path: c.local_path for c in contents}))
    return out


def offline_runs(folder: str | Path) -> list[OfflineRun]:
    """Every offline W&B run below ``folder``."""
    return [read_offline_run(p) for p in sorted(Path(folder).rglob("offline-run-*")) if p.is_dir()]
