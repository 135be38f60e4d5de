"""The one registration path: idempotence, conflicts, derived schema and fake, tracing on fake CUDA (CPU)."""

import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import opsmith as ok
from examples.catalog.basic import RELU, register_all

NS = "t_reg"


def relu_spec(**kw):
    base = dict(kernel_source=RELU, kernel_name="my_relu", inputs=[ok.InputDecl("x")],
                outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))], extras=[ok.Numel("x")],
                geometry=ok.Elementwise(block=(256,)))  # fmt: skip
    base.update(kw)
    return ok.KernelSpec(**base)


@pytest.fixture(scope="module")
def ex():
    return register_all(NS)


def test_seed_example_runs_with_only_the_import_changed():
    import opsmith as ttk

    cu_code = """
extern "C" __global__ void my_relu(const float* x, int n, float* y) {
int i = blockIdx.x * blockDim.x + threadIdx.x;
if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
    ttk.cuda_kernel_op(
        "t_reg_seed::relu",
        ttk.KernelSpec(
            kernel_source=cu_code,
            kernel_name="my_relu",
            inputs=[ttk.InputDecl("x")],
            outputs=[ttk.OutputDecl("y", shape=ttk.SameAs(0))],
            extras=[ttk.Numel("x")],
            geometry=ttk.Elementwise(block=(256,), layout="flat"),
        ),
        supports_dynamic_shapes=True,
    )
    assert str(torch.ops.t_reg_seed.relu.default._schema) == "t_reg_seed::relu(Tensor x) -> Tensor"


def test_identical_registration_is_idempotent_and_a_different_one_is_refused():
    a = ok.cuda_kernel_op(f"{NS}::idem", relu_spec())
    assert ok.cuda_kernel_op(f"{NS}::idem", relu_spec()) is a
    with pytest.raises(ok.RegistrationError, match="different declaration"):
        ok.cuda_kernel_op(f"{NS}::idem", relu_spec(geometry=ok.Elementwise(block=(128,))))


_CELL = """
import opsmith as ok
from examples.catalog.basic import RELU
def scale_backward(grad_y):
    return {factor} * grad_y
op = ok.cuda_kernel_op("t_reg_cell::relu", ok.KernelSpec(kernel_source=RELU{edit}, kernel_name="my_relu",
    inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=ok.Elementwise(block=({block},))),
    backward=ok.Backward(scale_backward, args=("grad_y",), grads=("x",)))
"""


def _cell(factor: float = 1.0, block: int = 256, edit: str = "") -> ok.Op:
    """A notebook cell run again: the same text compiled anew (new function objects, same code)."""
    scope: dict = {}
    exec(compile(_CELL.format(factor=factor, block=block, edit=edit), "<cell>", "exec"), scope)
    return scope["op"]


def test_a_rerun_cell_reregisters_quietly_and_a_changed_one_names_what_changed():
    first = _cell()
    assert _cell() is first  # recompiled, same code: the same op, no error
    with pytest.raises(ok.RegistrationError, match=r"what differs: backward\.fn\.code\. Fix:"):
        _cell(factor=2.0)  # the function changed, not the kernel
    with pytest.raises(ok.RegistrationError, match=r"what differs: geometry\.block\[0\]\. Fix:"):
        _cell(block=128)
    with pytest.raises(ok.RegistrationError, match=r"what differs: source \(the kernel: its source"):
        _cell(edit=' + "// edited"')  # the kernel changed, not the function


@pytest.mark.parametrize("native", ["off", "dry-run"])
def test_op_names_joined_by_double_underscores_do_not_collide_serving_on_or_off(native, monkeypatch):
    """a__b::c and a::b__c are two ops wherever they register: the served Python path's name keeps the
    namespace and the name apart."""
    from opsmith.native.codegen import python_path_op

    monkeypatch.setenv("OPSMITH_NATIVE", native)
    tag = native.replace("-", "")
    first = ok.cuda_kernel_op(f"t_reg_{tag}__b::c", relu_spec())
    second = ok.cuda_kernel_op(f"t_reg_{tag}::b__c", relu_spec())
    assert python_path_op(first.record) != python_path_op(second.record)
    if native == "dry-run":  # both Python paths exist, each its own op
        for op in (first, second):
            ns, name = python_path_op(op.record).split("::")
            assert hasattr(getattr(torch.ops, ns), name)


@pytest.mark.parametrize("ns", ["opsmith_python", "opsmith_python_x", "opsmith_errors", "opsmith_dry_run"])
def test_opsmiths_own_namespaces_are_refused_on_every_machine(ns):
    with pytest.raises(ok.SpecError, match=f"the namespace '{ns}' is reserved"):
        ok.cuda_kernel_op(f"{ns}::relu", relu_spec())


@pytest.mark.parametrize(("ns", "why", "fix"), [("prim", "torch.library reserves it", "my_prim"),
                                                ("_", "the wildcard of torch's C++ registration", "my_ops")])  # fmt: skip
def test_torchs_reserved_namespaces_are_refused_with_a_spec_error(ns, why, fix):
    """torch itself raised ValueError ('prim') and RuntimeError ('_') from inside registration."""
    want = f"{ns}::relu: op_name: the namespace '{ns}' is reserved by torch ({why}). Fix: pick another namespace, "
    with pytest.raises(ok.SpecError, match=re.escape(want + f"e.g. '{fix}'.")):
        ok.cuda_kernel_op(f"{ns}::relu", relu_spec())


def test_name_owned_by_someone_else_is_refused():
    lib = torch.library.Library("t_reg_other", "FRAGMENT")
    lib.define("taken(Tensor x) -> Tensor")
    with pytest.raises(ok.RegistrationError, match="outside opsmith"):
        ok.cuda_kernel_op("t_reg_other::taken", relu_spec())


def test_schemas(ex):
    assert ex["axpby_float32"].op.schema == f"{NS}::axpby_float32(Tensor x, Tensor y, float a, float b) -> Tensor"
    assert ex["row_minmax"].op.schema == f"{NS}::row_minmax(Tensor x) -> (Tensor, Tensor)"
    assert ex["repeat2"].op.schema == f"{NS}::repeat2(Tensor x) -> Tensor"


def test_fake_shapes_and_dtypes(ex):
    with FakeTensorMode():
        x = torch.empty(6, 10, 12, device="cuda")
        assert ex["row_sum"].op(x).shape == (6, 10)
        mn, mx = ex["row_minmax"].op(x)
        assert mn.shape == mx.shape == (6, 10, 1)
        assert ex["add_bias_2d"].op(x, torch.empty(12, device="cuda")).shape == (6, 10, 12)
        h = torch.empty(5, device="cuda", dtype=torch.float16)
        out = ex["axpby_float16"].op(h, h, 1.0, 2.0)
        assert out.dtype == torch.float16 and out.device.type == "cuda"
        assert ex["repeat2"].op(x).shape == (1440,)


def test_fake_applies_dtype_and_rank_rules(ex):
    with FakeTensorMode():
        with pytest.raises(ok.InputError, match=r"'x': expected dtype torch.float32, got torch.float16"):
            ex["relu"].op(torch.empty(3, device="cuda", dtype=torch.float16))
        with pytest.raises(ok.InputError, match="at least 2 dims"):
            ex["add_bias_2d"].op(torch.empty(3, device="cuda"), torch.empty(3, device="cuda"))


def test_cpu_tensor_gets_opsmiths_error(ex):
    with pytest.raises(ok.InputError, match=r"relu: argument 'x': expected a CUDA tensor, got a tensor on cpu"):
        ex["relu"].op(torch.randn(4))


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_fullgraph_traces_fake_cuda(ex, dynamic):
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        return gm.forward

    def f(x, b):
        return ex["softmax"].op(ex["add_bias_2d"].op(x, b)) + ex["row_sum"].op(x).unsqueeze(-1)

    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        x, b = torch.empty(2, 8, 16, device="cuda"), torch.empty(16, device="cuda")
        out = torch.compile(f, backend=backend, fullgraph=True, dynamic=dynamic)(x, b)
    assert out.shape == (2, 8, 16) and len(graphs) == 1 and mode is not None
    targets = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert {f"{NS}.softmax.default", f"{NS}.add_bias_2d.default", f"{NS}.row_sum.default"} <= targets
    overloads = {n.target for n in graphs[0].graph.nodes if isinstance(n.target, torch._ops.OpOverload)}
    assert {ex[k].op.overload for k in ("softmax", "add_bias_2d", "row_sum")} <= overloads


def test_handle_is_the_overload_and_calls_its_cpp_entry(ex):
    op = ex["relu"].op
    ov = getattr(torch.ops, NS).relu.default
    assert op.overload is ov and op == ov and ov == op and hash(op) == hash(ov) and {ov: 1}[op] == 1
    assert op != ex["softmax"].op and isinstance(op, torch._ops.OpOverload) and isinstance(op, ok.Op)
    # no Python frame between the caller and the dispatcher
    assert type(op).__call__ is ov._op and type(op) is not type(ex["softmax"].op)
    assert op.name() == f"{NS}::relu" and op._schema == ov._schema and repr(op).startswith("<opsmith op")
    with pytest.raises(ok.InputError, match="CUDA"):
        op(torch.randn(4))


def test_export_with_dynamic_dims(ex):
    from torch.export import Dim

    class M(torch.nn.Module):
        def forward(self, x):
            mn, mx = ex["row_minmax"].op(x)
            return ex["relu"].op(x) * (mx - mn)

    with FakeTensorMode():
        x = torch.empty(4, 9, device="cuda")
        ep = torch.export.export(M(), (x,), dynamic_shapes={"x": {0: Dim("rows"), 1: Dim("cols")}})
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert f"{NS}.row_minmax.default" in targets and f"{NS}.relu.default" in targets
    ph = next(n for n in ep.graph.nodes if n.op == "placeholder")
    assert all(not isinstance(d, int) for d in ph.meta["val"].shape)


def test_importing_opsmith_registers_nothing_and_touches_no_gpu():
    import subprocess
    import sys

    code = ("import torch, opsmith, sys; from opsmith.torchlib.registration import registered_ops; "
            "sys.exit(1 if registered_ops() or torch.cuda.is_initialized() else 0)")  # fmt: skip
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
