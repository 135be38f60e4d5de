"""Triton kernels in the styles Triton's own tutorials publish, written for opsmith (the tutorials ship in no
package, so their text is not used here): a fused softmax with a ``num_stages`` constexpr and a persistent loop
over rows, and a matmul under ``@triton.autotune`` over ``triton.Config``s keyed on ``M, N, K`` with a string
``ACTIVATION`` constexpr; and a split-K style reduction that accumulates with atomics under ``@triton.autotune``
with ``reset_to_zero`` and a ``@triton.heuristics`` value. No Python launchers: opsmith's declaration replaces
them (``catalog/published.py``).
"""

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):  # fmt: skip
    """Row-wise softmax; each program walks rows first, first + programs, ... (a persistent grid), the loop
    software-pipelined over ``num_stages`` rows. The row's math in float32."""
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=num_stages):
        x = tl.load(input_ptr + row * input_row_stride + cols, mask=inside, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(output_ptr + row * output_row_stride + cols, e / tl.sum(e, axis=0), mask=inside)


def matmul_configs() -> list:
    """Tile shapes for an H100/H200-class GPU: large tiles for large problems, small ones for thin ones."""
    tiles = [(128, 256, 64, 3, 8), (128, 128, 32, 4, 4), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4), (64, 64, 32, 4, 4),
             (128, 32, 32, 4, 4), (32, 64, 32, 5, 2)]  # fmt: skip
    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
                          num_stages=stages, num_warps=warps) for m, n, k, stages, warps in tiles]  # fmt: skip


@triton.autotune(configs=matmul_configs(), key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):  # fmt: skip
    """C = A @ B in float16 with float32 accumulation. Programs visit output tiles in groups of GROUP_SIZE_M
    tile rows, so programs running together share rows of A in L2. ACTIVATION "leaky_relu" applies one to the
    accumulator; "" applies none."""
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    in_group = GROUP_SIZE_M * tiles_n
    first_row = (pid // in_group) * GROUP_SIZE_M
    rows_here = min(tl.cdiv(M, BLOCK_SIZE_M) - first_row, GROUP_SIZE_M)
    tile_m = first_row + (pid % in_group) % rows_here
    tile_n = (pid % in_group) // rows_here
    rm = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rn = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    rk = tl.arange(0, BLOCK_SIZE_K)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_SIZE_K):
        ks = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(b_ptr + ks[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)  # fmt: skip
        acc = tl.dot(a, b, acc)
    if ACTIVATION == "leaky_relu":
        acc = tl.where(acc >= 0, acc, 0.01 * acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


@triton.autotune(
    configs=[triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 512}, num_warps=4),
             triton.Config({"BLOCK": 2048}, num_warps=8)],
    key=["n_elements"],
    reset_to_zero=["out_ptr"],
)  # fmt: skip
@triton.heuristics(values={"EVEN": lambda args: args["n_elements"] % args["BLOCK"] == 0})
@triton.jit
def sum_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    """out[0] += sum(x): each program adds its block's sum with an atomic, so a config timed twice without
    ``reset_to_zero`` would leave twice the sum. ``EVEN``: no masks when BLOCK divides the length."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n_elements, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x.to(tl.float32), axis=0))


@triton.heuristics(values={"BLOCK": lambda args: max(triton.next_power_of_2(args["n_cols"]), 16),
                           "WIDE": lambda args: args["n_cols"] > 1024 and args["n_rows"] % 2 == 0})  # fmt: skip
@triton.jit
def rowmax_kernel(x_ptr, y_ptr, flag_ptr, n_rows, n_cols, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    """y[r] = max(x[r, :]) with a block sized by a heuristic; flag[r] records the WIDE heuristic's value, so a
    test sees the value each path computed."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    tl.store(y_ptr + row, tl.max(x, axis=0))
    tl.store(flag_ptr + row, WIDE)
