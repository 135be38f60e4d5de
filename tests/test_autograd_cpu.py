"""Autograd on CPU: Backward declaration errors, the forward and backward graphs torch.compile builds on fake
CUDA tensors for both RMSNorm kernels, and (in Triton's interpreter) numerics, gradcheck and the errors."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import pythonpath
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok
from examples.catalog.basic import RELU

NS = "t_agcpu"


def _relu(name: str, **kw):
    spec = ok.KernelSpec(kernel_source=RELU, kernel_name="my_relu", inputs=[ok.InputDecl("x")],
                         outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                         geometry=ok.Elementwise(block=(256,)))  # fmt: skip
    return ok.cuda_kernel_op(f"{NS}::{name}", spec, **kw)


def _aot_capture():
    """An AOTAutograd backend that keeps the forward and backward graphs it compiles: (backend, graphs)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs: dict[str, list] = {"fw": [], "bw": []}

    def keep(kind):
        def compiler(gm, inputs):
            graphs[kind].append(gm)
            return make_boxed_func(gm.forward)

        return compiler

    return aot_autograd(fw_compiler=keep("fw"), bw_compiler=keep("bw")), graphs


@pytest.mark.parametrize(("backward", "match"), [
    (ok.Backward(lambda g: g, args=("grad_z",), grads=("x",)), r"'grad_z' is neither an input"),
    (ok.Backward(lambda x: x, args=("x",), grads=("x",)), r"no output gradient is passed"),
    (ok.Backward(lambda g: g, args=("grad_y",), grads=("y",)), r"'y' is not a tensor input"),
    (ok.Backward(lambda g: (g, g), args=("grad_y",), grads=("x", "x")), r"'x' is named twice"),
    (ok.Backward(lambda g: g, args=("grad_y",), grads=()), r"no gradient is declared"),
    (ok.Backward(42, args=("grad_y",), grads=("x",)), r"is not callable"),
    ("not a backward", r"is not a Backward"),
])  # fmt: skip
def test_backward_declaration_errors(backward, match):
    with pytest.raises(ok.SpecError, match=match):
        _relu(f"bad_{abs(hash(match)) % 10**8}", backward=backward)
    assert not hasattr(torch.ops, NS) or not hasattr(getattr(torch.ops, NS), f"bad_{abs(hash(match)) % 10**8}")


def test_backward_op_arity_must_match_and_inplace_ops_refuse_backward():
    bwd = _relu("arity_bwd")  # takes 1 input, returns 1
    with pytest.raises(ok.SpecError, match=r"takes 1 inputs and returns 1, but args has 2 names"):
        _relu("arity", backward=ok.Backward(bwd, args=("grad_y", "x"), grads=("x",)))
    src = 'extern "C" __global__ void scale_(float* x, long long n) {}'
    with pytest.raises(ok.SpecError, match="writes an input in place"):
        ok.cuda_kernel_op(f"{NS}::inplace", ok.KernelSpec(
            kernel_source=src, kernel_name="scale_", inputs=[ok.InputDecl("x", mutates=True)], outputs=[],
            extras=[ok.Numel("x")], geometry=ok.Elementwise()),
            backward=ok.Backward(lambda x: x, args=("x",), grads=("x",)))  # fmt: skip


def test_templated_cuda_kernel_needs_a_dtype_for_every_pointer():
    src = "template <typename T> __global__ void k(const T* x, const float* w, long long n, T* y) {}"
    with pytest.raises(ok.SpecError, match=r"'{T_q}' names no tensor input"):
        ok.cuda_kernel_op(f"{NS}::slot", ok.KernelSpec(
            kernel_source=src, kernel_name="k<{T_q}>", inputs=[ok.InputDecl("x"), ok.InputDecl("w")],
            outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", "int64")],
            geometry=ok.Elementwise()))  # fmt: skip
    # ``w`` is typed by the T that {T_x} binds: it takes x's dtype (issue 14: it was refused as untyped).
    src2 = "template <typename T> __global__ void k(const T* x, const T* w, long long n, T* y) {}"
    op = ok.cuda_kernel_op(f"{NS}::sameslot", ok.KernelSpec(
        kernel_source=src2, kernel_name="k<{T_x}>", inputs=[ok.InputDecl("x"), ok.InputDecl("w")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", "int64")],
        geometry=ok.Elementwise()))  # fmt: skip
    assert op.record.tensor_inputs[1].dtype_like == "x"
    with FakeTensorMode():
        x = torch.empty(8, device="cuda", dtype=torch.float16)
        assert op(x, torch.empty(8, device="cuda", dtype=torch.float16)).dtype == torch.float16
        with pytest.raises(ok.InputError, match=r"argument 'w': expected dtype torch.float16, the dtype of 'x'"):
            op(x, torch.empty(8, device="cuda"))
    # A pointer to a type the compiler knows but opsmith does not map to a dtype must be declared.
    src3 = "struct Px { float v; };\ntemplate <typename T> __global__ void k(const T* x, const Px* w, long long n, T* y) {}"
    with pytest.raises(ok.SpecError, match=r"the element type of 'w' is unknown"):
        ok.cuda_kernel_op(f"{NS}::noslot", ok.KernelSpec(
            kernel_source=src3, kernel_name="k<{T_x}>", inputs=[ok.InputDecl("x"), ok.InputDecl("w")],
            outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", "int64")],
            geometry=ok.Elementwise()))  # fmt: skip


def test_declared_shape_is_checked_in_fake_tracing():
    from opsmith.ops.rmsnorm import rmsnorm_ops

    fwd, _ = rmsnorm_ops("cuda")
    with FakeTensorMode():
        x = torch.empty(4, 64, device="cuda")
        assert fwd(x, torch.empty(64, device="cuda"), 1e-6).shape == (4, 64)
        with pytest.raises(
            ok.InputError, match=r"argument 'weight': expected shape \(C,\) where C = 64 from 'x', got shape \(63,\)"
        ):
            fwd(x, torch.empty(63, device="cuda"), 1e-6)
        with pytest.raises(
            ok.InputError, match=r"argument 'weight': expected 1 dims \(declared shape \(C,\)\), got 2 dims"
        ):
            fwd(x, torch.empty(1, 64, device="cuda"), 1e-6)


@pytest.mark.parametrize("impl", ["cuda", "triton", "cute"])
def test_compile_builds_forward_and_backward_graphs_with_the_kernels(impl):
    """AOTAutograd traces both directions on fake tensors: the forward graph holds the forward kernel, the
    backward graph the backward kernel; no graph break. (Fake *CPU* tensors: a CPU-only torch build aborts
    when autograd meets a CUDA device, even a fake one; the fake implementations do not look at the device.)"""
    if impl in ("triton", "cute"):
        pytest.importorskip("triton" if impl == "triton" else "cutlass")
    from opsmith.ops.rmsnorm import RMSNorm

    backend, graphs = _aot_capture()

    with FakeTensorMode():
        norm = RMSNorm(64, eps=1e-6, impl=impl, device="cpu")
        x = torch.empty(4, 8, 64, device="cpu", requires_grad=True)
        fn = torch.compile(lambda t: norm(t) * 2, backend=backend,
                           fullgraph=True)  # fmt: skip
        y = fn(x)
        y.sum().backward()
        assert x.grad.shape == x.shape and norm.weight.grad.shape == (64,)

    def text(gms):
        return " ".join(str(n.target) + str(n.args) for gm in gms for n in gm.graph.nodes)

    assert len(graphs["fw"]) == 1 and len(graphs["bw"]) == 1
    if impl in ("cuda", "cute"):
        assert f"opsmith.rmsnorm_{impl}.default" in text(graphs["fw"])
        assert f"rmsnorm_{impl}_backward" in text(graphs["bw"]) and f"rmsnorm_{impl}_dweight" in text(graphs["bw"])
    else:
        # Triton ops decompose into their kernels, which Inductor can see (the float eps through an fp32 entry,
        # opsmith/inductor/floats.py): no op left whole in either graph
        assert "opsmith.rmsnorm_triton" not in text(graphs["fw"]) + text(graphs["bw"]), text(graphs["fw"])
        assert "triton_kernel_wrapper" in text(graphs["fw"]) and "triton_kernel_wrapper" in text(graphs["bw"])


@pytest.mark.slow
def test_interpreter_rmsnorm_and_autograd_rules():
    """Triton's interpreter on CPU: forward and backward vs the reference, gradcheck in float64, the
    missing-backward and double-backward errors (a fresh process: the interpreter must be on before
    triton.language is imported)."""
    pytest.importorskip("triton")
    script = Path(__file__).with_name("rmsnorm_interpreter_check.py")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=pythonpath(Path(__file__).parents[1]))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    for line in ("gradcheck float64: passed", "missing backward: raises", "double backward: refused"):
        assert line in r.stdout


def test_rmsnorm_cuda_ops_read_their_parameter_types_from_the_source():
    """eps is a double in both kernels: were the signature not read, it would be packed as a 32-bit float
    and the kernel would see ~0 (a gradcheck on the GPU caught exactly that)."""
    from opsmith.ops.rmsnorm import rmsnorm_ops

    fwd, bwd = rmsnorm_ops("cuda")
    assert [a.ctype for a in fwd.record.inputs if a.kind == "scalar"] == ["f64"]
    assert [a.ctype for a in bwd.record.inputs if a.kind == "scalar"] == ["f64"]
    assert [e.ctype for e in bwd.record.extras] == ["i64", "i64", "i64"]


def test_a_macro_defined_kernel_gets_its_types_from_the_compiler():
    """The text cannot say a macro-made kernel's parameters, the compiler can: double and long long are packed
    at their width (before, a warning said they would be assumed 32-bit)."""
    src = '#define KERNEL(name) extern "C" __global__ void name(const float* x, double a, long long n, float* y)\nKERNEL(k) {}'
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op = ok.cuda_kernel_op(f"{NS}::macro", ok.KernelSpec(
            kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x"), ok.ScalarInput("a", float)],
            outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    assert op.record.param_ctypes() == ["ptr", "f64", "i64", "ptr"]
    assert op.record.tensor_inputs[0].dtype == "float32"


def test_rmsnorm_tunes_per_row_length_and_row_count():
    """A decision tuned on 64 rows must not serve 32,768 (the best CUDA launch differed: 134 vs 159 us)."""
    from opsmith.ops.rmsnorm import rmsnorm_ops

    fwd, bwd = rmsnorm_ops("cuda")
    for op in (fwd, bwd):
        assert [list(k) for k in op.record.tune_key][-2:] == [["dim", "i0", -1, "pow2"], ["numel", "i0", "pow2"]] or \
            [list(k) for k in op.record.tune_key][-2:] == [["dim", "i1", -1, "pow2"], ["numel", "i1", "pow2"]]  # fmt: skip


def test_rmsnorm_partial_rows_give_every_cuda_backward_config_its_blocks():
    """The CUDA backward's grid is MINB blocks per SM within the partial's rows: a config built for rows it
    holds in registers must get all its blocks there (else it runs starved and the tuner never sees it at
    its best), and shorter rows get at least as many programs per SM as longer ones."""
    from opsmith.ops.rmsnorm import _partials_per_sm, rmsnorm_ops

    _, bwd = rmsnorm_ops("cuda")
    for cfg in bwd.record.configs:
        p = cfg["params"]
        fits = p["THREADS"] * p["MAXV"] * 8  # bf16 elements in 16-byte vectors, all in registers
        for n in (fits // 4, fits // 2, fits):
            assert _partials_per_sm(n, "cuda") >= p["MINB"], (p, n)
    for flavor in ("triton", "cuda"):
        per_sm = [_partials_per_sm(n, flavor) for n in (1, 64, 1000, 1024, 2048, 4096, 8192, 65536)]
        assert per_sm == sorted(per_sm, reverse=True) and min(per_sm) >= 1 and max(per_sm) <= 8


def test_rmsnorm_cluster_backward_launches_whole_clusters_one_per_partial_row():
    """Rows past 16,384 elements take the CUDA cluster backward: every config launches whole clusters, at most
    one per partial row, SHORT clusters fewer than the SMs have blocks for (a cluster must fit one GPC; the
    tuner times each SHORT and so finds what the device holds), and the partial rows never cap a config's
    clusters where rows allow, so the tuner sees every count it was given. Shorter rows keep one partial row
    per persistent block."""
    from opsmith.declare.expr import evaluate, parse_size
    from opsmith.ops.rmsnorm import _partial_rows, rmsnorm_ops

    _, bwd = rmsnorm_ops("cuda")
    prows = parse_size(_partial_rows("cuda"), {"x": "i0"})
    shorts: dict[tuple, set] = {}
    for rows, n in ((2048, 65536), (8, 20000), (3, 131072), (100000, 16384), (4096, 4096), (1, 65536)):
        p = evaluate(prows, {"i0": torch.empty(rows, n, device="meta")})
        per_sm = max(2, min(8, 8192 // n))
        assert p == (min(rows, 132 * 2 // 8) if n > 16384 else min(rows, 132 * per_sm)), (rows, n, p)
        partial = torch.empty(p, n, device="meta")
        for cfg, plan in zip(bwd.record.configs, bwd.record.launches, strict=True):
            c, minb, short = (cfg["params"][k] for k in ("CLUSTER", "MINB", "SHORT"))
            grid = evaluate(plan.grid[0], {"i0": torch.empty(rows, n, device="meta"), "i3": partial})
            assert grid % c == 0 and 1 <= grid // c <= p, (cfg, rows, n, grid)
            assert grid // c == max(1, min(p, 132 * minb // c - short)), (cfg, rows, n, grid)
            if c >= 4:
                shorts.setdefault((c, minb), set()).add(short)
                assert short >= 1, cfg  # a GPC layout strands SMs for clusters of 4 and 8
                if p == 132 * 2 // 8 and n > 16384:  # rows enough for every cluster
                    assert grid // c == 132 * minb // c - short, (cfg, rows, n, grid, p)
            else:
                assert short == 0, cfg
    assert len(shorts) == 3 and max(len(s) for s in shorts.values()) >= 2, shorts


def test_an_opsmith_op_as_the_backward():
    """Backward(fn=<opsmith op>): y = 2x differentiates through another kernel op (dx = 2 * dy). AOTAutograd
    puts the forward op in the forward graph and the backward op in the backward graph."""
    src = 'extern "C" __global__ void twice(const float* x, int n, float* y) {}'

    def spec():
        return ok.KernelSpec(kernel_source=src, kernel_name="twice", inputs=[ok.InputDecl("x")],
                             outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                             geometry=ok.Elementwise())  # fmt: skip

    bwd = ok.cuda_kernel_op(f"{NS}::twice_bwd", spec())
    fwd = ok.cuda_kernel_op(f"{NS}::twice", spec(), backward=ok.Backward(bwd, args=("grad_y",), grads=("x",)))
    backend, graphs = _aot_capture()

    with FakeTensorMode():
        x = torch.empty(16, requires_grad=True)
        y = torch.compile(fwd, backend=backend, fullgraph=True)(x)
        y.sum().backward()
        assert x.grad.shape == (16,)
    fw = [str(n.target) for gm in graphs["fw"] for n in gm.graph.nodes]
    bw = [str(n.target) for gm in graphs["bw"] for n in gm.graph.nodes]
    assert f"{NS}.twice.default" in fw and f"{NS}.twice_bwd.default" in bw


def test_backward_returning_the_wrong_number_of_gradients_is_an_error():
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    src = 'extern "C" __global__ void thrice(const float* x, int n, float* y) {}'
    op = ok.cuda_kernel_op(f"{NS}::thrice", ok.KernelSpec(
        kernel_source=src, kernel_name="thrice", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()),
        backward=ok.Backward(lambda g: (g, g), args=("grad_y",), grads=("x",)))  # fmt: skip
    with FakeTensorMode():
        x = torch.empty(4, requires_grad=True)
        with pytest.raises(ok.DifferentiationError, match="returned 2 gradients"):
            op(x).sum().backward()  # eager autograd on fake tensors
        # under torch.compile the backward is traced at compile time: the same error, wrapped by Dynamo
        with pytest.raises(Exception, match="returned 2 gradients"):
            torch.compile(op, backend=aot_autograd(fw_compiler=make_boxed_func, bw_compiler=make_boxed_func),
                          fullgraph=True)(x).sum().backward()  # fmt: skip


def test_dtype_generic_cuda_kernel_compiles_one_instantiation_per_dtype():
    from opsmith.ops.rmsnorm import rmsnorm_ops

    fwd, _ = rmsnorm_ops("cuda")
    v = fwd.variants
    assert v.spec_layout == [("dtype", 0), ("dtype", 1)]
    bins = {dt: v.kernel(0, (dt, dt)).binary_for("sm_90") for dt in (torch.float32, torch.bfloat16, torch.float64)}
    assert len({b.data for b in bins.values()}) == 3 and len({b.symbol for b in bins.values()}) == 3
    assert all(b.data[:4] == b"\x7fELF" for b in bins.values())


def test_cute_impl_without_cute_dsl_names_the_install():
    """impl="cute" where CuTe DSL is not installed: the module's constructor says what to install."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys; sys.modules['cutlass'] = None\n"
            "import opsmith as ok\n"
            "from opsmith.ops.rmsnorm import RMSNorm\n"
            "try:\n    RMSNorm(64, impl='cute')\nexcept ok.ToolchainError as e:\n    print('refused:', e)\n")  # fmt: skip
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root)
    assert r.returncode == 0 and "refused:" in r.stdout and "pip install 'opsmith[cute]'" in r.stdout, r.stderr[-2000:]


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_none_for_a_required_tensor_is_the_ops_input_error_on_every_entry(backward, grad):
    """torch's dispatcher passes None for a ``Tensor`` argument: the Autograd-key entry (with or without a
    backward) and the kernel refuse it with the op's InputError (it was AttributeError: 'NoneType' object has no
    attribute 'requires_grad'), eager and fake, whether another input requires grad or not."""
    src = 'extern "C" __global__ void k(const float* x, const float* w, int n, float* y) {}'
    name = f"{NS}::none_req_{int(backward)}{int(grad)}"
    bw = ok.Backward(lambda gy, w: (gy * w,), args=["grad_y", "w"], grads=["x"]) if backward else None
    op = ok.cuda_kernel_op(name, ok.KernelSpec(kernel_source=src, kernel_name="k",
                           inputs=[ok.InputDecl("x"), ok.InputDecl("w")], outputs=[ok.OutputDecl("y", ok.SameAs("w"))],
                           extras=[ok.Numel("w")], geometry=ok.Elementwise()), backward=bw)  # fmt: skip
    want = (rf"{name}: argument 'x': expected a tensor, got None\. Fix: pass a tensor as x; only inputs declared "
            r"optional=True take None\.")  # fmt: skip
    w = torch.randn(8, requires_grad=grad)
    with pytest.raises(ok.InputError, match=want):
        op(None, w)
    if backward and grad:
        return  # torch's autograd Function (register_autograd's) aborts the process under FakeTensorMode here
    with FakeTensorMode(), pytest.raises(ok.InputError, match=want):
        op(None, torch.empty(8, device="cuda", requires_grad=grad))
