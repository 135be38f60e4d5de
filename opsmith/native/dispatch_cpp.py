"""Choosing and launching a variant, as a native library's CUDA kernel does it: the kernel's arguments in its
C types, the call's specialization (dtypes, alignment, sizes and scalars compiled in, heuristics), the tuning
decision, the variant table and its lookup, the launch on the current stream (or a CuTe DSL host function's
call), and a served library's hand-off to the Python path. ``codegen.py`` prints the steps before it; both
print the plan (``plan/steps.py``) and decide nothing.
"""

from __future__ import annotations

from typing import Any

from ..flavors.base import UNIT
from ..plan import steps as P
from .cpp import CTYPE, cpp_str
from .learned_cpp import learned_functions

__all__ = ["int_arg", "launch", "tables"]


def _values(pr: Any) -> list[str]:
    """The kernel's runtime arguments in its parameter order, each in a local of its C type (a float for an
    fp16/bf16 parameter rounded once from the double, as guards.round_bits does)."""
    L = []
    for k, p in enumerate(pr.plan.launch.params):  # type: ignore[union-attr]
        kind, i = p.source
        if kind == "in":
            src = f"{pr.t[i]}.data_ptr()"
            if i in pr.plan.optional:  # None: a null pointer, or the first input's (absent="dummy"; never read)
                dummy = f"{pr.t[0]}.data_ptr()" if pr.record.tensor_inputs[i].absent == "dummy" else "nullptr"
                src = f"{pr.t[i]}.defined() ? {src} : {dummy}"
        elif kind == "out":  # an optional output the call did not ask for: a null pointer
            src = f"o{i}.data_ptr()" if pr.record.outputs[i].when is None else \
                f"o{i}.defined() ? o{i}.data_ptr() : nullptr"  # fmt: skip
        elif kind == "scalar":
            v = pr.args[i]
            if p.ctype in ("f16", "bf16"):
                src = f"opsmith::{'half' if p.ctype == 'f16' else 'bf16'}_bits({v})"
            else:
                src = f"static_cast<{CTYPE[p.ctype]}>({int_arg(pr, i)})"
        else:
            src = f"static_cast<{CTYPE[p.ctype]}>({pr.refs[f'x{i}']})"
        L.append(f"{CTYPE[p.ctype]} a{k} = {src};")
    return L


def int_arg(pr: Any, pos: int) -> str:
    v = pr.args[pos]
    return f"{v}.expect_int()" if pr.types[pos] == "c10::SymInt" else v


def _spec(pr: Any) -> list[str]:
    """The call's specialization (Variants.spec_layout) as int64 values."""
    out = []
    for kind, p in pr.n.spec_layout:
        if kind == "dtype":
            out.append(_dtype_value(pr, p))
        elif kind == "none":  # kernel parameter p's optional tensor is None, compiled in (Triton)
            role, k = pr.plan.launch.params[p].source
            out.append(f"int64_t(!{pr.t[k] if role == 'in' else f'o{k}'}.defined())")
        elif kind == "align":
            out.append(f"int64_t(reinterpret_cast<uintptr_t>(a{p}) % 16 == 0)")
        elif kind == "int":  # as Triton's JIT: 1 compiled in (UNIT), else divisibility by 16
            out.append(f"int64_t(a{p} == 1 ? {UNIT} : a{p} % 16 == 0)")
        elif kind == "heur":
            out.append(f"int64_t({_heuristic(pr, p)})")
        elif kind == "wide":  # an int scalar outside int32, compiled as i64 (Triton); held in an int64_t
            out.append(f"int64_t(a{p} < -2147483648LL || a{p} > 2147483647LL)")
        elif kind == "scalar":  # compiled in: a float by its bits, as flavors.base.scalar_key
            v = pr.args[p]
            out.append(f"opsmith::f64_bits({v})" if pr.record.inputs[p].py_type == "float" else f"int64_t({v})")
        else:
            out.append(f"int64_t({pr.refs[f'x{p}']})")
    return out


def _dtype_value(pr: Any, k: int) -> str:
    """Tensor input k's dtype as an int64 (its ScalarType); -1 for an optional input passed as None."""
    v = f"static_cast<int64_t>({pr.t[k]}.scalar_type())"
    return f"({pr.t[k]}.defined() ? {v} : int64_t(-1))" if k in pr.plan.optional else v


def _heuristic(pr: Any, h: int) -> str:
    """A heuristic's value for the launched config ``c``: its expression, or the config's among several."""
    entry = pr.record.heuristics[h]
    where = (entry["name"], f"the heuristic for the constexpr {entry['name']}")
    exprs = [pr.expr(e, where) for e in pr.plan.launch.heuristics[h]]  # type: ignore[union-attr]
    out = exprs[-1]
    for j in range(len(exprs) - 2, -1, -1):
        configs = " || ".join(f"c == {c}" for c, pick in enumerate(entry["pick"]) if pick == j)
        out = f"(({configs}) ? {exprs[j]} : {out})"
    return out


def launch(pr: Any) -> list[str]:
    launch = pr.plan.launch
    assert launch is not None
    L = _values(pr)
    if launch.tuned:
        key = [_dtype_value(pr, k) for k in range(len(pr.t))]
        for e, pow2 in launch.tune_key:
            v = pr.expr(e)
            key.append(f"int64_t(opsmith::pow2({v}))" if pow2 else f"int64_t({v})")
        L.append(f"const std::array<int64_t, {len(key)}> key = {{{', '.join(key)}}};")
        L.append("const int c = decided(key);" if pr.n.serve else
                 f"const int c = opsmith::lookup(key, decisions, {launch.tune_default});")  # fmt: skip
        if pr.n.serve:
            L.append(f"if (c < 0) return miss(opsmith::kKey), python_path({_passed(pr)});")
    else:
        L.append("const int c = 0;")
    spec = _spec(pr)
    if pr.n.serve:
        L.append(f"const std::array<int64_t, {max(len(spec), 1)}> spec = {{{', '.join(spec) or '0'}}};")
        L.append("const Variant* found = find(c, spec);")
        L.append("if (found == nullptr)")
        L.append(f"  return miss(dtypes_held(spec) ? opsmith::kSize : opsmith::kDtype), python_path({_passed(pr)});")
        L.append("const Variant& v = *found;")
        if pr.n.record.flavor != "cute":  # (a host function's own check, with its stream: _cute_launch)
            L.append("#ifndef OPSMITH_DRY_RUN")
            L.append(
                f"if (!opsmith::ready(*v.kernel, dev)) return miss(opsmith::kCapture), python_path({_passed(pr)});"
            )
            L.append("#endif")
    else:
        L.append(f"const Variant& v = *find(c, {{{', '.join(spec) or '0'}}});")
    if pr.n.record.flavor == "cute":
        return L + _cute_launch(pr)
    L.append("int64_t g0 = 1, g1 = 1, g2 = 1, sm = v.smem;  // sm: a size expression's, where one gives it")
    if len(launch.grids) == 1:
        L += pr.grid(0)
    else:
        L.append("switch (c) {")
        for c in range(len(launch.grids)):
            L.append(f"  case {c}: {' '.join(pr.grid(c))} break;")
        L.append("}")
    axes = sorted(P.empty_axes(launch))
    if axes:  # every output holds its init: an empty grid launches nothing
        L.append(f"if ({' || '.join(f'g{a} == 0' for a in axes)}) {pr.ret()}")
    n = len(launch.params)
    # Pointers past the kernel's own parameters: a Triton kernel's scratch pointers, passed as NULL.
    L.append("void* none = nullptr;")
    L.append(f"void* args[] = {{{''.join(f'&a{k}, ' for k in range(n))}&none, &none, &none, &none}};")
    sizes = ", ".join(str(_SIZE[p.ctype]) for p in launch.params) or "0"
    count = str(n)
    if pr.n.serve or any(v.dropped for v in pr.n.variants):  # (a kernel learned later may drop some)
        L.append(f"uint8_t sizes[] = {{{sizes}}};")
        # (most variants drop nothing: the compaction only where this one does)
        L.append(f"const int n = v.dropped ? opsmith::keep_arguments(args, sizes, {n}, v.dropped) : {n};")
        count = "n"
    else:
        L.append(f"const uint8_t sizes[] = {{{sizes}}};")
    L.append(f"opsmith::launch(*v.kernel, dev, {{c, {{g0, g1, g2}}, {{v.bx, v.by, v.bz}}, sm}}, args, sizes, {count});")
    return L


def _cute_launch(pr: Any) -> list[str]:
    """A CuTe DSL host function's call: its arguments in its own order, the stream among them, then the status
    it writes (``cute_cpp.py``); loaded on the device first, which a CUDA graph capture does not allow."""
    launch = pr.plan.launch
    assert launch is not None
    v0 = pr.n.variants[0].cute
    n = len(launch.params)
    user = [f"&a{k}" for k in range(n)]
    args = [*user[: v0.stream_at], "&stream", *user[v0.stream_at :], "&status"]
    sizes = ", ".join(str(_SIZE[p.ctype]) for p in launch.params) or "0"
    if pr.n.serve:
        not_ready = f"return miss(opsmith::kCapture), python_path({_passed(pr)});"
    else:
        not_ready = ('opsmith::launch_error(opsmith::cat(op, ": first use on cuda:", dev.index(), " happened during '
                     'CUDA graph capture, where modules cannot be loaded. Fix: run the op once before capturing (the '
                     'usual warm-up)."));')  # fmt: skip
    return [
        "#ifdef OPSMITH_DRY_RUN",
        f"void* user[] = {{{', '.join(user) or 'nullptr'}}};",
        f"const uint8_t sizes[] = {{{sizes}}};",
        f"opsmith::cute_launch(*v.kernel, dev, c, user, sizes, {n});",
        "#else",
        "CUstream stream = opsmith::current_stream(dev);",
        f"if (!v.kernel->ready(dev.index(), stream)) {not_ready}",
        "int32_t status = 0;",
        f"void* args[] = {{{', '.join(args)}}};",
        f"opsmith::cute_launch(*v.kernel, dev, c, args, nullptr, {n + 1});",
        "#endif",
    ]


_SIZE = {"ptr": 8, "f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8, "i16": 2,
         "u16": 2, "i8": 1, "u8": 1, "bool": 1}  # fmt: skip


def tables(n: Any) -> list[str]:
    """The kernels, the variant table and its lookup, the tuning decisions known at build time."""
    L, op = [], cpp_str(n.record.op_name)
    width = max(len(n.spec_layout), 1)
    if n.record.compile_options:
        L.append(f"// Compiled with {' '.join(n.record.compile_options)}.")
    for k, v in enumerate(n.variants):
        if v.cute is not None:  # the DSL's exported host function (cute_cpp.py)
            p = v.cute.prefix
            L.append(f"opsmith::CuteEntry kernel{k}({op}, {cpp_str(v.symbol)}, &_mlir_{p}_cuda_init, "
                     f"&_mlir_{p}_cuda_load_to_device, &{v.cute.entry});")  # fmt: skip
            continue
        imgs = ", ".join(f"{{{arch}, {sym}, static_cast<size_t>({sym}_end - {sym})}}" for arch, sym in v.images)
        jit = dict(v.jit)
        opts = f", {{{jit.get('max_registers', 0)}, {jit.get('line_info', 0)}, {jit.get('debug', 0)}}}" if jit else ""
        L.append(f"opsmith::Kernel kernel{k}({op}, {cpp_str(v.symbol)}, {{{imgs}}}, {v.shared_mem}{opts});")
    drops = n.serve or any(v.dropped for v in n.variants)
    kernel_type = "opsmith::CuteEntry" if n.record.flavor == "cute" else "opsmith::Kernel"
    L += ["struct Variant {", "  int config;", f"  std::array<int64_t, {width}> spec;", f"  {kernel_type}* kernel;",
          "  int64_t bx, by, bz, smem;", *(["  uint64_t dropped;  // parameters compiled in"] if drops else []),
          "};", f"const std::array<Variant, {len(n.variants)}> variants = {{{{"]  # fmt: skip
    for k, v in enumerate(n.variants):
        dropped = f", 0x{v.dropped:x}ULL" if drops else ""
        L.append(f"    {{{v.config}, {{{', '.join(v.spec) or '0'}}}, &kernel{k}, {v.block[0]}, {v.block[1]}, "
                 f"{v.block[2]}, {v.shared_mem}{dropped}}},")  # fmt: skip
    L.append("}};")
    if n.serve:  # what the Python path compiles later is handed over at run time (learned_cpp.py)
        L.append("opsmith::Learned<Variant, opsmith::kLearnedKernels> learned_variants;")
    L += [f"const Variant* find(int c, std::array<int64_t, {width}> spec) {{",
          "  for (const auto& v : variants)", "    if (v.config == c && v.spec == spec) return &v;"]  # fmt: skip
    flags = [k for k, (kind, _) in enumerate(n.spec_layout) if kind in ("align", "int")]
    if n.fallback and flags:
        L.append("  const auto asked = spec;")
        L.append(f"  for (int i : {{{', '.join(map(str, flags))}}}) spec[i] = 0;  // compiled assuming neither "
                 "alignment nor divisibility: serves any call")  # fmt: skip
        L.append("  for (const auto& v : variants)")
        L.append("    if (v.config == c && v.spec == spec) return &v;")
        L.append("  spec = asked;")
    if n.serve:
        L += ["  return learned_variants.find([&](const Variant& v) { return v.config == c && v.spec == spec; });", "}"]
        return L + _served_counts(n) + _dtypes_held(n, width) + _decisions(n) + _learned(n, width)
    L += ["  std::string held;  // what it holds, in the numbers the asked specialization is printed in",
          "  for (const auto& v : variants)",
          "    held += (held.empty() ? \"\" : \", \") + opsmith::list_str(v.spec, false);",
          "  opsmith::missing_variant(" + op + ", c, spec, held.c_str());"]  # fmt: skip
    L.append("}")
    return L + _decisions(n)


def _served_counts(n: Any) -> list[str]:
    """A served op's counters (``native/serving.py`` reads them through ``opsmith_served_counters``): the calls
    this library took, and those it handed to the Python path, by why. Relaxed atomics: ~1 ns a call."""
    return [
        "std::atomic<int64_t> served[opsmith::kServedCounts] = {};",
        "inline int miss(int why) {",
        "  served[why].fetch_add(1, std::memory_order_relaxed);",
        "  return 0;",
        "}",
    ]


def _dtypes_held(n: Any, width: int) -> list[str]:
    """Whether a spec's dtypes are among the variants' (a miss is then a size or alignment the library lacks)."""
    dtypes = [k for k, (kind, _) in enumerate(n.spec_layout) if kind == "dtype"]
    same = " && ".join(f"v.spec[{k}] == spec[{k}]" for k in dtypes) or "true"
    # Sizes compiled in per call: nothing is guessed at the build, so a first miss is a size, whatever the dtype
    first = ["  if (variants.empty() && learned_variants.find([](const Variant&) { return true; }) == nullptr) "
             "return true;"] if any(kind in ("static", "scalar") for kind, _ in n.spec_layout) else []  # fmt: skip
    return [
        "// A spec no variant holds: a dtype the library lacks, or (the dtypes held) a compiled-in size or alignment.",
        f"bool dtypes_held(const std::array<int64_t, {width}>& spec) {{",
        *first,
        "  for (const auto& v : variants)",
        f"    if ({same}) return true;",
        f"  return learned_variants.find([&](const Variant& v) {{ return {same}; }}) != nullptr;",
        "}",
    ]


def _key_width(n: Any) -> int:
    return len(n.record.tensor_inputs) + len(n.record.tune_key)


def _decisions(n: Any) -> list[str]:
    """The tuning decisions known at build time; a served library's come at run time (``decided``: -1 where
    none was handed over)."""
    if not n.record.tuned:
        return []
    k = _key_width(n)
    rows = "".join(f"    {{{{{', '.join(key)}}}, {c}}},\n" for key, c in n.decisions)
    L = [f"const std::vector<std::pair<std::array<int64_t, {k}>, int>> decisions = {{\n{rows}}};"]
    if n.serve:
        L += [f"opsmith::Learned<std::pair<std::array<int64_t, {k}>, int>, opsmith::kLearnedDecisions> learned_decisions;",
              f"int decided(const std::array<int64_t, {k}>& key) {{",
              "  const int c = opsmith::lookup(key, decisions, -1);",
              "  if (c >= 0) return c;",
              "  const auto* d = learned_decisions.find([&](const auto& d) { return d.first == key; });",
              "  return d != nullptr ? d->second : -1;",
              "}"]  # fmt: skip
    return L


def _learned(n: Any, width: int) -> list[str]:
    return ["", *learned_functions(n, width, _key_width(n) if n.record.tuned else 0)]


def _passed(pr: Any) -> str:
    """The kernel's arguments as it received them (tensors before any ``.contiguous()``)."""
    tensors = set(pr.t)
    return ", ".join(f"{a}_in" if a in tensors else a for a in pr.args)
