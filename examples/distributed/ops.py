"""The example's activation: SwiGLU (``silu(gate) * up``) as a tuned Triton opsmith op with a declared backward.

Both ops are ``Elementwise`` with same-shape outputs, and ``up`` declares its shape as ``gate``'s, so opsmith
derives their DTensor sharding: any placement shared by ``gate`` and ``up`` passes through (a tensor-parallel
MLP's column-sharded hidden activations stay sharded), and mismatched ones are redistributed first.
"""

from __future__ import annotations

import triton
import triton.language as tl

import opsmith as ok

NS = "dist_example"


@triton.jit
def swiglu_fwd_kernel(gate, up, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(gate + offs, mask=mask, other=0).to(tl.float32)
    u = tl.load(up + offs, mask=mask, other=0).to(tl.float32)
    tl.store(out + offs, (g * tl.sigmoid(g) * u).to(out.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_bwd_kernel(grad_out, gate, up, dgate, dup, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dy = tl.load(grad_out + offs, mask=mask, other=0).to(tl.float32)
    g = tl.load(gate + offs, mask=mask, other=0).to(tl.float32)
    u = tl.load(up + offs, mask=mask, other=0).to(tl.float32)
    s = tl.sigmoid(g)
    tl.store(dup + offs, (dy * g * s).to(dup.dtype.element_ty), mask=mask)
    tl.store(dgate + offs, (dy * u * s * (1 + g * (1 - s))).to(dgate.dtype.element_ty), mask=mask)


_OPS: dict[str, ok.Op] = {}


def swiglu_op() -> ok.Op:
    """Register (once) and return ``torch.ops.dist_example.swiglu(gate, up)`` for 3-d (batch, seq, hidden) inputs."""
    if "fwd" in _OPS:
        return _OPS["fwd"]
    same = ("B", "T", "F")  # batch, sequence, hidden: one size wherever they are named
    # BLOCK and warps to tune over: ~8-16 elements per thread is where elementwise kernels reach bandwidth.
    tune = ok.Autotune([ok.Config({"BLOCK": b}, num_warps=w) for b, w in ((1024, 4), (2048, 8), (4096, 8))],
                       key=[ok.TuneDim("gate", None)])  # fmt: skip
    bwd = ok.triton_op(f"{NS}::swiglu_backward", swiglu_bwd_kernel,
                       inputs=[ok.InputDecl("grad_out", shape=same), ok.InputDecl("gate", shape=same), ok.InputDecl("up", shape=same)],
                       outputs=[ok.OutputDecl("dgate", shape=same), ok.OutputDecl("dup", shape=same)],
                       extras=[ok.Numel("gate", name="n")], geometry=ok.Elementwise(block=("BLOCK",)),
                       autotune=tune, index_dtype="int64")  # fmt: skip
    _OPS["fwd"] = ok.triton_op(
        f"{NS}::swiglu", swiglu_fwd_kernel,
        inputs=[ok.InputDecl("gate", shape=same), ok.InputDecl("up", shape=same)],
        outputs=[ok.OutputDecl("out", shape=same)], extras=[ok.Numel("gate", name="n")],
        geometry=ok.Elementwise(block=("BLOCK",)), autotune=tune, index_dtype="int64",
        backward=ok.Backward(bwd, args=("grad_out", "gate", "up"), grads=("gate", "up")),
    )  # fmt: skip
    _OPS["bwd"] = bwd
    return _OPS["fwd"]
