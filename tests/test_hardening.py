"""Regression tests for the adversarial review's sixteen defects (issue 17), on CPU: NVRTC compiles for
sm_90 without a driver, fake CUDA tensors run the generated guards and the fake implementations, and meta
tensors run autograd. Each test names the defect it pins down."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok
from opsmith import InputDecl as I
from opsmith import OutputDecl as O

NS = "t_hard"
ROOT = Path(__file__).resolve().parents[1]


def _reg(name: str, src: str, kernel: str, **kw) -> ok.Op:
    decl = {"inputs": [I("x")], "outputs": [O("y", ok.SameAs("x"))], "extras": [ok.Numel("x")],
            "geometry": ok.Elementwise()}  # fmt: skip
    decl.update(kw)
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(kernel_source=src, kernel_name=kernel, **decl))


def _cuda(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="cuda", dtype=dtype)


# -- 1, 2, 5: the parameter list is the compiler's ---------------------------------------------------------
IFDEF = r"""
#include <cuda_fp16.h>
#ifdef USE_HALF
__global__ void scale2(const __half* x, int n, __half* y) {}
#else
__global__ void scale2(const float* x, int n, float* y) {}
#endif
#if 0
__global__ void other(const __half* x, int n, __half* y) {}
#else
__global__ void other(const double* x, int n, double* y) {}
#endif
"""


def test_1_the_preprocessor_decides_which_definition_is_the_kernel():
    op = _reg("ifdef", IFDEF, "scale2")
    assert op.record.tensor_inputs[0].dtype == "float32" and op.record.outputs[0].dtype == "float32"
    with FakeTensorMode():
        assert op(_cuda(4)).dtype == torch.float32
        with pytest.raises(ok.InputError, match=r"argument 'x': expected dtype torch.float32, got torch.float16"):
            op(_cuda(4, dtype=torch.float16))
    assert _reg("if0", IFDEF, "other").record.tensor_inputs[0].dtype == "float64"
    half = _reg("ifdef_half", IFDEF, "scale2", inputs=[I("x")], outputs=[O("y", ok.SameAs("x"))])
    assert half.record.tensor_inputs[0].dtype == "float32"  # without -DUSE_HALF it is the float kernel
    on = ok.cuda_kernel_op(f"{NS}::ifdef_on", ok.KernelSpec(
        kernel_source=IFDEF, kernel_name="scale2", inputs=[I("x")], outputs=[O("y", ok.SameAs("x"))],
        extras=[ok.Numel("x")], geometry=ok.Elementwise(), defines={"USE_HALF": 1}))  # fmt: skip
    assert on.record.tensor_inputs[0].dtype == "float16"


def test_1_a_namespaced_kernel_with_wide_parameters_is_found_and_packed_at_their_width():
    src = r"""
    namespace mylib {
    typedef long long idx_t;
    template <typename T> __global__ void axpy(const T* x, double a, idx_t n, T* y) {}
    }"""
    op = _reg("ns_axpy", src, "mylib::axpy<float>", inputs=[I("x"), ok.ScalarInput("a", float)])
    assert op.record.param_ctypes() == ["ptr", "f64", "i64", "ptr"]
    assert op.record.symbol.startswith("_ZN5mylib4axpyIfEE")


def test_2_a_template_default_does_not_retype_a_plain_parameter():
    src = "#include <cuda_fp16.h>\ntemplate <typename T = float> __global__ void mul_w(const T* x, const float* w, int n, T* y) {}"
    op = _reg("defaults", src, "mul_w<__half>", inputs=[I("x"), I("w")])
    assert [a.dtype for a in op.record.tensor_inputs] == ["float16", "float32"]
    assert op.record.outputs[0].dtype == "float16"


def test_5_a_float2_by_value_is_not_a_float_scalar():
    src = 'extern "C" __global__ void kv(const float* x, float2 a, int n, float* y) {}'
    with pytest.raises(ok.SpecError, match=r"py_type=float cannot be passed as parameter 'float2 a'"):
        _reg("float2", src, "kv", inputs=[I("x"), ok.ScalarInput("a", float)])


# -- 3: generic kernels type their outputs too --------------------------------------------------------------
GENERIC = r"""
#include <cuda_fp16.h>
template <typename T, typename W> __global__ void scale_by(const T* x, const W* w, long long n, W* y) {}
template <typename T> __global__ void to_f32(const T* x, long long n, float* y) {}
"""


def test_3_an_output_typed_by_a_template_parameter_takes_that_inputs_dtype():
    op = _reg("scale_by", GENERIC, "scale_by<{T_x}, {T_w}>", inputs=[I("x"), I("w")], extras=[ok.Numel("x", "int64")])
    assert op.record.outputs[0].dtype_from == 1  # w's, not the default first input's
    with FakeTensorMode():
        assert op(_cuda(4), _cuda(4, dtype=torch.float16)).dtype == torch.float16


def test_3_a_fixed_output_type_does_not_pin_the_input():
    op = _reg("to_f32", GENERIC, "to_f32<{T_x}>", extras=[ok.Numel("x", "int64")])
    assert op.record.tensor_inputs[0].dtype is None and op.record.outputs[0].dtype == "float32"
    with FakeTensorMode():
        assert op(_cuda(4, dtype=torch.float16)).dtype == torch.float32


def test_3_each_instantiation_is_checked_against_the_call():
    """The compiled instantiation's own parameter types are the last word: a pointer whose type the probe
    could not tie to a slot (a trait) is checked when the instantiation is built."""
    from opsmith.declare.binding import check_instantiation
    from opsmith.declare.signature import KernelParam

    op = _reg("inst", GENERIC, "to_f32<{T_x}>", extras=[ok.Numel("x", "int64")])
    params = [KernelParam("x", True, "f16", "__half const*", 8), KernelParam("n", False, "i64", "long long", 8),
              KernelParam("y", True, "f16", "__half*", 8)]  # fmt: skip
    with pytest.raises(ok.InputError, match=r"argument 'y': expected dtype torch.float16 \(the kernel's parameter"):
        check_instantiation(op.qualname, op.record, params, {"x": torch.float16}, [torch.float32])


# -- 4, 6, 11, 12: refusals before launch ------------------------------------------------------------------
COPY = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'


def test_4_a_float_grid_from_a_custom_geometry_is_refused_not_truncated():
    op = _reg("float_grid", COPY, "k", geometry=ok.Custom(lambda i, o: ((i["x"].numel() / 256,), (256,))))
    with FakeTensorMode(), pytest.raises(ok.SpecError, match=r"non-integer launch values \[3.90625\]"):
        op.eager(_cuda(1000))


def test_6_the_32_bit_guard_covers_the_launched_threads():
    op = _reg("wrap768", COPY, "k", geometry=ok.Elementwise(block=(768,)))
    with FakeTensorMode():
        assert op(_cuda(2147483136)).shape == (2147483136,)  # the last size whose threads fit
        for call in (op, op.eager):  # traced (fake impl) and eager (generated guards)
            with pytest.raises(
                ok.InputError, match=r"argument .x.: expected numel\(x\) at most 2147483136.*got 2147483647"
            ):
                call(_cuda(2**31 - 1))


def test_6_a_custom_launch_of_a_32_bit_kernel_is_checked_per_call():
    op = _reg("wrap_custom", COPY, "k", geometry=ok.Custom(lambda i, o: ((1 << 22,), (1024,))))
    with FakeTensorMode(), pytest.raises(ok.InputError, match=r"threads along x"):
        op.eager(_cuda(8))


def test_11_an_empty_reduced_axis_is_refused_clearly_while_tracing():
    op = _reg("rows", COPY, "k", outputs=[O("y", ok.ReduceDims("x", (-1,)))], geometry=ok.Reduction((-1,)))
    with FakeTensorMode(), pytest.raises(ok.InputError, match=r"expected a non-empty tensor"):
        op(_cuda(3, 0))
    with FakeTensorMode():
        assert op(_cuda(0, 5)).shape == (0,)  # nothing to write: fine


@pytest.mark.parametrize(("ctype", "value"), [("float", 3.5e38), ("__half", 7e4), ("__nv_bfloat16", 3.4e38)])
def test_12_a_float_scalar_outside_its_c_type_is_refused_naming_op_and_argument(ctype, value):
    src = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" \
          f'extern "C" __global__ void s(const float* x, {ctype} a, int n, float* y) {{}}'  # fmt: skip
    op = _reg(f"range_{ctype.strip('_')}", src, "s", inputs=[I("x"), ok.ScalarInput("a", float)])
    with FakeTensorMode():
        for call in (op, op.eager):
            with pytest.raises(ok.InputError, match=rf"range_{ctype.strip('_')}: argument 'a': expected a value in"):
                call(_cuda(4), value)
        for fine in (1.5, float("inf"), float("nan")):
            op(_cuda(4), fine)


# -- 7, 8, 9: caches ---------------------------------------------------------------------------------------
def test_7_compiles_are_hermetic_and_key_every_header(tmp_path, monkeypatch):
    from opsmith.flavors.cuda_cpp import CudaSource

    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "h.h").write_text("#define VAL 1\n")
    src = '#include "h.h"\nextern "C" __global__ void k(int* p) { *p = VAL; }'
    monkeypatch.chdir(tmp_path)  # a header next to the process is not found: compiles do not depend on it
    with pytest.raises(ok.CompileError, match=r"h\.h"):
        CudaSource(f"{NS}::hdr", src, "k").build("sm_90")
    first = CudaSource(f"{NS}::hdr", src, "k", include_paths=[str(tmp_path)]).build("sm_90")
    assert not first.from_cache
    assert CudaSource(f"{NS}::hdr", src, "k", include_paths=[str(tmp_path)]).build("sm_90").from_cache
    (tmp_path / "h.h").write_text("#define VAL 2\n")
    second = CudaSource(f"{NS}::hdr", src, "k", include_paths=[str(tmp_path)]).build("sm_90")
    assert not second.from_cache and second.data != first.data


def test_7_a_computed_include_is_never_cached(tmp_path, monkeypatch):
    from opsmith.flavors.cuda_cpp import CudaSource

    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "h.h").write_text("#define VAL 1\n")
    src = '#define HDR "h.h"\n#include HDR\nextern "C" __global__ void k(int* p) { *p = VAL; }'
    for _ in range(2):
        assert not CudaSource(f"{NS}::computed", src, "k", include_paths=[str(tmp_path)]).build("sm_90").from_cache


def test_8_a_cache_directory_others_can_write_is_never_read(tmp_path, monkeypatch):
    from opsmith.cache import DiskCache

    root = tmp_path / "shared"
    cache = DiskCache(root, "kernels")
    assert cache.put("k1", {"symbol": "planted"}, b"payload")
    assert cache.get("k1") is not None
    os.chmod(root, 0o777)  # someone made it world-writable: a planted, checksum-consistent entry is refused
    with pytest.warns(UserWarning, match="writable by group or others"):
        assert DiskCache(root, "kernels").get("k1") is None
    os.chmod(root, 0o700)
    os.chmod(root / "kernels", 0o777)
    assert DiskCache(root, "kernels").get("k1") is None


def test_9_a_changed_triton_constexpr_global_is_a_new_kernel(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path / "cache"))
    import importlib.util

    path = tmp_path / "gk.py"
    path.write_text("import triton\nimport triton.language as tl\nSCALE = tl.constexpr(2.0)\n"
                    "@triton.jit\ndef k(x_ptr, n, y_ptr, BLOCK: tl.constexpr = 128):\n"
                    "    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                    "    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) * SCALE, mask=o < n)\n")  # fmt: skip
    spec = importlib.util.spec_from_file_location("gk_mod", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    decl = {"inputs": [I("x", dtype=torch.float32)], "outputs": [O("y", ok.SameAs("x"))], "extras": [ok.Numel("x")],
            "geometry": ok.Elementwise(block=("BLOCK",))}  # fmt: skip
    a = ok.triton_op(f"{NS}::glob_a", mod.k, **decl)
    spec_a = (True, True)
    bin_a = a.variants.sources[0].build("sm_90", spec_a)
    import triton.language as tl

    mod.SCALE = tl.constexpr(3.0)
    b = ok.triton_op(f"{NS}::glob_b", mod.k, **decl)  # a new registration compiles the new value
    bin_b = b.variants.sources[0].build("sm_90", spec_a)
    assert bin_b.data != bin_a.data  # (registration compiled it already, so this one may be a cache hit)
    with pytest.raises(ok.SpecError, match=r"global constexprs \['SCALE'\].*changed since the op was registered"):
        a.variants.sources[0].build("sm_90", (False, True))  # the old op would mix two values: refused


# -- 10: no backward -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["plain", "ignore", "record", "error-filter-elsewhere"])
def test_10_differentiating_an_op_without_backward_raises_whatever_the_warnings_filters(mode):
    op = _reg("nobw", COPY, "k")
    x = torch.empty(8, device="meta").requires_grad_()
    with warnings.catch_warnings(record=mode == "record"):
        if mode == "ignore":
            warnings.simplefilter("ignore")
        if mode == "error-filter-elsewhere":
            warnings.filterwarnings("error", message="unrelated")
        with pytest.raises(ok.DifferentiationError, match=r"t_hard::nobw: a gradient reached it"):
            (op(x).sum() + x.sum()).backward()
    assert x.grad is None
    with torch.no_grad():
        assert not op(x).requires_grad
    assert not op(x.detach()).requires_grad


# -- 13, 14, 15, 16 --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["def", "résumé", "name", "_dir", "__file__", "__init__"])
def test_13_op_names_torch_cannot_reach_are_refused(name):
    with pytest.raises(ok.SpecError, match="op_name"):
        _reg(name, COPY, "k")


def test_13_a_namespace_shadowed_by_torch_ops_is_refused():
    with pytest.raises(ok.SpecError, match=r"attribute of torch\.ops"):
        ok.cuda_kernel_op("load_library::k", ok.KernelSpec(kernel_source=COPY, kernel_name="k", inputs=[I("x")],
                          outputs=[O("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip


def test_14_ptx_without_a_driver_is_a_toolchain_error_not_a_source_error():
    sys.path.insert(0, str(ROOT / "tests"))
    import error_matrix as em

    if em.has_driver():
        pytest.skip("a CUDA driver is present: target='ptx' compiles here")
    with pytest.raises(ok.ToolchainError, match=r"target='ptx' asks the CUDA driver") as e:
        _reg("ptx_nodrv", COPY, "k", target="ptx")
    assert "Fix the source" not in str(e.value)


CELL = """
import opsmith as ok
factor = {scale}

def backward(g, needs_input_grad=(True,)):
    return (g * factor,) if all(n for n in needs_input_grad) else None   # a generator expression inside

def rows(i, o):
    return ((sum(d for d in i["x"].shape[:1]) * 0 + (i["x"].numel() + 255) // 256,), (256,))

geo = ok.Custom(lambda i, o: rows(i, o))
op = ok.cuda_kernel_op("{ns}::cell", ok.KernelSpec(kernel_source={src!r}, kernel_name="k",
    inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=geo), backward=ok.Backward(backward, args=("grad_y",), grads=("x",)))
"""


def _run_cell(scale: float) -> ok.Op:
    """What re-running a notebook cell does: compile the same text again (new code objects, new lambdas)."""
    scope: dict = {}
    exec(compile(CELL.format(scale=scale, ns=NS, src=COPY), "<notebook cell>", "exec"), scope)
    return scope["op"]


def test_15_rerunning_an_identical_cell_returns_the_op_and_a_changed_closure_is_refused():
    first = _run_cell(2.0)
    assert _run_cell(2.0) is first  # lambdas, a generator expression, a comprehension: all described by code
    with pytest.raises(ok.RegistrationError):
        _run_cell(3.0)  # a changed global the backward reads: not the old op

    def with_default(i, o, block=256):
        return (((i["x"].numel() + block - 1) // block,), (block,))

    _reg("cell_default", COPY, "k", geometry=ok.Custom(with_default))

    def with_default(i, o, block=128):
        return (((i["x"].numel() + block - 1) // block,), (block,))

    with pytest.raises(ok.RegistrationError):
        _reg("cell_default", COPY, "k", geometry=ok.Custom(with_default))

    def make(scale):
        def closure(i, o):
            return (((i["x"].numel() + scale - 1) // scale,), (scale,))

        return closure

    _reg("cell_closure", COPY, "k", geometry=ok.Custom(make(256)))
    assert _reg("cell_closure", COPY, "k", geometry=ok.Custom(make(256))) is not None
    with pytest.raises(ok.RegistrationError):
        _reg("cell_closure", COPY, "k", geometry=ok.Custom(make(128)))


def test_16_opsmith_check_fails_when_no_sample_ran_and_a_launch_error_is_no_refusal():
    lib = torch.library.Library(f"{NS}_chk", "FRAGMENT")
    lib.define("refuse_all(Tensor x) -> Tensor")
    lib.define("launch_fails(Tensor x) -> Tensor")

    def refuse(x):
        raise ok.InputError(f"{NS}_chk::refuse_all", "x", "nothing", "something")

    def fail(x):
        raise ok.LaunchError(f"{NS}_chk::launch_fails: the driver refused")

    lib.impl("refuse_all", refuse, "CPU")
    lib.impl("launch_fails", fail, "CPU")
    for n in ("refuse_all", "launch_fails"):
        torch.library.register_fake(f"{NS}_chk::{n}", lambda x: torch.empty_like(x), lib=lib)
    fast = {"device": "cpu", "only": ["opcheck", "numerics"], "examples": 3}
    for name, opcheck_detail in (("refuse_all", "AssertionError: no sample ran"), ("launch_fails", "LaunchError: ")):
        case = ok.CheckCase(getattr(torch.ops, f"{NS}_chk").__getattr__(name), lambda s, d, dev: (torch.randn(s),),
                            lambda x: x, shapes=[(4,)])  # fmt: skip
        rows = {c: (r, d) for c, r, d in ok.check(case, **fast).rows}
        assert rows["opcheck"][0] == "FAIL" and rows["opcheck"][1].startswith(opcheck_detail), rows
        assert rows["numerics"][0] == "FAIL", rows


# -- the suite's blind spots -----------------------------------------------------------------------------------
def test_blind_spot_the_registration_fingerprint_covers_the_kernel_source():
    _reg("fp_src", COPY, "k")
    other = COPY.replace("{}", "{ }")
    with pytest.raises(ok.RegistrationError):
        _reg("fp_src", other, "k")


def test_blind_spot_target_is_part_of_the_compile_cache_key(tmp_path, monkeypatch):
    from opsmith.flavors.cuda_cpp import CudaSource

    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    CudaSource(f"{NS}::tgt", COPY, "k").build("sm_90")
    sys.path.insert(0, str(ROOT / "tests"))
    import error_matrix as em

    if em.has_driver():
        assert CudaSource(f"{NS}::tgt", COPY, "k", target="ptx").build("sm_90").fmt == "ptx"
    else:  # a cached cubin must not answer a PTX request
        with pytest.raises(ok.ToolchainError):
            CudaSource(f"{NS}::tgt", COPY, "k", target="ptx").build("sm_90")


def test_blind_spot_a_tuning_entry_for_another_config_is_a_miss(tmp_path, monkeypatch):
    from opsmith.cache import DiskCache
    from opsmith.tuning.autotune import Tuner

    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    configs = [{"params": {"B": 1}}, {"params": {"B": 2}}]
    t = Tuner(f"{NS}::tune", {"op": f"{NS}::tune"}, configs, 0)
    key = (torch.float32, 64)
    entry = {"winner": 1, "config": {"params": {"B": 99}}, "times_ms": {}}  # in range, but not our config 1
    DiskCache(tmp_path, "tuning").put(t.disk_key(key, None), {}, json.dumps(entry).encode())
    assert t.cached(key, None) is None
    entry["config"] = configs[1]
    DiskCache(tmp_path, "tuning").put(t.disk_key(key, None), {}, json.dumps(entry).encode())
    assert t.cached(key, None) == 1


def test_blind_spot_the_tuning_identity_and_key_cover_what_decides_the_winner():
    from examples.catalog.tuned import BLOCKS, register_tuned
    from opsmith.torchlib.registration import tuning_identity

    op = register_tuned(f"{NS}_ident")["softmax_tuned"].op
    base = tuning_identity(op.qualname, "cuda", op.variants.sources, op.record)
    assert {"sources", "configs", "launches", "tune_key", "nvrtc"} <= set(base)
    assert len(set(base["sources"])) == len(BLOCKS) and base == op.tuner.identity
    # The key the generated code computes separates dtypes (and row-length buckets): evaluate it.
    expr = op.impl_source.split("_tk = ")[1].split("\n")[0]
    from opsmith.tuning.autotune import pow2

    def key(x):
        return eval(expr, {"_pow2": pow2}, {"x": x})

    keys = {
        key(torch.empty(4, n, dtype=dt, device="meta")) for dt in (torch.float32, torch.float16) for n in (100, 3000)
    }
    assert len(keys) == 4, keys


def test_blind_spot_zero_size_launches_nothing():
    """Under fake tensors a launch would read ``data_ptr()``, which a fake tensor refuses (CPU torch) or warns
    about (CUDA torch): returning before it is what "launches nothing" means."""
    import warnings

    op = _reg("zero", COPY, "k")
    with FakeTensorMode(), warnings.catch_warnings():
        warnings.simplefilter("error")  # CUDA torch's "Accessing the data pointer of FakeTensor" warning
        assert op.eager(_cuda(0, 7)).shape == (0, 7)
        if not torch.cuda.is_available():  # on a GPU the non-empty call would launch on a bogus pointer
            with pytest.raises(Exception):  # noqa: B017 (fake tensors cannot launch: any error means it tried)
                op.eager(_cuda(3))  # the same call with data reaches the launch


def test_blind_spot_rmsnorm_skips_the_weight_gradient_nobody_needs():
    from torch.utils._python_dispatch import TorchDispatchMode

    from opsmith.ops.rmsnorm import rmsnorm_ops

    fwd, _ = rmsnorm_ops("cuda")
    called: list[str] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            called.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.empty(4, 64, device="meta").requires_grad_()
    w = torch.empty(64, device="meta")
    y = fwd(x, w, 1e-6)
    with Record():
        y.sum().backward()
    assert any("rmsnorm_cuda_backward" in c for c in called), called
    assert not any("dweight" in c for c in called), called  # w needs no gradient: the dweight pass never runs
    called.clear()
    x2, w2 = torch.empty(4, 64, device="meta").requires_grad_(), torch.empty(64, device="meta").requires_grad_()
    y2 = fwd(x2, w2, 1e-6)
    with Record():
        y2.sum().backward()
    assert any("dweight" in c for c in called), called


def test_blind_spot_importing_and_registering_touch_no_gpu():
    """Meaningful on any torch build: CUDA initialisation entry points are replaced by tripwires."""
    code = (
        "import torch, sys\n"
        "def boom(*a, **k): raise SystemExit('touched the GPU')\n"
        "torch.cuda._lazy_init = boom\ntorch.cuda.init = boom\n"
        "import cuda.bindings.driver as drv\ndrv.cuInit = boom\n"
        "import opsmith as ok\nfrom opsmith.torchlib.registration import registered_ops\n"
        "assert not registered_ops()\n"
        "ok.cuda_kernel_op('t_nogpu::k', ok.KernelSpec(kernel_source='extern \"C\" __global__ void k(const float* x, "
        "int n, float* y) {}', kernel_name='k', inputs=[ok.InputDecl('x')], outputs=[ok.OutputDecl('y', "
        "ok.SameAs('x'))], extras=[ok.Numel('x')], geometry=ok.Elementwise()))\n"
        "print('ok')\n"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_blind_spot_a_generic_kernel_instantiates_for_half_types_without_its_own_includes():
    """A template over T whose source includes no CUDA header is instantiated for bfloat16 and float16 with
    their headers (the GPU run of the guide's KV-cache kernel hit "__nv_bfloat16 is undefined", reported as a
    missing kernel); a type the source truly lacks is named."""
    src = "template <typename T> __global__ void cp(const T* x, long long n, T* y) { if (n) y[0] = x[0]; }"
    op = ok.cuda_kernel_op("t_hard::half_types", ok.KernelSpec(
        kernel_source=src, kernel_name="cp<{T_x}>", inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x", "int64")], geometry=ok.Elementwise(block=(256,))))  # fmt: skip
    for dt in (torch.bfloat16, torch.float16):
        assert op.variants.kernel(0, (dt,)).binary_for("sm_90").data
    with pytest.raises(ok.SpecError, match=r"'cp<my_t>' uses 'my_t', which the source does not declare"):
        ok.cuda_kernel_op("t_hard::undeclared", ok.KernelSpec(
            kernel_source=src, kernel_name="cp<my_t>", inputs=[ok.InputDecl("x")],
            outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", "int64")],
            geometry=ok.Elementwise(block=(256,))))  # fmt: skip
