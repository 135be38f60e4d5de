"""The planted bugs of issue 47 (a declaration checked against its kernel; a check a user can trust): each puts
one symptom the issue met back, and names the tests that must fail with it."""

from __future__ import annotations

from mutant_cases import Mutant

T = "tests/test_check_table_cpu.py"
A = "tests/test_analysis_cpu.py"
MUTANTS = [
    Mutant(
        "check-samples-unfitted",
        "check's samples ignore the op's preconditions (InputError counted as FAIL)",
        "opsmith/checking/samples.py",
        "        first = self.accepts(shape, dtype)\n",
        "        first = True\n",
        (T,),
    ),
    Mutant(
        "check-export-fresh-scalars",
        "the export row reruns with another int scalar than it exported",
        "opsmith/checking/harness.py",
        "        fresh = tuple(f if isinstance(f, torch.Tensor) else a for f, a in",
        "        fresh = tuple(f if isinstance(f, torch.Tensor) else f for f, a in",
        (T,),
    ),
    Mutant(
        "check-autograd-every-output",
        "the autograd row differentiates a non-differentiable float32 statistic",
        "opsmith/checking/harness.py",
        "        keep = [k for k, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.requires_grad]",
        "        keep = [k for k, o in enumerate(outs) if isinstance(o, torch.Tensor)]",
        (T,),
    ),
    Mutant(
        "empty-input-refused-despite-init",
        "an empty input is refused although every output declares init=",
        "opsmith/plan/lowering.py",
        "        filled = all(o.init is not None for o in record.outputs)",
        "        filled = False",
        (T, "tests/test_declared_inputs_cpu.py"),
    ),
    Mutant(
        "reference-served-as-returned",
        "a reference returning its input is served aliased",
        "opsmith/torchlib/reference.py",
        "        got = _fresh(got, args)\n",
        "\n",
        (T,),
    ),
    Mutant(
        "check-rows-in-process",
        "a crashing row takes the whole check down",
        "opsmith/checking/harness.py",
        "    isolate = bool(isolate) and can_fork()",
        "    isolate = False",
        (T,),
    ),
    Mutant(
        "check-explains-nothing",
        "a failing numerics row does not say why",
        "opsmith/checking/numerics.py",
        "    why = explain(case, args, dt, passes, shape, solver)",
        '    why = ""',
        (T,),
    ),
    Mutant(
        "analysis-off",
        "the declaration is not checked against the kernel",
        "opsmith/analysis/__init__.py",
        "    reads = reads_of(sources[0], record, sources)\n",
        "    reads = None\n",
        (A, T),
    ),
    Mutant(
        "analysis-unread-kept",
        "an unread stride's axis stays addressable",
        "opsmith/analysis/diagnose.py",
        "                    if (r, e.expr[2]) not in covered:",
        "                    if False:",
        (A, T),
    ),
    Mutant(
        "analysis-no-sharing",
        "a stride addressing another tensor is not shared",
        "opsmith/analysis/diagnose.py",
        "            new[k] = Stride(group, d.axis, dtype=d.dtype, name=d.name)",
        "            pass",
        (A, T),
    ),
    Mutant(
        "analysis-load-address-flows",
        "a loaded value carries its address's dependencies (false sharing)",
        "opsmith/analysis/python_body.py",
        '        if isinstance(n, ast.Call) and _callee(n) in ("load",',
        '        if isinstance(n, ast.Call) and _callee(n) in ("no-load",',
        (A,),
    ),
    Mutant(
        "dtype-set-unchecked",
        "a dtype outside the declared set reaches the kernel",
        "opsmith/plan/lowering.py",
        "        if a.dtype or a.dtypes:",
        "        if a.dtype:",
        ("tests/test_declared_inputs_cpu.py",),
    ),
]
