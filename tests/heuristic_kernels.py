"""A Triton kernel whose heuristic reads bits of an int scalar (``tests/test_heuristic_operators_cpu.py``): ``y`` is
``x`` scaled by 2 where bit 1 of ``flags`` is set, by 3 where bits 0 and 2 are both set, else copied."""

import triton
import triton.language as tl


@triton.heuristics({"TWICE": lambda a: (a["flags"] & 2) != 0, "THRICE": lambda a: (a["flags"] & 5) == 5})
@triton.jit
def flagged_scale(x_ptr, y_ptr, n, flags, TWICE: tl.constexpr, THRICE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if TWICE:
        x = x * 2
    if THRICE:
        x = x * 3
    tl.store(y_ptr + offs, x, mask=offs < n)
