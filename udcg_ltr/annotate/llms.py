"""Resolving an LLM configuration to a loaded :class:`~udcg_ltr.annotate.scorer.LLMScorer`.

``load_llm`` accepts

* a preset name: ``"demo"`` (Qwen2.5-Coder-0.5B-Instruct, assembled and converted on first use by
  :mod:`udcg_ltr.annotate.demo_llm`), ``"smollm2"`` (the SmolLM2-135M test fixture), or the stem of
  any ``conf/llm/<name>.yaml`` (``"llama3.2-3b"`` ...);
* a Hugging Face id or a local folder (``model_name_or_path``);
* a mapping / Hydra node with the keys of ``conf/llm/*.yaml``: ``name``, ``model`` (id, path,
  ``demo`` or ``smollm2``), ``gguf_file``, ``dtype``, ``device``, ``batch_size``, ``max_new_tokens``,
  ``prompt`` (a mapping of :class:`~udcg_ltr.annotate.prompts.PromptConfig` fields, or ``null`` for
  the paper's prompt), ``num_threads``, ``prefix_cache``, ``quantize`` (``bf16-linear`` for the fast
  CPU mode), ``exact_tail``, ``trust_remote_code``;
  ``_target_`` is ignored, so ``hydra.utils.instantiate(cfg.llm)`` and ``load_llm(cfg.llm)`` agree.

Keyword arguments override the configuration. Loaded weights are memoised per (path, GGUF file,
dtype, device, quantisation): several scorers (other prompts, batch sizes) share one model.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from udcg_ltr.annotate import demo_llm
from udcg_ltr.annotate.scorer import LLMScorer, load_model, resolve_device, torch_dtype
from udcg_ltr.paths import PROJECT_ROOT

log = logging.getLogger(__name__)

#: Built-in model aliases -> (function returning a local folder, default annotation name).
PRESETS = {
    "demo": (demo_llm.ensure_demo_llm, demo_llm.DEMO_NAME),
    "smollm2": (demo_llm.ensure_smollm2, demo_llm.SMOLLM2_NAME),
}
LLM_CONF_DIR = PROJECT_ROOT / "conf" / "llm"
_SCORER_KEYS = ("name", "gguf_file", "dtype", "device", "batch_size", "max_batch_tokens", "max_new_tokens", "prompt",
                "num_threads", "prefix_cache", "quantize", "exact_tail", "trust_remote_code", "progress")
_LOADED: dict[tuple, tuple[Any, Any]] = {}


def _to_dict(cfg: Any) -> dict[str, Any]:
    try:
        from omegaconf import DictConfig, OmegaConf
        if isinstance(cfg, DictConfig):
            return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        pass
    if isinstance(cfg, Mapping):
        return dict(cfg)
    raise TypeError(f"expected an LLM name or a mapping, got {type(cfg).__name__}")


def llm_config(name: str) -> dict[str, Any] | None:
    """The ``conf/llm/<name>.yaml`` configuration as a dict, or ``None`` when there is none."""
    path = LLM_CONF_DIR / f"{name}.yaml"
    if not path.is_file():
        return None
    from omegaconf import OmegaConf
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)  # type: ignore[return-value]


def resolve_model(model: str, *, install: bool = True) -> tuple[str, str | None]:
    """``(local folder or hub id, default name)`` for a model reference (presets are set up on demand)."""
    if model in PRESETS:
        ensure, name = PRESETS[model]
        return str(ensure(install=install)), name
    return model, None


def clear_model_cache() -> None:
    """Forget the memoised weights (free their memory once no scorer holds them)."""
    _LOADED.clear()


def load_llm(cfg_or_name: Any = None, /, **overrides: Any) -> LLMScorer:
    """Build an :class:`LLMScorer` from a preset name, a model id/path or a configuration mapping."""
    if cfg_or_name is None:
        cfg: dict[str, Any] = {}
    elif isinstance(cfg_or_name, (str, Path)):
        ref = str(cfg_or_name)
        cfg = llm_config(ref) if ref not in PRESETS and llm_config(ref) is not None else {"model": ref}
    else:
        cfg = _to_dict(cfg_or_name)
    cfg = {k: v for k, v in {**cfg, **overrides}.items() if k != "_target_"}
    if "model" not in cfg and "model_name_or_path" in cfg:
        cfg["model"] = cfg.pop("model_name_or_path")
    if not cfg.get("model"):
        raise ValueError("LLM configuration needs 'model' (a Hugging Face id, a local path, 'demo' or 'smollm2')")
    unknown = set(cfg) - set(_SCORER_KEYS) - {"model"}
    if unknown:
        raise ValueError(f"unknown LLM configuration keys {sorted(unknown)} (known: model, {', '.join(_SCORER_KEYS)})")
    path, default_name = resolve_model(str(cfg.pop("model")))
    kwargs = {k: v for k, v in cfg.items() if v is not None}
    kwargs.setdefault("name", default_name)
    dtype = torch_dtype(kwargs.get("dtype", "float32"))
    device = resolve_device(kwargs.get("device", "cpu"))
    memo = (path, kwargs.get("gguf_file"), str(dtype), device, kwargs.get("quantize"))
    if memo not in _LOADED:
        _LOADED[memo] = load_model(path, gguf_file=kwargs.get("gguf_file"), dtype=dtype, device=device,
                                   quantize=kwargs.get("quantize"),
                                   trust_remote_code=bool(kwargs.get("trust_remote_code", False)))
    model, tokenizer = _LOADED[memo]
    kwargs.pop("trust_remote_code", None)
    return LLMScorer(path, model=model, tokenizer=tokenizer, **kwargs)
