"""The bad-input matrix: every mistake opsmith detects, with the exact error it gets.

Each case is (id, when, mistake, thunk, error class, needs a GPU). ``docs/errors.md`` is generated from
these cases by running them (``python tests/error_matrix.py --write``), and ``test_error_matrix.py``
walks the table: every row's error is raised exactly, and every case has its row.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import torch

import opsmith as ok
from opsmith import InputDecl as I
from opsmith import OutputDecl as O

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
SRC = r"""
extern "C" __global__ void k(const float* x, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" __global__ void k2(const float* x, const float* w, float a, int n, float* y) {}
template <typename T, typename W> __global__ void kt(const T* x, const W* w, long long n, T* y) {}
extern "C" __global__ void ki(float* x, int n) {}
"""


def spec(**kw) -> ok.KernelSpec:
    base = dict(kernel_source=SRC, kernel_name="k", inputs=[I("x")], outputs=[O("y", shape=ok.SameAs("x"))],
                extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(256,)))  # fmt: skip
    base.update(kw)
    return ok.KernelSpec(**base)


def reg(case: str, **kw) -> Callable[[], object]:
    return lambda: ok.cuda_kernel_op(f"errm::{case}", spec(**kw))


_OPS: dict[str, ok.Op] = {}


def op(kind: str) -> ok.Op:
    """Valid ops the call-time cases call wrongly (registered once)."""
    if kind not in _OPS:
        if kind == "plain":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_plain", spec(inputs=[I("x", ndim=2, contiguous="require")]))
        elif kind == "shaped":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_shaped", spec(
                kernel_source=SRC, kernel_name="kt<{T_x}, {T_w}>",
                inputs=[I("x"), I("w", shape=(ok.DimSize("x", -1),))], extras=[ok.Numel("x", "int64")]))  # fmt: skip
        elif kind == "inplace":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_inplace", spec(kernel_name="ki", inputs=[I("x", mutates=True)],
                                                                    outputs=[]))  # fmt: skip
        elif kind == "backward":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_backward", spec(), backward=ok.Backward(
                lambda g: g, args=("grad_y",), grads=("x",)))  # fmt: skip
    return _OPS[kind]


def _fake(fn: Callable[[], object]) -> Callable[[], object]:
    """Run a call under FakeTensorMode with CPU-built fake CUDA tensors: the fake implementation applies the
    same dtype, rank and shape rules as the eager guards, so these rows are checked without a GPU."""

    def run():
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            return fn()

    return run


def _dup():
    ok.cuda_kernel_op("errm::dup", spec())
    return ok.cuda_kernel_op("errm::dup", spec(geometry=ok.Elementwise(block=(128,))))


def _bad_backward():
    return ok.cuda_kernel_op("errm::bw_arg", spec(), backward=ok.Backward(lambda g: g, args=("grad_z",), grads=("x",)))


def _double_backward():
    x = torch.randn(8, device="cuda", requires_grad=True)
    (g,) = torch.autograd.grad(op("backward")(x).sum(), (x,), create_graph=True)
    return g


def cases() -> list[tuple[str, str, str, Callable[[], object], type, bool]]:
    R, C = "registration", "call"
    E = ok.SpecError
    return [
        ("bad-op-name", R, "op name without a namespace", lambda: ok.cuda_kernel_op("relu", spec()), E, False),
        ("empty-inputs", R, "an empty input list", reg("empty_inputs", inputs=[]), E, False),
        ("duplicate-input", R, "two inputs with one name", reg("dup_in", inputs=[I("x"), I("x")]), E, False),
        ("output-reuses-name", R, "an output named like an input", reg("out_name", outputs=[O("x", shape=ok.SameAs(0))]), E, False),
        ("empty-outputs", R, "no outputs and no mutated input", reg("no_out", outputs=[]), E, False),
        ("sameas-range", R, "`SameAs` index out of range", reg("sameas_idx", outputs=[O("y", shape=ok.SameAs(3))]), E, False),
        ("sameas-name", R, "`SameAs` of an unknown name", reg("sameas_name", outputs=[O("y", shape=ok.SameAs("z"))]), E, False),
        ("reducedims-repeat", R, "`ReduceDims` with a repeated axis", reg("rd_rep", outputs=[O("y", shape=ok.ReduceDims("x", (0, 0)))]), E, False),
        ("numel-unknown", R, "`Numel` of an unknown input", reg("numel_unk", extras=[ok.Numel("nope")]), E, False),
        ("extra-type", R, "an extra that is not `Numel`/`DimSize`", reg("extra_type", extras=[3]), E, False),
        ("dtype-from-unknown", R, "`dtype_from` an unknown input", reg("dtfrom", outputs=[O("y", shape=ok.SameAs(0), dtype_from="w")]), E, False),
        ("block-too-big", R, "a block over 1,024 threads", reg("block_big", geometry=ok.Elementwise(block=(2048,))), E, False),
        ("bad-layout", R, "an unknown `Elementwise` layout", reg("layout", geometry=ok.Elementwise(layout="diag")), E, False),
        ("outputs-without-meta", R, "no outputs and no `meta_fn`", reg("no_meta", outputs=None), E, False),
        ("geometry-without-eager", R, "no geometry and no `eager_fn`", reg("no_eager", geometry=None), E, False),
        ("scalar-type", R, "a `ScalarInput` of another Python type", reg("scalar_t", inputs=[I("x"), ok.ScalarInput("a", str)]), E, False),
        ("dtype-vs-kernel", R, "a declared dtype the kernel does not read", reg("dt_k", inputs=[I("x", dtype=torch.float16)]), E, False),
        ("param-count", R, "fewer declared arguments than kernel parameters", reg("params", extras=[]), E, False),
        ("extra-width", R, "an int64 extra for an `int` parameter", reg("width", extras=[ok.Numel("x", dtype="int64")]), E, False),
        ("contiguous-policy", R, "an unknown `contiguous` policy", reg("contig", inputs=[I("x", contiguous="maybe")]), E, False),
        ("missing-kernel", R, "a kernel name the module lacks", reg("missing", kernel_name="nope"), E, False),
        ("does-not-compile", R, "a source that does not compile", reg("nocompile", kernel_source=SRC.replace("y[i] = x[i];", "y[i] = x[i] + oops;")), ok.CompileError, False),
        ("type-slot-unknown", R, "a `{T_<input>}` slot naming no input", reg("slot", kernel_name="kt<{T_x}, {T_q}>", inputs=[I("x"), I("w")], extras=[ok.Numel("x", "int64")]), E, False),
        ("pointer-type-unknown", R, "a template pointer with no dtype and no slot", reg("noslot", kernel_name="kt<{T_x}>", inputs=[I("x"), I("w")], extras=[ok.Numel("x", "int64")]), E, False),
        ("shape-ref-unknown", R, "`InputDecl.shape` referencing an unknown input", reg("shape_ref", kernel_name="kt<{T_x}, {T_w}>", inputs=[I("x"), I("w", shape=(ok.DimSize("q", 0),))], extras=[ok.Numel("x", "int64")]), E, False),
        ("autotune-placeholder", R, "a `{NAME}` no config fills", reg("tune_ph", kernel_name="kt<{BLOCK}>", autotune=ok.Autotune([ok.Config({"OTHER": 1})])), E, False),
        ("backward-arg", R, "a `Backward` argument that names nothing", _bad_backward, E, False),
        ("name-taken", R, "the same name with another declaration", _dup, ok.RegistrationError, False),
        ("index-width", R, "an `index_dtype` that is not int32/int64", reg("width_idx", index_dtype="int16"), E, False),
        ("cpu-tensor", C, "a CPU tensor", lambda: op("plain")(torch.randn(2, 4)), ok.InputError, False),
        ("wrong-dtype", C, "a tensor of another dtype", _fake(lambda: op("plain")(torch.empty(2, 4, dtype=torch.float16, device="cuda"))), ok.InputError, False),
        ("wrong-rank", C, "a tensor of another rank", _fake(lambda: op("plain")(torch.empty(8, device="cuda"))), ok.InputError, False),
        ("wrong-shape", C, "a tensor of another declared shape", _fake(lambda: op("shaped")(torch.empty(2, 4, device="cuda"), torch.empty(5, device="cuda"))), ok.InputError, False),
        ("too-large-for-int32", C, "over 2^31 - 1 elements for a 32-bit-indexing kernel", _fake(lambda: op("shaped")(torch.empty(2**20, 2**11 + 1, device="cuda"), torch.empty(2**11 + 1, device="cuda"))), ok.InputError, False),
        ("not-contiguous", C, "a non-contiguous tensor where `require`d", lambda: op("plain")(torch.randn(4, 2, device="cuda").t()), ok.InputError, True),
        ("other-gpu", C, "tensors on two GPUs", lambda: op("shaped")(torch.randn(2, 4, device="cuda:0"), torch.randn(4, device="cuda:1")), ok.InputError, True),
        ("inplace-grad", C, "an in-place op without backward on a tensor that requires grad", lambda: op("inplace")(torch.randn(8, device="cuda", requires_grad=True).clone()), ok.DifferentiationError, True),
        ("double-backward", C, "`create_graph=True` through an undeclared double backward", _double_backward, ok.DifferentiationError, True),
    ]  # fmt: skip


def run(thunk: Callable[[], object], cls: type) -> str:
    try:
        thunk()
    except cls as e:
        return str(e).splitlines()[0]
    raise AssertionError(f"expected {cls.__name__}, nothing was raised")


def render(rows: list[tuple]) -> str:
    out = ["# Errors opsmith raises for bad input",
           "",
           "Generated by `python tests/error_matrix.py --write`; `tests/test_error_matrix.py` checks every row (first",
           "line of the message; compile errors continue with NVRTC's log and the marked source lines).",
           "",
           "| # | case | when | mistake | error |",
           "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for n, (cid, when, mistake, cls, msg) in enumerate(rows, 1):
        out.append(f"| {n} | `{cid}` | {when} | {mistake} | `{cls}`: {msg.replace('|', '&#124;')} |")
    return "\n".join(out) + "\n"


def parse(text: str) -> dict[str, tuple[str, str]]:
    """case id -> (error class, message) from the doc table."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and "`: " in line and not line.startswith("| #"):
            cells = line.split(" | ")
            cls, msg = cells[4].split("`: ", 1)
            rows[cells[1].strip("`")] = (cls.strip("`"), msg.rstrip(" |").replace("&#124;", "|"))
    return rows


if __name__ == "__main__":
    if "--write" not in sys.argv:
        sys.exit("usage: python tests/error_matrix.py --write")
    # Rows that need a GPU (two, for other-gpu) keep their documented message where none is here; the GPU
    # suite checks them.
    old = parse(DOC.read_text()) if DOC.exists() else {}
    rows = []
    for cid, when, mistake, thunk, cls, gpu in cases():
        if gpu and torch.cuda.device_count() < 2 and cid in old:
            msg = old[cid][1]
        elif gpu and torch.cuda.device_count() < 2:
            msg = "(not yet run on a GPU)"
        else:
            msg = run(thunk, cls)
        rows.append((cid, when + (" (GPU)" if gpu else ""), mistake, cls.__name__, msg))
    DOC.write_text(render(rows))
    print(f"wrote {len(rows)} rows to {DOC}")
