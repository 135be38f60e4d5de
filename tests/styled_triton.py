"""A Triton kernel written for these tests in Liger-Kernel's style (rows addressed through one stride, a runtime
scalar, the row length and its power-of-two block as constexprs): opsmith's own text, declared beside the real
Liger kernel (from the installed ``liger-kernel`` package) by ``styled_kernels.py``."""

import triton
import triton.language as tl


@triton.jit
def swiglu_rows_kernel(a_ptr, b_ptr, c_ptr, stride, gate_multiplier, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """c = silu(gate_multiplier * a) * b, row by row; the gate's math in float32, the product in b's dtype."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    offset = row * stride + cols
    gate = tl.load(a_ptr + offset, mask=inside, other=0.0).to(tl.float32) * gate_multiplier.to(tl.float32)
    up = tl.load(b_ptr + offset, mask=inside, other=0.0)
    activated = gate / (1.0 + tl.exp(-gate))
    tl.store(c_ptr + offset, activated.to(up.dtype) * up, mask=inside)
