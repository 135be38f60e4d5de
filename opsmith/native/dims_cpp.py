"""C++ for the call plan's named-dimension steps (``plan.Shape``, ``ShapeOf``, ``Align``, ``Require`` and
declared output shapes): the printer's methods, and the runtime they call (``DIMS_CPP``).

As in ``fake.py``, the Meta kernel compares sizes where both are integers and, where one is symbolic, asserts
the relation with ``expect_true`` (what ``TORCH_SYM_CHECK`` and ``torch._check`` do): a guard of the traced
graph, so compile and export keep it. Every message is worded as ``guards.Refusals`` words it.
"""

from __future__ import annotations

from typing import Any

from ..plan import steps as P
from .cpp import cpp_str, sym_expr

__all__ = ["DIMS_CPP", "DimsSteps"]

_WORDS = {"divisible": "divisible by", "at_most": "at most", "at_least": "at least", "one_of": "one of"}


class DimsSteps:
    """Mixin of ``codegen._Printer``: ``t``/``tn`` (tensor locals and names), ``meta``, ``expr``, ``plan``."""

    t: list[str]
    tn: list[str]
    meta: bool
    tensor: str  # the C++ tensor type: at::Tensor, or torch::stable::Tensor in a stable-ABI library
    nodevice: bool  # a stable-ABI library's Meta kernel: concrete sizes, no device
    plan: P.CallPlan

    def expr(self, e: Any, where: Any = None, wide: bool = False, early: bool = False) -> str:  # pragma: no cover
        raise NotImplementedError

    def _inputs_static(self) -> str:
        """``ist``: every input's sizes are integers (declared once, before the first step that reads it)."""
        if not getattr(self, "ist_done", False):
            self.ist_done = True
            return f"const bool ist = opsmith::all_static({{{', '.join('&' + t for t in self.t)}}});"
        return ""

    def _size(self, k: int, axis: int) -> str:
        return f"{self.t[k]}.sym_size({axis})" if self.meta else f"{self.t[k]}.size({axis})"

    def _axes(self, k: int, start: int, after: int) -> str:
        return f"opsmith::{'sym_axes' if self.meta else 'axes'}({self.t[k]}, {start}, {after})"

    def _want(self, w: Any) -> str:
        if isinstance(w, int):
            return f"c10::SymInt({w})" if self.meta else str(w)
        if w[0] == "expr":  # a size expression of the declared shape ("2 * N"): an i128, or a SymInt on Meta
            concrete = self.expr(w[1], w[2], w[3], early=True)
            if not self.meta:
                return f"({concrete})"
            return f"(ist ? c10::SymInt(int64_t({concrete})) : {sym_expr(w[1], self.refs)})"  # type: ignore[attr-defined]
        if w[0] == "size":
            return self._size(w[1], w[2])
        return self._axes(w[1], w[2], w[3])

    def _shape_fail(self, s: P.Shape) -> str:
        names = ", ".join(f"{{{cpp_str(n)}, {self._value(w)}, {cpp_str(f)}}}" for n, w, f in s.names)
        t = self.t[s.k]
        return f"opsmith::shape_error(op, {cpp_str(self.tn[s.k])}, {t}, {cpp_str(s.decl)}, {{{names}}})"

    def _value(self, w: Any) -> str:
        if w[0] == "expr" and not self.meta:
            return f"opsmith::str({self._want(w)})"
        return f"opsmith::cat({self._want(w)})" if w[0] in ("size", "expr") else f"opsmith::tuple_str({self._want(w)})"

    def shape(self, s: P.Shape) -> list[str]:
        exprs = any(not isinstance(w, int) and w[0] == "expr" for _, w in s.ties)
        pre = self._inputs_static() if self.meta and exprs else ""
        pairs = []
        for axis, want in s.ties:
            got = self._axes(s.k, axis[1], axis[2]) if isinstance(axis, tuple) else self._size(s.k, axis)
            pairs.append((got, self._want(want)))
        if not self.meta:
            return [f"if ({' || '.join(f'{a} != {b}' for a, b in pairs)}) {self._shape_fail(s)};"]
        ties = [f"  opsmith::tie({a}, {b}, fail);" for a, b in pairs]
        return [*([pre] if pre else []), "{", f"  auto fail = [&] {{ {self._shape_fail(s)}; }};", *ties, "}"]

    def shapeof(self, s: P.ShapeOf) -> list[str]:
        t, o = self.t[s.k], self.t[s.other]
        fail = f"opsmith::shape_of_error(op, {cpp_str(self.tn[s.k])}, {t}, {cpp_str(self.tn[s.other])}, {o})"
        if not self.meta:
            return [f"if (!opsmith::same_sizes({t}, {o})) {fail};"]
        return [f"opsmith::tie({t}.sym_sizes().vec(), {o}.sym_sizes().vec(), [&] {{ {fail}; }});"]

    def align(self, s: P.Align) -> list[str]:
        t = self.t[s.k]
        if self.meta:  # no memory: the storage offset decides (guards.misalign)
            if s.policy == "make":
                return []
            return [f"if (opsmith::meta_misaligned({t}, {s.bytes})) "
                    f"opsmith::align_error(op, {cpp_str(self.tn[s.k])}, {t}, {s.bytes});"]  # fmt: skip
        if self.nodevice:  # a stable-ABI Meta kernel: the storage offset, in concrete sizes
            if s.policy == "make":
                return []
            return [f"if ({t}.storage_offset() * int64_t({t}.element_size()) % {s.bytes}) "
                    f"opsmith::align_error(op, {cpp_str(self.tn[s.k])}, {t}, {s.bytes});"]  # fmt: skip
        cond = f"reinterpret_cast<uintptr_t>({t}.data_ptr()) % {s.bytes}"
        if s.policy == "make":
            return [f"if ({cond}) {t} = opsmith::aligned_copy({t});"]
        return [f"if ({cond}) opsmith::align_error(op, {cpp_str(self.tn[s.k])}, {t}, {s.bytes});"]

    def require(self, s: P.Require) -> list[str]:
        value = str(tuple(s.value)) if s.kind == "one_of" else str(s.value)

        # A function, not a %-format: the user's why= (a C++ literal here) may hold '%'.
        def fail(got: str) -> str:
            return (f"opsmith::require_error(op, {cpp_str(s.arg)}, {cpp_str(s.label)}, {cpp_str(_WORDS[s.kind])}, "
                    f"{cpp_str(value)}, {cpp_str(s.why)}, {got})")  # fmt: skip

        concrete = [f"const opsmith::i128 r = {self.expr(s.expr, s.where, s.wide, early=True)};",
                    f"if ({_refused('r', s.kind, s.value)}) {fail('opsmith::str(r)')};"]  # fmt: skip
        if not self.meta:
            return ["{", *("  " + x for x in concrete), "}"]
        sym = sym_expr(s.expr, self.refs)  # type: ignore[attr-defined]
        ok = _sym_ok("r", s.kind, s.value)
        pre = self._inputs_static()
        return [*([pre] if pre else []), "if (ist) {", *("  " + x for x in concrete), "} else {",
                f"  const c10::SymInt r = {sym};", f"  if (!({ok}).expect_true(__FILE__, __LINE__)) {fail('c10::str(r)')};", "}"]  # fmt: skip

    def shape_alloc(self, s: P.Alloc, out: str, dt: str) -> list[str]:
        """A declared output shape, checked and allocated into ``o<k>``."""
        name = cpp_str(self.plan.outputs[s.k])
        if not self.meta:
            L = [f"std::vector<int64_t> s{s.k};"]
            for e in s.entries:
                if e[0] == "group":
                    L.append(f"opsmith::append(s{s.k}, {self.t[e[1]]}.sizes(), {e[2]}, {e[3]});")
                else:
                    v = str(e[1]) if e[0] == "int" else f"int64_t({self.expr(e[1], e[2], e[3], early=True)})"
                    L.append(f"s{s.k}.push_back({v});")
            if s.narrow:
                L.append(f"if (opsmith::exceeds(s{s.k}, 2147483647)) opsmith::large_out_error(op, {name}, s{s.k});")
            if s.wide_bytes:
                L.append(f"opsmith::check_bytes(op, {name}, s{s.k}, {dt});")
            return [*L, f"{self.tensor} {out} = opsmith::empty(s{s.k}, {self.t[s.src]}, {dt});"]
        pre = self._inputs_static()
        L = [*([pre] if pre else []), f"std::vector<c10::SymInt> s{s.k};"]
        for e in s.entries:
            if e[0] == "group":
                L.append(f"opsmith::append(s{s.k}, {self.t[e[1]]}.sym_sizes(), {e[2]}, {e[3]});")
            elif e[0] == "int":
                L.append(f"s{s.k}.push_back(c10::SymInt({e[1]}));")
            else:
                concrete = f"c10::SymInt(int64_t({self.expr(e[1], e[2], e[3], early=True)}))"
                L.append(f"s{s.k}.push_back(ist ? {concrete} : {sym_expr(e[1], self.refs)});")  # type: ignore[attr-defined]
        if s.narrow:
            L.append(f"if (opsmith::exceeds(s{s.k}, 2147483647)) opsmith::large_out_error(op, {name}, s{s.k});")
        if s.wide_bytes:
            L.append(f"opsmith::check_bytes(op, {name}, s{s.k}, {dt});")
        return [*L, f"at::Tensor {out} = at::empty_symint(s{s.k}, {self.t[s.src]}.options().dtype({dt}));"]


def _refused(v: str, kind: str, value: Any) -> str:
    if kind == "divisible":
        return f"{v} % {value} != 0"
    if kind == "at_most":
        return f"{v} > {_lit(value)}"
    if kind == "at_least":
        return f"{v} < {_lit(value)}"
    return " && ".join(f"{v} != {_lit(c)}" for c in value)


def _sym_ok(v: str, kind: str, value: Any) -> str:
    if kind == "divisible":
        return f"({v} % c10::SymInt({_lit(value)})).sym_eq(c10::SymInt(0))"
    if kind == "at_most":
        return f"{v}.sym_le(c10::SymInt({_lit(value)}))"
    if kind == "at_least":
        return f"{v}.sym_ge(c10::SymInt({_lit(value)}))"
    conds = [f"{v}.sym_eq(c10::SymInt({_lit(c)}))" for c in value]
    out = conds[0]
    for c in conds[1:]:
        out = f"{out}.sym_or({c})"
    return out


def _lit(v: int) -> str:
    return f"int64_t({v}LL)" if -(2**63) < v < 2**63 else "INT64_MAX"


DIMS_CPP = r"""
namespace opsmith {

// The sizes of a group: tensor axes [start, dim - after).
template <typename Sizes, typename Size = std::decay_t<decltype(std::declval<Sizes>()[0])>>
std::vector<Size> axes_of(const Sizes& sizes, int64_t start, int64_t after) {
  const int64_t end = static_cast<int64_t>(sizes.size()) - after;
  return std::vector<Size>(sizes.begin() + start, sizes.begin() + std::max(end, start));
}
inline std::vector<int64_t> axes(const Tensor& t, int64_t start, int64_t after) {
  return axes_of(t.sizes(), start, after);
}
inline bool same_sizes(const Tensor& a, const Tensor& b) {  // per call: no allocation
  if (a.dim() != b.dim()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) != b.size(d)) return false;
  return true;
}
template <typename Size, typename Sizes>
void append(std::vector<Size>& out, const Sizes& sizes, int64_t start, int64_t after) {
  for (const auto& s : axes_of(sizes, start, after)) out.push_back(s);
}

#ifndef OPSMITH_NO_ATEN  // symbolic sizes: ATen's Meta kernels
inline std::vector<c10::SymInt> sym_axes(const Tensor& t, int64_t start, int64_t after) {
  return axes_of(t.sym_sizes(), start, after);
}

// guards.check_ties: equal where both are integers; a symbolic pair asserted as a guard of the traced graph.
template <typename Fail>
void tie(const c10::SymInt& a, const c10::SymInt& b, Fail fail) {
  auto x = a.maybe_as_int(), y = b.maybe_as_int();
  if (x && y) {
    if (*x != *y) fail();
  } else if (!a.sym_eq(b).expect_true(__FILE__, __LINE__)) {
    fail();
  }
}
template <typename Fail>
void tie(const std::vector<c10::SymInt>& a, const std::vector<c10::SymInt>& b, Fail fail) {
  if (a.size() != b.size()) fail();
  for (size_t i = 0; i < a.size(); ++i) tie(a[i], b[i], fail);
}

#endif

struct Bound {
  const char* name;
  std::string value;
  const char* from;
};

[[noreturn]] inline void shape_error(const char* op, const char* name, const Tensor& t, const char* decl,
                                     const std::vector<Bound>& names) {
  std::string want = std::string("shape ") + decl;
  for (size_t i = 0; i < names.size(); ++i)
    want += std::string(i ? ", " : " where ") + names[i].name + " = " + names[i].value + " from '" + names[i].from + "'";
  input_error(op, name, want, "shape " + shape_str(t));
}

[[noreturn]] inline void shape_of_error(const char* op, const char* name, const Tensor& t, const char* other,
                                        const Tensor& o) {
  input_error(op, name, std::string("the shape of '") + other + "', " + shape_str(o), "shape " + shape_str(t));
}

#ifndef OPSMITH_NO_ATEN
// Without memory (meta) the storage offset decides: torch's allocators start every storage at a multiple of
// 64 (CPU) or 512 (CUDA) bytes, and align is at most 256.
inline bool meta_misaligned(const Tensor& t, int64_t bytes) {
  return (t.sym_storage_offset() * static_cast<int64_t>(t.element_size())) % bytes != 0;  // guards a symbol
}

#endif

[[noreturn]] inline void align_error(const char* op, const char* name, const Tensor& t, int64_t bytes) {
  const auto off = is_meta(t) ? (t.storage_offset() * static_cast<int64_t>(t.element_size())) % bytes
                               : static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()) % bytes);
  input_error(op, name, "a data pointer aligned to " + std::to_string(bytes) + " bytes (declared align=" +
              std::to_string(bytes) + ", contiguous='require')", "an address " + std::to_string(off) +
              " bytes past a multiple of " + std::to_string(bytes) + " (storage offset " +
              std::to_string(t.storage_offset()) + ")", std::string("Fix: pass ") + name +
              ".clone(), which starts at an aligned address.");
}

[[noreturn]] inline void require_error(const char* op, const char* arg, const char* label, const char* words,
                                       const char* value, const char* why, const std::string& got) {
  const std::string want = std::string(label) + " " + words + " " + value;
  input_error(op, arg, want + (*why ? std::string(" (") + why + ")" : std::string()),
              std::string(label) + " = " + got, std::string("Fix: pass tensors for which ") + label + " is " + words +
              " " + value + ".");
}

// Whether the product of `sizes` passes `limit` (saturating: no product can wrap).
inline bool exceeds(const std::vector<int64_t>& sizes, int64_t limit) {
  i128 p = 1;
  for (int64_t v : sizes) {
    if (v == 0) return false;
    p = std::min<i128>(p * v, i128(limit) + 1);
  }
  return p > limit;
}
#ifndef OPSMITH_NO_ATEN
inline bool exceeds(const std::vector<c10::SymInt>& sizes, int64_t limit) {
  std::vector<int64_t> known;
  for (const c10::SymInt& s : sizes) {
    const auto v = s.maybe_as_int();
    if (!v) return false;  // symbolic: left to the launch
    known.push_back(*v);
  }
  return exceeds(known, limit);
}
#endif

// An output's declared shape in bytes must fit int64 (torch's allocator refuses it with a text that differs per
// path, and a stable library's failed allocation says only that its shim call failed). Symbolic: left to torch.
template <typename Size>
void check_bytes(const char* op, const char* name, const std::vector<Size>& shape, c10::ScalarType dtype) {
  int64_t item = 8;
  switch (dtype) {
    case c10::ScalarType::Bool: case c10::ScalarType::Byte: case c10::ScalarType::Char:
    case c10::ScalarType::Float8_e4m3fn: case c10::ScalarType::Float8_e5m2: item = 1; break;
    case c10::ScalarType::Half: case c10::ScalarType::BFloat16: case c10::ScalarType::Short: item = 2; break;
    case c10::ScalarType::Float: case c10::ScalarType::Int: item = 4; break;
    default: break;
  }
  if (exceeds(shape, 9223372036854775807LL / item))
    input_error(op, name, "an output of at most 2^63 - 1 bytes (its declared shape, in " + dtype_name(dtype) + ")",
                "shape " + tuple_str(shape), "Fix: pass inputs for which the declared output shape is smaller.");
}

template <typename Size>
[[noreturn]] void large_out_error(const char* op, const char* name, const std::vector<Size>& shape) {
  input_error(op, name, "an output of at most 2147483647 elements (the kernel declares 32-bit indexing)",
              "shape " + tuple_str(shape), kFix64);
}

}  // namespace opsmith
"""
