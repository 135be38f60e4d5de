"""The kernel record: everything a launch needs, as plain data.

What compiling produces (binary, symbol, the kernel's parameters in its own order, launch geometry as shape
expressions, scalar and extra arguments, output shape relations) is one ``KernelRecord``. It round-trips
through JSON; the Python eager path (``eager.py``) and the C++ op library (``native/``) are both generated
from it. Only ``Custom`` geometries, ``meta_fn`` allocations and user ``eager_fn`` overrides live outside it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import asdict, dataclass, field
from dataclasses import replace as dataclasses_replace
from typing import Any, Literal

import torch

from .geometry import LaunchPlan

__all__ = ["ExtraArg", "KernelRecord", "OutputArg", "Param", "ScalarArg", "TensorArg", "dtype_from_name"]

RECORD_VERSION = 11


def dtype_from_name(name: str | None) -> torch.dtype | None:
    return None if name is None else getattr(torch, name)


@dataclass(frozen=True)
class TensorArg:
    """A tensor input. ``dtype``: torch dtype name the kernel expects, ``None`` for ``void*`` (any)."""

    name: str
    dtype: str | None
    contiguous: Literal["make", "require"] = "make"
    ndim: int | None = None
    min_ndim: int = 0
    mutates: bool = False
    #: Declared shape: per axis an int, None (any size), a dimension name bound in ``KernelRecord.dims``
    #: ("M", or "size(x, -1)" for a DimSize), or "*B" for a group bound in ``KernelRecord.groups``.
    shape: tuple | None = None
    #: Another tensor input whose dtype this one must have (both typed by one template parameter).
    dtype_like: str | None = None
    #: Axes whose strides the kernel is given (``Stride`` extras); the others must be row-major around them.
    strided: tuple[int, ...] = ()
    #: Byte alignment the kernel needs of the data pointer (0: none beyond the element's).
    align: int = 0
    #: Another tensor input whose whole shape this one must have (``SameAs`` of an undeclared input).
    shape_like: int | None = None
    kind: Literal["tensor"] = "tensor"
    #: The call may pass None (``Tensor?``): a null pointer (Triton: None, compiled in); its sizes read 0.
    optional: bool = False
    #: An absent (None) optional input reaches the kernel as "none" (a null pointer; Triton: None compiled in)
    #: or "dummy" (the first tensor input's data pointer, never read).
    absent: Literal["none", "dummy"] = "none"
    #: The size-expression entries of ``shape`` ("2 * N"): (position, the tree, ((name, its tree, the tensor
    #: binding it), ...) for the names it reads).
    exprs: tuple = ()
    #: With ``dtype`` None: the dtypes a call may pass (``InputDecl(dtype={...})``); empty: any the kernel takes.
    dtypes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScalarArg:
    """A by-value scalar input. ``py_type``: "float" | "int" | "bool"; ``ctype``: its C type (signature.py).
    ``static``: named like a Triton ``tl.constexpr``, it is compiled into the kernel, one specialization per
    distinct value (a float by its bits), and is no runtime parameter."""

    name: str
    py_type: str
    ctype: str
    kind: Literal["scalar"] = "scalar"
    static: bool = False
    #: The per-call request for an optional output (``OutputDecl(optional=True)``): ``bool return_<output>=False``
    #: after the other arguments in the schema, read by the call, never passed to the kernel.
    flag: bool = False


@dataclass(frozen=True)
class ExtraArg:
    """A number derived from tensor shapes (``Numel``, ``DimSize``, ``Stride``) or fixed (``Const``), as a
    geometry expression. ``label``: how messages name it ("numel(x)"). ``name``: the kernel parameter it
    fills, when declared. ``static``: compiled in (a Triton constexpr or a C++ template argument), one
    specialization per value, never passed at launch. ``same``: refs of the tensors a shared ``Stride``
    describes; all must have that stride."""

    label: str
    expr: Any
    ctype: str  # "i32" | "i64" | "u32" | "u64" | "f32" | "f64"
    name: str | None = None
    static: bool = False
    same: tuple[str, ...] = ()


@dataclass(frozen=True)
class OutputArg:
    """An output allocated by opsmith. ``shape``: ``{"same_as": k}``, ``{"reduce": k, "dims": [...],
    "keepdim": bool}`` over tensor input k, or ``{"shape": [...], "labels": [...]}``: per axis an int,
    ``["group", name]`` or a size expression over the inputs (``dims.py``); dtype of tensor input
    ``dtype_from``, unless ``dtype`` fixes it."""

    name: str
    shape: dict  # {"meta": True}: allocated by the op's meta_fn
    dtype_from: int
    dtype: str | None = None  # fixed by the kernel's signature when known
    init: int | float | None = None  # every element's value before the kernel runs (None: uninitialized)
    #: An optional output: allocated only when the call's flag (the scalar input at this position) is true;
    #: otherwise the kernel gets a null pointer (Triton: None, compiled in) and the call returns None for it.
    when: int | None = None


@dataclass(frozen=True)
class Param:
    """One runtime kernel parameter, in the kernel's own order: what fills it (``role`` "input" | "extra" |
    "output" and the index among those) and how (``ctype``: "ptr" or the C value type; ``size`` in bytes,
    from the binary). ``name``: the kernel's own parameter name ("" when not known)."""

    name: str
    role: Literal["input", "extra", "output"]
    index: int
    ctype: str
    size: int = 0


@dataclass(frozen=True)
class KernelRecord:
    op_name: str
    kernel_name: str  # as the user wrote it, e.g. "scale<float>"
    symbol: str  # the symbol in the binary (lowered name for templates)
    binary_format: Literal["cubin", "ptx"]
    arch: str
    binary: bytes = field(repr=False)
    inputs: tuple[TensorArg | ScalarArg, ...] = ()
    extras: tuple[ExtraArg, ...] = ()
    outputs: tuple[OutputArg, ...] = ()
    launch: LaunchPlan | None = None  # None: Custom geometry or eager_fn override
    schema: str = ""
    flavor: str = "cuda"  # "cuda" | "ptx" | "cubin" | "triton"
    #: Tuning configs as plain dicts ({"params": {...}, "num_warps": n, "num_stages": n}); one entry when the
    #: op is not tuned. ``binary``/``launch`` are config 0's; ``launches[k]`` is config k's plan.
    configs: tuple[dict, ...] = ({"params": {}, "num_warps": None, "num_stages": None},)
    launches: tuple[LaunchPlan | None, ...] = ()
    #: Tuning-key entries: ["dim", "i<k>", axis, "pow2"|"exact"], ["numel", "i<k>", "pow2"] or ["extra", e,
    #: "exact"] (extra e's value, for a key naming it); dtypes of all tensor inputs are always part of the key.
    tune_key: tuple = ()
    tune_default: int = 0
    #: "int32": tensors of more than 2^31 - 1 elements are refused before launch; "int64": the kernel indexes
    #: with 64 bits.
    index_dtype: str = "int32"
    #: The kernel's runtime parameters in its own order (static extras are compiled in, not passed).
    params: tuple[Param, ...] = ()
    #: Named dimensions: [name, tensor input k, axis] where each is bound (``dims.py``).
    dims: tuple = ()
    #: Groups of dimensions: [name, tensor input k, first axis, axes after the group].
    groups: tuple = ()
    #: Preconditions: {"kind": "divisible"|"at_most"|"at_least"|"one_of", "expr", "value", "label", "why"}.
    requires: tuple = ()
    #: Constexprs computed per call (Triton heuristics): {"name", "exprs": distinct expressions, "pick": per
    #: config the index of its expression}; each is part of the call's specialization.
    heuristics: tuple = ()
    #: The compiler options the kernel was built with, canonical (``flavors/options.py``): ``-use_fast_math``,
    #: ``-maxrregcount=64``; for PTX, what the driver's JIT is given where the kernel loads.
    compile_options: tuple[str, ...] = ()

    @property
    def tensor_inputs(self) -> tuple[TensorArg, ...]:
        return tuple(a for a in self.inputs if isinstance(a, TensorArg))

    def param_ctypes(self) -> list[str]:
        """C types of the kernel's runtime parameters, in its order."""
        return [p.ctype for p in self.params]

    @property
    def static_extras(self) -> tuple[int, ...]:
        """Indices of the extras compiled into the kernel (one specialization per value)."""
        return tuple(k for k, e in enumerate(self.extras) if e.static)

    @property
    def static_scalars(self) -> tuple[int, ...]:
        """Positions among the inputs of the scalars compiled into the kernel (one specialization per value)."""
        return tuple(k for k, a in enumerate(self.inputs) if isinstance(a, ScalarArg) and a.static)

    @property
    def int_scalars(self) -> tuple[int, ...]:
        """Positions among the inputs of the int and bool scalars, which expressions may read as
        ``["var", "s<p>"]`` (a heuristic over a scalar's value); a float is no size and is never read."""
        return tuple(p for p, a in enumerate(self.inputs) if isinstance(a, ScalarArg) and a.py_type in ("int", "bool"))

    @property
    def optional(self) -> tuple[int, ...]:
        """Positions among the tensor inputs of those a call may pass as None."""
        return tuple(k for k, a in enumerate(self.tensor_inputs) if a.optional)

    @property
    def optional_outputs(self) -> tuple[int, ...]:
        """Positions of the outputs a call may leave out (``OutputArg.when``)."""
        return tuple(k for k, o in enumerate(self.outputs) if o.when is not None)

    @property
    def tuned(self) -> bool:
        return len(self.configs) > 1

    @property
    def mutated(self) -> tuple[TensorArg, ...]:
        return tuple(a for a in self.tensor_inputs if a.mutates)

    def to_json(self) -> str:
        d = asdict(self)
        d["binary"] = base64.b64encode(self.binary).decode("ascii")
        d["binary_sha256"] = hashlib.sha256(self.binary).hexdigest()
        d["launch"] = self.launch.to_json() if self.launch else None
        d["launches"] = [p.to_json() if p else None for p in self.launches]
        d["version"] = RECORD_VERSION
        return json.dumps(d, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> KernelRecord:
        d = json.loads(text)
        if d.pop("version", None) != RECORD_VERSION:
            raise ValueError("kernel record of another version; re-register the op to rebuild it.")
        binary = base64.b64decode(d.pop("binary"))
        if hashlib.sha256(binary).hexdigest() != d.pop("binary_sha256"):
            raise ValueError("kernel record binary does not match its checksum.")
        inputs = tuple(TensorArg(**a) if a["kind"] == "tensor" else ScalarArg(**a) for a in d.pop("inputs"))
        launch = LaunchPlan.from_json(d.pop("launch")) if d.get("launch") else None
        d.pop("launch", None)
        d["launches"] = tuple(LaunchPlan.from_json(p) if p else None for p in d.pop("launches", ()))
        d["configs"] = tuple(d.pop("configs"))
        d["tune_key"] = tuple(d.pop("tune_key", ()))
        d["compile_options"] = tuple(d.pop("compile_options", ()))
        for f in ("dims", "groups", "requires", "heuristics"):
            d[f] = tuple(tuple(x) if isinstance(x, list) else x for x in d.pop(f, ()))
        return KernelRecord(
            binary=binary,
            inputs=tuple(_tuples(a) for a in inputs),
            extras=tuple(_tuples(ExtraArg(**e)) for e in d.pop("extras")),
            outputs=tuple(OutputArg(**o) for o in d.pop("outputs")),
            params=tuple(Param(**p) for p in d.pop("params", ())),
            launch=launch,
            **d,
        )


def _tuples(arg: Any) -> Any:
    """JSON gives lists where the record holds tuples (shapes, strided axes, shared refs)."""
    fix = {}
    for f in ("shape", "strided", "same", "dtypes"):
        v = getattr(arg, f, None)
        if isinstance(v, list):
            fix[f] = tuple(v)
    if isinstance(getattr(arg, "exprs", None), list):
        fix["exprs"] = tuple((p, tree, tuple(tuple(n) for n in told)) for p, tree, told in arg.exprs)
    return dataclasses_replace(arg, **fix) if fix else arg
