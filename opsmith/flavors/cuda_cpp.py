"""The CUDA C++ flavor: NVRTC through cuda.core, to a cubin for the device's exact architecture.

The kernel is found by its C++ name through NVRTC's name expressions (``extern "C"`` or not, namespaced,
templated; an overloaded name takes its parameter types), and every compile also instantiates
``opsmith_sig_probe<decltype(&KERNEL)>``, whose lowered name carries the kernel's parameter types as the
compiler saw them (``signature.py``); the cubin's parameter sizes cross-check them.

Compiles are hermetic (NVRTC does not search the current directory) and cached on disk (``cache.py``) under
a key of the source, the contents of every header it includes (next to the including file, in
``include_paths``, in the toolkit), the options, the architecture and the NVRTC version; a source whose
includes cannot all be followed (``#include MACRO``) is never cached. A cold compile of a small kernel
costs 20-50 ms of NVRTC time; a disk hit costs a file read and a checksum.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import string
import time
from pathlib import Path

from ..cache import compile_cache, make_key
from ..declare.cubin import cubin_param_layout, cubin_symbols
from ..declare.mangling import ProbeError
from ..declare.signature import (
    SLOT_PREFIX,
    KernelParam,
    name_params,
    params_from_probe,
    parse_ptx_entry,
    source_kernel_names,
)
from ..declare.spec import Config
from ..errors import CompileError, LaunchError, SpecError, ToolchainError
from .base import Binary
from .options import CompileOptions

__all__ = ["CudaSource", "arch_problem", "nvrtc_version", "toolkit_include_dirs"]

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:[<"]([^>"]+)[>"]|(\S+))', re.M)
_LOG_LINE = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?P<kind>error|catastrophic error|warning)", re.M)
_PROBE = "\ntemplate <typename F> __global__ void opsmith_sig_probe(F) {}\n"
_TYPE_SLOT = re.compile(r"\{T_(\w+)\}")
_STATIC_SENTINEL = 16  # what a shape-bound template argument is while reading a generic kernel's signature


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return int(major), int(minor)


@functools.cache
def arch_problem(arch: object) -> str:
    """Why ``arch`` is not a GPU architecture this NVRTC compiles for ("" when it is): ``sm_90``, ``sm_90a``."""
    m = re.fullmatch(r"sm_(\d+)[af]?", arch) if isinstance(arch, str) else None
    if m is None:
        return f"{arch!r} is not an architecture name (they read like sm_90 or sm_90a)"
    from cuda.bindings import nvrtc

    _, supported = nvrtc.nvrtcGetSupportedArchs()
    if int(m.group(1)) not in supported:
        names = ", ".join(f"sm_{a}" for a in supported)
        return f"{arch!r} is not an architecture NVRTC {'.'.join(map(str, nvrtc_version()))} compiles for ({names})"
    return ""


def default_arch() -> str:
    """The architecture compiled at registration: the current GPU's, else ``OPSMITH_DEFAULT_ARCH``."""
    import torch

    from .. import env

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    arch = env.DEFAULT_ARCH.get()
    why = arch_problem(arch)
    if why:
        raise ToolchainError(f"{env.DEFAULT_ARCH.name}: {why}. Fix: set it to one of those (sm_90 for an H100/H200), or "
                             "unset it.")  # fmt: skip
    return arch


#: The C and C++ standard headers published kernels include (<float.h>, <math.h>, <cstdint>, <climits>, <limits>,
#: ...), which NVRTC does not ship: each a few lines over libcu++'s <cuda/std/...> (as CuPy's jitify ships
#: built-ins), searched after the toolkit's, so a header the toolkit or the user provides wins.
STD_HEADERS = str(Path(__file__).with_name("nvrtc_std"))


def toolkit_include_dirs() -> tuple[str, ...]:
    """The CUDA headers NVRTC needs: cudart's (cuda_fp16.h and friends) and CCCL's (cooperative groups
    include <nv/target>), from a toolkit or the nvidia-cuda-runtime / nvidia-cuda-cccl wheels, found by
    cuda.pathfinder, then opsmith's standard headers over libcu++ (``STD_HEADERS``)."""
    dirs: list[str] = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return (STD_HEADERS,)
    for lib in ("cudart", "cccl"):
        try:
            d = find_nvidia_header_directory(lib)
        except Exception:  # this one is not installed
            d = None
        if d and d not in dirs:
            dirs.append(d)
    return (*dirs, STD_HEADERS)


# NVRTC searches the directory of the program's name for quoted includes: for a relative name, the current
# one, so a compile would depend on where the process runs. A name in a directory that cannot exist makes
# the top level hermetic, while headers still find the headers beside them (``no_source_include`` would
# stop that too: cooperative groups include "info.h" from their own directory).
_PROGRAM_DIR = "/.opsmith-hermetic-no-such-dir"


@functools.lru_cache(maxsize=4096)
def _file_digest(path: str, mtime_ns: int, size: int) -> tuple[str, str]:
    data = Path(path).read_bytes()
    return hashlib.sha256(data).hexdigest(), data.decode("utf-8", "replace")


def header_digests(source: str, user_dirs: list[str], toolkit: tuple[str, ...]) -> tuple[dict[str, str], bool]:
    """What identifies every header reachable from ``source``, and whether every include could be followed.
    User headers (next to the including file, or in ``user_dirs``, followed recursively) by sha256; toolkit
    headers by size and mtime (they change only with the toolkit; reading cuda_fp16.h's 16 files costs
    ~8 ms). The source's own directory is none (``_PROGRAM_DIR``)."""
    seen: dict[str, str] = {}
    complete = True
    todo: list[tuple[str, list[str]]] = [(source, [])]
    while todo:
        text, here = todo.pop()
        for name, computed in _INCLUDE.findall(text):
            if computed:  # #include MACRO: what it opens depends on the preprocessor
                complete = False
                continue
            for d in here + user_dirs + list(toolkit):
                p = os.path.join(d, name)
                if p in seen or not os.path.isfile(p):
                    continue
                st = os.stat(p)
                if d in toolkit:
                    seen[p] = f"toolkit:{st.st_size}:{st.st_mtime_ns}"
                else:
                    digest, body = _file_digest(p, st.st_mtime_ns, st.st_size)
                    seen[p] = digest
                    todo.append((body, [os.path.dirname(p)]))
                break
    return seen, complete


def source_excerpt(source: str, log: str, program: str | None = None, context: int = 2) -> str:
    """The source lines the compiler log points at, numbered, with a marker on each offending line (errors
    in headers are the log's to show: their line numbers are not the source's)."""
    lines = source.splitlines()
    bad = sorted({int(m.group("line")) for m in _LOG_LINE.finditer(log)
                  if m.group("kind") != "warning" and m.group("file") != "__nv_name_map"
                  and (program is None or m.group("file") == program)})  # fmt: skip
    shown: list[str] = []
    last = 0
    for n in bad:
        if n > len(lines):
            continue
        lo, hi = max(1, n - context), min(len(lines), n + context)
        if shown and lo > last + 1:
            shown.append("   ...")
        for k in range(max(lo, last + 1), hi + 1):
            shown.append(f"{'>>' if k == n else '  '} {k:4d} | {lines[k - 1]}")
        last = hi
    return "\n".join(shown)


def _c_type(dtype) -> str | None:
    """The C++ type NVRTC instantiates a ``{T_<input>}`` template argument with, for a torch dtype."""
    import torch

    return {torch.float32: "float", torch.float64: "double", torch.float16: "__half", torch.bfloat16: "__nv_bfloat16",
            torch.int32: "int", torch.int64: "long long", torch.int16: "short", torch.int8: "signed char",
            torch.uint8: "unsigned char", torch.bool: "bool"}.get(dtype)  # fmt: skip


_TYPE_HEADERS = {"__half": "cuda_fp16.h", "__nv_bfloat16": "cuda_bf16.h"}


def _split_signature(kernel_name: str) -> tuple[str, str | None]:
    """``"k<float>(const float*, int)"`` -> ("k<float>", "const float*, int"); no parentheses -> (name, None)."""
    if "(" not in kernel_name:
        return kernel_name, None
    name, _, rest = kernel_name.partition("(")
    return name.strip(), rest.rsplit(")", 1)[0].strip()


class CudaSource:
    """A CUDA C++ kernel compiled with NVRTC. ``kernel_name`` may be a template instantiation.

    Placeholders in ``kernel_name``: ``{T_<input>}`` makes the kernel generic over that input's dtype, and
    ``{NAME}`` of a shape-bound extra (``static``) makes it one instantiation per value; each distinct
    specialization is compiled once, like Triton's. Other placeholders are filled by tuning configs.
    """

    typed = "full"
    flavor = "cuda"

    def __init__(self, op_name: str, source: str, kernel_name: str, *, std: str = "c++17",
                 include_paths: list[str] | None = None, defines: dict[str, str | int] | None = None,
                 arch_override: str | None = None, target: str = "cubin", static: frozenset[str] = frozenset(),
                 shown: str | None = None, pre_include: tuple[str, ...] = (),
                 options: CompileOptions | None = None, bool_slots: frozenset[str] = frozenset()) -> None:  # fmt: skip
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
        if target not in ("cubin", "ptx"):
            raise SpecError(op_name, "target", f"{target!r} is not a target.", "use 'cubin' (default) or 'ptx'.")
        self.op_name, self.source, self.kernel_name = op_name, source, kernel_name.strip()
        self.shown = shown or self.kernel_name  # the name as the user wrote it, for messages
        self.std, self.include_paths = std, [os.path.abspath(p) for p in include_paths or []]
        self.defines = {str(k): str(v) for k, v in (defines or {}).items()}
        self.pre_include = tuple(pre_include)  # headers an instantiation's types need (cuda_bf16.h for bf16)
        self.arch_override, self.target = arch_override, target
        self.options = options or CompileOptions()  # checked by ``options.parse_options`` (the API's ``options=``)
        self.compile_options = self.options.canonical  # the record's
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(self.kernel_name) if f}
        except ValueError as e:
            raise SpecError(op_name, "kernel_name", f"'{kernel_name}' has unbalanced braces ({e}).",
                            "write placeholders as {NAME} or {T_<input>}.") from None  # fmt: skip
        self.type_slots = list(dict.fromkeys(_TYPE_SLOT.findall(self.kernel_name)))
        self.static_slots = sorted(f for f in fields if f in static)
        self.bool_slots = frozenset(bool_slots) & set(self.static_slots)  # bool scalars: true/false, not 0/1
        #: Generic over some input's dtype or a shape: compiled per call specialization (``spec_layout``).
        self.dtype_generic = bool(self.type_slots)
        self.specialized = bool(self.type_slots or self.static_slots)
        self._record = None

    def static_names(self) -> frozenset[str]:
        """Placeholders of ``kernel_name`` that an extra may bind (every one but the dtype slots)."""
        fields = {f for _, f, _, _ in string.Formatter().parse(self.kernel_name) if f}
        return frozenset(f for f in fields if not f.startswith("T_"))

    def for_config(self, config: Config) -> CudaSource:
        """Config params fill ``{NAME}`` placeholders of the kernel name (template arguments); the others
        become ``-D`` defines (a template parameter of the same name would clash with a macro)."""
        if not config.params:
            return self
        placeholders = {f for _, f, _, _ in string.Formatter().parse(self.kernel_name) if f}
        clash = placeholders & set(self.static_slots) & set(config.params)
        if clash:
            raise SpecError(self.op_name, "autotune.configs", f"{sorted(clash)} are bound both by an extra and by a "
                            "config.", "let either the extra or the configs set each template argument.")  # fmt: skip
        keep = {**{f"T_{s}": "{T_" + s + "}" for s in self.type_slots}, **{s: "{" + s + "}" for s in self.static_slots}}
        try:
            name = self.kernel_name.format_map({**config.params, **keep})
        except (KeyError, IndexError, ValueError) as e:
            raise SpecError(self.op_name, "kernel_name", f"'{self.kernel_name}' has a placeholder {e} that the "
                            f"config params {config.params} do not fill.",
                            "give every config each {NAME} used in kernel_name (or bind it with a named extra).") from None  # fmt: skip
        return CudaSource(self.op_name, self.source, name, std=self.std, include_paths=self.include_paths,
                          defines={**self.defines, **{k: int(v) if isinstance(v, bool) else v
                                                      for k, v in config.params.items() if k not in placeholders}},
                          arch_override=self.arch_override, target=self.target, static=frozenset(self.static_slots),
                          shown=self.shown, options=self.options, bool_slots=self.bool_slots)  # fmt: skip

    def bind(self, record) -> None:
        names = [a.name for a in record.tensor_inputs]
        for slot in self.type_slots:
            if slot not in names:
                raise SpecError(self.op_name, "kernel_name", f"'{{T_{slot}}}' names no tensor input.",
                                f"use {{T_<input>}} with one of {names}.")  # fmt: skip
        self._record = record

    def spec_layout(self) -> list[tuple[str, int]]:
        """("dtype", k) for each tensor input k whose dtype a ``{T_<input>}`` slot takes and the declaration
        leaves open, then ("static", e) for each extra and ("scalar", k) for each int scalar input compiled in as a
        template argument."""
        assert self._record is not None
        tensors = self._record.tensor_inputs
        # An input typed like an optional slot's input decides the type when that one is passed as None.
        optional_slots = {a.name for a in tensors if a.optional and a.name in self.type_slots}
        layout = [("dtype", k) for k, a in enumerate(tensors)
                  if (a.name in self.type_slots or a.dtype_like in optional_slots) and a.dtype is None]  # fmt: skip
        return (layout + [("static", k) for k in self._record.static_extras]
                + [("scalar", k) for k in self._record.static_scalars])  # fmt: skip

    def _fill(self, spec: tuple) -> tuple[dict, dict]:
        """(template placeholder values, dtypes by tensor input name) of one call specialization."""
        import torch

        assert self._record is not None
        record = self._record
        dtypes = {a.name: getattr(torch, a.dtype) for a in record.tensor_inputs if a.dtype}
        fill: dict[str, str] = {}
        for (kind, k), v in zip(self.spec_layout(), spec, strict=True):
            if kind == "dtype":
                dtypes[record.tensor_inputs[k].name] = v
            elif kind == "scalar":  # an int or bool scalar input (api refuses floats)
                a = record.inputs[k]
                fill[a.name] = ("true" if v else "false") if a.py_type == "bool" else str(int(v))
            else:
                fill[record.extras[k].name] = str(int(v))
        for a in record.tensor_inputs:
            if a.dtype_like and a.name not in dtypes:
                dtypes[a.name] = dtypes.get(a.dtype_like)
        for slot in self.type_slots:
            c = _c_type(dtypes.get(slot))
            if c is None and dtypes.get(slot) is None:  # an optional input passed as None: another that shares
                # its type decides; with all of them absent the kernel reads none, and float stands in
                shared = [dtypes.get(a.name) for a in record.tensor_inputs if a.dtype_like == slot]
                c = _c_type(next((d for d in shared if d is not None), torch.float32))
            if c is None:
                raise SpecError(self.op_name, "kernel_name", f"input '{slot}' has dtype {dtypes.get(slot)}, which has "
                                f"no C++ type for {{T_{slot}}}.", "pass a floating or integer tensor.")  # fmt: skip
            fill[f"T_{slot}"] = c
        return fill, dtypes

    def instantiate(self, spec: tuple) -> CudaSource:
        """This source with every placeholder filled from ``spec`` (or the declared dtypes)."""
        fill, _ = self._fill(spec)
        # A kernel generic over T, called with bf16 or fp16 tensors, is instantiated with __nv_bfloat16 or
        # __half: their headers come with the instantiation, as they would in an nvcc build of a .cu that
        # dispatches on dtype (a source without them otherwise fails with "__nv_bfloat16 is undefined").
        headers = tuple(dict.fromkeys(_TYPE_HEADERS[v] for v in fill.values() if v in _TYPE_HEADERS))
        return CudaSource(self.op_name, self.source, self.kernel_name.format_map(fill), std=self.std,
                          include_paths=self.include_paths, defines=self.defines, arch_override=self.arch_override,
                          target=self.target, shown=self.shown, pre_include=headers, options=self.options)  # fmt: skip

    def fingerprint(self) -> str:
        return make_key({"flavor": "cuda", "source": self.source, "kernel": self.kernel_name, "std": self.std,
                         "include": self.include_paths, "defines": self.defines, "arch": self.arch_override,
                         "target": self.target, "pre_include": list(self.pre_include),
                         "options": list(self.options.canonical)})  # fmt: skip

    # -- the kernel's parameters -----------------------------------------------------------------------
    def params(self, binary: Binary | None, arch: str) -> tuple[list[KernelParam], str]:
        """The kernel's parameters with their names from the source text, and why names are unknown ("")."""
        params = list(binary.params) if binary is not None else self._probe_generic(arch)
        return name_params(self.source, self.kernel_name, params)

    def _probe_generic(self, arch: str) -> list[KernelParam]:
        """A generic kernel's parameters with each ``{T_<input>}`` slot a distinct sentinel struct, so each
        parameter shows which slot types it (``const T* x``) or that its type is fixed (``float* y``).
        Only the declaration is instantiated (``decltype``), never the kernel's body."""
        fill = {f"T_{s}": SLOT_PREFIX + s for s in self.type_slots}
        fill.update({s: "true" if s in self.bool_slots else str(_STATIC_SENTINEL) for s in self.static_slots})
        sentinels = "".join(f"struct {SLOT_PREFIX}{s} {{}};\n" for s in self.type_slots)
        probe = CudaSource(self.op_name, self.source + "\n" + sentinels, self.kernel_name.format_map(fill),
                           std=self.std, include_paths=self.include_paths, defines=self.defines,
                           arch_override=self.arch_override, target="cubin", shown=self.shown,
                           options=self.options)  # fmt: skip
        return list(probe.build(arch, probe_only=True).params)

    # -- compiling -------------------------------------------------------------------------------------
    def _options(self, arch: str):
        from cuda.core import ProgramOptions

        return ProgramOptions(name=f"{_PROGRAM_DIR}/{self.op_name.replace('::', '_')}.cu", arch=arch, std=self.std,
                              include_path=self.include_paths + list(toolkit_include_dirs()) or None,
                              define_macro=[(k, v) for k, v in self.defines.items()] or None,
                              pre_include=list(self.pre_include) or None, **dict(self.options.nvrtc))  # fmt: skip

    def _expressions(self) -> tuple[str, str]:
        """(the kernel's name expression, the probe's)."""
        name, args = _split_signature(self.kernel_name)
        if args is None:
            return name, f"opsmith_sig_probe<decltype(&{name})>"
        addr = f"static_cast<void(*)({args})>(&{name})"
        return addr, f"opsmith_sig_probe<decltype({addr})>"

    def build(self, arch: str, spec: tuple = (), target: str | None = None, *, probe_only: bool = False) -> Binary:
        """A cubin for ``arch`` (or PTX for its virtual architecture, which the driver JIT-compiles), with
        the kernel's parameters as the compiler compiled them."""
        if self.specialized:
            binary = self.instantiate(spec).build(arch, (), target)
            self._check_instantiation(spec, binary)
            return binary
        arch = self.arch_override or arch
        target = "cubin" if probe_only else target or self.target
        parts, complete = self.compile_inputs(arch)
        key = make_key({"flavor": "cuda", **parts, "target": target, "probe_only": probe_only,
                        "program_dir": _PROGRAM_DIR})  # fmt: skip
        cache = compile_cache() if complete else None
        t0 = time.perf_counter()
        jit = self.options.jit if target == "ptx" else ()  # the driver compiles PTX: the JIT takes the options too
        hit = _from_cache(cache.get(key) if cache else None, target, arch, t0, jit)
        if hit is not None:
            return hit
        data, symbol, params = self._compile(arch, target, probe_only)
        if cache:
            cache.put(key, {"symbol": symbol, "kernel": self.kernel_name, "arch": arch,
                            "params": [dataclasses.asdict(p) for p in params]}, data)  # fmt: skip
        return Binary(data, target, arch, symbol, False, time.perf_counter() - t0, params=tuple(params), jit=jit)  # type: ignore[arg-type]

    def compile_inputs(self, arch: str) -> tuple[dict, bool]:
        """(what besides the target decides NVRTC's output: a cache key's parts, the binary's here and the
        analysis's PTX in ``cuda_ir.py``; whether every header it includes could be followed, so it may be cached)."""
        toolkit = toolkit_include_dirs()
        headers, complete = header_digests(self.source, self.include_paths, toolkit)
        return {"source": hashlib.sha256(self.source.encode()).hexdigest(), "headers": headers,
                "kernel": self.kernel_name, "std": self.std, "include": self.include_paths, "toolkit": toolkit,
                "defines": self.defines, "arch": arch, "nvrtc": nvrtc_version(),
                "options": list(self.options.canonical)}, complete  # fmt: skip

    def _check_instantiation(self, spec: tuple, binary: Binary) -> None:
        from ..declare.binding import check_instantiation
        from ..declare.record import dtype_from_name

        if self._record is None:
            return
        _, dtypes = self._fill(spec)
        outs = [dtype_from_name(o.dtype) or dtypes[self._record.tensor_inputs[o.dtype_from].name]
                for o in self._record.outputs]  # fmt: skip
        named, _ = name_params(self.source, self.kernel_name, list(binary.params))
        check_instantiation(self.op_name, self._record, named, dtypes, outs)

    def _compile(self, arch: str, target: str, probe_only: bool) -> tuple[bytes, str, list[KernelParam]]:
        from cuda.core import Program

        kernel_expr, probe_expr = self._expressions()
        names = (probe_expr,) if probe_only else (kernel_expr, probe_expr)
        program = Program(self.source + _PROBE, "c++", self._options(arch))
        try:
            obj = program.compile(target, name_expressions=names)
        except Exception as e:  # cuda.core raises NVRTCError with the log in its message
            raise self._compile_error(e) from None
        finally:
            # Close now and drop the reference: a traceback that keeps this frame alive would otherwise
            # free the Program at interpreter exit, where cuda.core's __dealloc__ raises.
            program.close()
            program = None
        data = bytes(obj.code)
        lowered = {n: (v.decode() if isinstance(v, bytes) else str(v)) for n, v in obj.symbol_mapping.items()}
        try:
            params = params_from_probe(lowered[probe_expr])
        except (ProbeError, KeyError) as e:
            raise LaunchError(f"{self.op_name}: cannot read the parameter types of '{self.kernel_name}' from NVRTC's "
                              f"lowered name ({e}). Fix: report this kernel signature to opsmith.") from None  # fmt: skip
        if probe_only:
            return b"", lowered[probe_expr], params
        symbol = lowered[kernel_expr]
        found = cubin_symbols(data) if target == "cubin" else set(re.findall(r"\.entry\s+([\w$]+)", data.decode()))
        if symbol not in found:
            raise SpecError(self.op_name, "kernel_name", f"'{self.kernel_name}' did not produce a kernel in the compiled "
                            f"module (it has: {', '.join(sorted(found)) or 'none'}).", "name a __global__ function.")  # fmt: skip
        return data, symbol, self._sized(params, data, symbol, target)

    def _sized(self, params: list[KernelParam], data: bytes, symbol: str, target: str) -> list[KernelParam]:
        """The probe's parameters with their sizes from the binary, which must agree with every known size."""
        if target == "cubin":
            layout = cubin_param_layout(data, symbol)
            sizes = None if layout is None else [s for _, s in layout]
        else:
            entry = parse_ptx_entry(data.decode("utf-8", "replace"), symbol)
            sizes = None if entry is None else [p.size for p in entry]
        if sizes is None:
            return params
        if len(sizes) != len(params) or any(p.size and p.size != s for p, s in zip(params, sizes, strict=False)):
            raise LaunchError(f"{self.op_name}: the compiler's parameter types for '{self.kernel_name}' "
                              f"({', '.join(p.spelled for p in params)}) disagree with the binary's parameter sizes "
                              f"{sizes}. Fix: report this kernel signature to opsmith.")  # fmt: skip
        return [dataclasses.replace(p, size=s) for p, s in zip(params, sizes, strict=True)]

    def _compile_error(self, e: Exception) -> Exception:
        text = str(e)
        if "compilation log:" not in text:  # not NVRTC's verdict on the source: the toolchain itself failed
            hint = ("target='ptx' asks the CUDA driver which PTX version it can load; use target='cubin' where "
                    "there is no driver" if self.target == "ptx" else "check the CUDA installation")  # fmt: skip
            return ToolchainError(f"{self.op_name}: compiling '{self.kernel_name}' failed before NVRTC ran: "
                                  f"{type(e).__name__}: {text} Fix: {hint}.")  # fmt: skip
        log = text.split("compilation log:", 1)[1].lstrip("\n").rstrip("\x00").replace(_PROGRAM_DIR + "/", "")
        errors = [m for m in _LOG_LINE.finditer(log) if m.group("kind") != "warning"]
        if errors and all(m.group("file") == "__nv_name_map" for m in errors):
            return self._name_error(log)
        program = f"{self.op_name.replace('::', '_')}.cu"
        return CompileError(self.op_name, self.shown, log, source_excerpt(self.source, log, program))

    def _name_error(self, log: str) -> SpecError:
        defined = ", ".join(source_kernel_names(self.source)) or "none"
        name = self.shown
        if "overloaded function" in log:
            return SpecError(self.op_name, "kernel_name", f"'{name}' is overloaded, so the name alone does not say which "
                             f"kernel to use (the source defines: {defined}).",
                             f"add the parameter types, e.g. kernel_name='{name}(const float*, int, float*)'.")  # fmt: skip
        if "instance of function template" in log:
            return SpecError(self.op_name, "kernel_name", f"NVRTC cannot tell which instantiation of the template '{name}' "
                             "names (a template argument is missing or does not fit).",
                             "give every template argument that cannot be deduced, e.g. 'k<{T_x}, {T_w}>' or 'k<float, 4>'.")  # fmt: skip
        undefined = re.search(r'identifier "(\w+)" is undefined', log)
        base = _split_signature(self.kernel_name)[0].split("<")[0].split("::")[-1].strip()
        if undefined and undefined.group(1) != base:
            return SpecError(self.op_name, "kernel_name", f"'{name}' uses '{undefined.group(1)}', which the source "
                             "does not declare.", "declare it or include its header in the source, or fix the "
                             "template arguments.")  # fmt: skip
        if "is undefined" in log:
            return SpecError(self.op_name, "kernel_name", f"'{name}' is not a kernel of the source (it defines: "
                             f"{defined}).", "name a __global__ function of the source, with its namespace and template "
                             "arguments (e.g. 'mylib::axpy<float>').")  # fmt: skip
        return SpecError(self.op_name, "kernel_name", f"'{name}' is not a __global__ function.",
                         f"name a kernel of the source ({defined}).")  # fmt: skip


def _from_cache(hit: tuple[dict, bytes] | None, target: str, arch: str, t0: float,
                jit: tuple[tuple[str, int], ...]) -> Binary | None:  # fmt: skip
    """A verified cache entry as a Binary; an entry whose metadata is malformed is a miss."""
    if hit is None:
        return None
    meta, data = hit
    try:
        params = tuple(KernelParam(**p) for p in meta["params"])
        return Binary(data, target, arch, str(meta["symbol"]), True, time.perf_counter() - t0, params=params,
                      jit=jit)  # type: ignore[arg-type]  # fmt: skip
    except (KeyError, TypeError):
        return None
