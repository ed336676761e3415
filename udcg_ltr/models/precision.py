"""Numeric precision of training and inference: ``precision="auto"`` and the autocast it means.

Lightning's precision names are used throughout; mixed precision keeps float32 master weights and optimizer
state, only the matrix products run in the low-precision type (``torch.autocast``). ``"auto"`` picks:

* on a CUDA GPU: ``"bf16-mixed"`` where the GPU has bfloat16 units (Ampere and later), else ``"16-mixed"``;
* on a CPU with bfloat16 matrix instructions (x86 ``avx512_bf16`` / ``amx_bf16``, Arm ``bf16``):
  ``"bf16-mixed"`` -- on a 2-core AVX512-BF16 EPYC a MiniLM training step runs ~1.5x faster than float32
  and validation UDCG@5 stays within 0.002 (``bench/train_speed.py``);
* otherwise ``"32-true"`` (a CPU without the instructions emulates bfloat16 and gets slower).
"""

from __future__ import annotations

import contextlib

import torch

from udcg_ltr.hardware import cpu_has_bf16

#: The precisions this project runs: Lightning's names.
PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed")


def on_gpu(accelerator: str | None) -> bool:
    """Whether a Lightning ``accelerator`` setting means a CUDA GPU here."""
    acc = str(accelerator or "auto").lower()
    return acc in ("gpu", "cuda") or (acc == "auto" and torch.cuda.is_available())


def resolve_precision(precision: str | int | None, accelerator: str | None = "cpu") -> str:
    """Lightning precision name for ``precision`` (``"auto"`` resolved as in the module docstring)."""
    p = "32-true" if precision is None else str(precision)
    p = {"32": "32-true", "bf16": "bf16-mixed", "16": "16-mixed"}.get(p, p)
    if p not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if p != "auto":
        return p
    if on_gpu(accelerator):
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    return "bf16-mixed" if cpu_has_bf16() else "32-true"


def autocast(device: torch.device | str, precision: str) -> contextlib.AbstractContextManager:
    """The ``torch.autocast`` context of a (resolved) mixed ``precision`` on ``device``; a no-op for ``32-true``."""
    dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision)
    return torch.autocast(torch.device(device).type, dtype=dtype) if dtype else contextlib.nullcontext()
