"""The bad-input matrix: every mistake opsmith detects, with the exact error it gets.

Each case is (id, when, mistake, thunk, error class, where). ``where``: "any" (walked everywhere, on CPU
with fake CUDA tensors where a call is needed), "gpu" (needs a GPU), "nodriver" (needs a machine without a
CUDA driver). ``docs/errors.md`` is generated from these cases by running them (``python
tests/error_matrix.py --write``), and ``test_error_matrix.py`` walks the table: every row's error is raised
exactly, and every case has its row.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import error_matrix_shapes as shaped
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
struct Px { float v; };
template <typename T> __global__ void kp(const T* x, const Px* w, long long n, T* y) {}
__global__ void ov(const float* x, int n, float* y) {}
__global__ void ov(const double* x, int n, double* y) {}
__device__ void dev(const float* x, int n, float* y) {}
extern "C" __global__ void kv(const float* x, float2 a, int n, float* y) {}
template <typename T, typename W> __global__ void ko(const T* x, const W* w, long long n, W* y) {}
extern "C" __global__ void named(float* out, const float* inp, int N) {}
extern "C" __global__ void both(const float* x, const float* x_ptr, int n, float* y) {}
extern "C" __global__ void ks(const float* x, float a, int n, float* y) {}
extern "C" __global__ void kst(const float* x, int stride, int n, float* y) {}
extern "C" __global__ void kc(const float* x, unsigned int c, int n, float* y) {}
template <typename T> __global__ void kit(const T* x, long long n, T* y) {}
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
    if kind.startswith("shaped:"):
        return shaped.op(kind.removeprefix("shaped:"))
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
        elif kind == "flat768":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_flat768", spec(geometry=ok.Elementwise(block=(768,))))
        elif kind == "rows":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_rows", spec(outputs=[O("y", shape=ok.ReduceDims("x", (-1,)))],
                                                                 geometry=ok.Reduction((-1,))))  # fmt: skip
        elif kind == "like":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_like", spec(kernel_name="kt<{T_x}, {T_x}>", inputs=[I("x"), I("w")],
                                                                 extras=[ok.Numel("x", "int64")]))  # fmt: skip
        elif kind == "scalar":
            _OPS[kind] = ok.cuda_kernel_op(
                "errm::ok_scalar", spec(kernel_name="ks", inputs=[I("x"), ok.ScalarInput("a", float)])
            )
        elif kind == "strided":  # indexes x with its row stride: row * stride + col
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_strided", spec(kernel_name="kst", inputs=[I("x", ndim=2)], extras=[
                ok.Stride("x", 0), ok.DimSize("x", -1)]))  # fmt: skip
        elif kind == "biggrid":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_biggrid", spec(index_dtype="int64", geometry=ok.Grid(
                grid=("size(x, 0) * 1073741824",), block=(32,))))  # fmt: skip
        elif kind == "lowgrid":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_lowgrid", spec(geometry=ok.Grid(grid=("size(x, 0) - 4",),
                                                                                      block=(32,))))  # fmt: skip
        elif kind == "divgrid":  # a stride 0 (a broadcast row) divides the grid by zero
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_divgrid", spec(kernel_name="kst", extras=[
                ok.Stride("x", 0), ok.DimSize("x", -1)], geometry=ok.Grid(grid=("cdiv(numel(x), stride(x, 0))",),
                                                                          block=(32,))))  # fmt: skip
        elif kind == "widegrid":  # five sizes multiplied: past 2^127 for a 2^30-row x
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_widegrid", spec(kernel_name="kst", index_dtype="int64", extras=[
                ok.Stride("x", 0), ok.DimSize("x", -1)], geometry=ok.Grid(
                    grid=("size(x, 0) * size(x, 0) * size(x, 0) * size(x, 0) * size(x, 0)",), block=(32,))))  # fmt: skip
        elif kind == "init":  # a max's -inf over an input of any dtype
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_init", spec(kernel_name="kit<{T_x}>", extras=[
                ok.Numel("x", "int64")], outputs=[O("y", shape=ok.SameAs("x"), init=float("-inf"))]))  # fmt: skip
        elif kind == "hugeout":  # a declared (N, N) output: past 2^63 - 1 bytes for N = 2^31 + 5
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_hugeout", spec(kernel_name="kit<{T_x}>", index_dtype="int64",
                inputs=[I("x", shape=("N",))], extras=[ok.Numel("x", "int64")],
                outputs=[O("y", shape=("N", "N"))]))  # fmt: skip
        elif kind == "floatgrid":
            _OPS[kind] = ok.cuda_kernel_op("errm::ok_floatgrid", spec(
                geometry=ok.Custom(lambda i, o: ((i["x"].numel() / 256,), (256,)))))  # fmt: skip
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


# Autograd rows run on meta tensors: the ops' fake implementations serve the Meta key, and the autograd
# engine runs on them everywhere (fake CUDA tensors cannot enter autograd in a CPU-only torch build).
def _double_backward():
    x = torch.empty(8, device="meta").requires_grad_()
    (g,) = torch.autograd.grad(op("backward")(x).sum(), (x,), create_graph=True)
    return g


def _no_backward():
    x = torch.empty(8, device="meta").requires_grad_()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no warnings filter decides it
        (op("plain")(x.view(2, 4)).sum() + x.sum()).backward()


def _buffer_name():
    bad = ok.Backward(fn=(ok.Buffer("p\n} evil(); //", like="x"),), args=("grad_y",), grads=("x",),
                      returns=("p\n} evil(); //",))  # fmt: skip
    return ok.cuda_kernel_op("errm::bw_name", spec(), backward=bad)


def _bad_default_arch():
    import os

    os.environ["OPSMITH_DEFAULT_ARCH"] = "90"
    try:
        return ok.cuda_kernel_op("errm::bad_arch", spec())
    finally:
        del os.environ["OPSMITH_DEFAULT_ARCH"]


def _ptx_without_driver():
    return ok.cuda_kernel_op("errm::ptx_nodriver", spec(target="ptx"))


def _meta_untyped():
    def meta(x):
        return torch.empty_like(x)

    return ok.cuda_kernel_op("errm::meta_untyped", spec(outputs=None), meta_fn=meta)


def _dtensor(call: Callable[[object], object]) -> Callable[[], object]:
    """Run ``call(x)`` with ``x`` a DTensor sharded on rows over a one-rank CPU mesh (a gloo group on an
    in-memory store, torn down after, so no other test sees an initialized process group)."""

    def run():
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor

        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            return call(distribute_tensor(torch.randn(8, 4), init_device_mesh("cpu", (1,)), [Shard(0)]))
        finally:
            dist.destroy_process_group()

    return run


def _cute(kernel: str, **kw) -> Callable[[], object]:
    def run():
        import cute_matrix_kernels as ck

        decl = {"inputs": [I("x")], "outputs": [O("y", shape=ok.SameAs("x"))], "extras": [ok.Numel("x", name="n")]}
        return ok.cute_op(f"errm::cute_{kernel}", getattr(ck, kernel), **{**decl, **kw})

    return run


def cases() -> list[tuple[str, str, str, Callable[[], object], type, str]]:
    R, C = "registration", "call"
    E = ok.SpecError
    return [
        ("bad-op-name", R, "op name without a namespace", lambda: ok.cuda_kernel_op("relu", spec()), E, "any"),
        ("op-name-keyword", R, "an op name that is a Python keyword", lambda: ok.cuda_kernel_op("errm::def", spec()), E, "any"),
        ("op-name-ascii", R, "an op name with non-ASCII letters", lambda: ok.cuda_kernel_op("errm::résumé", spec()), E, "any"),
        ("op-name-attribute", R, "an op name torch's namespace object already uses", lambda: ok.cuda_kernel_op("errm::name", spec()), E, "any"),
        ("empty-inputs", R, "an empty input list", reg("empty_inputs", inputs=[]), E, "any"),
        ("duplicate-input", R, "two inputs with one name", reg("dup_in", inputs=[I("x"), I("x")]), E, "any"),
        ("output-reuses-name", R, "an output named like an input", reg("out_name", outputs=[O("x", shape=ok.SameAs(0))]), E, "any"),
        ("empty-outputs", R, "no outputs and no mutated input", reg("no_out", outputs=[]), E, "any"),
        ("sameas-range", R, "`SameAs` index out of range", reg("sameas_idx", outputs=[O("y", shape=ok.SameAs(3))]), E, "any"),
        ("sameas-name", R, "`SameAs` of an unknown name", reg("sameas_name", outputs=[O("y", shape=ok.SameAs("z"))]), E, "any"),
        ("reducedims-repeat", R, "`ReduceDims` with a repeated axis", reg("rd_rep", outputs=[O("y", shape=ok.ReduceDims("x", (0, 0)))]), E, "any"),
        ("numel-unknown", R, "`Numel` of an unknown input", reg("numel_unk", extras=[ok.Numel("nope")]), E, "any"),
        ("extra-type", R, "an extra that is not `Numel`/`DimSize`", reg("extra_type", extras=[3]), E, "any"),
        ("dtype-from-unknown", R, "`dtype_from` an unknown input", reg("dtfrom", outputs=[O("y", shape=ok.SameAs(0), dtype_from="w")]), E, "any"),
        ("block-too-big", R, "a block over 1,024 threads", reg("block_big", geometry=ok.Elementwise(block=(2048,))), E, "any"),
        ("bad-layout", R, "an unknown `Elementwise` layout", reg("layout", geometry=ok.Elementwise(layout="diag")), E, "any"),
        ("outputs-without-meta", R, "no outputs and no `meta_fn`", reg("no_meta", outputs=None), E, "any"),
        ("geometry-without-eager", R, "no geometry and no `eager_fn`", reg("no_eager", geometry=None), E, "any"),
        ("scalar-type", R, "a `ScalarInput` of another Python type", reg("scalar_t", inputs=[I("x"), ok.ScalarInput("a", str)]), E, "any"),
        ("dtype-vs-kernel", R, "a declared dtype the kernel does not read", reg("dt_k", inputs=[I("x", dtype=torch.float16)]), E, "any"),
        ("param-count", R, "fewer declared arguments than kernel parameters", reg("params", extras=[]), E, "any"),
        ("extra-width", R, "an int64 extra for an `int` parameter", reg("width", extras=[ok.Numel("x", dtype="int64")]), E, "any"),
        ("contiguous-policy", R, "an unknown `contiguous` policy", reg("contig", inputs=[I("x", contiguous="maybe")]), E, "any"),
        ("missing-kernel", R, "a kernel name the module lacks", reg("missing", kernel_name="nope"), E, "any"),
        ("does-not-compile", R, "a source that does not compile", reg("nocompile", kernel_source=SRC.replace("y[i] = x[i];", "y[i] = x[i] + oops;")), ok.CompileError, "any"),
        ("type-slot-unknown", R, "a `{T_<input>}` slot naming no input", reg("slot", kernel_name="kt<{T_x}, {T_q}>", inputs=[I("x"), I("w")], extras=[ok.Numel("x", "int64")]), E, "any"),
        ("pointer-type-unknown", R, "a pointer to a type with no dtype, undeclared", reg("noslot", kernel_name="kp<{T_x}>", inputs=[I("x"), I("w")], extras=[ok.Numel("x", "int64")]), E, "any"),
        ("template-args-missing", R, "a template kernel name without its arguments", reg("targs", kernel_name="kt<{T_x}>", inputs=[I("x"), I("w")], extras=[ok.Numel("x", "int64")]), E, "any"),
        ("kernel-overloaded", R, "an overloaded kernel named without its parameter types", reg("overload", kernel_name="ov"), E, "any"),
        ("not-a-kernel", R, "a `__device__` function for a kernel", reg("device_fn", kernel_name="dev"), E, "any"),
        ("scalar-into-struct", R, "a `ScalarInput` for a vector-type parameter (float2)", reg("float2", kernel_name="kv", inputs=[I("x"), ok.ScalarInput("a", float)]), E, "any"),
        ("output-dtype-vs-template", R, "`dtype_from` against the template parameter that types the output", reg("out_slot", kernel_name="ko<{T_x}, {T_w}>", inputs=[I("x"), I("w")], outputs=[O("y", shape=ok.SameAs("x"), dtype_from="x")], extras=[ok.Numel("x", "int64")]), E, "any"),
        ("names-partial", R, "kernel parameter names matching the declaration only in part", reg("partial", kernel_name="named", inputs=[I("inp")], outputs=[O("out", shape=ok.SameAs("inp"))], extras=[ok.Numel("inp")]), E, "any"),
        ("names-ambiguous", R, "a declared name matching two kernel parameters (`x`, `x_ptr`)", reg("ambiguous", kernel_name="both", inputs=[I("x"), I("w")], outputs=[O("y", shape=ok.SameAs("x"))]), E, "any"),
        ("param-order-unknown", R, "a `param_order` naming nothing declared", reg("order", param_order=["x", "count", "y"]), E, "any"),
        ("extra-name-taken", R, "an extra named like an input", reg("extra_name", extras=[ok.Numel("x", name="x")]), E, "any"),
        ("stride-unknown", R, "a `Stride` of an unknown tensor", reg("stride_unk", extras=[ok.Stride("z", 0)]), E, "any"),
        ("const-value", R, "a `Const` that is not a number", reg("const_val", extras=[ok.Const("7")]), E, "any"),
        ("meta-fn-untyped", R, "no outputs and a `meta_fn` without type hints", _meta_untyped, E, "any"),
        ("shape-ref-unknown", R, "`InputDecl.shape` referencing an unknown input", reg("shape_ref", kernel_name="kt<{T_x}, {T_w}>", inputs=[I("x"), I("w", shape=(ok.DimSize("q", 0),))], extras=[ok.Numel("x", "int64")]), E, "any"),
        ("autotune-placeholder", R, "a `{NAME}` no config fills", reg("tune_ph", kernel_name="kt<{BLOCK}>", autotune=ok.Autotune([ok.Config({"OTHER": 1})])), E, "any"),
        ("backward-arg", R, "a `Backward` argument that names nothing", _bad_backward, E, "any"),
        ("name-taken", R, "the same name with another declaration", _dup, ok.RegistrationError, "any"),
        ("init-dtype-fixed", R, "an `init=` the output's dtype cannot hold (2.5 for an int32 output)", reg("init_fixed", kernel_name="kit<{T_x}>", extras=[ok.Numel("x", "int64")], outputs=[O("y", shape=ok.SameAs("x"), dtype=torch.int32, init=2.5)]), E, "any"),
        ("sharding-value", R, "a `sharding=` that is neither a rule nor \"replicate\"", lambda: ok.cuda_kernel_op("errm::shard_val", spec(), sharding="rows"), E, "any"),
        ("sharding-inplace", R, "`sharding=` on an op that writes an input in place", lambda: ok.cuda_kernel_op("errm::shard_inpl", spec(kernel_name="ki", inputs=[I("x", mutates=True)], outputs=[]), sharding="replicate"), E, "any"),
        ("reducedims-combine", R, "a `ReduceDims.combine` that is not sum/max/min", reg("rd_comb", outputs=[O("y", shape=ok.ReduceDims("x", (-1,), combine="mean"))], geometry=ok.Reduction((-1,))), E, "any"),
        ("cute-no-stream", R, "a CuTe DSL host function without a stream parameter", _cute("no_stream"), E, "any"),
        ("cute-config-param", R, "a CuTe DSL `Config` param that is not a `cutlass.Constexpr`", _cute("copy", autotune=ok.Autotune([ok.Config({"WARPS": 4})])), E, "any"),
        ("cute-compile-error", R, "a CuTe DSL host function that does not compile", _cute("broken"), ok.CompileError, "any"),
        ("index-width", R, "an `index_dtype` that is not int32/int64", reg("width_idx", index_dtype="int16"), E, "any"),
        ("const-range", R, "a `Const` its kernel parameter cannot hold (-3 for `unsigned int`)", reg("const_range", kernel_name="kc", extras=[ok.Const(-3), ok.Numel("x")]), E, "any"),
        ("optional-first", R, "an optional first tensor input", reg("opt_first", kernel_name="kt<{T_x}, {T_w}>", inputs=[I("x", optional=True), I("w")], extras=[ok.Numel("x", "int64")]), E, "any"),
        ("optional-only-named", R, "a dimension only an optional input names", reg("opt_named", kernel_name="kt<{T_x}, {T_w}>", inputs=[I("x"), I("w", shape=("M",), optional=True)], extras=[ok.Numel("x", "int64")]), E, "any"),
        ("present-of-required", R, "`Present` of a required input", reg("present_req", kernel_name="kt<{T_x}, {T_w}>", inputs=[I("x"), I("w")], extras=[ok.Present("w", dtype="int64")]), E, "any"),
        ("shape-rank", R, "a declared shape of fewer dims than the geometry needs", reg("shape_rank", inputs=[I("x", shape=(None,))], geometry=ok.Elementwise(block=(16, 16), layout="nd")), E, "any"),
        ("buffer-name", R, "a backward-program name that is not an identifier (it would reach generated C++)", _buffer_name, E, "any"),
        ("default-arch", R, "an `OPSMITH_DEFAULT_ARCH` that is not an architecture name (`90`)", _bad_default_arch, ok.ToolchainError, "nodriver"),
        ("ptx-needs-driver", R, "`target=\"ptx\"` on a machine without a CUDA driver", _ptx_without_driver, ok.ToolchainError, "nodriver"),
        ("cpu-tensor", C, "a CPU tensor", lambda: op("plain")(torch.randn(2, 4)), ok.InputError, "any"),
        ("wrong-dtype", C, "a tensor of another dtype", _fake(lambda: op("plain")(torch.empty(2, 4, dtype=torch.float16, device="cuda"))), ok.InputError, "any"),
        ("wrong-rank", C, "a tensor of another rank", _fake(lambda: op("plain")(torch.empty(8, device="cuda"))), ok.InputError, "any"),
        ("no-tensors", C, "no tensor at all: `None` for every tensor argument (torch's dispatcher has no device to choose a kernel by)", lambda: op("shaped")(None, None), ok.InputError, "any"),
        ("required-none", C, "`None` for a required tensor (torch's dispatcher passes it through)", _fake(lambda: op("shaped")(None, torch.empty(4, device="cuda"))), ok.InputError, "any"),
        ("wrong-shape", C, "a tensor of another declared shape", _fake(lambda: op("shaped")(torch.empty(2, 4, device="cuda"), torch.empty(5, device="cuda"))), ok.InputError, "any"),
        ("too-large-for-int32", C, "over 2^31 - 1 elements for a 32-bit-indexing kernel", _fake(lambda: op("shaped")(torch.empty(2**20, 2**11 + 1, device="cuda"), torch.empty(2**11 + 1, device="cuda"))), ok.InputError, "any"),
        ("launch-wraps-int32", C, "a launch whose top thread index passes 2^31 - 1 (2^31 - 1 elements, block 768)", _fake(lambda: op("flat768")(torch.empty(2**31 - 1, device="cuda"))), ok.InputError, "any"),
        ("float-scalar-range", C, "a float scalar outside its C type's range (3.5e38 for `float`)", _fake(lambda: op("scalar")(torch.empty(4, device="cuda"), 3.5e38)), ok.InputError, "any"),
        ("template-dtype", C, "tensors one template parameter types, of two dtypes", _fake(lambda: op("like")(torch.empty(4, device="cuda"), torch.empty(4, device="cuda", dtype=torch.float16))), ok.InputError, "any"),
        ("init-dtype", C, "an input of any dtype whose output declares `init=-inf`, given int32", _fake(lambda: op("init")(torch.empty(4, device="cuda", dtype=torch.int32))), ok.InputError, "any"),
        ("output-too-many-bytes", C, "a declared output shape past 2^63 - 1 bytes (`(N, N)` float32 for N = 2^31 + 5)", _fake(lambda: op("hugeout")(torch.empty(2**31 + 5, device="cuda"))), ok.InputError, "any"),
        ("empty-reduced-axis", C, "an empty reduced axis with non-empty outputs (shape (3, 0))", _fake(lambda: op("rows")(torch.empty(3, 0, device="cuda"))), ok.InputError, "any"),
        ("strided-span-int32", C, "a strided view spanning over 2^31 - 1 elements for a 32-bit-indexing kernel (`x[:, :16]` of a (2^26, 64) tensor)", _fake(lambda: op("strided")(torch.empty_strided((2**26, 16), (64, 1), device="cuda"))), ok.InputError, "any"),
        ("grid-too-large", C, "a launch grid past 2^31 - 1 blocks along x (`size(x, 0) * 2^30` blocks)", lambda: op("biggrid").eager(*CPU_ARGS["grid-too-large"][1]("cuda")) if torch.cuda.is_available() else _dry("grid-too-large"), ok.InputError, "any"),
        ("grid-below-one", C, "a launch grid below one block (`size(x, 0) - 4` for 2 rows)", lambda: op("lowgrid").eager(*CPU_ARGS["grid-below-one"][1]("cuda")) if torch.cuda.is_available() else _dry("grid-below-one"), ok.InputError, "any"),
        ("grid-divides-by-zero", C, "a grid expression dividing by zero (`stride(x, 0)` of a broadcast row)", lambda: op("divgrid").eager(*CPU_ARGS["grid-divides-by-zero"][1]("cuda")) if torch.cuda.is_available() else _dry("grid-divides-by-zero"), ok.InputError, "any"),
        ("grid-overflows", C, "a grid expression whose intermediate value passes 2^127 (five sizes of 2^30 multiplied)", lambda: _dry("grid-overflows"), ok.InputError, "any"),
        ("custom-float-grid", C, "a `Custom` geometry returning a float grid (`numel / 256`)", _fake(lambda: op("floatgrid").eager(torch.empty(1000, device="cuda"))), E, "any"),
        ("dtensor-no-rule", C, "a DTensor into an op whose sharding is not derivable (`Custom` geometry) and that has no `sharding=`", _dtensor(lambda x: op("floatgrid")(x)), ok.ShardingError, "any"),
        ("dtensor-inplace", C, "a DTensor into an op that writes it in place", _dtensor(lambda x: op("inplace")(x)), ok.ShardingError, "any"),
        ("no-backward", C, "differentiating an op that declares no backward (warnings ignored)", _no_backward, ok.DifferentiationError, "any"),
        *shaped.cases(),
        ("not-contiguous", C, "a non-contiguous tensor where `require`d", lambda: op("plain")(torch.randn(4, 2, device="cuda").t()), ok.InputError, "gpu"),
        ("other-gpu", C, "tensors on two GPUs", lambda: op("shaped")(torch.randn(2, 4, device="cuda:0"), torch.randn(4, device="cuda:1")), ok.InputError, "gpu"),
        ("inplace-grad", C, "an in-place op without backward on a tensor that requires grad", lambda: op("inplace")(torch.empty(8, device="meta").requires_grad_().clone()), ok.DifferentiationError, "any"),
        ("double-backward", C, "`create_graph=True` through an undeclared double backward", _double_backward, ok.DifferentiationError, "any"),
    ]  # fmt: skip


# Call rows whose arguments can be real CPU tensors: what the native CUDA kernel is walked with, in a library
# built with -DOPSMITH_DRY_RUN (tests/native_matrix.py --dry-run), and what the Python path's dry run takes.
# (op kind, args on a device). Huge inputs are broadcast views: refused before any copy.
CPU_ARGS: dict[str, tuple[str, Callable[[str], tuple]]] = {
    "wrong-dtype": ("plain", lambda d: (torch.empty(2, 4, dtype=torch.float16, device=d),)),
    "wrong-rank": ("plain", lambda d: (torch.empty(8, device=d),)),
    "required-none": ("shaped", lambda d: (None, torch.empty(4, device=d))),
    "no-tensors": ("shaped", lambda d: (None, None)),
    "wrong-shape": ("shaped", lambda d: (torch.empty(2, 4, device=d), torch.empty(5, device=d))),
    "too-large-for-int32": ("shaped", lambda d: (torch.empty(1, 1, device=d).expand(2**20, 2**11 + 1),
                                                 torch.empty(2**11 + 1, device=d))),
    "float-scalar-range": ("scalar", lambda d: (torch.empty(4, device=d), 3.5e38)),
    "template-dtype": ("like", lambda d: (torch.empty(4, device=d), torch.empty(4, device=d, dtype=torch.float16))),
    "empty-reduced-axis": ("rows", lambda d: (torch.empty(3, 0, device=d),)),
    "init-dtype": ("init", lambda d: (torch.empty(4, device=d, dtype=torch.int32),)),
    "not-contiguous": ("plain", lambda d: (torch.randn(4, 2, device=d).t(),)),
    "grid-too-large": ("biggrid", lambda d: (torch.randn(8, device=d),)),
    "grid-below-one": ("lowgrid", lambda d: (torch.randn(2, device=d),)),
    "grid-divides-by-zero": ("divgrid", lambda d: (torch.randn(1, 4, device=d).expand(3, 4),)),
    "grid-overflows": ("widegrid", lambda d: (torch.randn(1, device=d).expand(2**30),)),
}  # fmt: skip
CPU_ARGS.update({cid: (f"shaped:{kind}", args) for cid, (kind, args) in shaped.CPU_ARGS.items()})


def _dry(cid: str) -> object:
    """A call row on CPU tensors through the Python path's dry run (everything but the launch)."""
    from opsmith.torchlib.eager import make_dry_run

    kind, args = CPU_ARGS[cid]
    fn, _ = make_dry_run(op(kind))
    return fn(*args("cpu"))


def has_driver() -> bool:
    from cuda.pathfinder import DynamicLibNotFoundError, load_nvidia_dynamic_lib

    try:
        load_nvidia_dynamic_lib("cuda")
        return True
    except DynamicLibNotFoundError:
        return False


def runs_here(cid: str) -> bool:
    return torch.cuda.device_count() >= (2 if cid == "other-gpu" else 1)


def run(thunk: Callable[[], object], cls: type) -> str:
    try:
        thunk()
    except cls as e:
        return str(e).splitlines()[0]
    raise AssertionError(f"expected {cls.__name__}, nothing was raised")


INTRO = """\
Every error is a class in `opsmith.errors` whose message names the op, the field or argument, and the fix.
The table below lists every mistake opsmith detects with the exact error it gets (a test walks the table,
on CPU wherever fake or meta tensors can show it, and the rows with CPU arguments through the eager code's
dry run and through a native library's own CUDA kernels).

**One class and text on every path.** Whatever serves a call, a mistake gets the same error: the Python path,
the native library that serves the op by default (before and after it takes over), `opsmith.native.use`, a
library from `opsmith build` loaded with `opsmith.native.load` (or in a process that registered an op), JAX
(`opsmith.jax`, at trace time: launch refusals too, which PyTorch's Meta kernel cannot see) and the CPU
`reference=` (which runs the op's checks, launch grid included, on the call's own tensors). `except
ok.InputError` catches a refusal before and after the switch to native code. A native library raises through
one op, `opsmith_errors::raise_`, whose Python kernel raises the opsmith class from the same parts
(`opsmith/native/error_bridge.py`); `tests/test_error_contract.py` walks this table and a boundary table
(each precondition at, below and above its limit; ties and groups broken alone; alignments per dtype)
through every path and compares classes and texts.

Loaded where opsmith is not (a process that only calls `torch.ops.load_library`, a C++ program), a library
raises torch's builtin classes, with the same text:

| opsmith class | from a library loaded without opsmith | from a stable-ABI library (`stable=True`) | from an XLA handler (`opsmith.jax`) |
| --- | --- | --- | --- |
| `InputError` | `ValueError` | `RuntimeError` | refused at trace time as `InputError`; a hand-made custom call: `JaxRuntimeError` (INVALID_ARGUMENT) |
| `DifferentiationError` | `RuntimeError` | (no Autograd kernels) | (JAX differentiates with the declared backward) |
| `LaunchError` | `RuntimeError` | `RuntimeError` | `JaxRuntimeError` (INTERNAL) |

- `SpecError` (a `ValueError`), at registration: empty or duplicate names, bad `SameAs`/`ReduceDims`/
  `Numel`/`DimSize`/`Stride`/`Const`/`dtype_from` references, bad blocks, a missing field without its
  override, an op name torch cannot reach (a keyword, non-ASCII, an attribute of `torch.ops`), a declaration
  that disagrees with the kernel's parameters (count, pointer vs value, element type, integer width, a number
  for a struct such as `float2`, names matching only in part or twice), a kernel name the source does not
  define or that is overloaded. A `Custom` geometry returning a float grid gets one at its first call.
  `RegistrationError`: the name is taken by another declaration.
- `CompileError` (a `ValueError`): NVRTC's (or Triton's) log and the offending source lines, marked.
- `ToolchainError` (a `RuntimeError`): a tool is missing here, not a mistake in the kernel (`target="ptx"`
  without a CUDA driver).
- `InputError` (a `ValueError`), before any launch: a tensor not on CUDA, tensors on different GPUs, wrong
  dtype (or two dtypes for one template parameter), wrong rank or declared shape, a layout the kernel cannot
  address where `"require"`d, an empty input for a non-empty output, a scalar or extra outside its C type's
  range, more than 2^31 - 1 elements (or a strided view spanning more) or a launch whose top thread index
  wraps for a 32-bit-indexing kernel, a launch grid outside 1 to 2^31 - 1 blocks along x (65,535 along y
  and z: `cuLaunchKernel` takes unsigned ints, so 2^32 + k would launch k), a size expression dividing by
  zero or passing 2^127 on the way, too many sizes compiled in. The same rules apply while `torch.compile` traces, where they depend only on
  shapes and dtypes.
- `DifferentiationError` (a `RuntimeError`): a gradient reaching an op without a backward, double backward
  through a backward not declared differentiable, a backward that returns the wrong number of gradients, or
  an in-place op without a backward called on tensors that require grad.
- `ShardingError` (a `NotImplementedError`, as DTensor's own): DTensor inputs reached an op whose sharding
  is not derivable and has no `sharding=`, or an op that writes an input in place.
- `LaunchError`: the driver refused to load or launch (its error name and the grid are in the message), or
  the process was forked after CUDA was initialised.
"""


def render(rows: list[tuple]) -> str:
    out = ["# Errors opsmith raises for bad input",
           "",
           *INTRO.splitlines(),
           "",
           "## Every mistake, with its error",
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
    # Rows that cannot run here (a GPU, two for other-gpu; no driver) keep their documented message; the
    # machine that can run them checks them.
    old = parse(DOC.read_text()) if DOC.exists() else {}
    rows = []
    for cid, when, mistake, thunk, cls, where in cases():
        runnable = where == "any" or (where == "gpu" and runs_here(cid)) or (where == "nodriver" and not has_driver())
        if runnable:
            msg = run(thunk, cls)
        else:
            msg = old[cid][1] if cid in old else "(not yet run where it can run)"
        label = {"any": "", "gpu": " (GPU)", "nodriver": " (no driver)"}[where]
        rows.append((cid, when + label, mistake, cls.__name__, msg))
    DOC.write_text(render(rows))
    print(f"wrote {len(rows)} rows to {DOC}")
