"""A precompiled header for native libraries: the torch headers every ATen library includes, parsed once.

Why: parsing torch's headers is most of a small library's compile. GCC 12 on a 2-core CPU, a one-op dry-run
library: 34 s from the text, 17 s with the header precompiled; making the header takes 43 s and 501 MB of disk
(``benchmarks/bench_native_build.py``, docs/measurements/2026-11-28-native-build-pch-cpu.json). So it pays from a cache's second compile on, and
``OPSMITH_NATIVE_PCH=auto`` (the default) makes it at the second library compiled against the same torch,
compiler and flags; ``on`` from the first; ``off`` never. Builds make it (``native.build``, ``opsmith build``);
serving's background builds use it once made.

Safety: GCC checks a ``.gch`` against each compile (its own build, the flags, the macros defined) and reads
the header's text instead where they differ, so a stale entry costs time, never a wrong library. An entry is
a directory published by rename, holding the header, its ``.gch`` and the ``.gch``'s sha256 and size: a build
checks the sha256 once per process before first use (a damaged entry is removed and is a miss); serving, which
must start its compile within seconds, checks the size. A compile that fails with the header is
compiled again without it (``build.py``), and the entry removed when that one succeeds. GCC only: clang's
precompiled headers are another format, found another way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from .. import env
from ..cache import DiskCache, make_key
from ..progress import log, step

__all__ = ["HEADER", "discard", "entry_in", "prepare", "split"]

HEADER = "opsmith_pch.h"
_NAMESPACE = "native-pch"
_VERIFIED: set[Path] = set()  # entry directories whose .gch matched its sha256 (checked once per process)


def split(source: str) -> tuple[str, str] | None:
    """(the header to precompile, the rest) of a generated library's source: the ``#define`` and ``#include``
    lines of its leading preamble (comments dropped: they name the library's ops, and would key a header per
    library), then the source with that preamble replaced by one include and a ``#line`` that keeps compiler
    messages on the source's own line numbers. None when the source has no torch include to precompile."""
    lines = source.splitlines(keepends=True)
    n = 0
    while n < len(lines) and (not lines[n].strip() or lines[n].lstrip().startswith(("//", "#include", "#define"))):
        n += 1
    head = [ln for ln in lines[:n] if ln.lstrip().startswith(("#include", "#define"))]
    if not any("<torch/" in ln for ln in head):
        return None
    return "".join(head), f'#include "{HEADER}"\n#line {n + 1}\n' + "".join(lines[n:])


def _mode() -> str:
    mode = env.NATIVE_PCH.get().strip().lower()
    return mode if mode in ("on", "off") else "auto"


def _is_gcc(compiler_version: str) -> bool:
    return "clang" not in compiler_version.lower()


def _root() -> Path | None:
    if env.DISABLE_DISK_CACHE.get():
        return None
    cache = DiskCache(env.cache_dir(), _NAMESPACE)
    return cache.dir if cache.usable(create=True) else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _verified(entry: Path) -> bool:
    """The entry is whole: its .gch hashes to the recorded sha256 (once per process; ~1 s for 480 MB)."""
    if entry not in _VERIFIED:
        try:
            whole = (entry / "sha256").read_text().strip() == _sha256(entry / f"{HEADER}.gch")
        except OSError:
            whole = False
        if not whole:
            discard(entry)
            return False
        _VERIFIED.add(entry)
    return True


def _sized(entry: Path) -> bool:
    """The cheap check: the .gch has the size it was made with. GCC checks the rest against each compile, and a
    compile failing with the header is compiled again without it (``build.compile_or_retry``, serving's loop)."""
    try:
        return (entry / HEADER).is_file() and int((entry / "size").read_text()) == (
            entry / f"{HEADER}.gch"
        ).stat().st_size
    except (OSError, ValueError):
        return False


def discard(entry: Path) -> None:
    """Remove a bad entry (a later build makes it again)."""
    _VERIFIED.discard(entry)
    with contextlib.suppress(OSError):
        gone = entry.with_name(f".tmp-gone-{entry.name}-{os.getpid()}")
        os.rename(entry, gone)  # atomic: no reader sees half a directory
        shutil.rmtree(gone, ignore_errors=True)


def entry_in(cmd: Sequence[str]) -> Path | None:
    """The precompiled-header entry a compile command uses, if any."""
    for arg in cmd:
        if arg.startswith("-I") and (Path(arg[2:]) / HEADER).is_file() and Path(arg[2:]).parent.name == _NAMESPACE:
            return Path(arg[2:])
    return None


def _make(entry: Path, header: str, cxx: str, flags: Sequence[str]) -> bool:
    """Compile ``header`` into a new entry at ``entry`` (published by rename). False when GCC refuses."""
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
    try:
        (tmp / HEADER).write_text(header)
        cmd = [cxx, *flags, "-x", "c++-header", str(tmp / HEADER), "-o", str(tmp / f"{HEADER}.gch")]
        with step("precompiling torch's headers for native builds (once per torch and compiler; ~30 s)"):
            proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            log.info("opsmith: could not precompile the torch headers (builds go on without):\n%s", proc.stderr[-4000:])
            return False
        if not (tmp / f"{HEADER}.gch").is_file():
            return False
        (tmp / "sha256").write_text(_sha256(tmp / f"{HEADER}.gch"))
        (tmp / "size").write_text(str((tmp / f"{HEADER}.gch").stat().st_size))
        with contextlib.suppress(OSError):  # another process published it first: keep theirs
            os.rename(tmp, entry)
        return entry.is_dir()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prepare(source: str, cxx: str, compiler_version: str, flags: Sequence[str], *,
            make: bool = True) -> tuple[str, Path] | None:  # fmt: skip
    """(the source to compile, the entry directory to put on the include path) where a precompiled header
    serves this compile, making it where the mode says it is time and ``make`` allows (serving does not: a
    process must not wait 30 s at exit for it); None to compile ``source`` as it is. ``flags``: the library's
    compile flags without ``-shared``, ``-c`` and opsmith's own defines (GCC checks those against the header)."""
    parts = split(source)
    root = _root()
    if parts is None or root is None or _mode() == "off" or not _is_gcc(compiler_version):
        return None
    header, rest = parts
    key = make_key({"pch": header, "flags": list(flags), "compiler": compiler_version, "torch": torch.__version__})
    entry = root / key
    if not make:  # serving: no 500 MB hash before the compile starts (an exiting process waits 10 s for that)
        return (rest, entry) if _sized(entry) else None
    if not (entry / HEADER).is_file() or not _verified(entry):
        seen = root / f"{key}.seen"
        if _mode() == "auto" and not seen.exists():
            seen.touch()  # the first compile goes without: a cache that compiles once never pays for the header
            return None
        with DiskCache(env.cache_dir(), _NAMESPACE).claim(key):  # one process makes it; the others wait, use it
            if not (entry / HEADER).is_file() and not _make(entry, header, cxx, flags):
                return None
        if not _verified(entry):
            return None
    return rest, entry
