"""The XLA handlers of opsmith ops: generated, compiled, cached and registered with JAX.

The handlers are a native library of the "xla" target (``native/xla_cpp.py``): the same collection of kernels
(every config the tuning decisions name and the default config; every specialization this process compiled,
plus the default dtypes), the same source printer and the same content-addressed disk cache as
``opsmith build``. A library is registered under target names that carry its content key, so a later
library (a new tuning decision, a new specialization) registers beside an earlier one instead of
overwriting a handler that jitted functions already hold.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..native import _archs, _libs_dir
from ..native.build import DEFAULT_DTYPES, build_source, closure, compile_library, library_key
from ..native.xla_cpp import handler_symbol

__all__ = ["Handlers", "handlers"]

_LOCK = threading.Lock()
_LOADED: dict[tuple[str, bool], Handlers] = {}


@dataclass
class Handlers:
    """A loaded handler library: its path, content key, platform ("CUDA", or "cpu" for a dry run) and the
    registered target name of each op (op name -> target)."""

    path: Path
    key: str
    platform: str
    targets: dict[str, str]
    library: Any  # the ctypes handle: kept, so the handlers stay loaded

    def take_dry_run(self) -> str:
        """A dry-run library's launches since the last take, as JSON (what ``torch.ops.opsmith_dry_run.take``
        returns for an ATen library)."""
        take = self.library.opsmith_dry_run_take
        take.restype = ctypes.c_char_p
        return take().decode()


def handlers(ops: Iterable[Any], *, dry_run: bool = False) -> Handlers:
    """The XLA handlers of ``ops`` and every op their backwards call, built (or taken from the cache) and
    registered with JAX. ``dry_run``: handlers for JAX's CPU platform that record launches instead of making
    them. Raises NativeBuildError for ops that cannot be native, ToolchainError when the compile fails."""
    import jax

    ops = closure(list(ops))
    text, images, natives, _ = build_source(ops, _archs(None), DEFAULT_DTYPES, target="xla")
    key = library_key(text, images, dry_run=dry_run, target="xla")
    with _LOCK:
        hit = _LOADED.get((key, dry_run))
        if hit is not None:
            return hit
        path = _libs_dir() / f"xla-{key[:32]}{'-dry' if dry_run else ''}.so"
        compile_library(text, images, path, dry_run=dry_run, target="xla")
        lib = ctypes.CDLL(str(path))
        platform = "cpu" if dry_run else "CUDA"
        targets = {}
        for n in natives:
            symbol = handler_symbol(n.record.op_name)
            name = f"{symbol}_{key[:16]}"
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, symbol)), platform=platform)
            targets[n.record.op_name] = name
        _LOADED[key, dry_run] = got = Handlers(path, key, platform, targets, lib)
        return got
