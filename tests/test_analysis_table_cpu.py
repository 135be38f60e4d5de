"""Issue 61, item 5: the analysis measured over a table (tests/analysis_table.py): every correct kernel style
registers with no finding, every planted misuse is found with the words that name it. Prints the table's counts;
benchmarks/bench_analysis.py measures the registration time the analysis adds, per flavor."""

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

import opsmith as ok

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
pytest.importorskip("triton", reason="the table's kernels are Triton's and CUDA C++'s")
import analysis_table as A  # noqa: E402

NS = "t_analysis_table"
LIGER = importlib.util.find_spec("liger_kernel") is not None
FLA = importlib.util.find_spec("fla") is not None


def findings(build, ns):
    """(the op names an entry registered, the DeclarationWarnings said about them)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = build(ns)
    ops = got if isinstance(got, list) else [got]
    names = [getattr(op, "record", getattr(getattr(op, "op", None), "record", None)).op_name for op in ops]
    said = [str(w.message) for w in seen if issubclass(w.category, ok.DeclarationWarning)]
    return names, [m for m in said if any(m.startswith(n + ":") for n in names)]


def test_the_table_has_at_least_25_correct_styles_silent_and_15_misuses_found():
    correct = {**A.CORRECT, **(A.LIGER_CORRECT if LIGER else {}), **(A.FLA_CORRECT if FLA else {})}
    loud = {}
    for k, (name, build) in enumerate(correct.items()):
        _, said = findings(build, f"{NS}_ok{k}")
        if said:
            loud[name] = said
    assert loud == {}, loud
    missed = {}
    for k, (name, (build, words)) in enumerate(A.MISUSES.items()):
        _, said = findings(build, f"{NS}_bad{k}")
        if not any(words in m for m in said):
            missed[name] = said
    assert missed == {}, missed
    import declared_kernels

    from opsmith.analysis.python_body import python_reads

    for name, (kernel, tensor, stride) in A.READ_MISUSES.items():
        reads = python_reads(getattr(declared_kernels, kernel))
        assert stride in reads.certain[tensor], (name, reads)
    found = len(A.MISUSES) + len(A.READ_MISUSES)
    print(f"analysis table: {len(correct)} correct styles, no finding; {found} planted misuses, each found; "
          f"{len(A.MISSED)} known miss(es): {sorted(A.MISSED)}")  # fmt: skip
    assert len(correct) >= 25 and found >= 15


@pytest.mark.parametrize("name", sorted(A.MISSED))
def test_a_known_miss_is_still_silent_and_says_why(name):
    """What the analysis does not find yet, kept honest: when it starts finding one, move it to MISUSES."""
    build, why = A.MISSED[name]
    _, said = findings(build, f"{NS}_miss")
    assert said == [] and why, said
