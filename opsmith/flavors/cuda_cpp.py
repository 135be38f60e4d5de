"""The CUDA C++ flavor: NVRTC through cuda.core, to a cubin for the device's exact architecture.

Compiles are cached on disk (``cache.py``) under a key of the source, the contents of every header it
includes that can be found (``#include "..."`` in include_paths and the toolkit's own headers), the
options, the architecture and the NVRTC version. A cold compile of a small kernel costs 20-50 ms of NVRTC
time; a disk hit costs a file read and a checksum.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import time
from pathlib import Path

from ..cache import compile_cache, make_key
from ..errors import CompileError, SpecError
from ..record import TensorArg
from ..signature import CParam, cubin_symbols, parse_cuda_signature
from ..spec import Config
from .base import Binary

__all__ = ["CudaSource", "nvrtc_version", "toolkit_include_dir"]

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)
_LOG_LINE = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?P<kind>error|catastrophic error|warning)", re.M)


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return int(major), int(minor)


@functools.cache
def toolkit_include_dir() -> str | None:
    """The CUDA headers NVRTC needs for cuda_fp16.h and friends (a toolkit or the nvidia-cuda-runtime
    wheel), found by cuda.pathfinder; None when neither is installed."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        return find_nvidia_header_directory("cudart")
    except Exception:  # pathfinder missing or no headers: kernels without includes still compile
        return None


@functools.lru_cache(maxsize=4096)
def _file_digest(path: str, mtime_ns: int, size: int) -> tuple[str, str]:
    data = Path(path).read_bytes()
    return hashlib.sha256(data).hexdigest(), data.decode("utf-8", "replace")


def header_digests(source: str, user_dirs: list[str], toolkit: str | None) -> dict[str, str]:
    """What identifies every header reachable from ``source``: the sha256 of the user's headers (found
    next to the including file or in ``user_dirs``, followed recursively), and the size and mtime of
    toolkit headers (they change only with the toolkit; reading cuda_fp16.h's 16 files costs ~8 ms)."""
    seen: dict[str, str] = {}
    todo: list[tuple[str, str | None]] = [(source, None)]
    while todo:
        text, here = todo.pop()
        for name in _INCLUDE.findall(text):
            for d in ([here] if here else []) + user_dirs + ([toolkit] if toolkit else []):
                p = os.path.join(d, name)
                if p in seen or not os.path.isfile(p):
                    continue
                st = os.stat(p)
                if d == toolkit:
                    seen[p] = f"toolkit:{st.st_size}:{st.st_mtime_ns}"
                else:
                    digest, body = _file_digest(p, st.st_mtime_ns, st.st_size)
                    seen[p] = digest
                    todo.append((body, os.path.dirname(p)))
                break
    return seen


def source_excerpt(source: str, log: str, context: int = 2) -> str:
    """The source lines the compiler log points at, numbered, with a marker on each offending line."""
    lines = source.splitlines()
    bad = sorted({int(m.group("line")) for m in _LOG_LINE.finditer(log) if m.group("kind") != "warning"})
    shown: list[str] = []
    last = 0
    for n in bad:
        lo, hi = max(1, n - context), min(len(lines), n + context)
        if shown and lo > last + 1:
            shown.append("   ...")
        for k in range(max(lo, last + 1), hi + 1):
            shown.append(f"{'>>' if k == n else '  '} {k:4d} | {lines[k - 1]}")
        last = hi
    return "\n".join(shown)


_TYPE_SLOT = re.compile(r"\{T_(\w+)\}")


def _c_type(dtype) -> str | None:
    """The C++ type NVRTC instantiates a ``{T_<input>}`` template argument with, for a torch dtype."""
    import torch

    return {torch.float32: "float", torch.float64: "double", torch.float16: "__half", torch.bfloat16: "__nv_bfloat16",
            torch.int32: "int", torch.int64: "long long", torch.int16: "short", torch.int8: "signed char",
            torch.uint8: "unsigned char", torch.bool: "bool"}.get(dtype)  # fmt: skip


class _KeepTypeSlots(dict):
    """``str.format_map`` mapping that leaves ``{T_<input>}`` slots for the per-call dtype specialization."""

    def __missing__(self, key: str) -> str:
        if key.startswith("T_"):
            return "{" + key + "}"
        raise KeyError(key)


class CudaSource:
    """A CUDA C++ kernel compiled with NVRTC. ``kernel_name`` may be a template instantiation.

    ``{T_<input>}`` in the template arguments (``"rmsnorm<{T_x}>"``) makes the kernel generic over that
    input's dtype: the input may leave ``dtype`` undeclared, and each dtype a call brings is instantiated
    (``float``, ``double``, ``__half``, ``__nv_bfloat16``, integer types) and compiled once, like Triton's
    specializations.
    """

    pointers_typed = True
    flavor = "cuda"

    def __init__(self, op_name: str, source: str, kernel_name: str, *, std: str = "c++17",
                 include_paths: list[str] | None = None, defines: dict[str, str | int] | None = None,
                 arch_override: str | None = None, target: str = "cubin") -> None:  # fmt: skip
        if not isinstance(source, str) or not source.strip():
            raise SpecError(op_name, "kernel_source", "the source is empty.", "pass the CUDA C++ source text.")
        if not isinstance(kernel_name, str) or not kernel_name.strip():
            raise SpecError(op_name, "kernel_name", "no kernel name given.", "name the __global__ function.")
        for p in include_paths or []:
            if not os.path.isdir(p):
                raise SpecError(op_name, "include_paths", f"{p!r} is not a directory.", "pass existing directories.")
        if arch_override is not None and not re.fullmatch(r"sm_\d+[af]?", arch_override):
            raise SpecError(op_name, "arch_override", f"{arch_override!r} is not an architecture.",
                            "use e.g. 'sm_90' or 'sm_90a'.")  # fmt: skip
        self.op_name, self.source, self.kernel_name = op_name, source, kernel_name.strip()
        self.std, self.include_paths = std, [os.path.abspath(p) for p in include_paths or []]
        self.defines = {str(k): str(v) for k, v in (defines or {}).items()}
        self.arch_override = arch_override
        if target not in ("cubin", "ptx"):
            raise SpecError(op_name, "target", f"{target!r} is not a target.", "use 'cubin' (default) or 'ptx'.")
        self.target = target
        self._templated = "<" in self.kernel_name
        self.type_slots = list(dict.fromkeys(_TYPE_SLOT.findall(self.kernel_name)))
        #: Generic over some input's dtype: compiled per call specialization (see ``spec_layout``).
        self.specialized = self.dtype_generic = bool(self.type_slots)
        self._record = None

    def signature(self) -> list[CParam] | None:
        return parse_cuda_signature(self.source, self.kernel_name)

    def for_config(self, config: Config) -> CudaSource:
        """Config params fill ``{NAME}`` placeholders of the kernel name (template arguments); the others
        become ``-D`` defines (a template parameter of the same name would clash with a macro)."""
        if not config.params:
            return self
        import string

        placeholders = {f for _, f, _, _ in string.Formatter().parse(self.kernel_name) if f}
        try:
            name = self.kernel_name.format_map(_KeepTypeSlots(config.params))
        except (KeyError, IndexError, ValueError) as e:
            raise SpecError(self.op_name, "kernel_name", f"'{self.kernel_name}' has a placeholder {e} that the "
                            f"config params {config.params} do not fill.",
                            "give every config each {NAME} used in kernel_name.") from None  # fmt: skip
        return CudaSource(self.op_name, self.source, name, std=self.std, include_paths=self.include_paths,
                          defines={**self.defines, **{k: int(v) if isinstance(v, bool) else v
                                                      for k, v in config.params.items() if k not in placeholders}},
                          arch_override=self.arch_override, target=self.target)  # fmt: skip

    def bind(self, record) -> None:
        """Check the ``{T_<input>}`` slots against the declaration (each names a tensor input)."""
        names = [a.name for a in record.tensor_inputs]
        for slot in self.type_slots:
            if slot not in names:
                raise SpecError(self.op_name, "kernel_name", f"'{{T_{slot}}}' names no tensor input.",
                                f"use {{T_<input>}} with one of {names}.")  # fmt: skip
        sig = self.signature() or []
        for k, a in enumerate(record.inputs):
            void = k < len(sig) and sig[k].ctype == "void"
            if isinstance(a, TensorArg) and a.dtype is None and a.name not in self.type_slots and not void:
                raise SpecError(self.op_name, f"inputs '{a.name}'.dtype", f"the element type of '{a.name}' is "
                                "neither declared nor a template argument, so any dtype would be reinterpreted.",
                                f"declare InputDecl('{a.name}', dtype=...) or add {{T_{a.name}}} to kernel_name.")  # fmt: skip
        self._record = record

    def spec_layout(self) -> list[tuple[str, int]]:
        """("dtype", k) for each tensor input k whose dtype a ``{T_<input>}`` slot takes and the declaration
        leaves open; a declared dtype fills its slot at build time."""
        assert self._record is not None
        return [("dtype", k) for k, a in enumerate(self._record.tensor_inputs)
                if a.name in self.type_slots and a.dtype is None]  # fmt: skip

    def instantiate(self, spec: tuple) -> CudaSource:
        """This source with every ``{T_<input>}`` slot filled from ``spec`` (or the declared dtype)."""
        import torch

        assert self._record is not None
        dtypes = {a.name: getattr(torch, a.dtype) for a in self._record.tensor_inputs if a.dtype}
        for (_, k), dt in zip(self.spec_layout(), spec, strict=True):
            dtypes[self._record.tensor_inputs[k].name] = dt
        fill = {}
        for slot in self.type_slots:
            c = _c_type(dtypes.get(slot))
            if c is None:
                raise SpecError(self.op_name, "kernel_name", f"input '{slot}' has dtype {dtypes.get(slot)}, which has "
                                f"no C++ type for {{T_{slot}}}.", "pass a floating or integer tensor.")  # fmt: skip
            fill[f"T_{slot}"] = c
        return CudaSource(self.op_name, self.source, self.kernel_name.format_map(fill), std=self.std,
                          include_paths=self.include_paths, defines=self.defines, arch_override=self.arch_override,
                          target=self.target)  # fmt: skip

    def fingerprint(self) -> str:
        return make_key({"flavor": "cuda", "source": self.source, "kernel": self.kernel_name, "std": self.std,
                         "include": self.include_paths, "defines": self.defines, "arch": self.arch_override,
                         "target": self.target})  # fmt: skip

    def _options(self, arch: str):
        from cuda.core import ProgramOptions

        toolkit = toolkit_include_dir()
        return ProgramOptions(
            name=self.op_name.replace("::", "_") + ".cu",
            arch=arch,
            std=self.std,
            include_path=self.include_paths + ([toolkit] if toolkit else []) or None,
            define_macro=[(k, v) for k, v in self.defines.items()] or None,
        )

    def build(self, arch: str, spec: tuple = (), target: str | None = None) -> Binary:
        """A cubin for ``arch`` (or PTX for its virtual architecture, which the driver JIT-compiles)."""
        if self.specialized:
            return self.instantiate(spec).build(arch, (), target)
        arch = self.arch_override or arch
        target = target or self.target
        toolkit = toolkit_include_dir()
        key = make_key({
            "flavor": "cuda", "source": hashlib.sha256(self.source.encode()).hexdigest(),
            "headers": header_digests(self.source, self.include_paths, toolkit),
            "kernel": self.kernel_name, "std": self.std, "include": self.include_paths, "toolkit": toolkit,
            "defines": self.defines, "arch": arch, "target": target, "nvrtc": nvrtc_version(),
        })  # fmt: skip
        cache = compile_cache()
        t0 = time.perf_counter()
        hit = cache.get(key) if cache else None
        if hit is not None:
            meta, data = hit
            return Binary(data, target, arch, meta["symbol"], True, time.perf_counter() - t0)  # type: ignore[arg-type]
        data, symbol = self._compile(arch, target)
        if cache:
            cache.put(key, {"symbol": symbol, "kernel": self.kernel_name, "arch": arch}, data)
        return Binary(data, target, arch, symbol, False, time.perf_counter() - t0)  # type: ignore[arg-type]

    def _compile(self, arch: str, target: str) -> tuple[bytes, str]:
        from cuda.core import Program

        names = (self.kernel_name,) if self._templated else ()
        program = Program(self.source, "c++", self._options(arch))
        try:
            obj = program.compile(target, name_expressions=names)
        except Exception as e:  # cuda.core raises NVRTCError with the log in its message
            text = str(e)
            log = text.split("compilation log:", 1)[1].lstrip("\n") if "compilation log:" in text else text
            raise CompileError(self.op_name, self.kernel_name, log, source_excerpt(self.source, log)) from None
        finally:
            # Close now and drop the reference: a traceback that keeps this frame alive would otherwise
            # free the Program at interpreter exit, where cuda.core's __dealloc__ raises.
            program.close()
            program = None
        data = bytes(obj.code)
        symbol = self.kernel_name
        if self._templated:
            mapped = obj.symbol_mapping.get(self.kernel_name)
            symbol = mapped.decode() if isinstance(mapped, bytes) else str(mapped)
        found = cubin_symbols(data) if target == "cubin" else set(re.findall(r"\.entry\s+([\w$]+)", data.decode()))
        if symbol not in found:
            kernels = sorted(found) or ["none"]
            raise SpecError(self.op_name, "kernel_name", f"'{self.kernel_name}' is not a kernel of the compiled "
                            f"module (it has: {', '.join(kernels)}).",
                            "name a __global__ function of the source; use extern \"C\" or a template "
                            "instantiation like 'k<float>' for C++ names.")  # fmt: skip
        return data, symbol
