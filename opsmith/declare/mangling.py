"""Reading a kernel's parameter types out of an Itanium-mangled name (what NVRTC's name expressions return).

opsmith asks NVRTC for ``opsmith_sig_probe<decltype(&KERNEL)>``, an empty kernel templated on the function
type of the user's kernel. Its lowered name, e.g. ``_Z17opsmith_sig_probeIPFvPKfdxPf6float2EEvT_``, encodes
that type as the compiler saw it: after the preprocessor, typedefs, template defaults and namespaces
(``void (*)(float const*, double, long long, float*, float2)``). This module decodes the part of the
grammar such a type uses (builtin, class, pointer, reference and cv-qualified types, nested and template
names, substitutions); anything else is reported as unknown rather than guessed.

Grammar: https://itanium-cxx-abi.github.io/cxx-abi/abi.html#mangling (sections 5.1.5 and 5.1.10).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MangledType", "ProbeError", "probe_parameters"]

_BUILTIN = {
    "v": "void", "w": "wchar_t", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char",
    "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long",
    "x": "long long", "y": "unsigned long long", "n": "__int128", "o": "unsigned __int128", "f": "float",
    "d": "double", "e": "long double", "g": "__float128", "z": "...",
}  # fmt: skip
_BUILTIN_D = {"Dh": "_Float16", "Di": "char32_t", "Ds": "char16_t", "Du": "char8_t", "Dn": "decltype(nullptr)",
              "Da": "auto", "Dc": "decltype(auto)", "Dd": "decimal64", "De": "decimal128", "Df": "decimal32"}  # fmt: skip
_STD_ABBREV = {"St": "std", "Sa": "std::allocator", "Sb": "std::basic_string", "Ss": "std::string",
               "Si": "std::istream", "So": "std::ostream", "Sd": "std::iostream"}  # fmt: skip


class ProbeError(ValueError):
    """The mangled name uses a part of the grammar this reader does not decode."""


@dataclass(frozen=True)
class MangledType:
    """A decoded type. ``kind``: "builtin" | "class" | "pointer" | "reference" | "function" | "array" |
    "other". ``name``: the builtin's or class's spelling ("float", "mylib::Half", "Vec<float>").
    ``const``: cv-qualified const. ``inner``: the pointee (pointer, reference, array)."""

    kind: str
    name: str = ""
    const: bool = False
    inner: MangledType | None = None
    params: tuple[MangledType, ...] = ()

    def spelled(self) -> str:
        c = " const" if self.const else ""
        if self.kind in ("pointer", "reference"):
            return f"{self.inner.spelled() if self.inner else '?'}{'*' if self.kind == 'pointer' else '&'}{c}"
        if self.kind == "function":
            return f"void({', '.join(p.spelled() for p in self.params)})"
        return f"{self.name}{c}"


class _Reader:
    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0
        self.subs: list[MangledType] = []

    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def take(self, token: str) -> bool:
        if self.s.startswith(token, self.i):
            self.i += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.take(token):
            raise ProbeError(f"expected {token!r} at {self.i} in {self.s!r}")

    def number(self) -> int:
        j = self.i
        while self.i < len(self.s) and self.s[self.i].isdigit():
            self.i += 1
        if j == self.i:
            raise ProbeError(f"expected a number at {j} in {self.s!r}")
        return int(self.s[j : self.i])

    def source_name(self) -> str:
        n = self.number()
        name = self.s[self.i : self.i + n]
        if len(name) != n:
            raise ProbeError(f"truncated name in {self.s!r}")
        self.i += n
        return "(anonymous namespace)" if name.startswith("_GLOBAL__N") else name

    def substitution(self) -> MangledType:
        """``S_``, ``S<seq-id>_`` (base 36) or a std abbreviation; the caller has seen the ``S``."""
        two = "S" + self.peek()
        if two in _STD_ABBREV and two != "St":
            self.i += 1
            return MangledType("class", _STD_ABBREV[two])
        seq = 0
        if not self.take("_"):
            j = self.i
            while self.i < len(self.s) and self.s[self.i] != "_":
                self.i += 1
            try:
                seq = int(self.s[j : self.i], 36) + 1
            except ValueError:
                raise ProbeError(f"bad substitution at {j} in {self.s!r}") from None
            self.expect("_")
        if seq >= len(self.subs):
            raise ProbeError(f"substitution S{seq} out of range in {self.s!r}")
        return self.subs[seq]

    def template_args(self) -> str:
        """``I <arg>+ E`` as the spelled list ``<float, 4>``."""
        self.expect("I")
        out = []
        while not self.take("E"):
            if self.take("L"):  # a literal: L <type> <value> E
                t = self.type_()
                j = self.i
                while self.peek() != "E":
                    self.i += 1
                v = self.s[j : self.i].replace("n", "-", 1)
                self.expect("E")
                out.append(("true" if v == "1" else "false") if t.name == "bool" else v)
            elif self.peek() == "X":
                raise ProbeError(f"expression template argument in {self.s!r}")
            else:
                out.append(self.type_().spelled())
        return "<" + ", ".join(out) + ">"

    def name(self) -> MangledType:
        """An unscoped, std:: or nested class name (each prefix is a substitution candidate)."""
        if self.take("N"):
            parts: list[str] = []
            while not self.take("E"):
                if self.take("S"):
                    sub = self.substitution()
                    parts = [sub.name]
                    continue
                if self.peek() == "I":
                    parts[-1] += self.template_args()
                else:
                    parts.append(self.source_name())
                self.subs.append(MangledType("class", "::".join(parts)))
            return self.subs[-1]
        prefix = "std::" if self.take("St") else ""
        t = MangledType("class", prefix + self.source_name())
        if self.peek() == "I":
            self.subs.append(t)
            t = MangledType("class", t.name + self.template_args())
        self.subs.append(t)
        return t

    def type_(self) -> MangledType:
        c = self.peek()
        if c in _BUILTIN:
            self.i += 1
            return MangledType("builtin", _BUILTIN[c])
        if self.peek(2) in _BUILTIN_D:
            t = MangledType("builtin", _BUILTIN_D[self.peek(2)])
            self.i += 2
            return t
        if self.take("DF"):  # _FloatN: DF16_; std::bfloat16_t (__bf16): DF16b
            n = self.number()
            if self.take("b"):
                return MangledType("builtin", f"__bf{n}")
            self.expect("_")
            return MangledType("builtin", f"_Float{n}")
        if c in "rVK":
            const = False
            while self.peek() in ("r", "V", "K") and self.peek():
                const = const or self.peek() == "K"
                self.i += 1
            inner = self.type_()
            t = MangledType(inner.kind, inner.name, const or inner.const, inner.inner, inner.params)
            self.subs.append(t)
            return t
        if c in "PRO":
            self.i += 1
            t = MangledType("pointer" if c == "P" else "reference", inner=self.type_())
            self.subs.append(t)
            return t
        if c == "F":
            self.i += 1
            self.take("Y")
            self.type_()  # the return type
            params: list[MangledType] = []
            while not self.take("E"):
                if self.peek() in ("R", "O") and self.peek(2)[1:] == "E":
                    self.i += 1  # a ref-qualifier
                    continue
                params.append(self.type_())
            if params == [MangledType("builtin", "void")]:
                params = []
            t = MangledType("function", params=tuple(params))
            self.subs.append(t)
            return t
        if c == "A":
            self.i += 1
            n = self.number() if self.peek().isdigit() else 0
            self.expect("_")
            t = MangledType("array", f"[{n}]", inner=self.type_())
            self.subs.append(t)
            return t
        if c == "S" and self.peek(2) != "St":
            self.i += 1
            t = self.substitution()
            if self.peek() == "I":  # a substituted template name with its arguments
                t = MangledType("class", t.name + self.template_args())
                self.subs.append(t)
            return t
        if c == "u":  # vendor extended type
            self.i += 1
            return MangledType("class", self.source_name())
        if c.isdigit() or c == "N" or self.peek(2) == "St":
            return self.name()
        raise ProbeError(f"unsupported type code {c!r} at {self.i} in {self.s!r}")


def probe_parameters(lowered: str, probe: str = "opsmith_sig_probe") -> list[MangledType]:
    """The parameter types of the function type ``F`` in the lowered name of ``probe<F>`` (``F`` a function
    pointer type). Raises ProbeError for a name this reader cannot decode."""
    r = _Reader(lowered)
    r.expect("_Z")
    r.expect(f"{len(probe)}{probe}")
    r.subs.append(MangledType("class", probe))  # the unscoped template name is the first candidate
    r.expect("I")
    fn = r.type_()
    if fn.kind != "pointer" or fn.inner is None or fn.inner.kind != "function":
        raise ProbeError(f"{lowered!r} does not instantiate the probe with a function pointer type")
    r.expect("E")
    return list(fn.inner.params)
