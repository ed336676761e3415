"""Loading an LLM's weights (dtype, device, GGUF) and the ``bf16-linear`` fast CPU mode.

``bf16-linear`` (:func:`install_bf16_linears`): the decoder's matrix products run with bfloat16 weights and
inputs while a :class:`PrecisionSwitch` is on; the residual stream, norms, attention and the LM head stay in
the model's dtype, and with the switch off every layer uses the original weights (the scorer's last tokens).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import time
from typing import Any

import torch

from udcg_ltr.hardware import cpu_has_bf16

log = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float": torch.float32, "bf16": torch.bfloat16,
           "bfloat16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16, "half": torch.float16}


def torch_dtype(name: str | torch.dtype) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    try:
        return _DTYPES[str(name).lower().replace("torch.", "")]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r} (use one of {sorted(_DTYPES)})") from None


def resolve_device(device: str | torch.device | None) -> str:
    device = "cpu" if device is None else str(device)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but CUDA is not available; use device=cpu")
    return device


def resolve_quantize(quantize: str | None, device: str) -> str | None:
    """``quantize="auto"`` (the ``*_fast`` LLM presets): ``"bf16-linear"`` where bfloat16 is native (a CUDA
    device, or a CPU with AVX512-BF16 / AMX / Arm BF16, :func:`udcg_ltr.hardware.cpu_has_bf16`), else ``None``:
    float32, since an emulated bf16 mode is the slow one (0.44x float32 on a 2-core AVX2 EPYC). Other values
    are returned as they are; the scorer records the resolved one, so the annotation cache keys what ran."""
    if quantize != "auto":
        return quantize
    native = str(device).startswith("cuda") or cpu_has_bf16()
    if not native:
        log.info("quantize=auto: this CPU has no native bfloat16 units, so the fast mode runs in float32")
    return "bf16-linear" if native else None


def load_model(model_name_or_path: str, *, gguf_file: str | None = None, dtype: torch.dtype = torch.float32,
               device: str = "cpu", quantize: str | None = None, trust_remote_code: bool = False):
    """Load ``(model, tokenizer)`` with transformers (GGUF through ``gguf_file=``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    kw: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if gguf_file:
        kw["gguf_file"] = gguf_file
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_name_or_path, **kw)
        load_kw = dict(kw, dtype=dtype)
        if device == "auto" or (device.startswith("cuda") and importlib.util.find_spec("accelerate")):
            load_kw["device_map"] = "auto" if device == "auto" else device
        model = AutoModelForCausalLM.from_pretrained(model_name_or_path, **load_kw)
    except OSError as err:
        raise OSError(f"could not load LLM {model_name_or_path!r}{f' ({gguf_file})' if gguf_file else ''}: {err}. "
                      "Offline runs need a local folder or the demo/smollm2 models "
                      "(python -m udcg_ltr.annotate.demo_llm --smollm2).") from err
    if "device_map" not in load_kw:
        model.to(device)
    model.eval()
    if quantize in ("bf16-linear", "bf16"):
        install_bf16_linears(model)
    elif quantize in ("int8-dynamic", "int8"):
        if not str(device).startswith("cpu"):
            raise ValueError("quantize='int8-dynamic' is CPU only")
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    elif quantize:
        raise ValueError(f"unknown quantize={quantize!r} (use 'auto', 'bf16-linear' or 'int8-dynamic')")
    log.info("loaded %s in %.1fs", model_name_or_path, time.perf_counter() - t0)
    return model, tokenizer


class PrecisionSwitch:
    """Shared flag of the dual-precision layers of one model (off = exact weights)."""

    def __init__(self) -> None:
        self.fast = False

    @contextlib.contextmanager
    def on(self):
        previous, self.fast = self.fast, True
        try:
            yield
        finally:
            self.fast = previous


class DualPrecisionLinear(torch.nn.Module):
    """A Linear run with bfloat16 weights and inputs while its switch is on (bias added after the cast)."""

    def __init__(self, linear: torch.nn.Linear, switch: PrecisionSwitch):
        super().__init__()
        self.linear, self.switch = linear, switch
        self.register_buffer("weight_bf16", linear.weight.detach().to(torch.bfloat16), persistent=False)

    @property
    def weight(self) -> torch.Tensor:
        return self.linear.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.switch.fast:
            return self.linear(x)
        y = torch.nn.functional.linear(x.to(torch.bfloat16), self.weight_bf16).to(x.dtype)
        return y if self.linear.bias is None else y + self.linear.bias


class DualPrecisionMLP(torch.nn.Module):
    """A gated MLP (``down(act(gate(x)) * up(x))``, the Llama / Qwen / Mistral / Gemma block) run entirely in
    bfloat16 while its switch is on (the wide intermediate never round-trips through float32), else as is."""

    PARTS = ("gate_proj", "up_proj", "down_proj")

    def __init__(self, mlp: torch.nn.Module, switch: PrecisionSwitch):
        super().__init__()
        self.mlp, self.switch = mlp, switch
        for name in self.PARTS:
            self.register_buffer(f"{name}_bf16", getattr(mlp, name).weight.detach().to(torch.bfloat16),
                                 persistent=False)

    @classmethod
    def applies_to(cls, module: torch.nn.Module) -> bool:
        parts = [getattr(module, n, None) for n in cls.PARTS]
        return (all(isinstance(p, torch.nn.Linear) and p.bias is None for p in parts)
                and callable(getattr(module, "act_fn", None)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.switch.fast:
            return self.mlp(x)
        h = x.to(torch.bfloat16)
        F = torch.nn.functional
        inner = self.mlp.act_fn(F.linear(h, self.gate_proj_bf16)) * F.linear(h, self.up_proj_bf16)
        return F.linear(inner, self.down_proj_bf16).to(x.dtype)


def install_bf16_linears(model) -> PrecisionSwitch:
    """Make the decoder's matrix products switchable to bfloat16: gated MLPs become :class:`DualPrecisionMLP`,
    other Linears but the LM head :class:`DualPrecisionLinear`; returns the switch (also on the model)."""
    switch = PrecisionSwitch()
    skip = {id(model.get_output_embeddings())}
    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if DualPrecisionMLP.applies_to(child):
                setattr(module, child_name, DualPrecisionMLP(child, switch))
                skip.update(id(getattr(child, name)) for name in DualPrecisionMLP.PARTS)
    for module in list(model.modules()):
        if isinstance(module, (DualPrecisionMLP, DualPrecisionLinear)):
            continue
        for child_name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear) and id(child) not in skip:
                setattr(module, child_name, DualPrecisionLinear(child, switch))
    model._udcg_precision_switch = switch
    return switch
