"""Building a native op library: which ops and kernels go in, the compile, the cache.

``collect`` walks the requested ops and every op their backwards call, refuses what cannot be native (all
refusals together, before anything is compiled), and gathers each op's kernels: every config the tuning
decisions and the default name, for every specialization the process compiled (plus, for dtype-generic
ops, the listed dtypes; for Triton, the variant compiled with alignment and divisibility off, which serves
any call). A library serving the process that registered its ops holds only the listed dtypes' kernels of the
default config, the same in every process; what the process compiles or tunes later is handed to it at run time
(``learned.py``). ``compile_library`` writes the source and images, compiles with the host C++ compiler against
the installed torch, and keeps the result in opsmith's disk cache keyed by everything that went in.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import env
from ..cache import DiskCache, make_key
from ..declare.record import KernelRecord
from ..errors import CompileError, LaunchError, SpecError, ToolchainError
from ..flavors.base import likely_spec
from . import pch
from .codegen import NativeOp, Variant
from .cpp import SCALAR_TYPE
from .library import Image, image_label, library_source
from .target_cpp import STABLE_TARGET_VERSION

__all__ = [
    "BuildReport",
    "NativeBuildError",
    "collect",
    "compile_command",
    "compile_failed",
    "compile_library",
    "compiler",
    "library_key",
    "native_cache",
    "refusal",
    "variant_of",
    "write_atomic",
]

DEFAULT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


#: Set at interpreter exit (``serving.py``): a library still compiling its kernels stops before the next one, so
#: no thread is inside NVRTC while Python finalizes. A daemon thread that takes the GIL back after finalization
#: began is unwound through the compiler's C++ frames, and the process aborts ("FATAL: exception not rethrown",
#: seen on an H200 at the end of a script registering 140 ops) or hangs.
ABANDON = threading.Event()


class Abandoned(Exception):
    """The process is exiting before its library's kernels were compiled: nothing is built or kept (the next
    process builds it)."""


class NativeBuildError(SpecError):
    """Some ops cannot be served by a native library; ``refusals`` lists (op, reason, fix) for each."""

    def __init__(self, refusals: list[tuple[str, str, str]]) -> None:
        self.refusals = refusals
        lines = "\n".join(f"  {op}: {why} Fix: {fix}" for op, why, fix in refusals)
        ValueError.__init__(self, f"opsmith build: {len(refusals)} op(s) cannot be native; nothing was built.\n{lines}")


@dataclass
class BuildReport:
    """What a build did: the library, whether it came from the cache, seconds spent, the kernels embedded
    per op, and guessed variants that did not compile (skipped)."""

    path: Path
    cached: bool
    seconds: float
    ops: list[str] = field(default_factory=list)
    kernels: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    source: str = ""
    #: A stable-ABI library's ops whose declared backward it does not carry (it has no Autograd kernels).
    without_autograd: list[str] = field(default_factory=list)

    def summary(self) -> str:
        how = "cache hit" if self.cached else "compiled"
        kernels = sum(self.kernels.values())
        text = f"{self.path}: {len(self.ops)} ops, {kernels} kernels, {how} in {self.seconds:.1f} s"
        if self.without_autograd:
            text += (f"; stable ABI: no Autograd kernels, so {', '.join(self.without_autograd)} do not differentiate "
                     "in a process that loads only this library")  # fmt: skip
        return text


def refusal(op: Any, target: str = "aten") -> tuple[str, str] | None:
    """(why, fix) when ``op`` cannot be native (in a library written against ``target``)."""
    r: KernelRecord = op.record
    if getattr(op, "impl_source", None) is None:
        return ("its implementation is a Python eager_fn.", "declare a geometry (Elementwise, Reduction or Grid) "
                "instead of eager_fn, so the launch is data.")  # fmt: skip
    if r.flavor == "cute" and target != "aten":
        return (f"it is a CuTe DSL host function, which a {'stable-ABI' if target == 'stable' else 'XLA'} library "
                "does not hold yet (its exported launch code links the CUDA runtime; only the ATen target links "
                "it).", "build an ATen library (opsmith build without stable=), or serve it from Python.")  # fmt: skip
    if "-G" in r.compile_options:
        return ("it was compiled with -G: unoptimized device code, for a debugger, which a shipped library must not "
                "hold.", "drop '-G' from its options ('-lineinfo' keeps source lines for profilers).")  # fmt: skip
    if r.launch is None and r.flavor != "cute":  # (a CuTe DSL host function launches itself: no geometry)
        return ("its Custom geometry is a Python function.", "write the launch as Grid(grid=(...), block=(...)) "
                "with size expressions ('cdiv(numel(x), 256)').")  # fmt: skip
    if r.outputs and "meta" in r.outputs[0].shape:
        return ("its outputs are allocated by a Python meta_fn.", "declare outputs=[OutputDecl(...)] with SameAs or "
                "ReduceDims.")  # fmt: skip
    if getattr(op.variants.sources[0], "interpreted", False):
        return ("its Triton kernel runs in the interpreter (TRITON_INTERPRET=1).", "build without TRITON_INTERPRET.")
    bw = getattr(op, "backward", None)
    if bw is not None:
        from ..plan.backward_program import is_program

        if not is_program(bw.fn) and not hasattr(bw.fn, "record"):
            return ("its backward is a Python function.", "write the backward as another opsmith op, or as a program "
                    "of Buffer and Step (docs/autograd.md).")  # fmt: skip
    return None


def closure(ops: Iterable[Any]) -> list[Any]:
    """The ops and every op their backwards call, callees first."""
    from ..declare.spec import Step
    from ..plan.backward_program import is_program

    order: list[Any] = []
    seen: set[str] = set()

    def visit(op: Any) -> None:
        if op.record.op_name in seen:
            return
        seen.add(op.record.op_name)
        bw = getattr(op, "backward", None)
        if bw is not None:
            if is_program(bw.fn):
                for s in bw.fn:
                    if isinstance(s, Step):
                        visit(s.op)
            elif hasattr(bw.fn, "record"):
                visit(bw.fn)
        order.append(op)

    for op in ops:
        if not hasattr(op, "record"):
            raise SpecError(
                "opsmith build", "ops", f"{op!r} is not an opsmith op.", "pass ops that opsmith registered."
            )
        visit(op)
    return order


def _spec_cpp(layout: Sequence[tuple[str, int]], spec: tuple) -> tuple[str, ...]:
    out = []
    for (kind, _), v in zip(layout, spec, strict=True):
        if kind == "dtype":  # None: an optional input passed as None, -1 as the C++ side computes it
            out.append("int64_t(-1)" if v is None else f"static_cast<int64_t>({SCALAR_TYPE[v]})")
        elif kind in ("align", "int"):
            out.append(str(int(v)))
        else:
            out.append(str(int(v)))
    return tuple(out)


def _key_cpp(key: tuple) -> tuple[str, ...]:
    return tuple(
        f"static_cast<int64_t>({SCALAR_TYPE[k]})" if isinstance(k, torch.dtype) else "-1LL" if k is None
        else f"{int(k)}LL" for k in key
    )  # fmt: skip


def learns(op: Any, serve: bool) -> bool:
    """Whether a served library takes ``op``'s later kernels and decisions at run time (``learned.py``), so that
    it holds only what the record says: all but a CuTe DSL host function, which is linked in."""
    return serve and op.record.flavor != "cute"


def _specs(op: Any, dtypes: Sequence[torch.dtype], serve: bool = False) -> tuple[list[tuple], set[tuple]]:
    """(the specializations to embed, those guessed rather than compiled by this process). ``serve``: only the
    guessed ones, none compiled with alignment and divisibility off: a library serving this process is a function
    of the records alone (so the next process finds it in the cache), and what the process compiles is handed to
    it at run time (``learned.py``)."""
    v = op.variants
    if not v.specialized:
        return [()], set()
    layout = v.spec_layout
    seen = (
        [] if learns(op, serve) else list(dict.fromkeys(spec for _, spec in list(v.kernels)))
    )  # list(): a thread adds
    guessed: list[tuple] = []
    if not any(kind in ("static", "scalar") for kind, _ in layout):  # values no call has brought: not guessed
        for dt in dtypes:  # every open dtype the same, pointers aligned, sizes divisible, ints within int32
            guessed.append(likely_spec(layout, dt))
    specs = list(dict.fromkeys(seen + guessed))
    if not serve and any(kind == "wide" for kind, _ in layout):  # a shipped library takes a 64-bit seed too
        specs += [tuple(True if kind == "wide" else x for (kind, _), x in zip(layout, s, strict=True)) for s in specs]
    if not serve and any(kind in ("align", "int") for kind, _ in layout):
        specs += [tuple(False if kind in ("align", "int") else x for (kind, _), x in zip(layout, s, strict=True))
                  for s in specs]  # fmt: skip
    specs = list(dict.fromkeys(specs))
    return specs, set(specs) - set(seen)


def collect(ops: Iterable[Any], archs: Sequence[str], dtypes: Sequence[torch.dtype] = DEFAULT_DTYPES,
            serve: bool = False, target: str = "aten") -> tuple:  # fmt: skip
    """(NativeOps callee first, images, skipped variants) for ``ops``. Raises NativeBuildError listing every
    op that cannot be native. ``serve``: for a library serving this process (``serving.py``); ``target``: what
    the library is written against (``NativeOp.target``)."""
    order = closure(ops)
    refusals = [(op.record.op_name, *why) for op in order if (why := refusal(op, target)) is not None]
    if refusals:
        raise NativeBuildError(refusals)
    images: dict[str, Image] = {}
    natives, skipped = [], []
    for op in order:
        r = op.record
        v = op.variants
        configs = [r.tune_default] if r.tuned else [0]
        decisions: list[tuple[tuple[str, ...], int]] = []
        if r.tuned and not learns(op, serve):  # a served library is told its decisions at run time (learned.py)
            decided = dict(v.tuner.decisions)  # a copy in C: the caller's thread may be adding one
            configs = sorted(set(decided.values()) | {r.tune_default})
            decisions = [(_key_cpp(k), c) for k, c in decided.items()]
        specs, guessed = _specs(op, dtypes, serve)
        variants, held = [], []
        for c in configs:
            for spec in specs:
                if ABANDON.is_set():
                    raise Abandoned(f"{r.op_name}: the process is exiting")
                try:
                    variant, ims = variant_of(op, c, spec, archs)
                except (CompileError, SpecError, LaunchError) as e:
                    if spec not in guessed:
                        raise
                    skipped.append(f"{r.op_name} config {c} {spec}: {str(e).splitlines()[0]}")
                    continue
                for im in ims:
                    images.setdefault(im.digest, im)
                variants.append(variant)
                held.append((c, v.project(c, spec)))
        fallback = not serve and any(kind in ("align", "int") for kind, _ in v.spec_layout)
        natives.append(NativeOp(op, variants, list(v.spec_layout), decisions, fallback, serve, target, held))
    # A library that would refuse every call of an op: said now, not at its first call. (A served library
    # hands such an op's calls to the Python path, whose compiles queue the next library: sizes compiled in per
    # call leave nothing to hold before the first call, and the first library is built at registration.)
    empty = [(n.record.op_name, *_no_kernels(n.op, skipped)) for n in natives if not n.variants and not serve]
    if empty:
        raise NativeBuildError(empty)
    return natives, list(images.values()), skipped


def variant_of(op: Any, c: int, spec: tuple, archs: Sequence[str]) -> tuple[Variant, list[Image]]:
    """Config ``c``'s kernel of ``op`` for ``spec`` as a library holds it, and the images it embeds (compiled
    now where the process has not yet). Raises the compiler's error."""
    v = op.variants
    if op.record.flavor == "cute":  # the DSL's export: host launch code with its cubin, linked in
        ex = v.sources[c].export_c(archs[0], spec)
        im = Image(ex.object, link=True)
        return Variant(c, _spec_cpp(v.spec_layout, spec), ex.entry, [], (0, 0, 0), 0, cute=ex), [im]
    kd = v.kernel(c, spec)
    binaries = [kd.binary_for(a) for a in archs]
    imgs, ims = [], []
    for b in dict.fromkeys(binaries):
        im = Image(b.data)
        ims.append(im)
        arch = 0 if b.fmt == "ptx" else int(b.arch.removeprefix("sm_").rstrip("af"))
        imgs.append((arch, image_label(im)))
    block = kd.block or (1, 1, 1)
    variant = Variant(c, _spec_cpp(v.spec_layout, spec), binaries[0].symbol, imgs, tuple(block), kd.shared_mem,
                      sum(1 << p for p in kd.dropped), binaries[0].jit)  # fmt: skip
    return variant, ims


def _no_kernels(op: Any, skipped: list[str]) -> tuple[str, str]:
    """(why, fix) for an op none of whose kernels could be collected."""
    mine = [line.split(": ", 1)[1] for line in skipped if line.startswith(op.record.op_name + " ")]
    if mine:
        return (f"none of its kernels compiled for the dtypes tried ({mine[0]}).",
                "call the op with the dtypes you deploy before building, or pass dtypes= those it compiles for.")  # fmt: skip
    return ("it holds no compiled kernel: its kernels are compiled per call (sizes compiled in), and this process "
            "has not called it.", "call the op with the shapes and dtypes you deploy (on a GPU) before building, "
            "in the same process (opsmith build MODULE:NAME may name a function that does).")  # fmt: skip


# -- the compile --------------------------------------------------------------------------------------------
def compiler() -> str:
    """The host C++ compiler: ``OPSMITH_CXX``, else c++, g++ or clang++ on PATH. Raises ToolchainError."""
    chosen = env.CXX.get()
    if chosen and not shutil.which(chosen):
        raise ToolchainError(f"opsmith build: {env.CXX.name}={chosen!r} is not an executable compiler. Fix: point it "
                             "at one (e.g. /usr/bin/g++) or unset it to use c++ from PATH.")  # fmt: skip
    cxx = chosen or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        raise ToolchainError("opsmith build: no C++ compiler found (c++, g++ or clang++ on PATH). Fix: install one "
                             f"(apt install g++) or set {env.CXX.name}.")  # fmt: skip
    return cxx


def _cuda_include() -> str:
    """The directory holding cuda.h (the driver API's declarations; the library loads the driver itself)."""
    from ..flavors.cuda_cpp import toolkit_include_dirs

    for d in [*toolkit_include_dirs(), os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/include"]:
        if (Path(d) / "cuda.h").is_file():
            return d
    raise ToolchainError("opsmith build: cuda.h not found (the CUDA driver API header). Fix: pip install "
                         "nvidia-cuda-runtime (or a CUDA toolkit) so cuda.pathfinder finds it, or set CUDA_HOME.")  # fmt: skip


def compile_flags(
    object_only: bool = False, dry_run: bool = False, target: str = "aten"
) -> tuple[list[str], list[str]]:
    """(compile flags, link flags) for a library against the installed torch; the link flags go after the
    source (linkers that drop unused libraries read them in order). ``dry_run``: launches are recorded, not
    made, and CPU tensors pass the device guard (``launch_cpp.py``). ``target`` "stable": against the stable ABI
    from ``TORCH_TARGET_VERSION`` on, linked by soname with no run path: it uses the libtorch of whichever torch
    loads it; "xla": against XLA's FFI headers (``jax.ffi.include_dir()``), linking no torch."""
    from ..compat.torch_private import cxx_flags

    torch_lib = str(Path(torch.__file__).parent / "lib")
    # torch's own extension flags (standard, ABI, defines, include paths: compat.torch_private.cxx_flags), then ours
    flags = [*cxx_flags(), "-O2", "-fvisibility=hidden", "-DTORCH_EXTENSION_NAME=opsmith_native", "-w",
             *(["-DOPSMITH_DRY_RUN"] if dry_run else []), f"-I{_cuda_include()}"]  # fmt: skip
    if target == "stable":
        flags.append(f"-DTORCH_TARGET_VERSION={STABLE_TARGET_VERSION}")
    if target == "xla":
        flags.append(f"-I{_xla_include()}")
    if object_only:
        return [*flags, "-c"], []
    if target == "stable":
        return [*flags, "-shared"], [f"-L{torch_lib}", "-ltorch_cpu", "-lc10", "-ldl"]
    if target == "xla":
        return [*flags, "-shared"], ["-ldl"]
    return [*flags, "-shared"], [
        f"-L{torch_lib}",
        "-lc10",
        "-ltorch_cpu",
        "-ltorch",
        "-ldl",
        *_linker("-rpath", torch_lib),
    ]


# Paths reach the assembler and the linker as arguments of their own: ``-Wa,-I,<dir>`` and ``-Wl,-rpath,<dir>``
# split at every comma, so a cache directory or TMPDIR with a comma in its name broke every build (and a name
# like ``x,--defsym,...`` would have added options).
def _assembler(*args: str) -> list[str]:
    return [x for a in args for x in ("-Xassembler", a)]


def _linker(*args: str) -> list[str]:
    return [x for a in args for x in ("-Xlinker", a)]


def _xla_include() -> str:
    """XLA's FFI headers, as the installed jaxlib ships them."""
    try:
        import jax.ffi
    except ImportError:
        raise ToolchainError("opsmith.jax: building an XLA handler needs JAX's FFI headers. Fix: pip install "
                             "'opsmith[jax]'.") from None  # fmt: skip
    return str(jax.ffi.include_dir())


def _compiler_version(cxx: str) -> str:
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return cxx


def library_key(source: str, images: Sequence[Image], *, object_only: bool = False, dry_run: bool = False,
                target: str = "aten") -> str:  # fmt: skip
    """The content address of a library: its source, images, flags, compiler and torch."""
    flags, link = compile_flags(object_only, dry_run, target)
    if any(i.link for i in images) and not object_only:  # linked with the DSL's runtime: its version is an input
        link = [*link, *_cute_link(), _cute_version()]
    return make_key({"source": hashlib.sha256(source.encode()).hexdigest(), "images": sorted(i.digest for i in images),
                     "compile": flags, "link": link, "compiler": _compiler_version(compiler()),
                     "torch": torch.__version__, "python": sys.version_info[:2]})  # fmt: skip


def compile_command(source: str, images: Sequence[Image], workdir: Path, out: Path, *, object_only: bool = False,
                    dry_run: bool = False, target: str = "aten", precompiled: bool = True,
                    make_pch: bool = True) -> list[str]:  # fmt: skip
    """Write ``source`` and the images it embeds into ``workdir``; the compiler command that makes ``out``.
    ``precompiled``: torch's headers may come precompiled (``pch.py``; ATen libraries, GCC), made here when
    ``make_pch`` and it is time."""
    cxx = compiler()
    flags, link = compile_flags(object_only, dry_run, target)
    ready = _precompiled(source, cxx, target, make_pch) if precompiled else None
    if ready is not None:
        source, entry = ready
        flags = [*flags, f"-I{entry}"]
    src = workdir / "ops.cpp"
    src.write_text(source)
    for im in images:
        (workdir / im.file).write_bytes(im.data)
    objects = [str(workdir / im.file) for im in images if im.link]
    if objects and not object_only:
        link = [*link, *_cute_link()]
    return [cxx, *flags, *_assembler("-I", str(workdir)), str(src), *([] if object_only else objects), "-o",
            str(out), *link]  # fmt: skip


def _precompiled(source: str, cxx: str, target: str, make: bool) -> tuple[str, Path] | None:
    if target != "aten":
        return None
    base = [f for f in compile_flags(False, False, target)[0] if f != "-shared"]  # the dry-run define is GCC's to check
    return pch.prepare(source, cxx, _compiler_version(cxx), base, make=make)


def compile_or_retry(command: Callable[..., list[str]]) -> tuple[list[str], subprocess.CompletedProcess]:
    """Run ``command()``'s compile; where it fails with a precompiled header, compile ``command(precompiled=False)``
    and, when that succeeds, remove the entry: a bad entry costs a compile, never a build. (command, result)."""
    cmd = command()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    entry = pch.entry_in(cmd) if proc.returncode != 0 else None
    if entry is None:
        return cmd, proc
    cmd = command(precompiled=False)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        pch.discard(entry)
    return cmd, proc


def _cute_link() -> list[str]:
    """What a CuTe DSL kernel's exported object links against: the DSL's small static runtime (``_cuda*``
    wrappers over the CUDA runtime) and the CUDA runtime itself, found where the installed toolkit wheels (or
    torch's) put it; an already-loaded ``libcudart.so`` (torch's) satisfies it wherever the library moves."""
    try:
        from cutlass.cute.export import aot_config
    except ImportError:
        raise ToolchainError("opsmith build: a CuTe DSL op's native library links the DSL's runtime. Fix: pip "
                             "install 'opsmith[cute]'.") from None  # fmt: skip
    runtime = Path(aot_config.get_libdir()) / "libcuda_dialect_runtime_static.a"
    from cuda.pathfinder import load_nvidia_dynamic_lib

    cudart = Path(load_nvidia_dynamic_lib("cudart").abs_path)
    return [str(runtime), str(cudart), *_linker("-rpath", str(cudart.parent))]


def _cute_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base"):
        try:
            return f"{dist}=={version(dist)}"
        except PackageNotFoundError:
            continue
    return "cutlass-dsl (version unknown)"


def compile_failed(cmd: Sequence[str], returncode: int, log: str) -> ToolchainError:
    return ToolchainError(f"opsmith build: the C++ compiler failed (exit {returncode}).\n--- command ---\n"
                          f"{' '.join(cmd)}\n--- log ---\n{log[-20000:]}\nFix: a missing header means torch's "
                          "development headers or cuda.h are not installed; anything else is an opsmith bug (please "
                          "report it with this log).")  # fmt: skip


def native_cache() -> DiskCache | None:
    """Where compiled libraries are kept by content (None when the disk cache is off)."""
    return None if env.DISABLE_DISK_CACHE.get() else DiskCache(env.cache_dir(), "native")


def compile_library(source: str, images: Sequence[Image], out: Path, *, object_only: bool = False,
                    use_cache: bool = True, dry_run: bool = False, target: str = "aten") -> tuple[bool, float]:  # fmt: skip
    """Compile ``source`` with ``images`` into ``out`` (a shared library, or an object file). Returns
    (from the cache, seconds). Raises ToolchainError with the compiler's log when it fails."""
    t0 = time.perf_counter()
    key = library_key(source, images, object_only=object_only, dry_run=dry_run, target=target)
    cache = native_cache() if use_cache else None
    hit = cache.get(key) if cache else None
    if hit is None:
        # processes building the same library (a node's ranks) compile it once: the others wait, then read it
        with cache.claim(key) if cache else contextlib.nullcontext():
            hit = cache.get(key) if cache else None
            if hit is None:
                _compile_into(cache, key, source, images, out, object_only, dry_run, target)
                return False, time.perf_counter() - t0
    write_atomic(out, hit[1])
    return True, time.perf_counter() - t0


def _compile_into(cache: DiskCache | None, key: str, source: str, images: Sequence[Image], out: Path,
                  object_only: bool, dry_run: bool, target: str) -> None:  # fmt: skip
    """Compile into ``out``, and into ``cache`` under ``key`` when there is one."""
    with tempfile.TemporaryDirectory(prefix="opsmith-native-") as tmp:
        made = Path(tmp) / ("ops.o" if object_only else "ops.so")

        def command(precompiled: bool = True) -> list[str]:
            return compile_command(source, images, Path(tmp), made, object_only=object_only, dry_run=dry_run,
                                   target=target, precompiled=precompiled)  # fmt: skip

        cmd, proc = compile_or_retry(command)
        if proc.returncode != 0:
            raise compile_failed(cmd, proc.returncode, proc.stderr)
        data = made.read_bytes()
    if cache:
        cache.put(key, {"kind": "native-object" if object_only else "native-library"}, data)
    write_atomic(out, data)


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_source(ops: Iterable[Any], archs: Sequence[str], dtypes: Sequence[torch.dtype] = DEFAULT_DTYPES,
                 served: str | None = None, served_ops: set[str] | None = None, target: str = "aten") -> tuple:  # fmt: skip
    """(source, images, natives, skipped) for ``ops``; ``served``: the backend of a library serving this
    process, for ``served_ops``; ``target``: what it is written against (``library_source``)."""
    natives, images, skipped = collect(ops, archs, dtypes, serve=served is not None, target=target)
    text = library_source(natives, images, torch.__version__, served, served_ops, target)
    return text, images, natives, skipped
