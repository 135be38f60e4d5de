"""Every environment variable opsmith reads, declared once with its type, default and meaning.

Values are read when used, never at import, so tests and users can change them at run time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

__all__ = [
    "AUTOTUNE",
    "AUTOTUNE_CHECK",
    "AUTOTUNE_FORCE",
    "CACHE_DIR",
    "CHECK_ROW_TIMEOUT",
    "CHECK_WARNINGS",
    "COMPUTE_SANITIZER",
    "DEFAULT_ARCH",
    "DEVICE_DEBUG",
    "DISABLE_DISK_CACHE",
    "DUMP_DIR",
    "Knob",
    "LOG",
    "NATIVE",
    "NATIVE_PCH",
    "PROGRESS",
    "REINPLACE_SAVED",
    "SPECIALIZE_LIMIT",
    "SPECIALIZE_WARN",
    "TUNE_CLAIM_WAIT",
    "TUNE_TIMEOUT",
    "cache_dir",
]

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Knob(Generic[T]):
    name: str
    default: T
    doc: str

    def get(self) -> T:
        raw = os.environ.get(self.name)
        if raw is None:
            return self.default
        if isinstance(self.default, bool):
            low = raw.strip().lower()
            if low in _TRUE:
                return True  # type: ignore[return-value]
            if low in _FALSE:
                return False  # type: ignore[return-value]
            raise ValueError(f"{self.name}={raw!r} is not a boolean. Fix: set it to 1 or 0.")
        return type(self.default)(raw) if self.default is not None else raw  # type: ignore[return-value]


CACHE_DIR: Knob[str | None] = Knob(
    "OPSMITH_CACHE_DIR", None, "Directory of the on-disk compile cache. Default: $XDG_CACHE_HOME/opsmith."
)
DISABLE_DISK_CACHE: Knob[bool] = Knob(
    "OPSMITH_DISABLE_DISK_CACHE", False, "1 = never read or write the on-disk compile cache."
)
DEFAULT_ARCH: Knob[str] = Knob(
    "OPSMITH_DEFAULT_ARCH",
    "sm_90",
    "Architecture compiled for at registration when no GPU is visible (the CPU-only path).",
)

DEVICE_DEBUG: Knob[bool] = Knob(
    "OPSMITH_DEVICE_DEBUG",
    False,
    "1 = accept the '-G' compiler option (unoptimized device code, for cuda-gdb); `opsmith build` refuses it always.",
)

AUTOTUNE: Knob[bool] = Knob(
    "OPSMITH_AUTOTUNE", True, "0 = never tune: use a cached decision if there is one, else the default config."
)
AUTOTUNE_FORCE: Knob[bool] = Knob(
    "OPSMITH_AUTOTUNE_FORCE", False, "1 = ignore cached decisions and tune every key again (once per process)."
)
AUTOTUNE_CHECK: Knob[bool] = Knob(
    "OPSMITH_AUTOTUNE_CHECK",
    False,
    "1 = while tuning, compare every config's outputs with the first config's and warn on mismatches.",
)
SPECIALIZE_WARN: Knob[int] = Knob(
    "OPSMITH_SPECIALIZE_WARN",
    8,
    "Distinct values of one size compiled into an op (a Triton constexpr or C++ template argument bound to a shape) "
    "at which opsmith warns: each value is a compile.",
)
SPECIALIZE_LIMIT: Knob[int] = Knob(
    "OPSMITH_SPECIALIZE_LIMIT",
    64,
    "Distinct values of one size compiled into an op beyond which a call with a new value is refused.",
)
COMPUTE_SANITIZER: Knob[str | None] = Knob(
    "OPSMITH_COMPUTE_SANITIZER",
    None,
    "Path of compute-sanitizer for `opsmith check --sanitize`. Default: PATH, then $CUDA_HOME/bin, /usr/local/cuda/bin.",
)
CHECK_ROW_TIMEOUT: Knob[float] = Knob(
    "OPSMITH_CHECK_ROW_TIMEOUT",
    600.0,
    "seconds an `opsmith check` row may run in its child process before it is killed and reported as timed out.",
)
CHECK_WARNINGS: Knob[bool] = Knob(
    "OPSMITH_CHECK_WARNINGS",
    False,
    "`opsmith check` shows the deprecation warnings torch and Triton raise while its rows run (hidden and counted "
    "below the table by default: they are about the APIs a row calls, never about the op).",
)
TUNE_CLAIM_WAIT: Knob[float] = Knob(
    "OPSMITH_TUNE_CLAIM_WAIT",
    2.0,
    "Multi-rank jobs: seconds a rank other than 0 gives rank 0 to claim a tuning key before claiming it itself.",
)
TUNE_TIMEOUT: Knob[float] = Knob(
    "OPSMITH_TUNE_TIMEOUT",
    1800.0,
    "Multi-rank jobs: seconds a rank waits for the rank tuning a key to publish its decision before failing.",
)
LOG: Knob[str] = Knob(
    "OPSMITH_LOG",
    "",
    "warning (default) | info | debug: what opsmith logs to stderr (compiles, tuning decisions, native builds).",
)
PROGRESS: Knob[bool] = Knob(
    "OPSMITH_PROGRESS", True, "0 = no progress display for long work (tuning, native builds) on a terminal."
)
REINPLACE_SAVED: Knob[bool] = Knob(
    "OPSMITH_REINPLACE_SAVED",
    True,
    "0 = leave Inductor's post-grad passes alone: a saved activation an op overwrites in a compiled backward is "
    "cloned first (opsmith/inductor/donated.py).",
)
DUMP_DIR: Knob[str | None] = Knob(
    "OPSMITH_DUMP_DIR",
    None,
    "Directory where each op's generated eager code is written at registration (<ns>.<name>.py), and a native "
    "build's C++ (<library>.cpp).",
)
CXX: Knob[str | None] = Knob(
    "OPSMITH_CXX", None, "C++ compiler for native op libraries (`opsmith build`). Default: c++, g++ or clang++ on PATH."
)
NATIVE: Knob[str] = Knob(
    "OPSMITH_NATIVE",
    "auto",
    "auto = serve each op through a native library built in the background where a GPU and a C++ compiler are "
    "present (docs/native.md); off = the Python path always; dry-run = opsmith's own CPU tests (libraries and the Python "
    "path record launches instead of making them, on CPU tensors).",
)

NATIVE_PCH: Knob[str] = Knob(
    "OPSMITH_NATIVE_PCH",
    "auto",
    "auto = native builds precompile torch's headers once the disk cache has compiled one library for the same torch, "
    "compiler and flags (once, ~40 s and ~500 MB on a 2-core CPU; each later small library compiles in about half the "
    "time: benchmarks/bench_native_build.py); on = "
    "from the first build; off = never (opsmith/native/pch.py). GCC only.",
)


def cache_dir() -> Path:
    """The compile cache root: $OPSMITH_CACHE_DIR, else $XDG_CACHE_HOME/opsmith, else ~/.cache/opsmith."""
    explicit = CACHE_DIR.get()
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "opsmith"
