"""C++ for one op from its kernel record: the CUDA implementation (``eager.py``'s guards, error texts and
order), output allocation from the shape relations, extras, the tuning decision, the variant for the call's
dtypes and sizes, the launch on the current stream; and the Meta implementation (``fake.py``'s rules, on
symbolic sizes). ``autograd_cpp.py`` writes the Autograd kernels and ``library.py`` assembles the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..fake import FLOAT_MAX, INT32_MAX, INT_LIMITS
from ..geometry import describe
from ..record import KernelRecord, ScalarArg, TensorArg, dtype_from_name
from .cpp import AT_DTYPE, CTYPE, cpp_expr, cpp_str, ident

__all__ = ["NativeOp", "Variant", "cpp_signature", "op_source"]

# A schema scalar as the C++ kernel takes it.
_SCALAR = {"SymInt": "c10::SymInt", "int": "int64_t", "float": "double", "bool": "bool"}


@dataclass
class Variant:
    """One compiled kernel of an op: its config, the specialization it serves (C++ int64 expressions in
    ``spec_layout`` order), its entry symbol, its images ((arch as 90, or 0 for PTX), the assembler label of
    the embedded bytes) and its launch (block, dynamic shared memory)."""

    config: int
    spec: tuple[str, ...]
    symbol: str
    images: list[tuple[int, str]]
    block: tuple[int, int, int]
    shared_mem: int


@dataclass
class NativeOp:
    """An op as the library serves it: the registered op, its variants, what a call specializes on
    (``Variants.spec_layout``), the tuning decisions (keys as C++ expressions, config) and whether a variant
    compiled with alignment and divisibility off serves calls no other variant matches (Triton)."""

    op: Any  # registration.Op
    variants: list[Variant]
    spec_layout: list[tuple[str, int]] = field(default_factory=list)
    decisions: list[tuple[tuple[str, ...], int]] = field(default_factory=list)
    fallback: bool = False

    @property
    def record(self) -> KernelRecord:
        return self.op.record

    @property
    def name(self) -> str:
        return ident(self.record.op_name)


def cpp_signature(record: KernelRecord) -> tuple[str, list[str], list[str]]:
    """(return type, argument types, argument names) of the op's C++ kernels, from its schema."""
    schema = torch._C.parse_schema(f"{record.op_name}{record.schema}")
    types = []
    for a in schema.arguments:
        if isinstance(a.type, torch.TensorType):
            types.append("const at::Tensor&")
        else:
            types.append(_SCALAR[str(a.type)])
    n = len(schema.returns)
    ret = "void" if n == 0 else "at::Tensor" if n == 1 else f"std::tuple<{', '.join(['at::Tensor'] * n)}>"
    return ret, types, [a.name for a in schema.arguments]


def returns(outs: list[str]) -> str:
    if not outs:
        return "return;"
    return f"return {outs[0]};" if len(outs) == 1 else f"return std::make_tuple({', '.join(outs)});"


def _int(r: KernelRecord, name: str) -> str:
    """A schema int as int64_t (a SymInt is concrete in a real call)."""
    return f"{name}.expect_int()" if _is_sym(r, name) else name


def _is_sym(r: KernelRecord, name: str) -> bool:
    _, types, names = cpp_signature(r)
    return types[names.index(name)] == "c10::SymInt"


def _guards(r: KernelRecord, op: str) -> list[str]:
    """Device, dtype, rank and layout of every tensor, dtype ties, declared shapes, scalar ranges: eager.py's
    checks in its order, so a call with several mistakes gets the same first error."""
    L: list[str] = []
    tnames = [a.name for a in r.tensor_inputs]
    first = tnames[0]
    for a in r.tensor_inputs:
        n = a.name
        if n == first:
            L.append(f"const c10::Device dev = opsmith::check_device(op, {cpp_str(n)}, {n}, nullptr, nullptr);")
        else:
            L.append(f"opsmith::check_device(op, {cpp_str(n)}, {n}, {cpp_str(first)}, &dev);")
        if a.dtype:
            L.append(f"opsmith::check_dtype(op, {cpp_str(n)}, {n}, {AT_DTYPE[dtype_from_name(a.dtype)]});")
        if a.ndim is not None:
            L.append(f'if ({n}.dim() != {a.ndim}) opsmith::rank_error(op, {cpp_str(n)}, {n}, "{a.ndim} dims");')
        elif a.min_ndim:
            L.append(f"if ({n}.dim() < {a.min_ndim}) opsmith::rank_error(op, {cpp_str(n)}, {n}, \"at least "
                     f'{a.min_ndim} dims (the launch geometry, a reduced axis or an extra needs them)");')  # fmt: skip
        axes = "{" + ", ".join(str(x) for x in a.strided) + "}"
        check = f"!{n}.is_contiguous()" if not a.strided else f"!opsmith::addressable({n}, {axes})"
        if a.contiguous == "make":
            L.append(f"if ({check}) {n} = {n}.contiguous();")
        else:
            L.append(f"if ({check}) opsmith::layout_error(op, {cpp_str(n)}, {n}, {axes});")
    for a in r.tensor_inputs:
        if a.dtype_like:
            L.append(
                f"opsmith::check_like(op, {cpp_str(a.name)}, {a.name}, {cpp_str(a.dtype_like)}, {a.dtype_like}, true);"
            )
    for a in r.tensor_inputs:
        if a.shape is None:
            continue
        want = [
            "-1" if e is None else str(e) if isinstance(e, int) else f"{tnames[e[0]]}.size({e[1]})" for e in a.shape
        ]
        conds = [f"{a.name}.dim() != {len(want)}"] + [
            f"{a.name}.size({i}) != {w}" for i, w in enumerate(want) if w != "-1"
        ]
        L.append(f"if ({' || '.join(conds)}) opsmith::shape_error(op, {cpp_str(a.name)}, {a.name}, "
                 f"{{{', '.join(want)}}});")  # fmt: skip
    for a in r.inputs:
        if not isinstance(a, ScalarArg):
            continue
        if a.ctype in INT_LIMITS:
            lo, hi = INT_LIMITS[a.ctype]
            L.append(f"opsmith::check_int_range(op, {cpp_str(a.name)}, {_int(r, a.name)}, {_i64(lo)}, {_i64(hi)}, "
                     f'"{a.ctype}");')  # fmt: skip
        elif a.ctype in FLOAT_MAX and a.py_type == "float":
            L.append(
                f'opsmith::check_float_range(op, {cpp_str(a.name)}, {a.name}, {FLOAT_MAX[a.ctype]!r}, "{a.ctype}");'
            )
    return L


def _i64(v: int) -> str:
    """An integer literal; u64's top is clamped (a schema int is int64 anyway)."""
    if v >= 2**63:
        return "INT64_MAX"
    return "INT64_MIN" if v == -(2**63) else f"{v}LL"


def _outputs(r: KernelRecord, tnames: list[str], sym: bool = False) -> list[str]:
    """Allocate every output: contiguous, on the inputs' device; ``sym``: over symbolic sizes (Meta)."""
    empty, sizes = ("at::empty_symint", "sym_sizes") if sym else ("at::empty", "sizes")
    L = []
    for k, o in enumerate(r.outputs):
        src = tnames[o.shape.get("same_as", o.shape.get("reduce"))]
        dt = AT_DTYPE[dtype_from_name(o.dtype)] if o.dtype else f"{tnames[o.dtype_from]}.scalar_type()"
        shape = f"{src}.{sizes}()"
        if "reduce" in o.shape:
            dims = "{" + ", ".join(str(d) for d in o.shape["dims"]) + "}"
            shape = f"opsmith::reduced(op, {cpp_str(src)}, {shape}, {dims}, {str(o.shape['keepdim']).lower()})"
        L.append(f"at::Tensor o{k} = {empty}({shape}, {src}.options().dtype({dt}));")
    return L


def _empty_and_extras(r: KernelRecord, refs: dict[str, str]) -> list[str]:
    """Nothing to launch when everything written is empty; non-empty outputs from an empty input refused;
    shared strides; every extra once, with its C type's range checked."""
    tnames = [a.name for a in r.tensor_inputs]
    outs = [f"o{k}" for k in range(len(r.outputs))]
    written = list(
        dict.fromkeys([f"o{k}.numel()" for k in range(len(outs))] + [f"{a.name}.numel()" for a in r.mutated])
    )
    L = [f"if ({' && '.join(f'{w} == 0' for w in written)}) {returns(outs)}"]
    if outs:
        made = "{" + ", ".join(f"&{o}" for o in outs) + "}"
        L += [f"if ({n}.numel() == 0) opsmith::empty_error(op, {cpp_str(n)}, {made});" for n in tnames]
    for e in r.extras:
        if not e.same:
            continue
        group = [e.expr[1], *e.same]
        labels = [tnames[int(g[1:])] if g.startswith("i") else r.outputs[int(g[1:])].name for g in group]
        inputs = ", ".join("true" if g.startswith("i") else "false" for g in group)
        require = ", ".join(str(g.startswith("i") and r.tensor_inputs[int(g[1:])].contiguous == "require").lower()
                            for g in group)  # fmt: skip
        L.append(f"opsmith::share_strides(op, {{{', '.join(map(cpp_str, labels))}}}, "
                 f"{{{', '.join('&' + refs[g] for g in group)}}}, {{{inputs}}}, {{{require}}}, {e.expr[2]});")  # fmt: skip
    for k, e in enumerate(r.extras):
        if isinstance(e.expr, float) or e.ctype in ("f32", "f64"):
            L.append(
                f"const double x{k} = {cpp_expr(e.expr, refs) if isinstance(e.expr, list) else repr(float(e.expr))};"
            )
            continue
        L.append(f"const int64_t x{k} = {cpp_expr(e.expr, refs)};  // {e.label}")
        if e.static or e.ctype not in INT_LIMITS or e.ctype == "i64" or not isinstance(e.expr, list):
            continue  # compiled in, or a value an int64 holds whole
        is_numel = e.expr[0] == "numel" and e.expr[1].startswith("i")
        if is_numel and e.ctype == "i32" and r.index_dtype == "int32":
            continue  # the 32-bit index check bounds it already
        lo, hi = INT_LIMITS[e.ctype]
        hint = ("Fix: declare the extra with dtype='int64' and take it as long long / int64_t in the kernel."
                if e.ctype in ("i32", "u32") else "")  # fmt: skip
        L.append(f"opsmith::check_int_range(op, {cpp_str(e.label)}, x{k}, {_i64(lo)}, {_i64(hi)}, \"{e.ctype}\", "
                 f"{cpp_str(hint)});")  # fmt: skip
    return L


def _labels(r: KernelRecord) -> dict[str, str]:
    labels = {f"i{k}": a.name for k, a in enumerate(r.tensor_inputs)} | {
        f"o{k}": o.name for k, o in enumerate(r.outputs)
    }
    if not r.outputs and r.mutated:
        labels["o0"] = r.mutated[0].name
    return labels


def _limits(r: KernelRecord, refs: dict[str, str]) -> list[str]:
    """A 32-bit kernel's launch extents, the tightest limit over the configs (eager.py's rule)."""
    if r.index_dtype != "int32":
        return []
    seen: dict[str, tuple[int, str]] = {}
    for plan in r.launches or (r.launch,):
        for expr, limit in plan.limits if plan is not None else ():
            if limit >= INT32_MAX:
                continue  # no output is larger than the inputs, whose numel is checked
            code = cpp_expr(expr, refs)
            seen[code] = (min(limit, seen.get(code, (limit,))[0]), describe(expr, _labels(r)))
    return [f"if ({code} > {limit}LL) opsmith::extent_error(op, {_extent_args(label)}, {code}, {limit}LL);"
            for code, (limit, label) in seen.items()]  # fmt: skip


def _extent_args(label: str) -> str:
    """(argument name, launched size) of fake.extent_error: ``numel(y)`` names ``y``."""
    name = label[label.index("(") + 1 :].split(",")[0].rstrip(")") if "(" in label else label
    return f"{cpp_str(name)}, {cpp_str(label)}"


def _values(r: KernelRecord) -> list[str]:
    """The kernel's runtime arguments in its parameter order, each in a local of its C type."""
    L = []
    for k, p in enumerate(r.params):
        if p.role == "input":
            a = r.inputs[p.index]
            if isinstance(a, TensorArg):
                src = f"{a.name}.data_ptr()"
            elif p.ctype in ("f16", "bf16"):
                src = f"c10::{'Half' if p.ctype == 'f16' else 'BFloat16'}(static_cast<float>({a.name})).x"
            else:
                src = f"static_cast<{CTYPE[p.ctype]}>({_int(r, a.name) if a.py_type == 'int' else a.name})"
        elif p.role == "extra":
            src = f"static_cast<{CTYPE[p.ctype]}>(x{p.index})"
        else:
            src = f"o{p.index}.data_ptr()"
        L.append(f"{CTYPE[p.ctype]} a{k} = {src};")
    return L


def _spec(n: NativeOp, tnames: list[str]) -> list[str]:
    """The call's specialization (Variants.spec_layout) as int64 values."""
    out = []
    for kind, p in n.spec_layout:
        if kind == "dtype":
            out.append(f"static_cast<int64_t>({tnames[p]}.scalar_type())")
        elif kind == "align":
            out.append(f"int64_t(reinterpret_cast<uintptr_t>(a{p}) % 16 == 0)")
        elif kind == "div16":
            out.append(f"int64_t(a{p} % 16 == 0)")
        else:
            out.append(f"x{p}")
    return out


def _launch(n: NativeOp, refs: dict[str, str], tnames: list[str]) -> list[str]:
    r = n.record
    L = _values(r)
    if r.tuned:
        key = [f"static_cast<int64_t>({t}.scalar_type())" for t in tnames]
        for entry in r.tune_key:
            t = refs[entry[1]]
            v = f"{t}.numel()" if entry[0] == "numel" or entry[2] is None else f"{t}.size({entry[2]})"
            key.append(f"opsmith::pow2({v})" if entry[-1] == "pow2" else v)
        L.append(f"const std::array<int64_t, {len(key)}> key = {{{', '.join(key)}}};")
        L.append(f"const int c = opsmith::lookup(key, {n.name}_decisions, {r.tune_default});")
    else:
        L.append("const int c = 0;")
    spec = _spec(n, tnames)
    L.append(f"const {n.name}_variant& v = {n.name}_find(c, {{{', '.join(spec) or '0'}}});")
    L.append("int64_t g0 = 1, g1 = 1, g2 = 1;")
    plans = r.launches or (r.launch,)
    if len(plans) == 1:
        g = [cpp_expr(x, refs) for x in plans[0].grid]
        L.append(f"g0 = {g[0]}; g1 = {g[1]}; g2 = {g[2]};")
    else:
        L.append("switch (c) {")
        for c, plan in enumerate(plans):
            g = [cpp_expr(x, refs) for x in plan.grid]
            L.append(f"  case {c}: g0 = {g[0]}; g1 = {g[1]}; g2 = {g[2]}; break;")
        L.append("}")
    # Pointers past the kernel's own parameters: a Triton kernel's scratch pointers, passed as NULL.
    args = "".join(f"&a{k}, " for k in range(len(r.params)))
    L.append("void* none = nullptr;")
    L.append(f"void* args[] = {{{args}&none, &none, &none, &none}};")
    L.append("opsmith::launch(*v.kernel, dev, g0, g1, g2, v.bx, v.by, v.bz, v.smem, args);")
    return L


def _tables(n: NativeOp) -> list[str]:
    """The kernels, the variant table and its lookup, the tuning decisions known at build time."""
    L, op = [], cpp_str(n.record.op_name)
    width = max(len(n.spec_layout), 1)
    for k, v in enumerate(n.variants):
        imgs = ", ".join(f"{{{arch}, {sym}, static_cast<size_t>({sym}_end - {sym})}}" for arch, sym in v.images)
        L.append(f"opsmith::Kernel {n.name}_k{k}({op}, {cpp_str(v.symbol)}, {{{imgs}}}, {v.shared_mem});")
    L.append(f"struct {n.name}_variant {{")
    L.append("  int config;")
    L.append(f"  std::array<int64_t, {width}> spec;")
    L.append("  opsmith::Kernel* kernel;")
    L.append("  int64_t bx, by, bz, smem;")
    L.append("};")
    L.append(f"const {n.name}_variant {n.name}_variants[] = {{")
    for k, v in enumerate(n.variants):
        L.append(f"    {{{v.config}, {{{', '.join(v.spec) or '0'}}}, &{n.name}_k{k}, {v.block[0]}, {v.block[1]}, "
                 f"{v.block[2]}, {v.shared_mem}}},")  # fmt: skip
    L.append("};")
    L.append(f"const {n.name}_variant& {n.name}_find(int c, std::array<int64_t, {width}> spec) {{")
    L.append(f"  for (const auto& v : {n.name}_variants)")
    L.append("    if (v.config == c && v.spec == spec) return v;")
    flags = [k for k, (kind, _) in enumerate(n.spec_layout) if kind in ("align", "div16")]
    if n.fallback and flags:
        L.append("  const auto asked = spec;")
        L.append(f"  for (int i : {{{', '.join(map(str, flags))}}}) spec[i] = 0;  // compiled assuming neither "
                 "alignment nor divisibility: serves any call")  # fmt: skip
        L.append(f"  for (const auto& v : {n.name}_variants)")
        L.append("    if (v.config == c && v.spec == spec) return v;")
        L.append("  spec = asked;")
    held = ", ".join(("[" + ", ".join(v.spec) + "]") if v.spec else "[]" for v in n.variants[:8])
    L.append(f"  opsmith::missing_variant({op}, c, spec, {cpp_str(held)});")
    L.append("}")
    if n.record.tuned:
        k = len(n.record.tensor_inputs) + len(n.record.tune_key)
        rows = "".join(f"    {{{{{', '.join(key)}}}, {c}}},\n" for key, c in n.decisions)
        L.append(f"const std::vector<std::pair<std::array<int64_t, {k}>, int>> {n.name}_decisions = {{\n{rows}}};")
    return L


def _cuda(n: NativeOp) -> list[str]:
    r = n.record
    ret, types, names = cpp_signature(r)
    tnames = [a.name for a in r.tensor_inputs]
    refs = {f"i{k}": t for k, t in enumerate(tnames)} | {f"o{k}": f"o{k}" for k in range(len(r.outputs))}
    if not r.outputs:
        refs["o0"] = r.mutated[0].name
    refs["sm_count"] = "opsmith::sm_count(dev.index())"
    params = ", ".join(f"{t} {a}_in" if a in tnames else f"{t} {a}" for t, a in zip(types, names, strict=True))
    body = [f"constexpr const char* op = {cpp_str(r.op_name)};", "opsmith::require_torch();"]
    body += [f"at::Tensor {t} = {t}_in;" for t in tnames]
    body += _guards(r, "op")
    if r.index_dtype == "int32":
        body += [f"if ({t}.numel() > {INT32_MAX}) opsmith::large_error(op, {cpp_str(t)}, {t}.numel());" for t in tnames]
    body += _outputs(r, tnames)
    body += _empty_and_extras(r, refs)
    body += _limits(r, refs)
    body += _launch(n, refs, tnames)
    body.append(returns([f"o{k}" for k in range(len(r.outputs))]))
    return [f"{ret} {n.name}_cuda({params}) {{", *("  " + x for x in body), "}"]


def _meta(n: NativeOp) -> list[str]:
    """fake.py's rules on symbolic sizes: scalar ranges, dtypes, ranks, declared shapes, the outputs, and the
    size checks where sizes are static."""
    r = n.record
    ret, types, names = cpp_signature(r)
    tnames = [a.name for a in r.tensor_inputs]
    body = [f"constexpr const char* op = {cpp_str(r.op_name)};", "opsmith::require_torch();"]
    for a in r.inputs:
        if isinstance(a, ScalarArg) and a.ctype in INT_LIMITS:
            lo, hi = INT_LIMITS[a.ctype]
            v = f"{a.name}.maybe_as_int()" if _is_sym(r, a.name) else f"std::optional<int64_t>({a.name})"
            body.append(f"if (auto v = {v}) opsmith::check_int_range(op, {cpp_str(a.name)}, *v, {_i64(lo)}, "
                        f'{_i64(hi)}, "{a.ctype}");')  # fmt: skip
        elif isinstance(a, ScalarArg) and a.ctype in FLOAT_MAX and a.py_type == "float":
            body.append(f"opsmith::check_float_range(op, {cpp_str(a.name)}, {a.name}, {FLOAT_MAX[a.ctype]!r}, "
                        f'"{a.ctype}");')  # fmt: skip
    for a in r.tensor_inputs:
        n_ = cpp_str(a.name)
        if a.dtype:
            body.append(f"opsmith::check_dtype(op, {n_}, {a.name}, {AT_DTYPE[dtype_from_name(a.dtype)]});")
        if a.ndim is not None:
            body.append(f'if ({a.name}.dim() != {a.ndim}) opsmith::rank_error(op, {n_}, {a.name}, "{a.ndim} dims");')
        if a.min_ndim:
            body.append(f"if ({a.name}.dim() < {a.min_ndim}) opsmith::rank_error(op, {n_}, {a.name}, \"at least "
                        f'{a.min_ndim} dims (the launch geometry or a reduced axis needs them)");')  # fmt: skip
        if a.dtype_like:
            body.append(f"opsmith::check_like(op, {n_}, {a.name}, {cpp_str(a.dtype_like)}, {a.dtype_like}, false);")
    for a in r.tensor_inputs:
        if a.shape is None:
            continue
        want = ["c10::SymInt(-1)" if e is None else f"c10::SymInt({e})" if isinstance(e, int)
                else f"{tnames[e[0]]}.sym_size({e[1]})" for e in a.shape]  # fmt: skip
        body.append(f"opsmith::check_shape_sym(op, {cpp_str(a.name)}, {a.name}, {{{', '.join(want)}}});")
    if r.index_dtype == "int32":
        body += [f"if (auto v = {t}.sym_numel().maybe_as_int(); v && *v > {INT32_MAX}) "
                 f"opsmith::large_error(op, {cpp_str(t)}, *v);" for t in tnames]  # fmt: skip
    body += _outputs(r, tnames, sym=True)
    outs = [f"o{k}" for k in range(len(r.outputs))]
    if outs:
        made = "{" + ", ".join(f"&{o}" for o in outs) + "}"
        filled = " || ".join(f"{o}.sym_numel().maybe_as_int().value_or(0) != 0" for o in outs)
        for t in tnames:
            body.append(f"if ({t}.sym_numel().maybe_as_int() == std::optional<int64_t>(0) && ({filled})) "
                        f"opsmith::empty_error(op, {cpp_str(t)}, {made});")  # fmt: skip
    body += _meta_limits(r, tnames, outs)
    body.append(returns(outs))
    params = ", ".join(f"{t} {a}" for t, a in zip(types, names, strict=True))
    return [f"{ret} {n.name}_meta({params}) {{", *("  " + x for x in body), "}"]


def _meta_limits(r: KernelRecord, tnames: list[str], outs: list[str]) -> list[str]:
    """Launch extents of a 32-bit kernel where every size is static (fake._static_checks)."""
    if r.index_dtype != "int32":
        return []
    refs = {f"i{k}": t for k, t in enumerate(tnames)} | {f"o{k}": o for k, o in enumerate(outs)}
    if not outs and r.mutated:
        refs["o0"] = r.mutated[0].name
    refs["sm_count"] = f"opsmith::sm_count({tnames[0]}.is_cuda() ? {tnames[0]}.get_device() : -1)"
    static = ", ".join(f"&{t}" for t in dict.fromkeys([*tnames, *outs]))
    L = []
    for plan in r.launches or (r.launch,):
        for expr, limit in plan.limits if plan is not None else ():
            code = cpp_expr(expr, refs)
            L.append(f"if (opsmith::all_static({{{static}}}) && {code} > {limit}LL) "
                     f"opsmith::extent_error(op, {_extent_args(describe(expr, _labels(r)))}, {code}, {limit}LL);")  # fmt: skip
    return L


def op_source(n: NativeOp) -> str:
    """The C++ of one op: its kernel tables, CUDA implementation and Meta implementation."""
    title = f"// ---- {n.record.op_name} "
    L = [title + "-" * max(4, 116 - len(title)), *_tables(n), "", *_cuda(n), "", *_meta(n)]
    return "\n".join(L) + "\n"
