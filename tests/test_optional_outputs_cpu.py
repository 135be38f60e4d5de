"""Optional outputs (issue 60, item 5) on CPU: ``OutputDecl(optional=True)`` is a ``Tensor?`` return asked for by a
``bool return_<name>=False`` argument. Left out, the kernel gets a null pointer (CUDA C++: llm.c's fused classifier
tests ``probs != NULL``) or, for Triton, None compiled in (its own specialization), and the call returns None in
its place. The Python path, the fake and the native libraries (ATen and stable ABI) agree call for call; JAX's
handler passes the same null pointers; DTensor gives a left-out output no placement; ``opsmith check`` compares
both forms with the reference. Values: the interpreter check (``optional_outputs_interpreter_check.py``)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from differential import Registered, both_dry_runs, compare, native_outcomes, python_outcomes, tensor_call  # noqa: E402
from interpreted import run_interpreted  # noqa: E402
from round_four_cuda import FUSED_CLASSIFIER  # noqa: E402

NS = "t_optout"
FLAGS = [(a, b) for a in (False, True) for b in (False, True)]


def _scalar(v):
    return {"t": "scalar", "v": v}


def _classifier(name: str, outputs=None, extras=None, backward=None):
    """llm.c's fused_classifier (CUDA C++, unchanged): losses always; dlogits and probs where not NULL."""
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
        kernel_source=FUSED_CLASSIFIER, kernel_name="fused_classifier",
        inputs=[ok.InputDecl("logits", shape=("R", "V")), ok.InputDecl("targets", shape=("R",)),
                ok.ScalarInput("dloss", float)],
        outputs=outputs or [ok.OutputDecl("losses", ("R",)),
                            ok.OutputDecl("dlogits", ok.SameAs("logits"), optional=True),
                            ok.OutputDecl("probs", ok.SameAs("logits"), optional=True)],
        extras=extras or [ok.Dim("V")], geometry=ok.Grid(grid=("R",), block=(32,))), backward=backward)  # fmt: skip


@pytest.fixture(scope="module")
def classifier():
    return _classifier("classifier")


def _calls():
    logits, targets = tensor_call((6, 40)), tensor_call((6,), "int64")
    calls = [[logits, targets, _scalar(1.0), _scalar(a), _scalar(b)] for a, b in FLAGS]
    calls += [[logits, targets, _scalar(0.5)],  # both left at the default
              [tensor_call((0, 40)), tensor_call((0,), "int64"), _scalar(1.0), _scalar(True), _scalar(False)],
              [logits, tensor_call((5,), "int64"), _scalar(1.0), _scalar(True), _scalar(True)]]  # fmt: skip
    return calls


def test_the_schema_asks_for_each_and_declaration_mistakes_name_the_fix(classifier):
    assert classifier.record.schema == ("(Tensor logits, Tensor targets, float dloss, bool return_dlogits=False, "
                                        "bool return_probs=False) -> (Tensor, Tensor?, Tensor?)")  # fmt: skip
    losses = ok.OutputDecl("losses", ("R",))
    probs = ok.OutputDecl("probs", ok.SameAs("logits"), optional=True)
    refusals = {
        "not_bool": ([losses, ok.OutputDecl("dlogits", ok.SameAs("logits"), optional="yes"), probs], None, None,
                     r"outputs\[1\].optional: 'yes' is not a bool"),
        "size_read": ([losses, ok.OutputDecl("dlogits", ok.SameAs("logits")), probs], [ok.Size("size(probs, 1)", name="V")],
                      None, r"outputs\[2\].optional: 'probs' is optional, but a launch size, extra or precondition "
                      r"reads its size.*Fix: read the size from the input"),
        "flag_name": ([losses, ok.OutputDecl("return_probs", ok.SameAs("logits")), probs], None, None,
                      r"outputs\[2\].optional: its per-call flag 'return_probs' is already the name of an input or "
                      r"output.*Fix: rename"),
        "backward_value": (None, None, ok.Backward(lambda p: p, args=("grad_losses", "probs"), grads=("logits",)),
                           r"backward.args: 'probs' is an optional output's.*Fix: compute what the backward needs"),
        "backward_grad": (None, None, ok.Backward(lambda g: g, args=("grad_probs",), grads=("logits",)),
                          r"backward.args: 'grad_probs' is an optional output's"),
    }  # fmt: skip
    for name, (outputs, extras, backward, match) in refusals.items():
        with pytest.raises(ok.SpecError, match=match):
            _classifier(name, outputs, extras, backward)


def test_a_null_pointer_where_left_out_the_same_on_the_python_path_and_in_the_native_library(classifier):
    """Every combination, the defaults, an empty batch and a mistake: the Python dry run and the ATen library
    (and the fake, on meta tensors) pass the same pointers (NULL where left out) and return None alike."""
    gens = [Registered(classifier, _calls())]
    py = both_dry_runs(gens)
    assert gens[0].fake_bad == []
    name = classifier.record.op_name
    outs = [[o is not None for o in py[f"{name}#{k}"]["outputs"]] for k in range(5)]
    assert outs == [[True, False, False], [True, False, True], [True, True, False], [True, True, True],
                    [True, False, False]]  # fmt: skip
    # (logits, targets, losses, dlogits, probs, dloss, V): dlogits is output 1, probs output 2
    args = [py[f"{name}#{k}"]["launches"][0]["args"][3:5] for k in range(5)]
    assert args == [["null", "null"], ["null", "out2"], ["out1", "null"], ["out1", "out2"], ["null", "null"]], args
    assert py[f"{name}#5"]["ok"] and py[f"{name}#5"]["launches"] == []  # nothing to write
    assert "argument 'targets': expected shape (R,) where R = 6" in py[f"{name}#6"]["error"]


def test_fake_tracing_returns_none_where_left_out(classifier):
    with FakeTensorMode():
        x, t = torch.empty(4, 16), torch.empty(4, dtype=torch.int64)
        got = [[None if o is None else tuple(o.shape) for o in classifier(x, t, 1.0, a, b)] for a, b in FLAGS]
        assert got == [[(4,), None, None], [(4,), None, (4, 16)], [(4,), (4, 16), None], [(4,), (4, 16), (4, 16)]]
        assert classifier(x, t, 1.0, return_probs=True)[2].shape == (4, 16)


@pytest.mark.slow
def test_the_stable_abi_library_agrees(classifier, tmp_path):
    gens = [Registered(classifier, _calls())]
    py, cases = python_outcomes(gens)
    nat = native_outcomes(gens, cases, tmp_path, stable=True)
    assert compare(gens, py, nat, stable=True) == []


@pytest.mark.slow
def test_triton_compiles_none_in_as_its_own_specialization_on_both_paths():
    """The Triton classifier: four kernels (each optional output None or not), a None parameter left out of the
    arguments; the Python path and the native library choose the same kernel and pack the same bytes."""
    pytest.importorskip("triton", reason="the test extra installs Triton")
    from round_four_ops import optional_classifier

    op = optional_classifier(NS)
    assert [k for k, _ in op.variants.spec_layout].count("none") == 2
    logits, targets = tensor_call((6, 40)), tensor_call((6,), "int64")
    py = both_dry_runs([Registered(op, [[logits, targets, _scalar(1.0), _scalar(a), _scalar(b)] for a, b in FLAGS])])
    launches = [py[f"{op.record.op_name}#{k}"]["launches"][0] for k in range(4)]
    assert len({x["image"] for x in launches}) == 4
    assert [len(x["args"]) for x in launches] == [5, 6, 6, 7] and "null" not in str(launches)


def test_the_interpreter_gives_pytorchs_values_in_every_form():
    stdout = run_interpreted("optional_outputs_interpreter_check.py")
    for line in ("eager: every combination", "fake: None where left out", "torch.compile(fullgraph=True): both forms",
                 "torch.export:", "autograd: the loss differentiates"):  # fmt: skip
        assert line in stdout, stdout


def test_dtensor_gives_a_left_out_output_no_placement():
    """The flag decides: asked for, the output takes the rows' placement; left out (or at its default, which
    DTensor's arguments omit), None. tests/distributed_check.py runs it on two ranks."""
    pytest.importorskip("triton", reason="the test extra installs Triton")
    from types import SimpleNamespace

    from round_four_ops import optional_classifier

    from opsmith.distributed.sharding import strategies

    plan = optional_classifier(NS).sharding_plan
    x, t = SimpleNamespace(shape=torch.Size([6, 40])), SimpleNamespace(shape=torch.Size([6]))
    for args, live in (((x, t, 1.0, True, False), [True, True, False]), ((x, t, 1.0, False, True), [True, False, True]),
                       ((x, t, 1.0), [True, False, False])):  # fmt: skip
        got = strategies(plan, *args)
        assert any(outs[0].is_shard() for outs, _ in got)
        assert all([o is not None for o in outs] == live for outs, _ in got), got


_NATIVE_AUTOGRAD = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import opsmith as ok
from opsmith import native
from test_optional_outputs_cpu import _classifier
bwd_src = 'extern "C" __global__ void ce_bwd(const float* g, const float* logits, const long long* t, float* dx, int V) {}'
bwd = ok.cuda_kernel_op("t_optout_native::ce_bwd", ok.KernelSpec(kernel_source=bwd_src, kernel_name="ce_bwd",
    inputs=[ok.InputDecl("g", shape=("R",)), ok.InputDecl("logits", shape=("R", "V")), ok.InputDecl("t", shape=("R",))],
    outputs=[ok.OutputDecl("dx", ok.SameAs("logits"))], extras=[ok.Dim("V")], geometry=ok.Grid(grid=("R",), block=(32,))))
fwd = _classifier("with_backward", backward=ok.Backward(bwd, args=("grad_losses", "logits", "targets"), grads=("logits",)))
plain = _classifier("without_backward")
native.use([fwd, bwd, plain], dry_run=True)
out = {"serving": [fwd.serving, plain.serving]}
x = torch.randn(4, 16, requires_grad=True)  # no backward: its outputs come through the refusing node, None kept
out["plain"] = [[o is not None for o in plain(x, torch.zeros(4, dtype=torch.int64), 1.0, a, b)]
                for a, b in [(False, True), (True, False)]]
for a, b in [(False, False), (True, False), (False, True), (True, True)]:
    x = torch.randn(4, 16, requires_grad=True)
    loss, dlogits, probs = fwd(x, torch.zeros(4, dtype=torch.int64), 1.0, a, b)
    loss.sum().backward()
    out[f"{a} {b}"] = [dlogits is not None, probs is not None, list(x.grad.shape),
                       any(o is not None and o.requires_grad for o in (dlogits, probs))]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_native_librarys_autograd_kernel_returns_none_and_differentiates_the_loss():
    from interpreted import child_json

    got = child_json(_NATIVE_AUTOGRAD)
    assert got.pop("serving") == ["native", "native"]
    assert got.pop("plain") == [[True, False, True], [True, True, False]]
    assert got == {"False False": [False, False, [4, 16], False], "True False": [True, False, [4, 16], False],
                   "False True": [False, True, [4, 16], False], "True True": [True, True, [4, 16], False]}, got  # fmt: skip


@pytest.mark.slow
def test_jax_passes_null_pointers_and_returns_none(classifier):
    """The XLA handler (dry run on JAX's CPU platform): a left-out output is a zero-byte result it never binds, a
    null pointer to the kernel, None to the caller; its launches are the ATen library's."""
    jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
    import warnings

    import jax.numpy as jnp
    from jax_x64 import x64

    from opsmith.jax import DryRunWarning, jax_op

    f = jax_op(classifier, dry_run=True)
    with jax.default_device(jax.devices("cpu")[0]), warnings.catch_warnings(), x64():  # x64: int64 targets
        warnings.simplefilter("ignore", DryRunWarning)
        x, t = jnp.ones((6, 40), jnp.float32), jnp.zeros((6,), jnp.int64)
        for flags, by_name, asked in [
            ((), {}, [False, False]),
            ((True, False), {}, [True, False]),
            ((), {"return_probs": True}, [False, True]),
            ((True, True), {}, [True, True]),
        ]:
            got = f(x, t, 1.0, *flags, **by_name)  # (losses, dlogits, probs)
            (launch,) = json.loads(f.handlers().take_dry_run())
            slots = [launch["args"][16 * k : 16 * k + 16] for k in range(7)]
            assert [g is not None for g in got[1:]] == asked == [s != "0" * 16 for s in slots[3:5]], (flags, by_name)
            assert got[0].shape == (6,) and all(g.shape == (6, 40) for g in got[1:] if g is not None)


def test_opsmith_check_compares_both_forms_with_the_reference():
    """check asks for every optional output in its samples but the non-contiguous one, which leaves them out: a
    reference that returns probs unasked is caught (planted), the right one passes."""
    code = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import opsmith as ok
from round_four_ops import optional_classifier
op = optional_classifier("t_optout_check")
def ref(logits, targets, dloss, return_probs=False, return_dlogits=False, always=False):
    p = torch.softmax(logits, -1)
    d = (p - torch.nn.functional.one_hot(targets, logits.shape[-1])) * dloss
    loss = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    return loss, p if (return_probs or always) else None, d if return_dlogits else None
inputs = lambda s, dt, dev: (torch.randn(s, dtype=dt, device=dev), torch.randint(0, s[-1], s[:-1], device=dev), 0.5)
out = {}
for name, r in (("right", ref), ("planted", lambda *a: ref(*a, always=True))):
    rep = ok.check(ok.CheckCase(op, inputs=inputs, reference=r, shapes=[(4, 33), (7, 64)], dtypes=[torch.float32]),
                   only=["numerics"], examples=3, device="cpu")  # interpreted: CPU tensors, even beside a GPU
    out[name] = [list(row) for row in rep.rows]
print(json.dumps(out))
"""
    import os

    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}
    r = subprocess.run([sys.executable, "-c", code, str(HERE)], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["right"][0][:2] == ["numerics", "pass"], got
    assert got["planted"][0][:2] == ["numerics", "FAIL"], got
    assert "False, False) fails" in got["planted"][0][2], got


PRESENT_SRC = r"""
extern "C" __global__ void k(const float* x, float* y, float* p, int n, int has_p) {}
"""


def test_present_of_an_optional_output_is_its_flag_on_both_paths():
    """``Present("p", name="has_p")`` of an optional output passes whether the call asked for it (fla's
    STORE_FINAL_STATE beside its cache_out): 1 and a pointer, or 0 and NULL, the same in the native library."""
    op = ok.cuda_kernel_op(f"{NS}::present_out", ok.KernelSpec(
        kernel_source=PRESENT_SRC, kernel_name="k", inputs=[ok.InputDecl("x", shape=("N",))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x")), ok.OutputDecl("p", ok.SameAs("x"), optional=True)],
        extras=[ok.Numel("x", name="n"), ok.Present("p", name="has_p")], geometry=ok.Elementwise()))  # fmt: skip
    x = tensor_call((40,))
    py = both_dry_runs([Registered(op, [[x, _scalar(True)], [x, _scalar(False)], [x]])])
    args = [py[f"{op.record.op_name}#{k}"]["launches"][0]["args"] for k in range(3)]
    # (x, y, p, n, has_p)
    assert [a[2] for a in args] == ["out1", "null", "null"] and [a[4][:2] for a in args] == ["01", "00", "00"], args


def test_present_of_an_input_is_an_int_in_python_expressions():
    """``present(cu_seqlens)`` times a size: a bool times a symbolic size is sympy's BooleanAtom, which torch 2.11
    refuses ("BooleanAtom not allowed in this context": fla's token shift under torch.compile(dynamic=True) on the
    H200). The generated Python gives 0 or 1."""
    from opsmith.declare.expr import to_python

    text = to_python(["present", "i0"], {"i0": "w"})
    for w, want in ((None, 0), (torch.ones(1), 1)):
        got = eval(text, {"w": w})  # our own expression's text
        assert got == want and type(got) is int, (text, got)  # a bool here multiplies into a BooleanAtom
