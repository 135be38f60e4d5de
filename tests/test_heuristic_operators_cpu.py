"""A Triton heuristic's operators with Python's semantics (issue 49, item 5): ``&``, ``|``, ``^``, ``~``, shifts,
powers and ``abs`` trace into size expressions that give what Python gives, for every value on a grid; what no
size expression holds is refused at registration with a SpecError naming the operator; and a heuristic over an
int scalar's bits picks the kernel Triton's own launcher picks (in the interpreter)."""

import itertools

import pytest

import opsmith as ok
from opsmith.declare.expr import EXPR_GLOBALS, to_python
from opsmith.declare.symbolic import Sym, trace

triton = pytest.importorskip("triton", reason="heuristics are Triton's (the test extra installs Triton)")

from interpreted import run_interpreted  # noqa: E402

TRACED = {
    "(f & 2) != 0": lambda a: (a["f"] & 2) != 0,
    "f & 7": lambda a: a["f"] & 7,
    "f & 10": lambda a: a["f"] & 10,
    "f | 5": lambda a: a["f"] | 5,
    "f ^ 6": lambda a: a["f"] ^ 6,
    "3 | f": lambda a: 3 | a["f"],
    "True & f": lambda a: True & a["f"],
    "~f": lambda a: ~a["f"],
    "~(f == 0)": lambda a: ~(a["f"] == 0),
    "f >> 2": lambda a: a["f"] >> 2,
    "f << 3": lambda a: a["f"] << 3,
    "f ** 3": lambda a: a["f"] ** 3,
    "f ** 0": lambda a: a["f"] ** 0,
    "abs(f - g)": lambda a: abs(a["f"] - a["g"]),
    "(f == 0) & (g == 1)": lambda a: (a["f"] == 0) & (a["g"] == 1),
    "(f == 0) | (g == 1)": lambda a: (a["f"] == 0) | (a["g"] == 1),
    "(f == 0) ^ (g == 1)": lambda a: (a["f"] == 0) ^ (a["g"] == 1),
}


@pytest.mark.parametrize("name", list(TRACED))
def test_an_operator_traces_to_what_python_computes(name):
    fn = TRACED[name]
    code = to_python(trace(fn, {"f": Sym(["var", "f"]), "g": Sym(["var", "g"])}), {"f": "f", "g": "g"})
    for f, g in itertools.product(range(-17, 18), (-1, 0, 1, 2)):
        want, got = fn({"f": f, "g": g}), eval(code, dict(EXPR_GLOBALS), {"f": f, "g": g})
        assert got == want and bool(got) == bool(want), (name, f, g, got, want, code)


def _scale_kernel(heuristic):
    from heuristic_kernels import flagged_scale

    return triton.heuristics({"TWICE": heuristic, "THRICE": lambda a: False})(flagged_scale.fn)


@pytest.mark.parametrize(("heuristic", "why"), [
    (lambda a: (a["flags"] & a["n"]) != 0, r"applies '&' to two values that vary per call"),
    (lambda a: (a["flags"] >> a["n"]) != 0, r"shifts by a value that varies per call \('>>'\)"),
    (lambda a: 2 ** a["flags"] > 4, r"raises to a power that varies per call \('\*\*'\)"),
    (lambda a: a["flags"] ** 9 > 4, r"to the power 9 \('\*\*'\)"),
    (lambda a: (a["flags"] & -2) != 0, r"applies '&' with the mask -2"),
])  # fmt: skip
def test_what_no_size_expression_holds_is_refused_naming_the_operator(heuristic, why):
    with pytest.raises(ok.SpecError, match=r"heuristics\['TWICE'\]: the heuristic cannot be computed .*" + why):
        ok.triton_op(f"t_heur_bits::refused_{abs(hash(why)) % 10**6}", _scale_kernel(heuristic),
                     inputs=[ok.InputDecl("x"), ok.ScalarInput("flags", int)],
                     outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                     geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)),
                     autotune=ok.Autotune([ok.Config({"BLOCK": 64})]))  # fmt: skip


def test_a_heuristic_over_an_int_scalars_bits_picks_tritons_kernel():
    assert "checked 17 flags" in run_interpreted("heuristic_interpreter_check.py")
