"""Native op libraries: opsmith ops as a C++ library that serves them without opsmith's Python.

``build(ops, path)`` generates one C++ source from the ops' kernel records (``codegen.py``,
``autograd_cpp.py``, ``library.py``), embeds their kernels, and compiles it against the installed torch
(``build.py``). ``torch.ops.load_library(path)`` in any process, with or without opsmith, then gives the
same ops: eager, ``torch.compile``, ``torch.export`` and AOTInductor packages, CUDA graphs, autograd.
``use(ops)`` serves already registered ops through their native kernels in this process (no Python per
call); by default that happens without asking, in the background (``serving.py``), and ``wait()`` returns
once it has. ``load(path)`` loads a built library into a process that registers nothing itself, with
opsmith's error classes (``error_bridge.py``).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from .. import env
from ..errors import SpecError
from ..progress import step
from . import error_bridge
from .build import DEFAULT_DTYPES, BuildReport, NativeBuildError, build_source, closure, compile_library, library_key
from .serving import ServingCounts, table, wait

__all__ = [
    "BuildReport",
    "NativeBuildError",
    "ServingCounts",
    "build",
    "load",
    "serving_table",
    "source",
    "use",
    "wait",
]

serving_table = table  # every registered op's serving, as one table (native/serving.py)


def _archs(archs: Sequence[str] | None) -> list[str]:
    if archs:
        from ..flavors.cuda_cpp import arch_problem

        for a in archs:
            why = arch_problem(a)
            if why:
                raise SpecError("opsmith build", "archs", f"{why}.", "pass GPU architectures like sm_90.")
        return list(archs)
    from ..flavors.cuda_cpp import default_arch

    return [default_arch()]


def _target(stable: bool) -> str:
    return "stable" if stable else "aten"


def source(ops: Iterable[Any], *, archs: Sequence[str] | None = None,
           dtypes: Sequence[torch.dtype] = DEFAULT_DTYPES, stable: bool = False) -> str:  # fmt: skip
    """The generated C++ of a library for ``ops`` (what ``build`` compiles), for reading."""
    return build_source(list(ops), _archs(archs), dtypes, target=_target(stable))[0]


def build(ops: Iterable[Any], path: str | Path, *, archs: Sequence[str] | None = None,
          dtypes: Sequence[torch.dtype] = DEFAULT_DTYPES, object_only: bool = False,
          dry_run: bool = False, stable: bool = False) -> BuildReport:  # fmt: skip
    """Compile a native library serving ``ops`` (and the ops their backwards call) to ``path``.

    archs: GPU architectures to embed cubins for ("sm_90"); default: this machine's GPU (or
        ``OPSMITH_DEFAULT_ARCH``). PTX ops embed their PTX, which the driver compiles for any newer GPU.
    dtypes: for ops generic over dtypes ({T_x} kernels, Triton), the dtypes embedded besides those this
        process already ran; a guess that does not compile is skipped and listed in the report.
    object_only: compile to an object file without linking (what a machine without a GPU checks).
    dry_run: a library whose calls run everything but the launch, on CPU tensors too, and record each launch
        (config, kernel, grid, block, shared memory, argument bytes; ``torch.ops.opsmith_dry_run.take()`` returns
        them as JSON): what a machine without a GPU compares with the Python path (``eager.make_dry_run``).
    stable: against PyTorch's stable ABI: one file for every torch from 2.10 on, carrying the CUDA, CPU and
        Meta kernels (the Meta kernel for concrete sizes only) and no Autograd kernels; for processes that do
        not register the ops themselves (docs/native.md, "One library for many torch versions").

    Kernels: every specialization this process compiled (call the ops with the dtypes and compiled-in sizes
    you deploy first) under every config the tuning decisions made so far, and the default config, name.
    Raises NativeBuildError (listing every op that cannot be native, and why), or ToolchainError.
    """
    t0 = time.perf_counter()
    path = Path(path)
    if not path.parent.is_dir():
        raise SpecError("opsmith build", "path", f"the directory {str(path.parent)!r} does not exist.",
                        f"create it first (mkdir -p {path.parent}) or write the library elsewhere.")  # fmt: skip
    ops = list(ops)
    with step(f"opsmith build {path.name}: collecting the kernels of {len(ops)} op(s)"):
        text, images, natives, skipped = build_source(ops, _archs(archs), dtypes, target=_target(stable))
    dump = env.DUMP_DIR.get()
    if dump:  # the generated C++, for reading (OPSMITH_DUMP_DIR)
        Path(dump).mkdir(parents=True, exist_ok=True)
        (Path(dump) / f"{path.name}.cpp").write_text(text)
    with step(f"opsmith build {path.name}: compiling {len(images)} kernel image(s) into the library"):
        cached, _ = compile_library(
            text, images, path, object_only=object_only, dry_run=dry_run, target=_target(stable)
        )
    behind = [n.record.op_name for n in natives if stable and n.op.differentiable]
    return BuildReport(path, cached, time.perf_counter() - t0, [n.record.op_name for n in natives],
                       {n.record.op_name: len(n.variants) for n in natives}, skipped, text, behind)  # fmt: skip


def use(ops: Iterable[Any], path: str | Path | None = None, **build_args: Any) -> BuildReport:
    """Serve ``ops`` (registered in this process) through a native library from now on: same op names,
    same results, no Python per call. The library is built (or taken from the cache) at ``path``; by default
    at a path named by its content in opsmith's private cache directory (``native-libs``; a directory that is
    not yours, is writable by others or is a symbolic link is refused, with a warning, for a fresh private
    one), so a later ``use`` whose library differs (new kernels, new tuning decisions) loads a new file
    rather than the handle of the old one. The ops' Python implementations are removed and the library's
    kernels registered in their place (a later library's replace an earlier one's). Not undone; a new
    process starts with the Python ones again."""
    ops = closure(list(ops))
    error_bridge.install()
    if path is None:
        text, images, _, _ = build_source(
            ops, _archs(build_args.get("archs")), build_args.get("dtypes", DEFAULT_DTYPES)
        )
        key = library_key(text, images, object_only=False, dry_run=build_args.get("dry_run", False))
        path = _libs_dir() / f"ops-{key[:32]}.so"
    report = build(ops, path, **build_args)
    for op in ops:
        lib = getattr(op, "impl_lib", None)
        if lib is not None:
            lib._destroy()
            op.impl_lib = None
        with contextlib.suppress(ImportError):  # Inductor's view of a Triton op: the native kernel replaces it
            from torch._library.triton import triton_ops_to_kernels

            triton_ops_to_kernels.pop(op.record.op_name, None)
    torch.ops.load_library(str(report.path))
    for op in ops:
        op.native = report.path
        op.serving, op.serving_why = "native", f"{report.path.name} (opsmith.native.use)"
    return report


def load(path: str | Path) -> None:
    """Load a library made by ``build`` (or ``python -m opsmith build``) into this process, as
    ``torch.ops.load_library(path)`` does, with opsmith's error classes: its refusals raise ``InputError``, its
    autograd refusals ``DifferentiationError`` and its driver failures ``LaunchError``, exactly as the Python path
    does. Loaded with ``torch.ops.load_library`` alone, in a process where opsmith registered nothing, the same
    errors arrive as ValueError and RuntimeError (docs/errors.md)."""
    path = Path(path)
    if not path.is_file():
        raise SpecError("opsmith.native.load", "path", f"{str(path)!r} is not a file.",
                        "pass the path `opsmith build` wrote the library to.")  # fmt: skip
    error_bridge.install()
    torch.ops.load_library(str(path))


def _libs_dir() -> Path:
    """Where ``use`` keeps libraries: the cache's ``native-libs`` when it passes the cache's checks (ours,
    private, no symlink), else a fresh private directory (the warning says why)."""
    from .. import env
    from ..cache import DiskCache

    if not env.DISABLE_DISK_CACHE.get():
        libs = DiskCache(env.cache_dir(), "native-libs")
        if libs.usable(create=True):
            return libs.dir
    return Path(tempfile.mkdtemp(prefix="opsmith-native-libs-"))
