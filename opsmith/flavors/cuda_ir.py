"""A CUDA C++ kernel's PTX at registration, for the analysis (``opsmith/analysis``): the same source, options
and name expression as the cubin compile (``cuda_cpp.py``), compiled by NVRTC for the virtual architecture
(``compute_90`` beside ``sm_90``), where NVRTC keeps the PTX. cuda.core's ``Program.compile("ptx")`` asks the
driver which PTX version it loads, and a machine without a driver has none; NVRTC itself needs no driver, so
this goes through cuda.bindings' NVRTC directly. Cached on disk like the cubin, under its own key (~20-50 ms of
NVRTC for a small kernel, more with large headers; a hit is a file read)."""

from __future__ import annotations

import hashlib
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


def analysis_ptx(source: Any, record: Any) -> tuple[str, str, list[str]]:
    """(the kernel's PTX for ``record``'s architecture, its entry's name, the parameters' names in order). A kernel
    compiled per dtype or size has no one PTX here (ValueError: it is read from its text)."""
    from .cuda_cpp import header_digests, nvrtc_version, toolkit_include_dirs

    if source.specialized:
        raise ValueError("a kernel compiled per dtype or size is read from its source text")
    arch = source.arch_override or record.arch
    toolkit = toolkit_include_dirs()
    headers, complete = header_digests(source.source, source.include_paths, toolkit)
    key = make_key({"flavor": "cuda-analysis-ptx", "source": hashlib.sha256(source.source.encode()).hexdigest(),
                    "headers": headers, "kernel": source.kernel_name, "std": source.std, "include": source.include_paths,
                    "toolkit": toolkit, "defines": source.defines, "arch": arch, "nvrtc": nvrtc_version(),
                    "options": list(source.options.canonical), "lineinfo": True})  # fmt: skip
    cache = compile_cache() if complete else None
    hit = cache.get(key) if cache else None
    if hit is not None and isinstance(hit[0].get("symbol"), str):
        ptx, symbol = hit[1].decode("utf-8", "replace"), hit[0]["symbol"]
    else:
        ptx, symbol = _nvrtc_ptx(source, arch)
        if cache:
            cache.put(key, {"symbol": symbol}, ptx.encode())
    return ptx, symbol, [p.name for p in record.params]  # the kernel's parameters, in order
