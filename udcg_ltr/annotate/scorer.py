"""The LLM scorer: P(NO-RESPONSE) at the first answer position, greedy answers, answer log-likelihoods.

For each (question, passages) prompt (UDCG paper, Figure 4) :meth:`LLMScorer.score` returns ``p_no_response``:
the float32 softmax probability, over the full vocabulary, of the abstention string's first token
(``NO-RESPONSE`` -> ``NO``) at the first answer position (Eq. 2), and optionally the greedy answer.

Throughput, exact in float32 (agrees with the unbatched :meth:`LLMScorer.score_reference` to ~1e-6): prompts
are sorted by length and cut into left-padded batches; the shared instruction prefix is run once and its
key/value cache expanded across every batch, position ids counting only real tokens (RoPE sees the unpadded
prompt); only the last position goes through the LM head; greedy decoding drops finished rows. Prefix reuse is
checked once against a full forward pass and switched off, with a warning, if the model disagrees.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import torch

from udcg_ltr.annotate.prompts import PromptConfig, PromptItem, ScoreResult
from udcg_ltr.annotate.weights import load_model, resolve_device, torch_dtype
from udcg_ltr.batching import length_batches, progress_bar

log = logging.getLogger(__name__)

#: Marks where the documents start when locating the shared instruction prefix.
_SENTINEL = "\u2063UDCG_DOCUMENTS_START\u2063"


@dataclass(frozen=True)
class WeightsConfig:
    """Which weights run and how they are stored: a ``gguf_file`` inside the model folder (None: the
    transformers checkpoint), ``dtype``, ``device``, ``quantize`` (``"bf16-linear"``: the fast mode, ``"auto"``: bf16-linear where bfloat16 is
    native, resolved by ``load_llm``; or ``"int8-dynamic"``, CPU only) and ``trust_remote_code``. Changing any of them means loading other weights."""

    gguf_file: str | None = None
    dtype: str | torch.dtype = "float32"
    device: str = "cpu"
    quantize: str | None = None
    trust_remote_code: bool = False


@dataclass(frozen=True)
class DecodingConfig:
    """How prompts run through the loaded weights: ``batch_size`` prompts per forward pass, at most
    ``max_batch_tokens`` padded prompt tokens per batch (rows x longest prompt, :func:`.length_batches`),
    ``max_new_tokens`` per greedy answer, ``prefix_cache`` (the shared instruction prefix run once) and, in the
    bf16 fast mode, the last ``exact_tail`` prompt tokens run with the original weights (16 halves the bf16
    error on P(NO-RESPONSE) for ~10% of the cost; a negative value counts as 0)."""

    batch_size: int = 8
    max_batch_tokens: int | None = None
    max_new_tokens: int = 24
    prefix_cache: bool = True
    exact_tail: int = 16

    def __post_init__(self) -> None:
        for option in ("batch_size", "max_new_tokens"):
            if (value := getattr(self, option)) < 1:
                raise ValueError(f"{option} must be >= 1, got {value}")
        object.__setattr__(self, "batch_size", int(self.batch_size))
        object.__setattr__(self, "max_new_tokens", int(self.max_new_tokens))
        object.__setattr__(self, "max_batch_tokens", None if self.max_batch_tokens is None else int(self.max_batch_tokens))
        object.__setattr__(self, "prefix_cache", bool(self.prefix_cache))
        object.__setattr__(self, "exact_tail", max(0, int(self.exact_tail)))


#: The flat option names of each group (``conf/llm/*.yaml`` keys; :meth:`LLMScorer.with_options`).
WEIGHTS_OPTIONS = tuple(f.name for f in fields(WeightsConfig))
DECODING_OPTIONS = tuple(f.name for f in fields(DecodingConfig))


class LLMScorer:
    """A causal LM from transformers, prompted as the UDCG paper prescribes. ``name`` is the annotation key (default
    the model's folder name); probabilities are float32 whatever ``weights.dtype``. ``weights``:
    :class:`WeightsConfig`; ``decoding``: :class:`DecodingConfig` (its fields are readable on the scorer:
    ``scorer.batch_size``, ``scorer.exact_tail`` ...); ``num_threads``: torch's CPU threads;
    ``model``/``tokenizer``: already loaded (shared)."""

    def __init__(self, model_name_or_path: str | None = None, *, name: str | None = None,
                 weights: WeightsConfig | None = None, decoding: DecodingConfig | None = None,
                 prompt: PromptConfig | dict | None = None, num_threads: int | None = None, model: Any = None,
                 tokenizer: Any = None, progress: bool = True):
        weights, self.decoding = weights or WeightsConfig(), decoding or DecodingConfig()
        if num_threads:
            torch.set_num_threads(int(num_threads))
        self.model_name_or_path, self.gguf_file, self.quantize = model_name_or_path, weights.gguf_file, weights.quantize
        self.dtype = torch_dtype(weights.dtype)
        self.device = resolve_device(weights.device)
        self.prompt = PromptConfig.from_dict(prompt)
        self.prompt_version = self.prompt.version()  # keys the annotation cache
        self.progress = progress
        if model is None or tokenizer is None:
            if model_name_or_path is None:
                raise ValueError("LLMScorer needs model_name_or_path (or an already loaded model and tokenizer)")
            model, tokenizer = load_model(model_name_or_path, gguf_file=self.gguf_file, dtype=self.dtype,
                                          device=self.device, quantize=self.quantize,
                                          trust_remote_code=weights.trust_remote_code)
        self.model, self.tokenizer = model, tokenizer
        self.model.eval()
        #: Set by load_model(quantize="bf16-linear"): switches the decoder's Linear layers to bfloat16.
        self._fast_switch = getattr(model, "_udcg_precision_switch", None)
        self.name = name or _default_name(model_name_or_path, self.gguf_file)
        self._input_device = _input_device(model)
        self._keep_kw = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        self._pad_id = (_id_list(tokenizer.pad_token_id) or _id_list(tokenizer.eos_token_id) or [0])[0]
        generation_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        self._eos_ids = set(_id_list(generation_eos) + _id_list(tokenizer.eos_token_id))
        wanted, has_template = self.prompt.chat_template, bool(getattr(tokenizer, "chat_template", None))
        if wanted is True and not has_template:
            raise ValueError(f"prompt.chat_template=True but {model_name_or_path} has no chat template")
        self._use_chat = has_template if wanted is None else bool(wanted)
        self._system_in_user = False
        self.no_response_token_id = self._no_response_token_id()
        self._prefix_ids: list[int] | None = None
        self._prefix_kv: dict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self._prefix_ok: bool | None = None if self.prefix_cache else False
        #: Forward passes and prompts scored by this object (for tests and progress reports).
        self.counters = {"prompts": 0, "forward_passes": 0, "generated_tokens": 0}

    def describe(self) -> dict[str, Any]:
        """What an annotation run records about the LLM and its prompt."""
        return {"name": self.name, "model": str(self.model_name_or_path), "gguf_file": self.gguf_file,
                "dtype": str(self.dtype).replace("torch.", ""), "device": self.device, "quantize": self.quantize,
                "exact_tail": self.exact_tail if self._fast_switch else None, "batch_size": self.batch_size,
                "max_batch_tokens": self.max_batch_tokens, "max_new_tokens": self.max_new_tokens,
                "chat_template": self._use_chat, "no_response_token_id": self.no_response_token_id,
                "no_response_token": self.tokenizer.convert_ids_to_tokens(self.no_response_token_id),
                "prompt_version": self.prompt_version, "prompt": self.prompt.to_dict()}

    @property
    def batch_size(self) -> int:
        return self.decoding.batch_size

    @property
    def max_batch_tokens(self) -> int | None:
        return self.decoding.max_batch_tokens

    @property
    def max_new_tokens(self) -> int:
        return self.decoding.max_new_tokens

    @property
    def prefix_cache(self) -> bool:
        return self.decoding.prefix_cache

    @property
    def exact_tail(self) -> int:
        return self.decoding.exact_tail

    def with_options(self, **changes: Any) -> LLMScorer:
        """A scorer sharing this one's model and tokenizer with other options: ``name``, ``prompt``, ``progress``
        or a :class:`DecodingConfig` field (batch size ...); a :class:`WeightsConfig` field is refused."""
        if forbidden := {"dtype", "device", "quantize", "gguf_file"} & set(changes):
            raise ValueError(f"{sorted(forbidden)} change the weights: load another scorer instead")
        decoding = replace(self.decoding, **{k: changes.pop(k) for k in DECODING_OPTIONS if k in changes})
        kwargs = {"name": self.name, "prompt": self.prompt, "progress": self.progress, **changes}
        weights = WeightsConfig(gguf_file=self.gguf_file, dtype=self.dtype, device=self.device, quantize=self.quantize)
        other = LLMScorer(self.model_name_or_path, weights=weights, decoding=decoding, model=self.model,
                          tokenizer=self.tokenizer, **kwargs)
        if (other.prompt == self.prompt and other.prefix_cache and self.prefix_cache
                and other.exact_tail == self.exact_tail):
            # Same model, prompt and precision path: the one-off prefix check still holds.
            other._prefix_ok, other._prefix_ids = self._prefix_ok, self._prefix_ids
        return other

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        """Apply the chat template; one rejecting a system message gets it prepended to the user turn."""
        if self._system_in_user:
            messages = _merge_system(messages)
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as err:  # jinja2 TemplateError: "System role not supported" and the like
            if messages and messages[0]["role"] == "system" and not self._system_in_user:
                log.warning("%s: chat template rejects a system message (%s); prepending it to the user turn",
                            self.name, err)
                self._system_in_user = True
                return self.render_chat(messages)
            raise

    def render(self, item: PromptItem, prompt: PromptConfig | None = None) -> str:
        """The exact text fed to the model for ``item`` (with this scorer's prompt unless told)."""
        prompt = prompt or self.prompt
        return (self.render_chat(prompt.messages(item.question, item.passages)) if self._use_chat
                else prompt.plain_text(item.question, item.passages))

    def _tokenize(self, text: str) -> list[int]:
        # The chat template holds the special tokens; adding them again doubles Llama's <|begin_of_text|>.
        return list(self.tokenizer(text, add_special_tokens=not self._use_chat)["input_ids"])

    def encode(self, item: PromptItem) -> list[int]:
        return self._tokenize(self.render(item))

    def _answer_ids(self, answer: str) -> list[int]:
        """Token ids of an answer as the model would write it right after the prompt."""
        text = answer if self._use_chat else " " + answer.lstrip()
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _no_response_token_id(self) -> int:
        if not (ids := self._answer_ids(self.prompt.abstention)):
            raise ValueError(f"the tokenizer maps the abstention string {self.prompt.abstention!r} to no token")
        if (expected := self.prompt.no_response_token) is not None:
            got = self.tokenizer.convert_ids_to_tokens(ids[0])
            token_text = self.tokenizer.decode([ids[0]])
            if expected not in (got, token_text, token_text.strip()):
                raise ValueError(f"first token of {self.prompt.abstention!r} is {got!r}, but the prompt "
                                 f"configuration expects {expected!r}")
        return int(ids[0])

    def prefix_ids(self) -> list[int]:
        """Token ids of the shared instruction prefix (everything before the documents)."""
        if self._prefix_ids is None:  # the documents are one marker: the prefix is the text before it
            text = self.render(PromptItem("?", [("", _SENTINEL)]), self.prompt.replace(document_template="{text}"))
            cut = text.find(_SENTINEL)
            self._prefix_ids = self._tokenize(text[:cut]) if cut > 0 else []
        return self._prefix_ids

    def _forward(self, input_ids, attention_mask, position_ids, cache, keep: int):
        keep_kw = {"logits_to_keep": keep} if self._keep_kw else {}
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True, **keep_kw)
        self.counters["forward_passes"] += 1
        return (out.logits if self._keep_kw else out.logits[:, -keep:]), out.past_key_values

    def _new_cache(self, kv=(), rows: int = 1):
        """A cache holding the prefix key/values ``kv`` expanded to ``rows`` (empty without ``kv``)."""
        from transformers import DynamicCache
        return DynamicCache([(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in kv],
                            config=self.model.config)

    def _kv_for(self, prefix: tuple[int, ...]):
        """Key/value tensors of ``prefix`` (memoised; only a handful are kept)."""
        if (kv := self._prefix_kv.get(prefix)) is None:
            ids = torch.tensor([list(prefix)], device=self._input_device)
            pos = torch.arange(len(prefix), device=self._input_device)[None]
            _, cache = self._forward(ids, torch.ones_like(ids), pos, self._new_cache(), keep=1)
            kv = [(layer.keys, layer.values) for layer in cache.layers]
            if len(self._prefix_kv) >= 4:
                self._prefix_kv.pop(next(iter(self._prefix_kv)))
            self._prefix_kv[prefix] = kv
        return kv

    def _prefill(self, seqs: Sequence[Sequence[int]], prefix: Sequence[int], keep: int = 1):
        """One forward pass over a left-padded batch whose rows all start with ``prefix``:
        ``(logits[B, keep, V], cache, attention_mask, last_positions)``."""
        B, P = len(seqs), len(prefix)
        lengths = [len(s) - P for s in seqs]
        L = max(lengths)
        input_ids = torch.full((B, L), self._pad_id, dtype=torch.long)
        mask = torch.zeros((B, P + L), dtype=torch.long)
        mask[:, :P] = 1
        for b, (s, n) in enumerate(zip(seqs, lengths)):
            input_ids[b, L - n:] = torch.tensor(list(s[P:]), dtype=torch.long)
            mask[b, P + L - n:] = 1
        # Positions count only real tokens, so a padded row sees the positions of its unpadded prompt.
        pos = (mask[:, P:].cumsum(-1) - 1).clamp(min=0) + P
        cache = self._new_cache(self._kv_for(tuple(prefix)) if P else (), B)
        input_ids, mask, pos = (t.to(self._input_device) for t in (input_ids, mask, pos))
        # Fast mode: the prompt's bulk with bfloat16 Linear layers, its last (and kept) positions exactly.
        tail = max(self.exact_tail, keep) if self._fast_switch is not None else L
        if L > tail:
            with self._fast_switch.on():
                self._forward(input_ids[:, :L - tail], mask[:, :P + L - tail], pos[:, :L - tail], cache, keep=1)
            logits, cache = self._forward(input_ids[:, L - tail:], mask, pos[:, L - tail:], cache, keep=keep)
        else:
            logits, cache = self._forward(input_ids, mask, pos, cache, keep=keep)
        return logits, cache, mask, pos[:, -1]

    def _decode(self, first_logits, cache, mask, last_pos, max_new_tokens: int,
                pick: Callable[[torch.Tensor], torch.Tensor]) -> list[list[int]]:
        """Continue every row from its first-step logits until EOS or ``max_new_tokens``."""
        B = first_logits.shape[0]
        out: list[list[int]] = [[] for _ in range(B)]
        rows = torch.arange(B, device=first_logits.device)
        next_tok = pick(first_logits)
        for step in range(max_new_tokens):
            toks, row_ids = next_tok.tolist(), rows.tolist()
            alive = [j for j, tok in enumerate(toks) if tok not in self._eos_ids]
            for j in alive:
                out[row_ids[j]].append(toks[j])
            self.counters["generated_tokens"] += len(alive)
            if not alive or step == max_new_tokens - 1:
                break
            if len(alive) < len(rows):
                keep = torch.tensor(alive, device=mask.device)
                cache.batch_select_indices(keep)
                rows, mask, last_pos, next_tok = rows[keep], mask[keep], last_pos[keep], next_tok[keep]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            last_pos = last_pos + 1
            logits, cache = self._forward(next_tok[:, None].to(self._input_device), mask, last_pos[:, None],
                                          cache, keep=1)
            next_tok = pick(logits[:, -1].float())
        return out

    def _shared_prefix(self, seqs: Sequence[Sequence[int]], candidate: Sequence[int] | None) -> list[int]:
        """The longest prefix of ``candidate`` that every sequence starts with (leaving >= 1 token each)."""
        if self._prefix_ok is None:
            self._prefix_ok = self._check_prefix_reuse()
        if not self._prefix_ok or candidate is None or not seqs:
            return []
        n = min(len(candidate), min(len(s) for s in seqs) - 1)
        return list(os.path.commonprefix([list(candidate[:n]), *(list(s) for s in seqs)]))

    def _check_prefix_reuse(self) -> bool:
        """Prefix reuse is exact in theory; check it once on this model (some caches cannot expand):
        a padded two-row batch with the prefix cache against a plain full pass of its longer row."""
        try:
            prefix = self.prefix_ids()
            long = self.encode(PromptItem("Is this a check?", [("Check", "This is a somewhat longer check "
                                                                          "passage, with a few more words.")]))
            short = self.encode(PromptItem("Check?", [("C", "Short.")]))
            if len(prefix) < 2 or long[:len(prefix)] != prefix or short[:len(prefix)] != prefix:
                return False
            with torch.inference_mode():
                a, *_ = self._prefill([long, short], prefix)
                b, *_ = self._prefill([long], [])
            # Probabilities, not log-probabilities: in bfloat16 the far tail of the vocabulary is noisy
            # in log space whatever the method; a broken cache moves the probable tokens.
            diff = (a[0, -1].float().softmax(-1) - b[0, -1].float().softmax(-1)).abs().max().item()
            tol = 1e-4 if self.dtype == torch.float32 and not self.quantize else 5e-2
            if not math.isfinite(diff) or diff > tol:
                log.warning("%s: prefix KV reuse disagrees with a full pass (max |dp| = %.2g); disabled",
                            self.name, diff)
                return False
            return True
        except Exception as err:  # an architecture whose cache cannot be expanded across the batch
            log.warning("%s: prefix KV reuse unavailable (%s: %s); disabled", self.name, type(err).__name__, err)
            return False
        finally:
            self._prefix_kv.clear()

    def _batches(self, seqs: Sequence[Sequence[int]], desc: str, progress: bool | None) -> Iterator[list]:
        with progress_bar(len(seqs), desc, self.progress if progress is None else progress) as bar:
            for batch in length_batches([len(s) for s in seqs], self.batch_size, self.max_batch_tokens):
                yield batch
                bar.update(len(batch))

    def score(self, items: Sequence[PromptItem], *, generate: bool = False, progress: bool | None = None,
              max_new_tokens: int | None = None,
              on_batch: Callable[[list[int], list[ScoreResult]], None] | None = None) -> list[ScoreResult]:
        """P(NO-RESPONSE) (and the greedy answer when ``generate``) for every item, in input order;
        ``on_batch(indices, results)`` after each batch lets a caller persist results as they come."""
        items = list(items)
        if not items:
            return []
        max_new = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        with torch.inference_mode():
            seqs = [self.encode(it) for it in items]
            prefix = self._shared_prefix(seqs, self.prefix_ids())
            results: list[ScoreResult | None] = [None] * len(items)
            for batch in self._batches(seqs, self.name, progress):
                logits, cache, mask, last_pos = self._prefill([seqs[i] for i in batch], prefix)
                p_no = logits[:, -1].float().log_softmax(-1)[:, self.no_response_token_id].exp().tolist()
                answers: list[str | None] = [None] * len(batch)
                if generate:
                    toks = self._decode(logits[:, -1].float(), cache, mask, last_pos, max_new, _greedy)
                    answers = [self._detok(t) for t in toks]
                batch_results = [ScoreResult(p, a, len(seqs[i])) for i, p, a in zip(batch, p_no, answers)]
                for i, r in zip(batch, batch_results):
                    results[i] = r
                self.counters["prompts"] += len(batch)
                if on_batch is not None:
                    on_batch(list(batch), batch_results)
        return results  # type: ignore[return-value]  (every index is in exactly one batch)

    def score_reference(self, items: Sequence[PromptItem], *, generate: bool = False,
                        max_new_tokens: int | None = None) -> list[ScoreResult]:
        """Reference: unbatched full forward passes, no prefix reuse, answers by ``model.generate`` (slow)."""
        max_new = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        out = []
        with torch.inference_mode():
            for item in items:
                ids = torch.tensor([self.encode(item)], device=self._input_device)
                logits = self.model(input_ids=ids).logits[0, -1].float()
                self.counters["forward_passes"] += 1
                p = logits.softmax(-1)[self.no_response_token_id].item()
                answer = None
                if generate:
                    gen = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                              max_new_tokens=max_new, pad_token_id=self._pad_id,
                                              eos_token_id=sorted(self._eos_ids))
                    answer = self._detok(gen[0, ids.shape[1]:].tolist())
                out.append(ScoreResult(float(p), answer, int(ids.shape[1])))
        return out

    def answer_logprobs(self, items: Sequence[PromptItem], answers: Sequence[str], *,
                        progress: bool | None = None) -> list[float]:
        """Teacher-forced log-likelihood ``sum_t log P(answer_t | prompt, answer_<t)`` (float32), one per
        (item, answer) pair, with the same prompt as :meth:`score` (the ANSWER_PROB baseline)."""
        if len(items) != len(answers):
            raise ValueError(f"{len(items)} items but {len(answers)} answers")
        if not items:
            return []
        with torch.inference_mode():
            prompts = [self.encode(it) for it in items]
            targets = [self._answer_ids(a) for a in answers]
            if empty := [a for a, t in zip(answers, targets) if not t]:
                raise ValueError(f"answer {empty[0]!r} tokenises to nothing")
            seqs = [p + t for p, t in zip(prompts, targets)]
            prefix = self._shared_prefix(prompts, self.prefix_ids())
            out: list[float] = [math.nan] * len(items)
            for batch in self._batches(seqs, f"{self.name} logP(answer)", progress):
                longest = max(len(targets[i]) for i in batch)
                logits, *_ = self._prefill([seqs[i] for i in batch], prefix, keep=longest + 1)
                logp = logits.float().log_softmax(-1)
                for j, i in enumerate(batch):
                    # Right-aligned rows: the answer is the last tokens, predicted one column earlier.
                    cols = torch.arange(longest - len(targets[i]), longest, device=logp.device)
                    out[i] = float(logp[j, cols, torch.tensor(targets[i], device=logp.device)].sum().item())
                self.counters["prompts"] += len(batch)
        return out

    def answer_logprob(self, question: str, passage: tuple[str, str] | Sequence[tuple[str, str]],
                       gold_answer: str | Sequence[str]) -> float:
        """ANSWER_PROB: log-likelihood of the gold answer given the passage (max over several answers)."""
        passages = [passage] if isinstance(passage, tuple) and len(passage) == 2 and isinstance(passage[0], str) \
            else list(passage)
        if not (golds := [gold_answer] if isinstance(gold_answer, str) else list(gold_answer)):
            raise ValueError("answer_logprob needs at least one gold answer")
        return max(self.answer_logprobs([PromptItem(question, passages)] * len(golds), golds, progress=False))

    def sample_answers(self, item: PromptItem, n: int, temperature: float = 1.0, *, seed: int = 0,
                       max_new_tokens: int | None = None) -> list[str]:
        """``n`` answers at ``temperature`` (0: greedy) from one prompt pass (Monte Carlo P(NO-RESPONSE))."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        max_new = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        gen = torch.Generator(device="cpu").manual_seed(int(seed))

        def pick(logits: torch.Tensor) -> torch.Tensor:
            if temperature <= 0:
                return _greedy(logits)
            probs = (logits.float() / temperature).softmax(-1).cpu()
            return torch.multinomial(probs, 1, generator=gen)[:, 0].to(logits.device)

        with torch.inference_mode():
            seq = self.encode(item)
            prefix = self._shared_prefix([seq], self.prefix_ids())
            logits, cache, mask, last_pos = self._prefill([seq], prefix)
            cache.batch_repeat_interleave(n)
            first = logits[:, -1].float().repeat(n, 1)
            toks = self._decode(first, cache, mask.repeat(n, 1), last_pos.repeat(n), max_new, pick)
        self.counters["prompts"] += 1
        return [self._detok(t) for t in toks]

    def generate_chat(self, conversations: Sequence[list[dict[str, str]]], *, max_new_tokens: int = 128,
                      progress: bool | None = None) -> list[str]:
        """Greedy replies to chat conversations (the LLM judges); a shared token prefix reuses its cache."""
        if not conversations:
            return []
        with torch.inference_mode():
            texts = [self.render_chat(list(c)) if self._use_chat else "\n\n".join(m["content"] for m in c)
                     for c in conversations]
            seqs = [self._tokenize(t) for t in texts]
            prefix = self._shared_prefix(seqs, seqs[0]) if len(seqs) > 1 else []
            out: list[str] = [""] * len(seqs)
            for batch in self._batches(seqs, f"{self.name} generate", progress):
                logits, cache, mask, last_pos = self._prefill([seqs[i] for i in batch], prefix)
                toks = self._decode(logits[:, -1].float(), cache, mask, last_pos, max_new_tokens, _greedy)
                for i, t in zip(batch, toks):
                    out[i] = self._detok(t)
        return out

    def _detok(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()

    def __repr__(self) -> str:
        return (f"LLMScorer(name={self.name!r}, model={self.model_name_or_path!r}, dtype={self.dtype}, "
                f"device={self.device!r}, batch_size={self.batch_size}, prompt_version={self.prompt_version!r})")


def _greedy(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(-1)


def _default_name(path: str | None, gguf_file: str | None) -> str:
    if gguf_file:
        return Path(gguf_file).name.removesuffix(".gguf")
    return Path(str(path)).name if path else "llm"


def _input_device(model) -> torch.device:
    try:
        return model.get_input_embeddings().weight.device
    except Exception:
        return next(model.parameters()).device


def _id_list(ids: Any) -> list[int]:
    return [] if ids is None else [int(x) for x in (ids if isinstance(ids, (list, tuple)) else [ids])]


def _merge_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    if not messages or messages[0]["role"] != "system":
        return messages
    system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
    if user := next((m for m in rest if m["role"] == "user"), None):
        user["content"] = f"{system}\n\n{user['content']}"
    return rest

