"""Triton ops on CPU: registration and its errors, cubin builds for sm_90 per specialization, fake-tensor
tracing (Inductor's graph holds the kernel; export keeps the op), and numerics in Triton's interpreter."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import pythonpath
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from examples.catalog.tuned import register_tuned  # noqa: E402

NS = "t_tcpu"


@pytest.fixture(scope="module")
def ex():
    return register_tuned(NS)


@triton.jit
def _three(x_ptr, n, y_ptr, BLOCK: tl.constexpr):
    pass


def test_param_count_and_constexpr_errors():
    decl = {"inputs": [ok.InputDecl("x")], "outputs": [ok.OutputDecl("y", ok.SameAs("x"))],
            "geometry": ok.Elementwise(block=("BLOCK",))}  # fmt: skip
    with pytest.raises(ok.SpecError, match=r"the kernel takes 3 parameters \(x_ptr, n, y_ptr\)"):
        ok.triton_op(f"{NS}::bad_count", _three, **decl, autotune=ok.Autotune([ok.Config({"BLOCK": 64})]))
    with pytest.raises(ok.SpecError, match="constexpr 'BLOCK' has no value"):
        ok.triton_op(f"{NS}::no_block", _three, **{**decl, "geometry": ok.Elementwise()}, extras=[ok.Numel("x")])
    with pytest.raises(ok.SpecError, match="not constexpr parameters"):
        ok.triton_op(f"{NS}::unknown", _three, **decl, extras=[ok.Numel("x")],
                     autotune=ok.Autotune([ok.Config({"BLOCK": 64, "NOPE": 1})]))  # fmt: skip
    with pytest.raises(ok.SpecError, match=r"not a @triton\.jit"):
        ok.triton_op(f"{NS}::plain", lambda x: x, **decl)
    with pytest.raises(ok.SpecError, match="num_warps"):
        ok.triton_op(f"{NS}::warps", _three, **decl, extras=[ok.Numel("x")],
                     autotune=ok.Autotune([ok.Config({"BLOCK": 64}, num_warps=3)]))  # fmt: skip


def test_schema_and_specialization_layout(ex):
    assert ex["relu_tt"].op.schema == f"{NS}::relu_tt(Tensor x) -> Tensor"
    assert ex["axpy_tt"].op.schema == f"{NS}::axpy_tt(Tensor(a!) x, Tensor y, float alpha) -> ()"
    # x's dtype, x aligned, n divisible by 16 (y is allocated by opsmith: always aligned)
    assert ex["relu_tt"].op.variants.spec_layout == [("dtype", 0), ("align", 0), ("int", 1)]


@triton.jit
def _mid_constexpr(x_ptr, BLOCK: tl.constexpr, n, y_ptr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_c_launcher_arguments_follow_the_kernel_parameter_order(caplog):
    """Triton's C launcher takes every parameter in declaration order (constexprs where declared, as None):
    the signature, the slots and the generated call agree; without a CUDA driver there is no launcher and
    the op keeps the portable launch."""
    op = ok.triton_op(f"{NS}::mid_constexpr", _mid_constexpr, inputs=[ok.InputDecl("x")],
                      outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                      geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": 128})]))  # fmt: skip
    src = op.variants.sources[0]
    signature, _ = src._types((torch.float16, True, True))
    assert list(signature.items()) == [("x_ptr", "*fp16"), ("BLOCK", "constexpr"), ("n", "i32"), ("y_ptr", "*fp16")]
    assert src.launcher_slots() == [0, None, 1, 2]
    assert "_tl(_g0, _g1, _g2, _raw(_dev), _h, False, False, None, None, _md, None, None, None, _p0, None, _n0, _p2)" \
        in op.impl_source  # fmt: skip
    assert "_kd.launch(_dev, _g0, _g1, _g2, *_kd.block, _kd.shared_mem, _p0, _n0, _p2)" in op.impl_source
    if not torch.cuda.is_available():
        with caplog.at_level("INFO", logger="opsmith.triton"):
            assert src.c_launcher((torch.float16, True, True)) is None
        assert "launching with cuda-bindings" in caplog.text


def test_each_specialization_builds_its_own_cubin(ex):
    v = ex["relu_tt"].op.variants
    a = v.kernel(0, (torch.float32, True, True)).binary_for("sm_90")
    b = v.kernel(0, (torch.bfloat16, True, True)).binary_for("sm_90")
    c = v.kernel(0, (torch.float32, False, False)).binary_for("sm_90")
    assert a.fmt == "cubin" and a.data[:4] == b"\x7fELF" and a.block == (128, 1, 1)
    assert len({a.data, b.data, c.data}) == 3
    k = v.kernel(0, (torch.float32, True, True))
    assert v.kernel(0, (torch.float32, True, True)) is k  # built once
    assert len(k._params.ptrs) == 3 + a.trailing_params  # Triton's scratch pointers stay NULL


def test_binaries_come_from_opsmiths_verified_cache(ex, monkeypatch, tmp_path):
    """A second build of the same specialization skips triton.compile; a damaged entry is a miss."""
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    src = ex["relu_tt"].op.variants.sources[0]
    spec = (torch.float16, True, False)
    first = src.build("sm_90", spec)
    assert not first.from_cache
    calls = []
    monkeypatch.setattr(triton, "compile", lambda *a, **k: calls.append(1) or pytest.fail("compiled again"))
    again = src.build("sm_90", spec)
    assert again.from_cache and not calls
    assert (again.data, again.symbol, again.block, again.shared_mem, again.trailing_params) == (
        first.data, first.symbol, first.block, first.shared_mem, first.trailing_params)  # fmt: skip
    # Another arch or specialization is another entry.
    with pytest.raises(pytest.fail.Exception):
        src.build("sm_80", spec)
    (entry,) = (tmp_path / "kernels").glob("*.bin")
    entry.write_bytes(entry.read_bytes()[:-10])  # truncated: a miss, so Triton compiles again
    monkeypatch.undo()
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    rebuilt = src.build("sm_90", spec)
    assert not rebuilt.from_cache and rebuilt.data == first.data


def test_tuned_triton_configs_set_warps_and_constexprs(ex):
    op = ex["softmax_tt"].op
    warps = {op.variants.kernel(c, (torch.float32, True, True)).block[0] // 32
             for c in range(len(op.record.configs))}  # fmt: skip
    assert warps == {4, 8}
    assert [s.constexprs["BLOCK"] for s in op.variants.sources] == [256, 256, 1024, 1024, 4096, 4096]


def test_fake_shapes_and_guards(ex):
    with FakeTensorMode():
        x = torch.empty(7, 33, device="cuda", dtype=torch.bfloat16)
        assert ex["softmax_tt"].op(x).shape == (7, 33) and ex["softmax_tt"].op(x).dtype == torch.bfloat16
        y = torch.empty(3, device="cuda")
        assert ex["axpy_tt"].op(y, y.clone(), 2.0) is None


def test_compile_trace_shows_the_kernel_and_export_keeps_the_op(ex):
    from torch._functorch.aot_autograd import aot_function

    graphs = []

    def grab(gm, _inputs):
        graphs.append(gm)
        return gm

    f = aot_function(lambda x: ex["softmax_tt"].op(x).relu(), fw_compiler=grab)
    with FakeTensorMode():
        x = torch.empty(16, 300, device="cuda")
        with contextlib.suppress(RuntimeError):  # the captured graph is all we need; running it needs a GPU
            f(x)
    code = graphs[0].code
    assert "triton_kernel_wrapper_functional" in code and "'BLOCK': 1024" in code  # the declared default

    class M(torch.nn.Module):
        def forward(self, x):
            return ex["softmax_tt"].op(x)

    with FakeTensorMode(allow_non_fake_inputs=True):
        ep = torch.export.export(M(), (torch.empty(16, 300, device="cuda"),),
                                 dynamic_shapes={"x": {0: torch.export.Dim("rows")}})  # fmt: skip
    assert f"torch.ops.{NS}.softmax_tt.default" in ep.graph_module.code


def test_cpu_tensors_without_interpreter_get_the_device_error(ex):
    if triton.knobs.runtime.interpret:
        pytest.skip("TRITON_INTERPRET is set in this process")
    with pytest.raises(ok.InputError, match="a CUDA tensor"):
        ex["relu_tt"].op(torch.randn(4))


def test_interpreter_numerics():
    """Every Triton example against its PyTorch reference in Triton's interpreter (a fresh process: the
    interpreter must be on before triton.language is imported)."""
    script = Path(__file__).with_name("triton_interpreter_check.py")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=pythonpath(Path(__file__).parents[1]))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "checked" in r.stdout


def test_a_changed_jit_helper_is_a_changed_declaration_in_the_interpreter_too():
    """Triton's hash of a compiled kernel covers the jit functions it calls; interpreted, opsmith's digest read the
    kernel's own source only, so re-registering after a helper changed returned the old op (issue 49, item 5)."""
    from interpreted import run_interpreted

    assert "helper change seen" in run_interpreted("helper_interpreter_check.py")


def test_the_interpreters_numpy_incompatibility_is_a_launch_error_naming_the_fix():
    """Triton 3.6's interpreter with NumPy 2.4 fails a kernel that loops to a runtime bound: the op says which
    versions and what to install, instead of Triton's bare TypeError; any other interpreter error passes as is."""
    from triton.runtime.errors import InterpreterError

    from opsmith.flavors.triton_traced import _interpret

    def kernel(message):
        def launch(**kwargs):
            raise InterpreterError(message)

        return {(1,): launch}

    with pytest.raises(ok.LaunchError, match=r"ns::op: Triton .*'s interpreter cannot run this kernel with NumPy .*"
                                             r"Fix: pip install 'numpy<2.4'"):  # fmt: skip
        _interpret(kernel("TypeError('only 0-dimensional arrays can be converted to Python scalars')"), (1,), {},
                   "ns::op")  # fmt: skip
    with pytest.raises(InterpreterError, match="something else"):
        _interpret(kernel("something else"), (1,), {}, "ns::op")
