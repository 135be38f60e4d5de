"""Every registration-time mistake raises a ValueError naming the field and the fix (CPU)."""

import itertools

import pytest
import torch

import opsmith as ok
from opsmith import InputDecl as I
from opsmith import OutputDecl as O

SRC = r"""
extern "C" __global__ void k(const float* x, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" __global__ void k2(const float* x, const float* w, float a, int n, float* y) {}
"""
_ids = itertools.count()


def name() -> str:
    return f"t_spec::op{next(_ids)}"


def spec(**kw):
    base = dict(kernel_source=SRC, kernel_name="k", inputs=[I("x")], outputs=[O("y", shape=ok.SameAs("x"))],
                extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(256,)))  # fmt: skip
    base.update(kw)
    return ok.KernelSpec(**base)


CASES = {
    "empty inputs": (dict(inputs=[]), "inputs", "empty"),
    "duplicate input": (dict(inputs=[I("x"), I("x")]), "inputs[1].name", "declared twice"),
    "output reuses input name": (dict(outputs=[O("x", shape=ok.SameAs(0))]), "outputs[0].name", "already used"),
    "empty outputs": (dict(outputs=[]), "outputs", "empty"),
    "SameAs index out of range": (dict(outputs=[O("y", shape=ok.SameAs(3))]), "input_idx", "out of range"),
    "SameAs unknown name": (dict(outputs=[O("y", shape=ok.SameAs("z"))]), "input_idx", "not an input"),
    "ReduceDims unknown name": (dict(outputs=[O("y", shape=ok.ReduceDims("q", (0,)))]), "input_idx", "not an input"),
    "ReduceDims repeated axis": (dict(outputs=[O("y", shape=ok.ReduceDims("x", (0, 0)))]), "dims", "repeats"),
    "Numel unknown": (dict(extras=[ok.Numel("nope")]), "extras[0].input_name", "not an input"),
    "DimSize unknown": (dict(extras=[ok.DimSize("nope", 0)]), "extras[0].input_name", "not an input"),
    "extra not Numel": (dict(extras=[3]), "extras[0]", "not Numel"),
    "dtype_from unknown": (dict(outputs=[O("y", shape=ok.SameAs(0), dtype_from="w")]), "dtype_from", "not an input"),
    "flat with 2-D block": (dict(geometry=ok.Elementwise(block=(16, 16), layout="flat")), "geometry.block", "1-D"),
    "block too big": (dict(geometry=ok.Elementwise(block=(2048,))), "geometry.block", "1024"),
    "block not ints": (dict(geometry=ok.Elementwise(block=(0,))), "geometry.block", "positive"),
    "bad layout": (dict(geometry=ok.Elementwise(layout="diag")), "geometry.layout", "not a layout"),
    "bad block_size": (dict(geometry=ok.Reduction((-1,), block_size=4096)), "block_size", "not a block size"),
    "Custom not callable": (dict(geometry=ok.Custom(fn=5)), "geometry.fn", "not callable"),
    "outputs without meta_fn": (dict(outputs=None), "outputs", "meta_fn"),
    "geometry without eager_fn": (dict(geometry=None), "geometry", "eager_fn"),
    "bad scalar type": (dict(inputs=[I("x"), ok.ScalarInput("a", str)]), "py_type", "float, int or bool"),
    "bad input name": (dict(inputs=[I("lambda")]), "inputs[0].name", "not a usable"),
    "dtype not a dtype": (dict(inputs=[I("x", dtype="float32")]), "inputs[0].dtype", "torch.dtype"),
    "dtype disagrees with kernel": (dict(inputs=[I("x", dtype=torch.float16)]), "dtype", "the kernel reads"),
    "too few params": (dict(extras=[]), "kernel signature", "takes 3 parameters"),
    "scalar where pointer": (dict(inputs=[ok.ScalarInput("x", float)], outputs=[O("y", shape=ok.SameAs(0))]), "inputs", "tensor input"),
    "int64 extra vs int param": (dict(extras=[ok.Numel("x", dtype="int64")]), "dtype", "4 bytes"),
    "bad index dtype": (dict(extras=[ok.Numel("x", dtype="int16")]), "extras[0].dtype", "index type"),
    "bad contiguous": (dict(inputs=[I("x", contiguous="maybe")]), "contiguous", "not a policy"),
    "missing kernel": (dict(kernel_name="nope"), "kernel_name", "not a kernel"),
    "empty source": (dict(kernel_source="  "), "kernel_source", "empty"),
    "bad arch": (dict(arch_override="ampere"), "arch_override", "not an architecture"),
    "bad include dir": (dict(include_paths=["/no/such/dir"]), "include_paths", "not a directory"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_registration_mistake(case):
    kw, field, words = CASES[case]
    with pytest.raises(ValueError) as ei:
        ok.cuda_kernel_op(name(), spec(**kw))
    assert isinstance(ei.value, ok.SpecError)
    msg = str(ei.value)
    assert field in msg and words in msg, msg
    assert "Fix:" in msg


def test_scalar_type_against_signature():
    s = spec(kernel_name="k2", inputs=[I("x"), I("w"), ok.ScalarInput("a", bool)])
    with pytest.raises(ok.SpecError, match="py_type=bool cannot be passed"):
        ok.cuda_kernel_op(name(), s)


def test_bad_op_name():
    with pytest.raises(ok.SpecError, match="namespace::name"):
        ok.cuda_kernel_op("noNamespace", spec())


def test_source_that_does_not_compile_is_a_value_error_with_log_and_lines():
    bad = SRC.replace("y[i] = x[i];", "y[i] = x[i] + undefined_thing;")
    with pytest.raises(ValueError) as ei:
        ok.cuda_kernel_op(name(), spec(kernel_source=bad))
    err = ei.value
    assert isinstance(err, ok.CompileError)
    assert 'identifier "undefined_thing" is undefined' in err.log
    assert ">>    4 |     if (i < n) y[i] = x[i] + undefined_thing;" in str(err)


def test_unknown_element_type_needs_a_declared_dtype():
    src = 'struct P; extern "C" __global__ void k(const P* x, int n, float* y) {}'
    with pytest.raises(ok.SpecError, match=r"declare InputDecl\('x', dtype="):
        ok.cuda_kernel_op(name(), spec(kernel_source=src, outputs=[O("y", shape=ok.SameAs(0))]))


def test_ptx_op_requires_dtypes_and_checks_sizes():
    from importlib import resources

    ptx = resources.files("examples.catalog.kernels").joinpath("scale.ptx").read_bytes()
    decl = dict(outputs=[O("y", shape=ok.SameAs(0))], extras=[ok.Numel("x")], geometry=ok.Elementwise())
    with pytest.raises(ok.SpecError, match="element type of 'x' is unknown"):
        ok.ptx_op(name(), ptx, "scale_f32", inputs=[I("x"), ok.ScalarInput("alpha", float)], **decl)
    with pytest.raises(ok.SpecError, match="py_type=int cannot be passed"):
        ok.ptx_op(name(), ptx, "scale_f32", inputs=[I("x", dtype=torch.float32), ok.ScalarInput("alpha", int)], **decl)
    with pytest.raises(ok.SpecError, match="not an entry"):
        ok.ptx_op(name(), ptx, "nope", inputs=[I("x", dtype=torch.float32)], **decl)
    with pytest.raises(ok.SpecError, match="neither a cubin"):
        ok.ptx_op(name(), b"hello", "k", inputs=[I("x", dtype=torch.float32)], **decl)


def test_explicit_schema_must_match_declaration():
    with pytest.raises(ok.SpecError, match="schema"):
        ok.cuda_kernel_op(name(), spec(), schema="(Tensor x, float a) -> Tensor")
    with pytest.raises(ok.SpecError, match="does not parse"):
        ok.cuda_kernel_op(name(), spec(), schema="(Tensor x -> Tensor")


def test_rank_needs_are_checked_against_declared_ndim():
    s = spec(inputs=[I("x", ndim=1)], extras=[ok.DimSize("x", -2)], kernel_name="k")
    with pytest.raises(ok.SpecError, match="at least 2"):
        ok.cuda_kernel_op(name(), s)


def test_grid_shared_mem_from_a_config_parameter_is_bytes():
    """A Grid's shared_mem may name a config parameter: 0 and more than 1,024 bytes are fine (unlike a
    block size); a negative or an above-227-KiB value, or a config without it, is refused naming the parameter."""
    grid = ok.Grid(grid=("cdiv(numel(x), 256)",), block=(256,), shared_mem="SMEM")
    ok_op = ok.cuda_kernel_op(name(), spec(geometry=grid, autotune=ok.Autotune(
        [ok.Config({"SMEM": 0}), ok.Config({"SMEM": 131072})])))  # fmt: skip
    assert [p.shared_mem for p in ok_op.record.launches] == [0, 131072]
    for bad in ({"SMEM": -1}, {"SMEM": 300 * 1024}):
        with pytest.raises(ok.SpecError, match="shared_mem uses 'SMEM'"):
            ok.cuda_kernel_op(name(), spec(geometry=grid, autotune=ok.Autotune([ok.Config(bad)])))
    # Named by no config: an expression naming something unknown (shared memory may be an expression)
    with pytest.raises(
        ok.SpecError,
        match=r"geometry\.shared_mem: 'SMEM': 'SMEM' is not sm_count, a named "
        r"dimension or a parameter of the config \(config parameters \[\]\)",
    ):
        ok.cuda_kernel_op(name(), spec(geometry=grid, autotune=ok.Autotune([ok.Config({})])))
    with pytest.raises(
        ok.SpecError, match=r"geometry\.shared_mem: config 0's shared memory (is -4 bytes|4 - 8 is always outside)"
    ):
        ok.cuda_kernel_op(name(), spec(geometry=ok.Grid(grid=(1,), block=(32,), shared_mem="4 - 8")))
