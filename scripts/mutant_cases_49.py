"""The planted bugs of issue 49 (published kernels, round three): Triton launch parity, backwards over optional
inputs, template types of optional inputs, and the boundary table's written outcomes. Each names the tests
that must fail with it."""

from __future__ import annotations

from mutant_cases import Mutant

P = "tests/test_triton_launch_parity_cpu.py"
S = "tests/test_shared_memory_expr_cpu.py"
OB = "tests/test_optional_backward_cpu.py"
A = "tests/test_audit_survivors_cpu.py"
E = "tests/test_error_contract.py::test_each_boundary_row_has_its_written_outcome"
MUTANTS = [
    Mutant(
        "wide-int-narrowed",
        "a 64-bit int scalar is compiled as i32 (its high half dropped)",
        "opsmith/flavors/triton.py",
        '                types[name] = "i32" if name in narrow else _TRITON_SCALAR[ctype]',
        '                types[name] = "i32"',
        (P,),
    ),
    Mutant(
        "wide-int-native-spec",
        "the native library computes every int scalar as within int32 (the i32 kernel for a 64-bit seed)",
        "opsmith/native/dispatch_cpp.py",
        '            out.append(f"int64_t(a{p} < -2147483648LL || a{p} > 2147483647LL)")',
        '            out.append("int64_t(0)")',
        (P + "::test_python_and_native_dry_runs_launch_the_same_kernel_for_every_seed",),
    ),
    Mutant(
        "dtype-of-fixed",
        "a DtypeOf constexpr takes float32 whatever the call's dtype",
        "opsmith/flavors/triton.py",
        "        return {n: triton_dtype(self.op_name, n, dtypes[inp]) for n, inp in self.dtype_of.items()}",
        "        return {n: triton_dtype(self.op_name, n, torch.float32) for n, inp in self.dtype_of.items()}",
        (P,),
    ),
    Mutant(
        "smem-expression-unchecked",
        "a shared memory expression past what a block holds reaches the launch",
        "opsmith/plan/lowering.py",
        "            out.append(GridCheck(c, SMEM_AXIS, e, label, _where(e, labels, label)[0], lo < 0, hi > SMEM_MAX,",
        "            out.append(GridCheck(c, SMEM_AXIS, e, label, _where(e, labels, label)[0], False, False,",
        (S,),
    ),
    Mutant(
        "smem-native-fixed",
        "the native library launches with the variant's shared memory, not the call's expression",
        "opsmith/native/dispatch_cpp.py",
        "{{c, {{g0, g1, g2}}, {{v.bx, v.by, v.bz}}, sm}}",
        "{{c, {{g0, g1, g2}}, {{v.bx, v.by, v.bz}}, v.smem}}",
        (S,),
    ),
    Mutant(
        "optional-backward-edges",
        "the native backward reads needs_input_grad by tensor position, past an absent optional input",
        "opsmith/native/autograd_cpp.py",
        '        needs = ", ".join(f"edge[{tpos[k]}] >= 0 && ctx->needs_input_grad(edge[{tpos[k]}])" for k in grad_of)',
        '        needs = ", ".join(f"ctx->needs_input_grad({tpos[k]})" for k in grad_of)',
        (OB + "::test_the_native_libraries_autograd_kernel",),
    ),
    Mutant(
        "optional-backward-jax-needs",
        "JAX runs the backward program for an absent input's gradient too",
        "opsmith/jax/op.py",
        "            needs = tuple(scalars.get(GIVEN + fwd_op.record.inputs[k].name) is not False for k in self.grad_of)",
        "            needs = tuple(True for k in self.grad_of)",
        (OB,),
    ),
    Mutant(
        "optional-template-type-first-slot",
        "a template type of optional inputs ignores the one given when its own input is absent",
        "opsmith/flavors/cuda_cpp.py",
        "                c = _c_type(next((d for d in shared if d is not None), torch.float32))",
        "                c = _c_type(torch.float32)",
        (A,),
    ),
    Mutant(
        "square-tie-loose",
        "a (3, 5) tensor is accepted for ('N', 'N') on every path (the shared plan's tie of an axis with itself)",
        "opsmith/plan/lowering.py",
        '                if (j, aj) != (k, axis):\n                    want = ("size", j, aj)',
        '                if j != k:\n                    want = ("size", j, aj)',
        (E,),
    ),
    Mutant(
        "optional-key-dtype-none",
        "a tuning decision for a call without its optional input fails the native build (int(None))",
        "opsmith/native/build.py",
        'else "-1LL" if k is None\n        else f"{int(k)}LL"',
        'else f"{int(k)}LL"',
        (A + "::test_a_tuning_decision_for_a_call_without_its_optional_input_builds_natively",),
    ),
    Mutant(
        "jax-vmap-reduction-before-group",
        "jax.vmap of a reduction over an axis before the '*' group returns the result transposed",
        "opsmith/jax/op.py",
        '        return g[1] if o["keepdim"] else g[1] - len(before)',
        "        return g[1]",
        ("tests/test_jax_contract_cpu.py",),
    ),
    Mutant(
        "sharding-negative-axis-unheld",
        "an axis read by DimSize(idx, -1) beside an untied table is sharded without a ShardingWarning",
        "opsmith/distributed/sharding.py",
        "if a is None or a % max(len(ins[k]), 1) == j}",
        "if a is None or a == j}",
        ("tests/test_sharding_rules.py",),
    ),
    Mutant(
        "serving-decision-during-build",
        "a tuning decision made during the first build queues no catch-up library",
        "opsmith/native/serving.py",
        "    return len(v.kernels), len(v.tuner.decisions) if v.tuner is not None else 0",
        "    return len(v.kernels), 0",
        ("tests/test_serving.py::test_a_decision_made_while_the_first_library_builds_queues_a_library_that_holds_it",),
    ),
]
