"""The bad-input matrix's rows for named dimensions, output shapes and dtypes, preconditions and alignment
(see ``error_matrix.py``): registration mistakes, and calls whose tensors do not relate as declared. Every
call row also has CPU arguments, so it is walked through the Python dry run and the native dry-run kernels."""

from __future__ import annotations

from collections.abc import Callable

import torch

import opsmith as ok
from opsmith import InputDecl as I
from opsmith import OutputDecl as O

SRC = r"""
#include <cuda_fp16.h>
extern "C" __global__ void mm(const float* a, const float* b, int M, int N, int K, float* c) {}
extern "C" __global__ void ax(const float* x, const float* y, long long n, float* out) {}
extern "C" __global__ void rp(const float* x, int n, float* y) {}
extern "C" __global__ void kh(const float* x, int n, __half* y) {}
extern "C" __global__ void kst(const float* x, int stride, int n, float* y) {}
template <typename T> __global__ void tt(const T* a, const T* b, int n, T* c) {}
"""

_MM = dict(kernel_source=SRC, kernel_name="mm", inputs=[I("a", shape=("M", "K")), I("b", shape=("K", "N"))],
           outputs=[O("c", shape=("M", "N"))], extras=[ok.Dim("M"), ok.Dim("N"), ok.Dim("K")],
           geometry=ok.Grid(grid=("cdiv(M, 16)", "cdiv(N, 16)"), block=(16, 16)))  # fmt: skip
_AX = dict(kernel_source=SRC, kernel_name="ax", inputs=[I("x", shape=("*S",)), I("y", shape=("*S",))],
           outputs=[O("out", shape=("*S",))], extras=[ok.Numel("x", "int64")], geometry=ok.Elementwise())  # fmt: skip
_RP = dict(kernel_source='extern "C" __global__ void rp(const float* x, int n, float* y) {}', kernel_name="rp", inputs=[I("x", shape=("N",))], outputs=[O("y", shape=("2 * N - 3",))],
           extras=[ok.Dim("N")], geometry=ok.Grid(grid=("cdiv(N, 256)",), block=(256,)))  # fmt: skip


def _spec(base: dict, **kw) -> ok.KernelSpec:
    return ok.KernelSpec(**{**base, **kw})


def reg(case: str, base: dict = _MM, **kw) -> Callable[[], object]:
    return lambda: ok.cuda_kernel_op(f"errms::{case}", _spec(base, **kw))


_OPS: dict[str, ok.Op] = {}


def op(kind: str) -> ok.Op:
    """Valid ops the call rows call wrongly (registered once)."""
    if kind not in _OPS:
        base, kw = {
            "mm": (_MM, {}),
            "axpby": (_AX, {}),
            "sameas": (_AX, {"inputs": [I("x"), I("y", shape=ok.SameAs("x"))], "outputs": [O("out", shape=ok.SameAs("x"))]}),
            "vec": (_AX, {"inputs": [I("x", shape=("*S",), align=16, contiguous="require"), I("y", shape=("*S",))],
                          "requires": [ok.Divisible("numel(x)", 4, why="the kernel loads float4 vectors")]}),
            "heads": (_MM, {"requires": [ok.OneOf("K", (64, 128)), ok.AtMost("M", 4096), ok.AtLeast("N", 2)]}),
            "repeat": (_RP, {}),
            "big": (_RP, {"outputs": [O("y", shape=("N * N",))]}),
            "like": (_AX, {"kernel_name": "tt<{T_a}>", "inputs": [I("a", shape=("*S",)), I("b", dtype="a", shape=("*S",))],
                           "outputs": [O("c", shape=("*S",))], "extras": [ok.Numel("a")]}),
            # The boundary rows' ops: a square input, a group before a named axis, a small alignment on an
            # input whose dtype the call decides (its element size is the call's, not 4 bytes).
            "square": (_MM, {"inputs": [I("a", shape=("M", "M")), I("b", shape=("M", "N"))], "extras": [
                ok.Dim("M"), ok.Dim("N"), ok.Dim("M", name="K")]}),
            "rowgroup": (_AX, {"inputs": [I("x", shape=("*B", "C")), I("y", shape=("*B", "C"))],
                               "outputs": [O("out", shape=("*B", "C"))]}),
            "alignt": (_AX, {"kernel_name": "tt<{T_a}>", "inputs": [I("a", shape=("*S",), align=4, contiguous="require"), I("b", dtype="a", shape=("*S",))],
                             "outputs": [O("c", shape=("*S",))], "extras": [ok.Numel("a")]}),
        }[kind]  # fmt: skip
        _OPS[kind] = ok.cuda_kernel_op(f"errms::ok_{kind}", _spec(base, **kw))
    return _OPS[kind]


def _eager_with_requires():
    return ok.cuda_kernel_op("errms::req_eager", _spec(_MM, requires=[ok.Divisible("K", 8)]),
                             eager_fn=lambda a, b: a @ b)  # fmt: skip


# Call rows: (op kind, arguments on a device). Under FakeTensorMode for the table (the fake applies the
# rules), on CPU tensors for the dry runs.
CPU_ARGS: dict[str, tuple[str, Callable[[str], tuple]]] = {
    "dim-tie": ("mm", lambda d: (torch.empty(8, 4, device=d), torch.empty(5, 3, device=d))),
    "group-tie": ("axpby", lambda d: (torch.empty(1000, device=d), torch.empty(10, device=d))),
    "group-rank-tie": ("axpby", lambda d: (torch.empty(2, 3, device=d), torch.empty(6, device=d))),
    "sameas-input": ("sameas", lambda d: (torch.empty(4, 5, device=d), torch.empty(4, 6, device=d))),
    "shape-rank-declared": ("mm", lambda d: (torch.empty(8, 4, device=d), torch.empty(4, device=d))),
    "requires-divisible": ("vec", lambda d: (torch.empty(1001, device=d), torch.empty(1001, device=d))),
    "requires-one-of": ("heads", lambda d: (torch.empty(8, 96, device=d), torch.empty(96, 4, device=d))),
    "requires-at-most": ("heads", lambda d: (torch.empty(1, 64, device=d).expand(5000, 64), torch.empty(64, 4, device=d))),
    "requires-at-least": ("heads", lambda d: (torch.empty(8, 64, device=d), torch.empty(64, 1, device=d))),
    "align-require": ("vec", lambda d: (torch.empty(1028, device=d).narrow(0, 1, 1024), torch.empty(1024, device=d))),
    "output-negative": ("repeat", lambda d: (torch.empty(1, device=d),)),
    "output-too-large": ("big", lambda d: (torch.empty(1, device=d).expand(50000),)),
    "dtype-like": ("like", lambda d: (torch.empty(4, device=d), torch.empty(4, device=d, dtype=torch.float16))),
}  # fmt: skip


def _at(n: int, k: int, dtype: torch.dtype = torch.float32) -> Callable[[str], torch.Tensor]:
    """A view of ``n`` elements starting ``k`` elements into a fresh allocation (aligned to 64 bytes on CPU)."""
    return lambda d: torch.empty(n + 8, dtype=dtype, device=d).narrow(0, k, n)


def _mm(m: int, k: int, n: int) -> Callable[[str], tuple]:
    return lambda d: (torch.empty(1, k, device=d).expand(m, k), torch.empty(k, n, device=d))


# The boundary table: every precondition at, below and above its limit, every tie and group broken alone (and
# kept), square and prefix shapes, a small alignment per dtype. Each row's outcome (accepted, or the refusal)
# must be the same on every path (tests/contract_paths.py): a path whose guard is off by one, or that assumes
# 4-byte elements, disagrees with the others on one of these rows.
BOUNDARY: dict[str, tuple[str, Callable[[str], tuple]]] = {
    "one-of-64": ("heads", _mm(8, 64, 4)),
    "one-of-128": ("heads", _mm(8, 128, 4)),
    "one-of-63": ("heads", _mm(8, 63, 4)),
    "at-most-4095": ("heads", _mm(4095, 64, 4)),
    "at-most-4096": ("heads", _mm(4096, 64, 4)),
    "at-most-4097": ("heads", _mm(4097, 64, 4)),
    "at-least-1": ("heads", _mm(8, 64, 1)),
    "at-least-2": ("heads", _mm(8, 64, 2)),
    "at-least-3": ("heads", _mm(8, 64, 3)),
    "divisible-1000": ("vec", lambda d: (_at(1000, 0)(d), torch.empty(1000, device=d))),
    "divisible-1002": ("vec", lambda d: (_at(1002, 0)(d), torch.empty(1002, device=d))),
    "divisible-1004": ("vec", lambda d: (_at(1004, 0)(d), torch.empty(1004, device=d))),
    "align16-at-4": ("vec", lambda d: (_at(1000, 4)(d), torch.empty(1000, device=d))),
    "align16-at-2": ("vec", lambda d: (_at(1000, 2)(d), torch.empty(1000, device=d))),
    "align16-at-1": ("vec", lambda d: (_at(1000, 1)(d), torch.empty(1000, device=d))),
    "tie-k-kept": ("mm", lambda d: (torch.empty(8, 4, device=d), torch.empty(4, 3, device=d))),
    "tie-k-broken": ("mm", lambda d: (torch.empty(8, 4, device=d), torch.empty(5, 3, device=d))),
    "square-3x3": ("square", lambda d: (torch.empty(3, 3, device=d), torch.empty(3, 5, device=d))),
    "square-3x4": ("square", lambda d: (torch.empty(3, 4, device=d), torch.empty(3, 5, device=d))),
    "square-4x3": ("square", lambda d: (torch.empty(4, 3, device=d), torch.empty(4, 5, device=d))),
    "square-tie-broken": ("square", lambda d: (torch.empty(3, 3, device=d), torch.empty(4, 5, device=d))),
    "group-kept": ("rowgroup", lambda d: (torch.empty(2, 3, 4, device=d), torch.empty(2, 3, 4, device=d))),
    "group-prefix": ("rowgroup", lambda d: (torch.empty(2, 3, 4, device=d), torch.empty(2, 4, device=d))),
    "group-longer": ("rowgroup", lambda d: (torch.empty(2, 4, device=d), torch.empty(2, 3, 4, device=d))),
    "group-inner": ("rowgroup", lambda d: (torch.empty(2, 3, 4, device=d), torch.empty(2, 5, 4, device=d))),
    "group-named-axis": ("rowgroup", lambda d: (torch.empty(2, 3, 4, device=d), torch.empty(2, 3, 5, device=d))),
    "group-empty": ("rowgroup", lambda d: (torch.empty(4, device=d), torch.empty(4, device=d))),
    "axpby-prefix": ("axpby", lambda d: (torch.empty(2, 3, device=d), torch.empty(2, device=d))),
    **{f"align4-{str(dt).removeprefix('torch.')}-at-{k}": ("alignt", lambda d, dt=dt, k=k: (
        _at(64, k, dt)(d), torch.empty(64, dtype=dt, device=d)))
       for dt in (torch.float16, torch.bfloat16, torch.float32) for k in (1, 2)},
}  # fmt: skip


# Each boundary row's outcome, written out (checked by hand against the declaration): the paths are compared with
# each other too, but a bug in the call plan they share moves every path at once; these do not move.
EXPECTED: dict[str, str] = {
    'one-of-64': "ok",
    'one-of-128': "ok",
    'one-of-63': (
        "InputError: errms::ok_heads: argument 'a': expected K one of (64, 128), got K = 63. Fix: pass "
        'tensors for which K is one of (64, 128).'
    ),
    'at-most-4095': "ok",
    'at-most-4096': "ok",
    'at-most-4097': (
        "InputError: errms::ok_heads: argument 'a': expected M at most 4096, got M = 4097. Fix: pass tensors "
        'for which M is at most 4096.'
    ),
    'at-least-1': (
        "InputError: errms::ok_heads: argument 'b': expected N at least 2, got N = 1. Fix: pass tensors for "
        'which N is at least 2.'
    ),
    'at-least-2': "ok",
    'at-least-3': "ok",
    'divisible-1000': "ok",
    'divisible-1002': (
        "InputError: errms::ok_vec: argument 'x': expected numel(x) divisible by 4 (the kernel loads float4 "
        'vectors), got numel(x) = 1002. Fix: pass tensors for which numel(x) is divisible by 4.'
    ),
    'divisible-1004': "ok",
    'align16-at-4': "ok",
    'align16-at-2': (
        "InputError: errms::ok_vec: argument 'x': expected a data pointer aligned to 16 bytes (declared "
        "align=16, contiguous='require'), got an address 8 bytes past a multiple of 16 (storage offset 2). "
        'Fix: pass x.clone(), which starts at an aligned address.'
    ),
    'align16-at-1': (
        "InputError: errms::ok_vec: argument 'x': expected a data pointer aligned to 16 bytes (declared "
        "align=16, contiguous='require'), got an address 4 bytes past a multiple of 16 (storage offset 1). "
        'Fix: pass x.clone(), which starts at an aligned address.'
    ),
    'tie-k-kept': "ok",
    'tie-k-broken': (
        "InputError: errms::ok_mm: argument 'b': expected shape (K, N) where K = 4 from 'a', got shape (5, "
        '3).'
    ),
    'square-3x3': "ok",
    'square-3x4': (
        "InputError: errms::ok_square: argument 'a': expected shape (M, M) where M = 3 from 'a', got shape "
        '(3, 4).'
    ),
    'square-4x3': (
        "InputError: errms::ok_square: argument 'a': expected shape (M, M) where M = 4 from 'a', got shape "
        '(4, 3).'
    ),
    'square-tie-broken': (
        "InputError: errms::ok_square: argument 'b': expected shape (M, N) where M = 3 from 'a', got shape "
        '(4, 5).'
    ),
    'group-kept': "ok",
    'group-prefix': (
        "InputError: errms::ok_rowgroup: argument 'y': expected shape (*B, C) where B = (2, 3) from 'x', C = "
        "4 from 'x', got shape (2, 4)."
    ),
    'group-longer': (
        "InputError: errms::ok_rowgroup: argument 'y': expected shape (*B, C) where B = (2,) from 'x', C = 4 "
        "from 'x', got shape (2, 3, 4)."
    ),
    'group-inner': (
        "InputError: errms::ok_rowgroup: argument 'y': expected shape (*B, C) where B = (2, 3) from 'x', C = "
        "4 from 'x', got shape (2, 5, 4)."
    ),
    'group-named-axis': (
        "InputError: errms::ok_rowgroup: argument 'y': expected shape (*B, C) where B = (2, 3) from 'x', C = "
        "4 from 'x', got shape (2, 3, 5)."
    ),
    'group-empty': "ok",
    'axpby-prefix': (
        "InputError: errms::ok_axpby: argument 'y': expected shape (*S,) where S = (2, 3) from 'x', got shape"
        ' (2,).'
    ),
    'align4-float16-at-1': (
        "InputError: errms::ok_alignt: argument 'a': expected a data pointer aligned to 4 bytes (declared "
        "align=4, contiguous='require'), got an address 2 bytes past a multiple of 4 (storage offset 1). Fix:"
        ' pass a.clone(), which starts at an aligned address.'
    ),
    'align4-float16-at-2': "ok",
    'align4-bfloat16-at-1': (
        "InputError: errms::ok_alignt: argument 'a': expected a data pointer aligned to 4 bytes (declared "
        "align=4, contiguous='require'), got an address 2 bytes past a multiple of 4 (storage offset 1). Fix:"
        ' pass a.clone(), which starts at an aligned address.'
    ),
    'align4-bfloat16-at-2': "ok",
    'align4-float32-at-1': "ok",
    'align4-float32-at-2': "ok",
}  # fmt: skip


def _call(cid: str) -> Callable[[], object]:
    def run():
        from torch._subclasses.fake_tensor import FakeTensorMode

        kind, args = CPU_ARGS[cid]
        with FakeTensorMode():
            return op(kind)(*args("cuda"))

    return run


def cases() -> list[tuple[str, str, str, Callable[[], object], type, str]]:
    R, C = "registration", "call"
    E, IE = ok.SpecError, ok.InputError
    return [
        ("dim-name-reserved", R, "a dimension named like a word of the size language (`numel`)", reg("dim_reserved", inputs=[I("a", shape=("numel", "K")), I("b", shape=("K", "N"))]), E, "any"),
        ("dim-two-groups", R, "two groups in one shape (`('*A', '*B')`)", reg("two_groups", inputs=[I("a", shape=("*A", "*B")), I("b", shape=("K", "N"))]), E, "any"),
        ("dim-entry-type", R, "a shape entry that is no int, name, group or None (`1.5`)", reg("entry_type", inputs=[I("a", shape=("M", 1.5)), I("b", shape=("K", "N"))]), E, "any"),
        ("dim-unbound-output", R, "an output dimension no input names", reg("unbound_out", outputs=[O("c", shape=("M", "Q"))]), E, "any"),
        ("group-unbound-output", R, "an output group no input names", reg("unbound_group", outputs=[O("c", shape=("*G", "N"))]), E, "any"),
        ("dim-unbound-extra", R, "a `Dim` extra of a dimension no input names", reg("unbound_dim", extras=[ok.Dim("M"), ok.Dim("N"), ok.Dim("Q", name="K")]), E, "any"),
        ("dim-unbound-grid", R, "a `Grid` expression naming an unknown dimension", reg("unbound_grid", geometry=ok.Grid(grid=("cdiv(Q, 16)",), block=(16,))), E, "any"),
        ("dim-vs-config", R, "a dimension named like a config parameter", reg("dim_config", base=_RP, extras=[ok.Dim("N", name="n")], autotune=ok.Autotune([ok.Config({"N": 16})])), E, "any"),
        ("output-size-syntax", R, "an output size expression that does not parse (`2 *`)", reg("out_syntax", base=_RP, outputs=[O("y", shape=("2 *",))]), E, "any"),
        ("sameas-input-cycle", R, "input shapes that are `SameAs` each other", reg("sameas_cycle", base=_AX, inputs=[I("x", shape=ok.SameAs("y")), I("y", shape=ok.SameAs("x"))]), E, "any"),
        ("requires-unknown", R, "a precondition on an unknown dimension", reg("req_unknown", requires=[ok.Divisible("Q", 8)]), E, "any"),
        ("requires-divisor", R, "`Divisible` by zero", reg("req_zero", requires=[ok.Divisible("K", 0)]), E, "any"),
        ("requires-one-of-empty", R, "`OneOf` with no values", reg("req_empty", requires=[ok.OneOf("K", ())]), E, "any"),
        ("requires-type", R, "a precondition that is not `Divisible`/`AtMost`/`AtLeast`/`OneOf`", reg("req_type", requires=["K % 8 == 0"]), E, "any"),
        ("requires-eager-fn", R, "`requires=` beside an `eager_fn` (which launches on its own)", _eager_with_requires, E, "any"),
        ("align-value", R, "an `align` that is not a power of two (`align=12`)", reg("align_val", inputs=[I("a", shape=("M", "K"), align=12), I("b", shape=("K", "N"))]), E, "any"),
        ("output-dtype-both", R, "an output with both `dtype` and `dtype_from`", reg("out_both", outputs=[O("c", shape=("M", "N"), dtype=torch.float32, dtype_from="a")]), E, "any"),
        ("output-dtype-vs-kernel", R, "an output `dtype` the kernel does not write (`float16` for `float*`)", reg("out_dt", outputs=[O("c", shape=("M", "N"), dtype=torch.float16)]), E, "any"),
        ("input-dtype-like-unknown", R, "`InputDecl(dtype=...)` naming no tensor input", reg("dt_like", inputs=[I("a", shape=("M", "K")), I("b", dtype="q", shape=("K", "N"))]), E, "any"),
        ("reduce-axes-alias", R, "`Reduction` axes naming one axis twice (`(1, -1)` of a 2-D input)", reg("red_alias", base=_RP, kernel_name="rp", inputs=[I("x", ndim=2)], outputs=[O("y", shape=ok.ReduceDims("x", (-1,)))], extras=[ok.DimSize("x", -1)], geometry=ok.Reduction((1, -1))), E, "any"),
        ("reduce-axes-mixed", R, "`Reduction` axes of both signs on an input of unknown rank (`(0, -1)`)", reg("red_mixed", base=_RP, kernel_name="rp", inputs=[I("x")], outputs=[O("y", shape=ok.ReduceDims("x", (0, -1)))], extras=[ok.DimSize("x", -1)], geometry=ok.Reduction((0, -1))), E, "any"),
        ("stride-without-rank", R, "a `Stride`-addressed input of undeclared rank under a `Reduction`", reg("stride_rank", base=_RP, kernel_source=SRC, kernel_name="kst", inputs=[I("x")], outputs=[O("y", shape=ok.SameAs("x"))], extras=[ok.Stride("x", 0), ok.DimSize("x", -1)], geometry=ok.Reduction((-1,))), E, "any"),
        ("dim-tie", C, "a matmul's `b` whose `K` is not `a`'s (`a` (8, 4), `b` (5, 3))", _call("dim-tie"), IE, "any"),
        ("group-tie", C, "`axpby` with a short `y` (1,000 and 10 elements)", _call("group-tie"), IE, "any"),
        ("group-rank-tie", C, "a group of another rank (`x` (2, 3), `y` (6,))", _call("group-rank-tie"), IE, "any"),
        ("sameas-input", C, "an input declared `SameAs` another, of another shape", _call("sameas-input"), IE, "any"),
        ("shape-rank-declared", C, "a tensor of another rank than its declared shape", _call("shape-rank-declared"), IE, "any"),
        ("requires-divisible", C, "a size the kernel needs divisible by 4 (`numel(x)` = 1,001)", _call("requires-divisible"), IE, "any"),
        ("requires-one-of", C, "a size outside the kernel's `OneOf` (`K` = 96)", _call("requires-one-of"), IE, "any"),
        ("requires-at-most", C, "a size past the kernel's `AtMost` (`M` = 5,000)", _call("requires-at-most"), IE, "any"),
        ("requires-at-least", C, "a size below the kernel's `AtLeast` (`N` = 1)", _call("requires-at-least"), IE, "any"),
        ("align-require", C, "a misaligned view (`x[1:]`) where `align=16` and `contiguous=\"require\"`", _call("align-require"), IE, "any"),
        ("output-negative", C, "an output size expression below zero (`2 * N - 3` for `N` = 1)", _call("output-negative"), IE, "any"),
        ("output-too-large", C, "an output over 2^31 - 1 elements for a 32-bit-indexing kernel (`N * N`)", _call("output-too-large"), IE, "any"),
        ("dtype-like", C, "an input declared with another input's dtype, of another dtype", _call("dtype-like"), IE, "any"),
    ]  # fmt: skip
