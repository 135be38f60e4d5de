"""Issue 61's table: the registration-time analysis (opsmith/analysis) over correct kernels in every addressing style
(no finding allowed) and over planted misuses (each must be found). Used by test_analysis_table_cpu.py and
benchmarks/bench_analysis.py.

``CORRECT``: name -> a function of a namespace registering the op(s) (one or a list). ``MISUSES``: name -> (that,
the text the finding must contain). ``READ_MISUSES``: misuses found by reading the kernel alone (a tensor
descriptor, a block pointer: an in-kernel descriptor needs global scratch memory, which opsmith's launcher
refuses, so these are read, not registered): name -> (kernel, tensor, the stride that must address it).
Every misuse the table has held is found: the last one missed (a size read only as a loop's bound, over unmasked
blocks) is found since the analysis reads Triton's TTIR, where the loop's bound and its accesses are told apart."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import analysis_table_kernels as T
import torch

import opsmith as ok

__all__ = ["CORRECT", "FLA_CORRECT", "LIGER_CORRECT", "MISUSES", "READ_CORRECT", "READ_MISUSES"]

F32 = torch.float32


def _rows(ns: str, name: str, kernel: Any, **kw: Any) -> Any:
    """A row op over x (R, N) -> y, strides stride_x and stride_y, N bound to ``N``."""
    return ok.triton_op(f"{ns}::{name}", kernel, inputs=[ok.InputDecl("x", F32, shape=("R", "N"))],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=[ok.Stride("x", 0, name="stride_x"), ok.Stride("y", 0, name="stride_y"),
                                ok.Dim("N", name="N")],
                        geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"BLOCK": 64}, **kw)  # fmt: skip


def _pairs(ns: str, name: str, kernel: Any) -> Any:
    """Rows in pairs: x (R, N) -> y, one program per two rows (``R`` even)."""
    return ok.triton_op(f"{ns}::{name}", kernel, inputs=[ok.InputDecl("x", F32, shape=("R", "N"))],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=[ok.Stride("x", 0, name="stride_x"), ok.Stride("y", 0, name="stride_y"),
                                ok.Dim("N", name="N")], requires=[ok.Divisible("R", 2)],
                        geometry=ok.Grid(grid=("R // 2",)), constexprs={"BLOCK": 64})  # fmt: skip


def _tile(ns: str, name: str, kernel: Any) -> Any:
    return ok.triton_op(f"{ns}::{name}", kernel, inputs=[ok.InputDecl("x", F32, shape=("M", "N"))],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=[ok.Stride("x", 0, name="stride_xm"), ok.Stride("x", 1, name="stride_xn"),
                                ok.Stride("y", 0, name="stride_ym"), ok.Stride("y", 1, name="stride_yn"),
                                ok.Dim("M", name="M"), ok.Dim("N", name="N")],
                        geometry=ok.Grid(grid=("cdiv(M, BM)",)), constexprs={"BM": 16, "BN": 64})  # fmt: skip


def _cpp(ns: str, name: str) -> Any:
    src = T.CPP[name]
    return ok.cuda_kernel_op(f"{ns}::cpp_{name}", ok.KernelSpec(
        kernel_source=src, kernel_name="k<float>" if "template" in src else "k",
        inputs=[ok.InputDecl("x", F32, shape=("R", "N"))], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Stride("x", 0, name="stride_x"), ok.Stride("y", 0, name="stride_y"), ok.Dim("N", name="n")],
        geometry=ok.Grid(grid=("R",), block=(128,))))  # fmt: skip


def _row_op(spelling: tuple) -> Callable[[str], Any]:
    def reg(ns: str) -> Any:
        from declared_kernels import softmax_rows_kernel

        return ok.triton_op(f"{ns}::softmax_{len(spelling)}_{spelling[0][0] == '*'}", softmax_rows_kernel,
                            inputs=[ok.InputDecl("x", F32, shape=spelling)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                            extras=[ok.Dim("N")], geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"BLOCK": 1024})  # fmt: skip

    return reg


def _sweep(name: str) -> Callable[[str], Any]:
    def reg(ns: str) -> Any:
        from sweep_ops import SWEEP

        return SWEEP[name].build(ns)

    return reg


def _styled(fn_name: str) -> Callable[[str], Any]:
    def reg(ns: str) -> Any:
        import styled_kernels

        return getattr(styled_kernels, fn_name)(ns)

    return reg


@functools.cache
def _check_table(ns: str) -> dict:
    from declared_ops import register_table

    return register_table(ns)


def _declared(name: str) -> Callable[[str], Any]:
    """One of the check table's correct ops (the table registers the wrong ones beside them: the test counts the
    findings of the ops an entry returns, by name)."""
    return lambda ns: _check_table(ns)[name].op


def _round_four(name: str, which: str = "triton") -> Callable[[str], Any]:
    def reg(ns: str) -> Any:
        from round_four_ops import cuda_ops, triton_ops

        return (triton_ops if which == "triton" else cuda_ops)(ns)[name]

    return reg


GLU_REUSED = r"""
extern "C" __global__ void glu(const float* x, float* y, long stride_x, long stride_y, int N) {
  long offs = blockIdx.x * stride_x;
  const float* a = x + offs;
  offs = blockIdx.x * stride_y;  // the same name, now y's row
  for (int c = threadIdx.x; c < N; c += blockDim.x) y[offs + c] = a[c] / (1.f + __expf(-a[N + c]));
}
"""


def _glu_reused(which: str) -> Callable[[str], Any]:
    """A GLU (x (M, 2N) -> y (M, N)) whose one local name holds x's row offset, then y's."""

    def reg(ns: str) -> Any:
        decl = dict(
            inputs=[ok.InputDecl("x", F32, shape=("M", "2 * N"))],
            outputs=[ok.OutputDecl("y", ("M", "N"))],
            extras=[ok.Stride("x", 0, name="stride_x"), ok.Stride("y", 0, name="stride_y"), ok.Dim("N")],
        )
        if which == "triton":
            from declared_kernels import glu_reused_offs_kernel

            return ok.triton_op(
                f"{ns}::glu_reused",
                glu_reused_offs_kernel,
                **decl,
                geometry=ok.Grid(grid=("M",)),
                constexprs={"BLOCK": 64},
            )
        return ok.cuda_kernel_op(
            f"{ns}::glu_reused_cpp",
            ok.KernelSpec(
                kernel_source=GLU_REUSED, kernel_name="glu", **decl, geometry=ok.Grid(grid=("M",), block=(128,))
            ),
        )

    return reg


def _macro(ns: str) -> Any:
    from test_analysis_cpu import MACRO

    return ok.cuda_kernel_op(f"{ns}::macro_rows", ok.KernelSpec(
        kernel_source=MACRO, kernel_name="scale", inputs=[ok.InputDecl("x", shape=("R", "N"))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Stride(("x", "y"), 0, name="ld"), ok.Dim("N", name="n")],
        geometry=ok.Grid(grid=("R",), block=(128,))))  # fmt: skip


def _catalog(ns: str) -> list:
    from examples.catalog.attention import register_attention
    from examples.catalog.published import register_published
    from examples.catalog.rows import register_rows
    from examples.catalog.shapes import register_shapes

    ops = [register_attention(ns)]
    for registered in (register_published(ns), register_rows(ns), register_shapes(f"{ns}_shapes")):
        ops += list(registered.values()) if isinstance(registered, dict) else list(registered)
    return ops


def _liger_catalog(ns: str) -> list:
    from examples.catalog.optional import liger_cross_entropy
    from examples.catalog.rows import liger_rms_norm

    return [liger_cross_entropy(ns), liger_rms_norm(ns)]


def _cpp_text(name: str) -> Callable[[str], Any]:
    return lambda ns: _cpp(ns, name)


# fmt: off
CORRECT: dict[str, Callable[[str], Any]] = {
    # addressing styles, Triton: helpers, pointers moved in place, loops, 2-D tiles, reused names judged elsewhere
    "triton helper": lambda ns: _rows(ns, "helper_rows", T.helper_rows),
    "triton pointer += stride": lambda ns: _rows(ns, "alias_rows", T.alias_rows),
    "triton row loop": lambda ns: _rows(ns, "loop_rows", T.loop_rows),
    "triton 2-D tile, both strides": lambda ns: _tile(ns, "two_d_rows", T.two_d_rows),
    "triton while loop carrying two pointers": lambda ns: _pairs(ns, "while_rows", T.while_rows),
    "triton one element per loop step": lambda ns: _rows(ns, "scalar_loop_rows", T.scalar_loop_rows),
    "triton unmasked blocks of a Divisible row": lambda ns: _rows(ns, "loop_rows_whole", T.loop_rows_wrong,
                                                                 requires=[ok.Divisible("N", 64)]),
    "triton reused local name (x's offsets, then y's)": _glu_reused("triton"),
    "c++ reused local name (x's offsets, then y's)": _glu_reused("cuda"),
    # addressing styles, CUDA C++: +=, templates, __device__ helpers, pointer locals, macros
    "c++ compound assignment": _cpp_text("compound"),
    "c++ template": _cpp_text("template"),
    "c++ __device__ helper": _cpp_text("device_helper"),
    "c++ pointer locals": _cpp_text("pointer_locals"),
    "c++ macro": _macro,
    # row ops in every spelling
    "row op ('R', 'N')": _row_op(("R", "N")),
    "row op ('*R', 'N')": _row_op(("*R", "N")),
    "row op ('B', 'T', 'N')": _row_op(("B", "T", "N")),
    # published styles of our own: fla, unsloth, llm.c (optional outputs, heuristics over optional tensors)
    "unsloth cross-entropy (heuristic over a scalar)": _sweep("unsloth_cross_entropy"),
    "unsloth RoPE flag read back": _sweep("unsloth_rope_flag"),
    "llm.c fused classifier (optional outputs)": _sweep("llmc_fused_classifier"),
    "llm.c style every header": _round_four("every_header", "cuda"),
    "c++ GLU over ('M', '2 * N')": _round_four("glu", "cuda"),
    "c++ label moved before its flag": _round_four("rows_cpp", "cuda"),
    "triton GLU over ('M', '2 * N')": _round_four("glu_rows"),
    "triton ('B * S', 'H') beside ('B', 'S', 'H')": _round_four("add_flat"),
    "triton dummy label": _round_four("shifted_rows"),
    # the styled kernels (Liger/quack/tutorial forms) and the check table's correct declarations
    "styled GELU (C++)": _styled("register_gelu"),
    "styled norm, custom grid (C++)": _styled("register_norm"),
    "styled SwiGLU": _styled("register_swiglu"),
    "styled seeded dropout": _styled("register_seeded_dropout"),
    "styled RMSNorm rows": _styled("register_rms_norm_rows"),
    "styled softmax rows (C++)": _styled("register_softmax_rows"),
    "styled DyT (optional beta)": _styled("register_dyt"),
    "vec4 (a precondition, a dtype set)": _declared("vec4"),
    "rms_rows (a float32 statistic)": _declared("rms_rows"),
    "colsum (init=0)": _declared("colsum"),
    # the shipped catalog
    "catalog: attention, published, rows, shapes (the tutorial matmul's while loop)": _catalog,
}

#: Published kernels from their package (liger-kernel, fla-core: test extras): counted where it is installed.
FLA_CORRECT: dict[str, Callable[[str], Any]] = {
    "fla l2norm (autotuned)": _sweep("fla_l2norm"),
    "fla token shift (heuristics over optional tensors, an optional output)": _sweep("fla_token_shift"),
}
LIGER_CORRECT: dict[str, Callable[[str], Any]] = {
    "liger softmax": _sweep("liger_softmax"),
    "liger KL-div": _sweep("liger_kl_div"),
    "liger TVD (label moved before HAS_LABEL)": _sweep("liger_tvd"),
    "liger PolyNorm": _sweep("liger_poly_norm"),
    "liger modulated RMSNorm (optional shift)": _sweep("liger_modulated_rms_norm"),
    "liger multi-token-attention mask (one stride tuple)": _sweep("liger_mta_mask"),
    "liger ReLU² (n_cols a constexpr)": _sweep("liger_relu_squared"),
    "liger sparsemax": _sweep("liger_sparsemax"),
    "liger Llama-4 RoPE (in place, '2 * Dh')": _sweep("liger_llama4_rope"),
    "liger JSD": _sweep("liger_jsd"),
    "liger SwiGLU": _styled("register_liger_swiglu"),
    "catalog: liger cross-entropy, RMSNorm": _liger_catalog,
}


def _unread_w(ns: str) -> Any:
    from declared_ops import _rows_scale

    return _rows_scale(ns, "rows_scale")


def _shared_ab(ns: str) -> Any:
    from declared_ops import _pair_add

    return _pair_add(ns, "pair_add")


def _dim_typo(ns: str) -> Any:
    from declared_ops import _rows_scale

    return _rows_scale(ns, "rows_scale_typo", w_dim="M")


def _unmasked(ns: str) -> Any:
    from declared_kernels import unmasked_rows_kernel

    return ok.triton_op(f"{ns}::unmasked", unmasked_rows_kernel, inputs=[ok.InputDecl("x", F32, shape=("R", "N"))],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Dim("N", name="n_cols")],
                        geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"BLOCK": 64})  # fmt: skip


def _cpp_two(ns: str) -> Any:
    from test_analysis_cpu import CPP

    return ok.cuda_kernel_op(f"{ns}::add_rows", ok.KernelSpec(
        kernel_source=CPP, kernel_name="add_rows", inputs=[ok.InputDecl("a", shape=("R", "N")), ok.InputDecl("b", shape=("R", "N"))],
        outputs=[ok.OutputDecl("out", ok.SameAs("a"))],
        extras=[ok.Stride("a", 0, name="a_stride"), ok.Stride("b", 0, name="b_stride"), ok.Dim("N", name="n")],
        geometry=ok.Grid(grid=("R",), block=(128,))))  # fmt: skip


def _attention_per_tensor(ns: str) -> Any:
    from examples.catalog.attention import register_attention

    return register_attention(ns, shared=False)


def _encoder_unsilenced(ns: str) -> Any:
    import sweep_kernels as S

    return ok.cuda_kernel_op(f"{ns}::llmc_encoder_loose", ok.KernelSpec(
        kernel_source=S.ENCODER, kernel_name="encoder_forward_kernel3",
        inputs=[ok.InputDecl("inp", shape=("B", "T")), ok.InputDecl("wte", shape=("V", "C")),
                ok.InputDecl("wpe", shape=("TMAX", "C"))],
        outputs=[ok.OutputDecl("out", ("B", "T", "C"))], extras=[ok.Dim("B"), ok.Dim("T"), ok.Dim("C")],
        geometry=ok.Elementwise(block=(256,))))  # fmt: skip


MISUSES: dict[str, tuple[Callable[[str], Any], str]] = {
    "an unread weight stride (Liger's W_row_stride)": (_unread_w, "never reads 'W_row_stride'"),
    "one tensor's stride addressing another": (_shared_ab, "'stride_a' (the declared stride(A, 0)) also addresses B"),
    "a dimension named once (a typo)": (_dim_typo, "dimension 'M' of 'W' is named nowhere else"),
    "a missing mask (a size never read)": (_unmasked, "never reads 'n_cols'"),
    "c++: a stride addressing two tensors": (_cpp_two, "'a_stride' (the declared stride(a, 0)) also addresses b"),
    "c++: a stride never read": (_cpp_two, "never reads 'b_stride'"),
    "the tutorial attention declared per tensor": (_attention_per_tensor, "'stride_qz'"),
    "triton helper given x's stride for y": (lambda ns: _rows(ns, "helper_rows_wrong", T.helper_rows_wrong),
                                            "'stride_x' (the declared stride(x, 0)) also addresses y"),
    "triton pointer += x's stride for y": (lambda ns: _rows(ns, "alias_rows_wrong", T.alias_rows_wrong),
                                          "'stride_x' (the declared stride(x, 0)) also addresses y"),
    "triton 2-D tile ignoring a column stride": (lambda ns: _tile(ns, "two_d_rows_wrong", T.two_d_rows_wrong),
                                                "never reads 'stride_xn'"),
    "c++ += x's stride for y": (_cpp_text("compound_wrong"), "'stride_x' (the declared stride(x, 0)) also addresses y"),
    "c++ template reading x densely": (_cpp_text("template_wrong"), "never reads 'stride_x'"),
    "c++ __device__ helper, x's stride for y": (_cpp_text("device_helper_wrong"), "also addresses y"),
    "c++ macro naming x's stride for y": (_cpp_text("macro_wrong"), "also addresses y"),
    "c++ a thread index never bounded": (_cpp_text("unbounded_wrong"), "never reads 'n'"),
    "llm.c's token table size never passed": (_encoder_unsilenced, "dimension 'V' of 'wte' is named nowhere else"),
    "triton while loop moving y by x's stride": (lambda ns: _pairs(ns, "while_rows_wrong", T.while_rows_wrong),
                                                 "'stride_x' (the declared stride(x, 0)) also addresses y"),
    "triton a size read only as a loop's bound, no mask": (lambda ns: _rows(ns, "loop_rows_wrong", T.loop_rows_wrong),
                                                          "'N' (the declared"),
}

READ_MISUSES: dict[str, tuple[Any, str, str]] = {
    "a tensor descriptor given x's stride for y": ("copy_desc_kernel", "Y", "stride_x"),
    "a block pointer given x's stride for y": ("copy_block_ptr_kernel", "Y", "stride_x"),
}
#: The same, written correctly (``analysis_table_kernels``): the stride must not address the tensor.
READ_CORRECT: dict[str, tuple[Any, str, str]] = {
    "a tensor descriptor per tensor": (T.copy_desc, "Y", "stride_x"),
    "a block pointer per tensor": (T.copy_block_ptr, "Y", "stride_x"),
}

# fmt: on
