"""Swapping opsmith ops into a ``transformers`` Llama: the recipe of docs/llama.md.

``swap_in(model, ns)`` replaces, on one ``LlamaForCausalLM``:

- every ``LlamaRMSNorm``'s forward with the ``rms_norm`` op (its backward declared: no glue);
- every ``LlamaMLP``'s forward with ``down_proj(swiglu(gate_proj(x), up_proj(x)))`` (the same);
- ``apply_rotary_pos_emb`` in ``modeling_llama`` (a module-level function: every Llama in the process) with
  ``Rope``, an autograd function around the in-place ``rope`` and ``rope_backward`` ops;
- the model's forward with one that never materializes the logits: ``FusedLinearCrossEntropy`` runs the
  lm_head in chunks, each through the ``cross_entropy`` op, as Liger's fused linear cross-entropy does.

The two autograd functions are the glue that remains: RoPE's kernel rotates its inputs in place, and the fused
cross-entropy computes its gradients in its forward, neither of which a declared backward expresses. Both trace
whole under ``torch.compile(fullgraph=True)``; no ``.item()`` is taken (the mean's divisor stays a tensor). Like
Liger's wrappers, they write over what nothing else reads (q and k, the incoming RoPE gradients, SwiGLU's saved
inputs in its backward, the cross-entropy's own gradient buffers): the same memory as Liger's, for a graph
differentiated once.

``causal_sdpa(model)`` is separate from the kernels: it keeps transformers from materializing a plain causal mask
under ``torch.compile`` (transformers#48925).
"""

from __future__ import annotations

import types
from typing import Any

import torch

from .kernels import llama_kernels

__all__ = ["CAUSAL_SDPA", "FusedLinearCrossEntropy", "Rope", "causal_sdpa", "flce_chunk", "mm_into", "swap_in"]

#: The ops the autograd functions call (swap_in fills it): a module global, which torch.compile reads as a
#: constant (an attribute of an autograd.Function class it does not).
_OPS: dict[str, Any] = {}


def flce_chunk(rows: int, hidden: int, vocab: int) -> int:
    """Liger's chunk of rows: the logits of one chunk take about as much memory as the hidden states."""
    inc = -(-vocab // hidden)
    chunk = 1 << max(0, (-(-rows // inc) - 1).bit_length())
    return min(chunk, rows)


@torch.library.custom_op("llama_recipe::mm_into", mutates_args=("out",))
def mm_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, accumulate: bool) -> None:
    """``out = a @ b`` (``out += a @ b`` when ``accumulate``), written into ``out`` by cuBLAS.

    Why an op that declares it writes ``out``: traced, ``grad_w.addmm_(...)`` becomes a functional ``addmm`` whose
    result is a new buffer, and ATen's ``addmm`` into a buffer other than its input first copies the input there (a
    131 MB device copy per chunk after the first in the Llama of docs/llama.md: 15 of 85 us a step on an H100).
    A custom op declaring its write is functionalized and then reinplaced by Inductor (the buffer is the
    function's own and nothing reads its old value), so the compiled step accumulates in place, as eagerly.
    Eagerly ``_mm_into`` calls ``_product_into`` itself (no custom-op dispatch per chunk)."""
    _product_into(out, a, b, accumulate)


def _product_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, accumulate: bool) -> None:
    if accumulate:
        out.addmm_(a, b)
    else:  # a plain product: cuBLAS picks its kernel for C = AB, not C = AB + 0 C
        torch.mm(a, b, out=out)


@mm_into.register_fake
def _(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, accumulate: bool) -> None:
    return None


def _mm_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, accumulate: bool) -> None:
    if torch.compiler.is_compiling():
        mm_into(out, a, b, accumulate)
    else:
        _product_into(out, a, b, accumulate)


class FusedLinearCrossEntropy(torch.autograd.Function):
    """mean cross-entropy of ``x @ weight.T`` against ``target`` (ignore -100), chunk by chunk: each chunk's
    logits are overwritten by their gradient (the ``cross_entropy`` op), which gives the chunk's ``grad_x`` and
    its part of ``grad_weight`` at once; backward scales them by the incoming gradient over the kept count."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        ce = _OPS["cross_entropy"]
        rows, hidden = x.shape
        chunk = flce_chunk(rows, hidden, weight.shape[0])
        # The gradients are written into two buffers, grad_x chunk by chunk and grad_weight accumulated, as
        # Liger's are; eagerly and compiled alike (mm_into: no copy of either buffer when traced).
        losses = []
        grad_x = torch.empty_like(x)
        grad_w = torch.empty_like(weight)
        for start in range(0, rows, chunk):
            xc = x[start : start + chunk]
            logits = xc @ weight.t()
            losses.append(ce(logits, target[start : start + chunk], None, None, None, None, -100).sum())
            # the logits now hold d(sum of losses)/d(logits)
            _mm_into(grad_x[start : start + chunk], logits, weight, False)
            _mm_into(grad_w, logits.t(), xc, start > 0)
            # released before the next chunk's logits are allocated: otherwise two chunks (32 MB each at vocabulary
            # 32,000) are alive at once, at the forward's peak (benchmarks/probes/llama_memory_phases.py)
            del logits
        total = torch.stack(losses).sum()
        kept = (target != -100).sum().clamp(min=1).to(torch.float32)
        ctx.save_for_backward(grad_x, grad_w, kept)
        return total / kept

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        grad_x, grad_w, kept = ctx.saved_tensors
        scale = grad / kept
        if torch.compiler.is_compiling():
            return (grad_x * scale).to(grad_x.dtype), (grad_w * scale).to(grad_w.dtype), None
        # Eagerly the saved gradients (this function's own buffers, read by nothing else) are scaled in place, as
        # Liger's are: no second (rows, H) and (V, H) pair at the step's peak, when every activation is alive.
        return grad_x.mul_(scale), grad_w.mul_(scale), None


class Rope(torch.autograd.Function):
    """``apply_rotary_pos_emb(q, k, cos, sin)`` through the in-place ``rope`` op, on q and k laid out as the
    kernel reads them ((B, S, H, D)); backward rotates the gradients back with ``rope_backward``.

    As Liger's wrapper does, the kernel rotates q and k where they lie when that layout is contiguous (q and k are
    transposed views of the projections' outputs, which nothing else reads; their backward needs no activation),
    and copies them only otherwise; likewise the incoming gradients, which attention's backward hands over alone."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple:
        qq, kk = q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous()
        _OPS["rope"](qq, kk, cos, sin)
        ctx.save_for_backward(cos, sin)
        return qq.transpose(1, 2), kk.transpose(1, 2)

    @staticmethod
    def backward(ctx: Any, dq: torch.Tensor, dk: torch.Tensor) -> tuple:
        cos, sin = ctx.saved_tensors
        dqq, dkk = dq.transpose(1, 2).contiguous(), dk.transpose(1, 2).contiguous()
        _OPS["rope_backward"](dqq, dkk, cos, sin)
        return dqq.transpose(1, 2), dkk.transpose(1, 2), None, None


#: The attention implementation ``causal_sdpa`` registers: transformers' SDPA attention and its own mask, except
#: that a plain causal mask stays ``None`` (SDPA's ``is_causal``) while tracing too.
CAUSAL_SDPA = "sdpa_causal"

#: Whether the model call in progress is plain causal attention (set by ``causal_sdpa``'s forward, read by its mask).
_PLAIN = {"causal": False}


def causal_sdpa(model: Any) -> Any:
    """Give a ``LlamaForCausalLM`` SDPA attention whose plain causal mask is never materialized, under
    ``torch.compile`` too, and return it.

    transformers builds no mask eagerly when nothing is padded (SDPA's ``is_causal`` does the masking) but, while
    tracing, always materializes a (batch, 1, S, S) boolean mask (transformers#48925): it cannot read a padding mask's
    or the position ids' values (packed sequences) then. Attention then computes the masked blocks too, and GQA
    repeats k and v: on an H100, attention took 30.7 ms of a compiled 16-layer, sequence-2048 training step, and
    12.4 ms with this (benchmarks/probes/llama_step_profile.py).

    What transformers cannot see while tracing is known before the call: the mask is ``None`` when the model is
    called without an attention mask, position ids or a cache (positions 0..S-1 in every row: nothing padded,
    nothing packed); any other call gets transformers' own ``sdpa_mask``. The attention implementation is
    registered under ``CAUSAL_SDPA`` for the process (transformers' registries are global)."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def mask(**kw: Any) -> torch.Tensor | None:
        if _PLAIN["causal"] and kw.get("local_size") is None and kw["q_length"] == kw["kv_length"]:
            return None
        return sdpa_mask(**kw)

    from transformers.models.llama.modeling_llama import LlamaModel

    inner = getattr(model, "model", None)
    if not isinstance(inner, LlamaModel):
        raise TypeError(f"causal_sdpa: expected a transformers LlamaForCausalLM (its .model a LlamaModel, whose "
                        f"forward it wraps), got {type(model).__name__}; pass the causal-LM model itself")  # fmt: skip
    original = inner.forward

    def forward(self: Any, input_ids: Any = None, attention_mask: Any = None, position_ids: Any = None,
                past_key_values: Any = None, **kw: Any) -> Any:  # fmt: skip
        _PLAIN["causal"] = attention_mask is None and position_ids is None and past_key_values is None
        try:
            return original(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                            past_key_values=past_key_values, **kw)  # fmt: skip
        finally:
            _PLAIN["causal"] = False

    AttentionInterface.register(CAUSAL_SDPA, sdpa_attention_forward)
    AttentionMaskInterface.register(CAUSAL_SDPA, mask)
    model.set_attn_implementation(CAUSAL_SDPA)
    inner.forward = types.MethodType(forward, inner)
    return model


def swap_in(model: Any, ns: str = "llama", rms_norm: Any = None, compile: str = "kernel") -> Any:
    """Put the opsmith ops into ``model`` (a ``LlamaForCausalLM``) and return it. ``rms_norm``: another RMSNorm
    op taking ``(x, weight, eps)`` and returning the normalized rows (opsmith's own, ``opsmith.ops``), in
    place of Liger's. ``compile``: what the ops with a reference are under torch.compile ("kernel", "reference",
    "auto"; ``kernels.py``); one mode per namespace."""
    from transformers.modeling_outputs import CausalLMOutputWithPast
    from transformers.models.llama import modeling_llama as hf

    ops = llama_kernels(ns, compile)
    norm = rms_norm or (lambda x, w, eps: ops["rms_norm"](x, w, eps)[0])

    def rms_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
        return norm(x, self.weight, self.variance_epsilon)

    def mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(ops["swiglu"](self.gate_proj(x), self.up_proj(x)))

    def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int = 1) -> tuple:
        return Rope.apply(q, k, cos, sin)

    def lm_forward(self: Any, input_ids: torch.Tensor, labels: torch.Tensor | None = None, **kw: Any) -> Any:
        hidden = self.model(input_ids=input_ids, **kw).last_hidden_state
        if labels is None:
            return CausalLMOutputWithPast(logits=self.lm_head(hidden))
        target = torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:]  # as transformers' ForCausalLMLoss
        x = hidden.reshape(-1, hidden.shape[-1])
        return CausalLMOutputWithPast(loss=FusedLinearCrossEntropy.apply(x, self.lm_head.weight, target.reshape(-1)))

    for m in model.modules():
        if isinstance(m, hf.LlamaRMSNorm):
            m.forward = types.MethodType(rms_forward, m)
        elif isinstance(m, hf.LlamaMLP):
            m.forward = types.MethodType(mlp_forward, m)
    hf.apply_rotary_pos_emb = rope
    _OPS.update(ops)
    model.forward = types.MethodType(lm_forward, model)
    return model
