"""Issue 60 (published kernels, round four) on CPU: the forms those kernels are written in, each declared as
published code writes it. Values come from the interpreter check (``round_four_interpreter_check.py``, a process
of its own under TRITON_INTERPRET=1); registration, the fake and the native library's dry run are checked here."""

import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok

triton = pytest.importorskip("triton", reason="the round-four kernels are Triton's (the test extra installs Triton)")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import round_four_kernels as K  # noqa: E402
from differential import Registered, both_dry_runs, tensor_call  # noqa: E402
from interpreted import run_interpreted  # noqa: E402

NS = "t_r4cpu"
NONE = {"t": "none"}


def _with_flag(name, kernel, extras=None):
    return ok.triton_op(f"{NS}::{name}", kernel,
                        inputs=[ok.InputDecl("x", torch.float32), ok.InputDecl("b", torch.float32, optional=True)],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=extras or [ok.Numel("x", name="n"), ok.Present("b", name="HAS_B")],
                        geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)), constexprs={"BLOCK": 64})  # fmt: skip


def test_a_present_flag_a_heuristic_also_sets_is_the_flag_where_both_agree():
    """Item 3: unsloth's RoPE reads back the flag its host passes; another kernel derives it from the pointer.
    Both agree with ``Present`` on every call: the heuristic is dropped and the flag compiles each kernel (it
    was refused as "set twice"). Values: the interpreter check."""
    for kernel in (K.add_readback, K.add_derived):
        assert _with_flag(kernel.fn.__name__, kernel).record.heuristics == ()


@pytest.mark.slow
def test_the_native_library_compiles_the_flag_as_the_python_path_does():
    for kernel in (K.add_readback, K.add_derived):
        op = _with_flag(f"{kernel.fn.__name__}_native", kernel)
        calls = [[tensor_call((100,)), tensor_call((100,))], [tensor_call((100,)), NONE]]
        py = both_dry_runs([Registered(op, calls)])
        launches = [py[f"{op.record.op_name}#{k}"]["launches"][0] for k in range(2)]
        assert launches[0]["image"] != launches[1]["image"]  # HAS_B=1 and HAS_B=0: two kernels


def test_a_heuristic_that_can_disagree_with_the_present_flag_is_refused_naming_both():
    with pytest.raises(
        ok.SpecError,
        match=r"heuristics\['HAS_B'\].*set by present\(b\) and by the heuristic, which "
        r"gives \['gt', \['numel', 'i0'\], 4\] where 'b' is given: the two can disagree",
    ):
        _with_flag("by_size", K.add_by_size)
    with pytest.raises(ok.SpecError, match=r"'HAS_B' is set twice: by the extra numel\(x\) and by the heuristic"):
        _with_flag("twice", K.add_derived, [ok.Numel("x", name="n"), ok.Numel("x", name="HAS_B")])


def test_the_interpreter_gives_pytorchs_values_for_every_round_four_form():
    out = run_interpreted("round_four_interpreter_check.py")
    assert "present beside heuristic: add_readback" in out and "present beside heuristic: add_derived" in out
