"""What opsmith tells Inductor (opsmith/inductor), checked on CPU with traced and compiled graphs.

Saved activations an op overwrites in a backward: a SwiGLU-shaped pair of ops (the backward op writes the gradients
over the two saved inputs, declared ``mutates=True``), compiled by Inductor on CPU through the ops' references.
With the pass, Inductor's reinplacing misses nothing (its own counter) and the compiled backward calls the op on the
saved buffers themselves; with ``OPSMITH_REINPLACE_SAVED=0``, it misses both (each then copied first: a clone, or
on CPU a copy fused into a neighbouring kernel). Gradients equal eager's
either way. The Triton form (the op handed to Inductor as ``triton_kernel_wrapper_functional``) is checked on the
traced backward graph: the pass adds the copy-back Inductor's reinplacing needs."""

import pytest
import torch

import opsmith as ok
from opsmith.inductor import donated

triton = pytest.importorskip("triton", reason="the ops are Triton kernels (the test extra installs Triton)")
import triton.language as tl  # noqa: E402

NS = "t_inductor"


@triton.jit
def glu_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(a_ptr + i, mask=i < n)
    tl.store(c_ptr + i, a * tl.sigmoid(a) * tl.load(b_ptr + i, mask=i < n), mask=i < n)


@triton.jit
def glu_backward_kernel(dc_ptr, a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    """The gradients written over a and b, as Liger's SwiGLU backward writes them."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    dc = tl.load(dc_ptr + i, mask=i < n)
    a = tl.load(a_ptr + i, mask=i < n)
    b = tl.load(b_ptr + i, mask=i < n)
    s = tl.sigmoid(a)
    tl.store(a_ptr + i, dc * b * s * (1 + a * (1 - s)), mask=i < n)
    tl.store(b_ptr + i, dc * a * s, mask=i < n)


def glu_ref(a, b):
    return torch.nn.functional.silu(a) * b


def glu_backward_ref(dc, a, b):
    s = torch.sigmoid(a)
    da, db = dc * b * s * (1 + a * (1 - s)), dc * a * s
    a.copy_(da)
    b.copy_(db)


def _register(name, with_reference):
    common = {"extras": [ok.Numel("a", name="n")], "geometry": ok.Elementwise(block=("BLOCK",)),
              "constexprs": {"BLOCK": 256}}  # fmt: skip
    refs = ({"reference": glu_ref}, {"reference": glu_backward_ref}) if with_reference else ({}, {})
    bwd = ok.triton_op(f"{NS}::{name}_backward", glu_backward_kernel,
                       inputs=[ok.InputDecl("dc"), ok.InputDecl("a", shape=ok.SameAs("dc"), mutates=True),
                               ok.InputDecl("b", shape=ok.SameAs("dc"), mutates=True)],
                       outputs=[], **refs[1], **common)  # fmt: skip

    def backward(dc, a, b):
        bwd(dc.contiguous(), a, b)
        return a, b

    fwd = ok.triton_op(f"{NS}::{name}", glu_kernel, inputs=[ok.InputDecl("a"), ok.InputDecl("b", shape=ok.SameAs("a"))],
                       outputs=[ok.OutputDecl("c", ok.SameAs("a"))],
                       backward=ok.Backward(backward, args=("grad_c", "a", "b"), grads=("a", "b")), **refs[0], **common)  # fmt: skip
    return fwd, bwd


@pytest.fixture(scope="module")
def glu():
    """The pair with CPU references: on CPU tensors (real or meta) the ops stay whole (custom ops, functionalized
    as ``auto_functionalized_v2``) and run their references."""
    return _register("glu", with_reference=True)


@pytest.fixture(scope="module")
def glu_traced():
    """The pair without references: traced, each op decomposes into its Triton kernel
    (``triton_kernel_wrapper_functional``), as on a GPU."""
    return _register("glu_traced", with_reference=False)


def _mlp(glu_op):
    def f(x, wa, wb):
        return glu_op(x @ wa, x @ wb).square().sum()  # a and b: matmul outputs nothing else reads

    return f


def _compiled_backward_code(fn, *args):
    """(gradients, the generated code of every graph, the tensors Inductor's reinplacing missed) of
    fn(*args).backward() compiled by Inductor."""
    from torch._dynamo.utils import ReinplaceCounters
    from torch._inductor.utils import run_and_get_code

    def step():
        for a in args:
            a.grad = None
        torch.compile(fn, fullgraph=True)(*args).backward()
        return [a.grad.clone() for a in args]

    torch._dynamo.reset()
    ReinplaceCounters.clear()
    try:  # caches off: a cached graph runs no passes (and Inductor reads its environment variable at import)
        with torch._inductor.config.patch(force_disable_caches=True):
            grads, code = run_and_get_code(step)
        return grads, code, ReinplaceCounters.get_total_missed()
    finally:
        torch._dynamo.reset()


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=g, requires_grad=True) for s in ((16, 32), (32, 48), (32, 48))]


@pytest.mark.slow
def test_the_saved_activations_are_overwritten_in_place_not_cloned(glu):
    fwd, _ = glu
    args = _inputs()
    torch._dynamo.reset()
    _mlp(fwd)(*args).backward()
    eager = [a.grad.clone() for a in args]
    before = len(donated.reinplaced)
    grads, code, missed = _compiled_backward_code(_mlp(fwd), *args)
    backward = next(c for c in code if f"{NS}.glu_backward" in c)
    call = next(line.strip() for line in backward.splitlines() if f"{NS}.glu_backward.default(" in line)
    # the op is called on two of the backward graph's inputs (the saved matmul outputs), nothing copied first
    assert missed == 0
    assert len(donated.reinplaced) == before + 1 and len(donated.reinplaced[-1]) == 2
    assert all(name in call for name in donated.reinplaced[-1]), call
    for g, e in zip(grads, eager, strict=True):
        torch.testing.assert_close(g, e)


def test_without_the_pass_inductor_clones_them(glu, monkeypatch):
    """The same step with the pass switched off: the copies it removes are there (the test above can fail)."""
    fwd, _ = glu
    monkeypatch.setenv("OPSMITH_REINPLACE_SAVED", "0")
    args = _inputs()
    torch._dynamo.reset()
    _mlp(fwd)(*args).backward()
    eager = [a.grad.clone() for a in args]
    grads, _, missed = _compiled_backward_code(_mlp(fwd), *args)
    assert missed == 2
    for g, e in zip(grads, eager, strict=True):
        torch.testing.assert_close(g, e)


def test_the_triton_form_gets_its_copy_back_on_the_traced_backward(glu_traced):
    """Without references the op decomposes into its Triton kernel (``triton_kernel_wrapper_functional``, as on a
    GPU); the pass, run on the traced backward graph, writes both saved buffers back so Inductor reinplaces."""
    from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_functional

    kinds = []
    seen = _traced_backward(glu_traced[0], lambda g: kinds.extend(n.target for n in g.nodes if donated._writes(n)))
    assert kinds == [triton_kernel_wrapper_functional]
    assert len(seen) == 1 and len(seen[0]) == 2, seen


def _traced_backward(fwd, edit=None) -> list[list[str]]:
    """What the pass overwrites in place in the traced backward graph of the MLP on meta tensors; ``edit(graph)``
    first."""
    from torch._dynamo.backends.common import aot_autograd

    seen: list[list[str]] = []

    def bw(gm, _):
        if edit is not None:
            edit(gm.graph)
        seen.append(donated.rewrite(gm.graph))
        return gm.forward

    backend = aot_autograd(fw_compiler=lambda gm, _: gm.forward, bw_compiler=bw)
    with torch.device("meta"):
        args = [torch.randn(s, requires_grad=True) for s in ((16, 32), (32, 48), (32, 48))]
    torch._dynamo.reset()
    try:
        torch.compile(_mlp(fwd), fullgraph=True, backend=backend)(*args).backward()
    finally:
        torch._dynamo.reset()
    return seen


@pytest.mark.parametrize("pair", ["glu", "glu_traced"])
def test_a_saved_activation_read_after_the_write_is_left_to_inductor(pair, request):
    """A node after the op that reads the saved activation's old value: writing over it would change that read, so
    the pass leaves it (Inductor then copies it first); the other buffer is still overwritten in place."""
    fwd, _ = request.getfixturevalue(pair)

    def read_a_later(graph):
        node = next(n for n in graph.nodes if donated._writes(n))
        a = donated._writes(node)[0][0]
        with graph.inserting_after(node):
            graph.call_function(torch.ops.aten.neg.default, (a,))  # dead, but the pass must not assume so

    untouched = _traced_backward(fwd)
    assert len(untouched) == 1 and len(untouched[0]) == 2
    edited = _traced_backward(fwd, read_a_later)
    assert len(edited) == 1 and len(edited[0]) == 1 and edited[0][0] != untouched[0][0]


def test_functionalization_takes_the_declared_writes_not_inductors_analysis(glu_traced):
    """Here Inductor's analysis of the kernels cannot run (no GPU driver: it then says every argument is written,
    as it does on a GPU for kernels it cannot analyse). Functionalization clones only what the declarations say
    each kernel writes: the forward its output, the backward its two ``mutates=True`` inputs, not ``dc``."""
    from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_functional

    clones = []

    def note(graph):
        clones.extend(n.kwargs["tensors_to_clone"] for n in graph.nodes if n.target is triton_kernel_wrapper_functional)

    from torch._dynamo.backends.common import aot_autograd

    backend = aot_autograd(fw_compiler=lambda gm, _: note(gm.graph) or gm.forward,
                           bw_compiler=lambda gm, _: note(gm.graph) or gm.forward)  # fmt: skip
    with torch.device("meta"):
        args = [torch.randn(s, requires_grad=True) for s in ((16, 32), (32, 48), (32, 48))]
    torch._dynamo.reset()
    try:
        torch.compile(_mlp(glu_traced[0]), fullgraph=True, backend=backend)(*args).backward()
    finally:
        torch._dynamo.reset()
    assert clones == [["c_ptr"], ["a_ptr", "b_ptr"]]


# -- compile="kernel" | "reference" | "auto" ------------------------------------------------------------------------


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n) * 3, mask=i < n)


def _scale(name, **kw):
    return ok.triton_op(f"{NS}::{name}", scale_kernel, inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise(block=("BLOCK",)),
                        constexprs={"BLOCK": 256}, **kw)  # fmt: skip


def _traced_graph(fn, *args):
    from torch._dynamo.backends.common import aot_autograd

    graphs = []
    backend = aot_autograd(fw_compiler=lambda gm, _: graphs.append(gm) or gm.forward)
    torch._dynamo.reset()
    try:
        torch.compile(fn, fullgraph=True, backend=backend)(*args)
    finally:
        torch._dynamo.reset()
    return graphs[0].code


def test_compile_mode_is_checked_at_registration():
    with pytest.raises(ok.SpecError, match=r"compile.*'fast' is not a compile mode.*compile='kernel'"):
        _scale("bad_mode", compile="fast", reference=lambda x: x * 3)
    with pytest.raises(ok.SpecError, match=r"compile='auto' traces the op's reference.*has none.*pass reference="):
        _scale("no_reference", compile="auto")


@pytest.mark.parametrize("mode", ["kernel", "reference"])
def test_what_torch_compile_traces_follows_the_mode(mode):
    """Traced on meta tensors: "kernel" keeps the kernel (here the op whole: with a reference, a tensor that is not
    CUDA runs the reference eagerly, and on a GPU the kernel is handed to Inductor), "reference" traces the
    reference's torch ops (which Inductor fuses with the add after it)."""
    op = _scale(f"scale_{mode}", compile=mode, reference=lambda x: x * 3)
    with torch.device("meta"):
        x = torch.randn(64)
    code = _traced_graph(lambda x: op(x) + 1, x)
    assert (f"{NS}.scale_{mode}.default" in code) == (mode == "kernel")
    assert ("aten.mul" in code) == (mode == "reference")
    assert op.compile_choices() == {}


def test_a_traced_reference_of_another_dtype_is_refused():
    """compile="reference" whose reference returns float32 for a bfloat16 op: torch.compile refuses the trace (the
    fake says bfloat16; the graph would change the model's dtypes silently); one that casts back traces."""
    wrong = _scale("scale_ref_dtype", compile="reference", reference=lambda x: x.float() * 3)
    right = _scale("scale_ref_cast", compile="reference", reference=lambda x: (x.float() * 3).to(x.dtype))
    with torch.device("meta"):
        x = torch.randn(64, dtype=torch.bfloat16)
    with pytest.raises(Exception) as e:
        _traced_graph(lambda x: wrong(x) + 1, x)
    cause = e.value
    while cause is not None and not isinstance(cause, ok.SpecError):
        cause = cause.__cause__ or cause.__context__
    assert cause is not None and "reference returned [torch.float32]; the op declares [torch.bfloat16]" in str(cause)
    assert "aten.mul" in _traced_graph(lambda x: right(x) + 1, x)


def test_auto_keeps_the_faster_of_two_timings(monkeypatch, tmp_path):
    """compile="auto" times the kernel and the compiled reference once per shape bucket and traces the faster;
    the decision is remembered per bucket and stored with the tuning decisions. Here on CPU tensors (the op's CPU
    kernel stands in for the kernel, the reference is compiled by Inductor for the CPU) with two given timings:
    the tuner's timer answers for the kernel first, then the reference."""
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    from opsmith.inductor import choice as ch

    op = _scale("scale_auto", compile="auto", reference=lambda x: x * 3)
    c = op.compile_choice
    given: list[float] = []
    runs: list[int] = []

    def timer(run, restore):
        restore()
        run()
        runs.append(1)
        return [given.pop(0)]

    c.tuner.timer = timer
    # meta tensors are not CUDA: auto keeps the kernel there, and decides nothing
    with torch.device("meta"):
        assert f"{NS}.scale_auto.default" in _traced_graph(op, torch.randn(64)) and c.chosen == {}
    small, large = torch.randn(64), torch.randn(5000)
    given[:] = [2.0, 1.0]  # kernel, reference: the reference wins
    assert c._decide(op, c.bucket((small,)), None, (small,)) == ch.REFERENCE
    given[:] = [1.0, 3.0]  # the kernel wins
    assert c._decide(op, c.bucket((large,)), None, (large,)) == ch.KERNEL
    assert len(runs) == 4
    assert c._decide(op, c.bucket((small,)), None, (small,)) == ch.REFERENCE and len(runs) == 4  # remembered
    assert {k: (v["choice"], v["kernel_ms"], v["reference_ms"]) for k, v in op.compile_choices().items()} == {
        ("float32", 64): ("reference", 2.0, 1.0),
        ("float32", 8192): ("kernel", 1.0, 3.0),
    }
    table = ch.choices_table()
    rows = [line.split() for line in table.splitlines()]
    assert [f"{NS}::scale_auto", "auto", "float32,64", "reference", "2.0000", "1.0000"] in rows, table
    # stored with the tuning decisions: another process (a fresh tuner) reads it without timing
    assert (
        c.tuner.cached(("float32", 64), None) == ch.REFERENCE and c.tuner.cached(("float32", 8192), None) == ch.KERNEL
    )


def test_auto_measures_inside_a_real_trace(monkeypatch, tmp_path):
    """The measurement runs while AOTAutograd traces the model, forward and backward: its own torch.compile of the
    reference must work there (torch 2.11's Dynamo refuses to compile while make_fx's FX-tracing flag is set; the
    H100 run found it, and choice.py clears the flag for the measurement; torch 2.13 no longer looks at it while
    compiling). On CPU tensors, with the CPU admitted as a timed device and given timings, both ops are decided
    inside the trace and the traced graph is the reference's."""
    from opsmith.inductor import choice as ch

    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ch, "TIMED_DEVICES", {"cuda", "cpu"})
    # the backward calls an "auto" op too: decided while the joint graph's backward is traced (the GPU's case)
    back = _scale("scale_auto_traced_backward", compile="auto", reference=lambda x: x * 3)
    op = _scale("scale_auto_traced", compile="auto", reference=lambda x: x * 3,
                backward=ok.Backward(lambda grad_y: back(grad_y), args=("grad_y",), grads=("x",)))  # fmt: skip
    given = [2.0, 1.0, 2.0, 1.0]  # kernel, reference, for each op

    def timer(run, restore):
        restore()
        run()
        return [given.pop(0)]

    op.compile_choice.tuner.timer = back.compile_choice.tuner.timer = timer
    x = torch.randn(64, requires_grad=True)
    code = _traced_graph(lambda x: op(x) + 1, x)  # the joint graph is traced
    assert "aten.mul" in code and f"{NS}.scale_auto_traced" not in code
    assert [v["choice"] for v in op.compile_choices().values()] == ["reference"]
    assert [v["choice"] for v in back.compile_choices().values()] == ["reference"]


def test_a_triton_op_is_shaped_for_epilogue_fusion_into_its_kernel():
    """torch 2.13's ``epilogue_fusion_user_defined_triton_kernel`` fuses a pointwise epilogue into a user Triton
    kernel when the kernel stores once, into the one tensor it writes, and the graph created that tensor empty
    (``ir.UserDefinedTritonKernel.can_fuse_epilogue``). opsmith's traced implementation gives it that shape: the
    output comes from ``new_empty`` (lowered as Inductor's empty buffer) and is the only tensor the functional call
    writes (the declaration's writes). An ``init=`` output is filled first: not empty, so never fused."""
    op = _scale("scale_fusable")
    with torch.device("meta"):
        code = _traced_graph(lambda x: op(x).relu(), torch.randn(64))
    lines = code.splitlines()
    call = next(line for line in lines if "triton_kernel_wrapper_functional(" in line)
    assert "tensors_to_clone = ['y_ptr']" in call and "'y_ptr': new_empty" in call
    assert any(line.strip().startswith("new_empty = torch.ops.aten.new_empty") for line in lines)
    assert any("aten.relu" in line for line in lines)  # the epilogue Inductor would fuse


@triton.jit
def axpby_kernel(x_ptr, y_ptr, out_ptr, alpha, n, beta: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n)
    tl.store(out_ptr + i, alpha * x + beta * tl.load(y_ptr + i, mask=i < n), mask=i < n)


def test_float_scalars_reach_the_kernel_as_fp32_under_inductor_through_an_entry():
    """A float scalar would reach a user Triton kernel as fp64 under Inductor: the op hands Inductor a generated
    entry that casts it to fp32 and calls the kernel (inlined), instead of staying whole. Traced on meta tensors:
    the graph launches the entry with the float, the entry's source casts exactly the float arguments, and the
    kernel it calls is found by its own name (Inductor copies it into its code under that name)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_functional

    launched = []

    def note(gm, _):
        for n in gm.graph.nodes:
            if n.target is triton_kernel_wrapper_functional:
                launched.append((kernel_side_table.get_kernel(n.kwargs["kernel_idx"]), dict(n.kwargs["kwargs"])))
        return gm.forward

    op = ok.triton_op(f"{NS}::axpby", axpby_kernel,
                      inputs=[ok.InputDecl("x"), ok.InputDecl("y", shape=ok.SameAs("x")), ok.ScalarInput("alpha", float)],
                      outputs=[ok.OutputDecl("out", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                      geometry=ok.Elementwise(block=("BLOCK",)), constexprs={"BLOCK": 256, "beta": 2.0})  # fmt: skip
    with torch.device("meta"):
        x = torch.randn(64)
    torch._dynamo.reset()
    try:
        torch.compile(lambda x: op(x, x, 0.5), fullgraph=True, backend=aot_autograd(fw_compiler=note))(x)
    finally:
        torch._dynamo.reset()
    [(launched_kernel, kwargs)] = launched
    entry = donated._jit_function(launched_kernel)  # torch wraps it in an Autotuner holding num_warps/num_stages
    assert kwargs["alpha"] == 0.5
    assert entry.fn.__name__ == "axpby_kernel__fp32_entry"
    # tl.cast, which torch's analysis of the writes can run with alpha inlined as a Python float; .to() it cannot
    assert "tl.cast(alpha, tl.float32)" in entry.src and ".to(" not in entry.src and "tl.cast(x_ptr" not in entry.src
    assert "axpby_kernel(x_ptr=x_ptr, y_ptr=y_ptr, out_ptr=out_ptr, alpha=tl.cast(alpha, tl.float32), n=n, beta=beta, " \
           "BLOCK=BLOCK)" in entry.src.replace("\n", " ")  # fmt: skip
    assert entry.fn.__globals__["axpby_kernel"] is axpby_kernel
    from opsmith.flavors.triton_traced import _WHOLE

    assert f"{NS}::axpby" not in _WHOLE


def _launched(fn, *args):
    """The @triton.jit functions (and kwargs) the traced graph of fn(*args) launches."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_functional

    seen = []

    def note(gm, _):
        for n in gm.graph.nodes:
            if n.target is triton_kernel_wrapper_functional:
                kernel = donated._jit_function(kernel_side_table.get_kernel(n.kwargs["kernel_idx"]))
                seen.append((kernel, dict(n.kwargs["kwargs"])))
        return gm.forward

    torch._dynamo.reset()
    try:
        torch.compile(fn, fullgraph=True, backend=aot_autograd(fw_compiler=note))(*args)
    finally:
        torch._dynamo.reset()
    return seen


def test_each_trace_launches_its_own_kernel_after_a_dynamo_reset():
    """torch._dynamo.reset() empties torch's kernel side table; a wrapper made before it would launch whichever
    kernel later took its index. Traced, reset, another op traced first, then traced again: the same kernel."""
    scale = _scale("scale_reset")
    other = _scale("scale_reset_other")
    with torch.device("meta"):
        x = torch.randn(64)
    assert [k for k, _ in _launched(scale, x)] == [scale_kernel]
    _launched(lambda x: other(x) * 2 + other(x.sin()), x)  # other kernels take the first indices now
    glu = _register("glu_reset", with_reference=False)[0]
    _launched(glu, x, x)
    assert [k.fn.__name__ for k, _ in _launched(lambda x: glu(x, x) + scale(x), x)] == ["glu_kernel", "scale_kernel"]


@triton.jit
def offset_kernel(x_ptr, y_ptr, n, offset, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n) + (offset % 7), mask=i < n)


def test_a_constant_int_past_32_bits_keeps_the_op_whole_for_that_trace():
    """Inductor crashes typing a constant int argument past 32 bits (``expr_fits_within_32bit`` on a Python int):
    that trace keeps the op whole (the graph calls it, and it launches the value as i64), while a value that fits
    hands the kernel to Inductor as before; the op is not marked whole for later traces."""
    from opsmith.flavors.triton_traced import _WHOLE

    op = ok.triton_op(f"{NS}::offset", offset_kernel, inputs=[ok.InputDecl("x"), ok.ScalarInput("offset", int)],
                      outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                      geometry=ok.Elementwise(block=("BLOCK",)), constexprs={"BLOCK": 256})  # fmt: skip
    with torch.device("meta"):
        x = torch.randn(64)
    [(kernel, kwargs)] = _launched(lambda x: op(x, 2**31 - 1), x)
    assert kernel is offset_kernel and kwargs["offset"] == 2**31 - 1
    for wide in (2**31, -(2**31) - 1, 1_099_511_640_121):
        assert _launched(lambda x, w=wide: op(x, w), x) == []
    assert _traced_graph(lambda x: op(x, 2**40), x).count(f"{NS}.offset.default") == 1
    assert [k for k, _ in _launched(lambda x: op(x, 5), x)] == [offset_kernel]
    assert f"{NS}::offset" not in _WHOLE
