"""The kernels of one op: one per tuning config and, for Triton, per call specialization.

A plain op has one config and no specialization: one ``DeviceKernel``, built at registration. A tuned op
has one per config (each define set compiled once, then cached on disk); a Triton op also has one per
specialization tuple (pointer dtypes, 16-byte alignment, divisibility by 16), built on the first call that
needs it. Every one of them shares the op's parameter layout, so they launch through the same code.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence

from .autotune import Tuner
from .flavors.base import Binary, KernelSource
from .geometry import LaunchPlan, to_python
from .launch import DeviceKernel
from .record import KernelRecord, TensorArg

__all__ = ["Variants"]


class Variants:
    def __init__(self, record: KernelRecord, sources: Sequence[KernelSource], first: Binary,
                 param_ctypes: Sequence[str], tuner: Tuner | None, custom: Callable | None = None) -> None:  # fmt: skip
        self.record, self.sources, self.param_ctypes = record, list(sources), list(param_ctypes)
        self.tuner, self.custom = tuner, custom
        self.specialized = hasattr(sources[0], "spec_layout")
        self.spec_layout: list[tuple[str, int]] = sources[0].spec_layout() if self.specialized else []  # type: ignore[attr-defined]
        self.kernels: dict[tuple, DeviceKernel] = {}
        self._lock = threading.Lock()
        self.first = self._kernel(0, (), first) if not self.specialized else None
        if self.first is not None:
            self.kernels[(0, ())] = self.first
        self.grids = [self._grid_fn(p) for p in record.launches] if record.launches else []

    @property
    def simple(self) -> bool:
        """One kernel, fixed at registration: the eager code inlines its launch."""
        return self.first is not None and not self.record.tuned

    def _kernel(self, c: int, spec: tuple, binary: Binary | None = None) -> DeviceKernel:
        src = self.sources[c]
        plan: LaunchPlan | None = self.record.launches[c] if self.record.launches else None
        binary = binary or src.build(self.record.arch, spec)
        return DeviceKernel(self.record.op_name, lambda arch, s=src, sp=spec: s.build(arch, sp), self.param_ctypes,
                            binary, block=plan.block if plan else None, shared_mem=plan.shared_mem if plan else 0)  # fmt: skip

    def kernel(self, c: int, spec: tuple) -> DeviceKernel:
        """The kernel of config ``c`` for specialization ``spec`` (compiled and cached on first use)."""
        kd = self.kernels.get((c, spec))
        if kd is None:
            with self._lock:  # eight threads making the first call compile once
                kd = self.kernels.get((c, spec))
                if kd is None:
                    kd = self.kernels[(c, spec)] = self._kernel(c, spec)
        return kd

    def _grid_fn(self, plan: LaunchPlan | None) -> Callable | None:
        if plan is None:
            return None
        refs = self.refs()
        args = ", ".join(f"t{k}" for k in range(len(self.record.tensor_inputs) + len(self.record.outputs)))
        src = f"lambda {args}: ({', '.join(to_python(g, refs) for g in plan.grid)})"
        return eval(src, {"_prod": math.prod})

    def refs(self) -> dict[str, str]:
        """Geometry refs to the positional names of ``grids[c]`` arguments (tensor inputs, then outputs)."""
        n_in = len(self.record.tensor_inputs)
        refs = {f"i{k}": f"t{k}" for k in range(n_in)}
        refs.update({f"o{k}": f"t{n_in + k}" for k in range(len(self.record.outputs))})
        if not self.record.outputs:  # the geometry spans the first in-place input
            first = next(k for k, a in enumerate(self.record.tensor_inputs) if isinstance(a, TensorArg) and a.mutates)
            refs["o0"] = f"t{first}"
        return refs

    def run(self, c: int, spec: tuple, device: int, geo: tuple, values: tuple) -> None:
        """Launch config ``c`` once (what tuning times). ``geo``: its grid (the kernel knows its block), or
        (grid, block, shared_mem) from a Custom geometry."""
        kd = self.kernel(c, spec)
        if len(geo) == 3:
            kd.launch(device, *geo, *kd.block, kd.shared_mem, *values)
        else:
            kd.launch(device, *geo, *values)
