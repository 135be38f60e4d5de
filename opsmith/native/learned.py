"""Learned decisions are data: what the Python path compiles or tunes for a served op after its library was built
(a kernel for a dtype or compiled-in size, a tuning decision made now or read from the tuning cache) is handed to
the loaded library through its C entries (``learned_cpp.py``), and the library serves such calls from then on,
with no C++ rebuild. The library itself holds only what its records say (the guessed dtypes' kernels), so it is
the same library in every process and the next process loads it from the cache.

``Teacher`` is one op's bookkeeping for the library now serving it: what that library holds, and what was handed
over. ``teach`` runs after each call the Python path served (a miss) and once when a library is loaded; it costs
two ``len`` calls when nothing is new.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import Any

import torch

from .. import env
from ..distributed.tuning import in_job
from ..errors import CompileError, LaunchError, SpecError
from . import build
from .cpp import SCALAR_TYPE

__all__ = ["Teacher"]

_TYPES: dict[str, dict[torch.dtype, int]] = {}  # per library: dtype -> its ScalarType number


def _scalar_types(handle: Any, path: str) -> dict[torch.dtype, int]:
    got = _TYPES.get(path)
    if got is None:
        out = (ctypes.c_int64 * len(SCALAR_TYPE))()
        handle.opsmith_served_scalar_types.restype = ctypes.c_int64
        n = handle.opsmith_served_scalar_types(out, ctypes.c_int64(len(out)))
        got = _TYPES[path] = dict(zip(list(SCALAR_TYPE)[:n], list(out)[:n], strict=True))
    return got


def _numbers(values: Sequence[Any], layout: Sequence[str] | None, types: dict[torch.dtype, int]) -> list[int]:
    """A specialization or tuning key as the library's int64 values (``build._spec_cpp`` and ``_key_cpp`` print
    the same numbers as C++ text): a dtype as its ScalarType, None (an optional input passed as None) as -1."""
    out = []
    for k, v in enumerate(values):
        if isinstance(v, torch.dtype):
            out.append(types[v])
        elif v is None and (layout is None or layout[k] == "dtype"):
            out.append(-1)
        else:
            out.append(int(v))
    return out


class Teacher:
    """Hands ``op``'s new kernels and decisions to the library at ``path`` (its ``index`` in the served order),
    which holds ``held`` (config, specialization) from its build."""

    def __init__(self, op: Any, handle: Any, path: str, index: int, held: Sequence[tuple[int, tuple]],
                 archs: Sequence[str]) -> None:  # fmt: skip
        self.op, self.handle, self.index, self.archs = op, handle, index, list(archs)
        self.types = _scalar_types(handle, path)
        self.kernels: set[tuple[int, tuple]] = set(held)
        self.decisions: set[tuple] = set()
        self.seen = (-1, -1)  # (kernels, decisions) the op held at the last teach: nothing new while equal
        self.refused: str | None = None  # why the library could not take an entry
        self.linked = False  # refused because only a rebuild can hold it (the kernel is linked in)
        self.taught = 0
        self._lock = threading.Lock()

    def preload(self, device: int | None, cached: list[tuple[str, dict]]) -> None:
        """At the load: the tuning cache's decisions for the op (its earlier processes' tuning) become the op's,
        so the library holds them, and each decided config's kernel for the specializations the library holds,
        before any call (compiled now, from the compile cache after the first process). ``device``: the CUDA device
        the decisions were made on (None: the CPU of a dry run); ``cached``: the tuning cache's entries, read once
        per load (``tuning.decisions.entries``). Not in a job, whose
        decisions are the job's (``distributed/tuning.py``), nor where tuning is forced."""
        tuner = self.op.variants.tuner
        if tuner is None or env.AUTOTUNE_FORCE.get() or in_job():
            return
        from ..tuning.decisions import stored_for

        with tuner._lock:
            for key, c in stored_for(tuner, device, cached).items():
                tuner.decisions.setdefault(key, c)
        v = self.op.variants
        if v._picks:  # a heuristic differing per config: the held specializations say the default config's value
            return
        for c in sorted(set(tuner.decisions.values())):
            for _, spec in [k for k in self.kernels if k[0] == tuner.default]:
                try:
                    v.kernel(c, spec)
                except (CompileError, SpecError, LaunchError):
                    continue  # a config that does not compile for this specialization: its calls miss, as before

    def teach(self) -> bool:
        """Hand over what is new; False when the library refused an entry (``refused`` says why)."""
        v = self.op.variants
        tuner = v.tuner
        now = (len(v.kernels), len(tuner.decisions) if tuner is not None else 0)
        if now == self.seen:
            return self.refused is None
        with self._lock:
            self.seen = now
            for key in [k for k in list(v.kernels) if k not in self.kernels]:  # list(): another thread may add
                if not self._kernel(*key):
                    return False
                self.kernels.add(key)
                self.taught += 1
            made = dict(tuner.decisions) if tuner is not None else {}
            for key, c in made.items():
                if key in self.decisions:
                    continue
                if not self._decision(key, c):
                    return False
                self.decisions.add(key)
                self.taught += 1
        return self.refused is None

    def _kernel(self, c: int, spec: tuple) -> bool:
        if not build.learns(self.op, serve=True):
            self.refused = "its kernels are linked into the library (a CuTe DSL host function): a rebuild holds them"
            self.linked = True
            return False
        variant, images = build.variant_of(self.op, c, spec, self.archs)
        kinds = [kind for kind, _ in self.op.variants.spec_layout]
        values = _numbers(spec, kinds, self.types) or [0]
        archs = (ctypes.c_int * len(images))(*(a for a, _ in variant.images))
        data = (ctypes.c_char_p * len(images))(*(im.data for im in images))
        sizes = (ctypes.c_size_t * len(images))(*(len(im.data) for im in images))
        jit = dict(variant.jit)
        launch = (ctypes.c_int64 * 4)(*variant.block, variant.shared_mem)
        got = self.handle.opsmith_served_learn_kernel(
            ctypes.c_int64(self.index), ctypes.c_int(c), (ctypes.c_int64 * len(values))(*values),
            ctypes.c_int64(len(values)), variant.symbol.encode(), archs, data, sizes, ctypes.c_int(len(images)), launch,
            ctypes.c_uint64(variant.dropped),
            (ctypes.c_int * 3)(jit.get("max_registers", 0), jit.get("line_info", 0), jit.get("debug", 0)),
        )  # fmt: skip
        if not got:
            self.refused = "the library's table of learned kernels is full"
        return bool(got)

    def _decision(self, key: tuple, c: int) -> bool:
        values = _numbers(key, None, self.types)
        got = self.handle.opsmith_served_learn_decision(ctypes.c_int64(self.index), (ctypes.c_int64 * len(values))(*values),
                                                        ctypes.c_int64(len(values)), ctypes.c_int(c))  # fmt: skip
        if not got:
            self.refused = "the library's table of learned tuning decisions is full"
        return bool(got)
