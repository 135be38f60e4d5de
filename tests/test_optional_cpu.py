"""Optional tensor inputs (issue 40, item 1) on CPU: ``InputDecl(optional=True)`` is ``Tensor?`` in the schema;
``None`` reaches a CUDA C++ kernel as a null pointer and a Triton kernel as a compiled-in None (its own
specialization, the parameter left out of the arguments); ``Present`` tells the kernel which; an absent
tensor's checks are skipped and its sizes read 0. The Python and native dry runs (and the fake, on meta tensors)
agree call for call, refusals included; DTensor's rule gives an absent input no placement; JAX passes a
placeholder its handler reads as None; the interpreter runs the cross-entropy kernels against PyTorch."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from interpreted import run_interpreted
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok
from examples.catalog.optional import register_optional

NS = "t_optcpu"
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from differential import Registered, both_dry_runs, tensor_call  # noqa: E402

NONE = {"t": "none"}


@pytest.fixture(scope="module")
def ops():
    return register_optional(NS)


def _scalar(v):
    return {"t": "scalar", "v": v}


SRC = 'extern "C" __global__ void k(const float* x, const float* w, float* y, int n, int has_w) {}'


def _reg(name, inputs, outputs=None, extras=None):
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
        kernel_source=SRC, kernel_name="k", inputs=inputs,
        outputs=outputs or [ok.OutputDecl("y", ok.SameAs("x"))],
        extras=extras or [ok.Numel("x", name="n"), ok.Present("w", name="has_w")], geometry=ok.Elementwise()))  # fmt: skip


def test_the_schema_says_tensor_optional_and_declaration_mistakes_name_the_fix():
    op = _reg("plain", [ok.InputDecl("x", shape=("N",)), ok.InputDecl("w", shape=("N",), optional=True)])
    assert op.record.schema == "(Tensor x, Tensor? w) -> Tensor"
    refusals = {
        "first": ([ok.InputDecl("w", optional=True), ok.InputDecl("x")], None, None,
                  r"inputs\[0\].optional.*the first tensor input.*cannot be None"),
        "only_named": ([ok.InputDecl("x"), ok.InputDecl("w", shape=("M",), optional=True)], None, None,
                       r"'M' is named only by optional inputs.*name 'M' in a required input's shape"),
        "same_as": ([ok.InputDecl("x"), ok.InputDecl("w", optional=True)], [ok.OutputDecl("y", ok.SameAs("w"))], None,
                    r"outputs\[0\].shape.*optional input 'w'"),
        "dtype_of": ([ok.InputDecl("x", dtype="w"), ok.InputDecl("w", torch.float32, optional=True)], None, None,
                     r"'w' is optional: a call may pass None, which has no dtype"),
        "present_required": ([ok.InputDecl("x"), ok.InputDecl("w")], None,
                             [ok.Numel("x", name="n"), ok.Present("w", name="has_w")], r"'w' is not an optional input"),
        "bad_flag": ([ok.InputDecl("x"), ok.InputDecl("w", optional="yes")], None, None, r"optional.*not a bool"),
    }  # fmt: skip
    for name, (inputs, outputs, extras, match) in refusals.items():
        with pytest.raises(ok.SpecError, match=match):
            _reg(name, inputs, outputs, extras)


def test_a_backward_receives_an_optional_input_as_it_was_passed():
    """A backward over an optional input (it was refused, "register one op per combination"; issue 49): the
    backward gets the input, None when the call passed None (tests/test_optional_backward_cpu.py walks every
    backward path)."""
    fwd = [ok.InputDecl("x"), ok.InputDecl("w", optional=True)]
    op = ok.cuda_kernel_op(f"{NS}::with_bwd", ok.KernelSpec(
        kernel_source=SRC, kernel_name="k", inputs=fwd, outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x", name="n"), ok.Present("w", name="has_w")], geometry=ok.Elementwise()),
        reference=lambda x, w: x * (w if w is not None else 1),
        backward=ok.Backward(lambda g, w: g * (w if w is not None else 1), args=("grad_y", "w"), grads=("x",)))  # fmt: skip
    x, w = torch.randn(5, requires_grad=True), torch.randn(5)
    op(x, w).sum().backward()
    torch.testing.assert_close(x.grad, w)
    x.grad = None
    op(x, None).sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(5))


@pytest.mark.slow
def test_cuda_none_is_a_null_pointer_the_same_on_the_python_path_and_in_the_native_library(ops):
    """scale_rows: w and b each given, absent, given as a view to copy, or wrong; both paths (and the fake on meta
    tensors) make the same launches and the same refusals with the same words."""
    x, v = tensor_call((3, 8)), tensor_call((8,))
    calls = [[x, v, v], [x, NONE, v], [x, v, NONE], [x, NONE, NONE], [tensor_call((2, 3, 8)), tensor_call((8,), view="expand"), NONE],
             [x, tensor_call((9,)), NONE], [x, NONE, tensor_call((8,), "float64")], [tensor_call((0, 8)), NONE, NONE],
             [x, NONE, tensor_call((0,))]]  # fmt: skip
    gens = [Registered(ops["scale_rows"], calls)]
    py = both_dry_runs(gens)
    assert gens[0].fake_bad == []
    name = ops["scale_rows"].record.op_name
    args = [py[f"{name}#{k}"]["launches"][0]["args"] for k in range(5)]
    # (x, w, b, y, n, n_cols, has_w, has_b, w_stride): None a null pointer, its flag 0 and its stride 0; a
    # broadcast weight read at its stride 0, not copied
    assert [a[1:3] + [f[:2] for f in a[6:]] for a in args] == [
        ["in1", "in2", "01", "01", "01"], ["null", "in2", "00", "01", "00"], ["in1", "null", "01", "00", "01"],
        ["null", "null", "00", "00", "00"], ["in1", "null", "01", "00", "00"]], args  # fmt: skip
    errors = [py[f"{name}#{k}"].get("error", "") for k in range(5, 9)]
    assert "argument 'w': expected shape (N,) where N = 8 from 'x', got shape (9,)" in errors[0]
    assert "argument 'b': expected dtype torch.float32, got torch.float64" in errors[1]
    assert py[f"{name}#7"]["ok"] and py[f"{name}#7"]["launches"] == []  # nothing to write
    assert "argument 'b'" in errors[3] and "expected shape (N,)" in errors[3]


def test_fake_tracing_takes_none_and_checks_what_is_given(ops):
    op = ops["scale_rows"]
    with FakeTensorMode():
        x = torch.empty(4, 16)
        assert op(x, None, None).shape == (4, 16) and op(x, torch.empty(16), None).shape == (4, 16)
        with pytest.raises(ok.InputError, match=r"argument 'b': expected shape \(N,\)"):
            op(x, None, torch.empty(15))


@pytest.mark.slow
def test_triton_compiles_none_in_as_its_own_specialization_on_both_paths(ops):
    """ce_rows: weight and z_loss each None or given: four kernels, None parameters left out of the arguments;
    the Python path and the native library choose the same kernel and pack the same bytes."""
    op = ops["ce_rows"]
    assert op.record.schema == ("(Tensor(a!) X, Tensor Y, Tensor? weight, Tensor(b!)? z_loss, float n_non_ignore, "
                                "SymInt ignore_index) -> Tensor")  # fmt: skip
    assert [k for k, _ in op.variants.spec_layout].count("none") == 2
    X, Y, W, Z = tensor_call((6, 40)), tensor_call((6,), "int64"), tensor_call((40,)), tensor_call((6,))
    tail = [_scalar(5.0), _scalar(-100)]
    calls = [[X, Y, W, Z, *tail], [X, Y, NONE, Z, *tail], [X, Y, W, NONE, *tail], [X, Y, NONE, NONE, *tail],
             [X, Y, tensor_call((41,)), NONE, *tail], [X, Y, NONE, tensor_call((6,), "float64"), *tail]]  # fmt: skip
    py = both_dry_runs([Registered(op, calls)])
    name = op.record.op_name
    launches = [py[f"{name}#{k}"]["launches"][0] for k in range(4)]
    assert len({x["image"] for x in launches}) == 4
    assert [len(x["args"]) for x in launches] == [9, 8, 8, 7]  # each None left out
    assert "null" not in str(launches)
    assert not py[f"{name}#4"]["ok"] and not py[f"{name}#5"]["ok"]


def test_the_interpreter_runs_the_cross_entropy_kernels_against_pytorch():
    stdout = run_interpreted("optional_interpreter_check.py")
    assert "checked 8 cases" in stdout or "checked 10 cases" in stdout, stdout


@pytest.mark.slow
def test_ligers_own_kernel_with_its_optional_buffers_on_both_paths():
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
    from examples.catalog.optional import liger_cross_entropy

    op = liger_cross_entropy(NS)
    X, Y, W, Z = tensor_call((6, 40)), tensor_call((6,), "int64"), tensor_call((40,)), tensor_call((6,))
    acc, pred = tensor_call((6,)), tensor_call((6,), "int64")
    calls = [[X, Y, NONE, NONE, NONE, NONE, *map(_scalar, (5, 5.0, 0.0, -100, 0.0, 0.0))],
             [X, Y, W, Z, NONE, NONE, *map(_scalar, (5, 4.5, 30.0, -100, 1e-4, 0.0))],
             [X, Y, NONE, Z, acc, pred, *map(_scalar, (5, 5.0, 0.0, -100, 0.0, 0.1))]]  # fmt: skip
    py = both_dry_runs([Registered(op, calls)])
    assert all(r["ok"] for r in py.values()), py


def test_dtensor_gives_an_absent_input_no_placement(ops):
    from types import SimpleNamespace

    from opsmith.distributed.sharding import strategies

    plan = ops["scale_rows"].sharding_plan
    x, w = SimpleNamespace(shape=torch.Size([4, 8])), SimpleNamespace(shape=torch.Size([8]))
    given = strategies(plan, x, w, None)
    assert all(ins[2] is None and ins[1] is not None for _, ins in given)
    assert any(outs[0].is_shard() for outs, _ in given)
    absent = strategies(plan, x, None, None)
    assert all(ins[1] is None and ins[2] is None for _, ins in absent) and len(absent) == len(given)


@pytest.mark.slow
def test_jax_passes_none_as_a_placeholder_its_handler_reads_as_a_null_pointer(ops, tmp_path):
    """The XLA handler's launches (dry run on JAX's CPU platform) are the ATen library's, None included."""
    jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
    import jax.numpy as jnp

    from opsmith import native
    from opsmith.jax import jax_op

    op = ops["scale_rows"]
    lib = tmp_path / "liboptional_dry.so"
    native.build([op], lib, dry_run=True)
    calls = [[[3, 8], [8], None], [[3, 8], None, [8]], [[3, 8], None, None]]
    script = ("import json, sys, torch\ntorch.ops.load_library(sys.argv[1])\nop = torch.ops.t_optcpu.scale_rows.default\n"
              "out = []\nfor c in json.loads(sys.argv[2]):\n    op(*[None if a is None else torch.randn(a) for a in c])\n"
              "    out.append(json.loads(torch.ops.opsmith_dry_run.take()))\nprint(json.dumps(out))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", script, str(lib), json.dumps(calls)], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    aten = json.loads(proc.stdout.strip().splitlines()[-1])
    f = jax_op(op, dry_run=True)
    from opsmith.jax import DryRunWarning

    with jax.default_device(jax.devices("cpu")[0]), pytest.warns(DryRunWarning):
        for c, want in zip(calls, aten, strict=True):
            args = [None if a is None else jnp.ones(a) for a in c]
            jax.block_until_ready(f(*args))
            (got,) = json.loads(f.handlers().take_dry_run())
            (w,) = want
            ga, wa = _slots(got), _slots(w)  # pointers differ between the libraries; None is 0 in both
            assert [s == "0" * 16 for s in ga[1:3]] == [s == "0" * 16 for s in wa[1:3]] == [x is None for x in c[1:]]
            assert ga[4:] == wa[4:] and got["grid"] == w["grid"] and got["image"] == w["image"]
        with pytest.raises(ok.InputError, match=r"argument 'w': expected shape \(N,\)"):
            f(jnp.ones((3, 8)), jnp.ones((7,)), None)


def _slots(launch: dict) -> list[str]:
    return [launch["args"][16 * k : 16 * k + 16] for k in range(len(launch["args"]) // 16)]


def test_a_heuristic_reads_triton_from_the_function_that_defined_it():
    """``triton`` imported inside a function reaches a heuristic lambda through its closure (as in
    examples/catalog/optional.py); the heuristic still traces to an expression."""
    pytest.importorskip("triton")
    from opsmith.declare.symbolic import Sym, trace

    def make():
        import triton

        return lambda a: triton.next_power_of_2(a["n"])

    assert trace(make(), {"n": Sym(["var", "n"])}) == ["pow2", ["var", "n"]]
