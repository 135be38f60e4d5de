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
whole under ``torch.compile(fullgraph=True)``; no ``.item()`` is taken (the mean's divisor stays a tensor).
"""

from __future__ import annotations

import types
from typing import Any

import torch

from .kernels import llama_kernels

__all__ = ["FusedLinearCrossEntropy", "Rope", "flce_chunk", "swap_in"]

#: The ops the autograd functions call (swap_in fills it): a module global, which torch.compile reads as a
#: constant (an attribute of an autograd.Function class it does not).
_OPS: dict[str, Any] = {}


def flce_chunk(rows: int, hidden: int, vocab: int) -> int:
    """Liger's chunk of rows: the logits of one chunk take about as much memory as the hidden states."""
    inc = -(-vocab // hidden)
    chunk = 1 << max(0, (-(-rows // inc) - 1).bit_length())
    return min(chunk, rows)


class FusedLinearCrossEntropy(torch.autograd.Function):
    """mean cross-entropy of ``x @ weight.T`` against ``target`` (ignore -100), chunk by chunk: each chunk's
    logits are overwritten by their gradient (the ``cross_entropy`` op), which gives the chunk's ``grad_x`` and
    its part of ``grad_weight`` at once; backward scales them by the incoming gradient over the kept count."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        ce = _OPS["cross_entropy"]
        rows, hidden = x.shape
        chunk = flce_chunk(rows, hidden, weight.shape[0])
        # Eagerly grad_weight accumulates in place (addmm_); traced, in-place accumulation into a buffer would be
        # functionalized into a copy of the (V, H) buffer per chunk, so the traced form sums the parts.
        compiling = torch.compiler.is_compiling()
        losses, grads_x, grad_w = [], [], None if compiling else torch.zeros_like(weight)
        for start in range(0, rows, chunk):
            xc = x[start : start + chunk]
            logits = xc @ weight.t()
            losses.append(ce(logits, target[start : start + chunk], None, None, None, None, -100).sum())
            grads_x.append(logits @ weight)  # logits now hold d(sum of losses)/d(logits)
            if not compiling:
                grad_w.addmm_(logits.t(), xc)
            else:
                grad_w = logits.t() @ xc if grad_w is None else grad_w + logits.t() @ xc
        grad_x = torch.cat(grads_x)
        total = torch.stack(losses).sum()
        kept = (target != -100).sum().clamp(min=1).to(torch.float32)
        ctx.save_for_backward(grad_x, grad_w, kept)
        return total / kept

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        grad_x, grad_w, kept = ctx.saved_tensors
        scale = grad / kept
        return (grad_x * scale).to(grad_x.dtype), (grad_w * scale).to(grad_w.dtype), None


class Rope(torch.autograd.Function):
    """``apply_rotary_pos_emb(q, k, cos, sin)`` through the in-place ``rope`` op on copies laid out as the
    kernel reads them ((B, S, H, D), contiguous); backward rotates the gradients back with ``rope_backward``."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple:
        qq = q.transpose(1, 2).clone(memory_format=torch.contiguous_format)
        kk = k.transpose(1, 2).clone(memory_format=torch.contiguous_format)
        _OPS["rope"](qq, kk, cos, sin)
        ctx.save_for_backward(cos, sin)
        return qq.transpose(1, 2), kk.transpose(1, 2)

    @staticmethod
    def backward(ctx: Any, dq: torch.Tensor, dk: torch.Tensor) -> tuple:
        cos, sin = ctx.saved_tensors
        dqq = dq.transpose(1, 2).clone(memory_format=torch.contiguous_format)
        dkk = dk.transpose(1, 2).clone(memory_format=torch.contiguous_format)
        _OPS["rope_backward"](dqq, dkk, cos, sin)
        return dqq.transpose(1, 2), dkk.transpose(1, 2), None, None


def swap_in(model: Any, ns: str = "llama", rms_norm: Any = None) -> Any:
    """Put the opsmith ops into ``model`` (a ``LlamaForCausalLM``) and return it. ``rms_norm``: another RMSNorm
    op taking ``(x, weight, eps)`` and returning the normalized rows (opsmith's own, ``opsmith.ops``), in
    place of Liger's."""
    from transformers.modeling_outputs import CausalLMOutputWithPast
    from transformers.models.llama import modeling_llama as hf

    ops = llama_kernels(ns)
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
