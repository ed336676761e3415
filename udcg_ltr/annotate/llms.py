"""Resolving an LLM configuration to a loaded :class:`~udcg_ltr.annotate.scorer.LLMScorer`.

``load_llm`` accepts a preset (``"demo"``: Qwen2.5-Coder-0.5B-Instruct, ``"coder-1.5b"``:
Qwen2.5-Coder-1.5B-Instruct, ``"smollm2"``: the test fixture, each set up on first use), the stem of a ``conf/llm/<name>.yaml``, a Hugging Face id or local folder, or a mapping with
those files' keys (``_target_`` is ignored, so ``hydra.utils.instantiate(cfg.llm)`` and ``load_llm(cfg.llm)``
agree); keyword arguments override it. Loaded weights are memoised: several scorers share one model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from udcg_ltr.annotate import demo_llm
from udcg_ltr.annotate.scorer import (
    DECODING_OPTIONS,
    WEIGHTS_OPTIONS,
    DecodingConfig,
    LLMScorer,
    WeightsConfig,
)
from udcg_ltr.annotate.weights import load_model, resolve_device, resolve_quantize, torch_dtype
from udcg_ltr.paths import PROJECT_ROOT

#: Built-in model aliases -> (function returning a local folder, default annotation name).
PRESETS = {"demo": (demo_llm.ensure_demo_llm, demo_llm.DEMO_NAME),
           "coder-1.5b": (demo_llm.ensure_coder15b, demo_llm.CODER15B_NAME),
           "smollm2": (demo_llm.ensure_smollm2, demo_llm.SMOLLM2_NAME)}
LLM_CONF_DIR = PROJECT_ROOT / "conf" / "llm"
#: The flat keys of ``conf/llm/*.yaml`` besides ``model``: :func:`load_llm` groups those of WEIGHTS_OPTIONS and
#: DECODING_OPTIONS into the scorer's WeightsConfig and DecodingConfig; the rest are LLMScorer's own arguments.
_SCORER_KEYS = ("name", "gguf_file", "dtype", "device", "batch_size", "max_batch_tokens", "max_new_tokens", "prompt",
                "num_threads", "prefix_cache", "quantize", "exact_tail", "trust_remote_code", "progress")
_LOADED: dict[tuple, tuple[Any, Any]] = {}


def llm_config(name: str) -> dict[str, Any] | None:
    path = LLM_CONF_DIR / f"{name}.yaml"
    if not path.is_file():
        return None
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)  # type: ignore[return-value]


def load_llm(cfg_or_name: Any = None, /, **overrides: Any) -> LLMScorer:
    """Build an :class:`LLMScorer` from a preset name, a model id/path or a configuration mapping."""
    if cfg_or_name is None:
        cfg: dict[str, Any] = {}
    elif isinstance(cfg_or_name, (str, Path)):
        ref = str(cfg_or_name)
        conf = None if ref in PRESETS else llm_config(ref)
        cfg = {"model": ref} if conf is None else conf
    elif isinstance(cfg_or_name, DictConfig):
        cfg = OmegaConf.to_container(cfg_or_name, resolve=True)  # type: ignore[assignment]
    elif isinstance(cfg_or_name, Mapping):
        cfg = dict(cfg_or_name)
    else:
        raise TypeError(f"expected an LLM name or a mapping, got {type(cfg_or_name).__name__}")
    cfg = {k: v for k, v in {**cfg, **overrides}.items() if k != "_target_"}
    if not cfg.get("model"):
        raise ValueError("LLM configuration needs 'model' (a Hugging Face id, a local path, 'demo' or 'smollm2')")
    if unknown := set(cfg) - set(_SCORER_KEYS) - {"model"}:
        raise ValueError(f"unknown LLM configuration keys {sorted(unknown)} (known: model, {', '.join(_SCORER_KEYS)})")
    path, default_name = str(cfg.pop("model")), None
    if path in PRESETS:  # set up on demand
        ensure, default_name = PRESETS[path]
        path = str(ensure(install=True))
    kwargs = {k: v for k, v in cfg.items() if v is not None}
    kwargs.setdefault("name", default_name)
    weights = WeightsConfig(**{k: kwargs.pop(k) for k in WEIGHTS_OPTIONS if k in kwargs})
    decoding = DecodingConfig(**{k: kwargs.pop(k) for k in DECODING_OPTIONS if k in kwargs})
    dtype, device = torch_dtype(weights.dtype), resolve_device(weights.device)
    # "auto" becomes the mode that runs here, so the scorer (and the annotation cache key) records that one
    weights = dataclasses.replace(weights, quantize=resolve_quantize(weights.quantize, device))
    memo = (path, weights.gguf_file, str(dtype), device, weights.quantize)
    if memo not in _LOADED:
        _LOADED[memo] = load_model(path, gguf_file=weights.gguf_file, dtype=dtype, device=device,
                                   quantize=weights.quantize, trust_remote_code=bool(weights.trust_remote_code))
    model, tokenizer = _LOADED[memo]
    return LLMScorer(path, weights=weights, decoding=decoding, model=model, tokenizer=tokenizer, **kwargs)
