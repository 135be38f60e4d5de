"""The on-disk cache: content-addressed entries, published atomically, verified on every read.

Why not ``cuda.core.utils.FileStreamProgramCache``: it stores raw bytes with no checksum (a truncated
entry would be loaded), refuses ``name_expressions`` (templates), and does not key included headers.

Entry file: ``MAGIC`` line, one line of JSON metadata (key, payload size and sha256, caller's fields), the
payload. A missing, truncated, garbage, foreign-key, symlinked or foreign-owned entry is a miss, never an
error. Writes go to a temp file in the same directory, then ``os.replace``: readers see the old entry or the
new one, and a writer killed mid-way leaves only a temp file that a later write sweeps.

Reads and writes both go through one safety check of the directories (ours, not writable by others, not
symlinks): an entry planted in a directory others can write is never loaded, however consistent its
checksum.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import env
from ._version import __version__

__all__ = ["CACHE_SCHEMA", "DiskCache", "compile_cache", "make_key"]

CACHE_SCHEMA = 1
MAGIC = b"OPSMITH-CACHE-1\n"
_STALE_TMP_S = 3600  # a temp file this old belongs to a writer that died


def make_key(parts: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``parts`` plus the cache schema and opsmith versions."""
    blob = json.dumps({"schema": CACHE_SCHEMA, "opsmith": __version__, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, stacklevel=4)


def _safe_dir(path: Path) -> str | None:
    """Why ``path`` is unsafe to use as a private cache directory, or None if it is fine."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    if st.st_mode & 0o022:
        return f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


class DiskCache:
    """A directory of verified entries. ``get`` returns ``(meta, payload)`` or None; ``put`` never raises
    for I/O trouble (a cache that cannot be written only costs a recompile)."""

    def __init__(self, root: Path, namespace: str) -> None:
        self.root = root
        self.dir = root / namespace

    def usable(self, create: bool) -> bool:
        """The one safety check, before every read and write: both directories exist (or are created, for a
        write) and are ours, private and not symlinks. Refusal is warned once per directory and reason."""
        for d in (self.root, self.dir):
            if create:
                try:
                    d.mkdir(mode=0o700, parents=True, exist_ok=True)
                except OSError as e:
                    _warn_once(f"opsmith: cannot create cache directory {d} ({e}); compiling without the "
                               f"disk cache. Fix: set {env.CACHE_DIR.name} to a writable directory.")  # fmt: skip
                    return False
            try:
                why = _safe_dir(d)
            except OSError:  # missing: nothing to read
                return False
            if why:
                _warn_once(f"opsmith: refusing the disk cache: {why}. Compiling without it. Fix: `chmod 700 {d}` "
                           f"if it is yours, or set {env.CACHE_DIR.name} to a private directory.")  # fmt: skip
                return False
        return True

    def path_for(self, key: str) -> Path:
        return self.dir / f"{key}.bin"

    def get(self, key: str) -> tuple[dict, bytes] | None:
        if not self.usable(create=False):
            return None
        try:
            fd = os.open(self.path_for(key), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None  # missing, or a symlink (ELOOP)
        try:
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
                    return None  # not a file we wrote
                data = f.read()
        except OSError:
            return None
        if not data.startswith(MAGIC):
            return None
        nl = data.find(b"\n", len(MAGIC))
        if nl < 0:
            return None
        try:
            meta = json.loads(data[len(MAGIC) : nl])
        except ValueError:
            return None
        payload = data[nl + 1 :]
        if (
            not isinstance(meta, dict)
            or meta.get("key") != key
            or meta.get("size") != len(payload)
            or meta.get("sha256") != hashlib.sha256(payload).hexdigest()
        ):
            return None
        return meta, payload

    def put(self, key: str, meta: dict, payload: bytes) -> bool:
        if not self.usable(create=True):
            return False
        head = dict(meta, key=key, size=len(payload), sha256=hashlib.sha256(payload).hexdigest())
        blob = MAGIC + json.dumps(head, sort_keys=True).encode() + b"\n" + payload
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.dir)
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, self.path_for(key))  # atomic; replaces a symlink itself, never its target
            tmp = None
        except OSError as e:
            warnings.warn(f"opsmith: could not write cache entry {key[:12]} ({e}).", stacklevel=2)
            return False
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self._sweep_tmp()
        return True

    @contextlib.contextmanager
    def claim(self, key: str) -> Iterator[None]:
        """Hold ``key``'s lock: one process makes an entry while the others with the same key wait, then read
        it (``get`` again inside) instead of making it too (eight ranks of a node building one library compile
        it once). The lock dies with its process; a cache that cannot be written locks nothing."""
        if not self.usable(create=True):
            yield
            return
        path = self.dir / f".lock-{key}"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
            # Removed while held: a waiter holding the old file, or a newcomer making a new one, reads the entry
            # this holder published (at worst a failed make is tried again), never a half-written one.
            with contextlib.suppress(OSError):
                os.unlink(path)
        finally:
            os.close(fd)

    def _sweep_tmp(self) -> None:
        now = time.time()
        try:
            with os.scandir(self.dir) as it:
                for e in it:
                    if e.name.startswith(".tmp-") and now - e.stat(follow_symlinks=False).st_mtime > _STALE_TMP_S:
                        os.unlink(e.path)
        except OSError:
            pass


def compile_cache() -> DiskCache | None:
    """The compile cache, or None when ``OPSMITH_DISABLE_DISK_CACHE`` is set."""
    if env.DISABLE_DISK_CACHE.get():
        return None
    return DiskCache(env.cache_dir(), "kernels")
