"""A CUDA C++ kernel's PTX at registration, for the analysis (``opsmith/analysis``): the same source, options
and name expression as the cubin compile (``cuda_cpp.py``), compiled by NVRTC for the virtual architecture
(``compute_90`` beside ``sm_90``), where NVRTC keeps the PTX. cuda.core's ``Program.compile("ptx")`` asks the
driver which PTX version it loads, and a machine without a driver has none; NVRTC itself needs no driver, so
this goes through cuda.bindings' NVRTC directly. A kernel compiled per dtype or size (``{T_x}`` placeholders) is
compiled as one call instantiates it. Cached on disk like the cubin, under its own key (~20-50 ms of NVRTC for a
small kernel, more with large headers; a hit is a file read)."""

from __future__ import annotations

from typing import Any

from ..cache import compile_cache, make_key

__all__ = ["PROGRAM", "analysis_ptx"]

#: The program's name, which the PTX's ``.file`` gives the source (line info quotes the kernel's lines from it).
PROGRAM = "kernel.cu"


def _nvrtc_ptx(source: Any, arch: str) -> tuple[str, str]:
    """(PTX text, the kernel's lowered name)."""
    from cuda.bindings import nvrtc

    from .cuda_cpp import _PROBE

    def ok(result: tuple) -> tuple:
        if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise ValueError(f"NVRTC: {result[0]}")
        return result[1:]

    virtual = "compute_" + arch.removeprefix("sm_")
    options = [o if not o.startswith(b"-arch=") else b"-arch=" + virtual.encode()
               for o in source._options(arch).as_bytes("nvrtc")] + [b"-lineinfo"]  # fmt: skip
    kernel_expr, _ = source._expressions()
    (prog,) = ok(nvrtc.nvrtcCreateProgram((source.source + _PROBE).encode(), PROGRAM.encode(), 0, [], []))
    try:
        ok(nvrtc.nvrtcAddNameExpression(prog, kernel_expr.encode()))
        ok(nvrtc.nvrtcCompileProgram(prog, len(options), options))
        (size,) = ok(nvrtc.nvrtcGetPTXSize(prog))
        buf = b" " * size
        ok(nvrtc.nvrtcGetPTX(prog, buf))
        (lowered,) = ok(nvrtc.nvrtcGetLoweredName(prog, kernel_expr.encode()))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return buf.rstrip(b"\0").decode("utf-8", "replace"), lowered.decode() if isinstance(lowered, bytes) else lowered


def _instantiated(source: Any, record: Any) -> tuple[Any, bool]:
    """A kernel compiled per dtype or size as one call instantiates it (float32 where an input allows it, 64 for a
    size), and whether nothing but dtypes was chosen (a size may select code another call does not compile)."""
    import copy

    import torch

    s = copy.copy(source)
    s.bind(record)
    spec, exact = [], True
    for kind, k in s.spec_layout():
        if kind == "dtype":
            a = record.tensor_inputs[k]
            spec.append(torch.float32 if not a.dtypes or "float32" in a.dtypes else getattr(torch, a.dtypes[0]))
        else:  # a template size or an int/bool scalar compiled in
            a = record.inputs[k] if kind == "scalar" else None
            spec.append(True if a is not None and a.py_type == "bool" else 64)
            exact = False
    return s.instantiate(tuple(spec)), exact


def analysis_ptx(source: Any, record: Any) -> tuple[str, str, list[str], bool]:
    """(the kernel's PTX for ``record``'s architecture, its entry's name, the parameters' names in order, whether
    that PTX holds every access a call can make: False where a template size was chosen for it)."""
    exact = True
    if source.specialized:
        source, exact = _instantiated(source, record)
    arch = source.arch_override or record.arch
    parts, complete = source.compile_inputs(arch)
    key = make_key({"flavor": "cuda-analysis-ptx", **parts, "pre_include": list(source.pre_include),
                    "lineinfo": True})  # fmt: skip
    cache = compile_cache() if complete else None
    hit = cache.get(key) if cache else None
    if hit is not None and isinstance(hit[0].get("symbol"), str):
        ptx, symbol = hit[1].decode("utf-8", "replace"), hit[0]["symbol"]
    else:
        ptx, symbol = _nvrtc_ptx(source, arch)
        if cache:
            cache.put(key, {"symbol": symbol}, ptx.encode())
    return ptx, symbol, [p.name for p in record.params], exact  # the kernel's parameters, in order
