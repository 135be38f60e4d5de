"""CuTe DSL host functions the bad-input matrix registers wrongly (a module of their own: CuTe DSL reads
annotations as objects, and error_matrix.py postpones its annotations)."""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute


@cute.jit
def no_stream(x: cute.Pointer, n: cutlass.Int32, y: cute.Pointer):
    pass


@cute.jit
def broken(x: cute.Pointer, n: cutlass.Int32, y: cute.Pointer, stream: cuda.CUstream):
    undefined_in_kernel + 1  # noqa: F821


@cute.jit
def copy(x: cute.Pointer, n: cutlass.Int32, y: cute.Pointer, stream: cuda.CUstream, BLOCK: cutlass.Constexpr = 256):
    pass
