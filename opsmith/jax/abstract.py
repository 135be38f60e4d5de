"""Abstract evaluation of an opsmith op for JAX, from its declaration.

JAX asks, for each call it traces, the shapes and dtypes of the outputs (``jax.ShapeDtypeStruct``). The op's
call plan computes them from the record (``SameAs``, ``ReduceDims``, named dimensions, ``Numel`` outputs) and
refuses what a launch would refuse, so the answer here is that plan run up to the launch on meta tensors of the
abstract values' shapes (``eager.make_checks``): one definition of an op's shapes for PyTorch, its native
library and JAX, and every refusal at trace time with PyTorch's class and text, including those the Meta kernel
cannot see (a launch grid past CUDA's limits, arithmetic that overflows). Meta tensors are dense and aligned, as
XLA's buffers are. A declaration whose outputs come from a Python ``meta_fn`` is refused: that function is
PyTorch code, and the XLA handler must know the shapes from the record alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..declare.record import TensorArg
from ..errors import SpecError
from ..native.xla_cpp import GIVEN

__all__ = ["absent", "abstract_eval", "refusal", "to_jax_dtype", "to_torch_dtype"]

_NUMPY_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.float64: "float64", torch.int8: "int8", torch.int16: "int16", torch.int32: "int32",
                torch.int64: "int64", torch.uint8: "uint8", torch.bool: "bool"}  # fmt: skip
_TORCH = {name: dt for dt, name in _NUMPY_NAMES.items()}


def to_torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a JAX / NumPy dtype (bfloat16 is ml_dtypes', which JAX uses)."""
    import jax.numpy as jnp

    name = jnp.dtype(dtype).name
    if name not in _TORCH:
        raise TypeError(f"opsmith.jax: dtype {name} has no torch counterpart opsmith launches with; use one of "
                        f"{sorted(_TORCH)}.")  # fmt: skip
    return _TORCH[name]


def to_jax_dtype(dtype: torch.dtype) -> Any:
    """The JAX (NumPy) dtype of a torch dtype."""
    import jax.numpy as jnp

    if dtype not in _NUMPY_NAMES:
        raise TypeError(f"opsmith.jax: torch dtype {dtype} has no JAX counterpart here.")
    return jnp.dtype(getattr(jnp, _NUMPY_NAMES[dtype]))


def refusal(op: Any) -> tuple[str, str] | None:
    """(why, fix) when ``op`` cannot be called from JAX, or None. Its XLA handler is generated C++ like its
    native library, so what a native library refuses (a Python meta_fn, eager_fn or Custom geometry, a CuTe DSL
    host function) is refused here with the same reason. In-place inputs are served by input/output aliasing."""
    from ..native.build import refusal as native_refusal

    return native_refusal(op, target="xla")


def _check(op: Any) -> None:
    why = refusal(op)
    if why is not None:
        raise SpecError(op.record.op_name, "jax", f"it cannot be called from JAX: {why[0]}", why[1])


def abstract_eval(op: Any, *args: Any, **scalars: Any) -> tuple:
    """``jax.ShapeDtypeStruct`` per output of ``op`` called with ``args`` (abstract values or arrays for its
    tensor inputs, Python numbers for its scalars, in declaration order; scalars may also come by name).
    Raises what a launch of the op raises in PyTorch (an ``InputError`` naming the op, argument and fix)."""
    import jax

    from ..torchlib.eager import checks_of

    _check(op)
    call = _meta_args(op, args, scalars)
    out = checks_of(op)(*call)
    outs = () if out is None else out if isinstance(out, (tuple, list)) else (out,)
    return tuple(absent() if t is None else jax.ShapeDtypeStruct(tuple(t.shape), to_jax_dtype(t.dtype)) for t in outs)


def absent() -> Any:
    """The result XLA allocates for an optional output the call left out: zero bytes, which its handler never
    binds (the kernel gets a null pointer); ``JaxOp`` returns None in its place."""
    import jax
    import jax.numpy as jnp

    return jax.ShapeDtypeStruct((0,), jnp.uint8)


def _meta_args(op: Any, args: Sequence[Any], scalars: dict) -> list:
    """The op's positional arguments with meta tensors standing for the abstract values."""
    record, missing = op.record, object()
    out, it = [], iter(args)
    for decl in record.inputs:
        if isinstance(decl, TensorArg):
            a = next(it, missing)
            if a is missing:
                raise TypeError(f"{record.op_name}: tensor input {decl.name!r} is missing.")
            given = scalars.pop(GIVEN + decl.name, a is not None)  # opsmith.jax's placeholder for None
            out.append(None if not given else torch.empty(tuple(a.shape), dtype=to_torch_dtype(a.dtype), device="meta"))
        elif decl.name in scalars:
            out.append(scalars.pop(decl.name))
        else:
            v = next(it, missing)
            if v is missing and decl.flag:  # an optional output's request: False unless asked
                v = False
            if v is missing:
                raise TypeError(f"{record.op_name}: scalar {decl.name!r} is missing.")
            out.append(v)
    if scalars or next(it, missing) is not missing:
        raise TypeError(f"{record.op_name}: unexpected arguments ({sorted(scalars) or 'extra positional'}).")
    return out
