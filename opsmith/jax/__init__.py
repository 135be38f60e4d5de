"""opsmith ops in JAX (an optional extra: ``pip install 'opsmith[jax]'``).

Imported only when used; ``import opsmith`` never imports JAX. What is here so far:

- ``abstract_eval(op, *avals, **scalars)``: an op's output shapes and dtypes for JAX's abstract values, computed
  by the op's own Meta kernel (the record's shape relations, named dimensions and guards: the refusal a call
  would meet in PyTorch, with the same text).
- ``refusal(op)``: why an op cannot be exposed to JAX, or None.

The XLA FFI handler that lowers a call on the GPU (issue 27) is not built yet.
"""

from __future__ import annotations

from .abstract import abstract_eval, refusal, to_jax_dtype, to_torch_dtype

__all__ = ["abstract_eval", "refusal", "to_jax_dtype", "to_torch_dtype"]
