"""The CuTe DSL flavor: a ``@cute.jit`` host function, compiled by ``cute.compile`` once per specialization
and called on the current CUDA stream.

The host function takes opsmith's calling convention, as a CUDA C++ kernel does: every tensor (input or
output) as a ``cute.Pointer`` to its first element, scalars and extras by value (``cutlass.Float32``,
``cutlass.Int32``/``Int64``), compile-time values as ``cutlass.Constexpr`` (a ``Config`` parameter, its
default, or an extra bound by name), and a ``stream: cuda.CUstream`` parameter that opsmith fills with
PyTorch's current stream. Parameters bind to the declaration by name. The host function builds its tensors
(``cute.make_tensor(x, layout)``) and launches its kernels itself, so the declaration has no geometry.

A specialization is the dtypes of tensors declared without one and each input's 16-byte alignment (the
pointers' ``assumed_align``, which decides vectorized copies) plus any constexpr bound to a size. The compiled
function is exported to an ELF object (``dump_to_object``) and kept in opsmith's verified disk cache; a second
process loads it (``cute.runtime.load_module``) without running the DSL compiler. CuTe DSL is imported only
when a ``cute_op`` is registered (``pip install opsmith[cute]``).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import inspect
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..cache import compile_cache, make_key
from ..declare.fingerprint import describe
from ..declare.record import KernelRecord
from ..declare.signature import KernelParam
from ..declare.spec import Config
from ..errors import CompileError, LaunchError, SpecError, ToolchainError
from .base import constexpr_values, param_roles
from .launch import _STREAMS, _current_device, _raw_stream, _stream_handle

__all__ = ["CuteExport", "CuteKernel", "CuteSource", "cutlass_version"]

_DTYPES = {torch.float32: "Float32", torch.float16: "Float16", torch.bfloat16: "BFloat16", torch.float64: "Float64",
           torch.int8: "Int8", torch.uint8: "Uint8", torch.int16: "Int16", torch.int32: "Int32", torch.int64: "Int64",
           torch.bool: "Boolean"}  # fmt: skip
_SCALARS = {"f32": "Float32", "f64": "Float64", "i32": "Int32", "i64": "Int64", "u32": "Uint32", "u64": "Uint64",
            "bool": "Boolean", "i8": "Int8"}  # fmt: skip
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOCK = threading.Lock()


def _dsl() -> tuple[Any, Any, Any]:
    """(cutlass, cutlass.cute, cuda.bindings.driver), or a ToolchainError saying how to install CuTe DSL."""
    try:
        import cuda.bindings.driver as driver
        import cutlass
        import cutlass.cute as cute
    except ImportError as e:
        raise ToolchainError(f"CuTe DSL is not importable here ({e}). Fix: pip install 'opsmith[cute]' "
                             "(nvidia-cutlass-dsl).") from None  # fmt: skip
    return cutlass, cute, driver


def cutlass_version() -> str:
    return str(_dsl()[0].__version__)


def _annotation(fn: Any, p: inspect.Parameter) -> Any:
    a = p.annotation
    if isinstance(a, str):  # ``from __future__ import annotations``: evaluate where the function was written
        try:
            a = eval(a, inspect.unwrap(fn).__globals__)
        except Exception:
            return a
    return a


class CuteSource:
    """A ``@cute.jit`` host function bound to one ``Config`` (its constexpr values)."""

    typed = "none"
    dtype_generic = True  # tensors without a declared dtype get one compile per dtype
    specialized = True
    host_launched = True  # the host function launches its own kernels: no geometry, no cuLaunchKernel here
    flavor = "cute"

    def __init__(self, op_name: str, fn: Any, config: Config | None = None,
                 static: frozenset[str] = frozenset()) -> None:  # fmt: skip
        cutlass, _, driver = _dsl()
        if not inspect.isfunction(fn):
            raise SpecError(op_name, "fn", f"{fn!r} is not a function.", "pass the @cute.jit host function.")
        self.op_name, self.fn, self.config = op_name, fn, config or Config()
        self.kernel_name = fn.__name__
        self.stream_param: str | None = None
        self.runtime_params: list[str] = []
        self.constexpr: dict[str, Any] = {}  # name -> default (inspect.Parameter.empty when none)
        self.order: list[str] = []
        for name, p in inspect.signature(fn).parameters.items():
            a = _annotation(fn, p)
            self.order.append(name)
            if a is driver.CUstream or (name == "stream" and a is inspect.Parameter.empty):
                self.stream_param = name
            elif a is cutlass.Constexpr or getattr(a, "__origin__", None) is cutlass.Constexpr:
                self.constexpr[name] = p.default
            else:
                self.runtime_params.append(name)
        if self.stream_param is None:
            raise SpecError(op_name, "fn", f"'{self.kernel_name}' has no stream parameter, so its kernels would run "
                            "on the default stream instead of PyTorch's current one.",
                            "add a parameter 'stream: cuda.CUstream' and launch with .launch(..., stream=stream).")  # fmt: skip
        self.static = frozenset(static) & set(self.constexpr)
        self.constexpr_defaults = {n: d for n, d in self.constexpr.items()
                                   if d is not inspect.Parameter.empty and n not in self.static}  # fmt: skip
        unknown = set(self.config.params) - set(self.constexpr)
        if unknown:
            raise SpecError(op_name, "autotune.configs", f"params {sorted(unknown)} are not cutlass.Constexpr "
                            f"parameters of '{self.kernel_name}'.", "only Constexpr parameters can be set by a Config.")  # fmt: skip
        self.constexprs: dict[str, Any] = (
            {}
            if config is None
            else constexpr_values(op_name, self.constexpr, self.config, self.static, "the host function's Constexpr")
        )
        self._record: KernelRecord | None = None
        self._roles: list[tuple[str, Any]] = []
        self._compiled: dict[tuple, CuteKernel] = {}

    def for_config(self, config: Config) -> CuteSource:
        return CuteSource(self.op_name, self.fn, config, self.static)

    def params(self, binary: Any, arch: str) -> tuple[list[KernelParam], str]:
        return [KernelParam(n, False, "?", n) for n in self.runtime_params], ""

    def static_names(self) -> frozenset[str]:
        return frozenset(self.constexpr)

    def fingerprint(self) -> str:
        return make_key({"flavor": "cute", "fn": _source_digest(self.fn), "constexprs": self.constexprs,
                         "static": sorted(self.static)})  # fmt: skip

    def bind(self, record: KernelRecord) -> None:
        self._record, self._roles = record, param_roles(record)

    def spec_layout(self) -> list[tuple[str, int]]:
        """("dtype", k) per tensor input without a declared dtype, ("align", p) per input pointer (outputs are
        allocated 16-byte aligned), ("static", e) per extra bound to a Constexpr."""
        assert self._record is not None
        layout = [
            ("dtype", k) for k, a in enumerate(self._record.tensor_inputs) if a.dtype is None and a.dtype_like is None
        ]
        layout += [("align", p) for p, (role, _) in enumerate(self._roles) if role == "tensor"]
        return layout + [("static", k) for k in self._record.static_extras]

    def _types(self, spec: tuple) -> tuple[list[str], dict[int, int], dict[str, Any]]:
        """Per runtime parameter its cutlass type name, the pointer alignments, and the static values."""
        assert self._record is not None
        rec = self._record
        tensors = rec.tensor_inputs
        names = [a.name for a in tensors]
        dts = [torch.float32 if a.dtype is None else getattr(torch, a.dtype) for a in tensors]
        aligned: dict[int, int] = {}
        static: dict[str, Any] = {}
        for (kind, k), v in zip(self.spec_layout(), spec, strict=True):
            if kind == "dtype":
                dts[k] = v
            elif kind == "align":
                aligned[k] = 16 if v else 0
            else:
                static[rec.extras[k].name] = int(v)
        for k, a in enumerate(tensors):
            if a.dtype_like is not None:
                dts[k] = dts[names.index(a.dtype_like)]
        types: list[str] = []
        for p, (role, a) in enumerate(self._roles):
            if role in ("tensor", "output"):
                dt = dts[names.index(a.name)] if role == "tensor" else (
                    getattr(torch, a.dtype) if a.dtype else dts[a.dtype_from])  # fmt: skip
                if dt not in _DTYPES:
                    raise LaunchError(f"{self.op_name}: CuTe DSL has no element type for {dt} (parameter "
                                      f"'{self.runtime_params[p]}').")  # fmt: skip
                types.append("ptr:" + _DTYPES[dt])
                aligned[p] = aligned.get(p, 16) or dt.itemsize
            else:
                ctype = a.ctype
                if ctype not in _SCALARS:
                    raise SpecError(self.op_name, "fn", f"parameter '{self.runtime_params[p]}' would be {ctype}, which "
                                    "a CuTe DSL host function does not take.", "use a float, int or bool.")  # fmt: skip
                types.append(_SCALARS[ctype])
        return types, aligned, static

    def _key(self, arch: str, spec: tuple) -> tuple[str, str, list[str], dict, dict]:
        """(the compile's content key, the GPU arch, the runtime parameters' types, their alignments, the
        constexpr values) of one specialization."""
        cutlass, _, _ = _dsl()
        types, aligned, static = self._types(spec)
        base = arch.rstrip("af")  # sm_90, sm_90a, sm_100f: the DSL compiles for the arch-specific target from 90 on
        gpu_arch = base + ("a" if int(base.removeprefix("sm_")) >= 90 else "")
        constexprs = {**self.constexprs, **static}
        key = make_key({"flavor": "cute", "source": self.fingerprint(), "types": types,
                        "aligned": sorted(aligned.items()), "constexprs": constexprs, "arch": gpu_arch,
                        "cutlass": cutlass.__version__})  # fmt: skip
        return key, gpu_arch, types, aligned, constexprs

    def _compile(self, gpu_arch: str, types: list[str], aligned: dict, constexprs: dict) -> Any:
        """``cute.compile`` of the host function for these argument types and constexprs."""
        cutlass, cute, driver = _dsl()
        args = []
        for name in self.order:
            if name == self.stream_param:
                args.append(driver.CUstream(0))
            elif name in constexprs:
                args.append(constexprs[name])
            else:
                p = self.runtime_params.index(name)
                args.append(_placeholder(cutlass, cute, types[p], aligned.get(p, 0)))
        # The DSL compiles for the GPU it detects (sm_100a where there is none); another arch goes in the
        # options. CuTe DSL 4.8.1 cannot export an object compiled with --gpu-arch as the process's first
        # compile ("Failed to dump object file with PIC relocation"): one compile for the detected arch first.
        opts = {} if _detected_arch() == gpu_arch else {"options": f"--gpu-arch={gpu_arch}"}
        try:
            with _LOCK:  # the DSL's compiler keeps global state
                if opts and not _COMPILED:
                    cute.compile(self.fn, *args)
                compiled = cute.compile(self.fn, *args, **opts)
                _COMPILED.append(True)
        except Exception as e:
            raise CompileError(self.op_name, self.kernel_name, _ANSI.sub("", str(e)) or type(e).__name__,
                               "") from None  # fmt: skip
        return compiled

    @property
    def stream_at(self) -> int:
        """The stream's position among the compiled function's arguments (constexprs are not arguments)."""
        return [n for n in self.order if n not in self.constexpr].index(self.stream_param)

    def compile(self, arch: str, spec: tuple) -> CuteKernel:
        """The compiled host function for one specialization: from memory, the disk cache, or cute.compile."""
        hit = self._compiled.get(spec)
        if hit is not None:
            return hit
        key, gpu_arch, types, aligned, constexprs = self._key(arch, spec)
        prefix = f"opsmith_{key[:16]}"
        cache = compile_cache()
        fn = None
        entry = cache.get(key) if cache else None
        if entry is not None:
            fn = _load(entry[1], prefix)
        if fn is None:
            t0 = time.perf_counter()
            fn = self._compile(gpu_arch, types, aligned, constexprs)
            if cache:  # an export the DSL cannot do only costs a recompile in the next process
                with contextlib.suppress(Exception):
                    cache.put(key, {"op": self.op_name, "kind": "cute", "seconds": time.perf_counter() - t0},
                              fn.dump_to_object(prefix))  # fmt: skip
        kernel = self._compiled[spec] = CuteKernel(self.op_name, fn, types, aligned, self.stream_at)
        return kernel

    def export_c(self, arch: str, spec: tuple) -> CuteExport:
        """One specialization as C for a native library (``export_to_c``, the DSL's ahead-of-time export): its
        object (host launch code with the cubin inside) and the C symbols to load and call it. From the disk
        cache, or compiled and exported now."""
        key, gpu_arch, types, aligned, constexprs = self._key(arch, spec)
        ckey = make_key({"export": "c", "compile": key})
        prefix = f"opsmith_cute_{key[:16]}"
        cache = compile_cache()
        hit = cache.get(ckey) if cache else None
        if hit is not None and hit[0].get("entry", "").startswith(f"_mlir_{prefix}_"):
            return CuteExport(hit[1], prefix, hit[0]["entry"], self.stream_at, len(types) + 1)
        compiled = self._compile(gpu_arch, types, aligned, constexprs)
        with tempfile.TemporaryDirectory(prefix="opsmith-cute-export-") as d:
            try:
                compiled.export_to_c(d, "kernel", prefix)
            except Exception as e:
                raise CompileError(self.op_name, self.kernel_name, "the CuTe DSL's export_to_c failed: "
                                   + (_ANSI.sub("", str(e)) or type(e).__name__), "") from None  # fmt: skip
            obj = (Path(d) / "kernel.o").read_bytes()
            header = (Path(d) / "kernel.h").read_text()
        found = re.search(rf"\bvoid (_mlir_{prefix}__mlir_ciface_\w+)\(void \*\*args, int32_t num_args\);", header)
        if found is None:
            raise CompileError(self.op_name, self.kernel_name, "the CuTe DSL's export_to_c wrote a header without "
                               "the entry this opsmith version reads (void <entry>(void **args, int32_t num_args)).",
                               header[:2000])  # fmt: skip
        if cache:
            cache.put(ckey, {"op": self.op_name, "kind": "cute-export", "entry": found.group(1)}, obj)
        return CuteExport(obj, prefix, found.group(1), self.stream_at, len(types) + 1)


@dataclass(frozen=True)
class CuteExport:
    """A specialization exported for a native library: ``object`` (the host launch code, its cubin inside),
    the symbol ``prefix`` (``_mlir_<prefix>_cuda_init`` and ``_cuda_load_to_device`` load it per device),
    ``entry`` (``void entry(void** args, int32_t n)``: pointers to each argument, then to an int32 the launch's
    cudaError is written to), where the stream goes among the ``n_args`` arguments."""

    object: bytes
    prefix: str
    entry: str
    stream_at: int
    n_args: int


_COMPILED: list[bool] = []  # whether this process has compiled with CuTe DSL (see _compile)


def _source_digest(fn: Any) -> Any:
    """What identifies the host function across processes: the source text of its module and of the modules
    of the functions it calls (its kernels), and its name. Not its code object: CuTe DSL rewrites a function's
    ``__code__`` in place when it first compiles it, so that would differ between a process that compiled it
    and one that loaded it from the cache. Without source files (a notebook) its description is used."""
    inner = inspect.unwrap(fn)
    modules = {inner.__module__}
    for name in inner.__code__.co_names:
        g = inner.__globals__.get(name)
        if inspect.isfunction(g):
            modules.add(inspect.unwrap(g).__module__)
    texts = {}
    for m in sorted(modules):
        mod = sys.modules.get(m)
        try:
            texts[m] = hashlib.sha256(inspect.getsource(mod).encode()).hexdigest() if mod else None
        except (OSError, TypeError):
            return {"fn": f"{inner.__module__}.{inner.__qualname__}", "described": describe(fn)}
    return {"fn": f"{inner.__module__}.{inner.__qualname__}", "modules": texts}


def _detected_arch() -> str:
    from cutlass.cutlass_dsl import CuTeDSL

    return str(CuTeDSL._get_dsl().envar.arch)


def _placeholder(cutlass: Any, cute: Any, ctype: str, align: int) -> Any:
    """A compile-time argument of the runtime parameter's type (pointers at an address of that alignment)."""
    if ctype.startswith("ptr:"):
        return cute.runtime.make_ptr(getattr(cutlass, ctype[4:]), align or 16, cute.AddressSpace.gmem,
                                     assumed_align=align or None)  # fmt: skip
    return getattr(cutlass, ctype)(0)


def _load(obj: bytes, prefix: str) -> Any:
    """A compiled function from its exported object, or None when it cannot be loaded (a miss)."""
    from cutlass.cute.runtime import load_module

    try:
        with tempfile.TemporaryDirectory(prefix="opsmith-cute-") as d:
            path = Path(d) / f"{prefix}.o"
            path.write_bytes(obj)
            return getattr(load_module(str(path)), prefix)
    except Exception:
        return None


class CuteKernel:
    """One compiled specialization, launched on the current stream of the call's device.

    The DSL's own call converts every argument in Python on each call (H200: 14.5 us of a 20 us launch at
    (64, 4096)). After the first call, a kernel whose C arguments this class can lay out itself (checked byte
    for byte against the DSL's, for that call's values) keeps one buffer per argument and its compiled
    executor, and a call writes the values into the buffers and runs it (5.5 us); anything else keeps the
    DSL's call.
    """

    def __init__(self, op_name: str, fn: Any, types: list[str], aligned: dict[int, int], stream_at: int) -> None:
        cutlass, cute, _ = _dsl()
        self.op_name, self.fn, self.types, self.stream_at = op_name, fn, types, stream_at
        make_ptr, gmem = cute.runtime.make_ptr, cute.AddressSpace.gmem

        def pointer(elem: Any, align: int | None) -> Any:
            return lambda v: make_ptr(elem, v, gmem, assumed_align=align)

        # Per parameter: how a value of the generated code (a pointer as an int, a number) becomes an argument.
        self._convert = [pointer(getattr(cutlass, t[4:]), aligned.get(p) or None) if t.startswith("ptr:") else None
                         for p, t in enumerate(types)]  # fmt: skip
        self._fast: tuple | None = None  # (device, buffers, stream buffer, C arguments, executor), once checked
        self._lock = threading.Lock()

    def launch(self, device: int, *values: Any) -> None:
        raw = _raw_stream(device)  # the stream handles every flavor's launches share (launch.py)
        fast = self._fast
        # The compiled launch runs on the current device: the direct call only where that is the call's.
        if fast and fast[0] == device and device == _current_device():
            with self._lock:
                for buf, v in zip(fast[1], values, strict=True):
                    buf.value = v
                fast[2].value = raw
                try:
                    fast[4].run_compiled_program(fast[3])  # raises on a failed launch
                except Exception as e:
                    raise LaunchError(f"{self.op_name}: the CuTe DSL host function failed: {e}") from e
            return
        args = [v if c is None else c(v) for c, v in zip(self._convert, values, strict=True)]
        s = _STREAMS.get(raw)
        if s is None:
            s = _stream_handle(raw)
        args.insert(self.stream_at, s)
        if device != _current_device():
            with torch.cuda.device(device):
                err = self.fn(*args)
        else:
            err = self.fn(*args)
            if fast is None:
                self._fast = _direct_call(self.fn, self.types, self.stream_at, values, raw, args, device)
        if err:  # the host function's launch status (a cudaError_t)
            raise LaunchError(f"{self.op_name}: the CuTe DSL host function returned CUDA error {int(err)}.")


_CTYPES = {"Float32": ctypes.c_float, "Float64": ctypes.c_double, "Int32": ctypes.c_int32, "Int64": ctypes.c_int64,
           "Uint32": ctypes.c_uint32, "Uint64": ctypes.c_uint64, "Int8": ctypes.c_int8, "Boolean": ctypes.c_bool}  # fmt: skip


def _direct_call(fn: Any, types: list[str], stream_at: int, values: tuple, raw: int, args: list, device: int) -> tuple:
    """(device, buffers, stream buffer, C arguments, executor) for calls that skip the DSL's conversion, or
    ``False`` (keep the DSL's call) when the DSL's C arguments for this call differ from ours in number or in
    any byte, or the compiled function has no executor to run them."""
    try:
        executor = getattr(fn, "_default_executor", None)
        if executor is None or not hasattr(executor, "run_compiled_program"):
            return False  # type: ignore[return-value]
        theirs, _ = fn.execution_args.generate_execution_args(tuple(args), {})
        bufs = [
            ctypes.c_void_p(v) if t.startswith("ptr:") else _CTYPES[t](v) for t, v in zip(types, values, strict=True)
        ]
        stream = ctypes.c_void_p(raw)
        ordered = list(bufs)
        ordered.insert(stream_at, stream)
        if len(theirs) != len(ordered):
            return False  # type: ignore[return-value]
        for p, buf in zip(theirs, ordered, strict=True):
            address = p.value if isinstance(p, ctypes.c_void_p) else int(p)
            if ctypes.string_at(address, ctypes.sizeof(buf)) != bytes(buf):
                return False  # type: ignore[return-value]
        mine = [ctypes.cast(ctypes.pointer(b), ctypes.c_void_p) for b in ordered]
        return (device, bufs, stream, mine, executor)
    except Exception:  # any DSL internals this does not know: the DSL's own call stays
        return False  # type: ignore[return-value]
