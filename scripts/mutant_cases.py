"""The planted bugs of ``scripts/mutants.py``: each a textual change to one file and the tests meant to catch it.

Groups: the suite's blind spots, the sixteen defects of the first review (issue 17), binding and layout, and
the third review (issue 22): the call plan and its Python and C++ printers, the native generator, size
expressions, the tuning protocol, the sharding rules, native.use, the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    breaks: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    gpu: bool = False


H, B, C, M = "tests/test_hardening.py", "tests/test_binding.py", "tests/test_check_cpu.py", "tests/test_error_matrix.py"
N = "tests/test_native.py::test_bad_input_matrix_through_native_kernels"
MUTANTS = [
    # -- the suite's blind spots ------------------------------------------------------------------------------
    Mutant(
        "poison-noop",
        "outputs are not poisoned before numerics",
        "opsmith/checking/case.py",
        "            b.fill_(255)",
        "            pass",
        # the two tests of the poison, not the whole file (whose shipped-op walk outlasts a device call)
        (
            "tests/test_gpu_check.py::test_an_op_that_leaves_outputs_unwritten_fails_numerics",
            "tests/test_gpu_check.py::test_the_poisoned_pool_hands_out_poisoned_memory",
        ),
        gpu=True,
    ),
    Mutant(
        "compile-static-runs-nothing",
        "compile-static compares nothing",
        "opsmith/checking/harness.py",
        '    for s in shapes:\n        _run_and_compare(case, case.inputs(s, dt, device), dt, f"compiled, shape {s}", fn)',
        '    for s in shapes[:0]:\n        _run_and_compare(case, case.inputs(s, dt, device), dt, f"compiled, shape {s}", fn)',
        (C,),
    ),
    Mutant(
        "export-runs-nothing",
        "export checks nothing of the exported program",
        "opsmith/checking/harness.py",
        "    _check_exported_shapes(ep, case.op(*_clone(args)))\n    for s in (first, second):",
        "    for s in ():",
        (C,),
    ),
    Mutant(
        "fingerprint-drops-source",
        "re-registering another kernel under a name returns the old op",
        "opsmith/torchlib/registration.py",
        '"source": source.fingerprint(), "inputs"',
        '"inputs"',
        (H,),
    ),
    Mutant(
        "cache-key-drops-target",
        "a cubin answers a PTX request from the cache",
        "opsmith/flavors/cuda_cpp.py",
        '"target": target, "probe_only"',
        '"probe_only"',
        (H,),
    ),
    Mutant(
        "tuning-ignores-stale-config",
        "a stored decision for another config is used",
        "opsmith/tuning/autotune.py",
        '        return winner if entry.get("config") == self.configs[winner] else None',
        "        return winner",
        (H, "tests/test_autotune.py"),
    ),
    Mutant(
        "tuning-key-drops-dtypes",
        "one decision serves every dtype",
        "opsmith/torchlib/launch_code.py",
        "    parts = [pr.dtype_of(k) for k in range(len(pr.t))]",
        "    parts = []",
        ("tests/test_hardening.py",),
    ),
    Mutant(
        "tuning-identity-op-only",
        "decisions survive a changed kernel or configs",
        "opsmith/torchlib/registration.py",
        '    return {"op": op_name, "flavor": flavor, "sources": [s.fingerprint() for s in sources],',
        '    return {"op": op_name}\n    return {"op": op_name, "flavor": flavor, "sources": [s.fingerprint() for s in sources],',
        (H,),
    ),
    Mutant(
        "int32-guard-weakened",
        "2^31 elements reach a 32-bit kernel",
        "opsmith/torchlib/fake.py",
        "if _static(_n{s.k}) and _n{s.k} > {P.INT32_MAX}:",
        "if _static(_n{s.k}) and _n{s.k} > {2 * P.INT32_MAX}:",
        (M, "tests/test_faults_cpu.py"),
    ),
    Mutant(
        "eager-int32-guard-weakened",
        "2^31 elements reach a 32-bit kernel eagerly",
        "opsmith/torchlib/eager.py",
        '[f"if _n{s.k} > {P.INT32_MAX}: raise _E.large',
        '[f"if _n{s.k} > {2 * P.INT32_MAX}: raise _E.large',
        (H, "tests/test_faults_cpu.py", M),
    ),
    Mutant(
        "missing-backward-not-refused",
        "an op without backward gives zero gradients",
        "opsmith/torchlib/autograd.py",
        '        raise DifferentiationError(ctx.op_name, "a gradient reached it, but it declares no backward.",',
        "        return tuple(None for _ in ctx.needs_input_grad)\n"
        '        raise DifferentiationError(ctx.op_name, "a gradient reached it, but it declares no backward.",',
        (H, M),
    ),
    Mutant(
        "double-backward-not-refused",
        "create_graph=True differentiates an undeclared backward",
        "opsmith/torchlib/autograd.py",
        "if torch.is_grad_enabled() and not double:",
        "if False:",
        (M,),
    ),
    Mutant(
        "program-ignores-needs-input-grad",
        "a backward program runs every step, also those only an unneeded gradient depends on (RMSNorm's dweight)",
        "opsmith/plan/backward_program.py",
        "        wanted = {r for r, n in zip(self.returns, needs, strict=True) if n}",
        "        wanted = set(self.returns)",
        (H,),
    ),
    Mutant(
        "zero-size-launches",
        "a zero-size call launches the kernel",
        "opsmith/torchlib/eager.py",
        "    def returnifempty(self, s: P.ReturnIfEmpty) -> list[str]:\n        return [",
        "    def returnifempty(self, s: P.ReturnIfEmpty) -> list[str]:\n        return [] and [",
        (H,),
    ),
    Mutant(
        "import-touches-gpu",
        "registering initializes CUDA",
        "opsmith/torchlib/registration.py",
        "    arch = default_arch()\n    binary = None",
        "    torch.cuda.init()\n    arch = default_arch()\n    binary = None",
        (H,),
    ),
    # -- the sixteen defects -------------------------------------------------------------------------------------
    Mutant(
        "1-first-text-definition",
        "the first #ifdef branch's names are taken whatever was compiled",
        "opsmith/declare/signature.py",
        "        if len(cand) != len(params):",
        "        if len(agree) or len(cand) != len(params):",
        (H, "tests/test_signature_record.py"),
    ),
    Mutant(
        "1-compiler-types-ignored",
        "a declared dtype is not checked against the kernel",
        "opsmith/declare/binding.py",
        "if elem is not None and declared is not None and elem != declared:",
        "if False:",
        (M,),
    ),
    Mutant(
        "3-output-template-ignored",
        "an output typed by a template parameter takes the first input's dtype",
        "opsmith/declare/binding.py",
        "    elif p.slot is not None:\n        typing.out_like[d.index] = p.slot",
        "    elif False:\n        pass",
        (H,),
    ),
    Mutant(
        "3-instantiation-unchecked",
        "a compiled instantiation's pointer types are not checked",
        "opsmith/declare/binding.py",
        "        if elem is not None and have is not None and elem != have:",
        "        if False:",
        ("tests/test_hardening.py",),
    ),
    Mutant(
        "4-float-grid-truncated",
        "a float grid from Custom is truncated",
        "opsmith/plan/guards.py",
        "    if bad:  # int() would truncate",
        "    if False:  # int() would truncate",
        (H, M),
    ),
    Mutant(
        "5-float2-as-scalar",
        "a float scalar fills a float2 parameter",
        "opsmith/declare/signature.py",
        '_SCALAR_CLASS = {"__half": "f16", "__nv_bfloat16": "bf16"}',
        '_SCALAR_CLASS = {"__half": "f16", "__nv_bfloat16": "bf16", "float2": "f32"}',
        (H, M),
    ),
    Mutant(
        "6-launch-extent-unchecked",
        "a 32-bit launch whose top index wraps is accepted",
        "opsmith/torchlib/fake.py",
        '    def extent(self, s: P.Extent) -> list[str]:\n        return ["if _st:"',
        '    def extent(self, s: P.Extent) -> list[str]:\n        return [] and ["if _st:"',
        (H, M),
    ),
    Mutant(
        "6-eager-extent-unchecked",
        "a 32-bit launch whose top index wraps is accepted eagerly",
        "opsmith/torchlib/eager.py",
        'f"if _e > {s.limit}: raise _E.extent(',
        'f"if False: raise _E.extent(',
        (H,),
    ),
    Mutant(
        "7-user-headers-unkeyed",
        "editing an included header does not recompile",
        "opsmith/flavors/cuda_cpp.py",
        "            for d in here + user_dirs + list(toolkit):",
        "            for d in here + list(toolkit):",
        (H, "tests/test_compile_cache.py"),
    ),
    Mutant(
        "8-unsafe-dir-read",
        "a cache directory others can write is read",
        "opsmith/cache.py",
        "        if not self.usable(create=False):\n            return None",
        "        pass",
        (H,),
    ),
    Mutant(
        "9-triton-globals-unkeyed",
        "a changed Triton constexpr global reuses the old cubin",
        "opsmith/flavors/triton.py",
        '"globals": self._globals, ',
        "",
        (H,),
    ),
    Mutant(
        "10-no-backward-silent",
        "differentiating an op without backward passes a zero gradient",
        "opsmith/torchlib/eager.py",
        'refuse = "_refuse_inplace(_op)" if mutated else f"return _nograd({args})"',
        'refuse = "_refuse_inplace(_op)" if mutated else f"return _below(_ks, {args})"',
        (H, M),
    ),
    Mutant(
        "11-empty-axis-unrefused",
        "an empty reduced axis reaches the grid arithmetic",
        "opsmith/torchlib/fake.py",
        "    def refuseempty(self, s: P.RefuseEmpty) -> list[str]:\n        return [",
        "    def refuseempty(self, s: P.RefuseEmpty) -> list[str]:\n        return [] and [",
        (H, M),
    ),
    Mutant(
        "12-float-range-unchecked",
        "an out-of-range float scalar gets a bare OverflowError",
        "opsmith/plan/lowering.py",
        '        elif isinstance(a, ScalarArg) and a.ctype in FLOAT_MAX and a.py_type == "float":',
        "        elif False:",
        (H, M),
    ),
    Mutant(
        "13-keyword-op-name",
        "op names torch cannot reach are accepted",
        "opsmith/declare/validate.py",
        "        if keyword.iskeyword(part):",
        "        if False:",
        (H, M),
    ),
    Mutant(
        "14-driver-error-as-compile-error",
        "a missing driver is reported as a source error",
        "opsmith/flavors/cuda_cpp.py",
        '        if "compilation log:" not in text:',
        "        if False:",
        (H, M),
    ),
    Mutant(
        "15-closure-unfingerprinted",
        "a changed closure value returns the old op",
        "opsmith/declare/fingerprint.py",
        '    d["closure"] = cells',
        '    d["closure"] = []',
        (H,),
    ),
    Mutant(
        "15-code-by-address",
        "a lambda's code object is described by its address",
        "opsmith/declare/fingerprint.py",
        "        _code(c, seen, depth) if isinstance(c, types.CodeType) else describe(c, seen, depth) for c in code.co_consts",
        "        repr(c) for c in code.co_consts",
        (H,),
    ),
    Mutant(
        "16-opcheck-nothing-ran",
        "opsmith check passes opcheck when no sample ran",
        "opsmith/checking/harness.py",
        "    if not samples:\n        raise AssertionError",
        "    if False:\n        raise AssertionError",
        (H,),
    ),
    Mutant(
        "16-launch-error-as-refusal",
        "a LaunchError counts as a clear refusal",
        "opsmith/checking/harness.py",
        "            except InputError as e:  # a clear refusal",
        "            except Exception as e:  # a clear refusal",
        (H,),
    ),
    # -- binding and layout ------------------------------------------------------------------------------------
    Mutant(
        "bind-by-name-off",
        "kernels are bound by position only",
        "opsmith/declare/binding.py",
        "        if by_name is not None:",
        "        if False:",
        (B,),
    ),
    Mutant(
        "bind-clash-unchecked",
        "a partial name match binds x to the kernel's y",
        "opsmith/declare/binding.py",
        "    if clashes:",
        "    if False:",
        (M,),
    ),
    Mutant(
        "layout-any-strides",
        "a strided input the kernel cannot address reaches it",
        "opsmith/plan/layout.py",
        "            if shape[a] > 1 and stride[a] != s:",
        "            if False:",
        (B,),
    ),
    Mutant(
        "like-dtype-unchecked",
        "two tensors of one template parameter may differ in dtype",
        "opsmith/plan/lowering.py",
        "    steps += [Like(k, tnames.index(a.dtype_like)) for k, a in enumerate(targs) if a.dtype_like]",
        "    steps += []",
        (B, M),
    ),
    Mutant(
        "specialize-unlimited",
        "a size compiled in may take any number of values",
        "opsmith/torchlib/variants.py",
        "            if len(seen) >= env.SPECIALIZE_LIMIT.get():",
        "            if False:",
        (B,),
    ),
    Mutant(
        "native-meta-dtype-unchecked",
        "a native library's Meta kernel accepts any dtype (torch.compile / export trace a wrong call)",
        "opsmith/native/codegen.py",
        '        return [f"opsmith::check_dtype(op, {n}, {t}, {SCALAR_TYPE[dtype_from_name(s.dtype)]});"]',
        '        return [] if self.meta else [f"opsmith::check_dtype(op, {n}, {t}, {SCALAR_TYPE[dtype_from_name(s.dtype)]});"]',
        ("tests/test_native.py::test_bad_input_matrix_through_native_kernels",),
    ),
    Mutant(
        "native-no-backward-silent",
        "a native op without a backward passes gradients through silently instead of refusing",
        "opsmith/native/autograd_cpp.py",
        'L += [f"  if (at::GradMode::is_enabled() && ({grad})) {{",',
        'L += ["  if (false) {",',
        (N,),
    ),
]
