"""opsmith ops in JAX (an optional extra: ``pip install 'opsmith[jax]'``).

Imported only when used; ``import opsmith`` never imports JAX.

- ``jax_op(op)``: the op as a JAX function: one XLA custom call of a handler generated from the op's record
  (``native/xla_cpp.py``: the same guards, variants and tuning decisions as the PyTorch op), ``jax.grad``
  through the declared backward, ``jax.vmap`` over ``"*B"`` groups, in-place inputs as input/output aliases.
- ``cuda_kernel_op``, ``ptx_op``, ``triton_op``: the entry points' arguments, the op registered and wrapped.
- ``abstract_eval(op, *avals, **scalars)``: an op's output shapes and dtypes for JAX's abstract values, computed
  by the op's own Meta kernel (the record's shape relations, named dimensions and guards: the refusal a call
  would meet in PyTorch, with the same text).
- ``refusal(op)``: why an op cannot be exposed to JAX, or None.
- ``handlers(ops)``: the compiled, registered handler library of ops (what ``jax_op`` calls).
"""

from __future__ import annotations

from .abstract import abstract_eval, refusal, to_jax_dtype, to_torch_dtype
from .build import Handlers, handlers
from .op import BatchingError, DryRunWarning, JaxOp, cuda_kernel_op, jax_op, ptx_op, triton_op

__all__ = [
    "BatchingError",
    "DryRunWarning",
    "Handlers",
    "JaxOp",
    "abstract_eval",
    "cuda_kernel_op",
    "handlers",
    "jax_op",
    "ptx_op",
    "refusal",
    "to_jax_dtype",
    "to_torch_dtype",
    "triton_op",
]
