"""Native serving by default: the ops a process registers are served by a native library of their own
kernels as soon as one is built, with no build step from the user.

Registration hands each op to ``attach``. Where the op can be native, a host C++ compiler is present and a
GPU is visible (the library serves CUDA tensors), one background thread gathers the ops registered close
together (a quiet period of ``QUIET_S``), generates their library from the records as ``opsmith build`` does
(``build.py``, in the library's *served* form) and compiles it in a session of its own, which finishes even
when this process exits first (at exit it waits up to ``EXIT_WAIT_S`` for the compile to start); a later
process finds the library and only loads it.

The switch: loading the library registers its CUDA and AutogradCUDA kernels over the Python path's, which
stay registered beneath. The dispatcher replaces each table entry under its lock and never frees the kernel
it replaces, so every call runs whole on one path or the other; until the load, and where nothing can be
built, the Python path serves. A call the library holds no kernel or tuning decision for (a dtype, a
compiled-in size or a tuning key first met after the build) reaches the Python path through the op
``opsmith_python_<ns>::<name>``, which compiles or tunes what it needs (or reads it from the caches) and hands
it to the library as data (``learned.py``): the library serves such calls from the next one on, with no rebuild.
The library is thus built from the op records alone, the same in every process, and a later process loads it
from the cache. Only a kernel linked into the library (a CuTe DSL host function) needs a rebuild (``REBUILDS``
times per op and process at most; after that such calls stay on the Python path).

``OPSMITH_NATIVE=off`` (or ``native=False`` at registration) keeps the Python path. ``op.serving`` says which
path serves: "python", "native", or "mixed" while some calls go to the Python path (a miss, until the rebuild
that holds it lands; for good past the rebuild cap); ``op.serving_why`` why. ``op.serving_counts()`` counts the
calls each path served and why a call went to the Python path (the library counts its own, ``codegen.py``),
and the rebuilds with their times; ``table()`` is every op's, ``wait()`` returns once every library under way
is serving. Each kind of miss is logged once per op (``OPSMITH_LOG=info``).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import env
from ..errors import ToolchainError
from . import pch
from .build import (
    ABANDON,
    DEFAULT_DTYPES,
    Abandoned,
    build_source,
    closure,
    compile_command,
    compile_failed,
    compiler,
    library_key,
    native_cache,
    refusal,
    write_atomic,
)
from .codegen import python_path_op
from .learned import Teacher

__all__ = ["MISSES", "ServingCounts", "attach", "counts", "served_backend", "table", "wait"]

log = logging.getLogger("opsmith.native")

QUIET_S = 0.2  # registrations this close together share one library (one compile of torch's headers: ~15 s)
EXIT_WAIT_S = 10.0  # at exit, how long to wait for a queued library's compile to start (it then finishes alone)
EXIT_ABANDON_S = 30.0  # then, how long to wait for the kernel compiling now to end, so the thread leaves NVRTC
# Libraries rebuilt for one op's calls first met after a build, per process: only a CuTe DSL kernel (linked into
# the library) needs one; every other kernel and decision is handed over as data (learned.py).
REBUILDS = 16


#: Why a served op's call went to the Python path, in the order the library counts them (``library.py``'s
#: ServedCount, after its first entry: the calls the library took).
MISSES = ("a dtype the library lacks", "a compiled-in size the library lacks", "a tuning key the library lacks",
          "a capture-time call (the kernel's module was not loaded yet)")  # fmt: skip


@dataclass
class ServingCounts:
    """What served an op's calls since registration. ``native``: calls the native libraries ran; ``python``:
    calls they handed to the Python path, by why (``MISSES``); ``capped``: those of them met after the rebuild
    cap (they stay on the Python path); ``rebuilds``: each library built or loaded for the op, as (seconds,
    how: "compiled", "from the cache" or "compiled by an earlier process", what it was built for);
    ``learned``: the kernels and tuning decisions handed to its libraries at run time (no rebuild)."""

    native: int = 0
    python: dict[str, int] = field(default_factory=dict)
    capped: int = 0
    rebuilds: list[tuple[float, str, str]] = field(default_factory=list)
    learned: int = 0

    @property
    def python_calls(self) -> int:
        return sum(self.python.values())


class _Stats:
    """An op's serving state besides its counters in C++: the libraries that serve it, the rebuilds, the misses
    already logged."""

    def __init__(self) -> None:
        self.libraries: list[tuple[Path, int, int]] = []  # (library, the op's index in it, ops in it)
        self.teachers: list[Teacher] = []  # one per library loaded for the op; the last serves
        self.rebuilds: list[tuple[float, str, str]] = []
        self.capped = 0
        self.logged: set[int] = set()


def _stats(op: Any) -> _Stats:
    st = op.__dict__.get("_serving_stats")
    if st is None:
        st = op.__dict__["_serving_stats"] = _Stats()
    return st


def _library_counts(path: Path, index: int, n_ops: int) -> list[int]:
    """An op's counters in one served library: [calls, then one per MISSES entry]."""
    import ctypes

    width = len(MISSES) + 1
    buf = (ctypes.c_int64 * (width * n_ops))()
    _handle(path).opsmith_served_counters(buf, ctypes.c_int64(len(buf)))
    return list(buf[index * width : (index + 1) * width])


_HANDLES: dict[Path, Any] = {}


def _handle(path: Path) -> Any:
    """The loaded library's own handle (dlopen of a loaded library returns it; no second copy loads)."""
    import ctypes

    h = _HANDLES.get(path)
    if h is None:
        h = _HANDLES[path] = ctypes.CDLL(str(path))
    return h


def counts(op: Any) -> ServingCounts:
    """``op``'s ``ServingCounts``: summed over every library that has served it in this process."""
    st = _stats(op)
    calls, misses = 0, [0] * len(MISSES)
    for path, index, n_ops in list(st.libraries):
        got = _library_counts(path, index, n_ops)
        calls += got[0]
        misses = [a + b for a, b in zip(misses, got[1:], strict=True)]
    python = {why: n for why, n in zip(MISSES, misses, strict=True) if n}
    return ServingCounts(native=calls - sum(misses), python=python, capped=st.capped, rebuilds=list(st.rebuilds),
                         learned=sum(t.taught for t in st.teachers))  # fmt: skip


def table() -> str:
    """Every registered op's serving, as one table: what serves it, the calls each path ran, why calls went
    to the Python path, the libraries built for it and their time."""
    from ..registry import registered_ops

    rows = [
        ("op", "serving", "native calls", "Python-path calls (why)", "libraries (s), kernels and decisions learned")
    ]
    for name, op in sorted(registered_ops().items()):
        c = counts(op)
        why = "; ".join(f"{n} {reason}" for reason, n in c.python.items()) + (f" ({c.capped} after the rebuild cap)"
                                                                              if c.capped else "")  # fmt: skip
        libs = f"{len(c.rebuilds)} ({sum(s for s, _, _ in c.rebuilds):.1f})" if c.rebuilds else "0"
        libs += f", {c.learned} learned" if c.learned else ""
        serving = op.serving if op.serving == "native" else f"{op.serving} ({op.serving_why})"
        rows.append((name, serving, str(c.native), f"{c.python_calls}" + (f": {why}" if why else ""), libs))
    widths = [max(len(r[k]) for r in rows) for k in range(5)]
    text = "\n".join("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() for r in rows)
    if served_backend() == "CUDA" and not torch.cuda.is_available():
        text += ("\n(No CUDA GPU in this process: the counts are of kernel launches on CUDA tensors, so they are 0 "
                 "here. A call on CPU tensors ran the op's reference=, Triton's interpreter or fake tensors, or was "
                 "refused; run the script on a GPU machine to see what serves each op.)")  # fmt: skip
    return text


def served_backend() -> str | None:
    """The backend a served library takes over: "CUDA", "CPU" for ``OPSMITH_NATIVE=dry-run`` (opsmith's CPU
    tests: libraries and the Python path record launches instead of making them), None when off."""
    mode = env.NATIVE.get().strip().lower()
    if mode in ("off", "0", "false", "no"):
        return None
    if mode == "dry-run":
        return "CPU"
    if mode not in ("auto", "on", "1", "true", "yes"):
        raise ValueError(f"{env.NATIVE.name}={mode!r} is not one of auto, off, dry-run. Fix: set it to auto or off.")
    return "CUDA"


def _why_python(op: Any, native: bool, backend: str | None) -> str | None:
    """Why ``op`` stays on the Python path, or None when it can be served natively."""
    if not native:
        return "native=False at registration"
    if backend is None:
        return f"{env.NATIVE.name}=off"
    for o in closure([op]):
        why = refusal(o)
        if why is not None:
            return f"{o.record.op_name} cannot be native: {why[0]}"
    if backend == "CUDA" and not torch.cuda.is_available():
        return "no CUDA GPU in this process (the native library serves CUDA tensors)"
    try:
        compiler()
    except ToolchainError as e:
        return str(e).removeprefix("opsmith build: ")
    return None


def attach(op: Any, native: bool = True) -> None:
    """Registration's hand-off: set ``op.serving`` and, where the op can be served natively, make its Python
    implementation callable as ``opsmith_python_<ns>::<name>`` and queue its library."""
    backend = served_backend()
    why = _why_python(op, native, backend)
    op.serving, op.serving_why = "python", why or "the native library is being built in the background"
    if why is not None:
        return
    _define_python_path(op, backend)
    _SERVER.submit(op)


def _define_python_path(op: Any, backend: str) -> None:
    ns, name = python_path_op(op.record).split("::")
    lib = torch.library.Library(ns, "FRAGMENT")
    lib.define(name + op.record.schema)
    impl = op.cpu_kernel if backend == "CPU" else op.eager

    capturing = torch.cuda.is_current_stream_capturing if backend == "CUDA" else (lambda: False)

    def python_path(*args: Any) -> Any:
        out = impl(*args)
        # After the call: a tuning key's decision exists by now. Not for a call made inside a CUDA graph
        # capture because the library's module could not load there: the library holds what it needs.
        if not capturing():
            _SERVER.learn(op)
        _said(op)
        return out

    lib.impl(name, python_path, backend)
    op.python_path_lib = lib


def _warn_failed(op: Any, why: str) -> None:
    """A failed build as a warning (Python's warnings reach a user who configured no logging), from the build's
    thread: the process's warning filters and ``catch_warnings`` apply as to any warning."""
    warnings.warn(f"{op.record.op_name}: its native library failed to build, so the Python path serves it (more "
                  f"host time per call): {why}. Fix: report the cause with the op's declaration; `opsmith serving` "
                  "lists it meanwhile.", RuntimeWarning, stacklevel=2)  # fmt: skip


def _said(op: Any) -> None:
    """After a miss: each kind of miss is logged once for the op; ``op.serving`` says "mixed" where the library
    could not take what the call compiled or tuned (a rebuild must, or the calls stay on the Python path)."""
    st = _stats(op)
    teacher = st.teachers[-1] if st.teachers else None
    if op.serving == "native" and teacher is not None and teacher.refused is not None:
        op.serving = "mixed"
        op.serving_why = (f"{op.native.name if op.native else 'its library'} serves it; calls it holds no kernel or "
                          f"decision for run on the Python path ({teacher.refused})")  # fmt: skip
    if len(st.logged) == len(MISSES) or not st.libraries:
        return
    got = counts(op).python
    taught = teacher is not None and teacher.refused is None
    for k, why in enumerate(MISSES):
        if got.get(why) and k not in st.logged:
            st.logged.add(k)
            log.info("opsmith: %s: a call went to the Python path: %s%s", op.record.op_name, why,
                     "" if k == 3 else "; handed to the library, which serves such calls from now on" if taught
                     else "; a rebuild that holds it is queued")  # fmt: skip


def wait(timeout: float | None = None) -> bool:
    """Block until every native library under way serves its ops (or failed: ``op.serving_why`` says why).
    Returns False when ``timeout`` seconds passed first."""
    return _SERVER.wait(timeout)


class _Server:
    """The background thread and what it is asked to build."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: dict[str, Any] = {}
        self._capped: set[str] = set()  # ops whose misses no longer queue a rebuild (REBUILDS reached)
        self._last = 0.0
        self._busy = False
        self._preparing = False  # a batch taken whose compile has not started (nor was it found ready)
        self._rebuilds: dict[str, int] = {}
        self._thread: threading.Thread | None = None

    def submit(self, op: Any) -> None:
        with self._cond:
            self._pending[op.record.op_name] = op
            self._last = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="opsmith-native", daemon=True)
                self._thread.start()
                atexit.register(self.at_exit)
            self._cond.notify_all()

    def learn(self, op: Any) -> None:
        """A served op's call went to the Python path: hand what it compiled or tuned to the library serving it
        (none loaded yet: the load hands it over); a rebuild only where the library cannot take it."""
        st = _stats(op)
        if not st.teachers or st.teachers[-1].teach():
            return
        if st.teachers[-1].linked:  # a host function linked in: a rebuild that links it
            self.missed(op)

    def missed(self, op: Any) -> None:
        """A served op's call went to the Python path: queue a library that holds what it compiled or tuned.
        A miss while the op's library is being built queues the next one (that build collected its kernels
        before this call made its own)."""
        name = op.record.op_name
        if name in self._pending:  # queued already: one dict lookup per such call until the build starts
            return
        if name in self._capped:
            _stats(op).capped += 1
            return
        with self._cond:
            if name in self._pending or name in self._capped:
                return
            if self._rebuilds.get(name, 0) >= REBUILDS:
                self._capped.add(name)
                log.warning("%s: calls first met after %d native rebuilds stay on the Python path", name, REBUILDS)
                op.serving_why = (f"calls first met after {REBUILDS} native rebuilds stay on the Python path (the "
                                  "rebuild cap); the library serves the rest")  # fmt: skip
                return
            self._rebuilds[name] = self._rebuilds.get(name, 0) + 1
        self.submit(op)

    def wait(self, timeout: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def started(self) -> None:
        """The batch's compile runs in its own session now: an exiting process need not wait for it."""
        with self._cond:
            self._preparing = False
            self._cond.notify_all()

    def at_exit(self) -> None:
        """A process that exits right after registering (a short script, a test run) still leaves its library
        for the next one: skip the quiet period and wait, at most EXIT_WAIT_S, until the compile started. A
        library still compiling its kernels then is abandoned at the next kernel (``build.ABANDON``), and the
        exit waits for the thread to get there: it must not be inside NVRTC when Python finalizes."""
        with self._cond:
            self._last = 0.0
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._pending and not self._preparing, EXIT_WAIT_S)
            if self._preparing:
                ABANDON.set()
                self._cond.wait_for(lambda: not self._preparing, EXIT_ABANDON_S)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending))
                while (quiet := time.monotonic() - self._last) < QUIET_S:
                    self._cond.wait(QUIET_S - quiet)
                batch, self._pending = list(self._pending.values()), {}
                self._busy = self._preparing = True
            try:
                _serve(batch)
            except Abandoned:
                return  # the process is exiting (at_exit): the next process builds the library
            except Exception as e:
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                for op in batch:
                    op.serving_why = f"the native build failed, the Python path serves: {first}"
                    _warn_failed(op, first)
                log.warning("opsmith: the native library of %s failed to build; the Python path serves: %s",
                            ", ".join(op.record.op_name for op in batch), e)  # fmt: skip
            finally:
                with self._cond:
                    self._busy = self._preparing = False
                    self._cond.notify_all()

    def after_fork(self) -> None:
        """A forked child has no thread: it starts again from nothing (its ops keep what was loaded)."""
        self.__init__()  # type: ignore[misc]


_SERVER = _Server()
os.register_at_fork(after_in_child=_SERVER.after_fork)


def _serve(batch: list[Any]) -> None:
    """Build (or take from the cache) the library of ``batch`` and load it."""
    from . import _archs, _libs_dir

    t0 = time.perf_counter()
    backend = served_backend() or "CUDA"
    dry = backend == "CPU"
    ops = closure(batch)
    served = {op.record.op_name for op in ops if getattr(op, "python_path_lib", None) is not None}
    archs = _archs(None)
    text, images, natives, _ = build_source(ops, archs, DEFAULT_DTYPES, served=backend, served_ops=served)
    held = {n.record.op_name: n.held for n in natives}
    key = library_key(text, images, dry_run=dry)
    data, how = _library_bytes(key, text, images, dry)
    _SERVER.started()
    path = _libs_dir() / f"served-{key[:32]}.so"
    write_atomic(path, data)
    try:
        torch.ops.load_library(str(path))
    except OSError:  # verified bytes that do not load (another torch, say): never kept, never retried
        cache = native_cache()
        if cache is not None:
            cache.path_for(key).unlink(missing_ok=True)
        raise
    took = time.perf_counter() - t0
    order = [op for op in ops if op.record.op_name in served]  # the library's counter order (library.py)
    for k, op in enumerate(order):
        st = _stats(op)
        if (path, k, len(order)) not in st.libraries:  # the same contents again: one loaded copy, one counter set
            st.libraries.append((path, k, len(order)))
            st.teachers.append(Teacher(op, _handle(path), str(path), k, held[op.record.op_name], archs))
        # the one reason left for a rebuild: a kernel linked into the library (learned.py hands over the rest)
        st.rebuilds.append((took, how, "registration" if not st.rebuilds else "a linked kernel the last one lacked"))
        op.native = path
        if op.record.op_name not in _SERVER._capped:
            op.serving, op.serving_why = "native", f"{path.name} ({how} in {took:.1f} s)"
    log.info("opsmith: %s served natively by %s (%s in %.1f s)", ", ".join(sorted(served)), path.name, how, took)
    # What the Python path compiled or tuned before this load (the first calls after registration, an earlier
    # library's learning) is handed over now, not at its first miss in the middle of a user's timed loop.
    from ..tuning.decisions import entries

    cached = entries() if any(op.variants.tuner is not None for op in order) else []  # read once per load
    device = None if dry else torch.cuda.current_device()
    for op in order:
        teachers = _stats(op).teachers
        if teachers and teachers[-1].taught == 0:
            teachers[-1].preload(device, cached)  # the tuning cache's decisions, before the op's first call
        _SERVER.learn(op)


def _library_bytes(key: str, text: str, images: list, dry: bool) -> tuple[bytes, str]:
    """The library's bytes: from the cache (verified), else from a compile left by an earlier process, else
    compiled now, in a process of its own so that it finishes (and lands in the cache) if this one exits."""
    cache = native_cache()
    hit = cache.get(key) if cache else None
    if hit is not None:
        return hit[1], "from the cache"
    # processes serving the same ops (a node's ranks) compile the library once: the others wait, then read it
    with cache.claim(key) if cache else contextlib.nullcontext():
        hit = cache.get(key) if cache else None
        if hit is not None:
            return hit[1], "from the cache"
        staging = _staging_dir()
        done = staging / f"{key}.so"
        how = "compiled by an earlier process"
        if not done.is_file():
            _compile_detached(key, text, images, dry, staging)
            how = "compiled"
        data = done.read_bytes()
        if cache is not None and cache.put(key, {"kind": "native-library"}, data):
            done.unlink(missing_ok=True)
    return data, how


def _staging_dir() -> Path:
    from . import _libs_dir

    d = _libs_dir() / "staging"
    d.mkdir(mode=0o700, exist_ok=True)
    return d


def _compile_detached(key: str, text: str, images: list, dry: bool, staging: Path) -> None:
    """Compile into ``staging/<key>.so`` (renamed into place when whole) in a new session: the compiler is not
    this process's child to kill at exit, nor its terminal's to interrupt."""
    work = staging / f"{key}.{os.getpid()}.{threading.get_ident()}"
    entry = None
    for precompiled in (True, False):  # a compile failing with a precompiled header runs again without (pch.py)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(mode=0o700)
        cmd = compile_command(text, images, work, work / "ops.so", dry_run=dry, precompiled=precompiled, make_pch=False)
        script = '"$@" 2> "$W/log" && mv -f "$W/ops.so" "$F" && rm -rf "$W"'
        proc = subprocess.Popen(["sh", "-c", script, "sh", *cmd], env={**os.environ, "W": str(work),
                                "F": str(staging / f"{key}.so")}, start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)  # fmt: skip
        _SERVER.started()
        if proc.wait() == 0:
            if not precompiled and entry is not None:
                pch.discard(entry)
            return
        entry = pch.entry_in(cmd) if precompiled else entry
        if entry is None:
            break
    log_text = (work / "log").read_text(errors="replace") if (work / "log").is_file() else ""
    shutil.rmtree(work, ignore_errors=True)
    raise compile_failed(cmd, proc.returncode, log_text)
