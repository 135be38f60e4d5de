"""C++ for one op: its call plan (``plan/steps.py``) printed as the CUDA kernel of a native library (guards,
conversions, outputs, extras, the tuning decision, the variant for the call's dtypes and sizes, the checked
grid, the launch on the current stream) and as its Meta kernel (the plan's meta semantics, over symbolic
sizes). The Python printers (``eager.py``, ``fake.py``) print the same plan; this module decides nothing.
``autograd_cpp.py`` writes the Autograd kernels and ``library.py`` assembles the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..declare.expr import bounds
from ..declare.record import KernelRecord, dtype_from_name
from ..declare.validate import PYTHON_PATH_NS
from ..plan import steps as P
from ..plan.guards import nearest_dtype
from .cpp import SCALAR_TYPE, comment, cpp_expr, cpp_float, cpp_locals, cpp_str, op_scope
from .dims_cpp import DimsSteps
from .dispatch_cpp import int_arg, launch, tables
from .target_cpp import TENSOR_TYPE
from .xla_cpp import handler_export, handler_source

__all__ = ["NativeOp", "Variant", "cpp_signature", "op_source", "python_path_op"]

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
    dropped: int = 0  # bit p: the kernel does not take user parameter p (compiled in: ``Binary.dropped``)
    jit: tuple[tuple[str, int], ...] = ()  # the driver JIT's options for a PTX image (``Binary.jit``)
    cute: Any = None  # a CuTe DSL host function's export (``flavors/cute.py`` CuteExport): it launches itself


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
    #: Served in the process that registered the op (``serving.py``): a call the library holds no kernel or
    #: tuning decision for goes to the Python path (``python_path``) rather than being refused.
    serve: bool = False
    #: What the library is written against (``target_cpp.py``): "aten"; "stable", PyTorch's stable ABI (boxed
    #: kernels over ``torch::stable::Tensor``, a Meta kernel over concrete sizes); "xla", XLA's FFI (a handler
    #: over XLA's buffers and stream, no Meta kernel: ``xla_cpp.py``).
    target: str = "aten"
    #: The (config, specialization) keys of ``variants``, as ``Variants.kernels`` keys them: what a served
    #: library holds from its build, the rest being handed to it at run time (``learned.py``).
    held: list[tuple[int, tuple]] = field(default_factory=list)

    @property
    def aten(self) -> bool:
        return self.target == "aten"

    @property
    def record(self) -> KernelRecord:
        return self.op.record

    @property
    def plan(self) -> P.CallPlan:
        return self.op.plan

    @property
    def scope(self) -> str:
        """The C++ scope of the op's functions: ``ns_myns::op_relu``."""
        return "::".join(op_scope(self.record.op_name))


def cpp_signature(record: KernelRecord, target: str = "aten") -> tuple[str, list[str], list[str]]:
    """(return type, argument types, argument locals) of the op's C++ kernels, from its schema. Beside ATen:
    tensors by value and a SymInt as its int64 value (as ``TORCH_BOX`` unboxes them; XLA's attributes); an XLA
    kernel writes its outputs into the buffers it is given and returns nothing."""
    schema = torch._C.parse_schema(f"{record.op_name}{record.schema}")
    tensor = TENSOR_TYPE[target]
    aten = target == "aten"
    scalars = _SCALAR if aten else {**_SCALAR, "SymInt": "int64_t"}
    optional = f"std::optional<{tensor}>"
    types = [(f"const {tensor}&" if aten else tensor) if isinstance(a.type, torch.TensorType)
             else (f"const {optional}&" if aten else optional) if str(a.type) == "Optional[Tensor]"
             else scalars[str(a.type)] for a in schema.arguments]  # fmt: skip
    n = 0 if target == "xla" else len(schema.returns)
    outs = [optional if str(r.type) == "Optional[Tensor]" else tensor for r in schema.returns]
    ret = "void" if n == 0 else outs[0] if n == 1 else f"std::tuple<{', '.join(outs)}>"
    return ret, types, cpp_locals([a.name for a in schema.arguments])


def returns(outs: list[str]) -> str:
    if not outs:
        return "return;"
    return f"return {outs[0]};" if len(outs) == 1 else f"return std::make_tuple({', '.join(outs)});"


def _i64(v: int) -> str:
    """An integer literal in int64 range; u64's top is clamped (a schema int is int64 anyway)."""
    if v >= 2**63:
        return "INT64_MAX"
    return "INT64_MIN" if v == -(2**63) else f"{v}LL"


class _Printer(DimsSteps):
    """Prints one plan as C++; ``meta``: the Meta kernel's semantics, over symbolic sizes. A stable-ABI
    library's Meta kernel is the CUDA kernel's steps over concrete sizes without the device's (``nodevice``:
    no device check, no strides shared in place, alignment from the storage offset, no launch)."""

    def __init__(self, n: NativeOp, meta: bool) -> None:
        self.nodevice = meta and not n.aten
        meta = meta and n.aten
        self.xla = n.target == "xla"
        self.n, self.plan, self.record, self.meta = n, n.plan, n.record, meta
        _, self.types, self.args = cpp_signature(n.record, n.target)
        self.tensor = TENSOR_TYPE[n.target]
        self.t = [self.args[p] for p in self.plan.tensors]
        self.tn = self.plan.tensor_names
        self.refs = {f"i{k}": v for k, v in enumerate(self.t)} | {
            f"o{k}": f"o{k}" for k in range(len(self.plan.outputs))
        }
        self.refs |= {f"n{k}": f"n{k}.expect_int()" if meta else f"n{k}" for k in range(len(self.t))}
        self.refs |= {f"x{k}": f"x{k}" for k in range(len(self.record.extras))}
        self.refs |= {f"s{p}": int_arg(self, p) for p in self.record.int_scalars}  # a heuristic over a scalar
        self.refs["sm_count"] = (f"opsmith::sm_count({self.t[0]}.is_cuda() ? {self.t[0]}.get_device() : -1)"
                                 if meta or self.nodevice else "opsmith::sm_count(dev.index())")  # fmt: skip
        self.statics_done = False

    def expr(self, e: Any, where: tuple[str, str] | None = None, wide: bool = False, early: bool = False) -> str:
        w = None if where is None else f"opsmith::Where{{op, {cpp_str(where[0])}, {cpp_str(where[1])}}}"
        facts = self.plan.early if early else self.plan.facts

        def checked(divisor: Any) -> bool:
            if isinstance(divisor, int):
                return divisor == 0
            lo, hi = bounds(divisor, facts)
            return lo <= 0 <= hi

        return cpp_expr(e, self.refs, where=w, wide=wide, checked_div=checked)

    def steps(self) -> list[str]:
        L: list[str] = []
        for s in self.plan.steps:
            lines = getattr(self, type(s).__name__.lower())(s)
            about = self.plan.about(s)
            if about and lines:  # an optional tensor's checks run when the call gave it
                cond = " && ".join(f"{self.t[k]}.defined()" for k in about)
                head = f"if ({cond}) {{"
                if L and L[-1] == "}" and _block_head(L) == head:  # the same tensor's next check: one block
                    L = L[:-1] + ["  " + x for x in lines] + ["}"]
                    continue
                lines = [head, *("  " + x for x in lines), "}"]
            L += lines
        return L

    def locals_of_optional(self) -> list[str]:
        """An optional tensor as the steps read it: the tensor, or an undefined one for None."""
        return [f"{self.tensor} {self.t[k]} = {self.t[k]}_in.has_value() ? *{self.t[k]}_in : {self.tensor}();"
                for k in self.plan.optional]  # fmt: skip

    def _n(self, k: int) -> tuple[str, str]:
        return self.t[k], cpp_str(self.tn[k])

    def given(self, s: P.Given) -> list[str]:
        t, n = self._n(s.k)
        return [f"if (!{t}.defined()) opsmith::missing_error(op, {n});"]

    def device(self, s: P.Device) -> list[str]:
        if self.meta or self.nodevice:
            return []
        t, n = self._n(s.k)
        if s.k == 0:
            return [f"const opsmith::Device dev = opsmith::check_device(op, {n}, {t}, nullptr, nullptr);"]
        return [f"opsmith::check_device(op, {n}, {t}, {cpp_str(self.tn[0])}, &dev);"]

    def dtype(self, s: P.Dtype) -> list[str]:
        t, n = self._n(s.k)
        if isinstance(s.dtype, tuple):  # a declared set
            allowed = [dtype_from_name(d) for d in s.dtype]
            types = ", ".join(SCALAR_TYPE[d] for d in allowed)
            # the fix's .to(): guards.nearest_dtype's choice per refused dtype, where it is not the first declared
            near = [(d, nearest_dtype(d, allowed)) for d in SCALAR_TYPE if d not in allowed]
            pairs = ", ".join(f"{{{SCALAR_TYPE[d]}, {SCALAR_TYPE[a]}}}" for d, a in near if a != allowed[0])
            return [f"opsmith::check_dtype_in(op, {n}, {t}, {{{types}}}, {{{pairs}}});"]
        return [f"opsmith::check_dtype(op, {n}, {t}, {SCALAR_TYPE[dtype_from_name(s.dtype)]});"]

    def rank(self, s: P.Rank) -> list[str]:
        t, n = self._n(s.k)
        cond = f"{t}.dim() != {s.exact}" if s.exact is not None else f"{t}.dim() < {s.least}"
        decl = f", {cpp_str(s.decl)}" if s.decl else ""
        return [
            f"if ({cond}) opsmith::rank_error(op, {n}, {t}, {-1 if s.exact is None else s.exact}, {s.least}{decl});"
        ]

    def numel(self, s: P.Numel) -> list[str]:
        t, n = self._n(s.k)
        if s.k in self.plan.optional:  # 0 for None
            t = f"{t}.defined() ? {t}"
            L = [f"const c10::SymInt n{s.k} = {t}.sym_numel() : c10::SymInt(0);" if self.meta else
                 f"const int64_t n{s.k} = {t}.numel() : 0;"]  # fmt: skip
            if self.meta and s.narrow:
                L.append(f"if (auto v = n{s.k}.maybe_as_int(); v && *v > {P.INT32_MAX}) "
                         f"opsmith::large_error(op, {n}, *v);")  # fmt: skip
            elif s.narrow:
                L.append(f"if (n{s.k} > {P.INT32_MAX}) opsmith::large_error(op, {n}, n{s.k});")
            return L
        if self.meta:
            L = [f"const c10::SymInt n{s.k} = {t}.sym_numel();"]
            if s.narrow:
                L.append(
                    f"if (auto v = n{s.k}.maybe_as_int(); v && *v > {P.INT32_MAX}) opsmith::large_error(op, {n}, *v);"
                )
            return L
        L = [f"const int64_t n{s.k} = {t}.numel();"]
        return L + ([f"if (n{s.k} > {P.INT32_MAX}) opsmith::large_error(op, {n}, n{s.k});"] if s.narrow else [])

    def layout(self, s: P.Layout) -> list[str]:
        if self.nodevice or (self.meta and s.policy == "make"):
            return []
        t, n = self._n(s.k)
        axes = "{" + ", ".join(map(str, s.axes)) + "}"
        check = f"!{t}.is_contiguous()" if not s.axes else f"!opsmith::addressable({t}, {axes})"
        if s.policy == "make":
            return [f"if ({check}) {t} = opsmith::contiguous({t});"]
        if self.meta:  # a layout "require" refuses is refused while tracing too, where the strides are known
            check = f"opsmith::all_static({{&{t}}}) && {check}"
        return [f"if ({check}) opsmith::layout_error(op, {n}, {t}, {axes});"]

    def span(self, s: P.Span) -> list[str]:
        t, n = self._n(s.k)
        if not self.meta and not self.nodevice:
            return [f"opsmith::check_span(op, {n}, {t});"]
        axes = "{" + ", ".join(map(str, s.axes)) + "}"
        static = "" if self.nodevice else f"opsmith::all_static({{&{t}}}) && "
        return [f"if ({static}opsmith::addressable({t}, {axes})) opsmith::check_span(op, {n}, {t});"]

    def like(self, s: P.Like) -> list[str]:
        t, n = self._n(s.k)
        o, on = self._n(s.other)
        return [f"opsmith::check_like(op, {n}, {t}, {on}, {o});"]

    def scalar(self, s: P.Scalar) -> list[str]:
        v, n = self.args[s.pos], cpp_str(self.plan.names[s.pos])
        if s.ctype in P.INT_LIMITS:
            lo, hi = s.lo, s.hi
            sym = self.types[s.pos] == "c10::SymInt"
            if self.meta and sym:
                return [f"if (auto v = {v}.maybe_as_int()) opsmith::check_int_range(op, {n}, *v, {_i64(lo)}, "
                        f'{_i64(hi)}, "{s.ctype}");']  # fmt: skip
            val = f"{v}.expect_int()" if sym else v
            return [f'opsmith::check_int_range(op, {n}, {val}, {_i64(lo)}, {_i64(hi)}, "{s.ctype}");']
        return [f'opsmith::check_float_range(op, {n}, {v}, {P.FLOAT_MAX[s.ctype]!r}, "{s.ctype}");']

    def alloc(self, s: P.Alloc) -> list[str]:
        """Contiguous, on the inputs' device; over symbolic sizes in the Meta kernel."""
        src, name = self._n(s.src)
        dt = SCALAR_TYPE[dtype_from_name(s.dtype)] if s.dtype else f"{self.t[s.dtype_from]}.scalar_type()"
        init = [] if s.init is None or self.meta else [f"opsmith::fill(o{s.k}, {cpp_float(float(s.init))});"]
        if s.check_init:  # an open dtype: 2.5 or -inf would be truncated or overflow in an integer output
            init.insert(0, f"opsmith::check_init(op, {cpp_str(self.tn[s.dtype_from])}, "
                        f"{cpp_str(self.plan.outputs[s.k])}, o{s.k}, {cpp_float(float(s.init))}, "
                        f"{cpp_str(repr(s.init))});")  # fmt: skip
        # XLA allocated the output: the plan's is checked against it and takes its memory (xla_cpp.py).
        init = ([f"o{s.k} = opsmith::bind(op, {cpp_str(self.plan.outputs[s.k])}, o{s.k}, r{s.k});"] if self.xla
                else []) + init  # fmt: skip
        if s.rule == "shape":
            L = self.requested(s, self.shape_alloc(s, f"o{s.k}", dt) + init)
            return L + (self._statics() if self.meta and s.k == len(self.plan.outputs) - 1 else [])
        shape = f"{src}.{'sym_sizes' if self.meta else 'sizes'}()"
        if s.rule == "reduce":
            dims = "{" + ", ".join(str(d) for d in s.dims) + "}"
            shape = f"opsmith::reduced(op, {name}, {shape}, {dims}, {str(s.keepdim).lower()})"
        if self.meta:
            L = [f"at::Tensor o{s.k} = at::empty_symint({shape}, {src}.options().dtype({dt}));"]
        elif s.rule == "same":  # empty_like, as the Python path allocates (its strides too)
            strided = str(bool(self.record.tensor_inputs[s.src].strided)).lower()
            L = [f"{self.tensor} o{s.k} = opsmith::empty_like({src}, {dt}, {strided});"]
        else:
            L = [f"{self.tensor} o{s.k} = opsmith::empty({shape}, {src}, {dt});"]
        L = self.requested(s, L + init)
        if self.meta and s.k == len(self.plan.outputs) - 1:
            L += self._statics()
        return L

    def _statics(self) -> list[str]:
        self.statics_done = True
        ts = ", ".join(f"&{t}" for t in [*self.t, *(f"o{k}" for k in range(len(self.plan.outputs)))])
        return [f"const bool st = opsmith::all_static({{{ts}}});"]

    def ret(self) -> str:
        outs = [f"o{k}" if o.when is None else f"opsmith::maybe(o{k})" for k, o in enumerate(self.record.outputs)]
        return "return;" if self.xla else returns(outs)

    def requested(self, s: P.Alloc, lines: list[str]) -> list[str]:
        """An optional output is allocated when the call asked for it (its flag) and stays undefined otherwise
        (a null pointer to the kernel, None returned). The shared size flag the Meta kernel declares with the
        first declared shape stays outside the block, where later steps read it."""
        if s.when is None:
            return lines
        tensor = "at::Tensor" if self.meta else self.tensor
        hoisted = [x for x in lines if x.startswith("const bool ")]
        body = [x.replace(f"{tensor} o{s.k} = ", f"o{s.k} = ", 1) for x in lines if not x.startswith("const bool ")]
        return [*hoisted, f"{tensor} o{s.k};", f"if ({self.args[s.when]}) {{", *("  " + x for x in body), "}"]

    def returnifempty(self, s: P.ReturnIfEmpty) -> list[str]:
        pre = self._statics() if self.meta and not self.statics_done else []
        conds = [f"{self.expr(w)} == 0" for w in s.written]
        return [*pre, f"if ({' && '.join((['st'] if self.meta else []) + conds)}) {self.ret()}"]

    def refuseempty(self, s: P.RefuseEmpty) -> list[str]:
        written = [f"&o{k}" for k in range(len(self.plan.outputs))] + [f"&{self.t[k]}" for k in self.plan.mutated]
        made = "{" + ", ".join(written) + "}"
        given = {k: f"{self.t[k]}.defined() && " if k in self.plan.optional else "" for k in s.tensors}
        return [f"if ({'st && ' if self.meta else ''}{given[k]}{self.expr(['var', f'n{k}'])} == 0) "
                f"opsmith::empty_error(op, {cpp_str(self.tn[k])}, {made});" for k in s.tensors]  # fmt: skip

    def sharestrides(self, s: P.ShareStrides) -> list[str]:
        if self.meta or self.nodevice:
            return []
        labels = ", ".join(cpp_str(self.plan.labels[r]) for r in s.refs)
        ptrs = ", ".join("&" + self.refs[r] for r in s.refs)
        inputs = ", ".join("true" if r.startswith("i") else "false" for r in s.refs)
        require = ", ".join(str(r.startswith("i") and self.record.tensor_inputs[int(r[1:])].contiguous == "require").lower()
                            for r in s.refs)  # fmt: skip
        return [f"opsmith::share_strides(op, {{{labels}}}, {{{ptrs}}}, {{{inputs}}}, {{{require}}}, {s.axis});"]

    def extra(self, s: P.Extra) -> list[str]:
        if self.meta and s.check is None and not s.wide and not _divides(s.expr):
            return []
        if not self.meta and isinstance(s.expr, list) and s.expr[0] == "var" and s.check is None:
            self.refs[f"x{s.k}"] = self.refs[s.expr[1]]  # a numel read already: no copy
            return []
        if isinstance(s.expr, float) or s.ctype in ("f32", "f64"):
            v = cpp_float(float(s.expr)) if not isinstance(s.expr, list) else self.expr(s.expr)
            return [f"const double x{s.k} = {v};"]
        L = [f"const opsmith::i128 x{s.k} = {self.expr(s.expr, s.where, s.wide)};  {comment(s.label)}"]
        if s.check is not None:
            lo, hi = s.check
            L.append(f"opsmith::check_int_range(op, {cpp_str(s.label)}, x{s.k}, {_i128(lo)}, {_i128(hi)}, "
                     f'"{s.ctype}", {cpp_str(s.hint)});')  # fmt: skip
        return ["if (st) {", *("  " + x for x in L), "}"] if self.meta else L

    def extent(self, s: P.Extent) -> list[str]:
        e = self.expr(s.expr, (s.arg, s.label), s.wide)
        line = (f"if (const opsmith::i128 e = {e}; e > {s.limit}) "
                f"opsmith::extent_error(op, {cpp_str(s.arg)}, {cpp_str(s.label)}, e, {s.limit});")  # fmt: skip
        return [f"if (st) {line}" if self.meta else line]

    def grid(self, c: int) -> list[str]:
        launch = self.plan.launch
        checks = {g.axis: g for g in launch.grid_checks[c]}  # type: ignore[union-attr]
        out = []
        smem = checks.get(P.SMEM_AXIS)
        if smem is not None:  # a size expression: computed and checked with the grid
            v = self.expr(smem.expr, (smem.arg, smem.label), smem.wide)
            out.append(f"sm = opsmith::check_smem(op, {cpp_str(smem.arg)}, {cpp_str(smem.label)}, {v});"
                       if smem.low or smem.high else f"sm = int64_t({v});")  # fmt: skip
        for axis, e in enumerate(launch.grids[c]):  # type: ignore[union-attr,index]
            chk = checks.get(axis)
            if chk is None:
                if e != 1:  # every axis starts at 1
                    out.append(f"g{axis} = {e};" if isinstance(e, int) else f"g{axis} = int64_t({self.expr(e)});")
            elif chk.low or chk.high:
                least = ", 0" if chk.low and launch.empty_ok else ""  # type: ignore[union-attr]
                out.append(f"g{axis} = opsmith::check_grid(op, {cpp_str(chk.arg)}, {cpp_str(chk.label)}, {axis}, "
                           f"{self.expr(e, (chk.arg, chk.label), chk.wide)}{least});")  # fmt: skip
            else:
                out.append(f"g{axis} = int64_t({self.expr(e, (chk.arg, chk.label), chk.wide)});")
        return out


def _block_head(lines: list[str]) -> str | None:
    """The ``if (...) {`` opening the block that ``lines`` end with."""
    for x in reversed(lines[:-1]):
        if not x.startswith("  "):
            return x
    return None


def _i128(v: int) -> str:
    return str(v) if -(2**63) < v < 2**63 else f"opsmith::i128_of({cpp_str(str(v))})"


def _divides(e: Any) -> bool:
    return isinstance(e, list) and (e[0] in ("div", "cdiv") or any(_divides(a) for a in e[1:]))


def _python_path(n: NativeOp) -> list[str]:
    """``python_path``: the call handed to the op's Python implementation, registered as the op
    ``opsmith_python_<ns>::<name>`` by ``serving.py`` before the library is loaded."""
    ret, types, names = cpp_signature(n.record)
    params = ", ".join(f"{t} {a}" for t, a in zip(types, names, strict=True))
    return [
        "// A call this library holds no kernel or tuning decision for (a dtype, a compiled-in size or a tuning key",
        "// first met after the build): the Python path serves it, compiling or tuning what it needs, and opsmith",
        "// builds a library that holds it.",
        f"[[gnu::noinline]] {ret} python_path({params}) {{",
        f"  static const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow({cpp_str(python_path_op(n.record))}, \"\")",
        f"      .typed<{ret}({', '.join(types)})>();",
        f"  return handle.call({', '.join(names)});",
        "}",
    ]  # fmt: skip


def python_path_op(record: KernelRecord) -> str:
    """The name under which a served op's Python implementation stays callable: ``opsmith_python_<ns>::<name>``.
    Namespace and name stay apart, so two ops never share one (``a__b::c`` and ``a::b__c`` did when the two were
    joined by ``__``); registration reserves the ``opsmith_python`` namespaces (``validate.RESERVED_NAMESPACES``)."""
    ns, name = record.op_name.split("::")
    return f"{PYTHON_PATH_NS}_{ns}::{name}"


def _function(n: NativeOp, meta: bool) -> list[str]:
    ret, types, _ = cpp_signature(n.record, n.target)
    pr = _Printer(n, meta)
    if pr.meta:
        opt = {pr.t[k] for k in n.plan.optional}
        params = ", ".join(f"{t} {a}{'_in' if a in opt else ''}" for t, a in zip(types, pr.args, strict=True))
        body = [f"constexpr const char* op = {cpp_str(n.record.op_name)};", "opsmith::require_torch();"]
        body += [*pr.locals_of_optional(), *pr.steps(), pr.ret()]
        return [f"{ret} meta_impl({params}) {{", *("  " + x for x in body), "}"]
    tensors = set(pr.t)
    params = ", ".join(f"{t} {a}_in" if a in tensors else f"{t} {a}" for t, a in zip(types, pr.args, strict=True))
    if pr.xla:  # the buffers XLA allocated for the outputs
        params += "".join(f", {pr.tensor} r{k}" for k in range(len(n.plan.outputs)))
    body = [f"constexpr const char* op = {cpp_str(n.record.op_name)};", "opsmith::require_torch();"]
    if n.serve:
        body.append("served[opsmith::kCalls].fetch_add(1, std::memory_order_relaxed);")
    opt = {pr.t[k] for k in n.plan.optional}
    body += [f"{pr.tensor} {t} = {t}_in;" for t in pr.t if t not in opt] + pr.locals_of_optional()
    body += pr.steps() + ([] if pr.nodevice else launch(pr)) + [pr.ret()]
    return [f"{ret} {'meta' if meta else 'cuda'}_impl({params}) {{", *("  " + x for x in body), "}"]


def op_source(n: NativeOp) -> tuple[str, list[str]]:
    """The C++ of one op, in its own scope: its kernel tables, CUDA kernel and Meta kernel (XLA: its handler
    instead of a Meta kernel); and, for XLA, the lines exporting its handler at file scope."""
    ns, scope = op_scope(n.record.op_name)
    title = f"// ---- {n.record.op_name} "
    export: list[str] = []
    if n.target == "xla":
        handler, bind = handler_source(n, cpp_signature(n.record, n.target)[2])
        export = handler_export(n, bind)
        second = handler
    else:
        second = _function(n, meta=True)
    L = [title + "-" * max(4, 116 - len(title)), f"namespace {ns} {{", f"namespace {scope} {{", *tables(n), "",
         *([*_python_path(n), ""] if n.serve else []), *_function(n, meta=False), "", *second,
         f"}}  // namespace {scope}", f"}}  // namespace {ns}"]  # fmt: skip
    return "\n".join(L) + "\n", export
