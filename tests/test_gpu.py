"""GPU suite: numerics, opcheck, compile/export, streams, CUDA graphs and every call-time error."""

import pytest
import torch
from conftest import assert_launches_on_current_stream

import opsmith as ok
from examples.catalog.basic import RELU, register_all

pytestmark = pytest.mark.gpu
NS = "t_gpu"


@pytest.fixture(scope="module")
def ex():
    return register_all(NS)


def _as_tuple(v):
    return v if isinstance(v, tuple) else (v,)


def _cases(ex):
    for name, e in ex.items():
        for dt in e.dtypes:
            yield name, e, dt


def test_numerics_against_pytorch(ex):
    """Fresh random inputs each time; outputs poisoned first by the allocator reuse pattern below."""
    torch.manual_seed(0)
    for name, e, dt in _cases(ex):
        for _ in range(2):
            for args in e.samples(torch.device("cuda"), dt):
                torch.empty(1 << 20, device="cuda").fill_(float("nan"))  # poison memory the outputs may reuse
                got, want = _as_tuple(e.op(*args)), _as_tuple(e.reference(*args))
                for g, w in zip(got, want, strict=True):
                    assert g.shape == w.shape and g.dtype == w.dtype, name
                    assert g.is_contiguous()
                    torch.testing.assert_close(g, w, **e.tol, msg=lambda m, n=name: f"{n}: {m}")


def test_opcheck_every_example(ex):
    for _name, e, dt in _cases(ex):
        for args in e.samples(torch.device("cuda"), dt):
            torch.library.opcheck(e.op.overload, args)


def test_half_and_bfloat16_against_fp32_reference(ex):
    for dt, name in ((torch.float16, "axpby_float16"), (torch.bfloat16, "axpby_bfloat16")):
        x, y = torch.randn(1 << 16, device="cuda").to(dt), torch.randn(1 << 16, device="cuda").to(dt)
        ref = 0.5 * x.float() - 2.0 * y.float()
        torch.testing.assert_close(ex[name].op(x, y, 0.5, -2.0).float(), ref, **({"rtol": 1.6e-2, "atol": 1e-2}
                                   if dt == torch.bfloat16 else {"rtol": 1e-3, "atol": 1e-3}))  # fmt: skip


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_fullgraph_inductor(ex, dynamic):
    def f(x, b):
        h = ex["relu"].op(ex["add_bias_2d"].op(x, b))
        mn, mx = ex["row_minmax"].op(h)
        return ex["softmax"].op(h) * (mx - mn) + ex["row_sum"].op(h).unsqueeze(-1)

    cf = torch.compile(f, fullgraph=True, dynamic=dynamic)
    for shape in ((4, 32, 48), (3, 17, 48), (2, 5, 48)):
        x, b = torch.randn(shape, device="cuda"), torch.randn(48, device="cuda")
        torch.testing.assert_close(cf(x, b), f(x, b), atol=1e-4, rtol=1e-4)
    explain = torch._dynamo.explain(f)(x, b)
    assert explain.graph_break_count == 0


def test_export_dynamic_and_run(ex):
    from torch.export import Dim

    class M(torch.nn.Module):
        def forward(self, x, y):
            return ex["relu"].op(ex["axpby_float32"].op(x, y, 2.0, -1.0))

    x, y = torch.randn(8, 64, device="cuda"), torch.randn(8, 64, device="cuda")
    d = {0: Dim("b"), 1: Dim("n")}
    ep = torch.export.export(M(), (x, y), dynamic_shapes={"x": d, "y": d})
    x2, y2 = torch.randn(3, 100, device="cuda"), torch.randn(3, 100, device="cuda")
    torch.testing.assert_close(ep.module()(x2, y2), torch.relu(2 * x2 - y2))


def test_launches_on_the_current_stream(ex):
    assert_launches_on_current_stream(ex["relu"].op, torch.randn(1 << 22, device="cuda"))


def test_cuda_graph_capture_and_replay(ex):
    x, b = torch.randn(16, 300, device="cuda"), torch.randn(300, device="cuda")
    f = lambda: ex["softmax"].op(ex["add_bias_2d"].op(ex["relu"].op(x), b))  # noqa: E731
    f()  # warm-up: modules load outside capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = f()
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        b.copy_(torch.randn_like(b))
        out.fill_(float("nan"))
        g.replay()
        torch.testing.assert_close(out, torch.softmax(torch.relu(x) + b, -1), atol=1e-6, rtol=1e-4)


def test_zero_size_launches_nothing(ex):
    for name in ("relu", "row_sum", "softmax", "repeat2", "scale_ptx"):
        e = ex[name]
        args = (torch.empty(0, 7, device="cuda"),) + ((1.5,) if name == "scale_ptx" else ())
        out = e.op(*args)
        assert out.numel() == 0 and out.shape == e.reference(*args).shape


def test_empty_input_with_non_empty_output_is_refused(ex):
    with pytest.raises(ok.InputError, match="non-empty"):
        ex["row_sum"].op(torch.empty(4, 0, device="cuda"))


def test_non_contiguous_is_made_contiguous_or_refused(ex):
    x = torch.randn(64, 48, device="cuda").t()
    torch.testing.assert_close(ex["relu"].op(x), torch.relu(x))
    strict = ok.cuda_kernel_op(f"{NS}::relu_strict", ok.KernelSpec(
        kernel_source=RELU, kernel_name="my_relu",
        inputs=[ok.InputDecl("x", contiguous="require")], outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))],
        extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    with pytest.raises(ok.InputError, match=r"relu_strict: argument 'x': expected a contiguous tensor"):
        strict(x)


def test_call_time_errors_name_op_argument_expected_and_got(ex):
    x = torch.randn(8, 8, device="cuda")
    with pytest.raises(ok.InputError, match=r"relu: argument 'x': expected dtype torch.float32, got torch.float16"):
        ex["relu"].op(x.half())
    with pytest.raises(
        ok.InputError, match=r"axpby_float32: argument 'y': expected a CUDA tensor, got a tensor on cpu"
    ):
        ex["axpby_float32"].op(x, x.cpu(), 1.0, 1.0)
    with pytest.raises(
        ok.InputError, match=r"add_bias_2d: argument 'bias': expected 1 dims \(declared shape \(C,\)\), got 2 dims"
    ):
        ex["add_bias_2d"].op(x, x)
    with pytest.raises(ok.InputError, match=r"add_bias_2d: argument 'x': expected at least 2 dims"):
        ex["add_bias_2d"].op(x[0], x[0])
    with pytest.raises(ok.InputError, match=r"row_sum: argument 'x': expected at least 1 dims"):
        ex["row_sum"].op(torch.tensor(1.0, device="cuda"))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_inputs_on_different_gpus_are_refused(ex):
    a, b = torch.randn(4, device="cuda:0"), torch.randn(4, device="cuda:1")
    with pytest.raises(ok.InputError, match="expected a tensor on cuda:0"):
        ex["axpby_float32"].op(a, b, 1.0, 1.0)


def test_int32_extra_overflow_is_refused_and_int64_works():
    src = r"""
    extern "C" __global__ void count(const signed char* x, int n, signed char* y) {}
    extern "C" __global__ void fill_last(const signed char* x, long long n, signed char* y) {
        long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = x[i] + 1;
    }"""
    decl = dict(inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))],
                geometry=ok.Elementwise(block=(1024,)))  # fmt: skip
    # Declared 64-bit indexing, but an `int n`: the extra's own range check refuses the call.
    narrow = ok.cuda_kernel_op(f"{NS}::count32", ok.KernelSpec(src, "count", extras=[ok.Numel("x")], **decl,
                                                                index_dtype="int64"))  # fmt: skip
    wide = ok.cuda_kernel_op(f"{NS}::fill64", ok.KernelSpec(src, "fill_last", extras=[ok.Numel("x")], **decl,
                                                             index_dtype="int64"))  # fmt: skip
    default = ok.cuda_kernel_op(f"{NS}::fill64_idx32", ok.KernelSpec(src, "fill_last", extras=[ok.Numel("x")], **decl))
    assert wide.record.extras[0].ctype == "i64"  # read from the kernel's `long long n`
    n = 2**31 + 5
    x = torch.randint(-100, 100, (n,), device="cuda", dtype=torch.int8)
    with pytest.raises(ok.InputError, match=r"count32: argument 'numel\(x\)'.*2147483653.*dtype='int64'"):
        narrow(x)
    with pytest.raises(ok.InputError, match=r"fill64_idx32: argument 'x': expected at most 2147483647 elements"):
        default(x)
    y = wide(x)
    assert torch.equal(y[-8:], x[-8:] + 1) and torch.equal(y[:8], x[:8] + 1)
    del x, y
    torch.cuda.empty_cache()


def test_launch_args_and_kernel_record_per_device(ex):
    rec = ex["relu"].op.record
    assert rec.binary_format == "cubin"
    major, minor = torch.cuda.get_device_capability()
    assert rec.arch == f"sm_{major}{minor}"
    ex["relu"].op(torch.randn(8, device="cuda:0"))  # loads it on cuda:0 whatever ran before
    assert 0 in ex["relu"].op.kernel._functions


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_ops_on_second_gpu_while_current_is_first_and_on_both_in_turn(ex):
    from examples.catalog.tuned import register_tuned

    tuned = register_tuned(NS + "_2gpu")
    ops = [(ex["relu"].op, torch.relu), (ex["softmax"].op, lambda x: torch.softmax(x, -1)),
           (tuned["softmax_tuned"].op, lambda x: torch.softmax(x, -1)), (tuned["relu_tt"].op, torch.relu),
           (tuned["softmax_tt"].op, lambda x: torch.softmax(x, -1))]  # fmt: skip
    assert torch.cuda.current_device() == 0
    for _ in range(2):  # cuda:1 first (current is cuda:0), then cuda:0, then again
        for dev in ("cuda:1", "cuda:0"):
            for op, ref in ops:
                x = torch.randn(33, 500, device=dev)
                y = op(x)
                assert y.device == x.device
                torch.testing.assert_close(y, ref(x), atol=1e-6, rtol=1e-4)
            assert torch.cuda.current_device() == 0
    assert {0, 1} <= set(ex["relu"].op.kernel._functions)  # one module per device
    with torch.cuda.device(1):  # current stream of cuda:1 is where the work goes
        x = torch.randn(1 << 20, device="cuda:1")
        tuned["relu_tt"].op(x)  # warm-up: this shape's specialization compiles outside the timed window
        assert_launches_on_current_stream(tuned["relu_tt"].op, x)


def test_calls_from_threads_that_never_touched_cuda(ex):
    """A fresh thread has no current CUDA context until it makes a runtime call; autograd's device thread
    running a backward whose allocations all come from the cache is such a thread. The launch must work
    there (opsmith makes the primary context current on the error path and launches again)."""
    import threading

    relu = ex["relu"].op
    x = torch.randn(4096, device="cuda")
    want = torch.relu(x)
    relu(x)  # loaded on the main thread first
    out: dict = {}

    def work():
        try:
            out["y"] = relu(x)
            torch.cuda.synchronize()
        except Exception as e:  # reported below
            out["error"] = e

    for _ in range(3):
        t = threading.Thread(target=work)
        t.start()
        t.join()
        assert "error" not in out, out.get("error")
        torch.testing.assert_close(out.pop("y"), want)
