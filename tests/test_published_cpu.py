"""Published Triton kernels on CPU: ``@triton.autotune`` and ``@triton.heuristics`` kernels registered unchanged
(configs, key, reset_to_zero, heuristics per config), their refusals, constexprs named like launch options,
kernels built with ``exec``, the tuner restoring what an accumulating kernel wrote, the interpreter running
them, and the Python and native dry runs computing the same heuristics for the same calls."""

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from conftest import pythonpath

import opsmith as ok

triton = pytest.importorskip("triton")

from examples.catalog.kernels import published_triton as pt  # noqa: E402
from examples.catalog.published import register_published  # noqa: E402

NS = "t_pubcpu"
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def ex():
    return register_published(NS)


def test_autotune_decorator_becomes_the_ops_tuning(ex):
    rec = ex["matmul"].op.record
    want = [{"params": {**c.kwargs, "ACTIVATION": ""}, "num_warps": c.num_warps, "num_stages": c.num_stages,
             "num_ctas": 1} for c in pt.matmul_configs()]  # fmt: skip
    assert [dict(c, params=dict(sorted(c["params"].items()))) for c in rec.configs] == \
        [dict(c, params=dict(sorted(c["params"].items()))) for c in want]  # fmt: skip
    names = [e.name for e in rec.extras]
    # key=["M", "N", "K"]: each extra's exact value, after the dtypes
    assert rec.tune_key == tuple(["extra", names.index(n), "exact"] for n in ("M", "N", "K"))
    assert ex["matmul"].op.tuner is not None and ex["sum"].op.tuner is not None


def test_heuristics_are_traced_per_config(ex):
    (even,) = ex["sum"].op.record.heuristics
    assert even["name"] == "EVEN"
    assert even["exprs"] == [["eq", ["mod", ["numel", "i0"], b], 0] for b in (128, 512, 2048)]
    assert even["pick"] == [0, 1, 2]
    block, wide = ex["rowmax"].op.record.heuristics
    assert block["exprs"] == [["max", ["pow2", ["size", "i0", 1]], 16]]  # builtin max, triton.next_power_of_2
    assert wide["exprs"] == [
        [
            "where",
            ["gt", ["size", "i0", 1], 1024],
            ["eq", ["mod", ["size", "i0", 0], 2], 0],
            ["gt", ["size", "i0", 1], 1024],
        ]
    ]  # `and`
    assert ex["sum"].op.record.outputs[0].init == 0


def test_the_per_config_value_keys_each_configs_kernel(ex):
    v = ex["sum"].op.variants
    spec = (torch.float32, True, False, (True, False, False))
    assert v.project(1, spec) == (torch.float32, True, False, False)
    assert v.project(0, spec)[-1] is True


def _acc_kernel_decl(**kw):
    return {"inputs": [ok.InputDecl("x")], "outputs": [ok.OutputDecl("out", shape=(1,), dtype=torch.float32, **kw)],
            "extras": [ok.Numel("x", name="n_elements")], "geometry": ok.Grid(grid=("cdiv(numel(x), BLOCK)",))}  # fmt: skip


def test_refusals_name_the_field_and_the_fix():
    with pytest.raises(ok.SpecError, match=r"autotune\.reset_to_zero: 'out_ptr' is an output.*init=0"):
        ok.triton_op(f"{NS}::no_init", pt.sum_kernel, **_acc_kernel_decl())
    with pytest.raises(ok.SpecError, match=r"decorated with @triton.autotune and autotune= is given too"):
        ok.triton_op(f"{NS}::both", pt.sum_kernel, **_acc_kernel_decl(init=0),
                     autotune=ok.Autotune([ok.Config({"BLOCK": 64})]))  # fmt: skip
    hooked = triton.autotune(configs=[triton.Config({"BLOCK": 64}, pre_hook=lambda a: None)], key=[])(
        pt.sum_kernel.fn.fn
    )
    with pytest.raises(ok.SpecError, match=r"pre_hook is a Python callback"):
        ok.triton_op(f"{NS}::hooked", triton.heuristics({"EVEN": lambda a: False})(hooked), **_acc_kernel_decl(init=0))
    bad_key = triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
                              key=["n_elements"])(triton.heuristics({"EVEN": lambda a: False})(pt.sum_kernel.fn.fn))  # fmt: skip
    bad_key.keys = ["nope"]
    with pytest.raises(ok.SpecError, match=r"autotune\.key\[0\]: 'nope' names no argument"):
        ok.triton_op(f"{NS}::bad_key", bad_key, **_acc_kernel_decl(init=0))
    cluster = triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_ctas=2)], key=[])(
        triton.heuristics({"EVEN": lambda a: False})(pt.sum_kernel.fn.fn))  # fmt: skip
    with pytest.raises(ok.SpecError, match=r"num_ctas: num_ctas=2 launches thread-block clusters.*num_ctas=1"):
        ok.triton_op(f"{NS}::cluster", cluster, **_acc_kernel_decl(init=0))


@pytest.mark.parametrize(("fn", "why"), [
    (lambda a: a["x_ptr"].dtype == torch.float16, r"reads 'x\.dtype'"),
    (lambda a: int(a["n_elements"]) > 7, r"converts a size to a Python number"),
    (lambda a: a["n_elements"] / 2 > 7, r"divides a size with '/'"),
    (lambda a: a["nope"], r"reads args\['nope'\]"),
])  # fmt: skip
def test_a_heuristic_that_is_no_size_expression_is_refused(fn, why):
    k = triton.heuristics({"EVEN": fn})(pt.sum_kernel.fn.fn)
    with pytest.raises(ok.SpecError, match=r"heuristics\['EVEN'\]: .*" + why):
        ok.triton_op(f"{NS}::heur_{abs(hash(why)) % 10**6}", k, **_acc_kernel_decl(init=0),
                     autotune=ok.Autotune([ok.Config({"BLOCK": 64})]))  # fmt: skip


def test_autotune_takes_triton_configs_and_num_stages_constexpr_is_the_option(ex):
    srcs = ex["softmax"].op.variants.sources
    assert [(s.constexprs["num_stages"], s.num_stages) for s in srcs] == [(4, 4), (2, 2)]
    op = ok.triton_op(f"{NS}::softmax_tc", pt.softmax_kernel, inputs=[ok.InputDecl("input", shape=("R", "C"))],
                      outputs=[ok.OutputDecl("output", shape=("R", "C"))],
                      extras=[ok.Stride("input", 0, name="input_row_stride"), ok.Dim("C", name="output_row_stride"),
                              ok.Dim("R", name="n_rows"), ok.Dim("C", name="n_cols"),
                              ok.DimSize("input", -1, name="BLOCK_SIZE", bucket="pow2")],
                      geometry=ok.Grid(grid=("R",)),
                      autotune=ok.Autotune([triton.Config({}, num_warps=4, num_stages=1, maxnreg=128),
                                            triton.Config({"num_stages": 3}, num_warps=8)]))  # fmt: skip
    assert op.record.configs[0] == {"params": {}, "num_warps": 4, "num_stages": 1, "num_ctas": 1, "maxnreg": 128}
    assert [s.constexprs["num_stages"] for s in op.variants.sources] == [1, 3]
    assert op.variants.sources[0].launch_options()["maxnreg"] == 128
    with pytest.raises(ok.SpecError, match=r"sets the constexpr 'num_stages' to 2 and the num_stages option to 3"):
        ok.triton_op(f"{NS}::softmax_clash", pt.softmax_kernel, inputs=op.record and [ok.InputDecl("input")],
                     outputs=[ok.OutputDecl("output", ok.SameAs("input"))],
                     extras=[ok.Stride("input", 0, name="input_row_stride"), ok.DimSize("input", -1, name="n_cols"),
                             ok.Stride("input", 0, name="output_row_stride"), ok.DimSize("input", 0, name="n_rows"),
                             ok.DimSize("input", -1, name="BLOCK_SIZE", bucket="pow2")],
                     geometry=ok.Grid(grid=("size(input, 0)",)),
                     autotune=ok.Autotune([ok.Config({"num_stages": 2}, num_stages=3)]))  # fmt: skip


def test_traced_launch_passes_num_stages_once(ex):
    """torch.compile's view of the kernel: the constexpr and the option are one keyword (the review's "got
    multiple values for keyword argument 'num_stages'")."""
    from torch._functorch.aot_autograd import aot_function
    from torch._subclasses.fake_tensor import FakeTensorMode

    graphs = []
    f = aot_function(lambda x: ex["softmax"].op(x), fw_compiler=lambda gm, _: graphs.append(gm) or gm)
    with FakeTensorMode(), contextlib.suppress(RuntimeError):  # running the captured graph needs a GPU
        f(torch.empty(16, 300, device="cuda"))
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

    assert graphs and "triton_kernel_wrapper_functional" in graphs[0].code
    kernel = kernel_side_table.get_kernel(int(graphs[0].code.split("kernel_idx = ")[1].split(",")[0]))
    # torch hands launch options to Triton as a one-config autotuner, whose kwargs fill the constexpr too
    assert [(c.kwargs, c.num_stages, c.num_warps) for c in kernel.configs] == [({"num_stages": 4}, 4, 8)]


def test_tuning_restores_what_an_accumulating_kernel_wrote():
    """The interpreted sum kernel (it atomically adds into ``out``) timed several times per config: each run
    starts from the call's ``out``, and the call's own launch afterwards leaves one sum
    (``published_interpreter_check.py tuning``)."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=pythonpath(HERE.parent))
    p = subprocess.run([sys.executable, str(HERE / "published_interpreter_check.py"), "tuning"], capture_output=True,
                       text=True, env=env, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "tuning restored" in p.stdout


def test_generated_code_hands_initialized_outputs_to_the_tuner(ex):
    src = ex["sum"].op.impl_source
    assert "_o0.zero_()" in src
    assert "(_o0,), (_o0,))" in src  # mutated (restored between runs), outputs


def test_prune_configs_by_chooses_what_is_timed(tmp_path, monkeypatch):
    seen = {}

    def early(configs, named_args, **kwargs):
        seen["named"] = sorted(named_args)
        return [c for c in configs if c.kwargs["BLOCK"] >= 512]

    k = triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 512, 2048)], key=["n_elements"],
                        prune_configs_by={"early_config_prune": early}, reset_to_zero=["out_ptr"])(
        triton.heuristics({"EVEN": lambda a: a["n_elements"] % a["BLOCK"] == 0})(pt.sum_kernel.fn.fn))  # fmt: skip
    op = ok.triton_op(f"{NS}::pruned", k, **_acc_kernel_decl(init=0))
    assert op.tuner.prune is not None and "lambda: ({'x_ptr': x, 'out_ptr': _o0, 'n_elements': _n0}, {})" in \
        op.impl_source  # fmt: skip
    assert op.tuner.prune({"x_ptr": torch.zeros(4), "out_ptr": torch.zeros(1), "n_elements": 4}, {}) == [1, 2]
    assert seen["named"] == ["n_elements", "out_ptr", "x_ptr"]


GENERATED = """
import triton
import triton.language as tl

@triton.jit
def gen_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
"""


def test_kernels_built_by_exec_register_and_run_in_the_interpreter():
    """Without a source file (exec): the interpreter runs the kernel, and its fingerprint comes from its code
    (Triton's JIT itself needs a source: linecache, as code generators register theirs)."""
    code = (
        "import torch, opsmith as ok\n"
        f"ns = {{}}; exec(compile({GENERATED!r}, '<generated>', 'exec'), ns)\n"
        "op = ok.triton_op('t_pubexec::add', ns['gen_add'], inputs=[ok.InputDecl('x'), ok.InputDecl('y')],\n"
        "    outputs=[ok.OutputDecl('out', ok.SameAs('x'))], extras=[ok.Numel('x', name='n')],\n"
        "    geometry=ok.Elementwise(block=('BLOCK',)), autotune=ok.Autotune([ok.Config({'BLOCK': 128})]))\n"
        "x, y = torch.randn(1000), torch.randn(1000)\n"
        "torch.testing.assert_close(op(x, y), x + y)\n"
        "print('ok', op.fingerprint[:12])\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=pythonpath(HERE.parent))
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]  # fmt: skip
    for p in outs:
        assert p.returncode == 0, p.stderr[-3000:]
    assert outs[0].stdout.split()[-1] == outs[1].stdout.split()[-1]  # the same in another process


def test_a_linecache_registered_kernel_compiles_for_the_gpu(tmp_path):
    import linecache

    name = "<opsmith-generated-kernel>"
    linecache.cache[name] = (len(GENERATED), None, GENERATED.splitlines(True), name)
    ns: dict = {}
    exec(compile(GENERATED, name, "exec"), ns)
    op = ok.triton_op(f"{NS}::gen_add", ns["gen_add"], inputs=[ok.InputDecl("x", dtype=torch.float32),
                                                               ok.InputDecl("y", dtype=torch.float32)],
                      outputs=[ok.OutputDecl("out", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                      geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": 128})]))  # fmt: skip
    assert op.variants.kernels  # compiled for sm_90 at registration (declared dtypes)


def test_interpreter_runs_every_published_kernel():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=pythonpath(HERE.parent))
    p = subprocess.run([sys.executable, str(HERE / "published_interpreter_check.py")], capture_output=True,
                       text=True, env=env, timeout=900)  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "all ok" in p.stdout


@pytest.mark.slow
def test_python_and_native_dry_runs_compute_the_same_heuristics(ex):
    """The differential harness on the heuristic ops: the generated Python and the native library (built with
    -DOPSMITH_DRY_RUN, run without opsmith) record the same launches, the heuristic's value choosing the
    kernel, for sizes on both sides of each heuristic's edges."""
    sys.path.insert(0, str(HERE))
    from differential import Registered as G
    from differential import compare, native_outcomes, python_outcomes
    from differential import tensor_call as t

    # The matmul: unit strides compiled in (left out of the argument buffer) for plain and transposed views.
    mm = [[t((m, k), "float16", va), t((k, n), "float16", vb)]
          for (m, k, n) in ((64, 32, 48), (33, 17, 1)) for va in ("plain", "t") for vb in ("plain", "t")]  # fmt: skip
    gens = [G(ex["rowmax"].op, [[t(s)] for s in ((6, 100), (4, 1025), (3, 1025), (2, 1024), (5, 16), (1, 3))]),
            G(ex["sum"].op, [[t(s)] for s in ((1000,), (2048,), (4096,), (640,))]), G(ex["matmul"].op, mm)]  # fmt: skip
    py, cases = python_outcomes(gens)
    with tempfile.TemporaryDirectory() as d:
        nat = native_outcomes(gens, cases, Path(d))
    assert compare(gens, py, nat) == []
    assert all(r["ok"] for r in py.values()), py
    images = {r["launches"][0]["image"] for k, r in py.items() if k.startswith(f"{NS}::rowmax")}
    assert len(images) >= 3  # BLOCK 128, 2048 (WIDE or not), 1024, 16: distinct kernels chosen per call
    # Each matmul launch passes its 12 parameters less those equal to 1 (N == 1 is compiled in too).
    for k, r in py.items():
        if k.startswith(f"{NS}::matmul"):
            (launch,) = r["launches"]
            ints = [int.from_bytes(bytes.fromhex(a), "little", signed=True) for a in launch["args"][3:]]
            assert 1 not in ints and len(launch["args"]) < 12, (k, launch["args"])


def _matmul_spec(op, a, b):
    """The specialization the generated eager code computes for a matmul call (its ``_sk``)."""
    vals = [a.data_ptr(), b.data_ptr(), 1 << 20, a.shape[0], b.shape[1], a.shape[1], *a.stride(), *b.stride(),
            b.shape[1], 1]  # fmt: skip
    out = []
    for kind, p in op.variants.spec_layout:
        if kind == "align":
            out.append(vals[p] % 16 == 0)
        else:
            assert kind == "int"
            out.append(2 if vals[p] == 1 else vals[p] % 16 == 0)
    return tuple(out)


def test_integers_equal_to_one_are_compiled_in_as_tritons_jit_does(ex):
    """A unit stride is a constexpr 1 in the compiled kernel (what lets Triton vectorize a row's loads): the
    cubin takes the other parameters, the argument buffer leaves it out, the cache entry records it."""
    from opsmith.flavors.base import UNIT

    op = ex["matmul"].op
    layout = op.variants.spec_layout
    assert layout == [("align", 0), ("align", 1), *[("int", p) for p in range(3, 12)]]
    a, b = torch.randn(64, 32).half(), torch.randn(32, 48).half()
    spec = _matmul_spec(op, a, b)
    units = [op.record.params[p].name for (kind, p), v in zip(layout, spec, strict=True) if v == UNIT]
    assert units == ["stride_ak", "stride_bn", "stride_cn"]
    kd = op.variants.kernel(0, spec)
    binary = kd.binary_for("sm_90")
    assert binary.dropped == (7, 9, 11)
    loose = op.variants.kernel(0, tuple(False for _ in layout)).binary_for("sm_90")
    assert loose.dropped == () and binary.data != loose.data
    values = tuple(range(100, 112))
    assert kd.argument_bytes(values) == b"".join(v.to_bytes(8, "little") for v in values if v not in (107, 109, 111))
    # b transposed: its row stride is the 1 (a kernel of its own), its column stride a runtime value.
    bt = torch.randn(48, 32).half().t()
    assert op.variants.kernel(0, _matmul_spec(op, a, bt)).binary_for("sm_90").dropped == (7, 8, 11)


def test_do_not_specialize_is_honoured():
    """``@triton.jit(do_not_specialize=...)`` parameters are neither compiled in nor assumed divisible."""
    src = (
        "import triton, triton.language as tl\n"
        "@triton.jit(do_not_specialize=['n'], do_not_specialize_on_alignment=['x'])\n"
        "def scale(x, y, n, BLOCK: tl.constexpr):\n"
        "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(y + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)\n"
    )
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "dns_kernel.py"
        path.write_text(src)
        scope: dict = {"__file__": str(path)}
        import linecache

        linecache.updatecache(str(path))
        exec(compile(src, str(path), "exec"), scope)
        op = ok.triton_op(f"{NS}::dns", scope["scale"], inputs=[ok.InputDecl("x")],
                          outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                          geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)),
                          autotune=ok.Autotune([ok.Config(params={"BLOCK": 128})]))  # fmt: skip
    assert op.variants.spec_layout == [("dtype", 0)]


_STACKED = """
import torch, triton, triton.language as tl, opsmith as ok

@triton.heuristics(values={"A": lambda args: args["n"] // 4})      # outer: Triton runs it first
@triton.heuristics(values={"B": lambda args: args["A"] * 2 + 1})  # inner: sees A
@triton.jit
def k(x_ptr, n, out_ptr, A: tl.constexpr, B: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, 2), tl.where(tl.arange(0, 2) == 0, A, B))

op = ok.triton_op("t_pub_stack::k", k, inputs=[ok.InputDecl("x", dtype=torch.float32)],
                  outputs=[ok.OutputDecl("out", shape=(2,), dtype=torch.int32)], extras=[ok.Numel("x", name="n")],
                  geometry=ok.Grid(grid=(1,)))
theirs = torch.zeros(2, dtype=torch.int32)
k[(1,)](torch.randn(40), 40, theirs)  # Triton's own launch, in the interpreter
print("opsmith", op(torch.randn(40)).tolist(), "triton", theirs.tolist())
"""


def test_stacked_heuristics_run_in_triton_s_order():
    """The outer ``@triton.heuristics`` runs first and the inner one sees its value (Triton's order); opsmith's
    traced heuristics give what Triton's own launch gives (in the interpreter: A = 40 // 4, B = 2A + 1)."""
    pytest.importorskip("triton", reason="Triton is not installed here: pip install '.[triton]'")
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1", "OPSMITH_NATIVE": "off"}
    r = subprocess.run([sys.executable, "-c", _STACKED], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "opsmith [10, 21] triton [10, 21]" in r.stdout, r.stdout


def test_perf_model_pruning_keeps_the_configs_it_estimates_fastest():
    """``prune_configs_by={"perf_model": ..., "top_k": ...}`` as Triton's autotuner applies it: the top_k configs
    with the lowest estimated time, an int count or a fraction of the candidates, after early_config_prune."""
    pytest.importorskip("triton", reason="Triton is not installed here: pip install '.[triton]'")
    from opsmith.flavors.triton_decorators import make_pruner

    configs = [ok.Config({"BLOCK": b}) for b in (512, 64, 256, 128, 1024)]
    model = lambda **kw: kw["BLOCK"] * kw["n"]  # noqa: E731  (time grows with the block)
    assert make_pruner({"perf_model": model, "top_k": 2}, configs)({"n": 10}, {}) == [1, 3]
    assert make_pruner({"perf_model": model, "top_k": 0.4}, configs)({"n": 10}, {}) == [1, 3]
    slow_first = lambda **kw: -kw["BLOCK"]  # noqa: E731
    assert make_pruner({"perf_model": slow_first, "top_k": 1}, configs)({"n": 10}, {}) == [4]
    early = lambda cs, named, **kw: [c for c in cs if c.kwargs["BLOCK"] >= 256]  # noqa: E731
    assert make_pruner({"early_config_prune": early, "perf_model": model, "top_k": 2}, configs)({"n": 1}, {}) == [2, 0]
