"""A CuTe DSL kernel as an opsmith op: ``y = x * alpha`` over any float dtype, tuned over its block size.

The host function takes opsmith's calling convention (tensors as pointers to their first element, sizes
and scalars by value, the stream last); it builds its tensors and launches its kernel on that stream.

    from examples.cute.scale_op import scale_op
    y = scale_op()(x, 3.0)                       # torch.ops.cute_example.scale
"""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute

import opsmith as ok


@cute.kernel
def scale_kernel(x: cute.Tensor, y: cute.Tensor, alpha: cutlass.Float32, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    if i < n:
        y[i] = (x[i].to(cutlass.Float32) * alpha).to(y.element_type)


@cute.jit
def scale(x: cute.Pointer, alpha: cutlass.Float32, n: cutlass.Int32, y: cute.Pointer, stream: cuda.CUstream,
          BLOCK: cutlass.Constexpr = 256):  # fmt: skip
    layout = cute.make_layout(n)
    scale_kernel(cute.make_tensor(x, layout), cute.make_tensor(y, layout), alpha, n).launch(
        grid=((n + BLOCK - 1) // BLOCK, 1, 1), block=(BLOCK, 1, 1), stream=stream
    )


_OPS: dict[str, ok.Op] = {}


def scale_op(ns: str = "cute_example") -> ok.Op:
    """Register (once per namespace) and return ``torch.ops.<ns>.scale(x, alpha)``."""
    if ns not in _OPS:
        _OPS[ns] = ok.cute_op(
            f"{ns}::scale", scale,
            inputs=[ok.InputDecl("x"), ok.ScalarInput("alpha", float)],
            outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
            extras=[ok.Numel("x", name="n")],
            autotune=ok.Autotune([ok.Config({"BLOCK": b}) for b in (128, 256, 512)], default=1),
        )  # fmt: skip
    return _OPS[ns]


def check_cases(ns: str = "cute_example_check") -> list[ok.CheckCase]:
    """``opsmith check examples.cute.scale_op:check_cases``: every conformance check on the CuTe DSL op."""
    import torch

    def inputs(shape, dtype, device):
        return torch.randn(shape, device=device).to(dtype), 3.0

    return [ok.CheckCase(scale_op(ns), inputs, lambda x, a: (x.float() * a).to(x.dtype), shapes=((1000,), (3, 257)),
                         dtypes=(torch.float32, torch.float16, torch.bfloat16))]  # fmt: skip
