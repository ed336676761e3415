"""What this machine's processor can do fast, read once: the one place both precision choices ask.

Two settings say ``"auto"`` and mean "the fast numerics on this hardware": the training precision
(:func:`udcg_ltr.models.precision.resolve_precision`) and the LLM's fast mode
(:func:`udcg_ltr.annotate.weights.resolve_quantize`). Both need native bfloat16 matrix units: without them a CPU
emulates bfloat16 and gets slower than float32 (measured on a 2-core AVX2 EPYC: the demo LLM's bf16 mode at
0.44x its float32 speed).
"""

from __future__ import annotations

import functools
from pathlib import Path

#: ``/proc/cpuinfo`` flags of native bfloat16 matrix instructions: x86 ``avx512_bf16`` / ``amx_bf16``, Arm ``bf16``.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


@functools.cache
def cpu_has_bf16() -> bool:
    """Whether this CPU has native bfloat16 matrix instructions (read from ``/proc/cpuinfo``; False if unknown)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    flags = {flag for line in text.splitlines() if line.startswith(("flags", "Features"))
             for flag in line.split(":", 1)[-1].split()}
    return bool(flags & BF16_CPU_FLAGS)
