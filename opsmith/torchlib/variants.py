"""The kernels of one op: one per tuning config and, for Triton, per call specialization.

A plain op has one config and no specialization: one ``DeviceKernel``, built at registration. A tuned op
has one per config (each define set compiled once, then cached on disk); a Triton op also has one per
specialization tuple (pointer dtypes, 16-byte alignment, integers divisible by 16 or equal to 1), built on
the first call that needs it. Every one of them shares the op's parameter layout, so they launch through the
same code (a kernel that compiled an integer in leaves it out of its argument buffer: ``Binary.dropped``).
"""

from __future__ import annotations

import logging
import struct
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .. import env
from ..declare.expr import EXPR_GLOBALS, to_python
from ..declare.geometry import LaunchPlan
from ..declare.record import KernelRecord, TensorArg
from ..errors import InputError, LaunchError
from ..flavors.base import Binary, KernelSource, scalar_from_key
from ..flavors.launch import SMEM_PER_CALL, DeviceKernel, _Params, pack_format
from ..plan.lowering import absent_zero
from ..tuning.autotune import Tuner

__all__ = ["Variants"]


log = logging.getLogger("opsmith.compile")

_MAX_TRAILING = 4  # hidden pointer parameters a compiler may append (Triton 3.6: global and profile scratch)


class Variants:
    def __init__(self, record: KernelRecord, sources: Sequence[KernelSource], first: Binary,
                 param_ctypes: Sequence[str], tuner: Tuner | None) -> None:  # fmt: skip
        self.record, self.sources, self.param_ctypes = record, list(sources), list(param_ctypes)
        self.tuner = tuner
        self.specialized = bool(getattr(sources[0], "specialized", False))
        self.c_launched = hasattr(sources[0], "c_launcher")  # Triton: launched by its own C launcher
        # CuTe DSL: a compiled host function launches its own kernels; ``fast`` holds it per specialization.
        self.host_launched = bool(getattr(sources[0], "host_launched", False))
        self.spec_layout: list[tuple[str, int]] = sources[0].spec_layout() if self.specialized else []  # type: ignore[attr-defined]
        # Heuristics whose expression differs between configs: the call's spec holds one value per distinct
        # expression, and a config's kernel is keyed by its own (``project``).
        self._picks = [(j, record.heuristics[h]["pick"]) for j, (kind, h) in enumerate(self.spec_layout)
                       if kind == "heur" and len(record.heuristics[h]["exprs"]) > 1]  # fmt: skip
        self.kernels: dict[tuple, DeviceKernel] = {}
        self.static_values: dict[tuple, set] = {}  # per compiled-in extra or scalar, the values compiled so far
        #: What the generated eager code reads per call, keyed by the specialization (untuned) or by
        #: (config, specialization): (functions by device, block x, y, z, shared memory, the kernel).
        self.fast: dict[tuple, tuple] = {}
        # One parameter buffer and packer for every kernel: they share the op's layout. Slots past the
        # user's are never written, so a kernel's trailing scratch pointers (Triton: 2) read NULL.
        self.pack = struct.Struct(pack_format(self.param_ctypes)).pack_into
        self.params = _Params(len(self.param_ctypes) + _MAX_TRAILING)
        self._lock = threading.Lock()
        self.first = self._kernel(0, (), first) if not self.specialized else None
        if self.first is not None:
            self.kernels[(0, ())] = self.first
        self.grids = [self._grid_fn(p) for p in record.launches] if record.launches else []
        #: The extras as functions of the tensors (inputs, then outputs), for the flavor's traced implementation;
        #: the heuristics too, per distinct expression.
        self.extra_fns = [self._tensor_fn(self._python(e.expr)) for e in record.extras]
        self.heuristic_fns = [[self._tensor_fn(self._python(e)) for e in h["exprs"]]
                              for h in record.heuristics]  # fmt: skip

    @property
    def simple(self) -> bool:
        """One kernel, fixed at registration: the eager code inlines its launch."""
        return self.first is not None and not self.record.tuned

    def entry(self, key: tuple) -> tuple:
        """``fast[key]``, building the kernel on first use. A flavor with its own C launcher (Triton) gets
        (function handles by device, the launcher or None, its (num_warps, 1, shared memory), the kernel)."""
        c, spec = key if self.record.tuned else (0, key)
        spec = self.project(c, spec)
        kd = self.kernel(c, spec)
        if self.host_launched:
            self.fast[key] = kd
            return kd
        if self.c_launched:
            launch = self.sources[c].c_launcher(spec)  # type: ignore[attr-defined]
            assert kd.block is not None
            e = self.fast[key] = (kd._handles, launch, (kd.block[0] // 32, 1, kd.shared_mem), kd)
            return e
        block = kd.block or (0, 0, 0)  # None: a Custom geometry gives the block per call
        e = self.fast[key] = (kd._functions, *block, kd.shared_mem, kd)
        return e

    def _kernel(self, c: int, spec: tuple, binary: Binary | None = None) -> DeviceKernel:
        src = self.sources[c]
        if self.host_launched:
            return src.compile(self.record.arch, spec)  # type: ignore[attr-defined]
        plan: LaunchPlan | None = self.record.launches[c] if self.record.launches else None
        if binary is None:
            binary = src.build(self.record.arch, spec)
            log.info("%s: config %d, specialization %s: %s in %.2f s", self.record.op_name, c, spec,
                     "read from the disk cache" if binary.from_cache else "compiled", binary.seconds)  # fmt: skip
        if binary.trailing_params > _MAX_TRAILING:
            raise LaunchError(f"{self.record.op_name}: the compiled kernel has {binary.trailing_params} parameters "
                              "after the declared ones; opsmith supports up to {_MAX_TRAILING}.")  # fmt: skip
        smem = (plan.shared_mem if isinstance(plan.shared_mem, int) else SMEM_PER_CALL) if plan else 0
        return DeviceKernel(self.record.op_name, lambda arch, s=src, sp=spec: s.build(arch, sp), self.param_ctypes,
                            binary, block=plan.block if plan else None, shared_mem=smem)  # fmt: skip

    def project(self, c: int, spec: tuple) -> tuple:
        """``spec`` with each per-config heuristic reduced to config ``c``'s value."""
        if not self._picks or not spec:
            return spec
        out = list(spec)
        for j, pick in self._picks:
            if isinstance(out[j], tuple):
                out[j] = out[j][pick[c]]
        return tuple(out)

    def kernel(self, c: int, spec: tuple) -> DeviceKernel:
        """The kernel of config ``c`` for specialization ``spec`` (compiled and cached on first use)."""
        spec = self.project(c, spec)
        kd = self.kernels.get((c, spec))
        if kd is None:
            with self._lock:  # eight threads making the first call compile once
                kd = self.kernels.get((c, spec))
                if kd is None:
                    self._count_static(spec)
                    kd = self.kernels[(c, spec)] = self._kernel(c, spec)
        return kd

    def _count_static(self, spec: tuple) -> None:
        """Sizes compiled into the kernel: each new value is a compile. Warn when one takes many values, and
        refuse past the limit (a dimension that varies per call should be a runtime parameter)."""
        for (kind, k), v in zip(self.spec_layout, spec, strict=False):
            if kind not in ("static", "scalar"):
                continue
            seen = self.static_values.setdefault((kind, k), set())
            if v in seen:
                continue
            arg = self.record.extras[k] if kind == "static" else self.record.inputs[k]
            label = arg.label if kind == "static" else f"scalar '{arg.name}'"

            def shown(x: Any, kind: str = kind, arg: Any = arg) -> Any:  # a float by its value, not its key
                return x if kind == "static" else scalar_from_key(arg.py_type, x)

            if len(seen) >= env.SPECIALIZE_LIMIT.get():
                raise InputError(self.record.op_name, label, f"one of the {len(seen)} values already compiled in "
                                 f"(OPSMITH_SPECIALIZE_LIMIT={env.SPECIALIZE_LIMIT.get()})", f"{shown(v)}",
                                 f"Fix: pass '{arg.name}' as a runtime parameter (not tl.constexpr / "
                                 "a template argument), or bucket the size.")  # fmt: skip
            seen.add(v)
            if len(seen) == env.SPECIALIZE_WARN.get():
                warnings.warn(f"{self.record.op_name}: {label} has taken {len(seen)} values, each compiled into its own "
                              f"kernel ({sorted(shown(x) for x in seen)}). Fix: make it a runtime parameter if it varies per call.",
                              stacklevel=4)  # fmt: skip

    def _grid_fn(self, plan: LaunchPlan | None) -> Callable | None:
        if plan is None:
            return None
        return self._tensor_fn(f"({', '.join(self._python(g) for g in plan.grid)})")

    def _python(self, expr: Any) -> str:
        """``expr`` as Python over the positional tensors, an optional one's sizes 0 when it is None."""
        absent = frozenset(f"i{k}" for k in self.record.optional)
        return to_python(absent_zero(expr, absent) if absent else expr, self.refs())

    def _tensor_fn(self, body: str) -> Callable:
        """``lambda t0, t1, ..., *, s<p>=None ...: body`` over the tensor inputs then the outputs, and by keyword
        the int and bool scalar inputs a heuristic may read (our own expression trees)."""
        args = [f"t{k}" for k in range(len(self.record.tensor_inputs) + len(self.record.outputs))]
        scalars = [f"s{p}=None" for p in self.record.int_scalars]
        return eval(f"lambda {', '.join(args + (['*', *scalars] if scalars else []))}: {body}", EXPR_GLOBALS)

    def refs(self) -> dict[str, str]:
        """Geometry refs to the positional names of ``grids[c]`` arguments (tensor inputs, then outputs)."""
        n_in = len(self.record.tensor_inputs)
        refs = {f"i{k}": f"t{k}" for k in range(n_in)}
        refs["sm_count"] = "_sms(t0)"
        refs.update({f"o{k}": f"t{n_in + k}" for k in range(len(self.record.outputs))})
        refs.update({f"s{p}": f"s{p}" for p in self.record.int_scalars})
        if not self.record.outputs:  # the geometry spans the first in-place input
            first = next(k for k, a in enumerate(self.record.tensor_inputs) if isinstance(a, TensorArg) and a.mutates)
            refs["o0"] = f"t{first}"
        return refs

    def run(self, c: int, spec: tuple, device: int, geo: tuple, values: tuple) -> None:
        """Launch config ``c`` once (what tuning times). ``geo``: its grid (the kernel knows its block), or
        (grid, block, shared_mem) from a Custom geometry."""
        kd = self.kernel(c, spec)
        if not self.host_launched and 0 in geo[:3]:
            return  # an empty grid (outputs holding their init): nothing to launch, nor to time
        if self.host_launched:
            kd.launch(device, *values)
        elif len(geo) == 3:
            kd.launch(device, *geo, *kd.block, kd.shared_mem, *values)
        else:
            kd.launch(device, *geo, *values)
