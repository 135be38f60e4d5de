"""GPU suite for tuned and Triton ops: numerics, opcheck, Inductor visibility, export, CUDA graphs with a
cached choice, streams, in-place restore during tuning, the second-process cache hit, the PTX target."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import assert_launches_on_current_stream, pythonpath

import opsmith as ok
from examples.catalog.basic import RELU
from examples.catalog.tuned import register_tuned
from opsmith.torchlib.registration import registered_ops

pytestmark = pytest.mark.gpu
NS = "t_gput"


@pytest.fixture(scope="module")
def ex():
    return register_tuned(NS)


def _check(name, e, got, want):
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                    strict=True):  # fmt: skip
        assert g.shape == w.shape and g.dtype == w.dtype, name
        tol = e.tol if g.dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
        torch.testing.assert_close(g, w, **tol, msg=lambda m: f"{name}: {m}")


def test_numerics_all_dtypes(ex):
    torch.manual_seed(1)
    for name, e in ex.items():
        for dt in e.dtypes:
            for args in e.samples(torch.device("cuda"), dt):
                ref_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
                torch.empty(1 << 20, device="cuda").fill_(float("nan"))  # poison what outputs may reuse
                got, want = e.op(*args), e.reference(*ref_args)
                if got is None:  # in place
                    got, want = args[0], ref_args[0]
                _check(name, e, got, want)


def test_opcheck(ex):
    for _name, e in ex.items():
        for dt in e.dtypes:
            for args in e.samples(torch.device("cuda"), dt):
                torch.library.opcheck(e.op.overload, args)


def test_tuning_restores_in_place_inputs(ex):
    for name in ("axpy_inplace", "axpy_tt"):
        op = ex[name].op
        before = op.tuner.trial_runs
        x, y = torch.randn(123_457, device="cuda"), torch.randn(123_457, device="cuda")  # a new key: tunes now
        want = x + 0.25 * y
        op(x, y, 0.25)
        assert op.tuner.trial_runs > before, f"{name} should have tuned"
        torch.testing.assert_close(x, want, msg=lambda m, n=name: f"{n}: input added to more than once: {m}")


@pytest.mark.parametrize("dynamic", [False, True])
def test_inductor_sees_the_triton_kernel(ex, dynamic):
    from torch._inductor.utils import run_and_get_code

    def f(x):
        return ex["softmax_tt"].op(x * 2.0) + 1.0

    cf = torch.compile(f, fullgraph=True, dynamic=dynamic)
    codes = []
    for shape in ((32, 1000), (17, 1000), (8, 3000)):
        x = torch.randn(shape, device="cuda")
        out, code = run_and_get_code(cf, x)
        codes += code
        torch.testing.assert_close(out, torch.softmax(2 * x, -1) + 1, atol=1e-5, rtol=1e-4)
    assert any("softmax_kernel" in c for c in codes), "the Triton kernel should appear in Inductor's code"
    assert not any(f"{NS}.softmax_tt" in c for c in codes), "the op should be decomposed, not called opaquely"
    assert torch._dynamo.explain(f)(x).graph_break_count == 0


def test_cuda_cpp_tuned_op_under_compile_and_export(ex):
    from torch.export import Dim

    op = ex["softmax_tuned"].op
    cf = torch.compile(lambda x: op(x).sum(-1), fullgraph=True, dynamic=True)
    x = torch.randn(64, 777, device="cuda")
    torch.testing.assert_close(cf(x), torch.ones(64, device="cuda"))

    class M(torch.nn.Module):
        def forward(self, x):
            return ex["softmax_tt"].op(x) + op(x)

    ep = torch.export.export(M(), (x,), dynamic_shapes={"x": {0: Dim("rows"), 1: Dim("n")}})
    assert f"torch.ops.{NS}.softmax_tt.default" in ep.graph_module.code  # kept whole for AOT compilation
    x2 = torch.randn(5, 2049, device="cuda")
    torch.testing.assert_close(ep.module()(x2), 2 * torch.softmax(x2, -1), atol=1e-5, rtol=1e-4)


def test_cuda_graph_with_cached_choice_and_unseen_key(ex):
    """Under capture the cached decision is launched (planted as a non-default config, so the test does not
    depend on what tuning happens to pick), and an unseen key launches the default without tuning."""
    for name in ("softmax_tuned", "softmax_tt"):
        op = ex[name].op
        x = torch.randn(48, 640, device="cuda")
        op.tuner.decisions.clear()
        op(x)  # tunes this key outside capture
        (key,) = op.tuner.decisions
        forced = (op.record.tune_default + 1) % len(op.record.configs)
        op.tuner.decisions[key] = forced
        unseen = torch.randn(4, 9000, device="cuda")
        op(torch.randn(4, 9000, device="cuda")[:, :10])  # other key; loads every config's module (warm-up)
        torch.cuda.synchronize()
        runs = op.tuner.trial_runs
        op.variants.fast.clear()  # what the capture launches fills it again: (config, specialization)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = op(x)
            out2 = op(unseen)  # no decision for this key: the default config, no tuning in capture
        assert op.tuner.trial_runs == runs, f"{name} tuned during capture"
        assert (unseen.dtype, 16384) not in op.tuner.decisions  # the default was used, not remembered
        assert {k[0] for k in op.variants.fast} == {forced, op.record.tune_default}, (name, list(op.variants.fast))
        for _ in range(2):
            x.copy_(torch.randn_like(x))
            unseen.copy_(torch.randn_like(unseen))
            out.fill_(float("nan"))
            out2.fill_(float("nan"))
            g.replay()
            torch.testing.assert_close(out, torch.softmax(x, -1), atol=1e-6, rtol=1e-4)
            torch.testing.assert_close(out2, torch.softmax(unseen, -1), atol=1e-6, rtol=1e-4)


def test_triton_op_on_a_busy_side_stream(ex):
    x = torch.randn(1 << 22, device="cuda")
    ex["relu_tt"].op(x)
    assert_launches_on_current_stream(ex["relu_tt"].op, x)


def test_triton_ops_launch_through_tritons_c_launcher(ex):
    """Every specialization used so far got Triton's C launcher (the fast path), and the op still works
    where it cannot be had (the cuda-bindings launch every other flavor uses)."""
    op = ex["relu_tt"].op
    x = torch.randn(3000, device="cuda")
    torch.testing.assert_close(op(x), torch.relu(x))
    assert op.variants.fast and all(callable(e[1]) for e in op.variants.fast.values())
    sm = registered_ops()[f"{NS}::softmax_tt"]
    y = torch.randn(5, 300, device="cuda")
    sm(y)
    saved = dict(sm.variants.fast)
    try:  # the same entries without a launcher: the portable path
        for k, e in saved.items():
            sm.variants.fast[k] = (e[0], None, e[2], e[3])
        torch.testing.assert_close(sm(y), torch.softmax(y, -1), atol=1e-5, rtol=1e-4)
    finally:
        sm.variants.fast.update(saved)


def test_a_grid_cuda_cannot_launch_is_refused_before_the_launch():
    from examples.catalog.kernels.triton_kernels import relu_kernel

    # gridDim.y above 65,535: the driver would refuse it; a grid past 2^32 along x would wrap. Both refused first.
    op = ok.triton_op(f"{NS}::relu_bad_grid", relu_kernel, inputs=[ok.InputDecl("x")],
                      outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                      geometry=ok.Custom(lambda i, o: (1, 70_000)))  # fmt: skip
    with pytest.raises(ok.InputError, match=rf"{NS}::relu_bad_grid: argument 'x': expected a launch of 1 to 65535 "
                       r"blocks along y \(the Custom geometry's grid\), got 70000"):  # fmt: skip
        op(torch.randn(64, device="cuda"))
    torch.cuda.synchronize()


def test_unaligned_input_gets_its_own_specialization(ex):
    base = torch.randn(4097, device="cuda")
    x = base[1:]  # contiguous, 4-byte offset: not 16-byte aligned
    assert x.data_ptr() % 16
    torch.testing.assert_close(ex["relu_tt"].op(x), torch.relu(x))
    specs = {k[1][1] for k in ex["relu_tt"].op.variants.kernels}
    assert False in specs and True in specs


def test_second_process_makes_no_tuning_runs(ex, tmp_path):
    x = torch.randn(96, 1500, device="cuda")
    ex["softmax_tuned"].op(x)
    ex["softmax_tt"].op(x)
    script = tmp_path / "second.py"
    script.write_text(
        "import json, time, torch\n"
        "t0 = time.perf_counter()\n"
        "from examples.catalog.tuned import register_tuned\n"
        f"ex = register_tuned({NS!r})\n"
        "x = torch.randn(96, 1500, device='cuda')\n"
        "out = {}\n"
        "for n in ('softmax_tuned', 'softmax_tt'):\n"
        "    y = ex[n].op(x); torch.cuda.synchronize()\n"
        "    out[n] = ex[n].op.tuner.trial_runs\n"
        "    torch.testing.assert_close(y, torch.softmax(x, -1), atol=1e-6, rtol=1e-4)\n"
        "print(json.dumps(out))\n"
    )
    env = dict(os.environ, PYTHONPATH=pythonpath(Path(__file__).parents[1]))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"softmax_tuned": 0, "softmax_tt": 0}


def test_ptx_target_is_jit_compiled_by_the_driver():
    op = ok.cuda_kernel_op(f"{NS}::relu_ptx_target", ok.KernelSpec(
        kernel_source=RELU, kernel_name="my_relu", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise(),
        target="ptx"))  # fmt: skip
    assert op.record.binary_format == "ptx" and b".entry my_relu" in op.record.binary
    x = torch.randn(5000, device="cuda")
    torch.testing.assert_close(op(x), torch.relu(x))
