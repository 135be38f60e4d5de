"""The fake (meta) implementation derived from output shape relations: shapes and dtypes only.

It also applies the dtype, rank and shape rules (and, on static shapes, the 32-bit index limits and the
refusal to fill non-empty outputs from empty inputs), so a wrong input fails while torch.compile or
torch.export traces, not only when the kernel would launch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from .errors import InputError
from .record import KernelRecord, ScalarArg, TensorArg, dtype_from_name

__all__ = [
    "FLOAT_MAX",
    "INT32_MAX",
    "INT_LIMITS",
    "extent_error",
    "float_range_error",
    "int_range_error",
    "large_tensor_error",
    "make_fake",
    "out_shape",
    "scalar_error",
]

INT32_MAX = 2**31 - 1
INT_LIMITS = {"i32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-(2**63), 2**63 - 1),
              "u64": (0, 2**64 - 1), "i16": (-(2**15), 2**15 - 1), "u16": (0, 2**16 - 1),
              "i8": (-128, 127), "u8": (0, 255)}  # fmt: skip
# Largest finite values: a Python float beyond them cannot be packed (float, __half) or becomes inf (bf16).
FLOAT_MAX = {"f32": 3.4028234663852886e38, "f16": 65504.0, "bf16": 3.3895313892515355e38}


def int_range_error(op_name: str, name: str, value: int, ctype: str, hint: str = "") -> InputError:
    lo, hi = INT_LIMITS[ctype]
    return InputError(op_name, name, f"a value in [{lo}, {hi}] for the kernel's {ctype} parameter", f"{value}", hint)


def float_range_error(op_name: str, name: str, value: float, ctype: str) -> InputError:
    m = FLOAT_MAX[ctype]
    return InputError(op_name, name, f"a value in [{-m}, {m}] (or inf, nan) for the kernel's {ctype} parameter",
                      f"{value!r}", "Fix: scale the value, or take it as double in the kernel.")  # fmt: skip


def scalar_error(op_name: str, arg: ScalarArg, value: object) -> InputError | None:
    """Why ``value`` cannot be passed as ``arg``'s C type (None: it can, or it is symbolic)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if arg.ctype in INT_LIMITS and isinstance(value, int):
        lo, hi = INT_LIMITS[arg.ctype]
        return None if lo <= value <= hi else int_range_error(op_name, arg.name, value, arg.ctype)
    m = FLOAT_MAX.get(arg.ctype)
    if m is not None and arg.py_type == "float" and not -m <= value <= m and value == value and abs(value) != math.inf:
        return float_range_error(op_name, arg.name, float(value), arg.ctype)
    return None


def large_tensor_error(op_name: str, name: str, numel: int) -> InputError:
    return InputError(op_name, name, f"at most {INT32_MAX} elements (the kernel declares 32-bit indexing)",
                      f"{numel} elements", "Fix: index with 64 bits in the kernel (long long, or tl.int64 offsets in "
                      "Triton) and declare index_dtype='int64'.")  # fmt: skip


def extent_error(op_name: str, what: str, value: int, limit: int) -> InputError:
    """``what``: the launched size, e.g. ``numel(y)`` (``geometry.describe``)."""
    name = what[what.index("(") + 1 :].split(",")[0].rstrip(")") if "(" in what else what
    return InputError(op_name, name, f"{what} at most {limit}: the launch covers it with more than 2^31 threads "
                      "along one axis, and with 32-bit indexing (index_dtype='int32') the top thread index wraps",
                      f"{value}", "Fix: index with 64 bits in the kernel (long long, or tl.int64 offsets in Triton) "
                      "and declare index_dtype='int64'.")  # fmt: skip


def out_shape(op_name: str, rel: dict, src: torch.Tensor, src_name: str) -> Sequence:
    """Shape of an output with relation ``rel`` to input ``src`` (works on symbolic shapes too)."""
    shape = list(src.shape)
    if "same_as" in rel:
        return shape
    nd = len(shape)
    dims = set()
    for d in rel["dims"]:
        if not -nd <= d < nd:
            raise InputError(
                op_name, src_name, f"a tensor with axis {d} to reduce", f"{nd} dims (shape {tuple(shape)})"
            )
        dims.add(d % nd)
    if rel["keepdim"]:
        return [1 if k in dims else s for k, s in enumerate(shape)]
    return [s for k, s in enumerate(shape) if k not in dims]


def check_tensor(op_name: str, arg: TensorArg, t: torch.Tensor, dtype: torch.dtype | None) -> None:
    if dtype is not None and t.dtype != dtype:
        raise InputError(op_name, arg.name, f"dtype {dtype}", f"{t.dtype}", f"Fix: pass {arg.name}.to({dtype}).")
    if arg.ndim is not None and t.dim() != arg.ndim:
        raise InputError(op_name, arg.name, f"{arg.ndim} dims", f"{t.dim()} dims (shape {tuple(t.shape)})")
    if t.dim() < arg.min_ndim:
        raise InputError(op_name, arg.name, f"at least {arg.min_ndim} dims (the launch geometry or a reduced "
                         "axis needs them)", f"{t.dim()} dims (shape {tuple(t.shape)})")  # fmt: skip


def make_fake(record: KernelRecord) -> Callable:
    op = record.op_name
    positions = [k for k, a in enumerate(record.inputs) if isinstance(a, TensorArg)]
    targs = record.tensor_inputs
    names = [a.name for a in targs]
    dtypes = [dtype_from_name(a.dtype) for a in targs]
    outs = [(o, dtype_from_name(o.dtype)) for o in record.outputs]
    narrow = record.index_dtype == "int32"
    limits = [lim for plan in (record.launches or (record.launch,)) if plan is not None for lim in plan.limits]
    checks = _limit_checks(record, limits if narrow else [])

    scalars = [(k, a) for k, a in enumerate(record.inputs) if isinstance(a, ScalarArg)]

    def fake(*args):
        tensors = [args[k] for k in positions]
        for k, a in scalars:
            bad = scalar_error(op, a, args[k])
            if bad is not None:
                raise bad
        for a, t, dt in zip(targs, tensors, dtypes, strict=True):
            check_tensor(op, a, t, dt)
            if a.dtype_like is not None:
                other = tensors[names.index(a.dtype_like)]
                if t.dtype != other.dtype:
                    raise InputError(op, a.name, f"dtype {other.dtype}, the dtype of '{a.dtype_like}' (the kernel types "
                                     "both with one template parameter)", f"{t.dtype}")  # fmt: skip
        for a, t in zip(targs, tensors, strict=True):
            if a.shape is not None:
                want = tuple(e if e is None or isinstance(e, int) else tensors[e[0]].shape[e[1]] for e in a.shape)
                if t.dim() != len(want) or any(w is not None and s != w for s, w in zip(t.shape, want, strict=True)):
                    raise InputError(op, a.name, f"shape {want}", f"shape {tuple(t.shape)}")
        if narrow:  # static sizes only: a symbolic one would add a guard (and a recompile) to every graph
            for a, t in zip(targs, tensors, strict=True):
                n = t.numel()
                if isinstance(n, int) and n > INT32_MAX:
                    raise large_tensor_error(op, a.name, n)
        results = []
        for o, dt in outs:
            k = o.shape.get("same_as", o.shape.get("reduce"))
            shape = out_shape(op, o.shape, tensors[k], targs[k].name)
            results.append(tensors[k].new_empty(shape, dtype=dt or tensors[o.dtype_from].dtype))
        _static_checks(op, record, tensors, results, checks)
        if not results:
            return None  # in-place only
        return results[0] if len(results) == 1 else tuple(results)

    return fake


def _static(v: object) -> int | None:
    return v if isinstance(v, int) else None


def _limit_checks(record: KernelRecord, limits: list) -> list:
    """(``lambda t, w: size``, limit, label) per 32-bit launch limit, compiled once (evaluating the printed
    expressions per call cost ~100 us of every traced call)."""
    from .geometry import EXPR_GLOBALS, describe, to_python

    n_written = len(record.outputs) or len(record.mutated)
    refs = {f"i{k}": f"t[{k}]" for k in range(len(record.tensor_inputs))}
    refs.update({f"o{k}": f"w[{k}]" for k in range(n_written)}, sm_count="_sms(t[0])")
    names = {f"i{k}": a.name for k, a in enumerate(record.tensor_inputs)}
    names.update({f"o{k}": o.name for k, o in enumerate(record.outputs)})
    if not record.outputs and record.mutated:
        names["o0"] = record.mutated[0].name
    return [(eval(f"lambda t, w: {to_python(expr, refs)}", EXPR_GLOBALS), limit, describe(expr, names))  # our trees
            for expr, limit in limits]  # fmt: skip


def _static_checks(op: str, record: KernelRecord, tensors: list, results: list, checks: list) -> None:
    """What eager refuses on sizes, applied where the sizes are static: non-empty outputs from an empty
    input, and a 32-bit launch whose thread indices would wrap."""
    numels = [_static(t.numel()) for t in tensors]
    if results and any(n == 0 for n in numels) and any(_static(r.numel()) for r in results):
        name = record.tensor_inputs[numels.index(0)].name
        shapes = ", ".join(str(tuple(r.shape)) for r in results)
        raise InputError(op, name, "a non-empty tensor, since the outputs are non-empty "
                         f"(shapes {shapes}) and the kernel cannot fill them from no data", "an empty tensor")  # fmt: skip
    written = results or [t for t, a in zip(tensors, record.tensor_inputs, strict=True) if a.mutates]
    for size, limit, label in checks:
        try:
            v = size(tensors, written)
        except (IndexError, TypeError):
            continue
        if isinstance(v, int) and v > limit:
            raise extent_error(op, label, v, limit)
