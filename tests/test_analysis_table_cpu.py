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


def _ttir_reads(kernel):
    """A table kernel read from its TTIR (pointers float32, integers i32, BLOCK 64), made on this machine."""
    import inspect

    from opsmith.analysis.ssa_text import ttir_flows
    from opsmith.flavors.triton_ir import kernel_ttir

    names = list(inspect.signature(kernel.fn).parameters)
    runtime = [n for n in names if n != "BLOCK"]
    signature = {n: "constexpr" if n == "BLOCK" else "*fp32" if n in ("X", "Y") else "i32" for n in names}
    try:
        return ttir_flows(kernel_ttir(kernel, signature, {"BLOCK": 64}), runtime)
    except Exception as e:
        if "Block pointers have been removed" in str(e):  # Triton 3.9 (this machine's); 3.6 (the device's) has them
            return None
        raise


def test_the_table_has_at_least_25_correct_styles_silent_and_15_misuses_found(monkeypatch):
    """Every entry registers as a user would; the analysis reads each kernel from its compiler's IR (Triton's
    TTIR, the PTX NVRTC makes; a CUDA C++ kernel compiled per dtype as one call instantiates it)."""
    import opsmith.analysis as analysis

    where: dict[str, str] = {}

    def spy(source, record=None, sources=()):
        reads = reads_of(source, record, sources)
        where[record.op_name] = (source.flavor, getattr(source, "specialized", False), reads and reads.where)
        return reads

    reads_of = analysis.reads_of
    monkeypatch.setattr(analysis, "reads_of", spy)
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
    expected = {"triton": "the kernel's TTIR", "cuda": "the kernel's PTX"}
    off = {op: w for op, (flavor, _, w) in where.items() if w != expected[flavor]}
    assert off == {}, off
    import declared_kernels

    from opsmith.analysis.python_body import python_reads

    for name, (kernel, tensor, stride) in A.READ_MISUSES.items():
        for reads in (python_reads(getattr(declared_kernels, kernel)), _ttir_reads(getattr(declared_kernels, kernel))):
            assert reads is None or stride in reads.certain[tensor], (name, reads)
    for name, (kernel, tensor, stride) in A.READ_CORRECT.items():
        for reads in (python_reads(kernel), _ttir_reads(kernel)):
            assert reads is None or (stride not in reads.certain[tensor] and stride in reads.certain["X"]), (
                name,
                reads,
            )
    found = len(A.MISUSES) + len(A.READ_MISUSES)
    ir = sum(w in expected.values() for *_, w in where.values())
    print(
        f"analysis table: {len(correct) + len(A.READ_CORRECT)} correct styles, no finding; {found} planted misuses, "
        f"each found; {ir} of {len(where)} ops read from their IR (TTIR, PTX)"
    )
    assert len(correct) >= 25 and found >= 15
